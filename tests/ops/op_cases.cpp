#include "ops/op_cases.h"

namespace mixp::test {

std::vector<OpCase> all_op_cases() {
  using V = std::vector<Tensor>;
  const Domain any = Domain::any, pos = Domain::positive, away = Domain::away_from_zero;
  std::vector<OpCase> cases;
  auto unary = [&](std::string name, Domain d, std::function<Tensor(const Tensor&)> f) {
    for (Shape s : {Shape{1}, Shape{17}, Shape{3, 13}}) {
      cases.push_back({name + "/" + s.to_string(), {{s, d}}, [f](const V& v) { return f(v[0]); }});
    }
  };
  unary("neg", any, [](const Tensor& x) { return ops::neg(x); });
  unary("exp", any, [](const Tensor& x) { return ops::exp(x); });
  unary("log", pos, [](const Tensor& x) { return ops::log(x); });
  unary("sqrt", pos, [](const Tensor& x) { return ops::sqrt(x); });
  unary("rsqrt", pos, [](const Tensor& x) { return ops::rsqrt(x); });
  unary("pow3", any, [](const Tensor& x) { return ops::pow(x, 3.0); });
  unary("pow_half", pos, [](const Tensor& x) { return ops::pow(x, 0.5); });
  unary("tanh", any, [](const Tensor& x) { return ops::tanh(x); });
  unary("sigmoid", any, [](const Tensor& x) { return ops::sigmoid(x); });
  unary("relu", away, [](const Tensor& x) { return ops::relu(x); });
  unary("gelu", any, [](const Tensor& x) { return ops::gelu(x); });
  unary("gelu_tanh", any, [](const Tensor& x) { return ops::gelu_tanh(x); });
  unary("silu", any, [](const Tensor& x) { return ops::silu(x); });
  unary("add_scalar", any, [](const Tensor& x) { return ops::add_scalar(x, 0.75); });
  unary("mul_scalar", any, [](const Tensor& x) { return ops::mul_scalar(x, -1.5); });

  auto binary = [&](std::string name, Domain db,
                    std::function<Tensor(const Tensor&, const Tensor&)> f) {
    const std::pair<Shape, Shape> shapes[] = {
        {{7, 5}, {7, 5}}, {{7, 5}, {5}}, {{3, 1, 4}, {2, 1}}, {{}, {3}}, {{1}, {1}}};
    for (const auto& [sa, sb] : shapes) {
      cases.push_back({name + "/" + sa.to_string() + "x" + sb.to_string(),
                       {{sa, any}, {sb, db}},
                       [f](const V& v) { return f(v[0], v[1]); },
                       // broadcasting sums gradients over up to 7 terms
                       7});
    }
  };
  binary("add", any, [](const Tensor& a, const Tensor& b) { return ops::add(a, b); });
  binary("sub", any, [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); });
  binary("mul", any, [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); });
  binary("div", away, [](const Tensor& a, const Tensor& b) { return ops::div(a, b); });

  cases.push_back({"sum/all", {{{4, 6, 5}, any}}, [](const V& v) { return ops::sum(v[0]); }, 120});
  cases.push_back(
      {"sum/dim1", {{{4, 6, 5}, any}}, [](const V& v) { return ops::sum(v[0], {1}); }, 6});
  cases.push_back({"sum/dims02",
                   {{{4, 6, 5}, any}},
                   [](const V& v) {
                     return ops::sum(v[0], {0, -1});
                   },
                   20});
  cases.push_back({"mean/keepdim",
                   {{{4, 6, 5}, any}},
                   [](const V& v) { return ops::mean(v[0], {2}, true); },
                   5});
  cases.push_back({"sum/long_row",
                   {{{3, 70001}, any}},
                   [](const V& v) { return ops::sum(v[0], {1}); },
                   70001,
                   false});
  cases.push_back({"max/dim0", {{{5, 7}, away}}, [](const V& v) { return ops::max(v[0], 0); }});
  cases.push_back(
      {"max/dim-1", {{{3, 4, 9}, away}}, [](const V& v) { return ops::max(v[0], -1, true); }});

  cases.push_back({"matmul/2d",
                   {{{5, 7}, any}, {{7, 3}, any}},
                   [](const V& v) { return ops::matmul(v[0], v[1]); },
                   7});
  cases.push_back({"matmul/odd",
                   {{{17, 33}, any}, {{33, 1}, any}},
                   [](const V& v) { return ops::matmul(v[0], v[1]); },
                   33});
  cases.push_back({"matmul/shared_b",
                   {{{2, 5, 7}, any}, {{7, 3}, any}},
                   [](const V& v) { return ops::matmul(v[0], v[1]); },
                   10});
  cases.push_back({"matmul/batched",
                   {{{2, 5, 7}, any}, {{2, 7, 3}, any}},
                   [](const V& v) { return ops::matmul(v[0], v[1]); },
                   7});
  cases.push_back({"bmm",
                   {{{3, 4, 6}, any}, {{3, 6, 2}, any}},
                   [](const V& v) { return ops::bmm(v[0], v[1]); },
                   6});
  cases.push_back({"linear/bias",
                   {{{2, 3, 16}, any}, {{9, 16}, any}, {{9}, any}},
                   [](const V& v) { return ops::linear(v[0], v[1], v[2]); },
                   16});
  cases.push_back({"linear/no_bias",
                   {{{13, 31}, any}, {{5, 31}, any}},
                   [](const V& v) { return ops::linear(v[0], v[1]); },
                   31});
  cases.push_back({"linear/f32_out",
                   {{{6, 8}, any}, {{4, 8}, any}, {{4}, any}},
                   [](const V& v) {
                     const DType wide = v[0].dtype() == DType::f64 ? DType::f64 : DType::f32;
                     return ops::linear(v[0], v[1], v[2], wide).to(v[0].dtype());
                   },
                   8});

  cases.push_back(
      {"softmax/last", {{{4, 11}, any}}, [](const V& v) { return ops::softmax(v[0]); }, 11});
  cases.push_back(
      {"softmax/dim0", {{{6, 3, 2}, any}}, [](const V& v) { return ops::softmax(v[0], 0); }, 6});
  cases.push_back({"log_softmax/last",
                   {{{4, 11}, any}},
                   [](const V& v) { return ops::log_softmax(v[0]); },
                   11});
  cases.push_back({"log_softmax/dim1",
                   {{{2, 5, 3}, any}},
                   [](const V& v) { return ops::log_softmax(v[0], 1); },
                   5});

  auto targets = [] { return from_values({2, 0, 4, 1, 4, 3}, {6}, DType::i64); };
  cases.push_back(
      {"cross_entropy",
       {{{6, 5}, any}},
       [targets](const V& v) { return ops::cross_entropy(v[0], targets()).to(v[0].dtype()); },
       30});
  cases.push_back({"cross_entropy/smooth_ignore",
                   {{{6, 5}, any}},
                   [](const V& v) {
                     ops::CrossEntropyOptions o;
                     o.label_smoothing = 0.1;
                     o.ignore_index = 3;
                     const Tensor t = from_values({2, 3, 4, 1, 3, 0}, {6}, DType::i64);
                     return ops::cross_entropy(v[0], t, o).to(v[0].dtype());
                   },
                   30});
  cases.push_back({"mse_loss",
                   {{{4, 7}, any}, {{4, 7}, any}},
                   [](const V& v) { return ops::mse_loss(v[0], v[1]).to(v[0].dtype()); },
                   28});

  // layer_norm: each output sums over its row (C terms), dweight and dbias over the rows.
  cases.push_back({"layer_norm/affine",
                   {{{4, 7}, any}, {{7}, any}, {{7}, any}},
                   [](const V& v) { return ops::layer_norm(v[0], v[1], v[2]); },
                   7});
  cases.push_back({"layer_norm/affine_3d",
                   {{{2, 3, 16}, any}, {{16}, any}, {{16}, any}},
                   [](const V& v) { return ops::layer_norm(v[0], v[1], v[2]); },
                   16});
  cases.push_back({"layer_norm/plain",
                   {{{4, 7}, any}},
                   [](const V& v) { return ops::layer_norm(v[0], Tensor(), Tensor()); },
                   7});
  cases.push_back({"layer_norm/plain_3d",
                   {{{2, 3, 16}, any}},
                   [](const V& v) { return ops::layer_norm(v[0], Tensor(), Tensor(), 1e-3); },
                   16});
  cases.push_back({"layer_norm/weight_only",
                   {{{5, 9}, any}, {{9}, any}},
                   [](const V& v) { return ops::layer_norm(v[0], v[1], Tensor()); },
                   9});

  cases.push_back({"layer_norm/chunks",
                   {{{700, 16}, any}, {{16}, any}, {{16}, any}},
                   [](const V& v) { return ops::layer_norm(v[0], v[1], v[2]); },
                   700,
                   false});
  // batch_norm: the running stats are made afresh in every call, so that repeated evaluations
  // (the gradient check's) see the same values; each channel sums over N * H * W values.
  auto batch_norm = [](const V& v, bool training, bool affine) {
    const int64_t c = v[0].size(1);
    std::vector<double> mean, var;
    for (int64_t i = 0; i < c; ++i) {
      mean.push_back(0.25 * double(i) - 0.3);
      var.push_back(0.5 + 0.75 * double(i));
    }
    Tensor running_mean = from_values(mean, {c}), running_var = from_values(var, {c});
    return ops::batch_norm(v[0], affine ? v[1] : Tensor(), affine ? v[2] : Tensor(), running_mean,
                           running_var, training, 0.1, 1e-5);
  };
  cases.push_back({"batch_norm/train_2d",
                   {{{8, 3}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm](const V& v) { return batch_norm(v, true, true); },
                   8});
  cases.push_back({"batch_norm/train_nchw",
                   {{{4, 3, 5, 5}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm](const V& v) { return batch_norm(v, true, true); },
                   100});
  cases.push_back({"batch_norm/train_plain_ncl",
                   {{{3, 4, 6}, any}},
                   [batch_norm](const V& v) { return batch_norm(v, true, false); },
                   18});
  cases.push_back({"batch_norm/train_untracked",
                   {{{6, 2, 3, 2}, any}, {{2}, any}, {{2}, any}},
                   [](const V& v) {
                     Tensor none;
                     return ops::batch_norm(v[0], v[1], v[2], none, none, true);
                   },
                   36});
  // Several parallel chunks, whose partial sums are added in chunk order.
  cases.push_back({"batch_norm/train_chunks_nchw",
                   {{{2, 3, 64, 64}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm](const V& v) { return batch_norm(v, true, true); },
                   8192,
                   false});
  cases.push_back({"batch_norm/train_chunks_2d",
                   {{{9000, 4}, any}, {{4}, any}, {{4}, any}},
                   [batch_norm](const V& v) { return batch_norm(v, true, true); },
                   9000,
                   false});
  cases.push_back({"batch_norm/eval_2d",
                   {{{8, 3}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm](const V& v) { return batch_norm(v, false, true); },
                   8});
  cases.push_back({"batch_norm/eval_nchw",
                   {{{4, 3, 5, 5}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm](const V& v) { return batch_norm(v, false, true); },
                   100});

  cases.push_back(
      {"transpose", {{{3, 4, 5}, any}}, [](const V& v) { return ops::transpose(v[0], 0, 2); }});
  cases.push_back({"permute", {{{2, 3, 4, 5}, any}}, [](const V& v) {
                     return ops::permute(v[0], {3, 1, 0, 2});
                   }});
  cases.push_back(
      {"reshape_slice", {{{6, 4}, any}}, [](const V& v) {
         return ops::mul(v[0].reshape({3, 8}).slice(1, 3), v[0].reshape({3, 8}).slice(0, 2));
       }});
  return cases;
}

std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, uint64_t seed) {
  Philox rng(PhiloxState{seed, 0, 0});
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) {
    Tensor t = randn(spec.shape, rng, 1.0, DType::f64);
    double* v = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (spec.domain == Domain::positive) v[i] = 0.5 + 1.5 * double(rng.uniform());
      if (spec.domain == Domain::away_from_zero) {
        v[i] = (0.5 + 1.5 * double(rng.uniform())) * (rng.uniform() < 0.5f ? -1.0 : 1.0);
      }
    }
    Tensor typed = t.to(dtype).detach();
    if (spec.differentiable) typed.set_requires_grad(true);
    inputs.push_back(typed);
  }
  return inputs;
}

}  // namespace mixp::test
