// The FP4 training recipes (amp::Fp4Recipe, presets nvfp4 and mxfp4): square weight tiles, the
// transpose of a tiled tensor, the exact block products and the FP4 GEMM against an fp64
// oracle, the random Hadamard transform, linear under an FP4 recipe forward and backward
// against the recipe computed by hand, the reproducibility of its stochastic rounding, the
// presets and their ablations, and the choice of the layers kept in bf16.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <vector>

#include "kernels/fp4.h"
#include "mixp/amp/fp4.h"
#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/format.h"
#include "mixp/io/safetensors.h"
#include "mixp/nn/models.h"
#include "mixp/ops.h"
#include "mixp/optim/adamw.h"
#include "mixp/runtime.h"
#include "mixp/train/run.h"
#include "mixp/train/trained_model.h"
#include "ops/fp8_ops.h"
#include "support/scratch.h"
#include "support/tolerance.h"
#include "train/low_precision_state.h"

namespace mixp {
namespace {

using amp::Fp4Scaling;

Tensor random_tensor(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Philox rng(PhiloxState{seed, 77, 0});
  return randn(shape, rng, scale, DType::f32);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const uint8_t* p = t.data<uint8_t>();
  return {p, p + t.numel()};
}

Tensor transpose2d(const Tensor& t) { return ops::detail::transpose_last2(t); }

// Outliers and a few special tiles: a zero tile and one holding an infinity.
Tensor awkward_weight(int64_t rows, int64_t cols, uint64_t seed) {
  Tensor w = random_tensor({rows, cols}, seed, 0.02);
  float* v = w.data<float>();
  if (rows > 3) v[3 * cols + 5] = 7.5f;                       // an outlier
  for (int64_t r = 16; r < std::min<int64_t>(rows, 32); ++r)  // tile row 1, tile col 0: zeros
    for (int64_t c = 0; c < std::min<int64_t>(cols, 16); ++c) v[r * cols + c] = 0.0f;
  return w;
}

class Fp4Tiles : public ::testing::TestWithParam<Fp4Scaling> {};

// Square tiles: the fast kernel gives the reference's bits, each tile's scale is the block
// rule applied to the whole tile's amax, and a NaN or infinity poisons exactly its own tile.
TEST_P(Fp4Tiles, FastMatchesReferenceAndEveryTileHasOneScale) {
  const Fp4Scaling scaling = GetParam();
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{48, 64}, {37, 70}, {1, 33}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Tensor w = awkward_weight(rows, cols, 3);
    if (rows > 20 && cols > 40) w.data<float>()[2 * cols + 40] = INFINITY;
    amp::Fp4Tensor fast = amp::quantize_fp4(w, scaling, {.square_blocks = true});
    amp::Fp4Tensor ref;
    {
      ReferenceMode reference;
      ref = amp::quantize_fp4(w, scaling, {.square_blocks = true});
    }
    EXPECT_EQ(bytes_of(fast.data), bytes_of(ref.data));
    EXPECT_EQ(bytes_of(fast.block_scales), bytes_of(ref.block_scales));
    const int64_t block = fast.block_size();
    ASSERT_EQ(fast.block_rows, block);
    ASSERT_EQ(fast.block_scales.size(0), (rows + block - 1) / block);
    const float* v = w.data<float>();
    for (int64_t i = 0; i < fast.block_scales.size(0); ++i) {
      for (int64_t j = 0; j < fast.block_scales.size(1); ++j) {
        float amax = 0.0f;
        bool special = false;
        for (int64_t r = i * block; r < std::min(rows, (i + 1) * block); ++r)
          for (int64_t c = j * block; c < std::min(cols, (j + 1) * block); ++c) {
            special = special || !std::isfinite(v[r * cols + c]);
            amax = std::max(amax, std::fabs(v[r * cols + c]));
          }
        const uint8_t want =
            scaling == Fp4Scaling::nvfp4
                ? (special ? uint8_t(0x7F) : amp::nvfp4_block_scale_code(amax, fast.tensor_scale))
                : (special ? uint8_t(0xFF)
                           : amp::mxfp4_scale_code(amax, amp::Fp4Options{}.mx_rounding));
        EXPECT_EQ(fast.block_scales.data<uint8_t>()[i * fast.block_scales.size(1) + j], want)
            << "tile " << i << "," << j;
      }
    }
  }
}

// What the recipe relies on: the transpose of a tiled weight is the tiled quantization of the
// transposed weight, value for value, so dgrad multiplies the values forward multiplied.
TEST_P(Fp4Tiles, TheTransposeIsTheQuantizationOfTheTransposedWeight) {
  const Fp4Scaling scaling = GetParam();
  const Tensor w = awkward_weight(40, 72, 5);
  const amp::Fp4Tensor q = amp::quantize_fp4(w, scaling, {.square_blocks = true});
  const amp::Fp4Tensor t = q.transposed();
  const amp::Fp4Tensor direct = amp::quantize_fp4(transpose2d(w), scaling, {.square_blocks = true});
  EXPECT_EQ(t.shape, Shape({72, 40}));
  EXPECT_EQ(bytes_of(t.data), bytes_of(direct.data));
  EXPECT_EQ(bytes_of(t.block_scales), bytes_of(direct.block_scales));
  EXPECT_EQ(t.dequantize().to_vector(), transpose2d(q.dequantize()).to_vector());
  // 1-D blocks have no such transpose.
  EXPECT_THROW((void)amp::quantize_fp4(w, scaling).transposed(), Error);
}

// Every E2M1 code times every scale code is a bf16 value: the block products an FP4 GEMM
// multiplies lose nothing.
TEST_P(Fp4Tiles, EveryBlockProductIsExactInBf16) {
  const Fp4Scaling scaling = GetParam();
  const kernels::Fp4Kind kind =
      scaling == Fp4Scaling::nvfp4 ? kernels::Fp4Kind::nvfp4 : kernels::Fp4Kind::mxfp4;
  const int64_t block = kernels::fp4_block(kind);
  int mismatches = 0;
  for (int scale = 0; scale < 256; ++scale) {
    std::vector<uint8_t> packed(static_cast<size_t>(block / 2));
    for (int64_t j = 0; j < block / 2; ++j)
      packed[size_t(j)] = uint8_t((2 * j) | ((2 * j + 1) << 4));
    const uint8_t code = uint8_t(scale);
    std::vector<uint16_t> out(static_cast<size_t>(block));
    kernels::fp4_block_values(packed.data(), &code, 1, block, kind, 1, true, out.data());
    const double s = scaling == Fp4Scaling::nvfp4
                         ? double(float(float8_e4m3::from_bits(code)))
                         : (code == 0xFF ? NAN : std::ldexp(1.0, scale - 127));
    for (int64_t c = 0; c < block; ++c) {
      double want = double(kernels::e2m1_value(uint8_t(c % 16))) * s;
      // E8M0's largest scales times E2M1's largest elements pass fp32's range, as they would
      // in the hardware's fp32: they overflow to infinity.
      if (std::fabs(want) > FLT_MAX) want = std::copysign(INFINITY, want);
      const double got = double(float(bfloat16::from_bits(out[size_t(c)])));
      mismatches += !(got == want || (std::isnan(got) && std::isnan(want)));
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// fp4_gemm against an fp64 oracle on the dequantized operands (whose block products are
// exact), within one fp32 accumulation of k terms and the output's rounding.
TEST_P(Fp4Tiles, GemmMatchesTheFp64OracleOfTheQuantizedValues) {
  const Fp4Scaling scaling = GetParam();
  const int64_t m = 19, n = 24, k = 80;
  const amp::Fp4Tensor a = amp::quantize_fp4(random_tensor({m, k}, 8), scaling);
  const amp::Fp4Tensor b =
      amp::quantize_fp4(random_tensor({n, k}, 9, 3.0), scaling, {.square_blocks = true});
  const std::vector<double> da = a.dequantize().to_vector(), db = b.dequantize().to_vector();
  std::vector<double> want(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) sum += da[size_t(i * k + p)] * db[size_t(j * k + p)];
      want[size_t(i * n + j)] = sum;
    }
  const Tensor got = amp::fp4_gemm(a, b);
  // nvfp4's dequantized values carry 1 / S_enc rounded once each; the product carries them
  // multiplied, one more rounding: three fp32 roundings beyond the accumulation.
  test::Tolerance tol = test::tolerance(DType::f32, k + 3);
  tol.atol *= 8.0;  // absolute slack for sums that cancel, scaled to the operands' magnitudes
  EXPECT_EQ(test::compare(got, from_values(want, {m, n}, DType::f32), tol), "");
  {
    ReferenceMode reference;
    EXPECT_EQ(test::compare(amp::fp4_gemm(a, b), got, test::tolerance(DType::f32, k)), "");
  }
  const amp::Fp4Tensor other =
      amp::quantize_fp4(random_tensor({n, k}, 9),
                        scaling == Fp4Scaling::nvfp4 ? Fp4Scaling::mxfp4 : Fp4Scaling::nvfp4);
  EXPECT_THROW((void)amp::fp4_gemm(a, other), Error);
}

INSTANTIATE_TEST_SUITE_P(Both, Fp4Tiles, ::testing::Values(Fp4Scaling::nvfp4, Fp4Scaling::mxfp4),
                         [](const auto& info) { return std::string(amp::name_of(info.param)); });

// No scaling: every value rounds to E2M1 as it is, saturating at 6 and flushing below 0.25.
TEST(Fp4NoScale, EveryValueRoundsToE2m1AsItIs) {
  const Tensor x = random_tensor({7, 45}, 21, 3.0);
  for (const bool reference : {false, true}) {
    std::optional<ReferenceMode> mode;
    if (reference) mode.emplace();
    const amp::Fp4Tensor q = amp::quantize_fp4(x, Fp4Scaling::none);
    const std::vector<double> got = q.dequantize().to_vector(), src = x.to_vector();
    int mismatches = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      const uint32_t code =
          encode(Format::e2m1(), float(src[i]), Rounding::nearest_even, Overflow::saturate);
      mismatches += got[i] != double(kernels::e2m1_value(uint8_t(code)));
    }
    EXPECT_EQ(mismatches, 0) << (reference ? "reference" : "fast");
  }
  EXPECT_STREQ(amp::name_of(Fp4Scaling::none), "e2m1");
  const amp::Preset& floor = amp::preset("fp4-e2m1-noscale");
  ASSERT_TRUE(floor.fp8 && floor.fp8->fp4);
  EXPECT_EQ(floor.fp8->fp4->scaling, Fp4Scaling::none);
}

std::array<float, 16> some_signs() {
  std::array<float, 16> s{};
  for (size_t j = 0; j < 16; ++j) s[j] = (j * 7 + 3) % 5 < 2 ? -1.0f : 1.0f;
  return s;
}

// The transform against its matrix in fp64, its zero padding, and what it is for: the product
// of two transformed operands along the transformed dimension is the product of the originals.
TEST(Fp4Hadamard, MatchesTheMatrixAndKeepsProducts) {
  const std::array<float, 16> signs = some_signs();
  const Tensor x = random_tensor({5, 40}, 11), y = random_tensor({3, 40}, 12);
  const Tensor hx = amp::random_hadamard16(x, signs), hy = amp::random_hadamard16(y, signs);
  ASSERT_EQ(hx.shape(), Shape({5, 48}));
  const std::vector<double> xv = x.to_vector();
  std::vector<double> want(size_t(5 * 48), 0.0);
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c0 = 0; c0 < 48; c0 += 16)
      for (int i = 0; i < 16; ++i) {
        double sum = 0.0;
        for (int j = 0; j < 16; ++j) {
          const double v = c0 + j < 40 ? xv[size_t(r * 40 + c0 + j)] : 0.0;
          sum += (std::popcount(unsigned(i & j)) % 2 ? -1.0 : 1.0) * signs[size_t(j)] * v;
        }
        want[size_t(r * 48 + c0 + i)] = sum / 4.0;
      }
  // Four butterfly stages: each output is a sum of 16 terms rounded along a tree of depth 4.
  EXPECT_EQ(
      test::compare(hx, from_values(want, {5, 48}, DType::f32), test::tolerance(DType::f32, 16)),
      "");
  const Tensor before = ops::matmul(x, transpose2d(y));
  const Tensor after = ops::matmul(hx, transpose2d(hy));
  EXPECT_EQ(test::compare(after, before, test::tolerance(DType::f32, 2 * 48)), "");
  std::array<float, 16> bad = signs;
  bad[4] = 0.5f;
  EXPECT_THROW((void)amp::random_hadamard16(x, bad), Error);
}

// An FP4 state over one linear layer.
struct OneLayer {
  explicit OneLayer(amp::Fp4Recipe recipe, const Tensor& w)
      : state(amp::Fp8Recipe{.fp4 = recipe}), weight(w) {
    state.set_fp4_layers({{.name = "fc", .weight = weight.impl(), .fp4 = true}});
    state.set_seed(42);
  }
  amp::Fp8State state;
  Tensor weight;
};

struct LinearGrads {
  Tensor y, dx, dw, db;
};

LinearGrads run_linear(OneLayer& l, const Tensor& x_value, const Tensor& bias_value,
                       const Tensor& dy) {
  Tensor x = x_value.clone().set_requires_grad(true);
  Tensor bias = bias_value.clone().set_requires_grad(true);
  l.weight.set_grad(Tensor());
  Tensor y;
  {
    amp::Fp8Autocast scope(l.state);
    y = ops::linear(x, l.weight, bias);
  }
  y.backward(dy);
  return {y.detach(), x.grad(), l.weight.grad(), bias.grad()};
}

// Linear under the recipe against the recipe computed by hand from the public pieces.
TEST(Fp4Linear, ForwardAndBackwardAreTheRecipe) {
  for (const Fp4Scaling scaling : {Fp4Scaling::nvfp4, Fp4Scaling::mxfp4}) {
    SCOPED_TRACE(amp::name_of(scaling));
    const amp::Fp4Recipe recipe{.scaling = scaling, .stochastic_gradients = false};
    OneLayer l(recipe, random_tensor({24, 48}, 1, 0.05).set_requires_grad(true));
    const Tensor x = random_tensor({2, 20, 48}, 2), b = random_tensor({24}, 3, 0.1);
    const Tensor dy = random_tensor({2, 20, 24}, 4, 0.01);
    const LinearGrads got = run_linear(l, x, b, dy);

    const Tensor x2 = x.reshape({40, 48}), g2 = dy.reshape({40, 24});
    const amp::Fp4Options nearest{.mx_rounding = recipe.mx_scale_rounding};
    amp::Fp4Options tiled = nearest;
    tiled.square_blocks = true;
    const amp::Fp4Tensor qw = amp::quantize_fp4(l.weight, scaling, tiled);
    Tensor y = amp::fp4_gemm(amp::quantize_fp4(x2, scaling, nearest), qw);
    for (int64_t r = 0; r < 40; ++r)
      for (int64_t j = 0; j < 24; ++j) y.data<float>()[r * 24 + j] += b.data<float>()[j];
    EXPECT_EQ(got.y.to_vector(), y.to_vector());
    const Tensor dx = amp::fp4_gemm(amp::quantize_fp4(g2, scaling, nearest), qw.transposed());
    EXPECT_EQ(got.dx.to_vector(), dx.to_vector());
    const std::array<float, 16>& s = l.state.hadamard_signs();
    const Tensor dw = amp::fp4_gemm(
        amp::quantize_fp4(amp::random_hadamard16(transpose2d(g2), s), scaling, nearest),
        amp::quantize_fp4(amp::random_hadamard16(transpose2d(x2), s), scaling, nearest));
    EXPECT_EQ(got.dw.to_vector(), dw.to_vector());
    EXPECT_EQ(test::compare(got.db, ops::sum(g2, {0}), test::tolerance(DType::f32, 40)), "");
  }
}

// Without square tiles dgrad quantizes W^T anew along out; without the transform wgrad
// quantizes the plain transposes.
TEST(Fp4Linear, AblationsChangeWhatTheyName) {
  const Tensor w = random_tensor({32, 32}, 1, 0.05);
  const Tensor x = random_tensor({32, 32}, 2), b = random_tensor({32}, 3, 0.1);
  const Tensor dy = random_tensor({32, 32}, 4, 0.01);
  OneLayer whole({.stochastic_gradients = false}, w.clone().set_requires_grad(true));
  OneLayer flat({.square_weights = false, .hadamard = false, .stochastic_gradients = false},
                w.clone().set_requires_grad(true));
  const LinearGrads a = run_linear(whole, x, b, dy), f = run_linear(flat, x, b, dy);
  const amp::Fp4Tensor qw1 = amp::quantize_fp4(w, Fp4Scaling::nvfp4);
  EXPECT_EQ(f.y.to_vector(),
            ops::add(amp::fp4_gemm(amp::quantize_fp4(x, Fp4Scaling::nvfp4), qw1), b).to_vector());
  EXPECT_EQ(f.dx.to_vector(), amp::fp4_gemm(amp::quantize_fp4(dy, Fp4Scaling::nvfp4),
                                            amp::quantize_fp4(transpose2d(w), Fp4Scaling::nvfp4))
                                  .to_vector());
  EXPECT_EQ(f.dw.to_vector(), amp::fp4_gemm(amp::quantize_fp4(transpose2d(dy), Fp4Scaling::nvfp4),
                                            amp::quantize_fp4(transpose2d(x), Fp4Scaling::nvfp4))
                                  .to_vector());
  EXPECT_NE(a.y.to_vector(), f.y.to_vector());
  EXPECT_NE(a.dw.to_vector(), f.dw.to_vector());
}

// Stochastic rounding of the gradients: the same position draws the same words, another
// micro-batch or step other words; the forward pass never draws.
TEST(Fp4Linear, StochasticRoundingFollowsTheStepAndTheMicroBatch) {
  const Tensor w = random_tensor({32, 48}, 1, 0.05);
  const Tensor x = random_tensor({64, 48}, 2), b = random_tensor({32}, 3, 0.1);
  const Tensor dy = random_tensor({64, 32}, 4, 0.01);
  auto grads_at = [&](int64_t step, int64_t micro_batch) {
    OneLayer l({}, w.clone().set_requires_grad(true));
    l.state.set_rounding_position(step, micro_batch);
    return run_linear(l, x, b, dy);
  };
  const LinearGrads a = grads_at(5, 1), again = grads_at(5, 1);
  const LinearGrads other_micro = grads_at(5, 2), other_step = grads_at(6, 1);
  EXPECT_EQ(a.dw.to_vector(), again.dw.to_vector());
  EXPECT_EQ(a.dx.to_vector(), again.dx.to_vector());
  EXPECT_NE(a.dw.to_vector(), other_micro.dw.to_vector());
  EXPECT_NE(a.dx.to_vector(), other_step.dx.to_vector());
  EXPECT_EQ(a.y.to_vector(), other_step.y.to_vector());
  OneLayer l({}, w.clone().set_requires_grad(true));
  EXPECT_THROW(l.state.set_rounding_position(1, 256), Error);
}

TEST(Fp4Presets, RecipesAndAblations) {
  const amp::Preset& nv = amp::preset("nvfp4");
  ASSERT_TRUE(nv.fp8 && nv.fp8->fp4);
  EXPECT_EQ(nv.fp8->fp4->scaling, Fp4Scaling::nvfp4);
  EXPECT_TRUE(nv.fp8->fp4->square_weights && nv.fp8->fp4->hadamard &&
              nv.fp8->fp4->stochastic_gradients);
  EXPECT_EQ(nv.fp8->fp4->bf16_tail, 0.15);
  EXPECT_EQ(nv.parameter_dtype, DType::f32);
  EXPECT_EQ(amp::preset("mxfp4").fp8->fp4->scaling, Fp4Scaling::mxfp4);
  const amp::Fp4Ablation without = amp::parse_fp4_ablation("sr,2d-weights");
  EXPECT_EQ(amp::name_of(without), "2d-weights,sr");
  const amp::Preset p = amp::preset("mxfp4", amp::MxScaleRounding::floor, without);
  EXPECT_FALSE(p.fp8->fp4->square_weights);
  EXPECT_FALSE(p.fp8->fp4->stochastic_gradients);
  EXPECT_TRUE(p.fp8->fp4->hadamard);
  EXPECT_EQ(p.fp8->fp4->mx_scale_rounding, amp::MxScaleRounding::floor);
  EXPECT_EQ(
      amp::preset("nvfp4", amp::kDefaultMxScaleRounding, amp::parse_fp4_ablation("bf16-layers"))
          .fp8->fp4->bf16_tail,
      0.0);
  EXPECT_EQ(amp::name_of(amp::parse_fp4_ablation("")), "");
  EXPECT_THROW((void)amp::parse_fp4_ablation("hadamard,rht"), Error);
  EXPECT_THROW((void)amp::preset("fp8", amp::kDefaultMxScaleRounding, without), Error);
}

// The gpt's Linear layers in model order, the last 15% (rounded up) kept in bf16; its head is
// the token embedding, never a Linear layer, so never in FP4.
TEST(Fp4Presets, TheLastLayersStayInBf16) {
  nn::ModelConfig config{
      .name = "gpt", .vocab = 11, .layers = 3, .heads = 2, .width = 16, .context = 8};
  std::shared_ptr<nn::Model> gpt = nn::make_model(config, 1);
  auto state = train::make_low_precision_state(amp::preset("nvfp4"), gpt.get(), 3);
  const auto& layers = state->fp4_layers();
  ASSERT_EQ(layers.size(), 12u);  // c_attn, attn.c_proj, c_fc, mlp.c_proj per block
  for (size_t i = 0; i < layers.size(); ++i) EXPECT_EQ(layers[i].fp4, i < 10) << layers[i].name;
  EXPECT_EQ(layers.back().name, "transformer.h.2.mlp.c_proj");
  const auto all = train::make_low_precision_state(
      amp::preset("nvfp4", amp::kDefaultMxScaleRounding, amp::parse_fp4_ablation("bf16-layers")),
      gpt.get(), 3);
  for (const auto& l : all->fp4_layers()) EXPECT_TRUE(l.fp4) << l.name;
  EXPECT_EQ(train::make_low_precision_state(amp::preset("amp-bf16"), gpt.get(), 3), nullptr);
  EXPECT_THROW((void)train::make_low_precision_state(amp::preset("nvfp4"), nullptr, 3), Error);
}

// The Hadamard signs come from the seed and travel with the state.
TEST(Fp4Presets, HadamardSignsAreSeededAndCheckpointed) {
  amp::Fp8State a(*amp::preset("nvfp4").fp8), b(*amp::preset("nvfp4").fp8);
  a.set_seed(1);
  b.set_seed(2);
  EXPECT_NE(a.hadamard_signs(), b.hadamard_signs());
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(a.hadamard_signs(), b.hadamard_signs());
  StateDict broken = a.state_dict();
  broken.tensors.at("fp4/hadamard_signs").data<float>()[0] = 0.0f;
  EXPECT_THROW(b.load_state_dict(broken), Error);
}

// Both FP4 presets, whole and with every ingredient off, train a small gpt: the loss falls, the
// FP4 layers run in FP4 (no FP8 site is taken) and the others, attention and the head in bf16.
TEST(Fp4Training, EveryFp4PresetLearns) {
  const int64_t vocab = 8, t = 16, batch = 4;
  std::vector<double> x(static_cast<size_t>(batch * t)), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t s = i / size_t(t) * size_t(t + 1) + i % size_t(t);
    x[i] = double((s * 3 + s / 5) % vocab);
    y[i] = double(((s + 1) * 3 + (s + 1) / 5) % vocab);
  }
  const Tensor xt = from_values(x, {batch, t}, DType::i64),
               yt = from_values(y, {batch * t}, DType::i64);
  for (const char* name : {"nvfp4", "mxfp4"}) {
    for (const char* without : {"", "2d-weights,hadamard,sr,bf16-layers"}) {
      SCOPED_TRACE(std::string(name) + " without " + without);
      const amp::Preset preset =
          amp::preset(name, amp::kDefaultMxScaleRounding, amp::parse_fp4_ablation(without));
      std::unique_ptr<nn::Model> model = nn::make_model(
          {.name = "gpt", .vocab = vocab, .layers = 2, .heads = 2, .width = 32, .context = t}, 0);
      optim::AdamW opt(model->parameters(), {.lr = 1e-2});
      std::unique_ptr<amp::Fp8State> fp4 = train::make_low_precision_state(preset, model.get(), 7);
      double first = 0, last = 0;
      for (int step = 0; step < 40; ++step) {
        fp4->set_rounding_position(step, 0);
        Tensor loss;
        {
          auto scope = preset.autocast();
          amp::Fp8Autocast fp4_scope(*fp4);
          loss = ops::cross_entropy(model->forward(xt).reshape({batch * t, vocab}), yt);
        }
        loss.backward();
        opt.step();
        opt.zero_grad();
        fp4->update();
        (step == 0 ? first : last) = loss.item();
      }
      EXPECT_EQ(fp4->sites(), 0u);
      EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
    }
  }
}

