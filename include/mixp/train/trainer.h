// mixp/train/trainer.h — the training loop of `mixp train`: a model, its data, one precision
// preset; progress on the terminal, periodic evaluation, and a run folder.
//
// The trainer runs the loop of DESIGN.md under the preset (mixp/amp/presets.h): the parameters
// cast as the preset stores them, AdamW with the preset's optimizer precision and moments
// (TrainOptions::optimizer_state may choose the moments' dtype), the forward pass
// in the preset's Autocast scope, the loss scaled by the preset's GradScaler, gradients unscaled
// and clipped to a total norm of 1.0, the step skipped when a scaled gradient overflowed.
//
//   optimizer        classifiers: AdamW, lr 1e-3, PyTorch's defaults (betas 0.9, 0.999,
//                    weight decay 0.01), cosine decay from lr to lr / 100 without warmup.
//                    language models: AdamW as nanoGPT's shakespeare-char: lr 1e-3, betas 0.9,
//                    0.99, weight decay 0.1 on matrices (dims >= 2) and none on vectors (biases,
//                    norms: a second AdamW that the scaler steps alongside), warmup-cosine from
//                    lr to lr / 10 with warmup_steps = min(100, steps / 10).
//   evaluation       classifiers: loss and accuracy on the test set, at the end of every epoch
//                    and every eval_interval steps when that is set. Language models: validation
//                    loss and bits per character (loss / ln 2) every eval_interval steps
//                    (default: steps / 5) and at the end.
//   progress         on a terminal a progress bar redrawn in place (step, loss, samples/s, loss
//                    scale, ETA); otherwise one plain line every log_interval steps.
//
// The run folder (options.out_dir; created; nothing written when empty):
//   metrics.jsonl      one JSON object per logged step: step, epoch, loss (the mean over the
//                      steps since the previous line), lr, scale, samples_per_s, ms (the mean
//                      step time over those steps)
//   summary.json       model, precision, optimizer_state, steps, final train and eval loss,
//                      test_accuracy
//                      (classifiers) or bits_per_char (language models), median step ms,
//                      samples/s, peak memory by tag (peaks reset at the start), final loss
//                      scale, skipped steps (and of them nonfinite_skipped_steps, see
//                      on_nonfinite), and every evaluation
//   model.safetensors  the named parameters and buffers, in their dtypes
//   loss.svg           training loss per logged step and evaluation loss
//   checkpoint-<step>.safetensors  every checkpoint_every steps and when stop_requested()
//                      says so: everything needed to continue bit-exactly (see Checkpoints)
//
// Checkpoints (mixp/io/checkpoint.h names and writes the files; the newest keep_checkpoints
// stay). Tensors: "param/<name>" (the parameters in the preset's dtypes), "buffer/<name>",
// and per optimizer k and parameter i "optim/<k>/<i>/exp_avg", ".../exp_avg_sq",
// ".../master" (fp32 masters of low-precision parameters) and ".../compensation" (Kahan).
// __metadata__ (JSON strings): "format" = "mixp-checkpoint", "version", "step", "config"
// (TrainOptions::config, e.g. the run's RunConfig), "options" (model, precision, the moments'
// dtype, total steps),
// "trainer" (step and epoch counters, the partial metrics window, timing, skipped steps),
// "optimizers" (steps, per-parameter steps, learning rate, stochastic-rounding Philox state),
// "scaler" (GradScaler::state()), "generator" (TrainModel::generator_state()), "loader"
// (DataSource::loader_state()), "schedule" (the step the learning-rate schedule is at) and
// "history" (every StepMetrics and EvalMetrics so far, so that metrics.jsonl and loss.svg
// continue). With `resume`, train() continues from the newest checkpoint of out_dir that
// reads, matches the model (names, shapes and dtypes) and holds only finite floating-point
// values (io::check_finite), skipping others with a message, and
// rewrites metrics.jsonl from the history: same seed and threads, so the run is bitwise the
// one that was not interrupted (DESIGN.md's determinism).
//
// The trainer sees a model through TrainModel and its data through DataSource; the built-in
// models and data sets come through mixp/train/run.h, and tests define small ones.
//
// Example:
//
//   MyModel model;                  // a TrainModel
//   MyData data;                    // a DataSource
//   mixp::train::TrainResult r = mixp::train::train(model, data,
//       {.model_name = "mine", .precision = "amp-bf16", .epochs = 2, .out_dir = "runs/mine"});
//   std::printf("accuracy %.3f\n", *r.test_accuracy);
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixp/data/dataset.h"
#include "mixp/nn/models.h"
#include "mixp/random.h"
#include "mixp/tensor.h"

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
};

