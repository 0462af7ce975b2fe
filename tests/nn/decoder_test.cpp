// Incremental decoding (nn::TokenDecoder): the gpt's key/value cache and the lstm's stepped
// state give forward()'s logits at every position, in f32 and under bf16 autocast; the checks
// of read(); dropout and training mode leave a decoder alone.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "mixp/amp/autocast.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/nn/models.h"
#include "mixp/nn/transformer.h"
#include "mixp/ops.h"
#include "support/tolerance.h"

namespace mixp::nn {
namespace {

// Width 32 in 2 heads: a head size of 16, where the tiled bf16 attention runs on AVX-512 BF16.
ModelConfig tiny(const std::string& name, double dropout = 0.0) {
  return ModelConfig{.name = name,
                     .vocab = 13,
                     .layers = 2,
                     .heads = 2,
                     .width = 32,
                     .context = 16,
                     .dropout = dropout};
}

std::vector<double> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Philox rng(PhiloxState{.seed = seed, .stream = 5});
  std::vector<double> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(double(rng.next_u32() % uint32_t(vocab)));
  return tokens;
}

Tensor as_tokens(const std::vector<double>& values, size_t begin, size_t end) {
  const std::vector<double> part(values.begin() + ptrdiff_t(begin),
                                 values.begin() + ptrdiff_t(end));
  return from_values(part, Shape{int64_t(part.size())}, DType::i64);
}

// The full forward's logits [T, vocab] and the decoder's, read as a prompt of `prompt`
// positions and then one position at a time, under `autocast` (nullopt: none).
std::pair<Tensor, Tensor> full_and_decoded(Model& model, const std::vector<double>& tokens,
                                           size_t prompt, std::optional<DType> autocast) {
  NoGradGuard no_grad;
  std::optional<amp::Autocast> scope;
  if (autocast) scope.emplace(*autocast);
  const int64_t t = int64_t(tokens.size());
  const Tensor full =
      model.forward(as_tokens(tokens, 0, tokens.size()).reshape({1, t})).reshape({t, -1});
  std::unique_ptr<TokenDecoder> decoder = model.make_decoder();
  std::vector<Tensor> parts{decoder->read(as_tokens(tokens, 0, prompt))};
  for (size_t i = prompt; i < tokens.size(); ++i)
    parts.push_back(decoder->read(as_tokens(tokens, i, i + 1)));
  EXPECT_EQ(decoder->length(), t);
  return {full, ops::cat(parts, 0)};
}

// The longest sum in the model: the MLP's second projection, over 4 x width.
test::Tolerance model_tolerance(DType dtype, const ModelConfig& c) {
  return test::tolerance(dtype, 4 * c.width);
}

TEST(Decoder, GptCacheGivesTheForwardsLogitsAtEveryPosition) {
  for (const std::optional<DType> autocast : {std::optional<DType>(), std::optional(DType::bf16)}) {
    SCOPED_TRACE(autocast ? "autocast bf16" : "f32");
    const ModelConfig c = tiny("gpt");
    auto model = make_model(c, 3);
    model->train(false);
    const std::vector<double> tokens = random_tokens(c.context, c.vocab, 1);
    const auto [full, decoded] = full_and_decoded(*model, tokens, 3, autocast);
    EXPECT_EQ(decoded.dtype(), autocast ? DType::bf16 : DType::f32);
    EXPECT_EQ(test::compare(decoded, full, model_tolerance(decoded.dtype(), c)), "");
  }
}

TEST(Decoder, LstmStepsGiveTheForwardsLogitsAtEveryPosition) {
  for (const std::optional<DType> autocast : {std::optional<DType>(), std::optional(DType::bf16)}) {
    SCOPED_TRACE(autocast ? "autocast bf16" : "f32");
    const ModelConfig c = tiny("lstm");
    auto model = make_model(c, 4);
    model->train(false);
    const std::vector<double> tokens = random_tokens(c.context, c.vocab, 2);
    const auto [full, decoded] = full_and_decoded(*model, tokens, 5, autocast);
    EXPECT_EQ(test::compare(decoded, full, model_tolerance(decoded.dtype(), c)), "");
  }
}

// A block of its own, batch 2, width 48 in 3 heads: forward_cached over a prompt and then
// position by position gives forward()'s output at every position.
TEST(Decoder, ABlocksCacheHoldsEveryRowOfTheBatch) {
  Philox rng(PhiloxState{.seed = 8});
  auto dropout_rng = std::make_shared<Philox>();
  TransformerBlock block({.n_embd = 48, .n_head = 3}, rng, dropout_rng);
  block.train(false);
  const int64_t b = 2, t = 7;
  const Tensor x = randn({b, t, 48}, rng);
  NoGradGuard no_grad;
  const Tensor full = block.forward(x);
  KVCache cache(t);
  std::vector<Tensor> parts{block.forward_cached(ops::narrow(x, 1, 0, 3), cache)};
  for (int64_t i = 3; i < t; ++i)
    parts.push_back(block.forward_cached(ops::narrow(x, 1, i, 1), cache));
  EXPECT_EQ(cache.length(), t);
  EXPECT_EQ(test::compare(ops::cat(parts, 1), full, test::tolerance(DType::f32, 4 * 48)), "");
  EXPECT_THROW((void)block.forward_cached(ops::narrow(x, 1, 0, 1), cache), Error)
      << "past the cache's capacity";
}

TEST(Decoder, ResetStartsAgainAtPositionZero) {
  for (const char* name : {"gpt", "lstm"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = tiny(name);
    auto model = make_model(c, 5);
    model->train(false);
    const std::vector<double> tokens = random_tokens(6, c.vocab, 3);
    auto decoder = model->make_decoder();
    const Tensor first = decoder->read(as_tokens(tokens, 0, 6));
    (void)decoder->read(as_tokens(tokens, 0, 2));
    decoder->reset();
    EXPECT_EQ(decoder->length(), 0);
    EXPECT_EQ(test::compare(decoder->read(as_tokens(tokens, 0, 6)), first, {0, 0}), "");
  }
}

TEST(Decoder, AppliesNoDropoutAndLeavesTheGeneratorAlone) {
  for (const char* name : {"gpt", "lstm"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = tiny(name, /*dropout=*/0.5);
    auto model = make_model(c, 6);
    const std::vector<double> tokens = random_tokens(8, c.vocab, 4);
    model->train(false);
    Tensor eval;
    {
      NoGradGuard no_grad;
      eval = model->forward(as_tokens(tokens, 0, 8).reshape({1, 8})).reshape({8, -1});
    }
    model->train(true);
    const PhiloxState before = model->generator().state();
    const Tensor decoded = model->make_decoder()->read(as_tokens(tokens, 0, 8));
    EXPECT_EQ(model->generator().state(), before);
    EXPECT_EQ(test::compare(decoded, eval, model_tolerance(DType::f32, c)), "");
    EXPECT_FALSE(decoded.requires_grad());
  }
}

TEST(Decoder, RefusesTokensOutsideTheVocabularyAndPastTheContext) {
  const ModelConfig c = tiny("gpt");
  auto model = make_model(c, 7);
  auto decoder = model->make_decoder();
  try {
    (void)decoder->read(from_values({1, 13}, Shape{2}, DType::i64));
    ADD_FAILURE() << "a token outside the vocabulary was read";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("token 13 at position 1 is outside the vocabulary of 13"),
              std::string::npos)
        << e.message();
  }
  EXPECT_EQ(decoder->capacity(), c.context);
  (void)decoder->read(
      from_values(random_tokens(c.context, c.vocab, 5), Shape{c.context}, DType::i64));
  try {
    (void)decoder->read(from_values({1}, Shape{1}, DType::i64));
    ADD_FAILURE() << "the gpt read past its context";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("exceed the context of 16"), std::string::npos) << e.message();
  }
  auto lstm = make_model(tiny("lstm"), 7);
  auto stepping = lstm->make_decoder();
  (void)stepping->read(from_values(random_tokens(40, c.vocab, 6), Shape{40}, DType::i64));
  EXPECT_EQ(stepping->length(), 40) << "the lstm has no context limit";
  auto mlp = make_model(ModelConfig{.name = "mlp"}, 0);
  EXPECT_THROW((void)mlp->make_decoder(), Error);
}

}  // namespace
}  // namespace mixp::nn
