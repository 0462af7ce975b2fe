// mixp/train/sample.h — text from a trained character model (gpt, lstm): `mixp sample`, and the
// samples `mixp train --sample-every` prints.
//
// Each token is drawn from the model's logits for the position after the text so far:
//   1. the fp32 logits (the model's output under the preset, converted exactly to fp32);
//   2. top-k (top_k > 0): only the k largest logits stay candidates, ties going to the lower
//      token index; top_k 1 is greedy decoding (the first largest logit);
//   3. the softmax of logit / temperature over the candidates, in double;
//   4. one uniform u in [0, 1) of 53 bits from two Philox words of (seed, kSampleStream), and the
//      first candidate, in token order, whose cumulative probability exceeds u.
// The same model, options and thread count give the same text.
//
// The logits of the next token (NextTokenLogits). The sequence is x[0, L).
//   uncached (nanoGPT's): the full forward of the last `context` tokens x[max(0, L - context), L),
//     and the logits of its last position.
//   cached: the model's TokenDecoder (mixp/nn/models.h) reads a window x[s, L) that grows by
//     the new tokens only, so a token costs one position. The first call reads the last
//     min(L, capacity) tokens. A later call that would take the window past the decoder's
//     capacity (the gpt's context) starts it again as the last min(L, keep) tokens, keep =
//     max(1, context / 2), at position 0: the gpt's position embeddings are absolute, so the
//     cached keys and values cannot shift along. The logits are those of the full forward of
//     x[s, L) at its last position (to within rounding). Within the context (L <= context) s is
//     0 and both paths read the same tokens. Past it the cached window holds from keep to
//     context tokens where the uncached one always holds context: when one token is added per
//     call, after the window restarts at sequence length L0 it is x[L0 - keep, L) until it holds
//     context tokens, and restarts again at the next token. The lstm's decoder has no capacity:
//     its (h, c) state has read every token since x[0] (the uncached lstm reads the last
//     context tokens only).
//
// Example:
//
//   mixp::train::TrainedModel t = mixp::train::load_trained_model("runs/gpt-fp32");
//   mixp::train::Inference inference(*t.model, "bf16");
//   inference.cast_parameters();
//   std::string text = mixp::train::sample(*t.model, t.vocabulary, inference,
//                                          {.prompt = "In the beginning", .tokens = 100,
//                                           .temperature = 0.8, .top_k = 10, .seed = 1});
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mixp/nn/models.h"
#include "mixp/random.h"
#include "mixp/train/trained_model.h"

namespace mixp::train {

/// The Philox stream of the draws, under SampleOptions::seed.
inline constexpr uint64_t kSampleStream = 0x73616d706c65;  // "sample"

struct SampleOptions {
  std::string prompt = "\n";  ///< at least one character, each in the vocabulary
  int64_t tokens = 200;       ///< tokens to generate, >= 1
  double temperature = 1.0;   ///< > 0 and finite; the logits are divided by it
  int64_t top_k = 0;          ///< >= 0; 0: every token is a candidate
  uint64_t seed = 0;
  bool use_cache = true;  ///< false: the full forward of the last context tokens per token
};

/// Throws mixp::Error naming the option (as its flag, --tokens ...) and its value.
void validate_sample_options(const SampleOptions& options);

/// The token of each character of `text`: its index in `vocabulary`. Throws mixp::Error naming
/// the first character that is not in it, its position and the vocabulary's size.
std::vector<int64_t> encode_text(const std::string& text, const std::string& vocabulary);

/// One draw from fp32 logits (steps 2 to 4 above); rng advances by two words. Throws
/// mixp::Error for a logit that is not finite, or empty logits.
int64_t draw_token(std::span<const float> logits, double temperature, int64_t top_k, Philox& rng);

/// The logits of the token after a growing sequence, cached or not (see the top of this file).
/// Holds a decoder that refers to `model`, which must outlive it.
class NextTokenLogits {
 public:
  /// Throws mixp::Error when `model` is not a language model.
  NextTokenLogits(nn::Model& model, bool use_cache);
  /// Adds tokens to the end of the sequence; nothing is computed until logits().
  void append(std::span<const int64_t> tokens);
  /// The fp32 logits [vocab] of the token after the sequence (which must not be empty). Runs
  /// the model: call it inside Inference::run for a preset's scopes.
  std::vector<float> logits();
  /// [s, L): the tokens of the sequence that the last logits() read.
  std::pair<int64_t, int64_t> window() const { return window_; }
  const std::vector<int64_t>& sequence() const { return sequence_; }

 private:
  Tensor read_cached();
  Tensor read_uncached();

  nn::Model& model_;
  std::unique_ptr<nn::TokenDecoder> decoder_;  // null: uncached
  std::vector<int64_t> sequence_;
  std::pair<int64_t, int64_t> window_{0, 0};
};

/// The prompt followed by options.tokens generated characters, drawn as described at the top,
/// the model run under `inference` in evaluation mode (its mode is restored after). `on_text`, when given, receives the prompt and then each
/// character as it is drawn. Throws mixp::Error for bad options, a prompt character outside the
/// vocabulary, a model that is not a language model or whose vocabulary size differs from
/// vocabulary's, and logits that are not finite.
std::string sample(nn::Model& model, const std::string& vocabulary, Inference& inference,
                   const SampleOptions& options,
                   const std::function<void(const std::string&)>& on_text = {});

}  // namespace mixp::train
