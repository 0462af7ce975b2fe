// Text from a trained character model: the next token's logits, cached or not, and the draw
// (mixp/train/sample.h).
#include "mixp/train/sample.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "mixp/error.h"

namespace mixp::train {
namespace {

// A character as a message shows it: 'a', '\n', or '\xNN' for other unprintable bytes.
std::string shown(char c) {
  if (c == '\n') return "'\\n'";
  if (c == '\t') return "'\\t'";
  const auto byte = static_cast<unsigned char>(c);
  if (byte < 0x20 || byte >= 0x7f) {
    char text[8];
    std::snprintf(text, sizeof text, "'\\x%02x'", byte);
    return text;
  }
  return std::string("'") + c + "'";
}

// Uniform in [0, 1) with 53 random bits: the top 27 bits of one word and 26 of the next.
double uniform53(Philox& rng) {
  const uint64_t high = rng.next_u32() >> 5, low = rng.next_u32() >> 6;
  return double((high << 26) | low) * 0x1p-53;
}

Tensor token_tensor(std::span<const int64_t> tokens) {
  std::vector<double> values(tokens.begin(), tokens.end());
  return from_values(values, Shape{int64_t(values.size())}, DType::i64);
}

}  // namespace

void validate_sample_options(const SampleOptions& o) {
  MIXP_CHECK(o.tokens >= 1, "--tokens must be at least 1, got ", o.tokens);
  MIXP_CHECK(std::isfinite(o.temperature) && o.temperature > 0,
             "--temperature must be a finite number above 0, got ", o.temperature);
  MIXP_CHECK(o.top_k >= 0, "--top-k must be 0 (every token) or more, got ", o.top_k);
  MIXP_CHECK(!o.prompt.empty(), "--prompt must hold at least one character");
}

std::vector<int64_t> encode_text(const std::string& text, const std::string& vocabulary) {
  std::vector<int64_t> tokens;
  tokens.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t at = vocabulary.find(text[i]);
    MIXP_CHECK(at != std::string::npos, "the prompt's character ", shown(text[i]), " at position ",
               i, " is not in the model's vocabulary of ", vocabulary.size(), " characters");
    tokens.push_back(int64_t(at));
  }
  return tokens;
}

int64_t draw_token(std::span<const float> logits, double temperature, int64_t top_k, Philox& rng) {
  MIXP_CHECK(!logits.empty(), "sample: no logits to draw from");
  for (size_t i = 0; i < logits.size(); ++i)
    MIXP_CHECK(std::isfinite(logits[i]), "sample: the model's logit of token ", i, " is ",
               logits[i], "; the weights may hold NaN or infinity");
  std::vector<int64_t> candidates(logits.size());
  std::iota(candidates.begin(), candidates.end(), int64_t{0});
  if (top_k > 0 && size_t(top_k) < candidates.size()) {
    // std::stable_sort keeps the lower index first among equal logits.
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](int64_t a, int64_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    candidates.resize(size_t(top_k));
    std::sort(candidates.begin(), candidates.end());
  }
  double largest = -INFINITY;
  for (const int64_t c : candidates)
    largest = std::max(largest, double(logits[size_t(c)]) / temperature);
  std::vector<double> weights;
  double total = 0.0;
  for (const int64_t c : candidates) {
    weights.push_back(std::exp(double(logits[size_t(c)]) / temperature - largest));
    total += weights.back();
  }
  const double target = uniform53(rng) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    cumulative += weights[i];
    if (cumulative > target) return candidates[i];
  }
  return candidates.back();  // target within rounding of the total
}

NextTokenLogits::NextTokenLogits(nn::Model& model, bool use_cache) : model_(model) {
  MIXP_CHECK(model.task() == nn::Task::language_model, "model ", model.config().name,
             " is not a text model: sampling needs gpt or lstm");
  if (use_cache) decoder_ = model.make_decoder();
}

