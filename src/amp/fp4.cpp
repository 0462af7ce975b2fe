// FP4 block quantization at the tensor level (mixp/amp/fp4.h): the amax, the tensor scale, and
// the fast or the reference kernel of kernels/fp4.h.
#include "mixp/amp/fp4.h"

#include "kernels/fp4.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/runtime.h"

namespace mixp::amp {
namespace {

kernels::Fp4Kind kind_of(Fp4Scaling scaling) {
  return scaling == Fp4Scaling::nvfp4 ? kernels::Fp4Kind::nvfp4 : kernels::Fp4Kind::mxfp4;
}

kernels::MxRounding kernel_rounding(MxScaleRounding rounding) {
  return rounding == MxScaleRounding::up ? kernels::MxRounding::up : kernels::MxRounding::floor;
}

}  // namespace

const char* name_of(Fp4Scaling scaling) { return scaling == Fp4Scaling::nvfp4 ? "nvfp4" : "mxfp4"; }

int64_t Fp4Tensor::block_size() const { return kernels::fp4_block(kind_of(scaling)); }

int64_t Fp4Tensor::bytes() const {
  return data.numel() + block_scales.numel() + int64_t(sizeof(float));
}

Tensor Fp4Tensor::dequantize() const {
  Tensor out = empty(shape, DType::f32);
  kernels::fp4_dequantize(data.data<uint8_t>(), block_scales.data<uint8_t>(), rows, cols,
                          kind_of(scaling), tensor_scale, out.data<float>());
  return out;
}

Fp4Tensor quantize_fp4(const Tensor& x_in, Fp4Scaling scaling, const Fp4Options& options) {
  MIXP_CHECK(x_in.defined() && x_in.ndim() >= 1 && x_in.numel() > 0,
             "quantize_fp4: expected a non-empty tensor of at least 1 dimension, got ",
             x_in.defined() ? x_in.shape().to_string() : "an undefined tensor");
  MIXP_CHECK(x_in.dtype() == DType::f32 || x_in.dtype() == DType::bf16,
             "quantize_fp4: the input must be f32 or bf16, got ", name_of(x_in.dtype()));
  NoGradGuard no_grad;
  const Tensor x = x_in.dtype() == DType::f32 ? x_in : x_in.to(DType::f32);
  const float* xs = x.data<float>();
  const bool ref = reference_mode();
  Fp4Tensor q;
  q.scaling = scaling;
  q.shape = x.shape();
  q.cols = x.size(x.ndim() - 1);
  q.rows = x.numel() / q.cols;
  q.amax = ref ? kernels::fp8_amax_reference(xs, x.numel()) : kernels::fp8_amax_fast(xs, x.numel());
  q.tensor_scale = scaling == Fp4Scaling::nvfp4 ? kernels::nvfp4_tensor_scale(q.amax) : 1.0f;
  const int64_t block = q.block_size();
  q.data = empty({q.rows, (q.cols + 1) / 2}, DType::u8);
  q.block_scales = empty({q.rows, (q.cols + block - 1) / block}, DType::u8);
  const kernels::Fp4Params params{.kind = kind_of(scaling),
                                  .tensor_scale = q.tensor_scale,
                                  .mx_rounding = kernel_rounding(options.mx_rounding),
                                  .stochastic = options.rounding == Fp4Rounding::stochastic,
                                  .philox = options.philox};
  uint8_t* packed = q.data.data<uint8_t>();
  uint8_t* scales = q.block_scales.data<uint8_t>();
  if (ref)
    kernels::fp4_quantize_reference(xs, q.rows, q.cols, params, packed, scales);
  else
    kernels::fp4_quantize_fast(xs, q.rows, q.cols, params, packed, scales);
  return q;
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
