#include "mixp/optim/master_weights.h"

#include <unordered_set>

#include "mixp/error.h"
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
  compensations_.resize(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i];
    const DType d = p.dtype();
    MIXP_CHECK(d == DType::f32 || d == DType::f64 || is_low_precision(d), "optimizer: parameter ",
               i, " is ", name_of(d), "; optimizers update f32, f64, bf16 and f16 parameters");
    if (!is_low_precision(d)) continue;
    p.set_grad_dtype(DType::f32);
    if (Tensor g = p.grad(); g.defined() && g.dtype() != DType::f32) {
      Tensor wide = empty(g.shape(), DType::f32, MemoryTag::gradient);
      wide.copy_(g);
      p.set_grad(wide);
    }
    if (precision == Precision::master_fp32) {
      masters_[i] = empty(p.shape(), DType::f32, MemoryTag::master);
      masters_[i].copy_(p);
    } else if (precision == Precision::kahan) {
      compensations_[i] = zeros(p.shape(), d, MemoryTag::optimizer_state);
    }
  }
}

const Tensor& MasterWeightOptimizer::master(size_t i) const {
  MIXP_CHECK(i < parameters_.size(), "master: parameter ", i, " of ", parameters_.size());
  return is_low_precision(parameters_[i].dtype()) ? masters_[i] : parameters_[i];
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
  s.master = masters_[i];
  s.compensation = compensations_[i];
  s.stochastic = is_low_precision(s.param.dtype()) && precision_ == Precision::stochastic_rounding;
  if (s.stochastic) {
    s.rng = rounding_;
    rounding_.offset += uint64_t(s.param.numel());
  }
  return s;
}

void MasterWeightOptimizer::bump_version(size_t i) { ++parameters_[i].impl()->storage->version; }

}  // namespace mixp::optim
