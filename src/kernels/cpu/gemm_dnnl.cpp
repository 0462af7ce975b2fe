// oneDNN matmul (the 2.x API: an op desc, then a primitive desc). oneDNN keeps a cache of
// primitives, so building the primitive for a shape seen before is a lookup.
#include <dnnl.hpp>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kernels/cpu/dnnl_runtime.h"
#include "kernels/gemm.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/float_types.h"

namespace mixp::kernels {
namespace {

dnnl::memory::desc matrix(bool batched, int64_t batch, int64_t rows, int64_t cols, bool transposed,
                          dnnl::memory::data_type dt) {
  // Logical [batch, rows, cols]; a transposed matrix is stored [cols, rows]. Unbatched products
  // use 2-D descriptors, for which oneDNN picks its faster plain-matrix kernels.
  if (!batched) {
    const dnnl::memory::dims strides =
        transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
    return dnnl::memory::desc({rows, cols}, dt, strides);
  }
  const dnnl::memory::dims dims = {batch, rows, cols};
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{rows * cols, 1, rows}
                                                : dnnl::memory::dims{rows * cols, cols, 1};
  return dnnl::memory::desc(dims, dt, strides);
}

// Building a primitive descriptor runs oneDNN's implementation search, which costs about as much
// as a small product; a training step repeats the same few shapes, so primitives are kept, a
// bounded number of them, shared by all threads.
template <typename Key, typename Entry, typename Hash>
class PrimitiveCache {
 public:
  template <typename Build>
  std::shared_ptr<const Entry> get(const Key& key, Build build) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
    if (entries_.size() >= kMaxEntries) entries_.clear();
    std::shared_ptr<const Entry> entry = build();
    entries_.emplace(key, entry);
    return entry;  // shared: a later clear() cannot pull it from under a running product
  }

 private:
  static constexpr size_t kMaxEntries = 512;
  std::mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const Entry>, Hash> entries_;
};

size_t hash_sizes(std::initializer_list<int64_t> sizes) {
  size_t h = 0;
  for (int64_t v : sizes) h = h * 1000003u ^ std::hash<int64_t>()(v);
  return h;
}

struct PrimitiveKey {
  int64_t batch, batch_a, batch_b, m, n, k;
  bool trans_a, trans_b, bf16, bias, bf16_out;
  friend bool operator==(const PrimitiveKey&, const PrimitiveKey&) = default;
};

struct PrimitiveKeyHash {
  size_t operator()(const PrimitiveKey& k) const {
    return hash_sizes({k.batch, k.batch_a, k.batch_b, k.m, k.n, k.k}) * 31u +
           (size_t(k.bf16_out) << 4 | size_t(k.bias) << 3 | size_t(k.trans_a) << 2 |
            size_t(k.trans_b) << 1 | size_t(k.bf16));
  }
};

struct CachedMatmul {
  dnnl::memory::desc a, b, c, bias;
  dnnl::matmul primitive;
};

std::shared_ptr<const CachedMatmul> cached_matmul(const GemmShape& s, bool bf16, bool bias,
                                                  bool bf16_out, const dnnl::engine& engine) {
  // Never destroyed: at exit oneDNN's own state may already be gone, and destroying a primitive
  // after it crashes the process (kernels/cpu/dnnl_runtime.h).
  static auto& cache = *new PrimitiveCache<PrimitiveKey, CachedMatmul, PrimitiveKeyHash>();
  const PrimitiveKey key{.batch = s.batch,
                         .batch_a = s.batch_a,
                         .batch_b = s.batch_b,
                         .m = s.m,
                         .n = s.n,
                         .k = s.k,
                         .trans_a = s.trans_a,
                         .trans_b = s.trans_b,
                         .bf16 = bf16,
                         .bias = bias,
                         .bf16_out = bf16_out};
  return cache.get(key, [&] {
    using dt = dnnl::memory::data_type;
    const dt in_type = bf16 ? dt::bf16 : dt::f32;
    const bool batched = s.batch > 1;
    auto entry = std::make_shared<CachedMatmul>();
    entry->a = matrix(batched, s.batch_a, s.m, s.k, s.trans_a, in_type);
    entry->b = matrix(batched, s.batch_b, s.k, s.n, s.trans_b, in_type);
    entry->c = matrix(batched, s.batch, s.m, s.n, false, bf16_out ? dt::bf16 : dt::f32);
    if (bias) {
      // One row of n, broadcast over the rows; oneDNN adds it to the fp32 sums before storing
      // them (one rounding, as adding it afterwards).
      entry->bias = dnnl::memory::desc({1, s.n}, dt::f32, dnnl::memory::dims{s.n, 1});
      entry->primitive = dnnl::matmul(dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(entry->a, entry->b, entry->bias, entry->c), engine));
    } else {
      entry->primitive = dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(entry->a, entry->b, entry->c), engine));
    }
    return entry;
  });
}

}  // namespace

bool gemm_fast_has_bf16() { return best_isa() >= Isa::avx512_bf16; }

void gemm_fast(const GemmShape& s, DType in, const void* a, const void* b, void* c, DType out,
               const float* bias) {
  MIXP_ASSERT(in == DType::f32 || (in == DType::bf16 && gemm_fast_has_bf16()), "gemm_fast on ",
              name_of(in));
  MIXP_ASSERT(out == DType::f32 || (out == DType::bf16 && in == DType::bf16),
              "gemm_fast: ", name_of(in), " products into ", name_of(out));
  MIXP_ASSERT(bias == nullptr || s.batch == 1, "gemm_fast: a bias on a batched product");
  if (s.m == 0 || s.n == 0 || s.batch == 0) return;
  if (s.k == 0) {
    for (int64_t i = 0; i < s.batch * s.m * s.n; ++i) {
      const float v = bias ? bias[i % s.n] : 0.0f;
      if (out == DType::f32) {
        static_cast<float*>(c)[i] = v;
      } else {
        static_cast<bfloat16*>(c)[i] = bfloat16(v);
      }
    }
    return;
  }
  DnnlRuntime& r = dnnl_runtime();
  try {
    const std::shared_ptr<const CachedMatmul> cached =
        cached_matmul(s, in == DType::bf16, bias != nullptr, out == DType::bf16, r.engine);
    const CachedMatmul& mm = *cached;
    dnnl::memory a_mem(mm.a, r.engine, const_cast<void*>(a));
    dnnl::memory b_mem(mm.b, r.engine, const_cast<void*>(b));
    dnnl::memory c_mem(mm.c, r.engine, c);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(mm.bias, r.engine, const_cast<float*>(bias)));
    mm.primitive.execute(r.stream, args);
    r.stream.wait();
  } catch (const dnnl::error& e) {
    MIXP_ASSERT(false, "oneDNN matmul failed (", e.what(), ") for batch ", s.batch, " m ", s.m,
                " n ", s.n, " k ", s.k);
  }
}

}  // namespace mixp::kernels
