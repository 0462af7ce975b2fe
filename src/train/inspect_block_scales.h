// `mixp inspect --block-formats`: the per-block scale statistics of every Linear layer's input,
// weight and output gradient of the observation step, as each named preset's recipe quantizes
// them. Private to src/train; run_inspect() calls it (mixp/train/inspect.h has the figures).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixp/amp/presets.h"
#include "mixp/nn/linear.h"
#include "mixp/nn/module.h"
#include "mixp/train/inspect.h"

namespace mixp::train {

/// The block-scaled presets named (mxfp8, fp8-block, nvfp4, mxfp4), each with the run's MX
/// scale rule and, for an FP4 preset, the run's ablations. mixp::Error naming a preset that is
/// unknown or scales per tensor, or an empty name.
std::vector<amp::Preset> block_scale_presets(const std::vector<std::string>& names,
                                             const TrainOptions& run);

/// While it lives, keeps the input, and the output gradient divided by `loss_scale`, of every
/// nn::Linear layer of `module` (named_modules() order) from the first forward and backward
/// pass of each; removes its hooks when destroyed. `module` must outlive it.
class LinearTensorCapture {
 public:
  struct Layer {
    std::string name;
    nn::Linear* linear = nullptr;
    Tensor input{};            ///< [rows, in], f32 or bf16 as the layer received it
    Tensor output_gradient{};  ///< [rows, out], f32, unscaled; undefined if the loss missed it
  };
  LinearTensorCapture(nn::Module& module, double loss_scale);
  ~LinearTensorCapture();
  LinearTensorCapture(const LinearTensorCapture&) = delete;
  LinearTensorCapture& operator=(const LinearTensorCapture&) = delete;
  const std::vector<Layer>& layers() const { return layers_; }

 private:
  std::vector<Layer> layers_;
  std::vector<int64_t> pre_hooks_, hooks_;
  double loss_scale_;
};

/// Each preset's statistics of the captured tensors, in the layout its recipe quantizes them
/// for the forward GEMM and dgrad: input and output gradient in 1 x block blocks along their
/// last dimension, the weight in the recipe's weight blocks along `in`; FP4 gradients rounded
/// stochastically, when the recipe does, from the stream the layer's dgrad would use at `step`.
std::vector<BlockScaleInspection> inspect_block_scales(const LinearTensorCapture& capture,
                                                       nn::Module& module,
                                                       const std::vector<amp::Preset>& presets,
                                                       uint64_t seed, int64_t step);

/// inspect.json's "block_scales".
nlohmann::json block_scales_json(const std::vector<BlockScaleInspection>& inspections);
/// block_scales.csv: a header, then one line per preset, layer and tensor.
std::string block_scales_csv(const std::vector<BlockScaleInspection>& inspections);
/// The tables `mixp inspect --block-formats` prints, one per preset.
std::string block_scales_table(const std::vector<BlockScaleInspection>& inspections);

}  // namespace mixp::train
