// The trainer's records as JSON, and the files of a finished run.
#include "train/report.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "mixp/diag/svg.h"
#include "mixp/error.h"
#include "mixp/io/safetensors.h"

namespace mixp::train {
namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

const char* task_name(nn::Task task) {
  switch (task) {
    case nn::Task::classification: return "classification";
    case nn::Task::language_model: return "language_model";
    case nn::Task::regression: return "regression";
  }
  return "unknown";
}

// Adaptive precision's moves and final formats, and the FLOP shares of an FP4 recipe.
json precision_json(const TrainResult& r) {
  json decisions = json::array(), formats = json::array();
  for (const amp::PrecisionDecision& d : r.precision_decisions)
    decisions.push_back({{"step", d.step},
                         {"layer", d.layer},
                         {"from", amp::name_of(d.from)},
                         {"to", amp::name_of(d.to)},
                         {"statistic", d.statistic},
                         {"value", d.value}});
  for (const auto& [layer, format] : r.layer_formats)
    formats.push_back({{"layer", layer}, {"format", format}});
  return {{"linear_flop_shares", r.linear_flop_shares},
          {"precision_decisions", decisions},
          {"layer_formats", formats}};
}

void read_precision_json(const json& j, TrainResult& r) {
  if (j.contains("linear_flop_shares"))
    r.linear_flop_shares = j.at("linear_flop_shares").get<std::map<std::string, double>>();
  if (j.contains("precision_decisions"))
    for (const json& d : j.at("precision_decisions"))
      r.precision_decisions.push_back(
          {.step = d.at("step").get<int64_t>(),
           .layer = d.at("layer").get<std::string>(),
           .from = amp::parse_layer_format(d.at("from").get<std::string>()),
           .to = amp::parse_layer_format(d.at("to").get<std::string>()),
           .statistic = d.at("statistic").get<std::string>(),
           .value = d.at("value").get<double>()});
  if (j.contains("layer_formats"))
    for (const json& f : j.at("layer_formats"))
      r.layer_formats.emplace_back(f.at("layer").get<std::string>(),
                                   f.at("format").get<std::string>());
}

json summary_object(const TrainResult& r) {
  json evals = json::array();
  for (const EvalMetrics& e : r.evals) evals.push_back(eval_json(e));
  json memory = json::object(), by_dtype = json::object();
  for (const auto& [tag, bytes] : r.peak_memory) memory[tag] = bytes;
  for (const auto& [dtype, bytes] : r.peak_memory_by_dtype) by_dtype[dtype] = bytes;
  const json config = r.config.empty() ? json(nullptr) : json::parse(r.config, nullptr, false);
  json summary = {{"run_id", r.run_id},
                  {"mixp_version", version()},
                  {"model", r.model_name},
                  {"task", task_name(r.task)},
                  {"precision", r.precision},
                  {"optimizer_state", r.optimizer_state},
                  {"config", config},
                  {"steps", r.steps},
                  {"epochs", r.epochs},
                  {"final_train_loss", r.final_train_loss},
                  {"final_eval_loss", r.final_eval_loss},
                  {"test_accuracy", optional_number(r.test_accuracy)},
                  {"bits_per_char", optional_number(r.bits_per_char)},
                  {"median_step_ms", r.median_step_ms},
                  {"samples_per_s", r.samples_per_s},
                  {"peak_memory_bytes", memory},
                  {"peak_memory_by_dtype_bytes", by_dtype},
                  {"final_loss_scale", r.final_loss_scale},
                  {"skipped_steps", r.skipped_steps},
                  {"nonfinite_skipped_steps", r.nonfinite_steps},
                  {"world_size", r.world_size},
                  {"reduce_dtype", r.reduce_dtype.empty() ? json(nullptr) : json(r.reduce_dtype)},
                  {"deterministic", r.deterministic},
                  {"zero_stage", r.zero_stage},
                  {"bytes_sent_per_step", r.bytes_sent_per_step},
                  {"evals", evals}};
  if (!r.linear_flop_shares.empty()) summary.update(precision_json(r));
  return summary;
}

void write_loss_plot(const std::string& path, const TrainResult& r) {
  diag::PlotOptions options = loss_plot_options(r);
  options.title = r.model_name + " (" + r.precision + ")";
  diag::write_line_plot(path, loss_curves(r, ""), options);
}

double number_or_nan(const json& j, const char* key) {
  return j.at(key).is_null() ? NAN : j.at(key).get<double>();
}

std::optional<double> optional_of(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

}  // namespace

std::vector<diag::Curve> loss_curves(const TrainResult& r, const std::string& prefix) {
  diag::Curve train_curve{.label = prefix + "train"};
  diag::Curve eval_curve{.label = prefix + "eval", .markers = true};
  for (const StepMetrics& m : r.log) {
    train_curve.x.push_back(double(m.step));
    train_curve.y.push_back(m.loss);
  }
  for (const EvalMetrics& e : r.evals) {
    eval_curve.x.push_back(double(e.step));
    eval_curve.y.push_back(e.loss);
  }
  return {train_curve, eval_curve};
}

std::vector<diag::Span> step_spans(const TrainResult& r) {
  std::vector<diag::Span> spans;
  int64_t previous = 0;
  for (const StepMetrics& m : r.log) {
    const std::string steps = m.step - previous > 1 ? "steps " + std::to_string(previous + 1) +
                                                          "-" + std::to_string(m.step)
                                                    : "step " + std::to_string(m.step);
    if (m.skipped > 0)
      spans.push_back({.kind = diag::SpanKind::skipped_steps,
                       .from = double(previous),
                       .to = double(m.step),
                       .label = steps + ": " + std::to_string(m.skipped) + " skipped"});
    if (m.nonfinite_losses > 0)
      spans.push_back(
          {.kind = diag::SpanKind::nonfinite_loss,
           .from = double(previous),
           .to = double(m.step),
           .label = steps + ": " + std::to_string(m.nonfinite_losses) + " with a non-finite loss"});
    previous = m.step;
  }
  return spans;
}

diag::PlotOptions loss_plot_options(const TrainResult& r) {
  const bool log_y = diag::spans_decades(loss_curves(r, ""));
  const std::string loss =
      r.task == nn::Task::regression ? "mean squared error" : "cross-entropy loss";
  return {.x_label = "step",
          .y_label = log_y ? loss + " (log scale)" : loss,
          .spans = step_spans(r),
          .log_y = log_y};
}

json step_json(const StepMetrics& m) {
  return {{"step", m.step},
          {"epoch", m.epoch},
          {"loss", m.loss},
          {"lr", m.lr},
          {"scale", m.scale},
          {"samples_per_s", m.samples_per_s},
          {"ms", m.ms},
          {"grad_norm", optional_number(m.grad_norm)},
          {"grad_norm_max", optional_number(m.grad_norm_max)},
          {"skipped", m.skipped},
          {"nonfinite", m.nonfinite},
          {"nonfinite_losses", m.nonfinite_losses}};
}

// Lines of older files lack the window's gradient norms and counts: none recorded.
StepMetrics step_of(const json& j) {
  return {.step = j.at("step").get<int64_t>(),
          .epoch = j.at("epoch").get<int64_t>(),
          .loss = number_or_nan(j, "loss"),
          .lr = j.at("lr").get<double>(),
          .scale = j.at("scale").get<double>(),
          .samples_per_s = j.at("samples_per_s").get<double>(),
          .ms = j.at("ms").get<double>(),
          .grad_norm = optional_of(j, "grad_norm"),
          .grad_norm_max = optional_of(j, "grad_norm_max"),
          .skipped = j.value("skipped", int64_t(0)),
          .nonfinite = j.value("nonfinite", int64_t(0)),
          .nonfinite_losses = j.value("nonfinite_losses", int64_t(0))};
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
  e.loss = number_or_nan(j, "loss");
  e.accuracy = optional_of(j, "accuracy");
  e.bits_per_char = optional_of(j, "bits_per_char");
  return e;
}

json config_object(const TrainOptions& o) {
  if (!o.config.empty()) {
    json j = json::parse(o.config, nullptr, /*allow_exceptions=*/false);
    MIXP_ASSERT(j.is_object(), "TrainOptions::config is not a JSON object");
    return j;
  }
  const OptimizerConfig& c = o.optimizer;
  return {
      {"model", o.model_name},
      {"precision", o.precision},
      {"optimizer_state", name_of(optimizer_state_dtype(o))},
      {"epochs", o.epochs},
      {"steps", o.steps},
      {"lr", o.lr ? json(*o.lr) : json(nullptr)},
      {"optimizer",
       {{"name", c.name},
        {"weight_decay", c.weight_decay ? json(*c.weight_decay) : json(nullptr)},
        {"betas", c.betas ? json(*c.betas) : json(nullptr)},
        {"eps", c.eps},
        {"momentum", c.momentum},
        {"nesterov", c.nesterov}}},
      {"schedule",
       {{"name", o.schedule.name},
        {"warmup_steps", o.schedule.warmup_steps ? json(*o.schedule.warmup_steps) : json(nullptr)},
        {"min_lr", o.schedule.min_lr ? json(*o.schedule.min_lr) : json(nullptr)}}},
      {"clip_norm", o.clip_norm},
      {"seed", o.seed}};
}

void write_finished_run(const std::string& out_dir, TrainModel& model, const TrainResult& r) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, p] : model.named_parameters()) tensors.emplace_back(name, p->detach());
  for (const auto& [name, b] : model.named_buffers()) tensors.emplace_back(name, *b);
  const io::SafetensorsFile check{{tensors.begin(), tensors.end()}, {}};
  const std::optional<io::NonFiniteElement> bad = io::find_nonfinite(check);
  MIXP_CHECK(!bad, "the trained model is not finite: '", bad->tensor, "' holds ", bad->value,
             " at element ", bad->element, "; no model.safetensors or summary.json was written");
  io::write_safetensors(out_dir + "/model.safetensors", tensors,
                        {{"format", "pt"},
                         {"model", r.model_name},
                         {"precision", r.precision},
                         {"run_id", r.run_id},
                         {"step", std::to_string(r.steps)},
                         {"mixp_version", version()},
                         {"config", r.config}});
  write_loss_plot(out_dir + "/loss.svg", r);
  // Last: a folder with summary.json holds a finished run.
  io::write_file_atomically(out_dir + "/summary.json", summary_json(r));
}

