// The vectorized Adam update (kernels/adam.h): the scalar kernel's bits on every ISA, at
// awkward lengths, and within tolerance(f32) of the update computed in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/adam.h"
#include "mixp/cpu.h"
#include "mixp/random.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

struct State {
  std::vector<float> w, g, m, v;
};

State random_state(int64_t n) {
  Philox rng(PhiloxState{11, 0, 0});
  State s;
  for (int64_t i = 0; i < n; ++i) {
    s.w.push_back(float(rng.normal()));
    s.g.push_back(float(1e-2 * rng.normal()));
    s.m.push_back(float(1e-3 * rng.normal()));
    s.v.push_back(float(1e-5 * std::fabs(rng.normal())));
  }
  return s;
}

// AdamW's constants after 3 steps at lr 1e-3, betas (0.9, 0.99), weight decay 0.1.
kernels::AdamConstants adamw_constants() {
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.99;
  return {float(lr / (1 - std::pow(beta1, 3))),
          float(std::sqrt(1 - std::pow(beta2, 3))),
          float(1 - beta1),
          float(beta2),
          float(1 - beta2),
          1e-8f,
          0.0f,
          float(1 - lr * 0.1)};
}

// The AVX-512 kernel where the active ISA has it, else the scalar one (the optimizers'
// candidates, kernels/weight_update.h, call them by name).
void adam_for_active_isa(State& s, int64_t n, const kernels::AdamConstants& c) {
  if (active_isa() >= Isa::avx512) {
    kernels::avx512::adam_f32(s.w.data(), s.g.data(), s.m.data(), s.v.data(), n, c);
  } else {
    kernels::ref::adam_f32(s.w.data(), s.g.data(), s.m.data(), s.v.data(), n, c);
  }
}

TEST(AdamKernel, EveryIsaGivesTheScalarBits) {
  for (const int64_t n : {1, 15, 16, 17, 1037}) {
    const State start = random_state(n);
    for (const kernels::AdamConstants& c :
         {adamw_constants(), kernels::AdamConstants{0.01f, 0.3f, 0.1f, 0.999f, 0.001f, 1e-8f, 0.01f,
                                                    1.0f}}) {  // Adam with L2
      State want = start;
      kernels::ref::adam_f32(want.w.data(), want.g.data(), want.m.data(), want.v.data(), n, c);
      for (Isa isa : kAllIsas) {
        if (isa > best_isa()) continue;
        IsaLimit limit(isa);
        State got = start;
        adam_for_active_isa(got, n, c);
        const size_t bytes = size_t(n) * sizeof(float);
        EXPECT_EQ(std::memcmp(got.w.data(), want.w.data(), bytes), 0) << name_of(isa) << " n " << n;
        EXPECT_EQ(std::memcmp(got.m.data(), want.m.data(), bytes), 0) << name_of(isa) << " n " << n;
        EXPECT_EQ(std::memcmp(got.v.data(), want.v.data(), bytes), 0) << name_of(isa) << " n " << n;
      }
    }
  }
}

TEST(AdamKernel, IsWithinToleranceOfDouble) {
  const int64_t n = 4099;
  const State start = random_state(n);
  const kernels::AdamConstants c = adamw_constants();
  State got = start;
  adam_for_active_isa(got, n, c);
  // A handful of roundings on the update; the weight's own rounding dominates.
  const test::Tolerance tol = test::tolerance(DType::f32, 8);
  for (int64_t i = 0; i < n; ++i) {
    const double g = start.g[size_t(i)], w = double(start.w[size_t(i)]) * double(c.shrink);
    const double m = start.m[size_t(i)] + double(c.b1) * (g - start.m[size_t(i)]);
    const double v = double(c.beta2) * start.v[size_t(i)] + double(c.b2) * g * g;
    const double want = w - double(c.step_size) * m / (std::sqrt(v) / double(c.bc2_sqrt) + 1e-8);
    ASSERT_LE(std::fabs(got.w[size_t(i)] - want), tol.atol + tol.rtol * std::fabs(want)) << i;
    ASSERT_LE(std::fabs(got.m[size_t(i)] - m), tol.atol + tol.rtol * std::fabs(m)) << i;
    ASSERT_LE(std::fabs(got.v[size_t(i)] - v), tol.atol + tol.rtol * std::fabs(v)) << i;
  }
}

}  // namespace
}  // namespace mixp
