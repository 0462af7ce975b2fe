// mixp/train/trainer.h — the training loop of `mixp train`: a model, its data, one precision
// preset, an optimizer and a learning-rate schedule; periodic evaluation, checkpoints, and a
// run folder that holds exactly one run.
//
// The loop is DESIGN.md's, under the preset (mixp/amp/presets.h): the parameters cast as the
// preset stores them; the forward pass in the preset's Autocast scope (and its FP8 scope), once
// per micro-batch with grad_accum > 1; the loss scaled by the preset's GradScaler; gradients
// unscaled, clipped to a total norm of clip_norm (0: not clipped), and applied by the optimizer
// unless a scaled gradient overflowed.
//
//   optimizer        TrainOptions::optimizer: sgd, adam or adamw (the default), with PyTorch's
//                    defaults except: classifiers AdamW weight decay 0.01 on every parameter;
//                    language models (nanoGPT's shakespeare-char) betas (0.9, 0.99) and weight
//                    decay 0.1 on matrices (dims >= 2), none on vectors (biases, norms: a
//                    second optimizer of the same kind that the scaler steps alongside).
//   schedule         TrainOptions::schedule: constant, cosine (from lr to min_lr over the run)
//                    or warmup-cosine (linear warmup, then cosine). Default: classifiers cosine
//                    to lr / 100; language models warmup-cosine to lr / 10 with
//                    warmup_steps = min(100, steps / 10).
//   evaluation       classifiers: loss and accuracy on the test set, at the end of every epoch
//                    and every eval_interval steps when that is set. Language models: validation
//                    loss and bits per character (loss / ln 2) every eval_interval steps
//                    (default: steps / 5) and at the end.
//   divergence       the run stops with mixp::Error (the CLI's exit status 2) when the loss
//                    scale falls below limits.min_loss_scale, when more than
//                    limits.max_skipped_in_a_row steps in a row are skipped, when
//                    on_nonfinite = skip has dropped more than limits.max_skipped_fraction of the
//                    run's steps, or when an evaluation loss is not finite. The message names the
//                    first tensor whose gradient overflowed; no checkpoint is written of the
//                    diverged state, and the last one written stays. A run never writes a
//                    model.safetensors that holds a NaN or an infinity.
//   resources        before the first step, train() measures a forward and backward pass of one
//                    and of two samples, extrapolates the peak memory to the batch size
//                    (DataSource::batch_size), adds what is allocated (parameters, optimizer
//                    state, data), and refuses a run whose estimate exceeds max_memory or the
//                    memory available, with both figures.
//   progress         nothing is printed: TrainOptions::observer receives the start, every step,
//                    every evaluation and every note (mixp/train/progress.h prints them).
//   samples          language models with sample_every > 0: every sample_every steps, a text of
//                    sample_tokens characters (mixp/train/sample.h: temperature 1, all tokens,
//                    the cached decoder, Philox stream kSampleStream of the run's seed) to
//                    TrainObserver::on_sample. It runs in evaluation mode, through an Inference
//                    of its own (its own FP8 state) and its own generator, so the run's weights,
//                    losses and checkpoints are the same bits with and without it.
//
// The run folder (options.out_dir; nothing written when empty) holds one run, under a lock
// (flock of ".lock", which names the process holding it). A new run refuses a folder that holds
// another run's files, naming them, unless options.overwrite, which deletes them first.
//   run.json           the run's id and configuration, written at its start
//   metrics.jsonl      one JSON object per line, each written when it happens:
//                      "type":"step" every log_interval steps: run_id, step, epoch, loss (the
//                      mean over the steps since the previous line; null when any of them had
//                      a non-finite loss), lr, scale, samples_per_s, ms, grad_norm and
//                      grad_norm_max (the total gradient norm before clipping, over the
//                      window's steps whose norm was finite; null when none), skipped,
//                      nonfinite and nonfinite_losses (the window's steps without an update,
//                      with a NaN or infinite loss or gradient, with a NaN or infinite loss);
//                      "type":"eval" at every evaluation: run_id, step, loss, and accuracy or
//                      bits_per_char. Files of older versions have step lines without "type".
//   checkpoint-<step>.safetensors  every checkpoint_every steps and when stop_requested() says
//                      so: every part's state_dict() (see Checkpoints); the newest
//                      keep_checkpoints of this run stay
//   model.safetensors  the named parameters and buffers in their dtypes; its metadata holds the
//                      run id and the whole configuration (options.config)
//   loss.svg           training loss per logged step and evaluation loss (a marker per
//                      evaluation), with the windows that skipped steps or had a non-finite
//                      loss shaded; on a log scale when the losses span over 100x
//   summary.json       written last: the run is finished when it exists. The run id, the
//                      configuration, mixp's version, final losses, accuracy or bits per char,
//                      speed, peak memory by tag and by dtype, the loss scale, skipped steps,
//                      every evaluation
//
// Checkpoints (mixp/io/checkpoint.h: checksummed, versioned, one run id) hold the union of the
// parts' state_dict()s, one prefix each: "model/" (parameters, buffers, the dropout generator),
// "optimizer.<k>/" (mixp/optim/optimizer.h), "schedule/", "scaler/", "fp8/", "loader/" and
// "trainer/" (counters, timing, and the metrics history so that metrics.jsonl and loss.svg
// continue). With `resume`, train() continues from the newest checkpoint of this run that
// verifies and holds only finite values, skipping others with a note: same seed and threads,
// so the run is bitwise the one that was not interrupted (DESIGN.md's determinism).
// Checkpoints of format version 1 (before run ids and checksums) still resume. A run that
// finishes writes a last checkpoint of its final state (unless its last step wrote one), so
// that it can be extended.
//
// Extending (resume with extend and a new `steps`): the run continues to `steps` in all, from
// its newest checkpoint. Everything but the learning-rate schedule is as the longer run would
// have it, and the schedule becomes the one a run of `steps` steps has from the step resumed:
// constant stays constant, so an extended run is bitwise the run asked for `steps` from the
// start; the cosine schedules stretch their cosine to the new total (keeping the run's warmup),
// so the learning rate of the steps that follow rises to the longer run's curve, and the steps
// already taken followed the shorter one: such a run is not the longer run's bits.
//
// Data parallelism (TrainOptions::parallel, with a communicator of N > 1 ranks: mixp/dist/
// communicator.h). Every rank holds the whole model and reads the same batches (the same seed
// and loader state); the batch is the global one, and rank r trains on rows [B r / N,
// B (r + 1) / N) of it, split again into grad_accum micro-batches. Each micro-batch's loss is
// weighted by its share of the global batch, so the sum of the ranks' gradients is the global
// batch's mean gradient. The gradients are summed over the ranks in buckets (GradientReducer:
// 25 MB, the first 1 MB, in reverse parameter order) whose non-blocking all-reduces start
// during backward as each bucket's gradients are final; reduce_dtype f32 (the default) or
// bf16 (sent as bf16, added in fp32, rounded once). The ranks then agree, each step, on the
// loss (summed), on whether any was asked to stop, on each optimizer's found-inf (so all skip
// the same steps and keep one loss scale) and on the FP8 amaxes (their maximum, as Transformer
// Engine reduces them). Batch norm normalizes each rank's share by the share's own statistics
// (as PyTorch DDP without SyncBatchNorm) and its running statistics are averaged over the ranks
// after every step. So every rank holds the same parameters after every step
// (check_replicas proves it with a hash). With `deterministic`, the gradients are summed in
// rank order in their own dtype (dist::ReduceOp::ordered_sum): N ranks then train bitwise the
// parameters of one process with grad_accum N over the same batch (batch norm's running
// statistics excepted: that process updates them once per micro-batch; dropout draws each
// micro-batch's masks from its own part of the generator's counter, 2^36 words apart, whenever
// a step has more than one micro-batch, so that both draw the same masks). Evaluation is shared
// the same way and summed.
// With zero = 1 (ZeRO stage 1), each parameter is cut into N pieces (at multiples of 16384
// elements, so that the gradient norm from the pieces is one process's, bit for bit) and each
// rank's optimizers keep the moments and the fp32 masters (or bf16 masters' low halves) of its
// pieces only, about 1/N of them; the gradients are reduce-scattered so that each rank
// receives its pieces' only; each rank updates its pieces and the parameters are all-gathered
// in their dtype. Deterministic, it is bitwise the same run. Each rank writes its pieces of a
// checkpoint as a shard, which the checkpoint names; a run resumes from them on any N.
// Rank 0 alone writes the run folder (and each rank its shards); the others read it to resume
// (a file system every rank sees). The global batch must divide by N x grad_accum; the ranks
// refuse to start when their configurations differ.
//
// The trainer sees a model through TrainModel and its data through DataSource; the built-in
// models and data sets come through mixp/train/run.h, and tests define small ones.
//
// Example:
//
//   MyModel model;                  // a TrainModel
//   MyData data;                    // a DataSource
//   mixp::train::ProgressPrinter progress(stdout);
//   mixp::train::TrainResult r = mixp::train::train(model, data,
//       {.model_name = "mine", .precision = "amp-bf16", .epochs = 2, .out_dir = "runs/mine",
//        .observer = &progress});
//   std::printf("accuracy %.3f\n", *r.test_accuracy);
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixp/amp/adaptive.h"
#include "mixp/amp/fp8.h"
#include "mixp/amp/presets.h"
#include "mixp/data/dataset.h"
#include "mixp/nn/models.h"
#include "mixp/random.h"
#include "mixp/state_dict.h"
#include "mixp/tensor.h"

