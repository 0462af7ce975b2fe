#include "mixp/nn/models.h"

#include <cmath>
#include <limits>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/batch_norm.h"
#include "mixp/nn/conv2d.h"
#include "mixp/nn/dropout.h"
#include "mixp/nn/embedding.h"
#include "mixp/nn/layer_norm.h"
#include "mixp/nn/linear.h"
#include "mixp/nn/lstm.h"
#include "mixp/nn/pooling.h"
#include "mixp/nn/sequential.h"
#include "mixp/nn/transformer.h"
#include "mixp/ops.h"

namespace mixp::nn {
namespace {

// Philox streams of a model's seed.
constexpr uint64_t kInitStream = 0;
constexpr uint64_t kDropoutStream = 1;

std::string shape_of(const Tensor& x) {
  return x.defined() ? x.shape().to_string() + " " + name_of(x.dtype()) : "an undefined tensor";
}

/// A named group of modules without a forward: nanoGPT's ModuleDict and ModuleList.
class Container : public Module {
 public:
  explicit Container(std::string type) : type_(std::move(type)) {}
  template <typename M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> module) {
    return register_module(name, std::move(module));
  }

 protected:
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

class ModelBase : public Model {
 public:
  ModelBase(const ModelConfig& config, uint64_t seed) : config_(config) {
    generator_ = std::make_shared<Philox>(PhiloxState{.seed = seed, .stream = kDropoutStream});
  }
  const ModelConfig& config() const override { return config_; }

 protected:
  ModelConfig config_;
};

class ClassifierBase : public ModelBase {
 public:
  using ModelBase::ModelBase;
  Task task() const override { return Task::classification; }

 protected:
  void check_images(const char* model, const Tensor& x) const {
    const int64_t s = config_.image_size;
    MIXP_CHECK(x.defined() && is_floating(x.dtype()) && x.ndim() == 4 && x.size(0) >= 1 &&
                   x.size(1) == 1 && x.size(2) == s && x.size(3) == s,
               model, ": expected floating images [N, 1, ", s, ", ", s, "], got ", shape_of(x));
  }
};

class LanguageModelBase : public ModelBase {
 public:
  using ModelBase::ModelBase;
  Task task() const override { return Task::language_model; }

 protected:
  void check_tokens(const char* model, const Tensor& x) const {
    MIXP_CHECK(x.defined() && x.dtype() == DType::i64 && x.ndim() == 2 && x.size(0) >= 1 &&
                   x.size(1) >= 1 && x.size(1) <= config_.context,
               model, ": expected i64 tokens [B, T] with 1 <= T <= context = ", config_.context,
               ", got ", shape_of(x));
  }
};

// ---- mlp: fc1, fc2, fc3 ----

class MlpModel : public ClassifierBase {
 public:
  MlpModel(const ModelConfig& config, uint64_t seed) : ClassifierBase(config, seed) {
    Philox rng(PhiloxState{.seed = seed, .stream = kInitStream});
    const int64_t in = config.image_size * config.image_size;
    fc1_ = register_module("fc1", std::make_shared<Linear>(LinearOptions(in, 1024), rng));
    fc2_ = register_module("fc2", std::make_shared<Linear>(LinearOptions(1024, 1024), rng));
    fc3_ =
        register_module("fc3", std::make_shared<Linear>(LinearOptions(1024, config.classes), rng));
  }

  Tensor forward(const Tensor& x) override {
    check_images("mlp", x);
    const Tensor h = x.reshape({x.size(0), -1});
    return fc3_->forward(ops::relu(fc2_->forward(ops::relu(fc1_->forward(h)))));
  }

 protected:
  std::string type_name() const override { return "MLP"; }

 private:
  std::shared_ptr<Linear> fc1_, fc2_, fc3_;
};

// ---- cnn: features (Sequential of 8), classifier (Sequential of 3) ----

class CnnModel : public ClassifierBase {
 public:
  CnnModel(const ModelConfig& config, uint64_t seed) : ClassifierBase(config, seed) {
    MIXP_CHECK(config.image_size % 4 == 0, "cnn: image_size must be a multiple of 4, got ",
               config.image_size);
    Philox rng(PhiloxState{.seed = seed, .stream = kInitStream});
    features_ = register_module("features", std::make_shared<Sequential>());
    for (const auto& [in, out] : {std::pair<int64_t, int64_t>{1, 32}, {32, 64}}) {
      features_->push_back(
          std::make_shared<Conv2d>(Conv2dOptions(in, out, 3).with_padding(1), rng));
      features_->push_back(std::make_shared<BatchNorm2d>(BatchNorm2dOptions(out)));
      features_->push_back(std::make_shared<ReLU>());
      features_->push_back(std::make_shared<MaxPool2d>(MaxPool2dOptions(2)));
    }
    const int64_t side = config.image_size / 4;
    classifier_ = register_module("classifier", std::make_shared<Sequential>());
    classifier_->push_back(std::make_shared<Linear>(LinearOptions(64 * side * side, 128), rng));
    classifier_->push_back(std::make_shared<ReLU>());
    classifier_->push_back(std::make_shared<Linear>(LinearOptions(128, config.classes), rng));
  }

