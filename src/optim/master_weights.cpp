#include "mixp/optim/master_weights.h"

#include <unordered_set>

#include "kernels/master_split.h"
#include "mixp/error.h"
#include "optim/weight_slot.h"
#include "tensor/tensor_impl.h"

namespace mixp::optim {

const char* name_of(Precision precision) {
  switch (precision) {
    case Precision::master_fp32: return "master_fp32";
    case Precision::stochastic_rounding: return "stochastic_rounding";
    case Precision::kahan: return "kahan";
  }
  return "unknown";
}

namespace {
bool is_low_precision(DType d) { return d == DType::bf16 || d == DType::f16; }

// The low halves of a bf16 parameter's master, then its tie bits (kernels/master_split.h).
int64_t master_low_bytes(int64_t numel) { return 2 * numel + (numel + 7) / 8; }
}  // namespace

MasterWeightOptimizer::MasterWeightOptimizer(std::vector<Tensor> parameters, double lr,
                                             Precision precision, PhiloxState rounding)
    : Optimizer(std::move(parameters)), precision_(precision), rounding_(rounding) {
  MIXP_CHECK(precision == Precision::master_fp32 || precision == Precision::stochastic_rounding ||
                 precision == Precision::kahan,
             "optimizer: unknown precision ", int(precision));
  set_learning_rate(lr);
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    MIXP_CHECK(seen.insert(parameters_[i].impl()).second, "optimizer: parameter ", i,
               " appears twice in the list; it would be updated twice per step");
  }
  masters_.resize(parameters_.size());
  master_lows_.resize(parameters_.size());
  compensations_.resize(parameters_.size());
  versions_.resize(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i];
    const DType d = p.dtype();
    MIXP_CHECK(d == DType::f32 || d == DType::f64 || is_low_precision(d), "optimizer: parameter ",
               i, " is ", name_of(d), "; optimizers update f32, f64, bf16 and f16 parameters");
    if (!is_low_precision(d)) continue;
    p.set_grad_dtype(DType::f32);
    if (Tensor g = p.grad(); g.defined() && g.dtype() != DType::f32) {
      Tensor wide = empty(g.shape(), DType::f32, MemoryTag::gradient, g.device());
      wide.copy_(g);
      p.set_grad(wide);
    }
    if (precision == Precision::master_fp32 && d == DType::bf16) {
      // The master starts as the parameter: low halves and tie bits zero.
      master_lows_[i] = detail::zeros_beside(p, Shape{master_low_bytes(p.numel())}, DType::u8,
                                             MemoryTag::master);
    } else if (precision == Precision::master_fp32) {
      masters_[i] = empty(p.shape(), DType::f32, MemoryTag::master, p.device());
      masters_[i].copy_(p);
    } else if (precision == Precision::kahan) {
      compensations_[i] = detail::zeros_beside(p, p.shape(), d, MemoryTag::optimizer_state);
    }
    versions_[i] = p.version();
  }
}

Tensor MasterWeightOptimizer::master(size_t i) const {
  MIXP_CHECK(i < parameters_.size(), "master: parameter ", i, " of ", parameters_.size());
  const Tensor& p = parameters_[i];
  if (!is_low_precision(p.dtype())) return p;
  if (!masters_[i].defined() && !master_lows_[i].defined()) return Tensor();
  const bool stale = p.version() != versions_[i];  // the next step restarts from the parameter
  if (masters_[i].defined() && !stale) return masters_[i];
  Tensor m = empty(p.shape(), DType::f32, MemoryTag::workspace, p.device());
  if (stale) {
    m.copy_(p);
    return m;
  }
  kernels::join_bf16_master(p, master_lows_[i], m);
  return m;
}

void MasterWeightOptimizer::set_master(size_t i, const Tensor& value) {
  MIXP_CHECK(i < parameters_.size(), "set_master: parameter ", i, " of ", parameters_.size());
  Tensor p = parameters_[i];
  MIXP_CHECK(value.defined() && value.shape() == p.shape(), "set_master: parameter ", i,
             " has shape ", p.shape().to_string(), ", the master given ",
             value.defined() ? value.shape().to_string() : std::string("none"));
  if (!is_low_precision(p.dtype())) {
    p.copy_(value);
    versions_[i] = p.version();
    return;
  }
  MIXP_CHECK(masters_[i].defined() || master_lows_[i].defined(), "set_master: parameter ", i,
             " keeps no master under ", name_of(precision_));
  MIXP_CHECK(value.dtype() == DType::f32, "set_master: a master is f32, got ",
             name_of(value.dtype()));
  if (masters_[i].defined()) {
    masters_[i].copy_(value);
    p.copy_(value);  // rounds to nearest even
  } else {
    kernels::split_bf16_master(value, p, master_lows_[i]);
    ++p.impl()->storage->version;
  }
  versions_[i] = p.version();
}