namespace mixp::dist {
class Communicator;
}

namespace mixp::train {

/// What the trainer needs of a model. nn::Model has all of it (train/run.h adapts one).
class TrainModel {
 public:
  virtual ~TrainModel() = default;
  /// Classifiers: x f32 [N, 1, H, W] -> logits [N, classes]; language models: tokens i64
  /// [B, T] -> logits [B, T, vocab]; regression: [N, features] -> [N, outputs].
  virtual Tensor forward(const Tensor& x) = 0;
  /// The module behind the model, for diagnostics that hook its layers; nullptr (the default)
  /// for a model that is not an nn::Module.
  virtual nn::Module* module() { return nullptr; }
  virtual nn::Task task() const = 0;
  /// The parameters, by name; the trainer replaces them through the pointers with the
  /// preset's copies (bf16 and fp16 presets).
  virtual std::vector<std::pair<std::string, Tensor*>> named_parameters() = 0;
  virtual std::vector<std::pair<std::string, Tensor*>> named_buffers() = 0;
  /// One flag per named_parameters(): whether it belongs to a normalization layer.
  virtual std::vector<bool> norm_parameter_flags() = 0;
  /// Training (true) or evaluation (false) mode.
  virtual void set_training(bool training) = 0;
  /// The state of the model's own random generator (dropout), for checkpoints; nothing for a
  /// model without one (the default).
  virtual std::optional<PhiloxState> generator_state() const { return std::nullopt; }
  virtual void set_generator_state(const PhiloxState& /*state*/) {}

