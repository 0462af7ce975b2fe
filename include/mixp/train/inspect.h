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
// With block_formats (names of the block-scaled presets: mxfp8, fp8-block, nvfp4, mxfp4), it
// also keeps every nn::Linear layer's input, weight and output gradient (divided by the loss
// scale) of the observation step and reports, per preset, what its recipe's quantization does
// to them block by block (diag::block_scale_stats, mixp/diag/block_stats.h): inputs and output
// gradients in 1 x block blocks along their last dimension, as the forward GEMM and dgrad read
// them, weights in the recipe's weight blocks (nvfp4: 16x16 tiles, mxfp4: 32x32, fp8-block:
// 128x128, mxfp8: 1x32 along in); FP4 gradients rounded stochastically when the recipe does,
// from the stream that layer's dgrad would draw at this step. Presets take the run's MX scale
// rule and, FP4 ones, its --fp4-without ablations. Every Linear layer is reported; those an
// FP4 recipe keeps in bf16 (its last 15%) are marked so. The wgrad operands (transposed, after
// the Hadamard transform) are not measured.
//
// The run folder (out_dir; nothing written when empty): inspect.json (every number above, the
// histograms and the training records, and with block_formats "block_scales"),
// activation_gradients.svg (every layer's probe activation gradients, the paper's figure, with
// fp16's range and the loss scale marked), layers/<layer>.svg, one per layer, and with
// block_formats block_scales.csv (one line per preset, layer and tensor).
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
#include "mixp/diag/block_stats.h"
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
  /// Block-scaled presets whose quantization of the Linear layers to report (see above).
  std::vector<std::string> block_formats{};
};

/// One Linear layer under one block-scaled preset.
struct BlockScaleLayer {
  std::string layer;
  /// The preset's name when its recipe quantizes this layer, "bf16" when an FP4 recipe keeps it
  /// in bf16 (the figures then say what FP4 would do to it).
  std::string computes;
  /// The output gradient's are empty (0 blocks) when the loss does not reach the layer.
  diag::BlockScaleStats input, weight, output_gradient;
};

struct BlockScaleInspection {
  std::string preset;
  std::string recipe;  ///< the recipe in words, for the table
  std::vector<BlockScaleLayer> layers{};
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
  /// One per InspectOptions::block_formats, in its order.
  std::vector<BlockScaleInspection> block_scales;
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
