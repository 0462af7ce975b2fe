// The loaders: every sample once per epoch, seeded reshuffles, normalization, exact resumption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "mixp/data/dataset.h"
#include "mixp/error.h"

namespace mixp::data {
namespace {

// n images of 2x3 pixels; sample i has label i and every pixel (i % 256).
ImageSet numbered_set(int64_t n) {
  ImageSet set;
  set.classes = n;
  set.images = empty({n, 1, 2, 3}, DType::u8, MemoryTag::data);
  set.labels = empty({n}, DType::i64, MemoryTag::data);
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 6; ++p) set.images.data<uint8_t>()[i * 6 + p] = uint8_t(i % 256);
    set.labels.data<int64_t>()[i] = i;
  }
  return set;
}

std::vector<int64_t> labels_of(const Batch& batch) {
  const int64_t* y = batch.y.data<int64_t>();
  return {y, y + batch.y.numel()};
}

// The labels of one epoch's batches, in order; also checks shapes and that x matches y.
std::vector<std::vector<int64_t>> epoch(ImageLoader& loader) {
  std::vector<std::vector<int64_t>> batches;
  while (auto batch = loader.next()) {
    EXPECT_EQ(batch->x.dtype(), DType::f32);
    EXPECT_EQ(batch->x.ndim(), 4);
    EXPECT_EQ(batch->x.size(0), batch->y.size(0));
    const float* x = batch->x.data<float>();
    const auto labels = labels_of(*batch);
    for (size_t r = 0; r < labels.size(); ++r) {
      EXPECT_EQ(x[r * 6 + 5], float(labels[r] % 256) / 255.0f) << "pixels of another sample";
    }
    batches.push_back(labels);
  }
  return batches;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

TEST(ImageLoader, EveryEpochServesEverySampleOnceInANewOrder) {
  const int64_t n = 103;
  ImageLoader loader(numbered_set(n), {.batch_size = 10, .seed = 5});
  EXPECT_EQ(loader.batches_per_epoch(), 11);
  std::vector<std::vector<int64_t>> orders;
  for (int e = 0; e < 4; ++e) {
    const auto batches = epoch(loader);
    ASSERT_EQ(batches.size(), 11u);
    for (size_t b = 0; b < 10; ++b) EXPECT_EQ(batches[b].size(), 10u);
    EXPECT_EQ(batches[10].size(), 3u);
    auto order = flat(batches);
    auto sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expected(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) expected[size_t(i)] = i;
    EXPECT_EQ(sorted, expected) << "epoch " << e;
    EXPECT_EQ(loader.state().epoch, e + 1);
    orders.push_back(order);
  }
  for (size_t a = 0; a < orders.size(); ++a) {
    EXPECT_FALSE(std::is_sorted(orders[a].begin(), orders[a].end())) << "not shuffled";
    for (size_t b = a + 1; b < orders.size(); ++b) EXPECT_NE(orders[a], orders[b]) << a << b;
  }
}

TEST(ImageLoader, SameSeedSameBatchesOtherSeedOthers) {
  const ImageSet set = numbered_set(50);
  ImageLoader a(set, {.batch_size = 8, .seed = 1});
  ImageLoader b(set, {.batch_size = 8, .seed = 1});
  ImageLoader c(set, {.batch_size = 8, .seed = 2});
  for (int e = 0; e < 3; ++e) {
    const auto ea = epoch(a), eb = epoch(b), ec = epoch(c);
    EXPECT_EQ(ea, eb);
    EXPECT_NE(ea, ec);
  }
}

TEST(ImageLoader, EpochOrderIsAFunctionOfSeedAndEpoch) {
  const int64_t n = 20;
  ImageLoader loader(numbered_set(n), {.batch_size = 6, .seed = 9});
  for (int64_t e = 0; e < 3; ++e) {
    EXPECT_EQ(loader.state().rng, (PhiloxState{9, kImageShuffleStream, uint64_t(e) * 2 * (n - 1)}));
    epoch(loader);
  }
}

TEST(ImageLoader, WithoutShuffleFileOrder) {
  ImageLoader loader(numbered_set(7), {.batch_size = 3, .shuffle = false});
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(epoch(loader), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
  }
}

TEST(ImageLoader, DropLastServesOnlyFullBatches) {
  ImageLoader loader(numbered_set(10), {.batch_size = 4, .seed = 3, .drop_last = true});
  EXPECT_EQ(loader.batches_per_epoch(), 2);
  std::set<int64_t> seen;
  for (int e = 0; e < 5; ++e) {
    const auto batches = epoch(loader);
    ASSERT_EQ(batches.size(), 2u);
    for (const auto& b : batches) {
      EXPECT_EQ(b.size(), 4u);
      seen.insert(b.begin(), b.end());
    }
    const auto order = flat(batches);
    EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 8u) << "a repeat";
  }
  EXPECT_EQ(seen.size(), 10u) << "reshuffling lets every sample in over a few epochs";
}

