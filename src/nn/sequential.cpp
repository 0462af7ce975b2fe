#include "mixp/nn/sequential.h"

#include "mixp/error.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/batch_norm.h"
#include "mixp/nn/pooling.h"

namespace mixp::nn {

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  MIXP_CHECK(module != nullptr, "Sequential: push_back of a null module");
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

namespace {

// A MaxPool2d over 2 x 2 windows every 2 without padding, unwatched.
bool is_plain_pairs_pool(const UnaryModule& module) {
  const auto* pool = dynamic_cast<const MaxPool2d*>(&module);
  if (pool == nullptr || module.has_hooks()) return false;
  const MaxPool2dOptions& o = pool->options();
  return o.kernel_size == 2 && (o.stride == 0 || o.stride == 2) && o.padding == 0;
}

}  // namespace

// A BatchNorm2d followed by a ReLU runs as one op (ops::batch_norm_relu: the same results in
// fewer passes over the data), and with a 2 x 2 MaxPool2d after them as another
// (ops::batch_norm_relu_max_pool2d) on 4-d bf16 and f16 inputs. On f32 the three-way op is not
// faster than batch_norm_relu and max_pool2d's vectorized kernels (docs/performance.md), so
// those run.
Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto* norm = dynamic_cast<BatchNorm2d*>(layers_[i].get());
    if (norm != nullptr && i + 1 < layers_.size() && !layers_[i + 1]->has_hooks() &&
        dynamic_cast<ReLU*>(layers_[i + 1].get()) != nullptr) {
      const bool half = y.dtype() == DType::bf16 || y.dtype() == DType::f16;
      if (half && i + 2 < layers_.size() && y.ndim() == 4 && is_plain_pairs_pool(*layers_[i + 2])) {
        y = norm->forward_relu_max_pool(y);
        i += 2;
      } else {
        y = norm->forward_relu(y);
        ++i;
      }
    } else {
      y = layers_[i]->forward(y);
    }
  }
  return y;
}

}  // namespace mixp::nn
