// The FP8 recipes of mixp/amp/fp8.h (pure functions), the scaled FP8 tensor and the tensor-level
// quantize and GEMM. They sit with FP8 autocast's state (fp8_autocast.cpp), below the ops that
// call them, rather than in amp/; the public header stays with the rest of mixed precision, as
// Autocast's does. The scale rules that the quantization kernels apply too are theirs
// (kernels/fp8_scales.cpp).
#include <algorithm>
#include <cmath>

#include "kernels/fp8.h"
#include "kernels/fp8_quantize.h"
#include "mixp/amp/fp8.h"
#include "mixp/autograd.h"
#include "mixp/error.h"

namespace mixp::amp {

const char* name_of(Fp8Scaling scaling) {
  switch (scaling) {
    case Fp8Scaling::delayed: return "delayed";
    case Fp8Scaling::current: return "current";
    case Fp8Scaling::mxfp8: return "mxfp8";
    case Fp8Scaling::block_1x128: return "block_1x128";
    case Fp8Scaling::block_128x128: return "block_128x128";
    case Fp8Scaling::none: return "none";
  }
  return "?";
}

const char* name_of(MxScaleRounding rounding) {
  return rounding == MxScaleRounding::up ? "up" : "floor";
}

MxScaleRounding parse_mx_scale_rounding(std::string_view name) {
  MIXP_CHECK(name == "floor" || name == "up", "the MX scale rounding must be floor or up, got '",
             name, "'");
  return name == "up" ? MxScaleRounding::up : MxScaleRounding::floor;
}

DType fp8_dtype(Fp8Format format, Fp8Role role) {
  return format == Fp8Format::hybrid && role == Fp8Role::gradient ? DType::e5m2 : DType::e4m3;
}

float fp8_max(DType fp8) { return kernels::fp8_max(fp8); }

float scale_from_amax(float amax, float max, int margin, float previous) {
  return kernels::scale_from_amax(amax, max, margin, previous);
}

float history_amax(std::span<const float> history, AmaxAlgorithm algorithm) {
  if (history.empty()) return 0.0f;
  if (algorithm == AmaxAlgorithm::most_recent) return history.back();
  float m = 0.0f;
  for (float h : history) {
    if (std::isnan(h)) return h;
    m = std::max(m, h);
  }
  return m;
}

float delayed_scale(std::span<const float> history, AmaxAlgorithm algorithm, float max, int margin,
                    float previous) {
  return scale_from_amax(history_amax(history, algorithm), max, margin, previous);
}

float current_scale(float amax, float max, int margin) {
  return kernels::current_scale(amax, max, margin);
}

int mx_emax(DType element) { return kernels::mx_emax(element); }

namespace {
kernels::MxRounding kernel_rounding(MxScaleRounding rounding) {
  return rounding == MxScaleRounding::up ? kernels::MxRounding::up : kernels::MxRounding::floor;
}
}  // namespace

uint8_t mx_scale_code(float amax, DType element, MxScaleRounding rounding) {
  return kernels::mx_scale_code(amax, element, kernel_rounding(rounding));
}

float e8m0_value(uint8_t code) { return kernels::e8m0_value(code); }

namespace {

kernels::Fp8Operand::Kind operand_kind(Fp8Scaling scaling) {
  switch (scaling) {
    case Fp8Scaling::mxfp8: return kernels::Fp8Operand::Kind::mx;
    case Fp8Scaling::block_1x128:
    case Fp8Scaling::block_128x128: return kernels::Fp8Operand::Kind::blocks;
    default: return kernels::Fp8Operand::Kind::per_tensor;
  }
}

kernels::Fp8Matrix matrix(const Fp8Tensor& t) {
  const kernels::Fp8Operand::Kind kind = operand_kind(t.scaling);
  return {.codes = t.data,
          .kind = kind,
          .scale_inv = kind == kernels::Fp8Operand::Kind::per_tensor ? t.scale_inv : 1.0f,
          .block_scales = t.block_scales,
          .block_rows = kind == kernels::Fp8Operand::Kind::blocks ? t.block_rows : 1};
}

struct Dims3 {
  int64_t batch, rows, cols;
};

Dims3 dims_of(const Tensor& t, const char* what) {
  MIXP_CHECK(t.defined() && (t.ndim() == 2 || t.ndim() == 3), what,
             ": expected a 2-D or 3-D tensor, got ",
             t.defined() ? t.shape().to_string() : "an undefined tensor");
  if (t.ndim() == 2) return {.batch = 1, .rows = t.size(0), .cols = t.size(1)};
  return {.batch = t.size(0), .rows = t.size(1), .cols = t.size(2)};
}

}  // namespace

Tensor Fp8Tensor::dequantize() const {
  const Dims3 d = dims_of(data, "Fp8Tensor::dequantize");
  Tensor out = empty(data.shape(), DType::f32, MemoryTag::activation, data.device());
  kernels::fp8_dequantize(matrix(*this), d.batch, d.rows, d.cols, out);
  return out;
}

Fp8Tensor quantize(const Tensor& x_in, DType fp8, Fp8Scaling scaling, float scale,
                   MxScaleRounding mx_rounding) {
  const Dims3 d = dims_of(x_in, "quantize");
  MIXP_CHECK(x_in.dtype() == DType::f32 || x_in.dtype() == DType::bf16,
             "quantize: the input must be f32 or bf16, got ", name_of(x_in.dtype()));
  const float max = fp8_max(fp8);
  NoGradGuard no_grad;
  const Tensor x = x_in.dtype() == DType::f32 ? x_in : x_in.to(DType::f32);
  Fp8Tensor q;
  q.scaling = scaling;
  q.data = empty(x.shape(), fp8);
  q.amax = kernels::fp8_amax(x);
  switch (scaling) {
    case Fp8Scaling::delayed:
    case Fp8Scaling::current:
    case Fp8Scaling::none: {
      if (scaling == Fp8Scaling::current) scale = current_scale(q.amax, max);
      if (scaling == Fp8Scaling::none) scale = 1.0f;
      MIXP_CHECK(std::isfinite(scale) && scale > 0.0f,
                 "quantize: the scale must be finite and "
                 "positive, got ",
                 scale);
      q.scale = scale;
      q.scale_inv = 1.0f / scale;
      kernels::fp8_scale(x, scale, q.data);
      break;
    }
    case Fp8Scaling::mxfp8: {
      q.block_cols = kernels::kMxBlock;
      const int64_t nb = (d.cols + kernels::kMxBlock - 1) / kernels::kMxBlock;
      q.block_scales = empty({d.batch * d.rows, nb}, DType::u8);
      kernels::fp8_quantize_mx(x, d.batch * d.rows, d.cols, kernel_rounding(mx_rounding), q.data,
                               q.block_scales);
      break;
    }
    case Fp8Scaling::block_1x128:
    case Fp8Scaling::block_128x128: {
      q.block_rows = scaling == Fp8Scaling::block_128x128 ? kernels::kFp8Block : 1;
      q.block_cols = kernels::kFp8Block;
      const int64_t br = (d.rows + q.block_rows - 1) / q.block_rows;
      const int64_t bc = (d.cols + kernels::kFp8Block - 1) / kernels::kFp8Block;
      q.block_scales = empty({d.batch, br, bc}, DType::f32);
      kernels::fp8_quantize_blocks(x, d.batch, d.rows, d.cols, q.block_rows, q.data,
                                   q.block_scales);
      break;
    }
  }
  return q;
}

namespace {
bool per_tensor(Fp8Scaling s) {
  return s == Fp8Scaling::delayed || s == Fp8Scaling::current || s == Fp8Scaling::none;
}
bool per_block(Fp8Scaling s) {
  return s == Fp8Scaling::block_1x128 || s == Fp8Scaling::block_128x128;
}
}  // namespace

Tensor fp8_gemm(const Fp8Tensor& a, const Fp8Tensor& b) {
  const Dims3 da = dims_of(a.data, "fp8_gemm (A)"), db = dims_of(b.data, "fp8_gemm (B)");
  MIXP_CHECK(a.data.ndim() == b.data.ndim() && da.batch == db.batch && da.cols == db.cols,
             "fp8_gemm: A ", a.data.shape().to_string(), " and B ", b.data.shape().to_string(),
             " must be [batch, m, k] and [batch, n, k] with the same batch and k");
  const bool same_kind = (per_tensor(a.scaling) && per_tensor(b.scaling)) ||
                         (per_block(a.scaling) && per_block(b.scaling)) ||
                         (a.scaling == Fp8Scaling::mxfp8 && b.scaling == Fp8Scaling::mxfp8);
  MIXP_CHECK(same_kind, "fp8_gemm: operands scaled ", name_of(a.scaling), " and ",
             name_of(b.scaling), " cannot meet in one GEMM");
  const Shape out_shape =
      a.data.ndim() == 2 ? Shape{da.rows, db.rows} : Shape{da.batch, da.rows, db.rows};
  Tensor c = empty(out_shape, DType::f32);
  kernels::fp8_scaled_gemm(matrix(a), matrix(b), da.batch, da.rows, db.rows, da.cols, c);
  return c;
}

}  // namespace mixp::amp
