// Master weights, stochastic rounding and Kahan summation for bf16 and f16 parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/memory.h"
#include "mixp/ops.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/adamw.h"
#include "mixp/optim/sgd.h"
#include "optim/optim_test_util.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using optim::Precision;

std::vector<uint16_t> bits_of(const Tensor& t) { return test::bits_of<uint16_t>(t); }

// The update of every test below: lr * g = 2^-12, a sixteenth of the bf16 spacing 2^-8 just
// below 1 and an eighth of half the spacing 2^-7 above it, so rounding to nearest loses it.
constexpr double kLr = 1.0 / 16;
constexpr double kGrad = 1.0 / 256;
constexpr double kUpdate = kLr * kGrad;

TEST(MasterWeights, TinyUpdateIsLostInPlainBf16) {
  for (float w : {1.0f, 1.5f, 0.75f}) {
    const bfloat16 before(w);
    const bfloat16 after(float(before) - float(kUpdate));
    EXPECT_EQ(after.bits, before.bits) << w;
  }
}

TEST(MasterWeights, Fp32MasterAccumulatesTinyUpdatesAndMovesTheBf16Parameter) {
  const std::vector<double> start = {1.0, 1.5, 0.75, -1.0, 2.0};
  Tensor p = test::parameter(start, DType::bf16);
  const int64_t master_before = memory::stats().current(MemoryTag::master);
  optim::Sgd opt({p}, {.lr = kLr});
  // The master's low halves and tie bits: 2 bytes and 1 bit an element, the parameter holds
  // the rest.
  EXPECT_EQ(memory::stats().current(MemoryTag::master) - master_before,
            2 * int64_t(start.size()) + (int64_t(start.size()) + 7) / 8);
  ASSERT_TRUE(opt.master(0).defined());
  EXPECT_EQ(opt.master(0).dtype(), DType::f32);
  EXPECT_EQ(opt.master(0).to_vector(), p.to_vector());  // it starts as the parameter
  EXPECT_EQ(p.grad_dtype(), DType::f32);
  const std::vector<uint16_t> initial = bits_of(p);
  constexpr int kSteps = 40;
  for (int s = 0; s < kSteps; ++s) {
    test::set_grad(p, std::vector<double>(start.size(), kGrad), DType::f32);
    opt.step();
    const Tensor master = opt.master(0);
    // The parameter is the master rounded to nearest even, after every step.
    const std::vector<double> m = master.to_vector();
    const std::vector<uint16_t> b = bits_of(p);
    for (size_t i = 0; i < m.size(); ++i) {
      ASSERT_EQ(b[i], bfloat16(float(m[i])).bits) << "step " << s << " element " << i;
    }
    std::vector<double> want(start.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = start[i] - (s + 1) * kUpdate;
    ASSERT_EQ(test::compare(master, from_values(want, master.shape()),
                            test::tolerance(DType::f32, s + 1)),
              "")
        << "step " << s;
  }
  // 40 * 2^-12 is about 0.01: more than a bf16 step everywhere, so every element moved.
  const std::vector<uint16_t> final_bits = bits_of(p);
  for (size_t i = 0; i < start.size(); ++i) EXPECT_NE(final_bits[i], initial[i]) << i;
}

TEST(MasterWeights, Bf16AdamMasterIsBitwiseTheFp32Run) {
  const std::vector<double> start = test::values(0, 29);
  Tensor low = test::parameter(start, DType::bf16);
  Tensor full = test::parameter(low.to_vector(), DType::f32);  // the same starting values
  optim::AdamW a({low}, {.lr = 0.01, .weight_decay = 0.1});
  optim::AdamW b({full}, {.lr = 0.01, .weight_decay = 0.1});
  for (int s = 0; s < 5; ++s) {
    const std::vector<double> g = test::values(s + 1, start.size());
    test::set_grad(low, g, DType::f32);
    test::set_grad(full, g, DType::f32);
    a.step();
    b.step();
    EXPECT_EQ(a.master(0).to_vector(), full.to_vector());
    EXPECT_EQ(low.to_vector(), full.to(DType::bf16).to_vector());
  }
  EXPECT_TRUE(b.master(0).is_same(full));  // fp32 parameters are their own master
}

TEST(MasterWeights, ABf16MasterKeepsEveryBitTiesIncluded) {
  // Masters whose low halves are exactly 0x8000 (ties, from odd and even top halves), 0, and
  // others; a step with a zero gradient leaves each master as it is, bit for bit.
  const std::vector<uint32_t> kinds = {0x3f818000u, 0x3f808000u, 0xbf818000u,
                                       0x3f800000u, 0x3f807fffu, 0x3f808001u,
                                       0x00018000u, 0x7f7f8000u, 0x12345678u};
  std::vector<uint32_t> bits;  // 4 of each: past the vector kernels' 16 lanes, and a tail
  for (int copy = 0; copy < 4; ++copy) bits.insert(bits.end(), kinds.begin(), kinds.end());
  std::vector<float> values(bits.size());
  std::memcpy(values.data(), bits.data(), bits.size() * sizeof(float));
  Tensor p = test::parameter(std::vector<double>(bits.size(), 0.0), DType::bf16);
  optim::Sgd opt({p}, {.lr = kLr});
  opt.set_master(0, from_buffer(values.data(), {int64_t(values.size())}, DType::f32));
  for (size_t i = 0; i < values.size(); ++i)  // the parameter is the master rounded
    EXPECT_EQ(bits_of(p)[i], bfloat16(values[i]).bits) << i;
  for (int s = 0; s < 3; ++s) {
    test::set_grad(p, std::vector<double>(bits.size(), 0.0), DType::f32);
    opt.step();
    const Tensor m = opt.master(0);
    std::vector<uint32_t> got(bits.size());
    std::memcpy(got.data(), m.raw_data(), got.size() * sizeof(uint32_t));
    EXPECT_EQ(got, bits) << "step " << s;
  }
}

TEST(MasterWeights, AParameterWrittenByOthersRestartsItsMaster) {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(name_of(dtype));
    Tensor p = test::parameter({1.0, -2.0}, dtype);
    optim::Sgd opt({p}, {.lr = kLr});
    test::set_grad(p, {kGrad, kGrad}, DType::f32);
    opt.step();  // the master is now 1 - 2^-12, which the parameter does not show
    EXPECT_NE(opt.master(0).to_vector(), p.to_vector());
    p.copy_(from_values({4.0, 8.0}, p.shape()));  // loaded weights, say
    EXPECT_EQ(opt.master(0).to_vector(), (std::vector<double>{4.0, 8.0}));
    test::set_grad(p, {kGrad, kGrad}, DType::f32);
    opt.step();  // from the new weights, not from the old master
    EXPECT_EQ(opt.master(0).to_vector(), (std::vector<double>{4.0 - kUpdate, 8.0 - kUpdate}));
  }
}

