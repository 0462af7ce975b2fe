// linear_grads (kernels/linear_grads.h): where its overlapped candidate applies, and that it
// gives the bits of gemm_product and linear_weight_grads called one after the other, the
// product rules of which ops_test and linear_weight_grad_test hold to sums in double.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_product.h"
#include "kernels/linear_grads.h"
#include "mixp/random.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

struct LinearShape {
  int64_t rows, in, out;
};

struct Operands {
  Tensor g, x, w;
};

Operands make(const LinearShape& s, uint64_t seed) {
  Philox rng(PhiloxState{seed, 0, 0});
  return {.g = randn({s.rows, s.out}, rng, 1.0).to(DType::bf16),
          .x = randn({s.rows, s.in}, rng, 1.0).to(DType::bf16),
          .w = randn({s.out, s.in}, rng, 0.05)};
}

struct Grads {
  Tensor dx, dw, db;
  bool summed = false;
};

Grads empty_grads(const LinearShape& s, bool bias) {
  return {.dx = empty({s.rows, s.in}, DType::bf16),
          .dw = empty({s.out, s.in}, DType::f32, MemoryTag::gradient),
          .db = bias ? empty({s.out}, DType::f32, MemoryTag::gradient) : Tensor()};
}

std::string chosen(const LinearShape& s, DType w_dtype = DType::f32) {
  const Operands o = make(s, 1);
  const Tensor w = o.w.to(w_dtype);
  Grads r = empty_grads(s, true);
  return linear_grads.select(o.g, o.x, w, r.dx, r.dw, r.db).name;
}

void require_bf16_units() {
  if (!gemm_fast_has_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
}

// The rule: up to 64 rows, from 2^24 multiply-adds, an fp32 weight, more than one thread.
TEST(LinearGrads, OverlapsOnlyShortProductsThatWouldEachOpenARegion) {
  require_bf16_units();
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 forces the fallback everywhere";
  const int threads = num_threads();
  set_num_threads(2);
  EXPECT_EQ(chosen({64, 1024, 1024}), "overlapped_bf16");
  EXPECT_EQ(chosen({1, 4096, 4096}), "overlapped_bf16");  // exactly 2^24
  EXPECT_EQ(chosen({64, 1024, 10}), "separate");          // the classifier: below 2^24
  EXPECT_EQ(chosen({65, 1024, 1024}), "separate");        // more rows than one panel
  EXPECT_EQ(chosen({64, 1030, 1024}), "separate");        // dx's n not whole vectors
  EXPECT_EQ(chosen({64, 1024, 1024}, DType::bf16), "separate");
  set_num_threads(1);
  EXPECT_EQ(chosen({64, 1024, 1024}), "separate");
  set_num_threads(threads);
  ReferenceMode reference;
  EXPECT_EQ(chosen({64, 1024, 1024}), "separate");
}

// dx, dW and db bit for bit those of the two kernels called in turn, with and without the
// bias, for 2 and 3 threads (one of which has no part), at shapes around the tiles' edges.
TEST(LinearGrads, OverlappedGivesTheBitsOfTheSeparateKernels) {
  require_bf16_units();
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 forces the fallback everywhere";
  const int threads = num_threads();
  const std::vector<LinearShape> shapes = {
      {64, 784, 1024}, {64, 1024, 1024}, {7, 2048, 1200}, {37, 1040, 610}};
  uint64_t seed = 10;
  for (const LinearShape& s : shapes) {
    for (bool bias : {false, true}) {
      const Operands o = make(s, ++seed);
      const std::string what = std::to_string(s.rows) + " x " + std::to_string(s.in) + " -> " +
                               std::to_string(s.out) + (bias ? ", bias" : "");
      Grads want = empty_grads(s, bias);
      gemm_product({.m = s.rows, .n = s.in, .k = s.out}, o.g, o.w, Tensor(), want.dx);
      want.summed = linear_weight_grads(o.g, o.x, want.dw, want.db);
      for (int t : {2, 3}) {
        set_num_threads(t);
        Grads got = empty_grads(s, bias);
        ASSERT_EQ(std::string(linear_grads.select(o.g, o.x, o.w, got.dx, got.dw, got.db).name),
                  "overlapped_bf16")
            << what;
        got.summed = linear_grads(o.g, o.x, o.w, got.dx, got.dw, got.db);
        EXPECT_EQ(got.summed, want.summed) << what;
        EXPECT_EQ(got.dx.to_vector(), want.dx.to_vector()) << what << ", " << t << " threads";
        EXPECT_EQ(got.dw.to_vector(), want.dw.to_vector()) << what << ", " << t << " threads";
        if (bias) {
          EXPECT_EQ(got.db.to_vector(), want.db.to_vector()) << what;
        }
      }
    }
  }
  set_num_threads(threads);
}

}  // namespace
}  // namespace mixp::kernels
