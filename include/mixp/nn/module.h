// mixp/nn/module.h — the base of every layer and model.
//
// A module owns named parameters (trained), named buffers (state that is not trained, such as
// batch norm's running statistics) and named children; names join with '.', as PyTorch's
// state_dict, so that a mixp model's tensors carry the names of the equivalent PyTorch module.
// Parameters are stored in the module and handed out as pointers, so that a precision preset's
// low-precision copies can take their place (replace_parameters, below).
//
// Every layer takes an options struct with PyTorch's names and defaults, and a layer with
// randomly initialized parameters (Linear, Conv2d, Embedding, LSTM) also takes the generator
// they are drawn from (mixp/random.h), always: a default would give every layer built alike
// the same values. UnaryModule is a module whose forward maps one tensor to one: what Sequential
// holds and what Model is.
//
// Forward hooks (diagnostics, mixp/diag/collector.h): a layer with parameters of its own
// (Linear, Conv2d, Embedding, LayerNorm, BatchNorm2d, LSTM) ends its forward() by passing its
// output through run_forward_hooks(), which calls each hook in the order added and returns
// what the last one returned: the output itself, or an alias of it such as
// autograd::with_gradient_hook(output, ...) to see the gradient with respect to the output.
// Containers (Sequential, the models, the transformer block) run none: hook their layers.
// Forward pre-hooks see a layer's input before it computes; Linear runs them (the layer whose
// input the FP8 and FP4 recipes quantize, which `mixp inspect --block-formats` measures).
//
// Example:
//
//   mixp::Philox rng({/*seed=*/0});
//   mixp::nn::Linear fc(mixp::nn::LinearOptions(784, 10), rng);
//   for (auto& [name, p] : fc.named_parameters()) std::cout << name << "\n";  // weight, bias
//   fc.train(false);                    // evaluation mode, for dropout and batch norm
//   mixp::Tensor y = fc.forward(x);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mixp/random.h"
#include "mixp/tensor.h"

namespace mixp::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Every parameter, recursively, by its dotted name, in registration order.
  std::vector<std::pair<std::string, Tensor*>> named_parameters();
  std::vector<Tensor> parameters();
  /// Every buffer, recursively, by its dotted name.
  std::vector<std::pair<std::string, Tensor*>> named_buffers();
  /// For each parameter of named_parameters(): whether it belongs to a normalization layer
  /// (the bf16 and fp16 presets keep those in fp32).
  std::vector<bool> norm_parameter_flags();

  /// Training (true) or evaluation (false) mode, for this module and its children.
  void train(bool training = true);
  bool is_training() const { return training_; }

  /// The module's name in PyTorch's print style, with its options, and its children's.
  virtual std::string pretty_print(int indent = 0) const;

  /// This module (named "") and every module below it, by dotted name, depth first in
  /// registration order, as PyTorch's named_modules().
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The names of this module's own parameters (not its children's): "weight", "bias", ...
  std::vector<std::string> own_parameter_names() const;

  /// Receives the module and its output; returns what forward() returns instead (the output,
  /// or an alias of it of the same shape and dtype).
  using ForwardHook = std::function<Tensor(Module& module, const Tensor& output)>;
  /// Adds a forward hook (see the top of this file); returns the id remove_forward_hook takes.
  int64_t add_forward_hook(ForwardHook hook);
  /// Removes the hook `id`; an id that is not there is ignored (already removed).
  void remove_forward_hook(int64_t id);
  /// Receives the module and its input, before forward() computes anything from it.
  using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
  /// Adds a forward pre-hook (see the top of this file); returns the id that
  /// remove_forward_pre_hook takes.
  int64_t add_forward_pre_hook(ForwardPreHook hook);
  /// Removes the pre-hook `id`; an id that is not there is ignored (already removed).
  void remove_forward_pre_hook(int64_t id);
  /// True when forward hooks or pre-hooks are attached: a container then runs the layer on its
  /// own rather than fused with its neighbour, so that the hooks see what they expect.
  bool has_hooks() const { return !forward_hooks_.empty() || !forward_pre_hooks_.empty(); }

 protected:
  /// Registers a parameter (made a leaf that requires grad, tagged MemoryTag::parameter).
  Tensor& register_parameter(const std::string& name, Tensor value);
  Tensor& register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }
  /// The end of a layer's forward(): `output` through the forward hooks.
  Tensor run_forward_hooks(Tensor output);
  /// The start of a layer's forward(): `input` to the forward pre-hooks, in the order added.
  void run_forward_pre_hooks(const Tensor& input);
  /// True for LayerNorm and BatchNorm2d.
  virtual bool is_norm() const { return false; }
  virtual std::string type_name() const = 0;
  /// The options shown inside the parentheses of pretty_print, as PyTorch's extra_repr.
  virtual std::string extra_repr() const { return ""; }
  virtual void on_mode_change() {}

 private:
  void collect_parameters(const std::string& prefix,
                          std::vector<std::pair<std::string, Tensor*>>& out,
                          std::vector<bool>* norms);
  void collect_buffers(const std::string& prefix,
                       std::vector<std::pair<std::string, Tensor*>>& out);
  void collect_modules(const std::string& name, std::vector<std::pair<std::string, Module*>>& out);

  // unique_ptr keeps each Tensor at a fixed address while more are registered.
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> parameters_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::vector<std::pair<int64_t, ForwardHook>> forward_hooks_;
  std::vector<std::pair<int64_t, ForwardPreHook>> forward_pre_hooks_;
  int64_t next_hook_id_ = 0;
};

/// A module with one tensor in and one tensor out.
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
};

/// Replaces each parameter of `module` with `new_values[i]` (same shape; for example the
/// low-precision copies a preset made), in named_parameters() order. The new values must be
/// floating tensors of the old shapes; throws mixp::Error naming the parameter otherwise, and
/// then changes nothing.
void replace_parameters(Module& module, const std::vector<Tensor>& new_values);

}  // namespace mixp::nn
