// The block cache (src/tensor/block_cache.h): alignment, whole-block writability, and reuse of
// a freed block of the same rounded size.
#include "tensor/block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace mixp::detail {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

bool aligned_to(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

TEST(BlockCache, BlocksAreAlignedAndWritableOverTheirWholeSize) {
  for (size_t bytes : {size_t(1), size_t(100), size_t(64) << 10, (size_t(64) << 10) + 1,
                       (2 * kMiB) - 1, (2 * kMiB), (2 * kMiB) + 1, 5 * kMiB}) {
    void* block = allocate_block(bytes);
    ASSERT_NE(block, nullptr) << bytes;
    EXPECT_TRUE(aligned_to(block, 64)) << bytes;
    std::memset(block, 0x5a, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(block)[bytes - 1], 0x5a) << bytes;
    release_block(block, bytes);
  }
  release_cached_blocks();
  EXPECT_EQ(cached_bytes(), 0u);
}

TEST(BlockCache, AFreedLargeBlockServesTheNextRequestOfItsRoundedSize) {
  release_cached_blocks();
  for (size_t bytes : {size_t(100) << 10, 6 * kMiB + 12345}) {
    void* first = allocate_block(bytes);
    release_block(first, bytes);
    EXPECT_GE(cached_bytes(), bytes) << bytes;
    void* again = allocate_block(bytes - 1);  // the same rounded size
    EXPECT_EQ(again, first) << bytes;
    EXPECT_EQ(cached_bytes(), 0u) << bytes;
    release_block(again, bytes - 1);
    release_cached_blocks();
    EXPECT_EQ(cached_bytes(), 0u) << bytes;
  }
}

}  // namespace
}  // namespace mixp::detail
