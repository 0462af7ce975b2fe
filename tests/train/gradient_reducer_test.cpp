// The GradientReducer in one process (the single-process communicator, whose all-reduce keeps
// each value): how it buckets the parameters, that backward's hooks start the buckets as their
// gradients are final, and that the gradients come back as they were.
#include <gtest/gtest.h>

#include <vector>

#include "mixp/autograd.h"
#include "mixp/dist/communicator.h"
#include "mixp/ops.h"
#include "train/data_parallel.h"

namespace mixp::train {
namespace {

// A chain of four layers: backward reaches the last one's weight first.
struct Chain {
  std::vector<Tensor> weights;
  Chain() {
    for (int i = 0; i < 4; ++i)
      weights.push_back(full({256, 256}, 0.01 * (i + 1)).set_requires_grad(true));
  }
  Tensor loss(const Tensor& x) const {
    Tensor h = x;
    for (const Tensor& w : weights) h = ops::matmul(h, w);
    return ops::sum(h);
  }
};

TEST(GradientReducer, BucketsTakeTheParametersInReverseUpToTheirCaps) {
  Chain chain;
  auto comm = dist::make_communicator(dist::Backend::single_process);
  // 256 KiB per weight: the first bucket (up to 300 KiB) takes the last weight alone, the others
  // (up to 600 KiB) two each.
  const GradientReducer reducer(*comm, chain.weights,
                                {.bucket_bytes = 600 << 10, .first_bucket_bytes = 300 << 10});
  const std::vector<std::vector<size_t>> want{{3}, {2, 1}, {0}};
  EXPECT_EQ(reducer.bucket_parameters(), want);
  EXPECT_EQ(reducer.payload_bytes(), 4 * 256 * 256 * 4);
  EXPECT_EQ(reducer.wire_dtypes(), "f32");
}

TEST(GradientReducer, AnUnarmedBackwardStartsNothing) {
  Chain chain;
  auto comm = dist::make_communicator(dist::Backend::single_process);
  GradientReducer reducer(*comm, chain.weights, {.bucket_bytes = 1, .first_bucket_bytes = 1});
  chain.loss(full({8, 256}, 1.0)).backward();  // an earlier micro-batch of the step
  reducer.finish();
  EXPECT_EQ(reducer.started_during_backward(), 0u);
}

// Two micro-batches, the second armed: its backward starts every bucket from the hooks (the
// first weight's gradient is the last backward writes, and its hook starts the last bucket),
// and the accumulated gradients come back through one bf16 rounding on the wire.
TEST(GradientReducer, TheArmedBackwardStartsEveryBucketAndTheGradientsComeBack) {
  Chain chain, reference;
  auto comm = dist::make_communicator(dist::Backend::single_process);
  GradientReducer reducer(*comm, chain.weights,
                          {.wire = DType::bf16, .bucket_bytes = 1, .first_bucket_bytes = 1});
  const Tensor x = full({8, 256}, 1.0);
  reference.loss(x).backward();
  chain.loss(x).backward();
  reducer.arm();
  chain.loss(x).backward();
  reducer.finish();
  EXPECT_EQ(reducer.started_during_backward(), 4u);
  for (size_t i = 0; i < chain.weights.size(); ++i) {
    const Tensor g = reference.weights[i].grad();
    const std::vector<double> want = ops::add(g, g).to(DType::bf16).to_vector();
    EXPECT_EQ(chain.weights[i].grad().to_vector(), want) << "weight " << i;
  }
}

}  // namespace
}  // namespace mixp::train