  /// "param/<name>", "buffer/<name>" and "generator" (when the model has one).
  /// load_state_dict() checks every name, dtype and shape before it copies anything.
  StateDict state_dict();
  void load_state_dict(const StateDict& state);
};

/// The batches of a run.
class DataSource {
 public:
  virtual ~DataSource() = default;
  /// The next training batch, or nothing at the end of an epoch (after which the next call
  /// starts the next epoch). Data without epochs (random windows of text) never ends.
  virtual std::optional<data::Batch> next_train() = 0;
  /// Training batches per epoch; 0 for data without epochs.
  virtual int64_t batches_per_epoch() const = 0;
  /// Calls `visit` on every evaluation batch, the same batches in the same order every time.
  virtual void for_each_eval_batch(const std::function<void(const data::Batch&)>& visit) = 0;
  /// Where the training batches stand, for checkpoints: set_loader_state() of it makes
  /// next_train() serve what would have followed. Nothing (the default) for data that cannot
  /// be checkpointed; train() then refuses checkpoint_every and resume.
  virtual std::optional<data::LoaderState> loader_state() const { return std::nullopt; }
  virtual void set_loader_state(const data::LoaderState& /*state*/) {}
  /// Samples per training batch; 0 (the default) when unknown, which skips train()'s estimate
  /// of the run's peak memory.
  virtual int64_t batch_size() const { return 0; }

