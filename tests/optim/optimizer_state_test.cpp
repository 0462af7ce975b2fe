// Adam's moments in bf16 (AdamOptions::state_dtype): 2 bytes each, the update of an explicit
// per-element rule with Philox words, unbiased, the same bits whatever the thread count, and
// resumable from a checkpoint's moments and rounding state.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/memory.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/adamw.h"
#include "optim/optim_test_util.h"

namespace mixp {
namespace {

using optim::Precision;

std::vector<uint16_t> bits_of(const Tensor& t) { return test::bits_of<uint16_t>(t); }

std::vector<uint32_t> f32_bits_of(const Tensor& t) { return test::bits_of<uint32_t>(t); }

TEST(Bf16Moments, TakeTwoBytesAnElementEach) {
  const int64_t before = memory::stats().current(MemoryTag::optimizer_state);
  Tensor p = test::parameter(test::values(1, 1000), DType::f32);
  optim::AdamW opt({p}, {.state_dtype = DType::bf16});
  EXPECT_EQ(memory::stats().current(MemoryTag::optimizer_state) - before, 2 * 2 * 1000);
  EXPECT_EQ(opt.exp_avg(0).dtype(), DType::bf16);
  EXPECT_EQ(opt.exp_avg_sq(0).dtype(), DType::bf16);
}

TEST(Bf16Moments, BadStateDtypesAreRefusedNamingThem) {
  Tensor p = test::parameter({1.0}, DType::f32);
  try {
    optim::AdamW opt({p}, {.state_dtype = DType::f16});
    FAIL() << "f16 moments accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state_dtype must be f32 or bf16, got f16"),
              std::string::npos)
        << e.what();
  }
  Tensor d = test::parameter({1.0}, DType::f64);
  EXPECT_THROW(optim::Adam({p, d}, {.state_dtype = DType::bf16}), Error);
}

// The update by its definition, one element at a time: the moments widened, the fp32 rule of
// kernels/adam.h, the weight from the unrounded moments, then m and v rounded stochastically
// with the low and high halves of word (offset + i) of the rounding stream.
struct Reference {
  std::vector<float> w;
  std::vector<uint16_t> m, v;
};

void reference_adamw_step(Reference& r, const std::vector<float>& g, int64_t t, double lr,
                          std::array<double, 2> betas, double eps, double weight_decay,
                          const PhiloxState& words) {
  const float step_size = float(lr / (1.0 - std::pow(betas[0], double(t))));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(betas[1], double(t))));
  const float b1 = float(1.0 - betas[0]), beta2 = float(betas[1]), b2 = float(1.0 - betas[1]);
  const float shrink = float(1.0 - lr * weight_decay), e = float(eps);
  for (size_t i = 0; i < r.w.size(); ++i) {
    const float gi = g[i];
    const float w = r.w[i] * shrink;
    float m = float(bfloat16::from_bits(r.m[i])), v = float(bfloat16::from_bits(r.v[i]));
    m = m + b1 * (gi - m);
    v = beta2 * v + b2 * gi * gi;
    const float denom = std::sqrt(v) / bc2_sqrt + e;
    r.w[i] = w - step_size * (m / denom);
    const uint32_t word = philox_word(words, i);
    r.m[i] = bfloat16::round_stochastic(m, word).bits;
    r.v[i] = bfloat16::round_stochastic(v, word >> 16).bits;
  }
}

TEST(Bf16Moments, FollowTheElementRuleWithWordOffsetPlusI) {
  // Two parameters, the first larger than a parallel chunk (16 blocks of 1024) and neither a
  // multiple of a block: the second's words follow the first's in the stream.
  const std::vector<size_t> sizes = {40000 + 7, 333};
  std::vector<Tensor> params;
  std::vector<Reference> refs;
  for (size_t k = 0; k < sizes.size(); ++k) {
    params.push_back(test::parameter(test::values(int(k), sizes[k]), DType::f32));
    const std::vector<double> w = params.back().to_vector();
    refs.push_back({std::vector<float>(w.begin(), w.end()), std::vector<uint16_t>(sizes[k], 0),
                    std::vector<uint16_t>(sizes[k], 0)});
  }
  const PhiloxState start{17, 5, 12};
  const optim::AdamWOptions o{.lr = 0.01,
                              .betas = {0.9, 0.99},
                              .weight_decay = 0.1,
                              .rounding = start,
                              .state_dtype = DType::bf16};
  optim::AdamW opt(params, o);
  PhiloxState words = start;
  for (int t = 1; t <= 3; ++t) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      const std::vector<double> g =
          test::set_grad(params[k], test::values(10 * t + int(k), sizes[k], 1e-2), DType::f32);
      reference_adamw_step(refs[k], std::vector<float>(g.begin(), g.end()), t, o.lr, o.betas, o.eps,
                           o.weight_decay, words);
      words.offset += sizes[k];
    }
    opt.step();
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<uint32_t> want_w(sizes[k]);
      std::memcpy(want_w.data(), refs[k].w.data(), sizes[k] * sizeof(float));
      ASSERT_EQ(f32_bits_of(params[k]), want_w) << "step " << t << " parameter " << k;
      ASSERT_EQ(bits_of(opt.exp_avg(k)), refs[k].m) << "step " << t << " parameter " << k;
      ASSERT_EQ(bits_of(opt.exp_avg_sq(k)), refs[k].v) << "step " << t << " parameter " << k;
    }
    EXPECT_EQ(opt.rounding_state(), words);
  }
}

