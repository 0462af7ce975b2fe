// The loop of train(): DESIGN.md's step, the metrics it records, evaluation and divergence.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/dist/communicator.h"
#include "mixp/error.h"
#include "mixp/io/safetensors.h"
#include "mixp/memory.h"
#include "mixp/ops.h"
#include "mixp/optim/clip_grad.h"
#include "mixp/train/sample.h"
#include "train/memory_estimate.h"
#include "train/optimizer_setup.h"
#include "train/report.h"
#include "train/trainer_impl.h"

namespace mixp::train {
namespace {

using Clock = std::chrono::steady_clock;

// Each micro-batch of a step draws its dropout masks from its own 2^36 words of the generator's
// counter: the same masks whichever process computes it.
constexpr uint64_t kMicroBatchWords = uint64_t{1} << 36;

PhiloxState micro_batch_generator(PhiloxState base, int64_t index) {
  base.offset += uint64_t(index) * kMicroBatchWords;
  return base;
}

void check_micro_batch_draws(const PhiloxState& base, int64_t index, const PhiloxState& now) {
  const uint64_t drawn = now.offset - micro_batch_generator(base, index).offset;
  MIXP_CHECK(drawn <= kMicroBatchWords, "one micro-batch drew ", drawn,
             " random words for dropout, more than the ", kMicroBatchWords,
             " it has; use more micro-batches (--grad-accum)");
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string number_text(double v) {
  std::ostringstream text;
  text << v;
  return text.str();
}

}  // namespace

TrainResult Trainer::run() {
  model_.set_training(true);
  if (parallel_) parallel_->check_same_configuration(config_);
  check_memory();
  open_folder();
  if (o_.resume) resume();
  if (writes()) write_metrics_history();
  observer_.on_start(o_.model_name, preset_.name, total_, c_.step);
  const bool checkpointing = o_.checkpoint_every > 0;
  bool checkpoint_due = false;
  while (c_.step < total_) {
    Before before;
    if (checkpointing)
      before = {.loader = data_.state_dict(), .generator = model_.generator_state()};
    const std::optional<data::Batch> batch = data_.next_train();
    if (!batch) {
      MIXP_CHECK(++c_.empty_in_a_row < 2, "the training data yielded no batch");
      ++c_.epoch;
      if (task_ != nn::Task::language_model && c_.step > 0) run_eval();
      continue;
    }
    c_.empty_in_a_row = 0;
    const StepOutcome outcome = step(*batch, before);
    record(outcome);
    check_divergence(outcome);
    if (eval_every_ > 0 && c_.step % eval_every_ == 0) run_eval();
    sample_if_due();
    // The ranks agreed on it during the step, so that all stop after the same one.
    const bool stop = parallel_ ? outcome.stop : o_.stop_requested && o_.stop_requested();
    // A checkpoint falls due every checkpoint_every steps, and waits for a step that updated:
    // one taken among skipped steps would hold a run on its way to diverging as the last good
    // state.
    checkpoint_due = checkpoint_due || (checkpointing && c_.step % o_.checkpoint_every == 0);
    if (stop || (checkpoint_due && c_.skipped_in_a_row == 0)) {
      save_checkpoint(nullptr);
      checkpoint_due = false;
    }
    if (stop) {
      TrainResult r = result();
      r.stopped = true;
      observer_.on_finish(r);
      return r;
    }
  }
  // The final state, so that the run can be extended; before the final evaluation, which a
  // longer run would not have made at this step.
  if (!o_.out_dir.empty() && data_.loader_state() && checkpoint_step_ != c_.step)
    save_checkpoint(nullptr);
  run_eval();
  TrainResult r = result();
  const EvalMetrics& last = c_.evals.back();
  r.final_eval_loss = last.loss;
  r.test_accuracy = last.accuracy;
  r.bits_per_char = last.bits_per_char;
  const memory::Stats stats = memory::stats();
  for (int t = 0; t < kMemoryTagCount; ++t)
    r.peak_memory[name_of(MemoryTag(t))] = stats.peak(MemoryTag(t));
  r.peak_memory["total"] = stats.peak_total;
  for (int d = 0; d < kDTypeCount; ++d)
    if (stats.peak(DType(d)) > 0) r.peak_memory_by_dtype[name_of(DType(d))] = stats.peak(DType(d));
  if (writes()) {
    metrics_.close();
    write_finished_run(o_.out_dir, model_, r);
  }
  observer_.on_finish(r);
  return r;
}

// Refuses a run whose peak would not fit, before anything is written.
void Trainer::check_memory() {
  const int64_t parts = o_.grad_accum * (parallel_ ? parallel_->size() : 1);
  const std::optional<MemoryEstimate> e = estimate_memory(model_, data_, preset_, params_, parts);
  if (!e) return;
  const int64_t limit = o_.max_memory > 0 ? o_.max_memory : available_memory();
  MIXP_CHECK(limit <= 0 || e->total() <= limit, "this run needs ", e->describe(),
             ", more than the ", bytes_text(limit), " ",
             o_.max_memory > 0 ? "of --max-memory" : "this machine has available",
             ". Lower --batch, or train a smaller model");
}

// DESIGN.md's step on one batch: forward under the preset, backward of the scaled loss,
// unscale, clip, and the update unless the scaler or on_nonfinite drops it.
StepOutcome Trainer::step(const data::Batch& batch, const Before& before) {
  const Clock::time_point start = Clock::now();
  const double lr = schedule_->lr(c_.step);
  for (auto& g : optimizers_) g.optimizer->set_learning_rate(lr);
  StepOutcome out;
  out.scale = scaler_.get_scale();
  if (o_.hooks.before_forward) o_.hooks.before_forward(c_.step, out.scale);
  out.loss = forward_backward(batch);
  if (parallel_) {
    const DataParallel::Agreement agreed =
        parallel_->reduce_gradients(out.loss, o_.stop_requested && o_.stop_requested());
    out.loss = agreed.loss;
    out.stop = agreed.stop;
  }
  if (o_.on_gradients) o_.on_gradients(c_.step + 1, named_params_);
  if (o_.hooks.after_backward) o_.hooks.after_backward(c_.step, out.scale);
  if (zero_) zero_->attach_gradients(parallel_->reducer());
  for (auto& g : optimizers_) scaler_.unscale(*g.optimizer);
  if (parallel_ && scaler_.is_enabled()) parallel_->agree_on_found_inf(scaler_);
  const double max_norm = o_.clip_norm > 0 ? o_.clip_norm : std::numeric_limits<double>::infinity();
  const double norm = zero_ ? clip_pieces(max_norm) : optim::clip_grad_norm(params_, max_norm);
  out.grad_norm = norm;
  // Without a scaler nothing else would keep a NaN or an infinity out of the weights.
  bool nonfinite = !scaler_.is_enabled() && !(std::isfinite(out.loss) && std::isfinite(norm));
  if (parallel_ && !scaler_.is_enabled()) nonfinite = parallel_->any(nonfinite);
  if (nonfinite && o_.on_nonfinite == OnNonFinite::stop) stop_nonfinite(out.loss, norm, before);
  out.dropped = nonfinite;
  out.applied = !nonfinite;
  if (out.applied)
    for (auto& g : optimizers_) out.applied = scaler_.step(*g.optimizer) && out.applied;
  if (!out.applied && c_.skipped_in_a_row == 0) {
    std::string where = first_nonfinite_gradient(named_params_);
    if (where.empty()) where = "the loss is " + number_text(out.loss);
    c_.streak_overflow = "at step " + std::to_string(c_.step + 1) + ", " + where;
    if (c_.first_overflow.empty()) c_.first_overflow = c_.streak_overflow;
  }
  scaler_.update();
  if (fp8_) {
    if (parallel_) parallel_->agree_on_amax(*fp8_);
    update_low_precision_state();
  }
  for (auto& g : optimizers_) g.optimizer->zero_grad();
  if (zero_ && out.applied) zero_->gather_parameters();
  if (parallel_) {
    parallel_->average_buffers(model_);
    if (o_.parallel.check_replicas) parallel_->check_replicas(model_, c_.step + 1);
    parallel_->end_step();
  }
  out.samples = batch.x.size(0);
  out.ms = ms_since(start);
  return out;
}

// The FP8/FP4 state's end of step. Under adaptive precision the ranks first agree on the
// measurements (each layer's worst over the ranks), so that all make the same moves; each move
// is said.
void Trainer::update_low_precision_state() {
  amp::AdaptivePrecision* adaptive = amp::adaptive_of(*fp8_);
  if (adaptive && parallel_ && adaptive->measure_step())
    adaptive->set_measurements(parallel_->max_over_ranks(adaptive->measurements()));
  const size_t before = adaptive ? adaptive->decisions().size() : 0;
  fp8_->update();
  if (!adaptive) return;
  for (size_t i = before; i < adaptive->decisions().size(); ++i) {
    const amp::PrecisionDecision& d = adaptive->decisions()[i];
    char value[64];
    std::snprintf(value, sizeof value, "%.3g", d.value);
    observer_.on_note("step " + std::to_string(d.step) + ": " + d.layer + " " +
                      amp::name_of(d.from) + " -> " + amp::name_of(d.to) + " (" + d.statistic +
                      " " + value + ")");
  }
}

// Forward and backward of this rank's share of the batch, in grad_accum micro-batches whose
// losses are weighted by their share of the whole batch, so that the gradients (summed over the
// ranks) add up to the whole batch's mean loss's. The micro-batches are numbered over all ranks
// (rank r has r x grad_accum ... (r + 1) x grad_accum - 1), each a fixed slice of the batch and
// a fixed part of the dropout generator's counter, so that any split of the same parts between
// processes computes the same thing. Returns this rank's weighted loss.
double Trainer::forward_backward(const data::Batch& batch) {
  const int64_t n = batch.x.size(0);
  const int64_t ranks = parallel_ ? parallel_->size() : 1, rank = parallel_ ? parallel_->rank() : 0;
  const int64_t local = o_.grad_accum, parts = local * ranks;
  const std::optional<PhiloxState> base =
      parts > 1 ? model_.generator_state() : std::optional<PhiloxState>();
  double loss_sum = 0.0;
  for (int64_t i = 0; i < local; ++i) {
    const int64_t index = rank * local + i;
    if (parallel_ && i == local - 1) parallel_->reducer().arm();
    if (base) model_.set_generator_state(micro_batch_generator(*base, index));
    if (fp8_ && fp8_->recipe().fp4) fp8_->set_rounding_position(c_.step, index);
    const Share share = parts > 1 ? share_of(n, index, parts) : Share{0, n};
    if (share.begin < share.end) micro_batch(batch, share, n, parts > 1, loss_sum);
    if (base) check_micro_batch_draws(*base, index, *model_.generator_state());
  }
  if (base) model_.set_generator_state(micro_batch_generator(*base, parts));
  return loss_sum;
}

// Forward and backward of rows [share.begin, share.end) of a batch of n, the loss weighted by
// its share when `weighted`.
void Trainer::micro_batch(const data::Batch& batch, Share share, int64_t n, bool weighted,
                          double& loss_sum) {
  const bool whole = share.begin == 0 && share.end == n;
  const Tensor x = whole ? batch.x : batch.x.slice(share.begin, share.end);
  const Tensor y = whole ? batch.y : batch.y.slice(share.begin, share.end);
  Tensor loss;
  {
    auto scope = preset_.autocast();
    std::optional<amp::Fp8Autocast> fp8_scope;
    if (fp8_) fp8_scope.emplace(*fp8_);
    loss = task_loss(model_.forward(x), y, task_);
    if (weighted) loss = ops::mul_scalar(loss, double(share.end - share.begin) / double(n));
  }
  scaler_.scale(loss).backward();
  loss_sum += loss.item();
}

// ZeRO: clip_grad_norm over every rank's pieces of the gradients; returns the norm.
double Trainer::clip_pieces(double max_norm) {
  const double norm = zero_->gradient_norm();
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < zero_->parameters(); ++i)
    if (zero_->view(i).grad().defined()) pieces.push_back(zero_->view(i).grad());
  optim::scale_to_norm(pieces, norm, max_norm);
  return norm;
}

// on_nonfinite = stop: nothing was updated; the state before the step is written as the
// checkpoint of the previous step, and the run ends with the step, the loss and the gradient.
void Trainer::stop_nonfinite(double loss, double grad_norm, const Before& before) {
  std::string gradient = first_nonfinite_gradient(named_params_);
  if (gradient.empty())
    gradient = std::isfinite(grad_norm)
                   ? "every gradient is finite"
                   : "every gradient is finite, but their norm is " + number_text(grad_norm);
  for (auto& g : optimizers_) g.optimizer->zero_grad();
  std::string kept = "no checkpoint was written (checkpoints are off)";
  if (o_.checkpoint_every > 0) {
    save_checkpoint(&before);
    kept = "the last good state is checkpoint " + last_checkpoint_;
  }
  throw Error(detail::concat("step ", c_.step + 1, ": the loss is ", number_text(loss), " and ",
                             gradient, "; preset ", preset_.name,
                             " has no loss scaling to skip such steps. Nothing was updated; ", kept,
                             ". --on-nonfinite skip drops such batches instead"),
              SourceLocation::current());
}

// metrics.jsonl anew from the history: a resumed run's file holds the lines the uninterrupted
// run had written by then, in its order (a step's line before its evaluation's).
void Trainer::write_metrics_history() {
  const std::string path = o_.out_dir + "/metrics.jsonl";
  metrics_.open(path, std::ios::trunc);
  MIXP_CHECK(metrics_, "cannot create ", path);
  size_t e = 0;
  for (const StepMetrics& m : c_.log) {
    for (; e < c_.evals.size() && c_.evals[e].step < m.step; ++e)
      metrics_ << metrics_json(c_.evals[e], run_id_) << "\n";
    metrics_ << metrics_json(m, run_id_) << "\n";
  }
  for (; e < c_.evals.size(); ++e) metrics_ << metrics_json(c_.evals[e], run_id_) << "\n";
  metrics_ << std::flush;
}

// The step's counts, its metrics line when one is due, and the observer.
void Trainer::record(const StepOutcome& s) {
  ++c_.step;
  if (s.applied) {
    c_.skipped_in_a_row = 0;
    c_.streak_overflow.clear();
  } else {
    ++c_.skipped;
    ++c_.skipped_in_a_row;
    ++c_.window_skipped;
  }
  if (s.dropped) ++c_.nonfinite;
  c_.step_ms.push_back(s.ms);
  c_.train_ms += s.ms;
  c_.train_samples += s.samples;
  if (std::isfinite(s.loss)) {
    c_.window_loss += s.loss;
    ++c_.window_loss_steps;
  } else {
    ++c_.window_nonfinite_losses;
  }
  if (std::isfinite(s.grad_norm)) {
    c_.window_grad_norm += s.grad_norm;
    c_.window_grad_norm_max = std::max(c_.window_grad_norm_max, s.grad_norm);
    ++c_.window_grad_norm_steps;
  }
  if (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm)) ++c_.window_nonfinite;
  c_.window_ms += s.ms;
  c_.window_samples += s.samples;
  ++c_.window_steps;
  const bool logged = c_.step % o_.log_interval == 0 || c_.step == total_;
  if (logged) {
    c_.log.push_back(close_window(s));
    if (metrics_.is_open()) metrics_ << metrics_json(c_.log.back(), run_id_) << "\n" << std::flush;
  }
  notify_step(s, logged ? &c_.log.back() : nullptr);
}