TrainResult read_finished_run(const std::string& dir) {
  const std::string path = dir + "/summary.json";
  TrainResult r;
  try {
    std::ifstream in(path);
    MIXP_CHECK(in, "cannot read ", path);
    const json j = json::parse(in);
    r.run_id = j.value("run_id", std::string());
    r.model_name = j.at("model").get<std::string>();
    r.precision = j.at("precision").get<std::string>();
    r.optimizer_state = j.at("optimizer_state").get<std::string>();
    const std::string task = j.at("task").get<std::string>();
    r.task = task == "language_model" ? nn::Task::language_model
             : task == "regression"   ? nn::Task::regression
                                      : nn::Task::classification;
    r.steps = j.at("steps").get<int64_t>();
    r.epochs = j.at("epochs").get<int64_t>();
    r.final_train_loss = number_or_nan(j, "final_train_loss");
    r.final_eval_loss = number_or_nan(j, "final_eval_loss");
    r.test_accuracy = optional_of(j, "test_accuracy");
    r.bits_per_char = optional_of(j, "bits_per_char");
    if (!j.at("config").is_null()) r.config = j.at("config").dump();
    r.median_step_ms = j.at("median_step_ms").get<double>();
    r.world_size = j.value("world_size", 1);
    if (j.contains("reduce_dtype") && !j.at("reduce_dtype").is_null())
      r.reduce_dtype = j.at("reduce_dtype").get<std::string>();
    r.deterministic = j.value("deterministic", false);
    r.zero_stage = j.value("zero_stage", 0);
    r.bytes_sent_per_step = j.value("bytes_sent_per_step", int64_t{0});
    read_precision_json(j, r);
    r.samples_per_s = j.at("samples_per_s").get<double>();
    for (const auto& [tag, bytes] : j.at("peak_memory_bytes").items())
      r.peak_memory[tag] = bytes.get<int64_t>();
    if (j.contains("peak_memory_by_dtype_bytes"))
      for (const auto& [dtype, bytes] : j.at("peak_memory_by_dtype_bytes").items())
        r.peak_memory_by_dtype[dtype] = bytes.get<int64_t>();
    r.final_loss_scale = j.at("final_loss_scale").get<double>();
    r.skipped_steps = j.at("skipped_steps").get<int64_t>();
    r.nonfinite_steps = j.at("nonfinite_skipped_steps").get<int64_t>();
    for (const json& e : j.at("evals")) r.evals.push_back(eval_of(e));
  } catch (const json::exception& e) {
    MIXP_CHECK(false, path, " does not read: ", e.what());
  }
  r.log = read_metrics(dir + "/metrics.jsonl").log;
  return r;
}

