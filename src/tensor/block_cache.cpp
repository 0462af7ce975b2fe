#include "tensor/block_cache.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mixp/error.h"

namespace mixp::detail {
namespace {

constexpr size_t kLargeBlock = size_t(64) << 10;
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kCacheLimit = size_t(4) << 30;  // never hold more than 4 GiB of free blocks

size_t rounded_size(size_t bytes) {
  if (bytes >= kLargeBlock) return (bytes + kLargeBlock - 1) / kLargeBlock * kLargeBlock;
  return (bytes + 63) / 64 * 64;
}

// Blocks of 2 MiB and more are mapped on their own from a 2 MiB boundary and marked for
// transparent huge pages (which this kernel gives only where asked): a pass over a 4 MiB
// weight on 4 KiB pages takes a TLB miss every 4 KiB. Their whole 2 MiB pages become huge
// pages and a shorter tail stays on small ones, so they take no more memory than before.
// Others come from the C allocator.
void* map_huge_pages(size_t size) {
  const size_t span = size + kHugePage;
  void* mapped = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(mapped, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  void* block = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(block, size, MADV_HUGEPAGE);  // a hint: without it the block is still good memory
#endif
  return block;
}

void* allocate_new(size_t size) {
  return size >= kHugePage ? map_huge_pages(size) : std::aligned_alloc(64, size);
}

void free_block(void* block, size_t size) {
  if (size >= kHugePage) {
    munmap(block, size);
  } else {
    std::free(block);
  }
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t bytes = 0;

  ~Cache() { release_all(); }
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [size, blocks] : free_blocks) {
      for (void* b : blocks) free_block(b, size);
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
  void* block = allocate_new(size);
  if (block == nullptr && size >= kLargeBlock) {
    release_cached_blocks();  // memory is short: give back what the cache holds, then retry
    block = allocate_new(size);
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
  free_block(block, size);
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

void release_cached_blocks() { cache().release_all(); }

}  // namespace mixp::detail
