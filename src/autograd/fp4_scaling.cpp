// FP4 block quantization at the tensor level (mixp/amp/fp4.h): the amax, the tensor scale and
// the quantization (registry kernels of kernels/fp4_quantize.h); the FP4 GEMM and the Hadamard
// transform.
// Like FP8's scaling (fp8_scaling.cpp) this sits with autograd, below the ops that use it.
#include "mixp/amp/fp4.h"

#include "kernels/fp4.h"
#include "kernels/fp4_quantize.h"
#include "kernels/fp8_quantize.h"
#include "mixp/autograd.h"
#include "mixp/error.h"

namespace mixp::amp {
namespace {

kernels::Fp4Kind kind_of(Fp4Scaling scaling) {
  // none is mxfp4's layout with unit scales.
  return scaling == Fp4Scaling::nvfp4 ? kernels::Fp4Kind::nvfp4 : kernels::Fp4Kind::mxfp4;
}

kernels::Fp4Matrix matrix(const Fp4Tensor& q) {
  return {.packed = q.data,
          .scales = q.block_scales,
          .kind = kind_of(q.scaling),
          .rows = q.rows,
          .cols = q.cols,
          .block_rows = q.block_rows};
}

kernels::MxRounding kernel_rounding(MxScaleRounding rounding) {
  return rounding == MxScaleRounding::up ? kernels::MxRounding::up : kernels::MxRounding::floor;
}

}  // namespace

const char* name_of(Fp4Scaling scaling) {
  switch (scaling) {
    case Fp4Scaling::nvfp4: return "nvfp4";
    case Fp4Scaling::mxfp4: return "mxfp4";
    case Fp4Scaling::none: break;
  }
  return "e2m1";
}

int64_t Fp4Tensor::block_size() const { return kernels::fp4_block(kind_of(scaling)); }

int64_t Fp4Tensor::bytes() const {
  return data.numel() + block_scales.numel() + int64_t(sizeof(float));
}

Tensor Fp4Tensor::dequantize() const {
  Tensor out = empty(shape, DType::f32, MemoryTag::activation, data.device());
  kernels::fp4_dequantize(matrix(*this), tensor_scale, out);
  return out;
}

Fp4Tensor Fp4Tensor::transposed() const {
  MIXP_CHECK(shape.ndim() == 2 && block_rows == block_size(),
             "Fp4Tensor::transposed: only a 2-D tensor in square tiles has the same values "
             "transposed, this one is ",
             shape.to_string(), " in 1 x ", block_size(), " blocks");
  Fp4Tensor t = *this;
  t.shape = Shape{cols, rows};
  t.rows = cols;
  t.cols = rows;
  t.data = empty({cols, (rows + 1) / 2}, DType::u8, data.tag(), data.device());
  t.block_scales = empty({block_scales.size(1), block_scales.size(0)}, DType::u8,
                         block_scales.tag(), block_scales.device());
  kernels::Fp4Matrix transpose = matrix(t);
  kernels::fp4_transpose(matrix(*this), transpose);
  return t;
}

Fp4Tensor quantize_fp4(const Tensor& x_in, Fp4Scaling scaling, const Fp4Options& options) {
  MIXP_CHECK(x_in.defined() && x_in.ndim() >= 1 && x_in.numel() > 0,
             "quantize_fp4: expected a non-empty tensor of at least 1 dimension, got ",
             x_in.defined() ? x_in.shape().to_string() : "an undefined tensor");
  MIXP_CHECK(x_in.dtype() == DType::f32 || x_in.dtype() == DType::bf16,
             "quantize_fp4: the input must be f32 or bf16, got ", name_of(x_in.dtype()));
  NoGradGuard no_grad;
  const Tensor x = x_in.dtype() == DType::f32 ? x_in : x_in.to(DType::f32);
  Fp4Tensor q;
  q.scaling = scaling;
  q.shape = x.shape();
  q.cols = x.size(x.ndim() - 1);
  q.rows = x.numel() / q.cols;
  q.amax = kernels::fp8_amax(x);
  q.tensor_scale = scaling == Fp4Scaling::nvfp4 ? kernels::nvfp4_tensor_scale(q.amax) : 1.0f;
  const int64_t block = q.block_size();
  MIXP_CHECK(!options.square_blocks || x.ndim() == 2,
             "quantize_fp4: square blocks tile a 2-D tensor, got ", x.shape().to_string());
  q.block_rows = options.square_blocks ? block : 1;
  q.data = empty({q.rows, (q.cols + 1) / 2}, DType::u8);
  q.block_scales =
      empty({(q.rows + q.block_rows - 1) / q.block_rows, (q.cols + block - 1) / block}, DType::u8);
  const kernels::Fp4Params params{.kind = kind_of(scaling),
                                  .tensor_scale = q.tensor_scale,
                                  .mx_rounding = kernel_rounding(options.mx_rounding),
                                  .stochastic = options.rounding == Fp4Rounding::stochastic,
                                  .philox = options.philox,
                                  .block_rows = q.block_rows,
                                  .unit_scales = scaling == Fp4Scaling::none};
  kernels::fp4_quantize(x, q.rows, q.cols, params, q.data, q.block_scales);
  return q;
}

Tensor fp4_gemm(const Fp4Tensor& a, const Fp4Tensor& b) {
  MIXP_CHECK(a.scaling == b.scaling, "fp4_gemm: operands scaled ", name_of(a.scaling), " and ",
             name_of(b.scaling), " cannot meet in one GEMM");
  MIXP_CHECK(a.cols == b.cols && a.cols > 0, "fp4_gemm: A ", a.shape.to_string(), " and B ",
             b.shape.to_string(), " must end in the same k");
  NoGradGuard no_grad;
  Tensor c = empty({a.rows, b.rows}, DType::f32);
  const float global =
      a.scaling == Fp4Scaling::nvfp4 ? (1.0f / a.tensor_scale) * (1.0f / b.tensor_scale) : 1.0f;
  kernels::fp4_block_gemm(matrix(a), matrix(b), global, c);
  return c;
}

Tensor random_hadamard16(const Tensor& x_in, const std::array<float, 16>& signs) {
  MIXP_CHECK(x_in.defined() && x_in.ndim() == 2 &&
                 (x_in.dtype() == DType::f32 || x_in.dtype() == DType::bf16),
             "random_hadamard16: expected a 2-D f32 or bf16 tensor, got ",
             x_in.defined() ? x_in.shape().to_string() + " " + name_of(x_in.dtype())
                            : std::string("an undefined tensor"));
  for (size_t j = 0; j < signs.size(); ++j)
    MIXP_CHECK(signs[j] == 1.0f || signs[j] == -1.0f, "random_hadamard16: sign ", j, " is ",
               signs[j], "; a sign is +1 or -1");
  NoGradGuard no_grad;
  const Tensor x = x_in.dtype() == DType::f32 ? x_in : x_in.to(DType::f32);
  const int64_t padded = (x.size(1) + 15) / 16 * 16;
  Tensor out = empty({x.size(0), padded}, DType::f32, MemoryTag::workspace, x.device());
  kernels::hadamard16(x, signs, out);
  return out;
}

float e2m1_value(uint8_t code) {
  MIXP_CHECK(code < 16, "e2m1_value: an E2M1 code is 0..15, got ", int(code));
  return kernels::e2m1_value(code);
}

float nvfp4_tensor_scale(float amax) { return kernels::nvfp4_tensor_scale(amax); }

uint8_t nvfp4_block_scale_code(float block_amax, float tensor_scale) {
  return kernels::nvfp4_block_scale_code(block_amax, tensor_scale);
}

uint8_t mxfp4_scale_code(float amax, MxScaleRounding rounding) {
  return kernels::mxfp4_scale_code(amax, kernel_rounding(rounding));
}

}  // namespace mixp::amp