TEST(Bf16Moments, TheSecondMomentDecaysOnAverageWhereRoundingToNearestWouldFreezeIt) {
  // v = 1 and g = 0: each step multiplies v by beta2 = 0.999, a change of 2^-10 relative, under
  // half the bf16 spacing (2^-8 relative below 1), so rounding to nearest would keep v = 1.
  constexpr int64_t kElements = 4096;
  constexpr int kSteps = 100;
  Tensor p = test::parameter(std::vector<double>(kElements, 0.0), DType::f32);
  optim::AdamW opt(
      {p}, {.lr = 0.0, .weight_decay = 0.0, .rounding = {3, 1, 0}, .state_dtype = DType::bf16});
  Tensor v = opt.exp_avg_sq(0);
  v.fill_(1.0);
  EXPECT_EQ(float(bfloat16(0.999f)), 1.0f);  // one decay, rounded to nearest, gives v = 1 again
  for (int s = 0; s < kSteps; ++s) {
    test::set_grad(p, std::vector<double>(kElements, 0.0), DType::f32);
    opt.step();
  }
  double mean = 0;
  for (double x : v.to_vector()) mean += x;
  mean /= double(kElements);
  // Each rounding is unbiased and moves v by at most one spacing, 2^-8 below 1: the mean's
  // standard deviation is at most 2^-8 / 2 * sqrt(steps / elements); allow 6 of them.
  const double want = std::pow(0.999, kSteps);
  const double bound = 6.0 * 0x1p-8 / 2.0 * std::sqrt(double(kSteps) / double(kElements));
  EXPECT_NEAR(mean, want, bound);
  EXPECT_LT(bound, 0.2 * (1.0 - want));  // the test can tell the decay from none
}

TEST(Bf16Moments, BitsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<uint16_t>> moments;
  for (int threads : {1, 2, 3}) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    Tensor p = test::parameter(test::values(4, 50000), DType::bf16);
    optim::AdamW opt({p}, {.rounding = {8, 0, 0}, .state_dtype = DType::bf16});
    for (int s = 0; s < 2; ++s) {
      test::set_grad(p, test::values(s, 50000, 1e-3), DType::f32);
      opt.step();
    }
    omp_set_num_threads(saved);
    std::vector<uint16_t> all = bits_of(p);
    for (const Tensor& t : {opt.exp_avg(0), opt.exp_avg_sq(0)}) {
      const std::vector<uint16_t> b = bits_of(t);
      all.insert(all.end(), b.begin(), b.end());
    }
    moments.push_back(all);
  }
  EXPECT_EQ(moments[0], moments[1]);
  EXPECT_EQ(moments[0], moments[2]);
}

TEST(Bf16Moments, AResumedRunIsBitwiseTheUninterruptedOne) {
  // Under both bf16 preset modes: an fp32 master (split) and stochastic rounding of the
  // parameter, whose words interleave with the moments' in the stream.
  for (const Precision precision : {Precision::master_fp32, Precision::stochastic_rounding}) {
    SCOPED_TRACE(name_of(precision));
    const optim::AdamWOptions o{
        .lr = 0.01, .precision = precision, .rounding = {2, 7, 0}, .state_dtype = DType::bf16};
    auto grad = [](int s) { return test::values(s, 3000, 1e-2); };
    Tensor a = test::parameter(test::values(1, 3000), DType::bf16);
    optim::AdamW straight({a}, o);
    for (int s = 0; s < 6; ++s) {
      test::set_grad(a, grad(s), DType::f32);
      straight.step();
    }
    Tensor b = test::parameter(test::values(1, 3000), DType::bf16);
    optim::AdamW first({b}, o);
    for (int s = 0; s < 3; ++s) {
      test::set_grad(b, grad(s), DType::f32);
      first.step();
    }
    Tensor c = test::parameter(test::values(9, 3000), DType::bf16);  // overwritten below
    optim::AdamW resumed({c}, o);
    c.copy_(b);
    if (precision == Precision::master_fp32) resumed.set_master(0, first.master(0));
    Tensor m = resumed.exp_avg(0), v = resumed.exp_avg_sq(0);
    m.copy_(first.exp_avg(0));
    v.copy_(first.exp_avg_sq(0));
    resumed.set_parameter_steps(0, first.parameter_steps(0));
    resumed.set_steps(first.steps());
    resumed.set_rounding_state(first.rounding_state());
    for (int s = 3; s < 6; ++s) {
      test::set_grad(c, grad(s), DType::f32);
      resumed.step();
    }
    EXPECT_EQ(bits_of(c), bits_of(a));
    EXPECT_EQ(bits_of(resumed.exp_avg(0)), bits_of(straight.exp_avg(0)));
    EXPECT_EQ(bits_of(resumed.exp_avg_sq(0)), bits_of(straight.exp_avg_sq(0)));
    if (precision == Precision::master_fp32) {
      EXPECT_EQ(f32_bits_of(resumed.master(0)), f32_bits_of(straight.master(0)));
    }
  }
}

}  // namespace
}  // namespace mixp
