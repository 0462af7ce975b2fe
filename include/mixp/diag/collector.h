// mixp/diag/collector.h — per-layer numerics of a model while it trains.
//
// A Collector hooks the layers of a model (nn::Module::add_forward_hook) and, on every
// `every`-th step, records statistics (mixp/diag/stats.h) of four tensors per layer:
//   activation           the layer's output
//   activation_gradient  the gradient of the loss with respect to that output
//                        (autograd::with_gradient_hook on the output)
//   weight               each of the layer's own parameters ("fc1.weight", "fc1.bias")
//   weight_gradient      their .grad()
// Gradients are divided by the step's loss scale (in fp64, exact for powers of two), so every
// record describes the true values, and the format queries ask what a format would do to them
// at scale 1 and, for gradients, at the step's loss scale. Tensors of more than max_elements
// elements are sampled (diag::sample: a fixed, Philox-chosen subset) to keep it cheap; the
// tensors a step does not collect cost nothing beyond a branch per layer.
//
// The step protocol: begin_step(step, scale) before the forward pass, end_step() after the
// backward pass and before the optimizer (which reads the weight gradients). Forward passes
// outside begin_step/end_step (evaluation) record nothing. train::TrainOptions::hooks calls
// both; the Collector removes its hooks when it is destroyed.
//
// Example:
//
//   mixp::diag::Collector collector(model, {.every = 10});   // every layer with parameters
//   for (int64_t step = 0; ...; ++step) {
//     collector.begin_step(step, scaler.get_scale());
//     scaler.scale(loss_of(model.forward(x))).backward();
//     collector.end_step();
//     ...
//   }
//   for (const auto& r : collector.records())
//     std::printf("%s %s %g\n", r.name.c_str(), name_of(r.role), r.stats.zeros /
//     double(r.stats.count));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixp/diag/stats.h"
#include "mixp/nn/module.h"

namespace mixp::diag {

/// What a record describes. Append-only, explicit values.
enum class Role : uint8_t {
  activation = 0,
  activation_gradient = 1,
  weight = 2,
  weight_gradient = 3,
};
const char* name_of(Role role);

struct CollectorOptions {
  int64_t every = 1;             ///< collect on the steps that are multiples of this (>= 1)
  int64_t max_elements = 65536;  ///< larger tensors are sampled down to this many (>= 1)
  /// Asked of every record at scale 1 and, for gradients, again at the step's loss scale
  /// (labelled "<format>@<scale>", the scale as %g); default standard_queries().
  std::vector<FormatQuery> queries = standard_queries();
};

struct LayerRecord {
  int64_t step = 0;
  std::string name;  ///< the layer ("fc1") or, for weights, the parameter ("fc1.weight")
  Role role = Role::activation;
  double loss_scale = 1.0;  ///< the step's; the stats are of the values divided by it
  int64_t numel = 0;        ///< the tensor's size before sampling
  TensorStats stats;
};

class Collector {
 public:
  /// Hooks the modules of `model` named in `layers` (names of named_modules()), or, when it is
  /// empty, every module with parameters of its own (the model itself, if it has some, as "").
  /// Throws mixp::Error for a name that is not a module of `model`, bad options, or nothing to
  /// hook. `model` must outlive the Collector.
  Collector(nn::Module& model, CollectorOptions options = {},
            const std::vector<std::string>& layers = {});
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  /// Starts step `step` with loss scale `loss_scale` (positive, finite): records this step
  /// when step % every == 0.
  void begin_step(int64_t step, double loss_scale = 1.0);
  /// Records the weights and weight gradients of a collected step and closes it.
  void end_step();
  bool collecting() const { return collecting_; }

  /// The hooked layers, in named_modules() order.
  const std::vector<std::string>& layers() const { return names_; }
  const std::vector<LayerRecord>& records() const { return records_; }
  void clear() { records_.clear(); }

 private:
  void record(const std::string& name, Role role, const Tensor& t, double divide_by);

  CollectorOptions options_;
  std::vector<std::string> names_;
  std::vector<nn::Module*> modules_;
  std::vector<int64_t> hook_ids_;
  std::vector<LayerRecord> records_;
  bool collecting_ = false;
  int64_t step_ = 0;
  double scale_ = 1.0;
};

}  // namespace mixp::diag