enum class Progress : uint8_t {
  automatic = 0,  ///< a bar when the log is a terminal, else lines
  bar = 1,
  lines = 2,
  none = 3,
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

struct TrainOptions {
  std::string model_name = "model";  ///< for the summary and the log
  std::string precision = "fp32";    ///< a preset name (mixp/amp/presets.h)
  /// The dtype of AdamW's moments: "f32" or "bf16" (stochastic rounding); empty: the preset's.
  std::string optimizer_state{};
  int64_t epochs = 1;          ///< classifiers, when steps is 0
  int64_t steps = 0;           ///< > 0: exactly this many steps (language models: needed)
  std::optional<double> lr{};  ///< default 1e-3
  uint64_t seed = 0;           ///< the optimizer's stochastic rounding stream
  int threads = 0;             ///< > 0: mixp::set_num_threads(threads)
  std::string out_dir{};       ///< the run folder; empty: write nothing
  int64_t eval_interval = 0;   ///< steps between evaluations; 0: the default above
  int64_t log_interval = 10;   ///< steps per metrics line
  double clip_norm = 1.0;
  Progress progress = Progress::automatic;
  std::FILE* log = stdout;       ///< progress and evaluation lines; nullptr: silent
  int64_t checkpoint_every = 0;  ///< > 0: a checkpoint in out_dir every this many steps
  int keep_checkpoints = 2;      ///< the newest checkpoints kept, >= 1
  bool resume = false;           ///< continue from out_dir's newest valid checkpoint
  std::string config{};          ///< stored in checkpoints as "config" (run.h: the RunConfig)
  /// > 0: the GradScaler's growth_interval instead of the preset's (tests of resumption with
  /// the scaler mid-growth).
  int64_t scaler_growth_interval = 0;
  /// > 0: the GradScaler's underflow-aware growth (GradScalerOptions::underflow_fraction):
  /// the scale also grows when more than this fraction of the scaled gradients would flush
  /// to zero in fp16, counted every scaler_underflow_check_interval steps.
  double scaler_underflow_fraction = 0.0;
  int64_t scaler_underflow_check_interval = 1;
  /// Called after every step; when it returns true the trainer writes a checkpoint (out_dir
  /// must be set), stops and returns with TrainResult::stopped. The CLI's SIGINT and SIGTERM
  /// handlers set the flag it reads.
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
};

struct StepMetrics {
  int64_t step = 0;   ///< steps done, from 1
  int64_t epoch = 0;  ///< the epoch the step belongs to, from 0
  double loss = 0.0;
  double lr = 0.0;
  double scale = 1.0;
  double samples_per_s = 0.0;
  double ms = 0.0;
};

struct EvalMetrics {
  int64_t step = 0;
  double loss = 0.0;
  std::optional<double> accuracy;       ///< classifiers
  std::optional<double> bits_per_char;  ///< language models
};

struct TrainResult {
  std::string model_name, precision;
  std::string optimizer_state;  ///< the moments' dtype: "f32" or "bf16"
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
  std::map<std::string, int64_t> peak_memory;  ///< bytes by MemoryTag name, and "total"
  double final_loss_scale = 1.0;
  int64_t skipped_steps = 0;    ///< steps without an update: by the scaler or on_nonfinite
  int64_t nonfinite_steps = 0;  ///< of those, the batches on_nonfinite = skip dropped
  bool stopped = false;         ///< stop_requested() ended the run early
  int64_t resumed_from = 0;     ///< the step of the checkpoint resumed, 0 when none
  std::string last_checkpoint;  ///< the path of the last checkpoint written, if any
};

/// The loss the trainer minimizes: classifiers and language models the mean cross entropy of
/// logits [N, C] against labels [N] (or [B, T, V] against [B, T]); regression (deep-mlp) the
/// mean squared error of the output, in f32, against f32 targets of its shape.
Tensor task_loss(const Tensor& output, const Tensor& targets, nn::Task task);

/// The dtype of AdamW's moments under `options`: optimizer_state when set ("f32" or "bf16"),
/// else the preset's. Throws mixp::Error for another name or an unknown preset.
DType optimizer_state_dtype(const TrainOptions& options);

/// Trains `model` on `data` under options. Throws mixp::Error for bad options (an unknown
/// preset, no steps for data without epochs) and for what the ops and files report.
TrainResult train(TrainModel& model, DataSource& data, const TrainOptions& options);

/// summary.json's object, as text.
std::string summary_json(const TrainResult& result);
/// metrics.jsonl's line for one step, without the newline.
std::string metrics_json(const StepMetrics& metrics);

/// A model and its data, made afresh for one run of compare().
struct RunInputs {
  std::unique_ptr<TrainModel> model;
  std::unique_ptr<DataSource> data;
};

struct CompareRow {
  TrainResult result;
  double speed_vs_baseline = 1.0;   ///< samples/s over the baseline's
  double memory_vs_baseline = 1.0;  ///< peak total memory over the baseline's
};

struct CompareResult {
  std::string baseline;  ///< fp32 when it ran, else the first precision
  std::vector<CompareRow> rows;
};

/// Runs each precision with the same options and fresh inputs from `make` (so the same
/// initialization and data order), into out_dir/<precision>/; prints the table to options.log
/// and writes out_dir/compare.json and out_dir/compare.svg (training loss, one curve each).
CompareResult compare(const std::function<RunInputs()>& make,
                      const std::vector<std::string>& precisions, const TrainOptions& options);

/// The table compare() prints.
std::string compare_table(const CompareResult& result);

}  // namespace mixp::train