TEST(MasterWeights, SetMasterChecksWhatItIsGiven) {
  Tensor p = test::parameter({1.0, 2.0}, DType::bf16);
  optim::Sgd opt({p});
  EXPECT_THROW(opt.set_master(0, from_values({1.0}, {1})), Error);                    // shape
  EXPECT_THROW(opt.set_master(0, from_values({1.0, 2.0}, {2}, DType::bf16)), Error);  // dtype
  EXPECT_THROW(opt.set_master(1, from_values({1.0, 2.0}, {2})), Error);               // index
  Tensor q = test::parameter({1.0, 2.0}, DType::bf16);
  optim::Sgd sr({q}, {.precision = Precision::stochastic_rounding});
  EXPECT_THROW(sr.set_master(0, from_values({1.0, 2.0}, {2})), Error);  // no master kept
}

TEST(MasterWeights, F16ParameterUsesAnFp32MasterToo) {
  Tensor p = test::parameter({1.0, 3.0}, DType::f16);
  optim::Sgd opt({p}, {.lr = kLr});
  // f16 keeps 11 bits: 2^-12 is under half its spacing 2^-10 at 1 and 2^-9 at 3.
  for (int s = 0; s < 16; ++s) {
    test::set_grad(p, {kGrad, kGrad}, DType::f32);
    opt.step();
    const std::vector<double> m = opt.master(0).to_vector();
    const std::vector<uint16_t> b = bits_of(p);
    for (size_t i = 0; i < m.size(); ++i) ASSERT_EQ(b[i], float16(float(m[i])).bits);
  }
  EXPECT_EQ(p.to_vector()[0], 1.0 - 16 * kUpdate);  // 2^-8 is exact in f16 here
}

