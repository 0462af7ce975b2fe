// compare: one model and seed under several presets; a table, compare.json and compare.svg.
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "mixp/amp/presets.h"
#include "mixp/diag/svg.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/train/trainer.h"
#include "train/report.h"
#include "train/run_folder.h"

namespace mixp::train {

namespace {

void compare_ratios(CompareResult& result, const CompareRow& base) {
  result.baseline = base.precision;
  const double base_speed = base.result.samples_per_s;
  const double base_memory = double(base.result.peak_memory.at("total"));
  for (CompareRow& row : result.rows) {
    if (row.failed()) continue;
    row.speed_vs_baseline = base_speed > 0 ? row.result.samples_per_s / base_speed : 0.0;
    row.memory_vs_baseline =
        base_memory > 0 ? double(row.result.peak_memory.at("total")) / base_memory : 0.0;
  }
}

nlohmann::json compare_json(const CompareResult& result, const std::string& model, uint64_t seed) {
  nlohmann::json runs = nlohmann::json::array();
  for (const CompareRow& row : result.rows) {
    nlohmann::json j;
    if (row.failed()) {
      j = {{"precision", row.precision},
           {"failed", true},
           {"stopped", row.result.stopped},
           {"error", row.error}};
    } else {
      j = nlohmann::json::parse(summary_json(row.result));
      j["failed"] = false;
      j["speed_vs_baseline"] = row.speed_vs_baseline;
      j["memory_vs_baseline"] = row.memory_vs_baseline;
    }
    j["run_dir"] = row.run_dir.empty() ? row.precision : row.run_dir;
    runs.push_back(j);
  }
  return {{"model", model},
          {"seed", seed},
          {"baseline", result.baseline},
          {"stopped", result.stopped},
          {"runs", runs}};
}

void write_compare_files(const CompareResult& result, const std::string& out_dir,
                         const std::string& model, uint64_t seed) {
  std::filesystem::create_directories(out_dir);
  io::write_file_atomically(out_dir + "/compare.json",
                            compare_json(result, model, seed).dump(2) + "\n");
  std::vector<diag::Curve> curves;
  for (const CompareRow& row : result.rows) {
    if (row.failed()) continue;
    diag::Curve c;
    c.label = row.precision;
    for (const StepMetrics& m : row.result.log) {
      c.x.push_back(double(m.step));
      c.y.push_back(m.loss);
    }
    curves.push_back(std::move(c));
  }
  if (curves.empty()) return;
  diag::write_line_plot(out_dir + "/compare.svg", curves,
                        {.title = model + ": training loss by precision",
                         .x_label = "step",
                         .y_label = "cross-entropy loss"});
}

// The baseline: fp32 when it finished, else the first row that did.
void set_baseline(CompareResult& result) {
  const CompareRow* base = nullptr;
  for (const CompareRow& row : result.rows) {
    if (row.failed()) continue;
    if (!base || (row.precision == "fp32" && base->precision != "fp32")) base = &row;
  }
  if (base) compare_ratios(result, *base);
}

}  // namespace

std::string compare_table(const CompareResult& result) {
  std::string s;
  char buf[512];
  const CompareRow* first = nullptr;
  for (const CompareRow& row : result.rows)
    if (!row.failed() && !first) first = &row;
  const bool classifier = first && first->result.task == nn::Task::classification;
  std::snprintf(buf, sizeof buf, "%-10s %10s %10s %10s %9s %11s %9s %10s %9s %8s\n", "precision",
                "train loss", "eval loss", classifier ? "accuracy" : "bits/char", "ms/step",
                "samples/s", "speed", "peak MiB", "memory", "skipped");
  s += buf;
  for (const CompareRow& row : result.rows) {
    if (row.failed()) {
      std::snprintf(buf, sizeof buf, "%-10s %s: %s\n", row.precision.c_str(),
                    row.result.stopped ? "STOPPED" : "FAILED", row.error.c_str());
      s += buf;
      continue;
    }
    const TrainResult& r = row.result;
    const double metric =
        classifier ? 100.0 * r.test_accuracy.value_or(0.0) : r.bits_per_char.value_or(0.0);
    std::snprintf(buf, sizeof buf,
                  "%-10s %10.4f %10.4f %9.*f%s %9.2f %11.1f %8.2fx %10.1f %8.2fx %8lld\n",
                  row.precision.c_str(), r.final_train_loss, r.final_eval_loss, classifier ? 2 : 4,
                  metric, classifier ? "%" : " ", r.median_step_ms, r.samples_per_s,
                  row.speed_vs_baseline, double(r.peak_memory.at("total")) / (1 << 20),
                  row.memory_vs_baseline, (long long)r.skipped_steps);
    s += buf;
  }
  if (first) s += "speed and memory are relative to " + result.baseline + "\n";
  return s;
}

namespace {

// One precision of compare(): trained, resumed, or read back from its finished folder.
CompareRow run_precision(const std::function<RunInputs()>& make, const std::string& precision,
                         const TrainOptions& options) {
  CompareRow row;
  row.precision = precision;
  TrainOptions o = options;
  o.precision = precision;
  // --fp4-without ablates the FP4 presets of the comparison; the others run whole.
  const amp::Preset& preset = amp::preset(precision);
  if (!preset.fp8 || !preset.fp8->fp4) o.fp4_without = {};
  if (!o.config.empty()) {  // the run's configuration names its own precision
    nlohmann::json config = nlohmann::json::parse(o.config);
    nlohmann::json& train = config.contains("train") ? config["train"] : config;
    train["precision"] = precision;
    if (train.contains("fp4_without")) train["fp4_without"] = amp::name_of(o.fp4_without);
    o.config = config.dump();
  }
  if (!options.out_dir.empty()) o.out_dir = options.out_dir + "/" + precision;
  try {
    if (options.resume) {
      if (std::filesystem::exists(o.out_dir + "/summary.json")) {
        row.result = read_finished_run(o.out_dir);
        return row;
      }
      o.resume = !io::list_checkpoints(o.out_dir).empty();
      o.overwrite = !o.resume;  // compare's own unfinished folder, with nothing to resume
    }
    RunInputs inputs = make();
    MIXP_CHECK(inputs.model && inputs.data, "the inputs of '", precision, "' lack a model or data");
    row.result = train(*inputs.model, *inputs.data, o);
    if (row.result.stopped)
      row.error =
          "stopped at step " + std::to_string(row.result.steps) + "; continue with --resume";
  } catch (const Error& e) {
    row.error = e.message();
  }
  return row;
}

}  // namespace

CompareResult compare(const std::function<RunInputs()>& make,
                      const std::vector<std::string>& precisions, const TrainOptions& options) {
  MIXP_CHECK(!precisions.empty(), "compare: no precisions given");
  std::set<std::string> seen;
  for (const std::string& p : precisions)
    MIXP_CHECK(seen.insert(p).second, "precision '", p, "' is given twice");

  if (!options.out_dir.empty() && !options.resume && !options.overwrite) {
    std::string used;
    if (std::filesystem::exists(options.out_dir + "/compare.json")) used = "compare.json";
    for (const std::string& p : precisions)
      if (!run_files(options.out_dir + "/" + p).empty())
        used += (used.empty() ? "" : ", ") + p + "/";
    MIXP_CHECK(used.empty(), "the folder ", options.out_dir, " holds an earlier compare (", used,
               "); continue it with --resume, choose another --out, or give --overwrite to "
               "replace it");
  }
  CompareResult result;
  for (const std::string& precision : precisions) {
    result.rows.push_back(run_precision(make, precision, options));
    if (result.rows.back().result.stopped) {
      result.stopped = true;
      break;
    }
  }
  set_baseline(result);
  if (!options.out_dir.empty())
    write_compare_files(result, options.out_dir, options.model_name, options.seed);
  return result;
}

CompareResult compare_finished(const std::vector<std::string>& run_dirs,
                               const std::string& out_dir) {
  MIXP_CHECK(!run_dirs.empty(), "compare: no run folders given");
  MIXP_CHECK(!out_dir.empty(), "compare: no folder to write the comparison to");
  std::string unfinished;
  for (const std::string& dir : run_dirs)
    if (!std::filesystem::exists(dir + "/summary.json")) unfinished += " " + dir;
  MIXP_CHECK(unfinished.empty(), "not finished runs (no summary.json):", unfinished,
             "; compare --from reads only finished runs");
  CompareResult result;
  std::map<std::string, int> precisions;
  for (const std::string& dir : run_dirs) {
    CompareRow row;
    row.result = read_finished_run(dir);
    row.precision = row.result.precision;
    ++precisions[row.precision];
    std::error_code error;
    const std::filesystem::path relative = std::filesystem::proximate(dir, out_dir, error);
    row.run_dir = error ? dir : relative.string();
    result.rows.push_back(std::move(row));
  }
  for (size_t i = 0; i < result.rows.size(); ++i) {
    if (precisions[result.rows[i].precision] == 1) continue;
    std::filesystem::path folder = std::filesystem::path(run_dirs[i]).lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();  // "runs/a/"
    result.rows[i].precision = folder.filename().string();
  }
  set_baseline(result);
  const TrainResult& first = result.rows.front().result;
  uint64_t seed = 0;
  if (!first.config.empty()) {
    const nlohmann::json config = nlohmann::json::parse(first.config, nullptr, false);
    const nlohmann::json& train = config.contains("train") ? config["train"] : config;
    if (train.is_object() && train.contains("seed") && train["seed"].is_number_unsigned())
      seed = train["seed"].get<uint64_t>();
  }
  write_compare_files(result, out_dir, first.model_name, seed);
  return result;
}

}  // namespace mixp::train
