// The optimizers' element updates: one parameter's tensors as a WeightSlot, and the kernels that
// update a group of them in one parallel region. Private to mixp.
//
// A slot's weights are fp32 for f32, bf16 and f16 parameters and f64 for f64 ones; where the new
// weight goes depends on the slot:
//
//   f32 or f64 parameter                    in place
//   f16 parameter with a master             into the fp32 master, then the parameter rounded to
//                                           nearest even
//   bf16 parameter with a master_low        the fp32 master joined from the parameter and its low
//                                           halves, updated, split back (kernels/master_split.h)
//   stochastic                              the parameter widened, updated, rounded
//                                           stochastically: element i uses word rng.offset + i
//   compensation                            the parameter widened, updated, Kahan-summed with its
//                                           compensation: y = update - c; t = round(w + y);
//                                           c = (t - w) - y; w = t
//
// Gradients are f32, f64, bf16 or f16, widened exactly. Each element's update is a function of
// that element alone, so every candidate and thread count gives the same bits.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <span>

#include "kernels/adam.h"
#include "kernels/registry.h"
#include "mixp/random.h"

namespace mixp::kernels {

/// What the update of one parameter reads and writes (optim::MasterWeightOptimizer::Slot).
struct WeightSlot {
  Tensor param;         ///< f32, f64, bf16 or f16
  Tensor grad;          ///< f32, f64, bf16 or f16, as many elements as param
  Tensor master;        ///< an f16 parameter's fp32 master, or undefined
  Tensor master_low;    ///< a bf16 parameter's master: u8, low halves then tie bits, or undefined
  Tensor compensation;  ///< Kahan's compensation, of param's dtype, or undefined
  bool stochastic = false;
  PhiloxState rng;  ///< stochastic: the words of this update

  /// The device of its defined tensors; mixp::Error naming both where two differ.
  Device device() const;
};

enum class AdamDecay : uint8_t { l2, decoupled };

/// One Adam step of one parameter that has had `step` updates, counting this one.
struct AdamHyper {
  int64_t step = 1;
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  AdamDecay decay = AdamDecay::l2;
};

/// The per-element constants of an Adam step in C (float, or double for f64 parameters), each
/// computed in double and rounded once, in the order of PyTorch's single-tensor implementation.
template <typename C>
struct AdamStep {
  C step_size, bc2_sqrt, b1, beta2, b2, e, l2, shrink;
  explicit AdamStep(const AdamHyper& h)
      : step_size(C(h.lr / (1.0 - std::pow(h.betas[0], double(h.step))))),
        bc2_sqrt(C(std::sqrt(1.0 - std::pow(h.betas[1], double(h.step))))),
        b1(C(1.0 - h.betas[0])),
        beta2(C(h.betas[1])),
        b2(C(1.0 - h.betas[1])),
        e(C(h.eps)),
        l2(h.decay == AdamDecay::l2 ? C(h.weight_decay) : C(0)),
        shrink(h.decay == AdamDecay::decoupled ? C(1.0 - h.lr * h.weight_decay) : C(1)) {}

  AdamConstants as_constants() const {
    return {.step_size = float(step_size), .bc2_sqrt = float(bc2_sqrt), .b1 = float(b1),
            .beta2 = float(beta2), .b2 = float(b2), .eps = float(e), .l2 = float(l2),
            .shrink = float(shrink)};
  }
};

/// One parameter's Adam update: its weights, moments (f64 for an f64 parameter, else f32 or
/// bf16) and step.
struct AdamSlot {
  WeightSlot weights;
  Tensor exp_avg, exp_avg_sq;
  /// bf16 moments: updated in fp32 and rounded back stochastically, element i with word
  /// state_rng.offset + i, its low half for exp_avg and its high half for exp_avg_sq.
  PhiloxState state_rng;
  AdamHyper hyper;

  Device device() const;
};

/// Updates every slot, all in one parallel region (each region wakes the sleeping workers, tens
/// of microseconds: one per parameter costs more than the small parameters' updates). For each
/// element, in this order, each operation rounded once in C (kernels/adam.h's rule):
///   g = g + l2 * w;  w = w * shrink;  m = m + b1 * (g - m);  v = beta2 * v + b2 * g * g;
///   w = w - step_size * (m / (sqrt(v) / bc2_sqrt + eps))
using AdamUpdateFn = void(std::span<const AdamSlot> slots);
extern Kernel<AdamUpdateFn> adam_update;

struct SgdHyper {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// One parameter's SGD update: its weights and momentum buffer (f64 for an f64 parameter, else
/// f32; undefined without momentum).
struct SgdSlot {
  WeightSlot weights;
  Tensor momentum;
  bool first = false;  ///< the buffer's first step: it starts as the step's direction
  SgdHyper hyper;

  Device device() const;
};

/// Updates every slot, in one parallel region. Per element, in C:
///   d = g + weight_decay * w;  b = first ? d : momentum * b + (1 - dampening) * d;
///   d = nesterov ? d + momentum * b : b  (with momentum);  w = w - lr * d
using SgdUpdateFn = void(std::span<const SgdSlot> slots);
extern Kernel<SgdUpdateFn> sgd_update;

}  // namespace mixp::kernels
