// The optimizers' kernels (kernels/weight_update.h, kernels/grad_norm.h, kernels/master_split.h)
// and the FP8/FP4 quantization kernels (kernels/fp8_quantize.h, kernels/fp4_quantize.h): every
// CPU candidate this machine can run gives its fallback's bits (the GEMMs, whose fallback sums in
// double, within the tolerance of an fp32 sum), the registry chooses by the device of a slot, and a
// slot whose tensors sit on two devices is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/fp4_quantize.h"
#include "kernels/fp8_quantize.h"
#include "kernels/grad_norm.h"
#include "kernels/master_split.h"
#include "kernels/weight_update.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/runtime.h"
#include "support/protected_device.h"
#include "support/tolerance.h"

namespace mixp::kernels {
namespace {

constexpr const char* kEveryCallRunsTheFallback =
    "MIXP_REFERENCE=1 sends every call to the fallback: no other candidate to compare";

/// What one candidate computed: its name, and the bytes of every tensor it wrote.
struct Outcome {
  std::string name;
  std::vector<uint8_t> bytes;
};

void append(std::vector<uint8_t>& bytes, const Tensor& t) {
  if (!t.defined()) return;
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  bytes.insert(bytes.end(), p, p + t.nbytes());
}

/// run() once per CPU candidate of `kernel` that this CPU can run, under the ISA limit (for the
/// fallback, the reference mode) at which the registry picks it, and each candidate's outcome
/// once, the fallback's last. (A candidate behind another whose predicate takes the same calls is
/// never chosen here: onednn after onednn_bf16 on a CPU with AVX-512 BF16.)
template <typename K, typename Run>
std::vector<Outcome> each_candidate(const K& kernel, const Run& run) {
  std::vector<Outcome> outcomes;
  for (const KernelInfo::Entry& e : kernel.entries()) {
    if (e.device != Device::cpu || e.isa > best_isa()) continue;
    std::optional<ReferenceMode> reference;
    std::optional<IsaLimit> limit;
    if (e.fallback) {
      reference.emplace();
    } else {
      limit.emplace(e.isa);
    }
    Outcome o = run();
    bool seen = false;
    for (const Outcome& before : outcomes) seen = seen || before.name == o.name;
    if (!seen) outcomes.push_back(std::move(o));
    if (e.fallback) {
      EXPECT_EQ(outcomes.back().name, e.name) << kernel.name();
    }
  }
  EXPECT_GE(outcomes.size(), 2u) << kernel.name() << ": a fast candidate and the fallback";
  return outcomes;
}

void expect_fallback_bits(const std::vector<Outcome>& outcomes, const std::string& what) {
  ASSERT_FALSE(outcomes.empty());
  const Outcome& fallback = outcomes.back();
  for (const Outcome& o : outcomes) {
    EXPECT_TRUE(o.bytes == fallback.bytes) << what << ": " << o.name << " differs from "
                                           << fallback.name;
  }
}

// Two chunks of 16 x kBlock and a tail, so that the threads split the work, and a short one.
const int64_t kLengths[] = {2 * 16 * kBlock + 999, 37};

Tensor random_values(int64_t n, uint64_t seed, DType dtype, double scale = 1.0) {
  Philox generator(PhiloxState{seed});
  return randn({n}, generator, scale).to(dtype);
}

Tensor random_bytes(int64_t n, uint64_t seed) {
  Philox generator(PhiloxState{seed, 9});
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  for (uint8_t& b : bytes) b = uint8_t(generator.next_u32());
  return from_buffer(bytes.data(), {n}, DType::u8);
}

enum class Keep { in_place, master, master_low, stochastic, kahan };

struct WeightCase {
  DType param, grad;
  Keep keep;
};

// Every way a parameter keeps its precision, with gradients of every dtype an update takes.
const WeightCase kWeightCases[] = {
    {DType::f32, DType::f32, Keep::in_place},    {DType::f32, DType::bf16, Keep::in_place},
    {DType::f32, DType::f16, Keep::in_place},    {DType::f64, DType::f64, Keep::in_place},
    {DType::bf16, DType::f32, Keep::master_low}, {DType::bf16, DType::f32, Keep::stochastic},
    {DType::bf16, DType::f32, Keep::kahan},      {DType::f16, DType::f32, Keep::master},
    {DType::f16, DType::f32, Keep::stochastic},  {DType::f16, DType::f32, Keep::kahan}};

WeightSlot weight_slot(const WeightCase& c, int64_t n, uint64_t seed) {
  WeightSlot s;
  s.param = random_values(n, seed, c.param);
  s.grad = random_values(n, seed + 1, c.grad, 0.1);
  switch (c.keep) {
    case Keep::in_place: break;
    case Keep::master: s.master = s.param.to(DType::f32); break;
    case Keep::master_low: s.master_low = random_bytes(2 * n + (n + 7) / 8, seed + 2); break;
    case Keep::stochastic:
      s.stochastic = true;
      s.rng = PhiloxState{seed, 3, 17};
      break;
    case Keep::kahan: s.compensation = random_values(n, seed + 3, c.param, 1e-4); break;
  }
  return s;
}

void append(std::vector<uint8_t>& bytes, const WeightSlot& s) {
  for (const Tensor* t : {&s.param, &s.master, &s.master_low, &s.compensation}) append(bytes, *t);
}

// A second moment: positive.
Tensor squares(const Tensor& t, DType dtype) {
  std::vector<double> v = t.to_vector();
  for (double& x : v) x = x * x;
  return from_values(v, t.shape(), dtype);
}

std::vector<AdamSlot> adam_slots(bool bf16_moments) {
  std::vector<AdamSlot> slots;
  uint64_t seed = 1;
  for (const WeightCase& c : kWeightCases) {
    if (bf16_moments && c.param == DType::f64) continue;
    for (int64_t n : kLengths) {
      const DType moments = c.param == DType::f64 ? DType::f64
                            : bf16_moments        ? DType::bf16
                                                  : DType::f32;
      AdamSlot s{.weights = weight_slot(c, n, seed),
                 .exp_avg = random_values(n, seed + 4, moments, 0.01),
                 .exp_avg_sq = squares(random_values(n, seed + 5, DType::f64, 0.03), moments),
                 .state_rng = PhiloxState{seed, 5, 3},
                 .hyper = {.step = int64_t(seed % 5 + 1),
                           .lr = 1e-2,
                           .betas = {0.9, 0.99},
                           .eps = 1e-8,
                           .weight_decay = 0.1,
                           .decay = seed % 2 ? AdamDecay::l2 : AdamDecay::decoupled}};
      slots.push_back(s);
      seed += 10;
    }
  }
  return slots;
}

TEST(AdamUpdate, EveryCandidateGivesTheFallbacksBits) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  for (bool bf16_moments : {false, true}) {
    const auto outcomes = each_candidate(adam_update, [&] {
      const std::vector<AdamSlot> slots = adam_slots(bf16_moments);
      Outcome o{adam_update.select(slots).name, {}};
      adam_update(slots);
      for (const AdamSlot& s : slots) {
        append(o.bytes, s.weights);
        append(o.bytes, s.exp_avg);
        append(o.bytes, s.exp_avg_sq);
      }
      return o;
    });
    expect_fallback_bits(outcomes, bf16_moments ? "bf16 moments" : "f32 moments");
  }
}

std::vector<SgdSlot> sgd_slots(bool momentum, bool first) {
  std::vector<SgdSlot> slots;
  uint64_t seed = 100;
  for (const WeightCase& c : kWeightCases) {
    for (int64_t n : kLengths) {
      const DType state = c.param == DType::f64 ? DType::f64 : DType::f32;
      slots.push_back({.weights = weight_slot(c, n, seed),
                       .momentum = momentum ? random_values(n, seed + 4, state, 0.1) : Tensor(),
                       .first = first,
                       .hyper = {.lr = 0.05,
                                 .momentum = 0.9,
                                 .dampening = seed % 3 == 0 ? 0.0 : 0.1,
                                 .weight_decay = 0.01,
                                 .nesterov = seed % 3 == 0}});
      seed += 10;
    }
  }
  return slots;
}

TEST(SgdUpdate, EveryCandidateGivesTheFallbacksBits) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  for (bool momentum : {false, true}) {
    for (bool first : {false, true}) {
      const auto outcomes = each_candidate(sgd_update, [&] {
        const std::vector<SgdSlot> slots = sgd_slots(momentum, first);
        Outcome o{sgd_update.select(slots).name, {}};
        sgd_update(slots);
        for (const SgdSlot& s : slots) {
          append(o.bytes, s.weights);
          append(o.bytes, s.momentum);
        }
        return o;
      });
      expect_fallback_bits(outcomes, std::string("momentum ") + (momentum ? "yes" : "no") +
                                         (first ? ", first step" : ""));
    }
  }
}

