// mixp/optim/master_weights.h — how an optimizer keeps the precision of low-precision weights.
//
// An update lr * g is often far below half a unit in the last place of a bf16 weight (bf16 has
// 8 significant bits: for a weight of 1.0, anything under 2^-9 rounds away). Written straight
// into the bf16 weight it is lost, and training stalls. Three remedies, one per Precision:
//
//   master_fp32          (default; Micikevicius et al., "Mixed Precision Training", 2018) for
//                        every bf16 or f16 parameter the optimizer keeps an fp32 master copy
//                        (MemoryTag::master, 4 bytes an element). step() updates the master
//                        and writes the parameter back rounded to nearest even, so that after
//                        every step parameter == round_to_nearest_even(master).
//   stochastic_rounding  no master copy. The new value parameter + update is computed in fp32
//                        and rounded stochastically into the parameter (bf16: the bits of
//                        mixp::convert_stochastic; f16: mixp::round_to_format), with random
//                        words from Philox (seed, stream, offset). Unbiased: on average the
//                        parameter moves by the update. Each step uses, for each updated
//                        parameter in order, words [offset, offset + numel) and then advances
//                        offset by numel, so a run is reproducible from its seed, and the
//                        offset (rounding_state()) is all a checkpoint needs to resume it.
//   kahan                no master copy; a compensation buffer of the parameter's own dtype
//                        (bf16 for bf16: 2 bytes an element, so 4 in all against master_fp32's
//                        6) holds the part of past updates that rounding lost, and is added
//                        back (Kahan summation): y = update - c; t = round(w + y);
//                        c = (t - w) - y; w = t. The compensation is stored rounded to the
//                        parameter's dtype, which keeps about twice the parameter's
//                        significant bits of the running sum; an fp32 buffer would keep more
//                        but cost as much memory as a master copy (MemoryTag::optimizer_state).
//
// In every mode, the gradients of bf16 and f16 parameters accumulate in fp32
// (Tensor::set_grad_dtype), the update is computed in fp32 (f64 for f64 parameters), and fp32
// and f64 parameters are their own master: they are updated in place.
//
// Example:
//
//   mixp::optim::Adam opt(params, {.lr = 1e-3, .precision = mixp::optim::Precision::kahan});
//   mixp::optim::Sgd sr(params, {.lr = 0.1,
//                                .precision = mixp::optim::Precision::stochastic_rounding,
//                                .rounding = mixp::PhiloxState{/*seed=*/1, /*stream=*/0}});
//   const mixp::Tensor& m = opt.master(0);   // fp32 master, the parameter, or undefined
#pragma once

#include <cstdint>
#include <vector>

#include "mixp/optim/optimizer.h"
#include "mixp/random.h"
#include "mixp/tensor.h"

namespace mixp::optim {

/// How updates reach bf16 and f16 parameters. Append-only: the values go into checkpoints.
enum class Precision : uint8_t {
  master_fp32 = 0,          ///< fp32 master copies, written back rounded to nearest even
  stochastic_rounding = 1,  ///< no copy: each new value is rounded stochastically
  kahan = 2,                ///< no copy: a compensation buffer of the parameter's dtype
};
const char* name_of(Precision precision);

/// The common part of Sgd, Adam and AdamW: the parameters' precision state and the write-back.
class MasterWeightOptimizer : public Optimizer {
 public:
  /// What the update of one parameter works on, as an optimizer's step() gets it from slot().
  struct Slot {
    Tensor param;
    Tensor grad;          ///< undefined: no update
    Tensor master;        ///< defined for low-precision parameters under master_fp32
    Tensor compensation;  ///< defined for low-precision parameters under kahan
    bool stochastic = false;
    PhiloxState rng;  ///< the words this step's stochastic rounding of the slot uses
  };

  Precision precision() const { return precision_; }

  /// The fp32 master copy of parameter i (master_fp32, bf16 or f16 parameter); the parameter
  /// itself for f32 and f64 parameters; an undefined tensor where the mode keeps no copy.
  const Tensor& master(size_t i) const;
  /// The Kahan compensation of parameter i (kahan, bf16 or f16 parameter), else undefined.
  const Tensor& compensation(size_t i) const;

  /// Where the next stochastic rounding draws from; offset counts the words used so far.
  const PhiloxState& rounding_state() const { return rounding_; }
  void set_rounding_state(const PhiloxState& state) { rounding_ = state; }

 protected:
  MasterWeightOptimizer(std::vector<Tensor> parameters, double lr, Precision precision,
                        PhiloxState rounding);

  /// The slot of parameter i for this step; reserves its stochastic-rounding words.
  Slot slot(size_t i);
  /// Marks parameter i as changed in place (its version), once its update is written.
  void bump_version(size_t i);

 private:
  Precision precision_;
  PhiloxState rounding_;
  std::vector<Tensor> masters_;
  std::vector<Tensor> compensations_;
};

}  // namespace mixp::optim
