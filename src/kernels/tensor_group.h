// The device of a struct of tensors (an optimizer's slot, a quantized operand): what its
// `Device device() const` reports to the registry. Private to mixp.
#pragma once

#include <initializer_list>
#include <utility>

#include "mixp/tensor.h"

namespace mixp::kernels {

using NamedTensor = std::pair<const char*, const Tensor*>;

/// The device of the defined tensors among `tensors`, or `none_defined` where none is;
/// mixp::Error naming `what` and the two tensors where two are on different devices.
Device common_device(const char* what, std::initializer_list<NamedTensor> tensors,
                     Device none_defined = Device::cpu);

}  // namespace mixp::kernels