TEST(MasterWeights, GradientsOfBf16ParametersAccumulateInFp32) {
  Tensor p = test::parameter({1.5, -0.5, 2.0}, DType::bf16);
  optim::Adam opt({p});
  Tensor loss = ops::sum(ops::mul(p, p));
  loss.backward();
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(p.grad().dtype(), DType::f32);
  EXPECT_EQ(p.grad().to_vector(), (std::vector<double>{3.0, -1.0, 4.0}));
  opt.step();
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(MasterWeights, ExistingLowPrecisionGradientIsWidened) {
  Tensor p = test::parameter({1.0, 2.0}, DType::bf16);
  test::set_grad(p, {0.5, 0.25}, DType::bf16);
  optim::Sgd opt({p});
  EXPECT_EQ(p.grad().dtype(), DType::f32);
  EXPECT_EQ(p.grad().to_vector(), (std::vector<double>{0.5, 0.25}));
}

// ---- stochastic rounding ----

struct SrRun {
  std::vector<uint16_t> bits;
  std::vector<double> values;
  PhiloxState state;
};

constexpr int64_t kSrElements = 4096;
constexpr int kSrSteps = 32;

SrRun run_stochastic(uint64_t seed) {
  Tensor p = test::parameter(std::vector<double>(size_t(kSrElements), 1.0), DType::bf16);
  const int64_t master_before = memory::stats().current(MemoryTag::master);
  optim::Sgd opt({p}, {.lr = kLr,
                       .precision = Precision::stochastic_rounding,
                       .rounding = PhiloxState{seed, /*stream=*/3, /*offset=*/0}});
  EXPECT_EQ(memory::stats().current(MemoryTag::master), master_before);
  EXPECT_FALSE(opt.master(0).defined());
  EXPECT_EQ(p.grad_dtype(), DType::f32);
  for (int s = 0; s < kSrSteps; ++s) {
    test::set_grad(p, std::vector<double>(size_t(kSrElements), kGrad), DType::f32);
    opt.step();
  }
  return {bits_of(p), p.to_vector(), opt.rounding_state()};
}

TEST(StochasticRounding, TinyUpdatesMoveTheWeightByTheRightAmountOnAverage) {
  const SrRun run = run_stochastic(11);
  double mean = 0;
  for (double v : run.values) mean += v;
  mean /= double(run.values.size());
  // Each step rounds w - u (u = 2^-12, w <= 1) to one of its two bf16 neighbours 2^-8 apart,
  // without bias; the variance it adds is at most gap^2 / 4. Over the steps and the elements
  // the mean's standard deviation is at most gap / 2 * sqrt(steps / elements); allow 6 of them.
  const double want = 1.0 - kSrSteps * kUpdate;
  const double gap = 0x1p-8;
  const double bound = 6.0 * gap / 2.0 * std::sqrt(double(kSrSteps) / double(kSrElements));
  EXPECT_NEAR(mean, want, bound);
  EXPECT_LT(bound, 0.2 * kSrSteps * kUpdate);  // the test can tell movement from none
  // Every value is a bf16 value in [1 - steps * gap, 1].
  for (double v : run.values) EXPECT_TRUE(v <= 1.0 && v >= 1.0 - kSrSteps * gap);
}

TEST(StochasticRounding, IsReproducibleForASeedAndAdvancesTheOffset) {
  const SrRun a = run_stochastic(5), b = run_stochastic(5), c = run_stochastic(6);
  EXPECT_EQ(a.bits, b.bits);
  EXPECT_NE(a.bits, c.bits);
  EXPECT_EQ(a.state, (PhiloxState{5, 3, uint64_t(kSrSteps * kSrElements)}));
}

TEST(StochasticRounding, ElementIUsesWordOffsetPlusIAcrossBlocksAndThreads) {
  // More elements than one parallel chunk (16 blocks of 1024), and not a multiple of either.
  const size_t n = 40000 + 7;
  Tensor p = test::parameter(test::values(1, n), DType::bf16);
  const std::vector<double> g = test::values(2, n, 1e-3);
  const PhiloxState start{21, 4, 1000};
  optim::Sgd opt({p}, {.lr = 0.5, .precision = Precision::stochastic_rounding, .rounding = start});
  // The new values in fp32, as the optimizer computes them: w - lr * g.
  const std::vector<double> w = p.to_vector();
  const std::vector<double> stored_g = test::set_grad(p, g, DType::f32);
  std::vector<double> next(n);
  for (size_t i = 0; i < n; ++i) next[i] = double(float(w[i]) - 0.5f * float(stored_g[i]));
  Philox generator(start);
  const Tensor want = from_values(next, p.shape(), DType::f32).to(DType::bf16, generator);
  opt.step();
  EXPECT_EQ(bits_of(p), bits_of(want));
  EXPECT_EQ(opt.rounding_state(), generator.state());
}

TEST(StochasticRounding, Fp32ParametersAreUpdatedExactly) {
  Tensor p = test::parameter({1.0}, DType::f32);
  optim::Sgd opt({p}, {.lr = kLr, .precision = Precision::stochastic_rounding});
  test::set_grad(p, {kGrad}, DType::f32);
  opt.step();
  EXPECT_EQ(p.item(), 1.0 - kUpdate);
  EXPECT_EQ(opt.rounding_state().offset, 0u);  // no words used: nothing was rounded
}

TEST(StochasticRounding, F16MovesOnAverageToo) {
  Tensor p = test::parameter(std::vector<double>(size_t(kSrElements), 1.0), DType::f16);
  optim::Sgd opt(
      {p}, {.lr = kLr, .precision = Precision::stochastic_rounding, .rounding = PhiloxState{9}});
  constexpr int kSteps = 8;
  for (int s = 0; s < kSteps; ++s) {
    test::set_grad(p, std::vector<double>(size_t(kSrElements), kGrad), DType::f32);
    opt.step();
  }
  double mean = 0;
  for (double v : p.to_vector()) mean += v;
  mean /= double(kSrElements);
  const double gap = 0x1p-11;  // f16 spacing just below 1
  EXPECT_NEAR(mean, 1.0 - kSteps * kUpdate,
              6.0 * gap / 2.0 * std::sqrt(double(kSteps) / double(kSrElements)));
}

// ---- Kahan summation ----

TEST(Kahan, CompensationCarriesTinyUpdatesIntoTheBf16Parameter) {
  const std::vector<double> start = {1.0, 1.5, 0.75, -1.0, 2.0};
  Tensor p = test::parameter(start, DType::bf16);
  const int64_t master_before = memory::stats().current(MemoryTag::master);
  optim::Sgd opt({p}, {.lr = kLr, .precision = Precision::kahan});
  EXPECT_EQ(memory::stats().current(MemoryTag::master), master_before);
  const Tensor& c = opt.compensation(0);
  ASSERT_TRUE(c.defined());
  EXPECT_EQ(c.dtype(), DType::bf16);
  EXPECT_EQ(c.tag(), MemoryTag::optimizer_state);
  EXPECT_FALSE(opt.master(0).defined());
  const std::vector<uint16_t> initial = bits_of(p);
  constexpr int kSteps = 100;
  for (int s = 0; s < kSteps; ++s) {
    test::set_grad(p, std::vector<double>(start.size(), kGrad), DType::f32);
    opt.step();
    std::vector<double> want(start.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = start[i] - (s + 1) * kUpdate;
    // The parameter stays within one rounding of the exact sum.
    ASSERT_EQ(
        test::compare(p, from_values(want, p.shape(), DType::bf16), test::tolerance(DType::bf16)),
        "")
        << "step " << s;
  }
  const std::vector<uint16_t> final_bits = bits_of(p);
  for (size_t i = 0; i < start.size(); ++i) EXPECT_NE(final_bits[i], initial[i]) << i;
}

TEST(Kahan, AdamOnBf16TracksTheFp32RunClosely) {
  const std::vector<double> start = test::values(0, 64);
  Tensor low = test::parameter(start, DType::bf16);
  Tensor full = test::parameter(low.to_vector(), DType::f32);
  const std::vector<double> initial = full.to_vector();
  optim::Adam a({low}, {.lr = 1e-3, .precision = Precision::kahan});
  optim::Adam b({full}, {.lr = 1e-3});
  constexpr int kSteps = 100;
  for (int s = 0; s < kSteps; ++s) {
    // Gradients of one sign: each update is about lr, below half a bf16 spacing for
    // |w| > 0.25, and they add up to about kSteps * lr = 0.1.
    std::vector<double> g = test::values(s + 1, start.size(), 0.5);
    for (double& x : g) x += 1.0;
    test::set_grad(low, g, DType::f32);
    test::set_grad(full, g, DType::f32);
    a.step();
    b.step();
  }
  const test::Tolerance tol = test::tolerance(DType::bf16);
  EXPECT_EQ(test::compare(low, full.to(DType::bf16), tol), "");
  // The fp32 run moved much further than the tolerance, so staying put would fail above.
  const std::vector<double> moved = full.to_vector();
  for (size_t i = 0; i < moved.size(); ++i) {
    EXPECT_GT(std::fabs(moved[i] - initial[i]), 2 * (tol.atol + tol.rtol * std::fabs(moved[i])));
  }
}

}  // namespace
}  // namespace mixp