  Tensor forward(const Tensor& x) override {
    check_images("cnn", x);
    const Tensor f = features_->forward(x);
    return classifier_->forward(f.reshape({f.size(0), -1}));
  }

 protected:
  std::string type_name() const override { return "CNN"; }

 private:
  std::shared_ptr<Sequential> features_, classifier_;
};

// ---- lstm: embedding, lstm, head ----

class LstmModel : public LanguageModelBase {
 public:
  LstmModel(const ModelConfig& config, uint64_t seed) : LanguageModelBase(config, seed) {
    Philox rng(PhiloxState{.seed = seed, .stream = kInitStream});
    embedding_ = register_module(
        "embedding",
        std::make_shared<Embedding>(EmbeddingOptions(config.vocab, config.width), rng));
    LSTMOptions o(config.width, config.width);
    o.num_layers = config.layers;
    o.batch_first = true;
    lstm_ = register_module("lstm", std::make_shared<LSTM>(o, rng));
    head_ = register_module(
        "head", std::make_shared<Linear>(LinearOptions(config.width, config.vocab), rng));
    drop_ = register_module("drop",
                            std::make_shared<Dropout>(DropoutOptions(config.dropout), generator_));
  }

  Tensor forward(const Tensor& x) override {
    check_tokens("lstm", x);
    const Tensor e = drop_->forward(embedding_->forward(x));
    return head_->forward(drop_->forward(lstm_->forward(e)));
  }
  std::unique_ptr<TokenDecoder> make_decoder() override;

  // One position without dropout: token i64 [1] -> logits [1, vocab]; `state` advances.
  Tensor step(const Tensor& token, LSTM::State& state) {
    return head_->forward(lstm_->step(embedding_->forward(token), state));
  }

 protected:
  std::string type_name() const override { return "LSTMLanguageModel"; }

 private:
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<LSTM> lstm_;
  std::shared_ptr<Linear> head_;
  std::shared_ptr<Dropout> drop_;
};

// ---- gpt: nanoGPT ----

class GptModel : public LanguageModelBase {
 public:
  GptModel(const ModelConfig& config, uint64_t seed) : LanguageModelBase(config, seed) {
    MIXP_CHECK(config.width % config.heads == 0, "gpt: width (", config.width,
               ") must be a multiple of heads (", config.heads, ")");
    Philox rng(PhiloxState{.seed = seed, .stream = kInitStream});
    TransformerBlockOptions o;
    o.n_embd = config.width;
    o.n_head = config.heads;
    o.dropout = config.dropout;
    auto transformer = register_module("transformer", std::make_shared<Container>("ModuleDict"));
    wte_ = transformer->add(
        "wte", std::make_shared<Embedding>(EmbeddingOptions(config.vocab, config.width), rng));
    wpe_ = transformer->add(
        "wpe", std::make_shared<Embedding>(EmbeddingOptions(config.context, config.width), rng));
    drop_ = transformer->add("drop",
                             std::make_shared<Dropout>(DropoutOptions(config.dropout), generator_));
    auto h = transformer->add("h", std::make_shared<Container>("ModuleList"));
    for (int i = 0; i < config.layers; ++i) {
      blocks_.push_back(
          h->add(std::to_string(i), std::make_shared<TransformerBlock>(o, rng, generator_)));
    }
    ln_f_ = transformer->add("ln_f", std::make_shared<LayerNorm>(LayerNormOptions(config.width)));
    init_gpt2(seed);
  }
  std::unique_ptr<TokenDecoder> make_decoder() override;

  // forward() of tokens i64 [1, T] at positions caches' length ... + T - 1, through the blocks'
  // caches (one per block), without dropout: logits [1, T, vocab].
  Tensor forward_cached(const Tensor& x, std::vector<KVCache>& caches) {
    const int64_t past = caches.front().length(), t = x.size(1);
    std::vector<double> positions(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) positions[size_t(i)] = double(past + i);
    const Tensor at = from_values(positions, Shape{t}, DType::i64);
    Tensor h = ops::add(wte_->forward(x), wpe_->forward(at));
    for (size_t i = 0; i < blocks_.size(); ++i) h = blocks_[i]->forward_cached(h, caches[i]);
    return ops::linear(ln_f_->forward_for_linear(h), wte_->weight());
  }

