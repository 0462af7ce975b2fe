// One training step's forward and backward of a GPT in the shape of nanoGPT's shakespeare-char
// (6 layers, 6 heads, width 384, context 256, batch 16), composed from mixp's ops, in f32 or
// with bf16 parameters and activations. It times the step and reports peak memory by tag.
#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/memory.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"

namespace mixp::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Parameters by nanoGPT's names, initialized as GPT-2 does (normal, std 0.02; zero biases).
std::map<std::string, Tensor> make_gpt(const StepBenchOptions& o, Philox& rng) {
  std::map<std::string, Tensor> p;
  const int64_t c = o.width;
  auto param = [&](const std::string& name, Shape shape, double stddev) {
    Tensor t = stddev > 0 ? randn(shape, rng, stddev, DType::f32, MemoryTag::parameter)
                          : zeros(shape, DType::f32, MemoryTag::parameter);
    if (stddev < 0) t.fill_(1.0);  // layer norm weights
    Tensor typed = o.dtype == DType::f32 ? t : empty(shape, o.dtype, MemoryTag::parameter);
    if (o.dtype != DType::f32) typed.copy_(t);
    p[name] = typed.set_requires_grad(true);
  };
  param("transformer.wte.weight", {o.vocab, c}, 0.02);
  param("transformer.wpe.weight", {o.context, c}, 0.02);
  for (int l = 0; l < o.layers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    param(h + "ln_1.weight", {c}, -1);
    param(h + "ln_1.bias", {c}, 0);
    param(h + "attn.c_attn.weight", {3 * c, c}, 0.02);
    param(h + "attn.c_attn.bias", {3 * c}, 0);
    param(h + "attn.c_proj.weight", {c, c}, 0.02);
    param(h + "attn.c_proj.bias", {c}, 0);
    param(h + "ln_2.weight", {c}, -1);
    param(h + "ln_2.bias", {c}, 0);
    param(h + "mlp.c_fc.weight", {4 * c, c}, 0.02);
    param(h + "mlp.c_fc.bias", {4 * c}, 0);
    param(h + "mlp.c_proj.weight", {c, 4 * c}, 0.02);
    param(h + "mlp.c_proj.bias", {c}, 0);
  }
  param("transformer.ln_f.weight", {c}, -1);
  param("transformer.ln_f.bias", {c}, 0);
  return p;  // lm_head is tied to wte, as in nanoGPT
}

Tensor gpt_loss(const std::map<std::string, Tensor>& p, const StepBenchOptions& o,
                const Tensor& tokens, const Tensor& positions, const Tensor& targets) {
  const int64_t b = tokens.size(0), t = tokens.size(1), c = o.width, hd = c / o.heads;
  Tensor x = ops::add(ops::embedding(p.at("transformer.wte.weight"), tokens),
                      ops::embedding(p.at("transformer.wpe.weight"), positions));
  for (int l = 0; l < o.layers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    const Tensor a = ops::layer_norm(x, p.at(h + "ln_1.weight"), p.at(h + "ln_1.bias"));
    const Tensor qkv = ops::linear(a, p.at(h + "attn.c_attn.weight"), p.at(h + "attn.c_attn.bias"));
    auto heads = [&](int64_t start) {
      return ops::permute(ops::narrow(qkv, 2, start, c).reshape({b, t, o.heads, hd}), {0, 2, 1, 3});
    };
    const Tensor y = ops::scaled_dot_product_attention(heads(0), heads(c), heads(2 * c), true);
    const Tensor merged = ops::permute(y, {0, 2, 1, 3}).reshape({b, t, c});
    x = ops::add(x,
                 ops::linear(merged, p.at(h + "attn.c_proj.weight"), p.at(h + "attn.c_proj.bias")));
    const Tensor m = ops::layer_norm(x, p.at(h + "ln_2.weight"), p.at(h + "ln_2.bias"));
    const Tensor f =
        ops::gelu_tanh(ops::linear(m, p.at(h + "mlp.c_fc.weight"), p.at(h + "mlp.c_fc.bias")));
    x = ops::add(x, ops::linear(f, p.at(h + "mlp.c_proj.weight"), p.at(h + "mlp.c_proj.bias")));
  }
  x = ops::layer_norm(x, p.at("transformer.ln_f.weight"), p.at("transformer.ln_f.bias"));
  const Tensor logits = ops::linear(x, p.at("transformer.wte.weight"));
  return ops::cross_entropy(logits.reshape({b * t, o.vocab}), targets.reshape({b * t}));
}

}  // namespace

int run_step(const StepBenchOptions& o, std::FILE* out) {
  MIXP_CHECK(o.model == "gpt", "bench step: --model must be gpt, got '", o.model, "'");
  MIXP_CHECK(o.dtype == DType::f32 || o.dtype == DType::bf16,
             "bench step: --dtype must be f32 or bf16, got ", name_of(o.dtype));
  MIXP_CHECK(o.width % o.heads == 0, "bench step: width ", o.width, " is not a multiple of heads ",
             o.heads);
  MIXP_CHECK(o.steps >= 1, "bench step: --steps must be at least 1, got ", o.steps);
  Philox rng(PhiloxState{1337, 0, 0});
  const std::map<std::string, Tensor> params = make_gpt(o, rng);
  std::vector<double> tok(size_t(o.batch * o.context)), pos(size_t(o.context));
  for (double& v : tok) v = double(rng.next_u32() % uint32_t(o.vocab));
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = double(i);
  const Tensor tokens = from_values(tok, {o.batch, o.context}, DType::i64, MemoryTag::data);
  std::rotate(tok.begin(), tok.begin() + 1, tok.end());
  const Tensor targets = from_values(tok, {o.batch, o.context}, DType::i64, MemoryTag::data);
  const Tensor positions = from_values(pos, {o.context}, DType::i64, MemoryTag::data);

  std::vector<double> ms;
  double loss = 0;
  memory::reset_peaks();
  for (int s = 0; s < o.steps + 1; ++s) {  // the first step warms up and is not timed
    const auto start = Clock::now();
    const Tensor l = gpt_loss(params, o, tokens, positions, targets);
    l.backward();
    const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    loss = l.item();
    for (const auto& [name, t] : params) const_cast<Tensor&>(t).set_grad(Tensor());
    if (s > 0) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  int64_t count = 0;
  for (const auto& [name, t] : params) count += t.numel();
  std::fprintf(out,
               "mixp bench step: gpt, %d layers, %d heads, width %lld, context %lld, batch %lld, "
               "vocab %lld (%.2fM parameters), %s, %d threads\n",
               o.layers, o.heads, static_cast<long long>(o.width),
               static_cast<long long>(o.context), static_cast<long long>(o.batch),
               static_cast<long long>(o.vocab), double(count) / 1e6, name_of(o.dtype),
               num_threads());
  std::fprintf(out, "forward + backward: median %.1f ms per step over %d steps (loss %.4f)\n\n",
               ms[ms.size() / 2], o.steps, loss);
  std::fprintf(out, "%s", memory::report(memory::stats()).c_str());
  return 0;
}

}  // namespace mixp::bench
