// The training loop, its evaluation, progress display and run folder.
#include "mixp/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>

#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/diag/svg.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/memory.h"
#include "mixp/ops.h"
#include "mixp/optim/adamw.h"
#include "mixp/optim/clip_grad.h"
#include "mixp/optim/lr_schedule.h"
#include "mixp/runtime.h"

namespace mixp::train {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Philox stream of the optimizers' stochastic rounding ("SR"), apart from init and data.
constexpr uint64_t kRoundingStream = 0x5352;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = int64_t(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

class ProgressDisplay {
 public:
  ProgressDisplay(std::FILE* out, Progress mode, int64_t log_interval)
      : out_(out), interval_(std::max<int64_t>(1, log_interval)) {
    if (mode == Progress::automatic)
      mode = out && ::isatty(::fileno(out)) ? Progress::bar : Progress::lines;
    mode_ = out ? mode : Progress::none;
  }

  void step(int64_t step, int64_t total, double loss, double samples_per_s, double scale,
            double eta_s, bool logged) {
    if (mode_ == Progress::bar) {
      constexpr int kWidth = 24;
      const int filled = int(double(kWidth) * double(step) / double(std::max<int64_t>(1, total)));
      std::string bar(size_t(filled), '#');
      bar.append(size_t(kWidth - filled), '.');
      std::fprintf(out_, "\r[%s] step %lld/%lld loss %.4f %.0f samples/s scale %g ETA %s\033[K",
                   bar.c_str(), (long long)step, (long long)total, loss, samples_per_s, scale,
                   duration_text(eta_s).c_str());
      std::fflush(out_);
      drawn_ = true;
    } else if (mode_ == Progress::lines && logged) {
      std::fprintf(out_, "step %lld/%lld loss %.4f samples/s %.1f scale %g eta %s\n",
                   (long long)step, (long long)total, loss, samples_per_s, scale,
                   duration_text(eta_s).c_str());
      std::fflush(out_);
    }
  }
  void message(const std::string& line) {
    if (mode_ == Progress::none) return;
    if (drawn_) std::fputs("\r\033[K", out_);
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
  }
  void finish() {
    if (mode_ == Progress::bar && drawn_) std::fputs("\n", out_);
    drawn_ = false;
  }

 private:
  std::FILE* out_;
  Progress mode_ = Progress::none;
  int64_t interval_;
  bool drawn_ = false;
};

EvalMetrics evaluate(TrainModel& model, DataSource& data, const amp::Preset& preset,
                     amp::Fp8State* fp8, int64_t step) {
  model.set_training(false);
  double loss_sum = 0.0;
  int64_t count = 0, correct = 0;
  {
    NoGradGuard no_grad;
    data.for_each_eval_batch([&](const data::Batch& batch) {
      Tensor logits, loss;
      {
        auto scope = preset.autocast();
        std::optional<amp::Fp8Autocast> fp8_scope;
        if (fp8) fp8_scope.emplace(*fp8);
        logits = model.forward(batch.x);
        loss = task_loss(logits, batch.y, model.task());
      }
      const int64_t n = batch.y.numel();
      loss_sum += loss.item() * double(n);
      count += n;
      if (model.task() == nn::Task::classification) {
        const std::vector<double> predicted = ops::argmax(logits, 1).to_vector();
        const std::vector<double> labels = batch.y.to_vector();
        for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
      }
    });
  }
  model.set_training(true);
  MIXP_CHECK(count > 0, "train: the evaluation data holds no samples");
  EvalMetrics e;
  e.step = step;
  e.loss = loss_sum / double(count);
  if (model.task() == nn::Task::classification)
    e.accuracy = double(correct) / double(count);
  else if (model.task() == nn::Task::language_model)
    e.bits_per_char = e.loss / std::numbers::ln2;
  return e;
}

std::string eval_line(const EvalMetrics& e) {
  char buf[160];
  if (e.accuracy)
    std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4f accuracy %.2f%%", (long long)e.step,
                  e.loss, 100.0 * *e.accuracy);
  else if (e.bits_per_char)
    std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4f bits/char %.4f", (long long)e.step,
                  e.loss, *e.bits_per_char);
  else
    std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4g", (long long)e.step, e.loss);
  return buf;
}

json eval_json(const EvalMetrics& e);