  Tensor forward(const Tensor& x) override {
    check_tokens("gpt", x);
    const int64_t t = x.size(1);
    Tensor h = drop_->forward(ops::add(wte_->forward(x), wpe_->forward(arange(t, DType::i64))));
    // Each residual add is fused with the layer norm after it (ln_2, the next block's ln_1,
    // ln_f): the same values as the blocks' forward() then ln_f, in fewer passes.
    ops::SumAndNorm stream{.sum = h,
                           .normalized = blocks_.empty()
                                             ? ln_f_->forward_for_linear(h)
                                             : blocks_.front()->ln_1().forward_for_linear(h)};
    for (size_t i = 0; i < blocks_.size(); ++i) {
      LayerNorm& next = i + 1 < blocks_.size() ? blocks_[i + 1]->ln_1() : *ln_f_;
      stream = blocks_[i]->forward_fused(stream.sum, stream.normalized, next);
    }
    // lm_head is tied: the token embedding, without a bias.
    return ops::linear(stream.normalized, wte_->weight());
  }

 protected:
  std::string type_name() const override { return "GPT"; }

 private:
  // nanoGPT's _init_weights: Linear weights and embeddings N(0, 0.02), biases 0, LayerNorm
  // weight 1 and bias 0, then every c_proj.weight N(0, 0.02 / sqrt(2 n_layer)). Drawn in
  // named_parameters() order from stream 0, after the layers' default init.
  void init_gpt2(uint64_t seed) {
    Philox rng(PhiloxState{.seed = seed, .stream = kInitStream, .offset = uint64_t(1) << 60});
    const double proj_std = 0.02 / std::sqrt(2.0 * config_.layers);
    const auto names = named_parameters();
    const auto norms = norm_parameter_flags();
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i].first;
      Tensor& p = *names[i].second;
      const bool is_bias = name.ends_with(".bias");
      if (norms[i]) {
        p.fill_(is_bias ? 0.0 : 1.0);
      } else if (is_bias) {
        p.fill_(0.0);
      } else if (name.ends_with("c_proj.weight")) {
        p.copy_(randn(p.shape(), rng, proj_std));
      } else {
        p.copy_(randn(p.shape(), rng, 0.02));
      }
    }
  }

  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
};

// ---- the decoders ----

// The checks of TokenDecoder::read: tokens i64 [T] within the vocabulary, T >= 1.
void check_read(const char* model, const Tensor& tokens, int64_t vocab) {
  MIXP_CHECK(
      tokens.defined() && tokens.dtype() == DType::i64 && tokens.ndim() == 1 && tokens.numel() >= 1,
      model, " decoder: expected i64 tokens [T] with T >= 1, got ", shape_of(tokens));
  const std::vector<double> values = tokens.to_vector();
  for (size_t i = 0; i < values.size(); ++i)
    MIXP_CHECK(values[i] >= 0 && values[i] < double(vocab), model, " decoder: token ", values[i],
               " at position ", i, " is outside the vocabulary of ", vocab);
}

class GptDecoder : public TokenDecoder {
 public:
  explicit GptDecoder(GptModel& model) : model_(model) {
    caches_.reserve(size_t(model.config().layers));
    for (int i = 0; i < model.config().layers; ++i) caches_.emplace_back(model.config().context);
  }
  Tensor read(const Tensor& tokens) override {
    check_read("gpt", tokens, model_.config().vocab);
    const int64_t t = tokens.numel();
    MIXP_CHECK(length() + t <= capacity(), "gpt decoder: ", t, " positions after ", length(),
               " exceed the context of ", capacity());
    NoGradGuard no_grad;
    const Tensor logits = model_.forward_cached(tokens.reshape({1, t}), caches_);
    return logits.reshape({t, logits.size(2)});
  }
  void reset() override {
    for (KVCache& cache : caches_) cache.clear();
  }
  int64_t length() const override { return caches_.front().length(); }
  int64_t capacity() const override { return model_.config().context; }

 private:
  GptModel& model_;
  std::vector<KVCache> caches_;
};

std::unique_ptr<TokenDecoder> GptModel::make_decoder() {
  return std::make_unique<GptDecoder>(*this);
}

