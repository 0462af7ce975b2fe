// mixp/train/inspect.h — `mixp inspect`: where a model's gradients fall in fp16's range.
//
// run_inspect() trains a built-in model briefly under a precision preset (run_train's loop,
// with a diag::Collector on every layer with parameters, every `every` steps; steps 0: none,
// the initialization is inspected), then takes the next training batch through two steps
// without an update:
//   observation  the preset's own: autocast forward, backward at the run's final loss scale;
//   probe        the same weights in fp32, forward and backward in fp32, without scaling.
// The probe's activation gradients are the true ones (not already flushed by fp16, as the
// preset's may be), which is what Micikevicius et al. 2018 plotted (Fig. 3: activation
// gradients of an fp32 run against fp16's range). Per layer it reports:
//   - the fraction of the activation gradients that underflow fp16 (round to zero), unscaled
//     and at the loss scale the run ended with;
//   - the smallest power-of-two loss scale that keeps `keep` (99.9%) of them from flushing;
//   - the largest power-of-two loss scale at which neither the activation gradients nor the
//     weight gradients overflow fp16;
//   - the fraction of activation gradients that the observation step should have as exact
//     zeros (the probe's own zeros, from ReLU or max pooling, plus what fp16 flushes at the
//     loss scale) and the fraction it had: for a preset that computes them in fp16 the two
//     agree up to the rounding of the layers between;
// and for the whole model the same over every layer, and diag::advise's list of layers to keep
// in higher precision at the chosen scale.
//
// With `from` (a run folder, its model.safetensors or a checkpoint: train/trained_model.h), the
// model is the trained one: its shape, data, batch and seed are the run's, its weights are
// loaded before the brief training (steps 0: none, the trained weights are inspected as they
// are), and the preset is the run's unless run.train.precision names another. Without training,
// the loss scale is the one the run ended with (summary.json's, or the checkpoint's scaler)
// when it ran under the same preset, else the preset's initial one. Nothing is written to the
// run's folder.
//
// The run folder (out_dir; nothing written when empty): inspect.json (every number above, the
// histograms and the training records), activation_gradients.svg (every layer's probe
// activation gradients, the paper's figure, with fp16's range and the loss scale marked) and
// layers/<layer>.svg, one per layer.
//
// Example:
//
//   mixp::train::InspectOptions o;
//   o.run.model.name = "deep-mlp";
//   o.run.model.layers = 2;
//   o.run.model.width = 64;
//   o.run.train.precision = "amp-fp16";
//   o.run.train.steps = 20;
//   mixp::train::InspectResult r = mixp::train::run_inspect(o);
//   std::fputs(mixp::train::inspect_table(r).c_str(), stdout);
//
//   mixp::train::InspectOptions trained;        // a finished run's weights, under its preset
//   trained.from = "runs/cnn-amp-fp16";
//   trained.run.train.precision = "";
//   trained.run.train.steps = 0;
//   mixp::train::run_inspect(trained);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mixp/diag/advisor.h"
#include "mixp/diag/collector.h"
#include "mixp/diag/stats.h"
#include "mixp/train/run.h"

namespace mixp::train {

struct InspectOptions {
  RunConfig run;        ///< model, data, preset, steps (>= 0), seed; out_dir is ignored
  int64_t every = 10;   ///< training steps between collections (>= 1)
  double keep = 0.999;  ///< the fraction a safe loss scale keeps from flushing
  diag::AdvisorOptions advisor{};
  /// Asked of every tensor besides fp16, bf16, e4m3 and e5m2 (the JSON's "formats" of each
  /// record and layer), e.g. parse_format("e3m2").
  std::vector<Format> extra_formats{};
  std::string out_dir{};  ///< the inspect folder; empty: write nothing
  /// A trained model to inspect (see above); empty: a fresh one from `run`. Then run.model,
  /// run.data, run.batch and run.train.seed are ignored, and an empty run.train.precision is
  /// the run's own.
  std::string from{};
  /// With `from`: how mxfp8 rounds its block scales; none: the run's own rule.
  std::optional<amp::MxScaleRounding> mx_scale_rounding{};
};

struct LayerInspection {
  std::string layer;
  /// The probe's, in fp32 and unscaled; weights merges the layer's parameters, and so do
  /// weight_gradients.
  diag::TensorStats activations, activation_gradients, weights, weight_gradients;
  double underflow_unscaled = 0.0;            ///< fp16, of the activation gradients, at scale 1
  double underflow_at_scale = 0.0;            ///< ... at the run's final loss scale
  std::optional<int> smallest_safe_exponent;  ///< 2^k keeps `keep` of them
  std::optional<int> largest_safe_exponent;   ///< 2^k overflows neither gradient
  /// The exact zeros the observation step should have, of all the activation gradients: the
  /// probe's own zeros (ReLU, max pooling) and the non-zero values fp16 flushes at the scale.
  double predicted_zero_fraction = 0.0;
  /// Exact zeros of the activation gradients in the observation step.
  double observed_zero_fraction = 0.0;
  double observed_loss_scale = 1.0;  ///< the loss scale of that step
};

struct InspectResult {
  TrainResult train;        ///< the brief training run (steps 0 when none)
  double loss_scale = 1.0;  ///< the run's final loss scale (1 without scaling)
  double loss = 0.0;        ///< the observation step's loss
  std::vector<LayerInspection> layers;
  LayerInspection model;             ///< over every layer (layer = "all")
  std::vector<diag::Advice> advice;  ///< at loss_scale
  /// The Collector's, from training and then the observation step (step = train.steps).
  std::vector<diag::LayerRecord> records;
  std::string source{};     ///< with `from`: the file the weights came from
  int64_t source_step = 0;  ///< ... and the training step they are from (0: not recorded)
};

/// Throws mixp::Error for bad options or what run_train would report.
InspectResult run_inspect(const InspectOptions& options);
/// The per-layer table `mixp inspect` prints.
std::string inspect_table(const InspectResult& result);
/// inspect.json's text.
std::string inspect_json(const InspectResult& result);

}  // namespace mixp::train