  /// loader_state() as "rng", "epoch" and "position"; throws mixp::Error for data that cannot
  /// be checkpointed.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);
};

/// What a step does when its loss or a gradient is a NaN or an infinity and no GradScaler
/// handles it (presets without loss scaling: fp32, amp-bf16, bf16, bf16-sr). With a scaler
/// (amp-fp16, fp16) such a step is always skipped and the scale backs off.
enum class OnNonFinite : uint8_t {
  stop = 0,  ///< throw mixp::Error naming the step, the loss and the first parameter whose
             ///< gradient is not finite, before any update (see TrainOptions::on_nonfinite)
  skip = 1,  ///< drop the batch: no update, counted in TrainResult::skipped_steps
};
/// "stop" or "skip", and back (throws mixp::Error for other names).
const char* name_of(OnNonFinite policy);
OnNonFinite parse_on_nonfinite(const std::string& name);

/// Calls into each training step, for diagnostics (mixp/diag/collector.h): `step` counts the
/// steps done before this one, from 0; `scale` is the loss scale the step uses (1 without
/// scaling), so the gradients seen after backward are the true ones times `scale`.
struct StepHooks {
  std::function<void(int64_t step, double scale)> before_forward{};  ///< before the forward pass
  std::function<void(int64_t step, double scale)> after_backward{};  ///< before unscaling
};

/// The optimizer of a run (see the header comment for the defaults an unset value takes).
struct OptimizerConfig {
  std::string name = "adamw";                    ///< sgd, adam or adamw
  std::optional<double> weight_decay{};          ///< >= 0
  std::optional<std::array<double, 2>> betas{};  ///< adam and adamw
  double eps = 1e-8;                             ///< adam and adamw
  double momentum = 0.0;                         ///< sgd
  bool nesterov = false;                         ///< sgd, with momentum
};

/// The learning-rate schedule of a run (mixp/optim/lr_schedule.h).
struct ScheduleConfig {
  std::string name{};                     ///< constant, cosine or warmup-cosine; empty: default
  std::optional<int64_t> warmup_steps{};  ///< warmup-cosine only; default min(100, steps / 10)
  std::optional<double> min_lr{};         ///< cosine schedules; default lr / 100 or lr / 10
};

/// When a run counts as diverged (see the header comment). Each check is off at its extreme
/// value (0, or a fraction of 1).
struct DivergenceLimits {
  double min_loss_scale = 0x1p-14;     ///< fp16's smallest normal number
  int64_t max_skipped_in_a_row = 25;   ///< steps skipped in a row, by the scaler or on_nonfinite
  double max_skipped_fraction = 0.05;  ///< batches on_nonfinite = skip dropped, of all steps
};

/// One metrics line: the window of steps since the previous one.
struct StepMetrics {
  int64_t step = 0;   ///< steps done, from 1
  int64_t epoch = 0;  ///< the epoch the step belongs to, from 0
  double loss = 0.0;  ///< the window's mean; NaN when any step's loss was not finite
  double lr = 0.0;
  double scale = 1.0;
  double samples_per_s = 0.0;
  double ms = 0.0;
  /// The mean and the largest total gradient norm before clipping, over the window's steps
  /// whose norm was finite; nothing when none was.
  std::optional<double> grad_norm{}, grad_norm_max{};
  int64_t skipped = 0;           ///< steps of the window without an update
  int64_t nonfinite = 0;         ///< steps whose loss or gradient held a NaN or an infinity
  int64_t nonfinite_losses = 0;  ///< steps whose loss was a NaN or an infinity
};

struct EvalMetrics {
  int64_t step = 0;
  double loss = 0.0;
  std::optional<double> accuracy;       ///< classifiers
  std::optional<double> bits_per_char;  ///< language models
};

struct TrainResult;

/// What a run tells while it goes; the trainer prints nothing itself. Every call comes from
/// the thread that called train().
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  /// Before the first step: the model, the preset, the steps of the whole run and the step
  /// it starts from (> 0 when resumed).
  virtual void on_start(const std::string& /*model*/, const std::string& /*precision*/,
                        int64_t /*total_steps*/, int64_t /*first_step*/) {}
  /// After every step. `logged` when the step closed a metrics line (then `metrics` is it);
  /// `loss` is this step's, `eta_s` the estimated seconds left.
  virtual void on_step(int64_t /*step*/, int64_t /*total*/, double /*loss*/,
                       double /*samples_per_s*/, double /*scale*/, double /*eta_s*/,
                       const StepMetrics* /*metrics*/) {}
  virtual void on_eval(const EvalMetrics& /*eval*/) {}
  /// A note: a checkpoint skipped at resume, where the run resumed, why it stopped.
  virtual void on_note(const std::string& /*text*/) {}
  /// TrainOptions::sample_every: the prompt and the text drawn after `step` steps.
  virtual void on_sample(int64_t /*step*/, const std::string& /*text*/) {}
  virtual void on_finish(const TrainResult& /*result*/) {}
};

