// mixp/mixp.h — everything of mixp in one include.
//
// mixp trains neural networks in mixed and low precision. Its ground floor is number formats
// that round exactly: fp16, bf16 and OCP FP8 as storage types, any small format by emulation,
// round-to-nearest-even and stochastic rounding, and bulk conversion kernels that give the
// same bits on every instruction set.
//
// A worked example: quantize a tensor to FP8 with a per-tensor scale, as the FP8 training
// recipes do, and measure what it costs.
//
//   #include <mixp/mixp.h>
//
//   std::vector<float> x = ...;                          // activations
//   float amax = 0;
//   for (float v : x) amax = std::max(amax, std::fabs(v));
//   const float scale = float(mixp::traits(mixp::DType::e4m3).max) / amax;   // 448 / amax
//
//   std::vector<mixp::float8_e4m3> q(x.size());         // one byte an element
//   mixp::convert(x, q, scale, mixp::Overflow::saturate);
//   std::vector<float> back(x.size());
//   mixp::convert(q, back, 1.0f / scale);               // x, within E4M3's 2^-4 relative step
//
//   // The same element format without a storage type, by emulation:
//   float y = mixp::round_to_format(mixp::Format::e2m1(), 2.6f,
//                                   mixp::Rounding::stochastic, mixp::Overflow::saturate,
//                                   mixp::philox_word({/*seed=*/1, /*stream=*/0, 0}, 0));
//   // y is 2 or 3, and 3 with probability 0.6.
//
// Errors are thrown as mixp::Error (mixp/error.h); the library never exits or aborts.
#pragma once

#include "mixp/amp/autocast.h"
#include "mixp/amp/fp4.h"
#include "mixp/amp/fp8.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/autograd.h"
#include "mixp/convert.h"
#include "mixp/cpu.h"
#include "mixp/dist/communicator.h"
#include "mixp/dtype.h"
#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/format.h"
#include "mixp/memory.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/batch_norm.h"
#include "mixp/nn/conv2d.h"
#include "mixp/nn/dropout.h"
#include "mixp/nn/embedding.h"
#include "mixp/nn/layer_norm.h"
#include "mixp/nn/linear.h"
#include "mixp/nn/lstm.h"
#include "mixp/nn/models.h"
#include "mixp/nn/module.h"
#include "mixp/nn/pooling.h"
#include "mixp/nn/sequential.h"
#include "mixp/nn/transformer.h"
#include "mixp/op_kind.h"
#include "mixp/ops.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/adamw.h"
#include "mixp/optim/clip_grad.h"
#include "mixp/optim/lr_schedule.h"
#include "mixp/optim/master_weights.h"
#include "mixp/optim/optimizer.h"
#include "mixp/optim/sgd.h"
#include "mixp/random.h"
#include "mixp/runtime.h"
#include "mixp/tensor.h"
