// The loaders: shuffled, normalized image batches and random text windows, both resumable.
#include <algorithm>
#include <array>
#include <numeric>

#include "mixp/data/dataset.h"
#include "mixp/error.h"

namespace mixp::data {
namespace {

// Two words make one 64-bit draw: the modulo bias of r % m is below m / 2^64.
uint64_t draw_u64(const PhiloxState& rng, uint64_t index) {
  return (uint64_t(philox_word(rng, 2 * index)) << 32) | philox_word(rng, 2 * index + 1);
}

// Words one epoch's shuffle of n samples takes: two per Fisher-Yates step.
uint64_t shuffle_words(int64_t n) { return n > 1 ? 2 * uint64_t(n - 1) : 0; }

}  // namespace

ImageLoader::ImageLoader(const ImageSet& set, const ImageLoaderOptions& options)
    : set_(set), options_(options) {
  MIXP_CHECK(set_.images.defined() && set_.images.dtype() == DType::u8 && set_.images.ndim() == 4,
             "ImageLoader: images must be u8 [N, C, H, W]");
  const int64_t n = set_.images.size(0);
  MIXP_CHECK(set_.labels.defined() && set_.labels.dtype() == DType::i64 &&
                 set_.labels.ndim() == 1 && set_.labels.size(0) == n,
             "ImageLoader: labels must be i64 [", n, "] to match ", set_.images.shape().to_string(),
             " images");
  MIXP_CHECK(n > 0, "ImageLoader: the image set is empty");
  MIXP_CHECK(options_.batch_size > 0, "ImageLoader: batch_size must be positive, got ",
             options_.batch_size);
  MIXP_CHECK(!options_.drop_last || options_.batch_size <= n, "ImageLoader: drop_last with ",
             "batch_size ", options_.batch_size, " over ", n, " samples leaves no batch");
  MIXP_CHECK(options_.std > 0.0, "ImageLoader: std must be positive, got ", options_.std);
  // Pixel -> value, computed once in f32 exactly as (pixel / 255 - mean) / std would be.
  const float mean = float(options_.mean), stddev = float(options_.std);
  for (int p = 0; p < 256; ++p) table_[size_t(p)] = (float(p) / 255.0f - mean) / stddev;
  state_.rng = PhiloxState{.seed = options_.seed, .stream = kImageShuffleStream};
  reshuffle();
}

int64_t ImageLoader::batches_per_epoch() const {
  const int64_t n = set_.images.size(0), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void ImageLoader::reshuffle() {
  const int64_t n = set_.images.size(0);
  order_.resize(size_t(n));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (!options_.shuffle) return;
  // Fisher-Yates from the last element down; step k uses draw k of this epoch's words.
  for (int64_t i = n - 1, k = 0; i > 0; --i, ++k) {
    const auto j = int64_t(draw_u64(state_.rng, uint64_t(k)) % uint64_t(i + 1));
    std::swap(order_[size_t(i)], order_[size_t(j)]);
  }
}

std::optional<Batch> ImageLoader::next() {
  const int64_t n = set_.images.size(0);
  const int64_t end = options_.drop_last ? batches_per_epoch() * options_.batch_size : n;
  if (state_.position >= end) {
    ++state_.epoch;
    state_.position = 0;
    if (options_.shuffle) state_.rng.offset += shuffle_words(n);
    reshuffle();
    return std::nullopt;
  }
  const int64_t b = std::min(options_.batch_size, end - state_.position);
  const int64_t c = set_.images.size(1), h = set_.images.size(2), w = set_.images.size(3);
  const int64_t pixels = c * h * w;
  Batch batch;
  batch.x = empty({b, c, h, w}, DType::f32, MemoryTag::data);
  batch.y = empty({b}, DType::i64, MemoryTag::data);
  const uint8_t* images = set_.images.data<uint8_t>();
  const int64_t* labels = set_.labels.data<int64_t>();
  float* x = batch.x.data<float>();
  int64_t* y = batch.y.data<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t sample = order_[size_t(state_.position + r)];
    const uint8_t* src = images + sample * pixels;
    float* dst = x + r * pixels;
    for (int64_t p = 0; p < pixels; ++p) dst[p] = table_[src[p]];
    y[r] = labels[sample];
  }
  state_.position += b;
  return batch;
}

void ImageLoader::set_state(const LoaderState& state) {
  const int64_t n = set_.images.size(0);
  MIXP_CHECK(state.epoch >= 0 && state.position >= 0 && state.position <= n,
             "ImageLoader::set_state: epoch ", state.epoch, " and position ", state.position,
             " do not fit a set of ", n, " samples");
  MIXP_CHECK(state.rng.stream == kImageShuffleStream, "ImageLoader::set_state: stream ",
             state.rng.stream, " is not the image loader's (", kImageShuffleStream, ")");
  state_ = state;
  reshuffle();
}

namespace {

// tokens[start, start + count) widened to i64.
void copy_tokens(const Tensor& tokens, int64_t start, int64_t count, int64_t* out) {
  if (tokens.dtype() == DType::u8) {
    const uint8_t* from = tokens.data<uint8_t>() + start;
    std::copy(from, from + count, out);
  } else {
    const int64_t* from = tokens.data<int64_t>() + start;
    std::copy(from, from + count, out);
  }
}

}  // namespace

void for_each_text_window(const Tensor& tokens, int64_t context, int64_t batch_size,
                          const std::function<void(const Batch&)>& visit) {
  MIXP_CHECK(tokens.defined() && tokens.ndim() == 1 &&
                 (tokens.dtype() == DType::u8 || tokens.dtype() == DType::i64),
             "for_each_text_window: tokens must be u8 or i64 [n]");
  MIXP_CHECK(context > 0 && batch_size > 0,
             "for_each_text_window: context and batch size must be positive, got ", context,
             " and ", batch_size);
  const int64_t predicted = tokens.size(0) - 1;
  MIXP_CHECK(predicted >= 1, "the text to evaluate holds ", tokens.size(0),
             " tokens; at least 2 are needed (one to read, one to predict)");
  const int64_t full = predicted / context, rest = predicted % context;
  auto emit = [&](int64_t first_window, int64_t windows, int64_t length) {
    Batch batch{.x = empty({windows, length}, DType::i64, MemoryTag::data),
                .y = empty({windows, length}, DType::i64, MemoryTag::data)};
    for (int64_t w = 0; w < windows; ++w) {
      const int64_t start = (first_window + w) * context;
      copy_tokens(tokens, start, length, batch.x.data<int64_t>() + w * length);
      copy_tokens(tokens, start + 1, length, batch.y.data<int64_t>() + w * length);
    }
    visit(batch);
  };
  for (int64_t w = 0; w < full; w += batch_size) emit(w, std::min(batch_size, full - w), context);
  if (rest > 0) emit(full, 1, rest);
}

TextLoader::TextLoader(const Tensor& tokens, const TextLoaderOptions& options)
    : tokens_(tokens), options_(options) {
  MIXP_CHECK(tokens_.defined() && tokens_.ndim() == 1 &&
                 (tokens_.dtype() == DType::u8 || tokens_.dtype() == DType::i64),
             "TextLoader: tokens must be u8 or i64 [n]");
  MIXP_CHECK(options_.batch_size > 0 && options_.context > 0,
             "TextLoader: batch_size and context must be positive, got ", options_.batch_size,
             " and ", options_.context);
  MIXP_CHECK(tokens_.size(0) > options_.context, "TextLoader: ", tokens_.size(0),
             " tokens are too few for windows of context ", options_.context,
             " (at least context + 1 are needed)");
  state_.rng = PhiloxState{.seed = options_.seed, .stream = kTextWindowStream};
}

Batch TextLoader::next() {
  const int64_t b = options_.batch_size, t = options_.context;
  // Starts in [0, n - t - 1], as torch.randint(len(data) - block_size) in nanoGPT.
  const auto starts = uint64_t(tokens_.size(0) - t);
  Batch batch;
  batch.x = empty({b, t}, DType::i64, MemoryTag::data);
  batch.y = empty({b, t}, DType::i64, MemoryTag::data);
  for (int64_t r = 0; r < b; ++r) {
    const auto start = int64_t(draw_u64(state_.rng, uint64_t(r)) % starts);
    copy_tokens(tokens_, start, t, batch.x.data<int64_t>() + r * t);
    copy_tokens(tokens_, start + 1, t, batch.y.data<int64_t>() + r * t);
  }
  state_.rng.offset += 2 * uint64_t(b);
  state_.position += b;
  return batch;
}

void TextLoader::set_state(const LoaderState& state) {
  MIXP_CHECK(state.rng.stream == kTextWindowStream, "TextLoader::set_state: stream ",
             state.rng.stream, " is not the text loader's (", kTextWindowStream, ")");
  state_ = state;
}

}  // namespace mixp::data