// The metrics line of the window that `last` ends, and a fresh window.
StepMetrics Trainer::close_window(const StepOutcome& last) {
  // A window with a non-finite loss has no mean: averaging over its finite steps would show
  // a diverging run as a recovering one.
  const bool finite = c_.window_nonfinite_losses == 0 && c_.window_loss_steps > 0;
  StepMetrics m{.step = c_.step,
                .epoch = per_epoch_ > 0 ? (c_.step - 1) / per_epoch_ : 0,
                .loss = finite ? c_.window_loss / double(c_.window_loss_steps)
                               : std::numeric_limits<double>::quiet_NaN(),
                .lr = schedule_->lr(c_.step - 1),
                .scale = last.scale,
                .samples_per_s = double(c_.window_samples) / (c_.window_ms / 1000.0),
                .ms = c_.window_ms / double(c_.window_steps),
                .skipped = c_.window_skipped,
                .nonfinite = c_.window_nonfinite,
                .nonfinite_losses = c_.window_nonfinite_losses};
  if (c_.window_grad_norm_steps > 0) {
    m.grad_norm = c_.window_grad_norm / double(c_.window_grad_norm_steps);
    m.grad_norm_max = c_.window_grad_norm_max;
  }
  c_.window_loss = c_.window_ms = c_.window_grad_norm = c_.window_grad_norm_max = 0.0;
  c_.window_steps = c_.window_samples = c_.window_loss_steps = c_.window_grad_norm_steps = 0;
  c_.window_skipped = c_.window_nonfinite = c_.window_nonfinite_losses = 0;
  return m;
}

