// What the CPU candidates of kernels/weight_update.h share: a gradient's blocks widened, a slot's
// fp32 weights a block at a time (WeightBlocks), and the chunks of a group of slots split over the
// threads. The instruction set comes in as a Path: AvxPath's functions need AVX-512 (they live
// in the ISA-flagged files), ScalarPath's are portable; both give the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/adam.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/master_split.h"
#include "kernels/stochastic_rounding_isa.h"
#include "kernels/weight_update.h"
#include "mixp/convert.h"
#include "mixp/error.h"
#include "mixp/format.h"

namespace mixp::kernels::cpu {

struct Avx512Path {
  static void join_master(const uint16_t* p, const uint16_t* low, const uint8_t* ties, int64_t n,
                          float* m) {
    avx512::join_master_bf16(p, low, ties, n, m);
  }
  static void split_master(const float* m, int64_t n, uint16_t* p, uint16_t* low, uint8_t* ties) {
    avx512::split_master_bf16(m, n, p, low, ties);
  }
  static void philox(const PhiloxState& s, uint64_t first, uint32_t* out, uint64_t count) {
    avx512::philox_words(s, first, out, count);
  }
  static void round_bf16(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                         uint16_t* out) {
    avx512::round_bf16_stochastic(x, words, shift, n, out);
  }
  static void adam(float* w, const float* g, float* m, float* v, int64_t n,
                   const AdamConstants& c) {
    avx512::adam_f32(w, g, m, v, n, c);
  }
};

struct ScalarPath {
  static void join_master(const uint16_t* p, const uint16_t* low, const uint8_t* ties, int64_t n,
                          float* m) {
    ref::join_master_bf16(p, low, ties, n, m);
  }
  static void split_master(const float* m, int64_t n, uint16_t* p, uint16_t* low, uint8_t* ties) {
    ref::split_master_bf16(m, n, p, low, ties);
  }
  static void philox(const PhiloxState& s, uint64_t first, uint32_t* out, uint64_t count) {
    mixp::philox_words(s, first, out, count);
  }
  static void round_bf16(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                         uint16_t* out) {
    ref::round_bf16_stochastic(x, words, shift, n, out);
  }
  static void adam(float* w, const float* g, float* m, float* v, int64_t n,
                   const AdamConstants& c) {
    ref::adam_f32(w, g, m, v, n, c);
  }
};

/// Elements [begin, begin + len) of a gradient of any floating dtype, as C.
template <typename C>
void load_block(const Tensor& t, int64_t begin, int64_t len, C* out) {
  switch (t.dtype()) {
    case DType::f32: {
      const float* p = t.data<float>() + begin;
      for (int64_t j = 0; j < len; ++j) out[j] = C(p[j]);
      return;
    }
    case DType::f64: {
      const double* p = t.data<double>() + begin;
      for (int64_t j = 0; j < len; ++j) out[j] = C(p[j]);
      return;
    }
    case DType::bf16:
    case DType::f16: {
      float wide[kBlock];
      if (t.dtype() == DType::bf16) {
        widen(t.data<bfloat16>() + begin, len, wide);
      } else {
        widen(t.data<float16>() + begin, len, wide);
      }
      for (int64_t j = 0; j < len; ++j) out[j] = C(wide[j]);
      return;
    }
    default: break;
  }
  MIXP_CHECK(false, "optimizer: gradients of dtype ", name_of(t.dtype()),
             " are not supported (f32, f64, bf16, f16 are)");
}

/// The fp32 weights of a slot that is not f64, a block of at most kBlock elements at a time
/// (kernels/weight_update.h says where they come from and go). One instance per thread:
/// load(i, len) returns the weights of elements [i, i + len), which the caller updates in place,
/// and store(i, len) writes them back. Blocks start at multiples of 8 (the tie bits are bytes).
template <typename Path>
class WeightBlocks {
 public:
  explicit WeightBlocks(const WeightSlot& s) : s_(s) {}

  float* load(int64_t i, int64_t len) {
    if (s_.param.dtype() == DType::f32) return s_.param.data<float>() + i;
    if (s_.master.defined()) return s_.master.data<float>() + i;
    if (s_.master_low.defined()) {
      const int64_t n = s_.param.numel();
      const auto* low = s_.master_low.data<uint8_t>();
      Path::join_master(param_bits() + i, reinterpret_cast<const uint16_t*>(low) + i,
                        low + 2 * n + i / 8, len, w_);
      return w_;
    }
    if (s_.param.dtype() == DType::bf16) {
      widen(s_.param.data<bfloat16>() + i, len, w_);
    } else {
      widen(s_.param.data<float16>() + i, len, w_);
    }
    if (s_.compensation.defined()) std::copy(w_, w_ + len, before_);
    return w_;
  }