json summary_object(const TrainResult& r) {
  json evals = json::array();
  for (const EvalMetrics& e : r.evals) evals.push_back(eval_json(e));
  json memory = json::object();
  for (const auto& [tag, bytes] : r.peak_memory) memory[tag] = bytes;
  return {{"model", r.model_name},
          {"task", r.task == nn::Task::classification   ? "classification"
                   : r.task == nn::Task::language_model ? "language_model"
                                                        : "regression"},
          {"precision", r.precision},
          {"optimizer_state", r.optimizer_state},
          {"steps", r.steps},
          {"epochs", r.epochs},
          {"final_train_loss", r.final_train_loss},
          {"final_eval_loss", r.final_eval_loss},
          {"test_accuracy", optional_number(r.test_accuracy)},
          {"bits_per_char", optional_number(r.bits_per_char)},
          {"median_step_ms", r.median_step_ms},
          {"samples_per_s", r.samples_per_s},
          {"peak_memory_bytes", memory},
          {"final_loss_scale", r.final_loss_scale},
          {"skipped_steps", r.skipped_steps},
          {"nonfinite_skipped_steps", r.nonfinite_steps},
          {"evals", evals}};
}

json philox_json(const PhiloxState& s) {
  return {{"seed", s.seed}, {"stream", s.stream}, {"offset", s.offset}};
}
PhiloxState philox_of(const json& j) {
  return {j.at("seed").get<uint64_t>(), j.at("stream").get<uint64_t>(),
          j.at("offset").get<uint64_t>()};
}
json step_json(const StepMetrics& m) {
  return {{"step", m.step}, {"epoch", m.epoch}, {"loss", m.loss},
          {"lr", m.lr},     {"scale", m.scale}, {"samples_per_s", m.samples_per_s},
          {"ms", m.ms}};
}
StepMetrics step_of(const json& j) {
  return {.step = j.at("step").get<int64_t>(),
          .epoch = j.at("epoch").get<int64_t>(),
          .loss = j.at("loss").get<double>(),
          .lr = j.at("lr").get<double>(),
          .scale = j.at("scale").get<double>(),
          .samples_per_s = j.at("samples_per_s").get<double>(),
          .ms = j.at("ms").get<double>()};
}
json eval_json(const EvalMetrics& e) {
  return {{"step", e.step},
          {"loss", e.loss},
          {"accuracy", optional_number(e.accuracy)},
          {"bits_per_char", optional_number(e.bits_per_char)}};
}
EvalMetrics eval_of(const json& j) {
  EvalMetrics e;
  e.step = j.at("step").get<int64_t>();
  e.loss = j.at("loss").get<double>();
  if (!j.at("accuracy").is_null()) e.accuracy = j.at("accuracy").get<double>();
  if (!j.at("bits_per_char").is_null()) e.bits_per_char = j.at("bits_per_char").get<double>();
  return e;
}
json metadata_json(const io::Checkpoint& c, const std::string& key) {
  const auto it = c.file.metadata.find(key);
  MIXP_CHECK(it != c.file.metadata.end(), c.path, ": no metadata '", key, "'");
  try {
    return json::parse(it->second);
  } catch (const json::exception& e) {
    MIXP_CHECK(false, c.path, ": metadata '", key, "' is not JSON: ", e.what());
  }
  return {};
}
// A checkpoint's tensor `name`, checked against the shape and dtype it must have.
const Tensor& checkpoint_tensor(const io::Checkpoint& c, const std::string& name,
                                const Tensor& like) {
  const auto it = c.file.tensors.find(name);
  MIXP_CHECK(it != c.file.tensors.end(), c.path, ": no tensor '", name, "'");
  MIXP_CHECK(it->second.shape() == like.shape() && it->second.dtype() == like.dtype(), c.path,
             ": tensor '", name, "' is ", name_of(it->second.dtype()), " ",
             it->second.shape().to_string(), ", the run has ", name_of(like.dtype()), " ",
             like.shape().to_string());
  return it->second;
}

// The first parameter whose gradient holds a NaN or an infinity: "gradient of 'fc.weight'
// holds nan at element 3", or "" when every gradient is finite.
std::string first_nonfinite_gradient(const std::vector<std::pair<std::string, Tensor*>>& named) {
  for (const auto& [name, p] : named) {
    const Tensor g = p->grad();
    if (!g.defined()) continue;
    const std::vector<double> v = g.to_vector();
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isfinite(v[i])) continue;
      std::ostringstream text;
      text << "the gradient of '" << name << "' holds " << v[i] << " at element " << i;
      return text.str();
    }
  }
  return "";
}

}  // namespace

const char* name_of(OnNonFinite policy) { return policy == OnNonFinite::skip ? "skip" : "stop"; }