void Trainer::notify_step(const StepOutcome& s, const StepMetrics* logged) const {
  const double mean_ms = c_.train_ms / double(c_.step);
  const double eta_s = mean_ms * double(total_ - c_.step) / 1000.0;
  observer_.on_step(c_.step, total_, s.loss, double(c_.train_samples) / (c_.train_ms / 1000.0),
                    s.scale, eta_s, logged);
}

// What samples need: a language model on nn::Model, its vocabulary, an Inference of its own.
void Trainer::prepare_samples() {
  if (o_.sample_every <= 0) return;
  MIXP_CHECK(task_ == nn::Task::language_model,
             "samples (--sample-every) need a text model (gpt or lstm)");
  sample_model_ = dynamic_cast<nn::Model*>(model_.module());
  MIXP_CHECK(sample_model_ != nullptr && !o_.vocabulary.empty(),
             "samples (--sample-every) need a model built on nn::Model and its vocabulary");
  sample_inference_ = std::make_unique<Inference>(*sample_model_, preset_.name,
                                                  o_.mx_scale_rounding, o_.fp4_without);
}

// A sample every sample_every steps, in evaluation mode, with nothing of the run's state.
void Trainer::sample_if_due() {
  if (!sample_inference_ || c_.step % o_.sample_every != 0) return;
  if (parallel_ && parallel_->rank() != 0) return;  // rank 0 reports for all
  const std::string& v = o_.vocabulary;
  const SampleOptions options{
      .prompt = std::string(1, v.find('\n') != std::string::npos ? '\n' : v[0]),
      .tokens = o_.sample_tokens,
      .seed = o_.seed};
  // Adaptive precision: the sample's layers in the formats they have reached.
  if (fp8_ && fp8_->extension()) sample_inference_->load_precision_state(fp8_->state_dict());
  model_.set_training(false);
  const std::string text = sample(*sample_model_, v, *sample_inference_, options);
  model_.set_training(true);
  observer_.on_sample(c_.step, text);
}