  void store(int64_t i, int64_t len) {
    Tensor& param = s_.param;
    const DType dtype = param.dtype();
    if (dtype == DType::f32) return;
    if (s_.master.defined()) {
      narrow(s_.master.data<float>() + i, len, param.data<float16>() + i);
    } else if (s_.master_low.defined()) {
      const int64_t n = param.numel();
      auto* low = s_.master_low.data<uint8_t>();
      Path::split_master(w_, len, param_bits() + i, reinterpret_cast<uint16_t*>(low) + i,
                         low + 2 * n + i / 8);
    } else if (s_.compensation.defined()) {
      dtype == DType::bf16 ? kahan<bfloat16>(i, len) : kahan<float16>(i, len);
    } else {
      MIXP_ASSERT(s_.stochastic,
                  "a low-precision parameter needs a master, a compensation or stochastic "
                  "rounding");
      round_stochastically(i, len);
    }
  }

 private:
  uint16_t* param_bits() { return static_cast<uint16_t*>(s_.param.raw_data()); }

  // y = update - c; t = round(w + y); c = (t - w) - y; w = t, with the update new - before.
  template <typename T>
  void kahan(int64_t i, int64_t len) {
    Tensor &param = s_.param, &compensation = s_.compensation;
    float c[kBlock];
    widen(compensation.data<T>() + i, len, c);
    for (int64_t j = 0; j < len; ++j) {
      const float y = (w_[j] - before_[j]) - c[j];
      const float t = float(T(before_[j] + y));
      c[j] = (t - before_[j]) - y;
      w_[j] = t;
    }
    narrow(w_, len, param.data<T>() + i);  // exact: every w_[j] is a T value
    narrow(c, len, compensation.data<T>() + i);
  }

  // Element j of the parameter uses word s_.rng.offset + j of the slot's stream.
  void round_stochastically(int64_t i, int64_t len) {
    Tensor& param = s_.param;
    PhiloxState rng = s_.rng;
    if (param.dtype() == DType::bf16) {
      uint32_t words[kBlock];
      Path::philox(rng, uint64_t(i), words, uint64_t(len));
      Path::round_bf16(w_, words, 0, len, param_bits() + i);
      return;
    }
    rng.offset += uint64_t(i);
    round_to_format(Format::fp16(), std::span<const float>(w_, size_t(len)),
                    std::span<float>(w_, size_t(len)), Rounding::stochastic, Overflow::inf_or_nan,
                    rng);
    narrow(w_, len, param.data<float16>() + i);  // exact after the stochastic rounding
  }

  WeightSlot s_;  // a copy: writable handles
  float w_[kBlock];
  float before_[kBlock];  // kahan: the weights before the update
};

/// The elements of a group of slots in chunks of 16 x kBlock, each (slot, first element).
template <typename Slot>
std::vector<std::pair<size_t, int64_t>> slot_chunks(std::span<const Slot> slots) {
  std::vector<std::pair<size_t, int64_t>> chunks;
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int64_t b = 0; b < slots[i].weights.param.numel(); b += 16 * kBlock)
      chunks.emplace_back(i, b);
  }
  return chunks;
}

/// body(slot, begin, end) for every chunk of the slots, over the threads or on this one.
template <bool Parallel, typename Slot, typename Body>
void for_each_chunk(std::span<const Slot> slots, const Body& body) {
  const std::vector<std::pair<size_t, int64_t>> chunks = slot_chunks(slots);
  auto run = [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const Slot& s = slots[chunks[size_t(c)].first];
      const int64_t begin = chunks[size_t(c)].second;
      body(s, begin, std::min(begin + 16 * kBlock, s.weights.param.numel()));
    }
  };
  if constexpr (Parallel) {
    parallel_for(int64_t(chunks.size()), 1, run);
  } else {
    run(0, int64_t(chunks.size()));
  }
}

/// Every slot's gradient is of a dtype the updates read (f32, f64, bf16, f16) and as long as its
/// parameter; mixp::Error naming the first that is not.
template <typename Slot>
void check_gradients(std::span<const Slot> slots) {
  for (const Slot& s : slots) {
    const DType g = s.weights.grad.dtype();
    MIXP_CHECK(g == DType::f32 || g == DType::f64 || g == DType::bf16 || g == DType::f16,
               "optimizer: gradients of dtype ", name_of(g),
               " are not supported (f32, f64, bf16, f16 are)");
    MIXP_CHECK(s.weights.grad.numel() == s.weights.param.numel(), "optimizer: a gradient of ",
               s.weights.grad.numel(), " elements for a parameter of ", s.weights.param.numel());
  }
}

/// An update over a group of slots: the gradients checked, then every chunk through f64_chunk
/// (an f64 parameter, in double) or f32_chunk (the rest, through WeightBlocks), each called as
/// chunk(slot, begin, end).
template <bool Parallel, typename Slot, typename F64Chunk, typename F32Chunk>
void update_slots(std::span<const Slot> slots, const F64Chunk& f64_chunk,
                  const F32Chunk& f32_chunk) {
  check_gradients(slots);
  for_each_chunk<Parallel>(slots, [&](const Slot& s, int64_t begin, int64_t end) {
    if (s.weights.param.dtype() == DType::f64) {
      f64_chunk(s, begin, end);
    } else {
      f32_chunk(s, begin, end);
    }
  });
}

}  // namespace mixp::kernels::cpu