void NextTokenLogits::append(std::span<const int64_t> tokens) {
  sequence_.insert(sequence_.end(), tokens.begin(), tokens.end());
}

std::vector<float> NextTokenLogits::logits() {
  MIXP_CHECK(!sequence_.empty(), "sample: the sequence is empty; give a prompt");
  const Tensor all = decoder_ ? read_cached() : read_uncached();  // [T, vocab]
  const Tensor last = all.slice(all.size(0) - 1, all.size(0)).to(DType::f32);
  const float* values = last.data<float>();
  return std::vector<float>(values, values + last.numel());
}

Tensor NextTokenLogits::read_cached() {
  const auto length = int64_t(sequence_.size());
  const int64_t read = decoder_->length(), capacity = decoder_->capacity();
  const int64_t end = window_.first + read;  // the decoder holds sequence_[window_.first, end)
  int64_t from = end;
  if (read == 0) {
    window_.first = std::max<int64_t>(0, length - capacity);
    from = window_.first;
  } else if (length - window_.first > capacity) {
    const int64_t keep = std::max<int64_t>(1, model_.config().context / 2);
    decoder_->reset();
    window_.first = std::max<int64_t>(0, length - keep);
    from = window_.first;
  }
  window_.second = length;
  MIXP_CHECK(from < length, "sample: no new token since the last logits");
  return decoder_->read(token_tensor(std::span(sequence_).subspan(size_t(from))));
}

Tensor NextTokenLogits::read_uncached() {
  const auto length = int64_t(sequence_.size());
  window_ = {std::max<int64_t>(0, length - model_.config().context), length};
  const int64_t t = window_.second - window_.first;
  const Tensor x =
      token_tensor(std::span(sequence_).subspan(size_t(window_.first))).reshape({1, t});
  return model_.forward(x).reshape({t, -1});
}

std::string sample(nn::Model& model, const std::string& vocabulary, Inference& inference,
                   const SampleOptions& options,
                   const std::function<void(const std::string&)>& on_text) {
  validate_sample_options(options);
  MIXP_CHECK(model.task() == nn::Task::language_model, "model ", model.config().name,
             " is not a text model: sampling needs gpt or lstm");
  MIXP_CHECK(int64_t(vocabulary.size()) == model.config().vocab, "the vocabulary holds ",
             vocabulary.size(), " characters, the model reads ", model.config().vocab);
  // Evaluation mode for the forward of the uncached path (no dropout), as the caller had it after.
  struct EvaluationMode {
    nn::Model& model;
    const bool was_training = model.is_training();
    explicit EvaluationMode(nn::Model& m) : model(m) { model.train(false); }
    ~EvaluationMode() { model.train(was_training); }
  } evaluation(model);
  NextTokenLogits next(model, options.use_cache);
  next.append(encode_text(options.prompt, vocabulary));
  Philox rng(PhiloxState{.seed = options.seed, .stream = kSampleStream});
  std::string text = options.prompt;
  if (on_text) on_text(text);
  auto generate = [&](int64_t count, const std::function<void(const std::function<void()>&)>& run) {
    for (int64_t i = 0; i < count; ++i) {
      std::vector<float> logits;
      run([&] { logits = next.logits(); });
      const int64_t token = draw_token(logits, options.temperature, options.top_k, rng);
      const int64_t appended[] = {token};
      next.append(appended);
      text += vocabulary[size_t(token)];
      if (on_text) on_text(std::string(1, vocabulary[size_t(token)]));
    }
  };
  if (inference.preset().fp8) {
    // A call of its own per token: the delayed scales follow the amax of the tokens before.
    generate(options.tokens, [&](const std::function<void()>& f) { inference.run(f); });
  } else {
    // One scope for the whole text: autocast casts each f32 weight once, not once per token.
    inference.run([&] { generate(options.tokens, [](const std::function<void()>& f) { f(); }); });
  }
  return text;
}

}  // namespace mixp::train
