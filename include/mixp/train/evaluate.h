// mixp/train/evaluate.h — `mixp eval`: a trained model's loss, accuracy or bits per character
// over a whole evaluation split, under one or several precision presets.
//
// The evaluation is the trainer's own (the same batches through the same function), so the
// figure for a run's final weights under its own preset is the one its summary.json reports:
//   classifiers       every image of the test set (t10k-*), in file order
//   language models   every window of `context` characters of the validation split (the last
//                     val_fraction of the text), in order: each character after the first is
//                     predicted once (data::for_each_text_window). Bits per character = loss /
//                     ln 2.
//   deep-mlp          its 1024 synthetic test samples, made from the run's seed
// With `data`, the model reads other data: a folder of IDX files (its test set) or a text file,
// all of which is evaluated, in the model's vocabulary (a character outside it is an error
// naming it).
//
// Evaluating the same weights under several presets shows how sensitive the trained model is to
// each format: the weights are cast as each preset stores them and the forward pass runs under
// its autocast. Under the run's own FP8 preset the scales are those the trainer evaluated with:
// the FP8 state of the run's checkpoint of the same step (a finished run keeps one of its end).
// Under another FP8 preset, or without that checkpoint, they are calibrated on the first batch
// (one forward pass whose amax sets them) before the evaluation.
//
// Example:
//
//   mixp::train::EvalReport r = mixp::train::evaluate_trained(
//       "runs/gpt-fp32", {.precisions = {"fp32", "amp-bf16", "amp-fp16", "fp8", "mxfp8"}});
//   std::fputs(mixp::train::eval_table(r).c_str(), stdout);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mixp/train/trainer.h"

namespace mixp::train {

struct EvalRequest {
  /// Empty: the run's own evaluation split (its data must still have the run's fingerprint).
  /// Else a folder of IDX files or a text file.
  std::string data{};
  std::vector<std::string> precisions{};  ///< presets; empty: the run's own
  int64_t batch = 0;                      ///< 0: the run's batch size
  int threads = 0;                        ///< > 0: mixp::set_num_threads(threads)
  /// How mxfp8 rounds its block scales; none: the run's own rule.
  std::optional<amp::MxScaleRounding> mx_scale_rounding{};
};

struct EvalRow {
  std::string precision;
  std::optional<EvalMetrics> metrics;  ///< none when the preset failed
  std::string error;                   ///< why it failed
};

struct EvalReport {
  std::string model;              ///< mlp, cnn, lstm, gpt or deep-mlp
  std::string source;             ///< the weights' file
  int64_t step = 0;               ///< the step of the weights (0: not recorded)
  std::string trained_precision;  ///< the run's preset
  std::string data;               ///< what was evaluated: "the validation split of PATH", ...
  int64_t predictions = 0;        ///< images, characters predicted, or samples
  std::vector<EvalRow> rows;      ///< one per precision, in the order asked
};

/// Evaluates the trained model at `path` (a run folder, model.safetensors or checkpoint, as
/// load_trained_model() reads) under each precision. A preset that fails (an unknown name is
/// refused up front) becomes a row with its error. Throws mixp::Error for a model that does not
/// load and for data that does not fit it.
EvalReport evaluate_trained(const std::string& path, const EvalRequest& request);

/// The report as a table (one row per precision, with the loss relative to the first row that
/// succeeded), and as a JSON object.
std::string eval_table(const EvalReport& report);
std::string eval_json(const EvalReport& report);

}  // namespace mixp::train
