// The data movement around linear's and attention's FP8 products (ops/fp8_linear.cpp), chosen by
// the registry. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// y [rows, n] f32 += bias [n] f32 on every row: one fp32 addition per element, so every
/// candidate gives the same bits.
using Fp8AddBiasRowsFn = void(Tensor& y, const Tensor& bias);
extern Kernel<Fp8AddBiasRowsFn> fp8_add_bias_rows;

/// out [batch, cols, rows] = the transpose of each matrix of src [batch, rows, cols] (batch may
/// be left out of both), of one dtype of 4 bytes (f32 values) or 1 byte (FP8 codes): a copy, the
/// same bits from every candidate. Tiles of 32 x 32 f32 or 64 x 64 bytes keep the reads and
/// the writes within a few cache lines per row.
using Fp8TransposeLast2Fn = void(const Tensor& src, Tensor& out);
extern Kernel<Fp8TransposeLast2Fn> fp8_transpose_last2;

}  // namespace mixp::kernels