TEST(GradNorm, EveryCandidateGivesTheFallbacksBits) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    for (int64_t n : kLengths) {
      const Tensor g = random_values(n, 7, dtype);
      for (bool f64 : {false, true}) {
        const auto sums = each_candidate(grad_chunk_squares, [&] {
          const std::vector<double> s = grad_chunk_squares(g, 16 * kBlock, f64);
          Outcome o{grad_chunk_squares.select(g, 16 * kBlock, f64).name, {}};
          const auto* p = reinterpret_cast<const uint8_t*>(s.data());
          o.bytes.assign(p, p + s.size() * sizeof(double));
          return o;
        });
        expect_fallback_bits(sums, std::string("squares of ") + name_of(dtype));
      }
      const auto scaled = each_candidate(scale_gradient, [&] {
        Tensor copy = g.clone();
        Outcome o{scale_gradient.select(copy, 0.3).name, {}};
        scale_gradient(copy, 0.3);
        append(o.bytes, copy);
        return o;
      });
      expect_fallback_bits(scaled, std::string("scaled ") + name_of(dtype));
    }
  }
}

TEST(Bf16Master, EveryCandidateGivesTheFallbacksBits) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  for (int64_t n : kLengths) {
    const Tensor param = random_values(n, 21, DType::bf16);
    const Tensor low = random_bytes(2 * n + (n + 7) / 8, 22);
    const auto joined = each_candidate(join_bf16_master, [&] {
      Tensor master = empty({n}, DType::f32);
      Outcome o{join_bf16_master.select(param, low, master).name, {}};
      join_bf16_master(param, low, master);
      append(o.bytes, master);
      return o;
    });
    expect_fallback_bits(joined, "join");
    const Tensor master = random_values(n, 23, DType::f32);
    const auto split = each_candidate(split_bf16_master, [&] {
      Tensor p = empty({n}, DType::bf16), l = empty({2 * n + (n + 7) / 8}, DType::u8);
      Outcome o{split_bf16_master.select(master, p, l).name, {}};
      split_bf16_master(master, p, l);
      append(o.bytes, p);
      append(o.bytes, l);
      return o;
    });
    expect_fallback_bits(split, "split");
  }
}

