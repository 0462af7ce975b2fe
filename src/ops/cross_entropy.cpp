// cross_entropy: mean over the rows whose target is not ignore_index of
//   -(1 - eps) log p[target] - (eps / C) sum_c log p[c],   p = softmax(logits row),
// computed in fp32 (f64 for f64 logits) from the logits of any floating dtype.
// Shape contract: logits [N, C], targets [N] i64 with values in [0, C) or ignore_index; the
// result is a scalar of dtype f32 (f64 for f64 logits). With every target ignored the mean is
// NaN, as in PyTorch.
// Backward: dlogits = g / count * (p - q), q = (1 - eps) onehot(target) + eps / C; ignored
// rows get 0. The logits are saved (not p), so a bf16 model keeps 2 bytes per logit.
#include "kernels/cross_entropy.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct CrossEntropyBackward : autograd::Node {
  autograd::SavedTensor logits;
  Tensor targets;
  CrossEntropyOptions options;
  int64_t count = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = logits.get();
    Tensor dx = detail::empty_like(x);
    const double scale = count == 0 ? 0.0 : grads[0].item() / double(count);
    kernels::cross_entropy_backward(x, targets, options.ignore_index, options.label_smoothing,
                                    scale, dx);
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
  const int64_t c = logits.shape()[1];
  MIXP_CHECK(c > 0, "cross_entropy: logits have no classes (shape ", logits.shape().to_string(),
             ")");
  kernels::cross_entropy_check_targets(targets, c, o.ignore_index);
  const DType out_dtype = logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const kernels::CrossEntropyMean loss =
      kernels::cross_entropy(logits, targets, o.ignore_index, o.label_smoothing);
  Tensor out = full({}, loss.loss, out_dtype, MemoryTag::activation, logits.device());
  if (auto node = autograd::make_node<CrossEntropyBackward>("cross_entropy", {&logits, &targets})) {
    node->logits = autograd::SavedTensor(logits);
    node->targets = targets;
    node->options = o;
    node->count = loss.count;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
