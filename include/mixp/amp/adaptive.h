// mixp/amp/adaptive.h — precision that adapts per layer (presets auto-fp8 and auto-fp4): each
// Linear layer computes in FP4, FP8 or bf16, chosen and revised from the statistics of its own
// GEMM inputs.
//
// Example (what the trainer does under preset "auto-fp4"):
//
//   std::unique_ptr<amp::Fp8State> state = train::make_low_precision_state(preset, model, seed);
//   for (step ...) {
//     state->set_rounding_position(step, 0);   // also says whether this step measures
//     { amp::Autocast bf16(DType::bf16); amp::Fp8Autocast scope(*state); loss = ...; }
//     loss.backward();                         // measuring steps record the gradients' statistics
//     opt.step();
//     state->update();                         // decides, on measuring steps
//   }
//   for (const amp::PrecisionDecision& d : amp::adaptive_of(*state)->decisions()) ...
//
// How it decides. Every eligible layer starts in the recipe's lowest format (FP4 for auto-fp4,
// FP8 for auto-fp8); auto-fp4 takes NVIDIA's recipe's word that the last 15% of the Linear
// layers are not eligible for FP4 (arXiv 2509.25149), and keeps those in bf16. Every `interval`
// steps the first micro-batch measures, for each layer and each format from the lowest up to
// FP8, quantized as that format quantizes (FP4: the layer recipe's nvfp4 or mxfp4, weights in
// square tiles, nearest rounding; FP8: MXFP8, E4M3 with E8M0 scales per 32, rounded up):
//   the relative RMS error of the layer's forward product q(x) q(W)^T and of its
//   weight-gradient product q(dy^T) q(x^T)^T against the products of the bf16 values, each
//   over the same format's error on the product of two standard normal tensors (so 1 means
//   "as accurate as on well-behaved data"): the larger is the layer's badness;
//   the fraction of the nonzero values of x, W and dy that quantize to zero, above the normal
//   tensor's fraction: the largest is the flush excess; and whether any value is non-finite.
// quantization_stats gives a tensor's error, flushed, saturated and subnormal fractions.
// After the measuring step (update()):
//   up:   badness > up_ratio, or flush excess > flush_margin, or a non-finite value: the layer
//         moves one format up (FP4 -> FP8 -> bf16), at once;
//   down: in the format below, badness < down_ratio and flush excess < flush_margin / 2 in
//         `patience` measurements in a row: the layer moves one format down.
// The gap between up_ratio and down_ratio and the patience are the hysteresis that keeps a
// layer from flapping. Every move is a PrecisionDecision, kept in the state (checkpointed) and
// in the run's summary; the state also counts the Linear FLOPs (2 in forward, 4 in backward per
// multiply-add) each format ran. Decisions depend only on the measured values, which depend
// only on the run, so a resumed run makes the same decisions; across ranks, the measurements
// are the maximum over the ranks before anything is decided.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixp/amp/fp8.h"
#include "mixp/state_dict.h"
#include "mixp/tensor.h"

namespace mixp::amp {

enum class LayerFormat : uint8_t { fp4 = 0, fp8 = 1, bf16 = 2 };
const char* name_of(LayerFormat format);
/// The format name_of() names; mixp::Error for another name.
LayerFormat parse_layer_format(std::string_view name);

struct AdaptiveRecipe {
  LayerFormat lowest = LayerFormat::fp4;
  int64_t interval = 25;      ///< steps between measurements
  double up_ratio = 1.6;      ///< badness above which a layer moves up
  double down_ratio = 1.2;    ///< badness below which the format below counts as safe
  int patience = 4;           ///< safe measurements in a row before a layer moves down
  double flush_margin = 0.1;  ///< flushed fraction above the normal tensor's that moves up
};

/// What quantizing one tensor in one format did to it (see the top of this file).
struct QuantizationStats {
  double error = 0.0;
  double flushed = 0.0;
  double saturated = 0.0;
  double subnormal = 0.0;
  bool nonfinite = false;  ///< the tensor held a NaN or an infinity
};

/// One move of one layer.
struct PrecisionDecision {
  int64_t step = 0;  ///< the step whose measurement decided it (1-based, as the log's)
  std::string layer;
  LayerFormat from = LayerFormat::fp4, to = LayerFormat::fp4;
  std::string statistic;  ///< "error", "flushed", "nonfinite" (up) or "safe" (down)
  double value = 0.0;     ///< the statistic's value: badness, flush excess, or the streak
};

/// The adaptive state of a model's Linear layers, attached to its Fp8State
/// (Fp8State::set_extension) by train::make_low_precision_state under an adaptive preset.
class AdaptivePrecision : public Fp8State::Extension {
 public:
  /// `layers`: the Linear layers' names in model order; `fp4`: the FP4 format's recipe;
  /// `eligible`: one flag per layer (empty: all), false for a layer the recipe keeps in bf16
  /// whatever its statistics (FP4's last layers), which starts and stays there.
  AdaptivePrecision(AdaptiveRecipe recipe, Fp4Recipe fp4, std::vector<std::string> layers,
                    std::vector<bool> eligible = {});
  ~AdaptivePrecision() override;