// Values over many binades, with the odd large and tiny one, as activations have.
Tensor activations(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<double> v = random_values(rows * cols, seed, DType::f64, 3.0).to_vector();
  for (size_t i = 0; i < v.size(); i += 17) v[i] *= 1000.0;
  for (size_t i = 5; i < v.size(); i += 29) v[i] *= 1e-6;
  return from_values(v, {rows, cols}, DType::f32);
}

TEST(Fp8Quantize, EveryCandidateGivesTheFallbacksBits) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  const Tensor x = activations(130, 260, 31);
  const int64_t rows = 130, cols = 260;
  for (DType fp8 : {DType::e4m3, DType::e5m2}) {
    expect_fallback_bits(each_candidate(fp8_amax,
                                        [&] {
                                          const float amax = fp8_amax(x);
                                          Outcome o{fp8_amax.select(x).name, {}};
                                          const auto* p = reinterpret_cast<const uint8_t*>(&amax);
                                          o.bytes.assign(p, p + sizeof amax);
                                          return o;
                                        }),
                         "amax");
    expect_fallback_bits(each_candidate(fp8_scale,
                                        [&] {
                                          Tensor q = empty({rows, cols}, fp8);
                                          Outcome o{fp8_scale.select(x, 0.37f, q).name, {}};
                                          fp8_scale(x, 0.37f, q);
                                          append(o.bytes, q);
                                          return o;
                                        }),
                         std::string("per tensor ") + name_of(fp8));
    for (MxRounding rounding : {MxRounding::floor, MxRounding::up}) {
      expect_fallback_bits(
          each_candidate(fp8_quantize_mx,
                         [&] {
                           Tensor q = empty({rows, cols}, fp8);
                           Tensor codes = empty({rows, (cols + 31) / 32}, DType::u8);
                           Outcome o{
                               fp8_quantize_mx.select(x, rows, cols, rounding, q, codes).name, {}};
                           fp8_quantize_mx(x, rows, cols, rounding, q, codes);
                           append(o.bytes, q);
                           append(o.bytes, codes);
                           return o;
                         }),
          std::string("mxfp8 ") + name_of(fp8));
    }
    for (int64_t block_rows : {int64_t(1), kFp8Block}) {
      expect_fallback_bits(
          each_candidate(fp8_quantize_blocks,
                         [&] {
                           Tensor q = empty({rows, cols}, fp8);
                           Tensor s = empty({(rows + block_rows - 1) / block_rows, 3}, DType::f32);
                           Outcome o{
                               fp8_quantize_blocks.select(x, 1, rows, cols, block_rows, q, s).name,
                               {}};
                           fp8_quantize_blocks(x, 1, rows, cols, block_rows, q, s);
                           append(o.bytes, q);
                           append(o.bytes, s);
                           return o;
                         }),
          std::string("blocks ") + name_of(fp8));
    }
  }
}

