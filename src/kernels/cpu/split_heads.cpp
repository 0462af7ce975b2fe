// The CPU candidates of kernels/split_heads.h: the rows of qkv split over the threads, and the
// fallback on one thread (the same bytes).
#include "kernels/split_heads.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace mixp::kernels {
namespace {

struct Heads {
  int64_t batch, t, c, heads, head_size;
};

Heads heads_of(const Tensor& qkv, int64_t heads) {
  const int64_t c = qkv.size(2) / 3;
  return {.batch = qkv.size(0), .t = qkv.size(1), .c = c, .heads = heads, .head_size = c / heads};
}

// Row (b, s) of the packed [B, T, 3C] holds, per part and head, head_size contiguous elements
// that belong at (b, head, s) of that part's [B, heads, T, Dh]. copy(packed_at, part, part_at)
// moves one such run, offsets in elements; a null part is skipped.
template <bool Fallback, typename Copy>
void for_each_run(const Heads& h, const void* const parts[3], Copy copy) {
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / h.t, s = row % h.t;
      for (int part = 0; part < 3; ++part) {
        if (parts[part] == nullptr) continue;
        for (int64_t head = 0; head < h.heads; ++head) {
          copy(row * 3 * h.c + part * h.c + head * h.head_size, part,
               ((b * h.heads + head) * h.t + s) * h.head_size);
        }
      }
    }
  };
  if constexpr (Fallback) {
    rows(0, h.batch * h.t);
  } else {
    parallel_for(h.batch * h.t, std::max<int64_t>(1, 4096 / std::max<int64_t>(3 * h.c, 1)), rows);
  }
}

template <bool Fallback>
void split_heads_cpu(const Tensor& qkv, int64_t heads, Tensor& q, Tensor& k, Tensor& v) {
  const size_t element = size_t(size_of(qkv.dtype()));
  const Heads h = heads_of(qkv, heads);
  const size_t run = size_t(h.head_size) * element;
  const char* packed = static_cast<const char*>(qkv.raw_data());
  char* out[3] = {static_cast<char*>(q.raw_data()), static_cast<char*>(k.raw_data()),
                  static_cast<char*>(v.raw_data())};
  const void* const parts[3] = {out[0], out[1], out[2]};
  for_each_run<Fallback>(h, parts, [&](int64_t packed_at, int part, int64_t part_at) {
    std::memcpy(out[part] + size_t(part_at) * element, packed + size_t(packed_at) * element, run);
  });
}

template <bool Fallback>
void merge_heads_cpu(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                     Tensor& qkv) {
  const size_t element = size_t(size_of(qkv.dtype()));
  const Heads h = heads_of(qkv, heads);
  const size_t run = size_t(h.head_size) * element;
  char* packed = static_cast<char*>(qkv.raw_data());
  auto data = [](const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; };
  const void* const parts[3] = {data(q), data(k), data(v)};
  for_each_run<Fallback>(h, parts, [&](int64_t packed_at, int part, int64_t part_at) {
    std::memcpy(packed + size_t(packed_at) * element,
                static_cast<const char*>(parts[part]) + size_t(part_at) * element, run);
  });
}

}  // namespace

Kernel<SplitHeadsFn> split_heads(
    "split_heads", {{.name = "openmp", .fn = split_heads_cpu<false>},
                    {.name = "scalar", .fn = split_heads_cpu<true>, .fallback = true}});

Kernel<MergeHeadsFn> merge_heads(
    "merge_heads", {{.name = "openmp", .fn = merge_heads_cpu<false>},
                    {.name = "scalar", .fn = merge_heads_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
