// mixp/optim/master_weights.h — how an optimizer keeps the precision of low-precision weights.
//
// An update lr * g is often far below half a unit in the last place of a bf16 weight (bf16 has
// 8 significant bits: for a weight of 1.0, anything under 2^-9 rounds away). Written straight
// into the bf16 weight it is lost, and training stalls. Three remedies, one per Precision:
//
//   master_fp32          (default; Micikevicius et al., "Mixed Precision Training", 2018) for
//                        every bf16 or f16 parameter the optimizer keeps an fp32 master copy.
//                        step() updates the master and writes the parameter back rounded to
//                        nearest even, so that after every step parameter ==
//                        round_to_nearest_even(master). For an f16 parameter the master is an
//                        fp32 tensor (MemoryTag::master, 4 bytes an element). For a bf16
//                        parameter, which shares fp32's exponent, the parameter already holds
//                        the master's top half (rounded), so the optimizer keeps only the
//                        master's low 16 bits and one bit for ties (MemoryTag::master, 2 bytes
//                        and 1 bit an element): the same fp32 master, bit for bit, in half the
//                        memory. master(i) assembles it.
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
// A low-precision parameter written by anything but the optimizer (copy_, fill_) since the
// optimizer's last step restarts its master from its new value: the master follows the
// parameter, instead of overwriting the change at the next step.
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
//   mixp::Tensor m = opt.master(0);   // fp32 master (a copy for bf16), the parameter, or undefined
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
    Tensor master;        ///< the fp32 master of an f16 parameter under master_fp32
    Tensor master_low;    ///< a bf16 parameter's master under master_fp32: u8, the low halves
                          ///< (2 bytes an element) then the tie bits (kernels/master_split.h)
    Tensor compensation;  ///< defined for low-precision parameters under kahan
    bool stochastic = false;
    PhiloxState rng;  ///< the words this step's stochastic rounding of the slot uses
  };

  Precision precision() const { return precision_; }

  /// The fp32 master copy of parameter i: for an f16 parameter under master_fp32 the
  /// optimizer's own tensor; for a bf16 one under master_fp32 a new fp32 tensor assembled from
  /// the parameter and the low halves (MemoryTag::workspace: a snapshot, which later steps do
  /// not change); for f32 and f64 parameters the parameter itself; an undefined tensor where
  /// the mode keeps no copy.
  Tensor master(size_t i) const;
  /// Restores the master of parameter i from an fp32 tensor of its shape (a checkpoint's), and
  /// writes the parameter as the master rounded to nearest even. For f32 and f64 parameters
  /// it copies into the parameter. Throws mixp::Error where the mode keeps no master, or for a
  /// tensor of another shape or dtype.
  void set_master(size_t i, const Tensor& value);
  /// The Kahan compensation of parameter i (kahan, bf16 or f16 parameter), else undefined.
  const Tensor& compensation(size_t i) const;

  /// Where the next stochastic rounding draws from; offset counts the words used so far.
  const PhiloxState& rounding_state() const { return rounding_; }
  void set_rounding_state(const PhiloxState& state) { rounding_ = state; }

  /// For parameters that are pieces of larger ones (ZeRO: each process updates a 1-D view of
  /// its part of every parameter): parameter i is elements [begin[i], begin[i] + numel) of a
  /// parameter of whole[i] elements. Its stochastic rounding then draws the words the whole
  /// parameter's elements would, and every draw advances the stream by the whole parameter's
  /// count, so that the pieces of any number of processes round as one process does. Throws
  /// mixp::Error unless each piece lies within its whole.
  ///
  ///   opt.set_pieces_of({4096, 128}, {2048, 0});   // the second half, and all of a vector
  void set_pieces_of(const std::vector<int64_t>& whole, const std::vector<int64_t>& begin);

 protected:
  MasterWeightOptimizer(std::vector<Tensor> parameters, double lr, Precision precision,
                        PhiloxState rounding);

  /// Adds "rounding" (the stream) and, per low-precision parameter i, "master/<i>" (fp32,
  /// assembled) or "compensation/<i>" where the mode keeps one.
  void save_state(StateDict& state) const override;
  void check_state(const StateDict& state) const override;
  void apply_state(const StateDict& state) override;

  /// The slot of parameter i for this step; reserves its stochastic-rounding words, and
  /// restarts its master from the parameter if someone else wrote the parameter.
  Slot slot(size_t i);
  /// Reserves the words of one stochastic rounding of every element of parameter i (of the
  /// whole parameter it is a piece of: set_pieces_of): where its own elements' words start.
  PhiloxState take_rounding_words(size_t i);
  /// Marks parameter i as changed in place (its version), once its update is written.
  void bump_version(size_t i);

 private:
  /// Starts parameter i's master (and Kahan compensation) again from the parameter's value.
  void restart_master(size_t i);

  Precision precision_;
  PhiloxState rounding_;
  std::vector<Tensor> masters_;      // f16 parameters under master_fp32
  std::vector<Tensor> master_lows_;  // bf16 parameters under master_fp32
  std::vector<Tensor> compensations_;
  std::vector<uint64_t> versions_;  // each parameter's version after the optimizer's last write
  std::vector<int64_t> whole_numel_, piece_begin_;  // set_pieces_of; empty: whole parameters
};

}  // namespace mixp::optim
