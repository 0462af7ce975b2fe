// The elementwise kernels (kernels/elementwise_ops.h) and the average pooling's: the candidate
// the registry chooses on each dtype against the fallback, on awkward lengths and broadcasts.
// Where the op is one correctly rounded operation (+, -, *, /, sqrt, a sign or a comparison),
// fp32 compute and double compute round to the same value (fp32 has more than twice the bits
// of f16 and bf16, and double more than twice fp32's), so the bits must be equal; elsewhere the
// fast path computes in fp32 and the fallback in double, and they agree within the tolerance.
// (The scalars are exact in every dtype, as the fast path rounds them to fp32 first.)
#include "kernels/elementwise_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/avg_pool2d.h"
#include "mixp/runtime.h"
#include "support/tolerance.h"

namespace mixp::kernels {
namespace {

enum class Agreement { bits, tolerance };
using enum Agreement;

constexpr DType kDtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr int64_t kLengths[] = {1, 15, 17, 1000, 70001};

// Values where every op is defined and well conditioned: |x| in [0.25, 3), either sign unless
// `positive`.
Tensor values(const Shape& shape, DType dtype, uint64_t seed, bool positive) {
  Philox generator(PhiloxState{seed});
  Tensor magnitude = uniform(shape, generator, 0.25, 3.0, DType::f64);
  if (!positive) {
    const Tensor sign = uniform(shape, generator, -1.0, 1.0, DType::f64);
    std::vector<double> m = magnitude.to_vector();
    const std::vector<double> s = sign.to_vector();
    for (size_t i = 0; i < m.size(); ++i) m[i] = s[i] < 0 ? -m[i] : m[i];
    magnitude = from_values(m, shape, DType::f64);
  }
  return magnitude.to(dtype);
}

Shape broadcast(const Shape& a, const Shape& b) {
  const int nd = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) {
    const int ia = a.ndim() - nd + i, ib = b.ndim() - nd + i;
    dims[size_t(i)] = std::max(ia >= 0 ? a[ia] : 1, ib >= 0 ? b[ib] : 1);
  }
  return Shape(dims);
}

void expect_agree(const Tensor& fast, const Tensor& plain, Agreement agreement,
                  const std::string& what) {
  ASSERT_EQ(fast.dtype(), plain.dtype()) << what;
  ASSERT_EQ(fast.shape(), plain.shape()) << what;
  if (agreement == bits) {
    EXPECT_EQ(0, std::memcmp(fast.raw_data(), plain.raw_data(), fast.nbytes())) << what;
  } else {
    const std::string worst = test::compare(fast, plain, test::tolerance(fast.dtype()));
    EXPECT_TRUE(worst.empty()) << what << ": " << worst;
  }
}

// Runs `call(out)` on the chosen candidate and on the fallback, and compares the outputs;
// records the chosen candidate's name.
template <typename Info, typename Call>
void fast_against_fallback(const Info& kernel, const Shape& shape, DType dtype, Agreement agreement,
                           std::set<std::string>& chosen, Call call, const std::string& what) {
  Tensor fast = empty(shape, dtype), plain = empty(shape, dtype);
  chosen.insert(call(fast, false));
  EXPECT_STREQ(call(plain, true), "scalar") << what;
  expect_agree(fast, plain, agreement, std::string(kernel.name()) + " " + what);
}

// Every cpu candidate of the kernel was chosen on some dtype (outside reference mode, which
// chooses only the fallback).
void expect_all_chosen(const KernelInfo& kernel, const std::set<std::string>& chosen) {
  if (reference_mode()) return;
  for (const KernelInfo::Entry& e : kernel.entries()) {
    if (e.device != Device::cpu || e.fallback) continue;
    EXPECT_TRUE(chosen.count(e.name)) << kernel.name() << ": " << e.name << " never chosen";
  }
}

struct UnaryCase {
  Kernel<UnaryFn>* forward;
  Kernel<UnaryBackwardFn>* backward;
  bool positive;  ///< the op's domain (log, sqrt, rsqrt)
  Agreement forward_agreement, backward_agreement;
};

TEST(ElementwiseKernels, UnaryCandidatesGiveTheFallbacksResults) {
  const UnaryCase cases[] = {
      {&relu_forward, &relu_backward, false, bits, bits},
      {&neg_forward, &neg_backward, false, bits, bits},
      {&sqrt_forward, &sqrt_backward, true, bits, tolerance},
      {&exp_forward, &exp_backward, false, tolerance, bits},
      {&log_forward, &log_backward, true, tolerance, bits},
      {&rsqrt_forward, &rsqrt_backward, true, tolerance, tolerance},
      {&tanh_forward, &tanh_backward, false, tolerance, tolerance},
      {&sigmoid_forward, &sigmoid_backward, false, tolerance, tolerance},
      {&gelu_forward, &gelu_backward, false, tolerance, tolerance},
      {&gelu_tanh_forward, &gelu_tanh_backward, false, tolerance, tolerance},
      {&silu_forward, &silu_backward, false, tolerance, tolerance},
  };
  for (const UnaryCase& c : cases) {
    std::set<std::string> forward_chosen, backward_chosen;
    for (DType dtype : kDtypes) {
      for (int64_t n : kLengths) {
        const std::string what = std::string(name_of(dtype)) + " [" + std::to_string(n) + "]";
        const Tensor x = values({n}, dtype, 3 + uint64_t(n), c.positive);
        const Tensor g = values({n}, dtype, 5 + uint64_t(n), false);
        auto forward = [&](Tensor& y, bool reference) {
          std::optional<ReferenceMode> on;
          if (reference) on.emplace();
          (*c.forward)(x, y);
          return c.forward->select(x, y).name;
        };
        fast_against_fallback(*c.forward, {n}, dtype, c.forward_agreement, forward_chosen, forward,
                              what);
        auto backward = [&](Tensor& dx, bool reference) {
          std::optional<ReferenceMode> on;
          if (reference) on.emplace();
          (*c.backward)(g, x, dx);
          return c.backward->select(g, x, dx).name;
        };
        fast_against_fallback(*c.backward, {n}, dtype, c.backward_agreement, backward_chosen,
                              backward, what);
      }
    }
    expect_all_chosen(*c.forward, forward_chosen);
    expect_all_chosen(*c.backward, backward_chosen);
  }
}

struct ScalarCase {
  Kernel<ScalarUnaryFn>* forward;
  Kernel<ScalarUnaryBackwardFn>* backward;
  double scalar;
  bool positive;
  Agreement forward_agreement, backward_agreement;
};

TEST(ElementwiseKernels, ScalarCandidatesGiveTheFallbacksResults) {
  const ScalarCase cases[] = {
      {&add_scalar_forward, &add_scalar_backward, 0.375, false, bits, bits},
      {&mul_scalar_forward, &mul_scalar_backward, -1.75, false, bits, bits},
      {&pow_scalar_forward, &pow_scalar_backward, 2.5, true, tolerance, tolerance},
  };
  for (const ScalarCase& c : cases) {
    std::set<std::string> forward_chosen, backward_chosen;
    for (DType dtype : kDtypes) {
      for (int64_t n : kLengths) {
        const std::string what = std::string(name_of(dtype)) + " [" + std::to_string(n) + "]";
        const Tensor x = values({n}, dtype, 7 + uint64_t(n), c.positive);
        const Tensor g = values({n}, dtype, 9 + uint64_t(n), false);
        auto forward = [&](Tensor& y, bool reference) {
          std::optional<ReferenceMode> on;
          if (reference) on.emplace();
          (*c.forward)(x, c.scalar, y);
          return c.forward->select(x, c.scalar, y).name;
        };
        fast_against_fallback(*c.forward, {n}, dtype, c.forward_agreement, forward_chosen, forward,
                              what);
        auto backward = [&](Tensor& dx, bool reference) {
          std::optional<ReferenceMode> on;
          if (reference) on.emplace();
          (*c.backward)(g, x, c.scalar, dx);
          return c.backward->select(g, x, c.scalar, dx).name;
        };
        fast_against_fallback(*c.backward, {n}, dtype, c.backward_agreement, backward_chosen,
                              backward, what);
      }
    }
    expect_all_chosen(*c.forward, forward_chosen);
    expect_all_chosen(*c.backward, backward_chosen);
  }
}

struct BinaryCase {
  Kernel<BinaryFn>* forward;
  Kernel<BinaryBackwardFn>* backward;  ///< null: both gradients are g (add)
  Agreement backward_a, backward_b;
};

TEST(ElementwiseKernels, BinaryCandidatesGiveTheFallbacksResults) {
  const BinaryCase cases[] = {{&add_forward, nullptr, bits, bits},
                              {&sub_forward, &sub_backward, bits, bits},
                              {&mul_forward, &mul_backward, bits, bits},
                              {&div_forward, &div_backward, bits, tolerance}};
  for (const BinaryCase& c : cases) {
    std::set<std::string> chosen, backward_chosen;
    for (DType dtype : kDtypes) {
      for (int64_t n : kLengths) {
        // Same shape, each side broadcast, and both broadcast.
        const std::vector<std::pair<Shape, Shape>> shapes = {
            {{n}, {n}}, {{2, n}, {n}}, {{n}, {3, n}}, {{n, 1}, {1, 3}}};
        for (const auto& [sa, sb] : shapes) {
          const Tensor a = values(sa, dtype, 11 + uint64_t(n), false);
          const Tensor b = values(sb, dtype, 13 + uint64_t(n), true);
          const Shape shape = broadcast(sa, sb);
          const std::string what =
              std::string(name_of(dtype)) + " " + sa.to_string() + " " + sb.to_string();
          auto forward = [&](Tensor& y, bool reference) {
            std::optional<ReferenceMode> on;
            if (reference) on.emplace();
            (*c.forward)(a, b, y);
            return c.forward->select(a, b, y).name;
          };
          fast_against_fallback(*c.forward, shape, dtype, bits, chosen, forward, what);
        }
        if (c.backward == nullptr) continue;
        const Tensor g = values({n}, dtype, 15 + uint64_t(n), false);
        const Tensor a = values({n}, dtype, 17 + uint64_t(n), false);
        const Tensor b = values({n}, dtype, 19 + uint64_t(n), true);
        for (Operand which : {Operand::a, Operand::b}) {
          auto backward = [&](Tensor& d, bool reference) {
            std::optional<ReferenceMode> on;
            if (reference) on.emplace();
            (*c.backward)(g, a, b, which, d);
            return c.backward->select(g, a, b, which, d).name;
          };
          fast_against_fallback(*c.backward, {n}, dtype,
                                which == Operand::a ? c.backward_a : c.backward_b, backward_chosen,
                                backward,
                                std::string(name_of(dtype)) + (which == Operand::a ? " a" : " b"));
        }
      }
    }
    expect_all_chosen(*c.forward, chosen);
    if (c.backward != nullptr) expect_all_chosen(*c.backward, backward_chosen);
  }
}

// An fp32 and a bf16 or f16 input, as autocast hands them to the widening ops: fp32 out.
TEST(ElementwiseKernels, WideningCandidatesGiveTheFallbacksBits) {
  for (Kernel<BinaryFn>* kernel : {&add_forward, &sub_forward, &mul_forward, &div_forward}) {
    std::set<std::string> chosen;
    for (DType narrow : {DType::bf16, DType::f16}) {
      for (int64_t n : kLengths) {
        const Tensor wide = values({n}, DType::f32, 21 + uint64_t(n), true);
        const Tensor low = values({n}, narrow, 23 + uint64_t(n), true);
        for (bool wide_first : {true, false}) {
          const Tensor& a = wide_first ? wide : low;
          const Tensor& b = wide_first ? low : wide;
          auto forward = [&](Tensor& y, bool reference) {
            std::optional<ReferenceMode> on;
            if (reference) on.emplace();
            (*kernel)(a, b, y);
            return kernel->select(a, b, y).name;
          };
          fast_against_fallback(*kernel, {n}, DType::f32, bits, chosen, forward,
                                std::string(name_of(a.dtype())) + " " + name_of(b.dtype()));
        }
      }
    }
  }
}

TEST(AvgPool2dKernels, TheThreadedCandidateAgreesWithTheFallback) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 runs only the fallback";
  // 3 x 3 windows, stride 2, padding 1, over an odd plane: windows overlap and are clipped.
  const Pool2dShape p{.planes = 6,
                      .h = 15,
                      .w = 17,
                      .rows = sliding_axis(15, 3, 2, 1),
                      .cols = sliding_axis(17, 3, 2, 1)};
  const Shape in{2, 3, 15, 17}, out{2, 3, p.rows.size(), p.cols.size()};
  for (DType dtype : kDtypes) {
    const Tensor x = values(in, dtype, 25, false);
    const Tensor dy = values(out, dtype, 27, false);
    Tensor y_fast = empty(out, dtype), y_plain = empty(out, dtype);
    Tensor dx_fast = empty(in, dtype), dx_plain = empty(in, dtype);
    EXPECT_STREQ(avg_pool2d_forward.select(p, x, y_fast).name, "openmp");
    avg_pool2d_forward(p, x, y_fast);
    avg_pool2d_backward(p, dy, dx_fast);
    {
      ReferenceMode on;
      avg_pool2d_forward(p, x, y_plain);
      avg_pool2d_backward(p, dy, dx_plain);
    }
    EXPECT_TRUE(test::compare(y_fast, y_plain, test::tolerance(dtype, 9)).empty())
        << name_of(dtype);
    EXPECT_TRUE(test::compare(dx_fast, dx_plain, test::tolerance(dtype, 9)).empty())
        << name_of(dtype);
  }
}

}  // namespace
}  // namespace mixp::kernels
