// What Tensor's own methods need of autograd: views, slices and casts record themselves for
// backward, backward() runs the engine, and an error names the op behind a tensor. The tensor
// layer sits below autograd (docs/design.md), so it calls these through pointers that
// autograd installs when it is loaded (src/autograd/engine.cpp, which every program linked with
// mixp has: CMakeLists.txt). Private to mixp.
#pragma once

#include <cstdint>
#include <vector>

#include "mixp/tensor.h"

namespace mixp::detail {

struct AutogradHooks {
  /// Records `view` (a reshape of `base`) for backward.
  void (*record_view)(const Tensor& base, Tensor& view) = nullptr;
  /// Records `rows` = base rows [begin, begin + rows.size(0)) for backward.
  void (*record_slice)(const Tensor& base, Tensor& rows, int64_t begin) = nullptr;
  /// Records `out` = `in` converted to another dtype; the gradient converts back.
  void (*record_cast)(const Tensor& in, Tensor& out) = nullptr;
  /// Backpropagates from `roots` with `grads`.
  void (*run_backward)(const std::vector<Tensor>& roots,
                       const std::vector<Tensor>& grads) = nullptr;
  /// The name of the op that made a node ("linear", "reshape", ...).
  const char* (*node_name)(const autograd::Node& node) = nullptr;
};

/// Called once by autograd, before main(); every hook must be set.
void install_autograd_hooks(const AutogradHooks& hooks);

}  // namespace mixp::detail