// A run under nvfp4 or auto-fp4 stopped halfway and resumed ends bitwise where the straight run
// ends: the Hadamard signs and the layers' formats come back from the checkpoint and the
// stochastic rounding draws by step. Both report the share of Linear FLOPs in each format.
void expect_resumed_run_is_straight_run(const std::string& precision) {
  SCOPED_TRACE(precision);
  const std::filesystem::path dir = test::scratch_path("mixp_fp4_" + precision + "_");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 400; ++i) text << "in the beginning was the word " << i % 7 << "\n";
  }
  auto config = [&](const std::string& out) {
    train::RunConfig c;
    c.model = {.name = "gpt", .layers = 2, .heads = 2, .width = 32, .context = 16, .dropout = 0.1};
    c.data = (dir / "text.txt").string();
    c.batch = 4;
    c.train.precision = precision;
    c.train.steps = 8;
    c.train.seed = 5;
    c.train.threads = 1;
    c.train.grad_accum = 2;
    c.train.checkpoint_every = 2;
    c.train.out_dir = (dir / out).string();
    return c;
  };
  const train::TrainResult straight = train::run_train(config("straight"));
  train::RunConfig stopping = config("resumed");
  int calls = 0;
  stopping.train.stop_requested = [&] { return ++calls == 5; };
  EXPECT_TRUE(train::run_train(stopping).stopped);
  train::RunConfig resumed = config("resumed");
  resumed.train.resume = true;
  const train::TrainResult r = train::run_train(resumed);
  EXPECT_EQ(r.resumed_from, 5);
  EXPECT_EQ(r.final_eval_loss, straight.final_eval_loss);
  EXPECT_EQ(r.linear_flop_shares, straight.linear_flop_shares);
  EXPECT_EQ(r.layer_formats, straight.layer_formats);
  double shares = 0.0;
  for (const auto& [format, share] : straight.linear_flop_shares) shares += share;
  EXPECT_NEAR(shares, 1.0, 1e-12);
  EXPECT_GT(straight.linear_flop_shares.at("fp4"), 0.5);
  const io::SafetensorsFile a =
      io::read_safetensors((dir / "straight" / "model.safetensors").string());
  const io::SafetensorsFile b =
      io::read_safetensors((dir / "resumed" / "model.safetensors").string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    EXPECT_TRUE(io::encode_safetensors({{name, t}}) ==
                io::encode_safetensors({{name, b.tensors.at(name)}}))
        << name << " differs between the straight and the resumed run";
  }
  std::filesystem::remove_all(dir);
}