MetricsFile read_metrics(const std::string& path) {
  std::ifstream in(path);
  MIXP_CHECK(in, "cannot read ", path);
  MetricsFile file;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    const bool last = in.eof();  // no newline after it: the write may have been cut short
    try {
      const json j = json::parse(line);
      const std::string type = j.value("type", std::string("step"));
      if (type == "step") file.log.push_back(step_of(j));
      if (type == "eval") file.evals.push_back(eval_of(j));
    } catch (const json::exception& e) {
      if (last) break;  // a run killed while writing its last line
      MIXP_CHECK(false, path, " line ", number, " does not read: ", e.what());
    }
  }
  return file;
}

std::string summary_json(const TrainResult& result) {
  return summary_object(result).dump(2) + "\n";
}

std::string metrics_json(const StepMetrics& m, const std::string& run_id) {
  json j = step_json(m);
  j["type"] = "step";
  if (!run_id.empty()) j["run_id"] = run_id;
  return j.dump();
}

std::string metrics_json(const EvalMetrics& e, const std::string& run_id) {
  json j = {{"type", "eval"}, {"step", e.step}, {"loss", e.loss}};
  if (e.accuracy) j["accuracy"] = *e.accuracy;
  if (e.bits_per_char) j["bits_per_char"] = *e.bits_per_char;
  if (!run_id.empty()) j["run_id"] = run_id;
  return j.dump();
}

const char* version() { return MIXP_VERSION; }

}  // namespace mixp::train
