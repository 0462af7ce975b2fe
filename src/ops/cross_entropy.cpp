// cross_entropy: mean over the rows whose target is not ignore_index of
//   -(1 - eps) log p[target] - (eps / C) sum_c log p[c],   p = softmax(logits row),
// computed in fp32 (f64 for f64 logits) from the logits of any floating dtype.
// Shape contract: logits [N, C], targets [N] i64 with values in [0, C) or ignore_index; the
// result is a scalar of dtype f32 (f64 for f64 logits). With every target ignored the mean is
// NaN, as in PyTorch.
// Backward: dlogits = g / count * (p - q), q = (1 - eps) onehot(target) + eps / C; ignored
// rows get 0. The logits are saved (not p), so a bf16 model keeps 2 bytes per logit.
#include <cmath>
#include <limits>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct RowStats {
  double max, log_total;  // log-sum-exp = max + log_total
};

template <typename T, typename Acc>
Acc row_lse(const T* row, int64_t c, Acc& max_out) {
  Acc m = Acc(kernels::to_double(row[0]));
  for (int64_t k = 1; k < c; ++k) m = std::max(m, Acc(kernels::to_double(row[k])));
  Acc total = 0;
  for (int64_t k = 0; k < c; ++k) total += std::exp(Acc(kernels::to_double(row[k])) - m);
  max_out = m;
  return m + std::log(total);
}

template <typename T, typename Acc>
double forward_loss(const Tensor& logits, const int64_t* target, const CrossEntropyOptions& o,
                    int64_t& count) {
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  const T* x = logits.data<T>();
  const Acc eps = Acc(o.label_smoothing);
  Acc total = 0;
  count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (target[i] == o.ignore_index) continue;
    const T* row = x + i * c;
    Acc m;
    const Acc lse = row_lse<T, Acc>(row, c, m);
    Acc loss = -(Acc(1) - eps) * (Acc(kernels::to_double(row[target[i]])) - lse);
    if (eps != Acc(0)) {
      Acc sum_logp = 0;
      for (int64_t k = 0; k < c; ++k) sum_logp += Acc(kernels::to_double(row[k])) - lse;
      loss -= eps / Acc(c) * sum_logp;
    }
    total += loss;
    ++count;
  }
  return count == 0 ? std::numeric_limits<double>::quiet_NaN() : double(total) / double(count);
}

template <typename T, typename Acc>
void backward_logits(const Tensor& logits, const int64_t* target, const CrossEntropyOptions& o,
                     double g, int64_t count, Tensor& dx, bool parallel) {
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  const T* x = logits.data<T>();
  T* d = dx.data<T>();
  const Acc eps = Acc(o.label_smoothing);
  const Acc scale = count == 0 ? Acc(0) : Acc(g / double(count));
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T* drow = d + i * c;
      if (target[i] == o.ignore_index) {
        for (int64_t k = 0; k < c; ++k) drow[k] = kernels::from_double<T>(0.0);
        continue;
      }
      const T* row = x + i * c;
      Acc m;
      const Acc lse = row_lse<T, Acc>(row, c, m);
      for (int64_t k = 0; k < c; ++k) {
        const Acc p = std::exp(Acc(kernels::to_double(row[k])) - lse);
        const Acc q = (k == target[i] ? Acc(1) - eps : Acc(0)) + eps / Acc(c);
        drow[k] = kernels::from_double<T>(double(scale * (p - q)));
      }
    }
  };
  if (parallel)
    kernels::parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)), rows);
  else
    rows(0, n);
}

struct CrossEntropyBackward : autograd::Node {
  autograd::SavedTensor logits;
  Tensor targets;
  CrossEntropyOptions options;
  int64_t count = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = logits.get();
    Tensor dx = detail::empty_like(x);
    const double g = grads[0].item();
    visit_floating(x.dtype(), "cross_entropy", [&]<typename T>() {
      if (reference_mode()) {
        backward_logits<T, double>(x, targets.data<int64_t>(), options, g, count, dx, false);
      } else {
        backward_logits<T, kernels::Compute<T>>(x, targets.data<int64_t>(), options, g, count, dx,
                                                true);
      }
    });
    return {dx, Tensor()};
  }
  void release() override {
    logits.reset();
    targets = Tensor();
  }
};

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets_in,
                     const CrossEntropyOptions& o) {
  const auto cast = amp::autocast_inputs(OpKind::cross_entropy, {&logits_in, &targets_in});
  const Tensor &logits = cast[0], &targets = cast[1];
  detail::check_floating("cross_entropy", logits, "logits");
  MIXP_CHECK(logits.ndim() == 2, "cross_entropy: logits must be [N, C], got ",
             logits.shape().to_string());
  MIXP_CHECK(targets.defined() && targets.dtype() == DType::i64 && targets.ndim() == 1 &&
                 targets.shape()[0] == logits.shape()[0],
             "cross_entropy: targets must be i64 [", logits.shape()[0], "], got ",
             targets.defined()
                 ? std::string(name_of(targets.dtype())) + " " + targets.shape().to_string()
                 : std::string("undefined"));
  MIXP_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0,
             "cross_entropy: label_smoothing must be in [0, 1], got ", o.label_smoothing);
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  MIXP_CHECK(c > 0, "cross_entropy: logits have no classes (shape ", logits.shape().to_string(),
             ")");
  const int64_t* t = targets.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    MIXP_CHECK(t[i] == o.ignore_index || (t[i] >= 0 && t[i] < c), "cross_entropy: target ", t[i],
               " of row ", i, " is not a class in [0, ", c, ") nor ignore_index ", o.ignore_index);
  }
  const DType out_dtype = logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  int64_t count = 0;
  double loss = 0;
  visit_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    loss = reference_mode() ? forward_loss<T, double>(logits, t, o, count)
                            : forward_loss<T, kernels::Compute<T>>(logits, t, o, count);
  });
  Tensor out = full({}, loss, out_dtype);
  if (auto node = autograd::make_node<CrossEntropyBackward>("cross_entropy", {&logits, &targets})) {
    node->logits = autograd::SavedTensor(logits);
    node->targets = targets;
    node->options = o;
    node->count = count;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
