// The trainer's records as JSON, and the files a finished run writes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixp/diag/svg.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

/// A step's record (checkpoints' history, metrics.jsonl without "type" and "run_id"), and
/// back: lines of older files without the gradient norms and window counts read as none.
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

/// The step and evaluation lines of a metrics.jsonl (a line without "type" is a step line).
/// Throws mixp::Error naming the file and line that does not read; a last line without its
/// newline that does not read (a run killed as it wrote it) is left out.
struct MetricsFile {
  std::vector<StepMetrics> log;
  std::vector<EvalMetrics> evals;
};
MetricsFile read_metrics(const std::string& path);

/// The training loss (a line per logged step) and the evaluation loss (a marker per
/// evaluation) of a run, labelled prefix + "train" and prefix + "eval".
std::vector<diag::Curve> loss_curves(const TrainResult& result, const std::string& prefix);
/// A span per metrics window that skipped steps, and one per window with a non-finite loss.
std::vector<diag::Span> step_spans(const TrainResult& result);
/// loss.svg's axis labels and spans, without a title; a log y axis when the losses span more
/// than two powers of ten (a diverging run).
diag::PlotOptions loss_plot_options(const TrainResult& result);

/// A finished run read back from its folder's summary.json and metrics.jsonl (for compare's
/// --resume). Throws mixp::Error naming the file that does not read.
TrainResult read_finished_run(const std::string& out_dir);

}  // namespace mixp::train