TEST(ImageLoader, ResumedMidEpochServesTheSameRemainingBatches) {
  const ImageSet set = numbered_set(37);
  const ImageLoaderOptions options{.batch_size = 5, .seed = 11};
  ImageLoader original(set, options);
  epoch(original);
  original.next();
  original.next();
  const LoaderState saved = original.state();
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.position, 10);

  ImageLoader resumed(set, options);
  resumed.set_state(saved);
  EXPECT_EQ(resumed.state(), saved);
  for (int e = 0; e < 3; ++e) EXPECT_EQ(epoch(resumed), epoch(original)) << e;

  // At the very end of an epoch too.
  ImageLoader end(set, options);
  while (end.state().position < 37) end.next();
  ImageLoader end_resumed(set, options);
  end_resumed.set_state(end.state());
  EXPECT_EQ(end_resumed.next().has_value(), false);
  EXPECT_EQ(end.next().has_value(), false);
  EXPECT_EQ(epoch(end_resumed), epoch(end));
}

TEST(ImageLoader, NormalizesInF32) {
  ImageSet set = numbered_set(3);
  const uint8_t pixels[6] = {0, 255, 51, 128, 1, 254};
  std::copy(pixels, pixels + 6, set.images.data<uint8_t>());
  ImageLoader loader(set, {.batch_size = 1, .shuffle = false, .mean = 0.5, .std = 0.25});
  const auto batch = loader.next();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(batch->x.shape(), (Shape{1, 1, 2, 3}));
  const float* x = batch->x.data<float>();
  EXPECT_EQ(x[0], -2.0f);
  EXPECT_EQ(x[1], 2.0f);
  for (int p = 0; p < 6; ++p) {
    EXPECT_EQ(x[p], (float(pixels[p]) / 255.0f - 0.5f) / 0.25f) << p;
    EXPECT_NEAR(x[p], (pixels[p] / 255.0 - 0.5) / 0.25, 1e-6) << p;
  }
  // Fashion-MNIST's usual constants.
  ImageLoader fm(set, {.batch_size = 1, .shuffle = false, .mean = 0.2860, .std = 0.3530});
  EXPECT_NEAR(fm.next()->x.data<float>()[1], (1.0 - 0.2860) / 0.3530, 1e-6);
}

TEST(ImageLoader, BadOptionsAndSetsAreErrors) {
  const ImageSet set = numbered_set(4);
  EXPECT_THROW(ImageLoader(set, {.batch_size = 0}), Error);
  EXPECT_THROW(ImageLoader(set, {.batch_size = 5, .drop_last = true}), Error);
  EXPECT_THROW(ImageLoader(set, {.std = 0.0}), Error);
  EXPECT_THROW(ImageLoader(ImageSet{}, {}), Error);
  ImageLoader loader(set, {.batch_size = 2});
  EXPECT_THROW(loader.set_state({.rng = {0, kImageShuffleStream, 0}, .position = 5}), Error);
  EXPECT_THROW(loader.set_state({.rng = {0, kTextWindowStream, 0}}), Error);
}

// ---- text ----

TEST(TextLoader, WindowsAreConsecutiveAndYIsXShifted) {
  const int64_t n = 1000, context = 32;
  const Tensor tokens = arange(n, DType::i64);
  TextLoader loader(tokens, {.batch_size = 8, .context = context, .seed = 4});
  for (int step = 0; step < 20; ++step) {
    const Batch b = loader.next();
    ASSERT_EQ(b.x.dtype(), DType::i64);
    ASSERT_EQ(b.x.shape(), (Shape{8, context}));
    ASSERT_EQ(b.y.shape(), (Shape{8, context}));
    const int64_t* x = b.x.data<int64_t>();
    const int64_t* y = b.y.data<int64_t>();
    for (int64_t r = 0; r < 8; ++r) {
      const int64_t start = x[r * context];
      ASSERT_GE(start, 0);
      ASSERT_LE(start, n - context - 1);
      for (int64_t t = 0; t < context; ++t) {
        ASSERT_EQ(x[r * context + t], start + t);
        ASSERT_EQ(y[r * context + t], start + t + 1);
      }
    }
  }
  EXPECT_EQ(loader.state().rng, (PhiloxState{4, kTextWindowStream, 20 * 8 * 2}));
  EXPECT_EQ(loader.state().position, 160);
}

TEST(TextLoader, StartsCoverTheWholeRangeAndNoMore) {
  const int64_t context = 5;
  const Tensor tokens = arange(context + 3, DType::i64);  // starts 0, 1, 2
  TextLoader loader(tokens, {.batch_size = 16, .context = context});
  std::set<int64_t> starts;
  for (int step = 0; step < 10; ++step) {
    const Batch b = loader.next();
    for (int64_t r = 0; r < 16; ++r) starts.insert(b.x.data<int64_t>()[r * context]);
  }
  EXPECT_EQ(starts, (std::set<int64_t>{0, 1, 2}));
  // The shortest text has one window.
  TextLoader one(arange(context + 1, DType::i64), {.batch_size = 2, .context = context});
  EXPECT_EQ(one.next().y.data<int64_t>()[context - 1], context);
  EXPECT_THROW(TextLoader(arange(context, DType::i64), {.context = context}), Error);
}