const Tensor& MasterWeightOptimizer::compensation(size_t i) const {
  MIXP_CHECK(i < parameters_.size(), "compensation: parameter ", i, " of ", parameters_.size());
  return compensations_[i];
}

MasterWeightOptimizer::Slot MasterWeightOptimizer::slot(size_t i) {
  Slot s;
  s.param = parameters_[i];
  s.grad = s.param.grad();
  if (!s.grad.defined()) return s;
  if (s.param.version() != versions_[i]) restart_master(i);
  s.master = masters_[i];
  s.master_low = master_lows_[i];
  s.compensation = compensations_[i];
  s.stochastic = is_low_precision(s.param.dtype()) && precision_ == Precision::stochastic_rounding;
  if (s.stochastic) s.rng = take_rounding_words(i);
  return s;
}

void MasterWeightOptimizer::restart_master(size_t i) {
  const Tensor& p = parameters_[i];
  if (masters_[i].defined()) masters_[i].copy_(p);
  if (master_lows_[i].defined()) master_lows_[i].fill_(0.0);
  if (compensations_[i].defined()) compensations_[i].fill_(0.0);
  versions_[i] = p.version();
}

void MasterWeightOptimizer::save_state(StateDict& state) const {
  Optimizer::save_state(state);
  state.set_philox("rounding", rounding_);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string index = std::to_string(i);
    if (masters_[i].defined() || master_lows_[i].defined())
      state.tensors["master/" + index] = master(i);
    if (compensations_[i].defined()) state.tensors["compensation/" + index] = compensations_[i];
  }
}

void MasterWeightOptimizer::check_state(const StateDict& state) const {
  Optimizer::check_state(state);
  (void)state.get_philox("rounding");
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string index = std::to_string(i);
    const Tensor& p = parameters_[i];
    if (masters_[i].defined() || master_lows_[i].defined())
      (void)state.tensor("master/" + index, DType::f32, p.shape());
    if (compensations_[i].defined()) (void)state.tensor("compensation/" + index, compensations_[i]);
  }
}

void MasterWeightOptimizer::apply_state(const StateDict& state) {
  Optimizer::apply_state(state);
  rounding_ = state.get_philox("rounding");
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string index = std::to_string(i);
    if (masters_[i].defined() || master_lows_[i].defined())
      set_master(i, state.tensor("master/" + index));
    if (compensations_[i].defined()) compensations_[i].copy_(state.tensor("compensation/" + index));
    // The parameters were just loaded by copy_: they are the saved values, not someone
    // else's writes for the next step to restart from.
    versions_[i] = parameters_[i].version();
  }
}

PhiloxState MasterWeightOptimizer::take_rounding_words(size_t i) {
  PhiloxState start = rounding_;
  if (whole_numel_.empty()) {
    rounding_.offset += uint64_t(parameters_[i].numel());
    return start;
  }
  rounding_.offset += uint64_t(whole_numel_[i]);
  start.offset += uint64_t(piece_begin_[i]);
  return start;
}

void MasterWeightOptimizer::set_pieces_of(const std::vector<int64_t>& whole,
                                          const std::vector<int64_t>& begin) {
  MIXP_CHECK(whole.size() == parameters_.size() && begin.size() == parameters_.size(),
             "set_pieces_of: ", whole.size(), " wholes and ", begin.size(), " starts for ",
             parameters_.size(), " parameters");
  for (size_t i = 0; i < parameters_.size(); ++i)
    MIXP_CHECK(begin[i] >= 0 && begin[i] + parameters_[i].numel() <= whole[i],
               "set_pieces_of: parameter ", i, " of ", parameters_[i].numel(),
               " elements from element ", begin[i], " is not within a whole of ", whole[i]);
  whole_numel_ = whole;
  piece_begin_ = begin;
}

void MasterWeightOptimizer::bump_version(size_t i) {
  versions_[i] = ++parameters_[i].impl()->storage->version;
}

}  // namespace mixp::optim