TEST(Fp4Quantize, EveryCandidateGivesTheFallbacksBits) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  const int64_t rows = 64, cols = 96;
  const Tensor x = activations(rows, cols, 41);
  for (Fp4Kind kind : {Fp4Kind::nvfp4, Fp4Kind::mxfp4}) {
    for (bool stochastic : {false, true}) {
      for (int64_t block_rows : {int64_t(1), fp4_block(kind)}) {
        const Fp4Params params{.kind = kind,
                               .tensor_scale = nvfp4_tensor_scale(fp8_amax(x)),
                               .mx_rounding = MxRounding::up,
                               .stochastic = stochastic,
                               .philox = PhiloxState{5, 1, 7},
                               .block_rows = block_rows};
        const int64_t scales = (rows + block_rows - 1) / block_rows *
                               ((cols + fp4_block(kind) - 1) / fp4_block(kind));
        expect_fallback_bits(
            each_candidate(fp4_quantize,
                           [&] {
                             Tensor packed = empty({rows, cols / 2}, DType::u8);
                             Tensor s = empty({scales}, DType::u8);
                             Outcome o{fp4_quantize.select(x, rows, cols, params, packed, s).name,
                                       {}};
                             fp4_quantize(x, rows, cols, params, packed, s);
                             append(o.bytes, packed);
                             append(o.bytes, s);
                             return o;
                           }),
            std::string(kind == Fp4Kind::nvfp4 ? "nvfp4" : "mxfp4") +
                (stochastic ? " stochastic" : "") + (block_rows > 1 ? " tiles" : ""));
      }
    }
  }
}

// Positive values, so that no sum cancels: an fp32 sum of k terms is then within k * 2^-24 of the
// exact sum, relative to it.
Tensor positive(int64_t rows, int64_t cols, uint64_t seed) {
  Philox generator(PhiloxState{seed, 4});
  return uniform({rows, cols}, generator, 0.25, 4.0);
}

// The GEMMs' fallbacks sum in double: every candidate is within an fp32 sum of k terms of it.
void expect_within_fp32_sums(const std::vector<Tensor>& results, int64_t k, const char* what) {
  ASSERT_FALSE(results.empty());
  for (const Tensor& r : results) {
    const std::string error = test::compare(r, results.back(), test::tolerance(DType::f32, k));
    EXPECT_TRUE(error.empty()) << what << ": " << error;
  }
}

TEST(Fp8ScaledGemm, EveryCandidateIsWithinAnFp32SumOfTheFallback) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  const int64_t m = 33, n = 40, k = 200;
  const Tensor a = positive(m, k, 51), b = positive(n, k, 52);
  Fp8Matrix qa{.codes = empty({m, k}, DType::e4m3),
               .kind = Fp8Operand::Kind::mx,
               .block_scales = empty({m, (k + 31) / 32}, DType::u8)};
  Fp8Matrix qb{.codes = empty({n, k}, DType::e4m3),
               .kind = Fp8Operand::Kind::mx,
               .block_scales = empty({n, (k + 31) / 32}, DType::u8)};
  fp8_quantize_mx(a, m, k, MxRounding::up, qa.codes, qa.block_scales);
  fp8_quantize_mx(b, n, k, MxRounding::up, qb.codes, qb.block_scales);
  std::vector<Tensor> results;
  each_candidate(fp8_scaled_gemm, [&] {
    Tensor c = empty({m, n}, DType::f32);
    Outcome o{fp8_scaled_gemm.select(qa, qb, 1, m, n, k, c).name, {}};
    fp8_scaled_gemm(qa, qb, 1, m, n, k, c);
    results.push_back(c);
    return o;
  });
  expect_within_fp32_sums(results, k, "mxfp8");
}

