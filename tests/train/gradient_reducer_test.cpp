// The GradientReducer in one process (the single-process communicator, whose all-reduce keeps
// each value): how it buckets the parameters, that backward's hooks start the buckets as their
// gradients are final, and that the gradients come back as they were.
#include <gtest/gtest.h>

#include <cmath>
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

// A gradient in the wire dtype is written by backward into its bucket and reduced there: it
// keeps its storage from step to step (nothing is copied in or out), and its bits are those of
// a leaf without a reducer, over an accumulating micro-batch and an armed one.
TEST(GradientReducer, AGradientInTheWireDtypeIsItsBucketAndKeepsItsBits) {
  Chain chain, reference;
  auto comm = dist::make_communicator(dist::Backend::single_process);
  GradientReducer reducer(*comm, chain.weights,
                          {.wire = DType::f32, .bucket_bytes = 600 << 10, .first_bucket_bytes = 1});
  const Tensor x = full({8, 256}, 1.0);
  std::vector<const void*> storage;
  for (int step = 0; step < 2; ++step) {
    for (Tensor& w : reference.weights) w.set_grad(Tensor());
    for (Tensor& w : chain.weights) w.set_grad(Tensor());
    reference.loss(x).backward();
    reference.loss(ops::mul_scalar(x, 0.5)).backward();
    chain.loss(x).backward();
    reducer.arm();
    chain.loss(ops::mul_scalar(x, 0.5)).backward();
    reducer.finish();
    for (size_t i = 0; i < chain.weights.size(); ++i) {
      const Tensor g = chain.weights[i].grad();
      ASSERT_TRUE(g.defined()) << "weight " << i;
      EXPECT_EQ(g.to_vector(), reference.weights[i].grad().to_vector()) << "weight " << i;
      if (step == 0) storage.push_back(g.raw_data());
      EXPECT_EQ(g.raw_data(), storage[i]) << "weight " << i << " at step " << step;
    }
  }
  // Weights 2 and 1 share a bucket, 2 first (reverse order): they lie one after the other in it.
  EXPECT_EQ(static_cast<const char*>(storage[2]) + 256 * 256 * 4, storage[1]);
}

// The first accumulation assigns, as without a reducer: a gradient of -0.0 stays -0.0 (0 + -0.0
// would be +0.0); a parameter that backward does not reach keeps no gradient; one in another
// dtype than the wire is copied in and back.
TEST(GradientReducer, ABucketGradientIsAssignedFirstAndAbsentWhenNotReached) {
  std::vector<Tensor> params{full({3}, 1.0).set_requires_grad(true),
                             full({2}, 1.0).set_requires_grad(true),
                             full({4}, 1.0, DType::bf16).set_requires_grad(true)};
  auto comm = dist::make_communicator(dist::Backend::single_process);
  GradientReducer reducer(*comm, params, {.wire = DType::f32});
  reducer.arm();
  const Tensor loss = ops::add(ops::sum(ops::mul(params[0], full({3}, -0.0))),
                               ops::sum(ops::mul_scalar(params[2].to(DType::f32), 2.0)));
  loss.backward();
  reducer.finish();
  for (double g : params[0].grad().to_vector()) EXPECT_TRUE(g == 0.0 && std::signbit(g)) << g;
  EXPECT_FALSE(params[1].grad().defined());
  EXPECT_EQ(params[2].grad().dtype(), DType::bf16);
  EXPECT_EQ(params[2].grad().to_vector(), std::vector<double>(4, 2.0));
}

}  // namespace
}  // namespace mixp::train
