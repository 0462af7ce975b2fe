// compare: one model and seed under several presets; a table, compare.json and compare.svg.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "mixp/diag/svg.h"
#include "mixp/error.h"
#include "mixp/io/safetensors.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

std::string compare_table(const CompareResult& result) {
  std::string s;
  char buf[256];
  const bool classifier =
      !result.rows.empty() && result.rows.front().result.task == nn::Task::classification;
  std::snprintf(buf, sizeof buf, "%-10s %10s %10s %10s %9s %11s %9s %10s %9s %8s\n", "precision",
                "train loss", "eval loss", classifier ? "accuracy" : "bits/char", "ms/step",
                "samples/s", "speed", "peak MiB", "memory", "skipped");
  s += buf;
  for (const CompareRow& row : result.rows) {
    const TrainResult& r = row.result;
    const double metric =
        classifier ? 100.0 * r.test_accuracy.value_or(0.0) : r.bits_per_char.value_or(0.0);
    std::snprintf(buf, sizeof buf,
                  "%-10s %10.4f %10.4f %9.*f%s %9.2f %11.1f %8.2fx %10.1f %8.2fx %8lld\n",
                  r.precision.c_str(), r.final_train_loss, r.final_eval_loss, classifier ? 2 : 4,
                  metric, classifier ? "%" : " ", r.median_step_ms, r.samples_per_s,
                  row.speed_vs_baseline, double(r.peak_memory.at("total")) / (1 << 20),
                  row.memory_vs_baseline, (long long)r.skipped_steps);
    s += buf;
  }
  s += "speed and memory are relative to " + result.baseline + "\n";
  return s;
}

CompareResult compare(const std::function<RunInputs()>& make,
                      const std::vector<std::string>& precisions, const TrainOptions& options) {
  MIXP_CHECK(!precisions.empty(), "compare: no precisions given");
  std::set<std::string> seen;
  for (const std::string& p : precisions)
    MIXP_CHECK(seen.insert(p).second, "compare: precision '", p, "' is given twice");

  CompareResult result;
  for (const std::string& precision : precisions) {
    RunInputs inputs = make();
    MIXP_CHECK(inputs.model && inputs.data, "compare: the inputs of '", precision,
               "' lack a model or data");
    TrainOptions o = options;
    o.precision = precision;
    if (!options.out_dir.empty()) o.out_dir = options.out_dir + "/" + precision;
    CompareRow row;
    row.result = train(*inputs.model, *inputs.data, o);
    result.rows.push_back(std::move(row));
  }
  const CompareRow* base = &result.rows.front();
  for (const CompareRow& row : result.rows)
    if (row.result.precision == "fp32") base = &row;
  result.baseline = base->result.precision;
  const double base_speed = base->result.samples_per_s;
  const double base_memory = double(base->result.peak_memory.at("total"));
  for (CompareRow& row : result.rows) {
    row.speed_vs_baseline = base_speed > 0 ? row.result.samples_per_s / base_speed : 0.0;
    row.memory_vs_baseline =
        base_memory > 0 ? double(row.result.peak_memory.at("total")) / base_memory : 0.0;
  }

  const std::string table = compare_table(result);
  if (options.log) {
    std::fputs(table.c_str(), options.log);
    std::fflush(options.log);
  }
  if (!options.out_dir.empty()) {
    std::filesystem::create_directories(options.out_dir);
    nlohmann::json runs = nlohmann::json::array();
    for (const CompareRow& row : result.rows) {
      nlohmann::json j = nlohmann::json::parse(summary_json(row.result));
      j["speed_vs_baseline"] = row.speed_vs_baseline;
      j["memory_vs_baseline"] = row.memory_vs_baseline;
      j["run_dir"] = row.result.precision;
      runs.push_back(j);
    }
    const nlohmann::json doc = {{"model", options.model_name},
                                {"seed", options.seed},
                                {"baseline", result.baseline},
                                {"runs", runs}};
    io::write_file_atomically(options.out_dir + "/compare.json", doc.dump(2) + "\n");
    std::vector<diag::Curve> curves;
    for (const CompareRow& row : result.rows) {
      diag::Curve c;
      c.label = row.result.precision;
      for (const StepMetrics& m : row.result.log) {
        c.x.push_back(double(m.step));
        c.y.push_back(m.loss);
      }
      curves.push_back(std::move(c));
    }
    diag::write_line_plot(options.out_dir + "/compare.svg", curves,
                          {.title = options.model_name + ": training loss by precision",
                           .x_label = "step",
                           .y_label = "cross-entropy loss"});
  }
  return result;
}

}  // namespace mixp::train