void Trainer::run_eval() {
  if (!c_.evals.empty() && c_.evals.back().step == c_.step) return;
  c_.evals.push_back(evaluate(model_, data_, preset_, fp8_.get(), c_.step, parallel_.get()));
  if (metrics_.is_open()) metrics_ << metrics_json(c_.evals.back(), run_id_) << "\n" << std::flush;
  observer_.on_eval(c_.evals.back());
  if (!std::isfinite(c_.evals.back().loss))
    diverged("the evaluation loss is " + number_text(c_.evals.back().loss));
}

void Trainer::check_divergence(const StepOutcome& s) {
  const DivergenceLimits& l = o_.limits;
  const double next_scale = scaler_.get_scale();
  if (scaler_.is_enabled() && l.min_loss_scale > 0 && next_scale < l.min_loss_scale)
    diverged("the loss scale fell to " + number_text(next_scale) + ", below the floor of " +
             number_text(l.min_loss_scale) + " (--min-loss-scale)");
  if (l.max_skipped_in_a_row > 0 && c_.skipped_in_a_row > l.max_skipped_in_a_row)
    diverged(std::to_string(c_.skipped_in_a_row) +
             " steps in a row were skipped, more than the limit of " +
             std::to_string(l.max_skipped_in_a_row) + " (--max-skipped-in-a-row)");
  if (s.dropped && l.max_skipped_fraction < 1 &&
      double(c_.nonfinite) > l.max_skipped_fraction * double(total_))
    diverged(std::to_string(c_.nonfinite) + " batches with a NaN or infinite loss or gradient " +
             "were dropped, more than " + number_text(100 * l.max_skipped_fraction) +
             "% of the run's " + std::to_string(total_) + " steps (--max-skipped-fraction)");
}

