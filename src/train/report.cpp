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

json summary_object(const TrainResult& r) {
  json evals = json::array();
  for (const EvalMetrics& e : r.evals) evals.push_back(eval_json(e));
  json memory = json::object();
  for (const auto& [tag, bytes] : r.peak_memory) memory[tag] = bytes;
  const json config = r.config.empty() ? json(nullptr) : json::parse(r.config, nullptr, false);
  return {{"run_id", r.run_id},
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
          {"final_loss_scale", r.final_loss_scale},
          {"skipped_steps", r.skipped_steps},
          {"nonfinite_skipped_steps", r.nonfinite_steps},
          {"evals", evals}};
}

void write_loss_plot(const std::string& path, const TrainResult& r) {
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
      path, {train_curve, eval_curve},
      {.title = r.model_name + " (" + r.precision + ")",
       .x_label = "step",
       .y_label = r.task == nn::Task::regression ? "mean squared error" : "cross-entropy loss"});
}

}  // namespace

json step_json(const StepMetrics& m) {
  return {{"step", m.step}, {"epoch", m.epoch}, {"loss", m.loss},
          {"lr", m.lr},     {"scale", m.scale}, {"samples_per_s", m.samples_per_s},
          {"ms", m.ms}};
}

StepMetrics step_of(const json& j) {
  return {.step = j.at("step").get<int64_t>(),
          .epoch = j.at("epoch").get<int64_t>(),
          .loss = j.at("loss").is_null() ? NAN : j.at("loss").get<double>(),
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
  e.loss = j.at("loss").is_null() ? NAN : j.at("loss").get<double>();
  if (!j.at("accuracy").is_null()) e.accuracy = j.at("accuracy").get<double>();
  if (!j.at("bits_per_char").is_null()) e.bits_per_char = j.at("bits_per_char").get<double>();
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
    r.final_train_loss = j.at("final_train_loss").get<double>();
    r.final_eval_loss = j.at("final_eval_loss").get<double>();
    if (!j.at("test_accuracy").is_null()) r.test_accuracy = j.at("test_accuracy").get<double>();
    if (!j.at("bits_per_char").is_null()) r.bits_per_char = j.at("bits_per_char").get<double>();
    r.median_step_ms = j.at("median_step_ms").get<double>();
    r.samples_per_s = j.at("samples_per_s").get<double>();
    for (const auto& [tag, bytes] : j.at("peak_memory_bytes").items())
      r.peak_memory[tag] = bytes.get<int64_t>();
    r.final_loss_scale = j.at("final_loss_scale").get<double>();
    r.skipped_steps = j.at("skipped_steps").get<int64_t>();
    r.nonfinite_steps = j.at("nonfinite_skipped_steps").get<int64_t>();
    for (const json& e : j.at("evals")) r.evals.push_back(eval_of(e));
    std::ifstream metrics(dir + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);)
      if (!line.empty()) r.log.push_back(step_of(json::parse(line)));
  } catch (const json::exception& e) {
    MIXP_CHECK(false, path, " does not read: ", e.what());
  }
  return r;
}

std::string summary_json(const TrainResult& result) {
  return summary_object(result).dump(2) + "\n";
}

std::string metrics_json(const StepMetrics& m, const std::string& run_id) {
  json j = step_json(m);
  if (!run_id.empty()) j["run_id"] = run_id;
  return j.dump();
}

const char* version() { return MIXP_VERSION; }

}  // namespace mixp::train
