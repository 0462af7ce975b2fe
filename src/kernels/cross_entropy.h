// Cross entropy of logits [N, C] against class indices, with label smoothing, and its gradient.
// Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

struct CrossEntropyMean {
  double loss;    ///< the mean over the rows that count; NaN when none does
  int64_t count;  ///< the rows whose target is not ignore_index
};

/// For each row i of logits whose target t = targets[i] is not ignore_index, with
/// eps = label_smoothing and lse = max + log(sum_c exp(x[c] - max)):
///   loss_i = -(1 - eps) (x[t] - lse) - eps / C sum_c (x[c] - lse),
/// computed in fp32 (f64 for f64 logits; double in the fallback), the losses summed in that
/// type in row order and divided by their count in double. logits are [N, C] of a floating
/// dtype with C >= 1, targets i64 [N], each a class or ignore_index (checked by the op).
using CrossEntropyFn = CrossEntropyMean(const Tensor& logits, const Tensor& targets,
                                        int64_t ignore_index, double label_smoothing);
extern Kernel<CrossEntropyFn> cross_entropy;

/// dlogits[i, c] = scale (p[c] - q[c]) with p = softmax of row i (through its lse, as above)
/// and q = (1 - eps) onehot(target) + eps / C, in fp32 (f64 for f64; double in the fallback)
/// and rounded once to the logits' dtype, which dlogits has too; rows whose target is
/// ignore_index get 0.
using CrossEntropyBackwardFn = void(const Tensor& logits, const Tensor& targets,
                                    int64_t ignore_index, double label_smoothing, double scale,
                                    Tensor& dlogits);
extern Kernel<CrossEntropyBackwardFn> cross_entropy_backward;

/// Throws mixp::Error naming the first row of targets (i64 [N]) whose value is neither a class
/// in [0, classes) nor ignore_index; returns when every row is one.
using CrossEntropyCheckTargetsFn = void(const Tensor& targets, int64_t classes,
                                        int64_t ignore_index);
extern Kernel<CrossEntropyCheckTargetsFn> cross_entropy_check_targets;

}  // namespace mixp::kernels