/// Data parallelism across processes (see the header comment).
struct DataParallelOptions {
  /// The ranks that train together; nullptr, or one of size 1: this process alone. Not owned.
  dist::Communicator* communicator = nullptr;
  std::string reduce_dtype = "f32";  ///< the gradients on the wire: f32 or bf16
  /// Bitwise one process with grad_accum = ranks (needs grad_accum 1 and reduce_dtype f32).
  bool deterministic = false;
  int64_t bucket_bytes = int64_t{25} << 20;       ///< a gradient bucket, > 0
  int64_t first_bucket_bytes = int64_t{1} << 20;  ///< the first bucket (last layers), > 0
  /// After every step, all-gather a hash of every rank's parameters and buffers and stop with
  /// mixp::Error when they differ (the tests turn it on).
  bool check_replicas = false;
  /// 1: ZeRO stage 1, each rank keeps the optimizer state of its 1/N of the parameters (see
  /// the header comment); 0: every rank keeps all of it.
  int zero = 0;
};

struct TrainOptions {
  std::string model_name = "model";  ///< for the summary and the log
  std::string precision = "fp32";    ///< a preset name (mixp/amp/presets.h)
  /// The dtype of Adam's moments: "f32" or "bf16" (stochastic rounding); empty: the preset's.
  std::string optimizer_state{};
  /// How mxfp8 rounds its E8M0 block scales (mixp/amp/fp8.h); other presets ignore it.
  amp::MxScaleRounding mx_scale_rounding = amp::kDefaultMxScaleRounding;
  /// The ingredients an FP4 preset (nvfp4, mxfp4) runs without, for ablations; other presets
  /// refuse any.
  amp::Fp4Ablation fp4_without{};
  int64_t epochs = 1;          ///< classifiers, when steps is 0
  int64_t steps = 0;           ///< > 0: exactly this many steps (language models: needed)
  std::optional<double> lr{};  ///< default 1e-3
  OptimizerConfig optimizer{};
  ScheduleConfig schedule{};
  uint64_t seed = 0;       ///< the optimizer's stochastic rounding stream
  int threads = 0;         ///< > 0: mixp::set_num_threads(threads)
  std::string out_dir{};   ///< the run folder; empty: write nothing
  bool overwrite = false;  ///< a new run may replace another run's files in out_dir
  /// Bytes the run may use at its peak; 0: what the system has available. train() measures
  /// the peak before the first step (see Resources) and refuses a run that would exceed it.
  int64_t max_memory = 0;
  int64_t eval_interval = 0;  ///< steps between evaluations; 0: the default above
  int64_t log_interval = 10;  ///< steps per metrics line
  /// Micro-batches per step (gradient accumulation): each batch is split along its first
  /// dimension into this many parts, each run forward and backward with its loss weighted by
  /// its share of the batch, so the step's gradient is the whole batch's (up to the order of
  /// the sums) at the activation memory of one part. The batch size must divide by it (a last
  /// smaller batch of an epoch is split as evenly as it goes).
  int64_t grad_accum = 1;
  double clip_norm = 1.0;             ///< the total gradient norm; 0: no clipping
  TrainObserver* observer = nullptr;  ///< progress and notes; nullptr: silent
  int64_t checkpoint_every = 0;       ///< > 0: a checkpoint in out_dir every this many steps
  int keep_checkpoints = 2;           ///< the newest checkpoints kept, >= 1
  bool resume = false;                ///< continue from out_dir's newest valid checkpoint
  /// With resume: `steps` may differ from the run's own total (at least the steps done), to
  /// extend a finished or interrupted run (see Extending).
  bool extend = false;
  /// The run's whole configuration as a JSON object (run.h: the RunConfig): stored in run.json,
  /// checkpoints, summary.json and model.safetensors's metadata. Empty: the trainer's own
  /// options.
  std::string config{};
  DivergenceLimits limits{};
  /// > 0: the GradScaler's growth_interval instead of the preset's (tests of resumption with
  /// the scaler mid-growth).
  int64_t scaler_growth_interval = 0;
  /// > 0: the GradScaler's underflow-aware growth (GradScalerOptions::underflow_fraction):
  /// the scale also grows when more than this fraction of the scaled gradients would flush
  /// to zero in fp16, counted every scaler_underflow_check_interval steps.
  double scaler_underflow_fraction = 0.0;
  int64_t scaler_underflow_check_interval = 1;
  /// Called after every step; when it returns true the trainer writes a checkpoint (out_dir
  /// must be set), stops and returns with TrainResult::stopped. The CLI's signal handlers set
  /// the flag it reads.
  std::function<bool()> stop_requested{};
  /// A non-finite loss or gradient without loss scaling. stop: nothing is updated; when
  /// checkpoint_every > 0 the state before the step (the last good one) is written as the
  /// checkpoint of the previous step, so that no checkpoint ever holds the poisoned state and
  /// a resume with skip continues from there. skip: the batch is dropped.
  OnNonFinite on_nonfinite = OnNonFinite::stop;
  /// Called after every backward pass, before unscaling and clipping, with the step (from 1)
  /// and model.named_parameters(): it may read or change their .grad() (scaled by the loss
  /// scale, if any). The tests inject non-finite gradients with it.
  std::function<void(int64_t step, const std::vector<std::pair<std::string, Tensor*>>& parameters)>
      on_gradients{};
  StepHooks hooks{};
  /// Language models: > 0 draws a sample every this many steps (see samples, above).
  int64_t sample_every = 0;
  int64_t sample_tokens = 200;  ///< characters per sample, >= 1
  DataParallelOptions parallel{};
  /// Language models built on nn::Model: token i is character vocabulary[i]; needed for
  /// samples (run.h sets it from the text). Not part of the stored configuration.
  std::string vocabulary{};
};