  const AdaptiveRecipe& recipe() const { return recipe_; }
  LayerFormat format(size_t layer) const { return formats_.at(layer); }
  const std::vector<LayerFormat>& formats() const { return formats_; }
  const std::vector<std::string>& layers() const { return layers_; }
  const std::vector<PrecisionDecision>& decisions() const { return decisions_; }
  /// The state (an MXFP8 recipe) the layers in FP8 compute with.
  Fp8State& fp8_layers() { return *fp8_layers_; }

  /// Whether this step's first micro-batch measures: set from Fp8State::set_rounding_position.
  void begin(int64_t step, int64_t micro_batch) override;
  bool measuring() const { return measuring_; }
  /// Whether this step measures (on its first micro-batch): its end decides.
  bool measure_step() const { return measure_step_; }
  /// Measures the forward GEMM of `layer`: its input x [rows, in] and weight W [out, in].
  void measure_inputs(size_t layer, const Tensor& x, const Tensor& w);
  /// Measures the output gradient dy [rows, out] of `layer` and its weight-gradient GEMM
  /// dy^T x, x [rows, in] the layer's input.
  void measure_gradient(size_t layer, const Tensor& dy, const Tensor& x);
  /// The measurements of this step as numbers (for the maximum over ranks), and back.
  std::vector<double> measurements() const;
  void set_measurements(const std::vector<double>& values);
  /// After the step: decides on a measuring step; the FP8 layers' state's update().
  void update() override;
  void save(StateDict& state) const override;
  void load(const StateDict& state) override;

 private:
  // Per layer and candidate format: the worst badness and flush excess over its inputs, and
  // whether any was non-finite.
  struct Measured {
    double badness = 0.0, flush_excess = 0.0;
    bool nonfinite = false, seen = false;
  };
  Measured& measured(size_t layer, LayerFormat format);
  const QuantizationStats& baseline(LayerFormat format, Fp8Role role);
  double baseline_gemm_error(LayerFormat format);
  void note_flushed(size_t layer, LayerFormat format, Fp8Role role, const Tensor& values);
  void decide(size_t layer);

  AdaptiveRecipe recipe_;
  Fp4Recipe fp4_;
  std::vector<std::string> layers_;
  std::vector<bool> eligible_;
  std::vector<LayerFormat> formats_;
  std::vector<int> streaks_;
  std::vector<PrecisionDecision> decisions_;
  std::vector<Measured> measured_;  // [layer * 2 + format], fp4 and fp8
  std::map<std::pair<int, int>, QuantizationStats> baselines_;
  std::map<int, double> gemm_baselines_;
  std::unique_ptr<Fp8State> fp8_layers_;
  int64_t step_ = -1;          // the step begin() was last told of
  bool measure_step_ = false;  // this step measures (on micro-batch 0)
  bool measuring_ = false;     // and this micro-batch is the one
};

/// What `format` does to `values` (2-D, blocks along the last dimension) as input `role`,
/// against the same values in bf16 (see the top of this file); weights quantize in FP4's square
/// tiles. FP8 is MXFP8, E4M3 with its scales rounded up; bf16 is exact (all zeros).
QuantizationStats quantization_stats(const Tensor& values, LayerFormat format, Fp8Role role,
                                     const Fp4Recipe& fp4);

/// The relative RMS error of the product x W^T (x [rows, k], W [n, k]) computed by `format`'s
/// GEMM (as quantization_stats quantizes the operands) against the product of their bf16
/// values, summed in fp32; 0 for bf16.
double gemm_error(const Tensor& x, const Tensor& w, LayerFormat format, const Fp4Recipe& fp4);

/// The adaptive state attached to `state`, or null.
AdaptivePrecision* adaptive_of(Fp8State& state);

}  // namespace mixp::amp