// Tokens 0, 1, ..., n - 1 (n <= 256 for u8).
Tensor tokens_0_to(int64_t n, DType dtype) {
  Tensor t = empty({n}, dtype, MemoryTag::data);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::u8)
      t.data<uint8_t>()[i] = uint8_t(i);
    else
      t.data<int64_t>()[i] = i;
  }
  return t;
}

TEST(TextWindows, EveryTokenAfterTheFirstIsPredictedOnceInOrder) {
  for (const int64_t n : {int64_t(2), int64_t(9), int64_t(10), int64_t(11), int64_t(37)}) {
    for (const DType dtype : {DType::u8, DType::i64}) {
      const Tensor tokens = tokens_0_to(n, dtype);
      std::vector<int64_t> predicted;
      int64_t batches = 0;
      for_each_text_window(tokens, /*context=*/3, /*batch_size=*/2, [&](const Batch& b) {
        ++batches;
        ASSERT_EQ(b.x.dtype(), DType::i64);
        ASSERT_EQ(b.x.shape(), b.y.shape());
        ASSERT_LE(b.x.size(0), 2);
        const int64_t t = b.x.size(1);
        for (int64_t r = 0; r < b.x.size(0); ++r) {
          for (int64_t i = 0; i < t; ++i) {
            // Each row is a window of the text: x its tokens, y the next ones.
            ASSERT_EQ(b.x.data<int64_t>()[r * t + i], b.x.data<int64_t>()[r * t] + i);
            ASSERT_EQ(b.y.data<int64_t>()[r * t + i], b.x.data<int64_t>()[r * t + i] + 1);
            predicted.push_back(b.y.data<int64_t>()[r * t + i]);
          }
        }
      });
      std::vector<int64_t> all(size_t(n - 1));
      std::iota(all.begin(), all.end(), 1);
      EXPECT_EQ(predicted, all) << n << " tokens";
      const int64_t windows = (n - 1 + 2) / 3, full = (n - 1) / 3;
      EXPECT_EQ(batches, (full + 1) / 2 + (windows > full ? 1 : 0)) << n << " tokens";
    }
  }
  EXPECT_THROW(for_each_text_window(arange(1, DType::i64), 3, 2, [](const Batch&) {}), Error);
}

TEST(TextLoader, ReadsOneByteTokens) {
  TextLoader narrow(tokens_0_to(200, DType::u8), {.batch_size = 3, .context = 8, .seed = 1});
  TextLoader wide(tokens_0_to(200, DType::i64), {.batch_size = 3, .context = 8, .seed = 1});
  for (int step = 0; step < 5; ++step) {
    const Batch a = narrow.next(), b = wide.next();
    EXPECT_EQ(a.x.to_vector(), b.x.to_vector());
    EXPECT_EQ(a.y.to_vector(), b.y.to_vector());
  }
}

TEST(TextLoader, ReproducibleAndResumable) {
  const Tensor tokens = arange(500, DType::i64);
  const TextLoaderOptions options{.batch_size = 4, .context = 16, .seed = 7};
  TextLoader a(tokens, options), b(tokens, options);
  TextLoader c(tokens, {.batch_size = 4, .context = 16, .seed = 8});
  for (int i = 0; i < 3; ++i) {
    const Batch ba = a.next(), bb = b.next(), bc = c.next();
    EXPECT_EQ(ba.x.to_vector(), bb.x.to_vector());
    EXPECT_NE(ba.x.to_vector(), bc.x.to_vector());
  }
  TextLoader resumed(tokens, options);
  resumed.set_state(a.state());
  for (int i = 0; i < 5; ++i) {
    const Batch expected = a.next(), got = resumed.next();
    EXPECT_EQ(got.x.to_vector(), expected.x.to_vector());
    EXPECT_EQ(got.y.to_vector(), expected.y.to_vector());
  }
  EXPECT_EQ(resumed.state(), a.state());
}

}  // namespace
TEST(TinyGradientRegression, ShapesRangeAndDeterminism) {
  const data::Regression a = data::make_tiny_gradient_regression(3, 100, 20);
  EXPECT_EQ(a.train_x.shape(), (Shape{100, 16}));
  EXPECT_EQ(a.train_y.shape(), (Shape{100, 8}));
  EXPECT_EQ(a.test_x.shape(), (Shape{20, 16}));
  EXPECT_EQ(a.test_y.shape(), (Shape{20, 8}));
  double largest = 0;
  for (double t : a.train_y.to_vector()) largest = std::max(largest, std::fabs(t));
  EXPECT_LE(largest, 1e-4) << "1e-4 tanh(...)";
  EXPECT_GT(largest, 1e-5);
  // The training set does not depend on the test set's size; another seed differs.
  const data::Regression b = data::make_tiny_gradient_regression(3, 100, 50);
  EXPECT_EQ(a.train_x.to_vector(), b.train_x.to_vector());
  EXPECT_EQ(a.train_y.to_vector(), b.train_y.to_vector());
  EXPECT_NE(data::make_tiny_gradient_regression(4, 100, 20).train_x.to_vector(),
            a.train_x.to_vector());
  EXPECT_THROW(data::make_tiny_gradient_regression(3, 0, 20), Error);
}

}  // namespace mixp::data
