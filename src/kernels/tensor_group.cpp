// The devices of the structs of tensors that kernels take (kernels/tensor_group.h), and of the
// optimizers' slots and the FP8 and FP4 operands.
#include "kernels/tensor_group.h"

#include "kernels/fp4_quantize.h"
#include "kernels/fp8_quantize.h"
#include "kernels/weight_update.h"
#include "mixp/error.h"

namespace mixp::kernels {

Device common_device(const char* what, std::initializer_list<NamedTensor> tensors,
                     Device none_defined) {
  const NamedTensor* first = nullptr;
  for (const NamedTensor& t : tensors) {
    if (!t.second->defined()) continue;
    if (first == nullptr) {
      first = &t;
      continue;
    }
    MIXP_CHECK(t.second->device() == first->second->device(), what, ": its ", first->first,
               " is on ", name_of(first->second->device()), " and its ", t.first, " on ",
               name_of(t.second->device()), "; a kernel needs all its tensors on one device");
  }
  return first != nullptr ? first->second->device() : none_defined;
}

Device WeightSlot::device() const {
  return common_device("optimizer slot",
                       {{"param", &param}, {"grad", &grad}, {"master", &master},
                        {"master_low", &master_low}, {"compensation", &compensation}});
}

Device AdamSlot::device() const {
  return common_device("Adam slot", {{"param", &weights.param}, {"exp_avg", &exp_avg},
                                     {"exp_avg_sq", &exp_avg_sq}},
                       weights.device());
}

Device SgdSlot::device() const {
  return common_device("SGD slot", {{"param", &weights.param}, {"momentum", &momentum}},
                       weights.device());
}

Device Fp8Matrix::device() const {
  return common_device("FP8 operand", {{"codes", &codes}, {"block_scales", &block_scales}});
}

Device Fp4Matrix::device() const {
  return common_device("FP4 operand", {{"packed", &packed}, {"scales", &scales}});
}

}  // namespace mixp::kernels