struct TrainResult {
  std::string model_name, precision;
  std::string optimizer_state;  ///< the moments' dtype: "f32" or "bf16"
  std::string run_id;
  std::string config;  ///< TrainOptions::config, or the trainer's own options
  nn::Task task = nn::Task::classification;
  int64_t steps = 0;
  int64_t epochs = 0;  ///< completed
  std::vector<StepMetrics> log;
  std::vector<EvalMetrics> evals;
  double final_train_loss = 0.0;
  double final_eval_loss = 0.0;
  std::optional<double> test_accuracy;
  std::optional<double> bits_per_char;
  double median_step_ms = 0.0;
  double samples_per_s = 0.0;  ///< training samples over training time (evaluation excluded)
  std::map<std::string, int64_t> peak_memory;           ///< bytes by MemoryTag name, and "total"
  std::map<std::string, int64_t> peak_memory_by_dtype;  ///< bytes by dtype name (those used)
  double final_loss_scale = 1.0;
  int64_t skipped_steps = 0;        ///< steps without an update: by the scaler or on_nonfinite
  int64_t nonfinite_steps = 0;      ///< of those, the batches on_nonfinite = skip dropped
  bool stopped = false;             ///< stop_requested() ended the run early
  int64_t resumed_from = 0;         ///< the step of the checkpoint resumed, 0 when none
  std::string last_checkpoint;      ///< the path of the last checkpoint written, if any
  int world_size = 1;               ///< the ranks that trained together
  std::string reduce_dtype{};       ///< their gradients' dtype on the wire; empty for one process
  bool deterministic = false;       ///< DataParallelOptions::deterministic
  int zero_stage = 0;               ///< 1 when the optimizer state was partitioned (ZeRO-1)
  int64_t bytes_sent_per_step = 0;  ///< by each rank, in the last step
  /// Under an FP4 recipe: the share of the Linear layers' training FLOPs that ran in each
  /// format ("fp4", "fp8", "bf16"); empty under other presets.
  std::map<std::string, double> linear_flop_shares{};
  /// Adaptive precision (auto-fp8, auto-fp4): every move of a layer's format, and the format
  /// each Linear layer ended in, in model order.
  std::vector<amp::PrecisionDecision> precision_decisions{};
  std::vector<std::pair<std::string, std::string>> layer_formats{};
};

