// The devices of the optimizers' slots (kernels/weight_update.h).
#include "kernels/weight_update.h"

#include <initializer_list>
#include <utility>

#include "mixp/error.h"

namespace mixp::kernels {
namespace {

using Named = std::pair<const char*, const Tensor*>;

// The device of the defined tensors among `tensors`, checked to be one; `fallback` where none is
// defined.
Device common_device(const char* what, std::initializer_list<Named> tensors, Device fallback) {
  const Named* first = nullptr;
  for (const Named& t : tensors) {
    if (!t.second->defined()) continue;
    if (first == nullptr) {
      first = &t;
      continue;
    }
    MIXP_CHECK(t.second->device() == first->second->device(), what, ": its ", first->first,
               " is on ", name_of(first->second->device()), " and its ", t.first, " on ",
               name_of(t.second->device()), "; an update needs all its tensors on one device");
  }
  return first != nullptr ? first->second->device() : fallback;
}

}  // namespace

Device WeightSlot::device() const {
  return common_device("optimizer slot",
                       {{"param", &param}, {"grad", &grad}, {"master", &master},
                        {"master_low", &master_low}, {"compensation", &compensation}},
                       Device::cpu);
}

Device AdamSlot::device() const {
  const Device d = weights.device();
  return common_device("Adam slot",
                       {{"param", &weights.param}, {"exp_avg", &exp_avg},
                        {"exp_avg_sq", &exp_avg_sq}},
                       d);
}

Device SgdSlot::device() const {
  const Device d = weights.device();
  return common_device("SGD slot", {{"param", &weights.param}, {"momentum", &momentum}}, d);
}

}  // namespace mixp::kernels