void Trainer::diverged(const std::string& why) const {
  std::string first;
  if (!c_.first_overflow.empty())
    first += " The first overflow of the run: " + c_.first_overflow + ".";
  if (!c_.streak_overflow.empty() && c_.streak_overflow != c_.first_overflow)
    first += " The skipped steps began " + c_.streak_overflow + ".";
  io::SafetensorsFile weights;
  for (const auto& [name, p] : named_params_) weights.tensors.emplace(name, p->detach());
  if (const auto bad = io::find_nonfinite(weights))
    first += " The weight '" + bad->tensor + "' holds " + number_text(bad->value) + " at element " +
             std::to_string(bad->element) + ".";
  const std::string kept = last_checkpoint_.empty()
                               ? " No checkpoint was written (--checkpoint-every)."
                               : " The last good checkpoint, " + last_checkpoint_ +
                                     ", is kept; nothing later was written.";
  throw Error(detail::concat("the run diverged at step ", c_.step, ": ", why, ".", first, kept,
                             " Try a lower --lr, or a preset with more range (amp-bf16, bf16)"),
              SourceLocation::current());
}

const char* name_of(OnNonFinite policy) { return policy == OnNonFinite::skip ? "skip" : "stop"; }

OnNonFinite parse_on_nonfinite(const std::string& name) {
  if (name == "stop") return OnNonFinite::stop;
  MIXP_CHECK(name == "skip", "unknown --on-nonfinite policy '", name, "' (stop or skip)");
  return OnNonFinite::skip;
}

