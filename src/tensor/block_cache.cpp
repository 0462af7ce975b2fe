#include "tensor/block_cache.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mixp/error.h"

namespace mixp::detail {
namespace {

constexpr size_t kLargeBlock = size_t(64) << 10;
constexpr size_t kCacheLimit = size_t(4) << 30;  // never hold more than 4 GiB of free blocks

size_t rounded_size(size_t bytes) {
  if (bytes >= kLargeBlock) return (bytes + kLargeBlock - 1) / kLargeBlock * kLargeBlock;
  return (bytes + 63) / 64 * 64;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t bytes = 0;

  ~Cache() { release_all(); }
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [size, blocks] : free_blocks) {
      for (void* b : blocks) std::free(b);
    }
    free_blocks.clear();
    bytes = 0;
  }
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

void* allocate_block(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = rounded_size(bytes);
  if (size >= kLargeBlock) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      c.bytes -= size;
      return block;
    }
  }
  void* block = std::aligned_alloc(64, size);
  if (block == nullptr && size >= kLargeBlock) {
    release_cached_blocks();  // memory is short: give back what the cache holds, then retry
    block = std::aligned_alloc(64, size);
  }
  MIXP_CHECK(block != nullptr, "out of memory allocating ", bytes, " bytes");
  return block;
}

void release_block(void* block, size_t bytes) {
  if (block == nullptr) return;
  const size_t size = rounded_size(bytes);
  if (size >= kLargeBlock) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.bytes + size <= kCacheLimit) {
      c.free_blocks[size].push_back(block);
      c.bytes += size;
      return;
    }
  }
  std::free(block);
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

void release_cached_blocks() { cache().release_all(); }

}  // namespace mixp::detail