namespace mixp {
namespace {

// Pieces of parameters (as ZeRO's processes hold them) round stochastically as the whole ones
// do: each piece draws its elements' words of the whole parameter, and the stream moves on by
// the whole count, so two optimizers over the two halves give the whole optimizer's bits.
TEST(OptimizerPieces, StochasticRoundingOfPiecesIsTheWholeParametersBits) {
  const auto values = [](double shift) {
    std::vector<double> v(64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(double(i) + shift);
    return v;
  };
  const optim::AdamOptions options{.lr = 1e-3,
                                   .precision = optim::Precision::stochastic_rounding,
                                   .rounding = {/*seed=*/3, /*stream=*/1},
                                   .state_dtype = DType::bf16};
  Tensor whole_a = from_values(values(0), {8, 8}, DType::bf16).set_requires_grad(true);
  Tensor whole_b = from_values(values(1), {64}, DType::bf16).set_requires_grad(true);
  optim::Adam whole({whole_a, whole_b}, options);
  Tensor a = from_values(values(0), {8, 8}, DType::bf16), b = from_values(values(1), {64}, DType::bf16);
  std::vector<Tensor> first, second;  // halves of each parameter, as two processes hold them
  for (Tensor* t : {&a, &b}) {
    first.push_back(t->reshape({-1}).slice(0, 32).set_requires_grad(true));
    second.push_back(t->reshape({-1}).slice(32, 64).set_requires_grad(true));
  }
  optim::Adam piece_one(first, options), piece_two(second, options);
  piece_one.set_pieces_of({64, 64}, {0, 0});
  piece_two.set_pieces_of({64, 64}, {32, 32});
  for (int step = 0; step < 3; ++step) {
    const Tensor g = from_values(values(0.5 * step), {64}, DType::f32);
    whole_a.set_grad(g.reshape({8, 8}));
    whole_b.set_grad(g);
    for (size_t k = 0; k < 2; ++k) {
      first[k].set_grad(g.slice(0, 32));
      second[k].set_grad(g.slice(32, 64));
    }
    whole.step();
    piece_one.step();
    piece_two.step();
  }
  EXPECT_EQ(a.to_vector(), whole_a.to_vector());
  EXPECT_EQ(b.to_vector(), whole_b.to_vector());
  EXPECT_EQ(piece_one.rounding_state(), whole.rounding_state());
  EXPECT_THROW(piece_one.set_pieces_of({16, 64}, {0, 0}), Error);  // 32 elements in 16
}

}  // namespace
}  // namespace mixp