/// The loss the trainer minimizes: classifiers and language models the mean cross entropy of
/// logits [N, C] against labels [N] (or [B, T, V] against [B, T]); regression (deep-mlp) the
/// mean squared error of the output, in f32, against f32 targets of its shape.
Tensor task_loss(const Tensor& output, const Tensor& targets, nn::Task task);

/// The dtype of Adam's moments under `options`: optimizer_state when set ("f32" or "bf16"),
/// else the preset's. Throws mixp::Error for another name or an unknown preset.
DType optimizer_state_dtype(const TrainOptions& options);

/// Throws mixp::Error naming the first option out of range, before anything is written.
void validate_options(const TrainOptions& options);

/// Trains `model` on `data` under options. Throws mixp::Error for bad options (an unknown
/// preset, no steps for data without epochs), for a run folder in use or holding another run,
/// for a diverged run, and for what the ops and files report.
TrainResult train(TrainModel& model, DataSource& data, const TrainOptions& options);

/// summary.json's object, as text.
std::string summary_json(const TrainResult& result);
/// metrics.jsonl's line for one step, without the newline.
std::string metrics_json(const StepMetrics& metrics, const std::string& run_id = "");
/// metrics.jsonl's line for one evaluation, without the newline.
std::string metrics_json(const EvalMetrics& eval, const std::string& run_id = "");

/// mixp's version, "0.1.0".
const char* version();

/// A model and its data, made afresh for one run of compare().
struct RunInputs {
  std::unique_ptr<TrainModel> model;
  std::unique_ptr<DataSource> data;
};

struct CompareRow {
  std::string precision;
  TrainResult result;
  std::string error;                ///< the reason it failed; empty when it finished
  std::string run_dir{};            ///< compare.json's run_dir; empty: the precision
  double speed_vs_baseline = 1.0;   ///< samples/s over the baseline's
  double memory_vs_baseline = 1.0;  ///< peak total memory over the baseline's
  bool failed() const { return !error.empty(); }
};

struct CompareResult {
  std::string baseline;  ///< fp32 when it finished, else the first that finished
  std::vector<CompareRow> rows;
  bool stopped = false;  ///< stop_requested() ended it; the rows hold what finished
};

/// Runs each precision with the same options and fresh inputs from `make` (so the same
/// initialization and data order), into out_dir/<precision>/, then writes out_dir/compare.json
/// and out_dir/compare.svg (training loss, one curve each). A precision that fails is a row
/// with its error, and the others go on. With options.resume, a precision whose folder holds a
/// finished run is read back, one with checkpoints resumes, and the others start. When
/// stop_requested() stops a run, the table holds what finished and compare returns.
CompareResult compare(const std::function<RunInputs()>& make,
                      const std::vector<std::string>& precisions, const TrainOptions& options);

/// compare()'s table, compare.json and compare.svg rebuilt from finished run folders (their
/// summary.json and metrics.jsonl), without training, into out_dir. Rows are labelled by
/// precision, or by folder name when two runs share one. Throws mixp::Error naming every
/// folder that is not a finished run (no summary.json), before writing anything.
CompareResult compare_finished(const std::vector<std::string>& run_dirs,
                               const std::string& out_dir);

/// The table of compare()'s result.
std::string compare_table(const CompareResult& result);

}  // namespace mixp::train
