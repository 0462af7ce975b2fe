#include "mixp/device.h"

#include <array>
#include <cstring>
#include <mutex>

#include "mixp/error.h"
#include "mixp/tensor.h"
#include "tensor/block_cache.h"
#include "tensor/element.h"

namespace mixp {
namespace {

// Host memory through the block cache (tensor/block_cache.h).
class CpuBackend final : public DeviceBackend {
 public:
  const char* name() const override { return "cpu"; }
  void* allocate(size_t bytes) override { return detail::allocate_block(bytes); }
  void deallocate(void* block, size_t bytes) noexcept override {
    detail::release_block(block, bytes);
  }
  void copy_to_host(void* host, const void* device, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, device, bytes);
  }
  void copy_from_host(void* device, const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(device, host, bytes);
  }
  void copy(const Tensor& src, Tensor& dst) override {
    if (src.dtype() != dst.dtype()) return convert_elements(src, dst);
    if (dst.nbytes() > 0) std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
  }
  void fill(Tensor& t, double value) override { fill_elements(t, value); }
};

struct Devices {
  std::mutex mutex;
  std::array<std::unique_ptr<DeviceBackend>, 256> backends;
  int next = 2;  // 0 is the cpu; 1 is kept for the CUDA backend
  Devices() { backends[0] = std::make_unique<CpuBackend>(); }
};

Devices& devices() {
  static Devices all;
  return all;
}

}  // namespace

Device register_device(std::unique_ptr<DeviceBackend> backend) {
  MIXP_CHECK(backend != nullptr, "register_device: the backend is null");
  Devices& d = devices();
  std::lock_guard lock(d.mutex);
  MIXP_CHECK(d.next < 256, "register_device: 254 devices are registered already");
  d.backends[size_t(d.next)] = std::move(backend);
  return static_cast<Device>(d.next++);
}

DeviceBackend& device_backend(Device device) {
  Devices& d = devices();
  DeviceBackend* backend = d.backends[size_t(device)].get();
  MIXP_CHECK(backend != nullptr, "device ", int(device), " has no backend",
             device == Device::cuda ? " (this build of mixp has no CUDA backend)" : "");
  return *backend;
}

const char* name_of(Device device) {
  if (device == Device::cpu) return "cpu";
  const DeviceBackend* backend = devices().backends[size_t(device)].get();
  if (backend != nullptr) return backend->name();
  return device == Device::cuda ? "cuda" : "unregistered device";
}

}  // namespace mixp
