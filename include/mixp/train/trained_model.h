// mixp/train/trained_model.h — a trained model read back from its run, and forward passes for
// inference under any precision preset: what `mixp eval`, `mixp sample`, `mixp inspect --from`
// and `mixp train --init-from` start from.
//
// A finished run's model.safetensors holds the parameters and buffers by name, in the dtypes the
// run stored them, and its metadata holds the run's whole configuration (mixp/train/run.h): the
// model's shape, the data's path and fingerprint, and for the text models the vocabulary. That is
// all it takes to rebuild the model. A checkpoint holds the same under "model/".
//
// Loading checks every name and shape against the model the configuration describes and lists
// every difference at once (a missing tensor, one the model does not have, a shape that differs)
// before it copies anything. Values are converted to the model's f32 parameters exactly (bf16
// and fp16 widen without rounding); Inference::cast_parameters() then stores them as the preset
// does, so a bf16 run's weights come back bit for bit.
//
// Example:
//
//   mixp::train::TrainedModel t = mixp::train::load_trained_model("runs/gpt-amp-bf16");
//   mixp::train::Inference inference(*t.model, "amp-fp16");
//   inference.cast_parameters();
//   mixp::Tensor logits;
//   inference.run([&] { logits = t.model->forward(tokens); });   // no autograd, fp16 autocast
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "mixp/amp/presets.h"
#include "mixp/nn/models.h"
#include "mixp/tensor.h"
#include "mixp/train/run.h"

namespace mixp::train {

/// A trained model read back from a run: its configuration and its weights.
struct TrainedModel {
  RunConfig config;                  ///< the run's configuration; config.model is the model's shape
  std::string vocabulary;            ///< language models: token i is vocabulary[i]
  std::unique_ptr<nn::Model> model;  ///< the weights as stored, in f32, in evaluation mode
  std::string source;                ///< the file the weights came from
  int64_t step = 0;                  ///< the step the weights are from (0: not recorded)
};

/// The weights of a trained model as stored (by parameter and buffer name), and its run's
/// configuration, without building the model.
struct TrainedWeights {
  std::map<std::string, Tensor> tensors;
  RunConfig config;
  std::string source;
  int64_t step = 0;
};

/// `path`: a run folder (its model.safetensors when the run finished, else its newest valid
/// checkpoint), a model.safetensors, or a checkpoint-N.safetensors. Throws mixp::Error naming
/// the path and what is missing: no model and no checkpoint, no configuration in the metadata,
/// tensors that do not match the model it describes.
TrainedModel load_trained_model(const std::string& path);
TrainedWeights read_trained_weights(const std::string& path);
/// A fresh model with `weights` loaded: load_trained_model() without reading the file again,
/// for callers that need several copies of one trained model.
TrainedModel build_trained_model(const TrainedWeights& weights);

/// Copies `tensors` (by parameter and buffer name) into `model` after checking that the names
/// and shapes are exactly the model's, and throws mixp::Error listing every difference when
/// they are not (`source` names the file in the message). Values convert to the model's dtypes.
void load_weights(nn::Model& model, const std::map<std::string, Tensor>& tensors,
                  const std::string& source);

/// The FP8/FP4 state a run's weights ended training with (amax histories, FP4's Hadamard signs,
/// adaptive precision's layer formats): that of its checkpoint of the same step, which every
/// finished run keeps; nothing when there is none or it holds no such state.
std::optional<StateDict> saved_precision_state(const TrainedModel& trained);

/// Forward passes for inference under a precision preset: the preset's Autocast (and FP8)
/// scope, no autograd. Its FP8 state is its own: under delayed scaling the scales follow the
/// amax of the earlier calls (update() after each), and the first call uses the recipe's
/// initial scale; current and block scaling need no history.
class Inference {
 public:
  /// Throws mixp::Error for an unknown preset name. `mx_rounding`: how mxfp8 rounds its block
  /// scales, `fp4_without`: the FP4 ingredients switched off (pass the run's own,
  /// TrainOptions::mx_scale_rounding and fp4_without).
  Inference(nn::Model& model, const std::string& precision,
            amp::MxScaleRounding mx_rounding = amp::kDefaultMxScaleRounding,
            const amp::Fp4Ablation& fp4_without = {});
  /// The model's parameters cast as the preset stores them (bf16 and fp16 presets keep the
  /// norms in f32), once, for a model loaded in f32. A model being trained already has them.
  void cast_parameters();
  /// Runs f() inside the preset's scopes, without gradients.
  void run(const std::function<void()>& f);
  /// Takes the FP8/FP4 state a run ended with (saved_precision_state), so that an adaptive
  /// preset's layers compute in the formats they had reached; nothing under other presets.
  void load_precision_state(const StateDict& state);
  const amp::Preset& preset() const { return preset_; }

 private:
  nn::Model& model_;
  const amp::Preset preset_;
  std::unique_ptr<amp::Fp8State> fp8_;
};

}  // namespace mixp::train
