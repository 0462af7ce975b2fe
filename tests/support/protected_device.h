// A test-only device whose memory the host may not touch except through its own kernels.
//
// Its blocks are host memory mapped PROT_NONE: any read or write from code that is not one of
// this device's kernels or copies faults. Its kernels open every block for the duration of the
// call (ProtectedDevice::Access) and run the cpu's candidate on the open memory. It is what a
// new backend looks like from mixp's side: a DeviceBackend registered with register_device(),
// and candidates added to the kernel registry, with no change to src/.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "kernels/registry.h"
#include "mixp/device.h"

namespace mixp::testing {

class ProtectedDevice {
 public:
  /// The device, registered on first use.
  static Device device();
  /// Bytes of its blocks alive now.
  static size_t live_bytes();

  /// Opens every block for reading and writing while it lives (nests; any thread).
  class Access {
   public:
    Access();
    ~Access();
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;
  };

  /// Adds a candidate to `kernel` for this device: the cpu's choice for the same arguments,
  /// run inside an Access.
  template <auto& kernel>
  static void add_kernel() {
    kernel.add({.name = "protected", .device = device(), .fn = run<kernel>, .fallback = true});
  }

 private:
  template <typename K>
  struct Runner;
  template <typename R, typename... Args>
  struct Runner<kernels::Kernel<R(Args...)>> {
    template <auto& kernel>
    static R call(Args... args) {
      Access open;
      return kernel.select_on(Device::cpu, args...).fn(std::forward<Args>(args)...);
    }
  };
  template <auto& kernel>
  static constexpr auto run = &Runner<std::remove_cvref_t<decltype(kernel)>>::template call<kernel>;
};

}  // namespace mixp::testing