class LstmDecoder : public TokenDecoder {
 public:
  explicit LstmDecoder(LstmModel& model) : model_(model) {}
  Tensor read(const Tensor& tokens) override {
    check_read("lstm", tokens, model_.config().vocab);
    NoGradGuard no_grad;
    std::vector<Tensor> logits;
    for (int64_t i = 0; i < tokens.numel(); ++i)
      logits.push_back(model_.step(tokens.slice(i, i + 1), state_));
    length_ += tokens.numel();
    return logits.size() == 1 ? logits.front() : ops::cat(logits, 0);
  }
  void reset() override {
    state_ = {};
    length_ = 0;
  }
  int64_t length() const override { return length_; }
  int64_t capacity() const override { return std::numeric_limits<int64_t>::max(); }

 private:
  LstmModel& model_;
  LSTM::State state_;
  int64_t length_ = 0;
};

std::unique_ptr<TokenDecoder> LstmModel::make_decoder() {
  return std::make_unique<LstmDecoder>(*this);
}

// ---- deep-mlp: fc1 ... fc{layers + 1}, tanh between ----

class DeepMlpModel : public ModelBase {
 public:
  DeepMlpModel(const ModelConfig& config, uint64_t seed) : ModelBase(config, seed) {
    Philox rng(PhiloxState{.seed = seed, .stream = kInitStream});
    int64_t in = kDeepMlpInputs;
    for (int i = 0; i <= config.layers; ++i) {
      const bool output = i == config.layers;
      const int64_t out = output ? kDeepMlpOutputs : config.width;
      // The layer's own initial values are overwritten just below: they come from a scratch
      // generator, so that `rng` does not move.
      Philox overwritten;
      auto fc = register_module(
          "fc" + std::to_string(i + 1),
          std::make_shared<Linear>(LinearOptions(in, out, /*bias=*/false), overwritten));
      // Hidden layers keep the activations' scale (std 1 / sqrt(fan_in)); the output layer
      // starts tiny, which is what puts the gradients below fp16's range.
      const double stddev = output ? 1e-5 : 1.0 / std::sqrt(double(in));
      fc->weight().copy_(randn(fc->weight().shape(), rng, stddev));
      layers_.push_back(fc);
      in = out;
    }
  }

  Tensor forward(const Tensor& x) override {
    MIXP_CHECK(x.defined() && is_floating(x.dtype()) && x.ndim() == 2 && x.size(0) >= 1 &&
                   x.size(1) == kDeepMlpInputs,
               "deep-mlp: expected floating inputs [N, ", kDeepMlpInputs, "], got ", shape_of(x));
    Tensor h = x;
    for (size_t i = 0; i + 1 < layers_.size(); ++i) h = ops::tanh(layers_[i]->forward(h));
    return layers_.back()->forward(h);
  }
  Task task() const override { return Task::regression; }

 protected:
  std::string type_name() const override { return "DeepMLP"; }

 private:
  std::vector<std::shared_ptr<Linear>> layers_;
};

void check_config(const ModelConfig& c) {
  MIXP_CHECK(c.dropout >= 0 && c.dropout < 1, "model ", c.name, ": dropout must be in [0, 1), got ",
             c.dropout);
  if (c.name == "mlp" || c.name == "cnn") {
    MIXP_CHECK(c.classes >= 1 && c.image_size >= 1, "model ", c.name,
               ": classes and image_size must be at least 1, got ", c.classes, " and ",
               c.image_size);
  } else {
    MIXP_CHECK(c.vocab >= 1 && c.layers >= 1 && c.width >= 1 && c.context >= 1, "model ", c.name,
               ": vocab, layers, width and context must be at least 1, got ", c.vocab, ", ",
               c.layers, ", ", c.width, " and ", c.context);
    MIXP_CHECK(c.name != "gpt" || c.heads >= 1, "model gpt: heads must be at least 1, got ",
               c.heads);
  }
}

}  // namespace

std::unique_ptr<TokenDecoder> Model::make_decoder() {
  MIXP_CHECK(false, "model ", config().name,
             " is not a language model: only gpt and lstm read tokens incrementally");
  return nullptr;
}

std::unique_ptr<Model> make_model(const ModelConfig& config, uint64_t seed) {
  MIXP_CHECK(config.name == "mlp" || config.name == "cnn" || config.name == "lstm" ||
                 config.name == "gpt" || config.name == "deep-mlp",
             "unknown model '", config.name, "'; known models: mlp, cnn, lstm, gpt, deep-mlp");
  check_config(config);
  if (config.name == "deep-mlp") return std::make_unique<DeepMlpModel>(config, seed);
  if (config.name == "mlp") return std::make_unique<MlpModel>(config, seed);
  if (config.name == "cnn") return std::make_unique<CnnModel>(config, seed);
  if (config.name == "lstm") return std::make_unique<LstmModel>(config, seed);
  return std::make_unique<GptModel>(config, seed);
}

}  // namespace mixp::nn
