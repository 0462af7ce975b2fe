// A cache of large freed blocks, so that a training loop, which allocates the same sizes every
// step, reuses memory instead of asking the kernel for fresh zeroed pages each time (glibc
// serves blocks above its mmap threshold with mmap, and each first touch of a page faults).
// Blocks of 64 KiB and more are rounded up to 64 KiB and kept per size, up to a byte limit;
// smaller ones go straight to the C allocator. Private to mixp.
#pragma once

#include <cstddef>

namespace mixp::detail {

/// 64-byte aligned memory of at least `bytes` bytes (nullptr for 0); throws on failure.
void* allocate_block(size_t bytes);
/// Returns a block from allocate_block of the same `bytes`.
void release_block(void* block, size_t bytes);
/// Bytes held in the cache now.
size_t cached_bytes();
/// Frees every cached block.
void release_cached_blocks();

}  // namespace mixp::detail