// Inference of an auto-fp4 run takes the layer formats the run reached from its last
// checkpoint: the saved state computes as the run ended, and a state whose eligible layers were
// all moved to bf16 computes otherwise.
TEST(Fp4Training, InferenceTakesTheFormatsAnAdaptiveRunReached) {
  const std::filesystem::path dir = test::scratch_path("mixp_auto_inference_");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 400; ++i) text << "in the beginning was the word " << i % 7 << "\n";
  }
  train::RunConfig c;
  c.model = {.name = "gpt", .layers = 2, .heads = 2, .width = 32, .context = 16};
  c.data = (dir / "text.txt").string();
  c.batch = 4;
  c.train.precision = "auto-fp4";
  c.train.steps = 3;
  c.train.threads = 1;
  c.train.out_dir = (dir / "run").string();
  (void)train::run_train(c);
  const train::TrainedModel t = train::load_trained_model((dir / "run").string());
  const std::optional<StateDict> saved = train::saved_precision_state(t);
  ASSERT_TRUE(saved.has_value());
  ASSERT_TRUE(saved->values.count("adaptive"));
  const Tensor tokens = from_values({1, 2, 3, 4, 5, 6, 7, 8}, {1, 8}, DType::i64);
  auto logits = [&](const StateDict* state) {
    train::Inference inference(*t.model, "auto-fp4");
    if (state) inference.load_precision_state(*state);
    Tensor out;
    inference.run([&] { out = t.model->forward(tokens); });
    return out.to(DType::f32).to_vector();
  };
  EXPECT_EQ(logits(&*saved), logits(nullptr));  // 3 steps: nothing moved yet
  StateDict moved = *saved;
  std::string adaptive = moved.values.at("adaptive");
  for (size_t at = adaptive.find("\"fp4\""); at != std::string::npos;
       at = adaptive.find("\"fp4\"", at))
    adaptive.replace(at, 5, "\"bf16\"");
  moved.values["adaptive"] = adaptive;
  EXPECT_NE(logits(&moved), logits(nullptr));
  std::filesystem::remove_all(dir);
}

TEST(Fp4Training, AStoppedAndResumedRunIsBitwiseTheStraightRun) {
  expect_resumed_run_is_straight_run("nvfp4");
  expect_resumed_run_is_straight_run("auto-fp4");
}

}  // namespace
}  // namespace mixp