TEST(Fp4BlockGemm, EveryCandidateIsWithinAnFp32SumOfTheFallback) {
  if (reference_mode()) GTEST_SKIP() << kEveryCallRunsTheFallback;
  const int64_t m = 33, n = 48, k = 96;
  auto quantized = [&](int64_t rows, uint64_t seed) {
    const Tensor x = positive(rows, k, seed);
    const Fp4Params params{.kind = Fp4Kind::nvfp4, .tensor_scale = nvfp4_tensor_scale(fp8_amax(x))};
    Fp4Matrix q{.packed = empty({rows, k / 2}, DType::u8),
                .scales = empty({rows, k / 16}, DType::u8),
                .kind = Fp4Kind::nvfp4,
                .rows = rows,
                .cols = k};
    fp4_quantize(x, rows, k, params, q.packed, q.scales);
    return q;
  };
  const Fp4Matrix qa = quantized(m, 61), qb = quantized(n, 62);
  std::vector<Tensor> results;
  each_candidate(fp4_block_gemm, [&] {
    Tensor c = empty({m, n}, DType::f32);
    Outcome o{fp4_block_gemm.select(qa, qb, 0.5f, c).name, {}};
    fp4_block_gemm(qa, qb, 0.5f, c);
    results.push_back(c);
    return o;
  });
  expect_within_fp32_sums(results, k, "nvfp4");
  const Tensor a = positive(m, k, 63).to(DType::bf16), b = positive(n, k, 64).to(DType::bf16);
  results.clear();
  each_candidate(bf16_product, [&] {
    Tensor c = empty({m, n}, DType::f32);
    Outcome o{bf16_product.select(a, b, c).name, {}};
    bf16_product(a, b, c);
    results.push_back(c);
    return o;
  });
  expect_within_fp32_sums(results, k, "bf16 product");
}

TEST(WeightSlot, ASlotOnTwoDevicesIsRefusedByName) {
  WeightSlot s = weight_slot({DType::f32, DType::f32, Keep::in_place}, 8, 3);
  s.grad = s.grad.to(testing::ProtectedDevice::device());
  try {
    (void)s.device();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its param is on cpu and its grad on"), std::string::npos)
        << e.what();
  }
  const std::vector<SgdSlot> slots = {
      {.weights = s, .momentum = Tensor(), .first = true, .hyper = SgdHyper{}}};
  EXPECT_THROW(sgd_update(slots), Error);
}

// A new device runs the optimizers' updates by adding candidates only: here the test device,
// whose memory faults outside its own kernels, and whose candidates run the CPU's.
TEST(WeightSlot, ANewDeviceRunsTheUpdatesThroughItsCandidates) {
  const Device dev = testing::ProtectedDevice::device();
  static const bool added = (testing::ProtectedDevice::add_kernel<adam_update>(),
                             testing::ProtectedDevice::add_kernel<sgd_update>(), true);
  ASSERT_TRUE(added);
  auto on_device = [&](WeightSlot s) {
    for (Tensor* t : {&s.param, &s.grad, &s.master, &s.master_low, &s.compensation})
      if (t->defined()) *t = t->to(dev);
    return s;
  };
  auto to_host = [](const Tensor& t) { return t.defined() ? t.to(Device::cpu) : t; };
  const std::vector<AdamSlot> here = adam_slots(true);
  std::vector<AdamSlot> there;
  for (const AdamSlot& s : here) {
    AdamSlot d = s;
    d.weights = on_device(s.weights);
    d.exp_avg = s.exp_avg.to(dev);
    d.exp_avg_sq = s.exp_avg_sq.to(dev);
    there.push_back(d);
  }
  EXPECT_STREQ(adam_update.select(there).name, "protected");
  adam_update(there);
  adam_update(here);
  for (size_t i = 0; i < here.size(); ++i) {
    std::vector<uint8_t> want, got;
    append(want, here[i].weights);
    append(want, here[i].exp_avg);
    append(want, here[i].exp_avg_sq);
    const WeightSlot& w = there[i].weights;
    for (const Tensor* t : {&w.param, &w.master, &w.master_low, &w.compensation})
      append(got, to_host(*t));
    append(got, to_host(there[i].exp_avg));
    append(got, to_host(there[i].exp_avg_sq));
    EXPECT_TRUE(got == want) << "slot " << i;
  }
}

}  // namespace
}  // namespace mixp::kernels