Tensor task_loss(const Tensor& output, const Tensor& targets, nn::Task task) {
  switch (task) {
    case nn::Task::language_model: {
      const int64_t vocab = output.size(-1);
      return ops::cross_entropy(output.reshape({-1, vocab}), targets.reshape({-1}));
    }
    case nn::Task::regression: return ops::mse_loss(output.to(DType::f32), targets);
    case nn::Task::classification: break;
  }
  return ops::cross_entropy(output, targets);
}

DType optimizer_state_dtype(const TrainOptions& o) {
  // SGD's momentum stays fp32 (its update has no stochastic rounding of the state).
  if (o.optimizer_state.empty())
    return o.optimizer.name == "sgd" ? DType::f32 : amp::preset(o.precision).optimizer_state_dtype;
  MIXP_CHECK(o.optimizer_state == "f32" || o.optimizer_state == "bf16",
             "the optimizer state must be f32 or bf16, got '", o.optimizer_state, "'");
  return parse_dtype(o.optimizer_state);
}

void validate_options(const TrainOptions& o) {
  (void)amp::preset(o.precision);
  (void)optimizer_state_dtype(o);
  MIXP_CHECK(o.steps >= 0 && o.epochs >= 0, "steps and epochs must be >= 0, got ", o.steps, " and ",
             o.epochs);
  MIXP_CHECK(o.log_interval >= 1, "the log interval must be >= 1, got ", o.log_interval);
  MIXP_CHECK(o.grad_accum >= 1, "the micro-batches per step (--grad-accum) must be >= 1, got ",
             o.grad_accum);
  MIXP_CHECK(o.eval_interval >= 0, "the eval interval must be >= 0, got ", o.eval_interval);
  MIXP_CHECK(std::isfinite(o.clip_norm) && o.clip_norm >= 0,
             "the clip norm must be >= 0 (0: no clipping), got ", o.clip_norm);
  const double lr = o.lr.value_or(1e-3);
  MIXP_CHECK(std::isfinite(lr) && lr > 0, "the learning rate must be positive, got ", lr);
  MIXP_CHECK(o.max_memory >= 0, "the memory limit must be >= 0 (0: what is available), got ",
             o.max_memory);
  MIXP_CHECK(o.checkpoint_every >= 0, "the checkpoint interval must be >= 0, got ",
             o.checkpoint_every);
  MIXP_CHECK(o.keep_checkpoints >= 1, "the checkpoints kept must be >= 1, got ",
             o.keep_checkpoints);
  MIXP_CHECK(o.scaler_growth_interval >= 0, "the scaler growth interval must be >= 0, got ",
             o.scaler_growth_interval);
  MIXP_CHECK(o.sample_every >= 0, "the sample interval (--sample-every) must be >= 0, got ",
             o.sample_every);
  MIXP_CHECK(o.sample_tokens >= 1, "the sample length (--sample-tokens) must be >= 1, got ",
             o.sample_tokens);
  const DataParallelOptions& p = o.parallel;
  MIXP_CHECK(p.reduce_dtype == "f32" || p.reduce_dtype == "bf16",
             "the gradients are reduced in f32 or bf16 (--reduce-dtype), got '", p.reduce_dtype,
             "'");
  MIXP_CHECK(!p.deterministic || p.reduce_dtype == "f32",
             "--deterministic sums the gradients in their own dtype, as one process accumulates "
             "them; it cannot be combined with --reduce-dtype ",
             p.reduce_dtype);
  MIXP_CHECK(p.zero == 0 || p.zero == 1, "the ZeRO stage (--zero) is 0 or 1, got ", p.zero);
  MIXP_CHECK(p.bucket_bytes > 0 && p.first_bucket_bytes > 0,
             "the gradient buckets must hold more than 0 bytes, got ", p.first_bucket_bytes,
             " for the first and ", p.bucket_bytes, " for the others");
  const DivergenceLimits& l = o.limits;
  MIXP_CHECK(std::isfinite(l.min_loss_scale) && l.min_loss_scale >= 0,
             "the minimum loss scale must be >= 0 (0: no floor), got ", l.min_loss_scale);
  MIXP_CHECK(l.max_skipped_in_a_row >= 0,
             "the steps skipped in a row must be >= 0 (0: no limit), got ", l.max_skipped_in_a_row);
  MIXP_CHECK(l.max_skipped_fraction >= 0 && l.max_skipped_fraction <= 1,
             "the skipped fraction must be in [0, 1] (1: no limit), got ", l.max_skipped_fraction);
  validate_optimizer_options(o);
}

TrainResult train(TrainModel& model, DataSource& data, const TrainOptions& options) {
  validate_options(options);
  Trainer trainer(model, data, options);
  return trainer.run();
}

}  // namespace mixp::train
