#include "support/protected_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "mixp/error.h"
#include "mixp/tensor.h"

namespace mixp::testing {
namespace {

struct Blocks {
  std::mutex mutex;
  std::map<void*, size_t> mapped;  // block -> mapped bytes
  int open_depth = 0;
};

Blocks& blocks() {
  static Blocks b;
  return b;
}

size_t page_rounded(size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

void protect_all(Blocks& b, int protection) {
  for (const auto& [block, bytes] : b.mapped) {
    MIXP_CHECK(mprotect(block, bytes, protection) == 0, "protected device: mprotect failed");
  }
}

class ProtectedBackend final : public DeviceBackend {
 public:
  const char* name() const override { return "protected"; }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    Blocks& b = blocks();
    std::lock_guard lock(b.mutex);
    const size_t mapped = page_rounded(bytes);
    const int protection = b.open_depth > 0 ? PROT_READ | PROT_WRITE : PROT_NONE;
    void* block = mmap(nullptr, mapped, protection, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MIXP_CHECK(block != MAP_FAILED, "protected device: out of memory for ", bytes, " bytes");
    b.mapped[block] = mapped;
    return block;
  }

  void deallocate(void* block, size_t) noexcept override {
    if (block == nullptr) return;
    Blocks& b = blocks();
    std::lock_guard lock(b.mutex);
    const auto it = b.mapped.find(block);
    if (it == b.mapped.end()) return;
    munmap(block, it->second);
    b.mapped.erase(it);
  }

  void copy_to_host(void* host, const void* device, size_t bytes) override {
    ProtectedDevice::Access open;
    device_backend(Device::cpu).copy_to_host(host, device, bytes);
  }
  void copy_from_host(void* device, const void* host, size_t bytes) override {
    ProtectedDevice::Access open;
    device_backend(Device::cpu).copy_from_host(device, host, bytes);
  }
  void copy(const Tensor& src, Tensor& dst) override {
    ProtectedDevice::Access open;
    device_backend(Device::cpu).copy(src, dst);
  }
  void fill(Tensor& t, double value) override {
    ProtectedDevice::Access open;
    device_backend(Device::cpu).fill(t, value);
  }
};

}  // namespace

Device ProtectedDevice::device() {
  static const Device registered = register_device(std::make_unique<ProtectedBackend>());
  return registered;
}

size_t ProtectedDevice::live_bytes() {
  Blocks& b = blocks();
  std::lock_guard lock(b.mutex);
  size_t total = 0;
  for (const auto& [block, bytes] : b.mapped) total += bytes;
  return total;
}

ProtectedDevice::Access::Access() {
  Blocks& b = blocks();
  std::lock_guard lock(b.mutex);
  if (b.open_depth++ == 0) protect_all(b, PROT_READ | PROT_WRITE);
}

ProtectedDevice::Access::~Access() {
  Blocks& b = blocks();
  std::lock_guard lock(b.mutex);
  if (--b.open_depth == 0) protect_all(b, PROT_NONE);
}

}  // namespace mixp::testing
