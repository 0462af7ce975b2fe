// The trainer's records as JSON, and the files a finished run writes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixp/train/trainer.h"

namespace mixp::train {

nlohmann::json step_json(const StepMetrics& m);
StepMetrics step_of(const nlohmann::json& j);
nlohmann::json eval_json(const EvalMetrics& e);
EvalMetrics eval_of(const nlohmann::json& j);

/// The run's configuration as a JSON object: TrainOptions::config when set, else the
/// trainer's own options.
nlohmann::json config_object(const TrainOptions& options);

/// Writes model.safetensors (after checking every floating-point value is finite: a diverged
/// model is refused, naming the tensor), loss.svg, then summary.json, into out_dir.
void write_finished_run(const std::string& out_dir, TrainModel& model, const TrainResult& result);

/// A finished run read back from its folder's summary.json and metrics.jsonl (for compare's
/// --resume). Throws mixp::Error naming the file that does not read.
TrainResult read_finished_run(const std::string& out_dir);

}  // namespace mixp::train
