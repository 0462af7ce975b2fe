#include "kernels/registry.h"

#include <algorithm>

#include "mixp/error.h"

namespace mixp::kernels {
namespace {
std::vector<const KernelInfo*>& kernel_list() {
  static std::vector<const KernelInfo*> list;
  return list;
}
}  // namespace

const std::vector<const KernelInfo*>& all_kernels() { return kernel_list(); }

void register_kernel_info(const KernelInfo* kernel) { kernel_list().push_back(kernel); }

void unregister_kernel_info(const KernelInfo* kernel) { std::erase(kernel_list(), kernel); }

void throw_mixed_devices(const char* kernel, Device a, Device b) {
  MIXP_CHECK(false, kernel, ": the tensors are on different devices, ", name_of(a), " and ",
             name_of(b), "; copy them to one device first");
  __builtin_unreachable();
}

void throw_no_candidate(const char* kernel, Device device, Isa isa, bool reference) {
  MIXP_CHECK(false, kernel, ": no kernel for device ", name_of(device), " at ISA ", name_of(isa),
             reference ? " in reference mode" : "",
             " (the device registered none that applies to these arguments)");
  __builtin_unreachable();
}

}  // namespace mixp::kernels