OnNonFinite parse_on_nonfinite(const std::string& name) {
  if (name == "stop") return OnNonFinite::stop;
  MIXP_CHECK(name == "skip", "unknown non-finite policy '", name, "' (stop or skip)");
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

std::string metrics_json(const StepMetrics& m) { return step_json(m).dump(); }

std::string summary_json(const TrainResult& result) {
  return summary_object(result).dump(2) + "\n";
}

DType optimizer_state_dtype(const TrainOptions& o) {
  if (o.optimizer_state.empty()) return amp::preset(o.precision).optimizer_state_dtype;
  MIXP_CHECK(o.optimizer_state == "f32" || o.optimizer_state == "bf16",
             "train: the optimizer state must be f32 or bf16, got '", o.optimizer_state, "'");
  return parse_dtype(o.optimizer_state);
}

TrainResult train(TrainModel& model, DataSource& data, const TrainOptions& o) {
  const amp::Preset& preset = amp::preset(o.precision);
  const DType state_dtype = optimizer_state_dtype(o);
  // The FP8 presets' amax histories and scales: updated after every step, part of a checkpoint.
  const std::unique_ptr<amp::Fp8State> fp8 = preset.make_fp8_state();
  const nn::Task task = model.task();
  const bool lm = task == nn::Task::language_model;
  const int64_t per_epoch = data.batches_per_epoch();
  MIXP_CHECK(o.steps >= 0 && o.epochs >= 0, "train: steps and epochs must be >= 0, got ", o.steps,
             " and ", o.epochs);
  MIXP_CHECK(o.steps > 0 || (o.epochs > 0 && per_epoch > 0),
             "train: give a number of steps (this data has no epochs) or epochs > 0");
  MIXP_CHECK(o.log_interval >= 1, "train: log_interval must be >= 1, got ", o.log_interval);
  MIXP_CHECK(o.eval_interval >= 0, "train: eval_interval must be >= 0, got ", o.eval_interval);
  MIXP_CHECK(o.clip_norm > 0, "train: clip_norm must be > 0, got ", o.clip_norm);
  const double lr = o.lr.value_or(1e-3);
  MIXP_CHECK(std::isfinite(lr) && lr > 0, "train: the learning rate must be positive, got ", lr);
  if (o.threads > 0) set_num_threads(o.threads);
  const int64_t total = o.steps > 0 ? o.steps : o.epochs * per_epoch;
  const int64_t eval_every = o.eval_interval > 0 ? o.eval_interval
                             : lm                ? std::max<int64_t>(1, total / 5)
                                                 : 0;

  // The parameters as the preset stores them, written back into the model.
  std::vector<Tensor> params;
  {
    const auto named = model.named_parameters();
    std::vector<Tensor> values;
    for (const auto& [name, p] : named) {
      MIXP_CHECK(p && p->defined(), "train: parameter '", name, "' is undefined");
      values.push_back(*p);
    }
    std::vector<bool> norms = model.norm_parameter_flags();
    MIXP_CHECK(norms.size() == named.size(), "train: ", norms.size(), " norm flags for ",
               named.size(), " parameters");
    params = preset.cast_parameters(values, norms);
    for (size_t i = 0; i < named.size(); ++i) *named[i].second = params[i];
  }
  MIXP_CHECK(!params.empty(), "train: the model has no parameters");
  memory::reset_peaks();

  // Optimizers: one AdamW, or a decayed and an undecayed one for language models.
  std::vector<std::unique_ptr<optim::AdamW>> optimizers;
  {
    const PhiloxState rounding{o.seed, kRoundingStream, 0};
    if (lm) {
      std::vector<Tensor> decay, no_decay;
      for (const Tensor& p : params) (p.ndim() >= 2 ? decay : no_decay).push_back(p);
      if (!decay.empty())
        optimizers.push_back(std::make_unique<optim::AdamW>(
            decay, optim::AdamWOptions{.lr = lr,
                                       .betas = {0.9, 0.99},
                                       .weight_decay = 0.1,
                                       .precision = preset.optimizer_precision,
                                       .rounding = rounding,
                                       .state_dtype = state_dtype}));
      if (!no_decay.empty())
        optimizers.push_back(std::make_unique<optim::AdamW>(
            no_decay, optim::AdamWOptions{.lr = lr,
                                          .betas = {0.9, 0.99},
                                          .weight_decay = 0.0,
                                          .precision = preset.optimizer_precision,
                                          .rounding = {o.seed, kRoundingStream + 1, 0},
                                          .state_dtype = state_dtype}));
    } else {
      optimizers.push_back(std::make_unique<optim::AdamW>(
          params, optim::AdamWOptions{.lr = lr,
                                      .precision = preset.optimizer_precision,
                                      .rounding = rounding,
                                      .state_dtype = state_dtype}));
    }
  }
  // Language models: nanoGPT's warmup then cosine decay to lr / 10. Classifiers: cosine decay
  // from lr to lr / 100 over the run, without warmup; the decay's last steps are worth about
  // a point of accuracy over a constant rate on Fashion-MNIST.
  const auto schedule = std::make_unique<optim::WarmupCosineLr>(
      optim::WarmupCosineOptions{.peak_lr = lr,
                                 .min_lr = lm ? lr / 10 : lr / 100,
                                 .warmup_steps = lm ? std::min<int64_t>(100, total / 10) : 0,
                                 .total_steps = total});
  MIXP_CHECK(o.scaler_growth_interval >= 0, "train: scaler_growth_interval must be >= 0, got ",
             o.scaler_growth_interval);
  amp::GradScalerOptions scaler_options;
  if (o.scaler_growth_interval > 0) scaler_options.growth_interval = o.scaler_growth_interval;
  scaler_options.underflow_fraction = o.scaler_underflow_fraction;
  scaler_options.underflow_check_interval = o.scaler_underflow_check_interval;
  amp::GradScaler scaler = preset.make_scaler(scaler_options);  // validates the options
  MIXP_CHECK(o.checkpoint_every >= 0, "train: checkpoint_every must be >= 0, got ",
             o.checkpoint_every);
  MIXP_CHECK(o.keep_checkpoints >= 1, "train: keep_checkpoints must be >= 1, got ",
             o.keep_checkpoints);
  if (o.checkpoint_every > 0 || o.resume) {
    MIXP_CHECK(!o.out_dir.empty(), "train: checkpoints need a run folder (out_dir)");
    MIXP_CHECK(data.loader_state().has_value(),
               "train: this data source cannot be checkpointed (no loader_state)");
  }

  TrainResult r;
  r.model_name = o.model_name;
  r.precision = preset.name;
  r.optimizer_state = name_of(state_dtype);
  r.task = task;
  ProgressDisplay progress(o.log, o.progress, o.log_interval);
  if (o.log && o.progress != Progress::none)
    progress.message("train " + o.model_name + " (" + preset.name + "): " + std::to_string(total) +
                     " steps, " + std::to_string(params.size()) + " parameter tensors");

  std::vector<double> step_ms;
  step_ms.reserve(size_t(total));
  double train_ms = 0.0;
  int64_t train_samples = 0;
  double window_loss = 0.0, window_ms = 0.0;
  int64_t window_steps = 0, window_samples = 0;
  int64_t window_loss_steps = 0;  // steps of the window whose loss was finite
  int64_t step = 0, epoch = 0, empty_in_a_row = 0;
  auto run_eval = [&]() {
    if (!r.evals.empty() && r.evals.back().step == step) return;
    r.evals.push_back(evaluate(model, data, preset, fp8.get(), step));
    progress.message(eval_line(r.evals.back()));
  };

  // Checkpoints: the tensors by name, and the state of everything else as JSON metadata.
  const auto named_params = model.named_parameters();
  const auto named_buffers = model.named_buffers();
  // The optimizers' state by checkpoint name. Moments and compensations are the optimizers'
  // own tensors, restored by copy_; a master is restored through set_master (a bf16
  // parameter's master is assembled for the file from the parameter and its low halves).
  struct OptimizerTensor {
    std::string name;
    Tensor tensor;
    size_t optimizer = 0, parameter = 0;
    bool is_master = false;
  };
  auto optimizer_tensors = [&]() {
    std::vector<OptimizerTensor> t;
    for (size_t k = 0; k < optimizers.size(); ++k) {
      const optim::AdamW& opt = *optimizers[k];
      for (size_t i = 0; i < opt.parameters().size(); ++i) {
        const std::string prefix = "optim/" + std::to_string(k) + "/" + std::to_string(i) + "/";
        t.push_back({prefix + "exp_avg", opt.exp_avg(i)});
        t.push_back({prefix + "exp_avg_sq", opt.exp_avg_sq(i)});
        const Tensor master = opt.master(i);
        if (master.defined() && master.impl() != opt.parameters()[i].impl())
          t.push_back({prefix + "master", master, k, i, true});
        if (opt.compensation(i).defined())
          t.push_back({prefix + "compensation", opt.compensation(i)});
      }
    }
    return t;
  };
  // `before`: the loader and generator as they were before the current batch, for the
  // checkpoint of the last good state when a non-finite step stops the run.
  struct Before {
    std::optional<data::LoaderState> loader;
    std::optional<PhiloxState> generator;
  };
  auto save_checkpoint = [&](const std::optional<Before>& before) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, p] : named_params) tensors.emplace_back("param/" + name, p->detach());
    for (const auto& [name, b] : named_buffers) tensors.emplace_back("buffer/" + name, *b);
    for (auto& t : optimizer_tensors())
      tensors.emplace_back(std::move(t.name), std::move(t.tensor));
    if (fp8) {
      for (auto& t : fp8->state()) tensors.push_back(std::move(t));
    }
    json opts = json::array();
    for (const auto& opt : optimizers) {
      json per = json::array();
      for (size_t i = 0; i < opt->parameters().size(); ++i) per.push_back(opt->parameter_steps(i));
      opts.push_back({{"steps", opt->steps()},
                      {"parameter_steps", per},
                      {"lr", opt->learning_rate()},
                      {"rounding", philox_json(opt->rounding_state())}});
    }
    json scaler_state = json::object();
    for (const auto& [k, v] : scaler.state()) scaler_state[k] = v;
    json history = {{"log", json::array()}, {"evals", json::array()}};
    for (const StepMetrics& m : r.log) history["log"].push_back(step_json(m));
    for (const EvalMetrics& e : r.evals) history["evals"].push_back(eval_json(e));
    const json trainer = {{"step", step},
                          {"epoch", epoch},
                          {"empty_in_a_row", empty_in_a_row},
                          {"window_loss", window_loss},
                          {"window_ms", window_ms},
                          {"window_steps", window_steps},
                          {"window_loss_steps", window_loss_steps},
                          {"window_samples", window_samples},
                          {"train_ms", train_ms},
                          {"train_samples", train_samples},
                          {"skipped_steps", r.skipped_steps},
                          {"nonfinite_steps", r.nonfinite_steps},
                          {"step_ms", step_ms}};
    const std::optional<PhiloxState> gen = before ? before->generator : model.generator_state();
    const std::optional<data::LoaderState> loader = before ? before->loader : data.loader_state();
    MIXP_CHECK(loader.has_value(), "train: this data source cannot be checkpointed");
    const json loader_json = {{"rng", philox_json(loader->rng)},
                              {"epoch", loader->epoch},
                              {"position", loader->position}};
    const std::map<std::string, std::string> metadata = {
        {"format", "mixp-checkpoint"},
        {"version", "1"},
        {"step", std::to_string(step)},
        {"config", o.config},
        {"options", json{{"model", o.model_name},
                         {"precision", preset.name},
                         {"optimizer_state", name_of(state_dtype)},
                         {"total", total}}
                        .dump()},
        {"trainer", trainer.dump()},
        {"optimizers", opts.dump()},
        {"scaler", scaler_state.dump()},
        {"generator", gen ? philox_json(*gen).dump() : "null"},
        {"loader", loader_json.dump()},
        {"schedule", json{{"step", step}, {"next_lr", schedule->lr(step)}}.dump()},
        {"history", history.dump()}};
    r.last_checkpoint =
        io::write_checkpoint(o.out_dir, step, tensors, metadata, o.keep_checkpoints);
  };

  // Resumption: validate every piece of the newest usable checkpoint, then apply it.
  std::function<void()> apply_checkpoint;
  auto validate = [&](const io::Checkpoint& c) {
    io::check_finite(c.file, c.path);  // a poisoned state is no place to continue from
    const json options = metadata_json(c, "options");
    MIXP_CHECK(options.at("precision").get<std::string>() == preset.name, c.path,
               ": written under preset ", options.at("precision").get<std::string>(), ", not ",
               preset.name);
    // Checkpoints from before bf16 moments existed have fp32 ones.
    const std::string saved_state = options.value("optimizer_state", std::string("f32"));
    MIXP_CHECK(saved_state == name_of(state_dtype), c.path, ": written with ", saved_state,
               " optimizer moments, this run keeps ", name_of(state_dtype),
               " (TrainOptions::optimizer_state, mixp train --optimizer-state)");
    MIXP_CHECK(options.at("total").get<int64_t>() == total, c.path, ": a run of ",
               options.at("total").get<int64_t>(), " steps, not ", total);
    std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source)
    std::vector<OptimizerTensor> masters;           // (optimizer, parameter, saved master)
    for (const auto& [name, p] : named_params)
      copies.emplace_back(*p, checkpoint_tensor(c, "param/" + name, *p));
    for (const auto& [name, b] : named_buffers)
      copies.emplace_back(*b, checkpoint_tensor(c, "buffer/" + name, *b));
    for (const OptimizerTensor& t : optimizer_tensors()) {
      const Tensor& saved = checkpoint_tensor(c, t.name, t.tensor);
      if (t.is_master) {
        masters.push_back({t.name, saved, t.optimizer, t.parameter, true});
      } else {
        copies.emplace_back(t.tensor, saved);
      }
    }
    const json trainer = metadata_json(c, "trainer"), opts = metadata_json(c, "optimizers"),
               scaler_json = metadata_json(c, "scaler"), gen = metadata_json(c, "generator"),
               loader_json = metadata_json(c, "loader"), history = metadata_json(c, "history");
    try {
      MIXP_CHECK(opts.size() == optimizers.size(), c.path, ": ", opts.size(),
                 " optimizers, the run has ", optimizers.size());
      std::map<std::string, double> scaler_state;
      for (const auto& [k, v] : scaler_json.items()) scaler_state[k] = v.get<double>();
      amp::GradScaler probe = scaler;
      if (!scaler_state.empty() || scaler.is_enabled()) probe.load_state(scaler_state);
      const int64_t saved_step = trainer.at("step").get<int64_t>();
      MIXP_CHECK(saved_step == c.step && saved_step <= total, c.path, ": step ", saved_step,
                 " does not fit the file name or the run");
      const data::LoaderState loader{philox_of(loader_json.at("rng")),
                                     loader_json.at("epoch").get<int64_t>(),
                                     loader_json.at("position").get<int64_t>()};
      std::vector<std::vector<int64_t>> parameter_steps;
      for (size_t k = 0; k < optimizers.size(); ++k) {
        parameter_steps.push_back(opts[k].at("parameter_steps").get<std::vector<int64_t>>());
        MIXP_CHECK(parameter_steps.back().size() == optimizers[k]->parameters().size(), c.path,
                   ": optimizer ", k, " has steps for ", parameter_steps.back().size(),
                   " parameters, the run ", optimizers[k]->parameters().size());
      }
      std::vector<StepMetrics> log;
      std::vector<EvalMetrics> evals;
      for (const json& m : history.at("log")) log.push_back(step_of(m));
      for (const json& e : history.at("evals")) evals.push_back(eval_of(e));
      std::map<std::string, Tensor> fp8_tensors;
      for (const auto& [name, t] : c.file.tensors) {
        if (name.rfind("fp8/", 0) == 0) fp8_tensors.emplace(name, t);
      }
      if (fp8) {
        amp::Fp8State probe(fp8->recipe());
        probe.load_state(fp8_tensors);
      }
      apply_checkpoint = [&, copies, masters, fp8_tensors, trainer, opts, scaler_state, gen, loader,
                          parameter_steps, log, evals, saved_step]() {
        {
          NoGradGuard no_grad;
          for (auto [dst, src] : copies) dst.copy_(src);
          // After the parameters: each writes its parameter as its master rounded.
          for (const OptimizerTensor& m : masters)
            optimizers[m.optimizer]->set_master(m.parameter, m.tensor);
        }
        for (size_t k = 0; k < optimizers.size(); ++k) {
          optim::AdamW& opt = *optimizers[k];
          opt.set_steps(opts[k].at("steps").get<int64_t>());
          opt.set_learning_rate(opts[k].at("lr").get<double>());
          opt.set_rounding_state(philox_of(opts[k].at("rounding")));
          for (size_t i = 0; i < parameter_steps[k].size(); ++i)
            opt.set_parameter_steps(i, parameter_steps[k][i]);
        }
        if (!scaler_state.empty()) scaler.load_state(scaler_state);
        if (fp8) fp8->load_state(fp8_tensors);
        if (!gen.is_null()) model.set_generator_state(philox_of(gen));
        data.set_loader_state(loader);
        step = saved_step;
        epoch = trainer.at("epoch").get<int64_t>();
        empty_in_a_row = trainer.at("empty_in_a_row").get<int64_t>();
        window_loss = trainer.at("window_loss").get<double>();
        window_ms = trainer.at("window_ms").get<double>();
        window_steps = trainer.at("window_steps").get<int64_t>();
        window_loss_steps = trainer.value("window_loss_steps", window_steps);
        window_samples = trainer.at("window_samples").get<int64_t>();
        train_ms = trainer.at("train_ms").get<double>();
        train_samples = trainer.at("train_samples").get<int64_t>();
        r.skipped_steps = trainer.at("skipped_steps").get<int64_t>();
        r.nonfinite_steps = trainer.value("nonfinite_steps", int64_t(0));
        step_ms = trainer.at("step_ms").get<std::vector<double>>();
        r.log = log;
        r.evals = evals;
      };
    } catch (const json::exception& e) {
      MIXP_CHECK(false, c.path, ": bad checkpoint metadata: ", e.what());
    }
  };
  if (o.resume) {
    const std::optional<io::Checkpoint> c =
        io::read_newest_checkpoint(o.out_dir, validate, [&](const std::string& why) {
          if (o.log) progress.message(why);
        });
    MIXP_CHECK(c.has_value(), "train: no usable checkpoint in ", o.out_dir, " to resume from");
    apply_checkpoint();
    r.resumed_from = c->step;
    progress.message("resumed from " + c->path + " at step " + std::to_string(step));
  }

  std::ofstream metrics_file;
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    const std::string path = o.out_dir + "/metrics.jsonl";
    metrics_file.open(path, std::ios::trunc);
    MIXP_CHECK(metrics_file, path, ": cannot create the file");
    for (const StepMetrics& m : r.log) metrics_file << metrics_json(m) << "\n";
    metrics_file << std::flush;
  }

  model.set_training(true);
  const bool checkpointing = o.checkpoint_every > 0;
  while (step < total) {
    // The state a non-finite step may have to write as the last good one.
    const Before before =
        checkpointing ? Before{data.loader_state(), model.generator_state()} : Before{};
    std::optional<data::Batch> batch = data.next_train();
    if (!batch) {
      MIXP_CHECK(++empty_in_a_row < 2, "train: the training data yielded no batch");
      ++epoch;
      if (!lm && step > 0) run_eval();
      continue;
    }
    empty_in_a_row = 0;
    const Clock::time_point start = Clock::now();
    const double lr_now = schedule->lr(step);
    for (auto& opt : optimizers) opt->set_learning_rate(lr_now);
    const double scale_used = scaler.get_scale();
    if (o.hooks.before_forward) o.hooks.before_forward(step, scale_used);
    Tensor loss;
    {
      auto scope = preset.autocast();
      std::optional<amp::Fp8Autocast> fp8_scope;
      if (fp8) fp8_scope.emplace(*fp8);
      loss = task_loss(model.forward(batch->x), batch->y, task);
    }
    scaler.scale(loss).backward();
    if (o.on_gradients) o.on_gradients(step + 1, named_params);
    if (o.hooks.after_backward) o.hooks.after_backward(step, scale_used);
    for (auto& opt : optimizers) scaler.unscale(*opt);
    const double norm = optim::clip_grad_norm(params, o.clip_norm);
    const double loss_value = loss.item();
    // Without a scaler nothing else would keep a NaN or an infinity out of the weights.
    const bool nonfinite =
        !scaler.is_enabled() && !(std::isfinite(loss_value) && std::isfinite(norm));
    if (nonfinite && o.on_nonfinite == OnNonFinite::stop) {
      const std::string gradient = first_nonfinite_gradient(named_params);
      for (auto& opt : optimizers) opt->zero_grad();
      std::string kept = "no checkpoint was written (checkpoint_every is 0)";
      if (checkpointing) {
        save_checkpoint(before);
        kept = "the last good state is checkpoint " + r.last_checkpoint;
      }
      std::ostringstream loss_text;
      loss_text << loss_value;
      MIXP_CHECK(false, "train: step ", step + 1, ": the loss is ", loss_text.str(),
                 gradient.empty() ? std::string(" and every gradient is finite")
                                  : std::string(" and ") + gradient,
                 "; preset ", preset.name,
                 " has no loss scaling to skip such steps. Nothing was "
                 "updated; ",
                 kept,
                 ". --on-nonfinite skip (TrainOptions::on_nonfinite) drops "
                 "such batches instead");
    }
    bool applied = !nonfinite;
    if (applied)
      for (auto& opt : optimizers) applied = scaler.step(*opt) && applied;
    scaler.update();
    if (fp8) fp8->update();
    for (auto& opt : optimizers) opt->zero_grad();
    const double ms = ms_since(start);
    ++step;
    if (!applied) ++r.skipped_steps;
    if (nonfinite) ++r.nonfinite_steps;
    const int64_t samples = batch->x.size(0);
    step_ms.push_back(ms);
    train_ms += ms;
    train_samples += samples;
    if (std::isfinite(loss_value)) {  // a skipped NaN would poison the whole window's mean
      window_loss += loss_value;
      ++window_loss_steps;
    }
    window_ms += ms;
    window_samples += samples;
    ++window_steps;

    const bool logged = step % o.log_interval == 0 || step == total;
    const double mean_ms = train_ms / double(step);
    const double eta_s = mean_ms * double(total - step) / 1000.0;
    if (logged) {
      StepMetrics m{.step = step,
                    .epoch = per_epoch > 0 ? (step - 1) / per_epoch : 0,
                    .loss = window_loss_steps > 0 ? window_loss / double(window_loss_steps)
                                                  : std::numeric_limits<double>::quiet_NaN(),
                    .lr = lr_now,
                    .scale = scale_used,
                    .samples_per_s = double(window_samples) / (window_ms / 1000.0),
                    .ms = window_ms / double(window_steps)};
      r.log.push_back(m);
      if (metrics_file.is_open()) metrics_file << metrics_json(m) << "\n" << std::flush;
      window_loss = window_ms = 0.0;
      window_steps = window_samples = window_loss_steps = 0;
    }
    const StepMetrics& last = r.log.empty() ? StepMetrics{} : r.log.back();
    progress.step(step, total, logged ? last.loss : loss_value,
                  double(train_samples) / (train_ms / 1000.0), scale_used, eta_s, logged);
    if (eval_every > 0 && step % eval_every == 0) run_eval();
    const bool stop = o.stop_requested && o.stop_requested();
    if (stop || (o.checkpoint_every > 0 && step % o.checkpoint_every == 0)) {
      MIXP_CHECK(!o.out_dir.empty(), "train: stopping writes a checkpoint, which needs out_dir");
      save_checkpoint(std::nullopt);
    }
    if (stop) {
      r.stopped = true;
      break;
    }
  }
  if (r.stopped) {
    progress.finish();
    r.steps = step;
    r.epochs = per_epoch > 0 ? step / per_epoch : 0;
    r.final_train_loss = r.log.empty() ? 0.0 : r.log.back().loss;
    r.median_step_ms = median(step_ms);
    r.final_loss_scale = scaler.get_scale();
    progress.message("stopped at step " + std::to_string(step) + ": checkpoint " +
                     r.last_checkpoint);
    return r;
  }
  run_eval();
  progress.finish();

  r.steps = step;
  r.epochs = per_epoch > 0 ? step / per_epoch : 0;
  r.final_train_loss = r.log.empty() ? 0.0 : r.log.back().loss;
  r.final_eval_loss = r.evals.back().loss;
  r.test_accuracy = r.evals.back().accuracy;
  r.bits_per_char = r.evals.back().bits_per_char;
  r.median_step_ms = median(step_ms);
  r.samples_per_s = train_ms > 0 ? double(train_samples) / (train_ms / 1000.0) : 0.0;
  const memory::Stats stats = memory::stats();
  for (int t = 0; t < kMemoryTagCount; ++t) {
    const MemoryTag tag = MemoryTag(t);
    r.peak_memory[name_of(tag)] = stats.peak(tag);
  }
  r.peak_memory["total"] = stats.peak_total;
  r.final_loss_scale = scaler.get_scale();

  if (!o.out_dir.empty()) {
    metrics_file.close();
    io::write_file_atomically(o.out_dir + "/summary.json", summary_json(r));
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, p] : model.named_parameters()) tensors.emplace_back(name, p->detach());
    for (const auto& [name, b] : model.named_buffers()) tensors.emplace_back(name, *b);
    io::write_safetensors(o.out_dir + "/model.safetensors", tensors,
                          {{"format", "pt"}, {"model", o.model_name}, {"precision", preset.name}});
    diag::Curve train_curve, eval_curve;
    train_curve.label = "train";
    eval_curve.label = "eval";
    for (const StepMetrics& m : r.log) {
      train_curve.x.push_back(double(m.step));
      train_curve.y.push_back(m.loss);
    }
    for (const EvalMetrics& e : r.evals) {
      eval_curve.x.push_back(double(e.step));
      eval_curve.y.push_back(e.loss);
    }
    diag::write_line_plot(
        o.out_dir + "/loss.svg", {train_curve, eval_curve},
        {.title = o.model_name + " (" + preset.name + ")",
         .x_label = "step",
         .y_label = task == nn::Task::regression ? "mean squared error" : "cross-entropy loss"});
  }
  if (o.log && o.progress != Progress::none) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "done: %lld steps, train loss %.4f, eval loss %.4f, %.1f samples/s, "
                  "%lld skipped, loss scale %g",
                  (long long)r.steps, r.final_train_loss, r.final_eval_loss, r.samples_per_s,
                  (long long)r.skipped_steps, r.final_loss_scale);
    progress.message(buf);
  }
  return r;
}

}  // namespace mixp::train
