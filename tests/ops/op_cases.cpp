#include "ops/op_cases.h"

#include <algorithm>

namespace mixp::test {

namespace {

using V = std::vector<Tensor>;
constexpr Domain any = Domain::any, pos = Domain::positive, away = Domain::away_from_zero;

// The cases of unary and binary elementwise ops, over shapes and broadcasts.
void add_elementwise_cases(std::vector<OpCase>& cases) {
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
}

// The cases of reductions.
void add_reduction_cases(std::vector<OpCase>& cases) {
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
  // Column blocks in parallel (a bias gradient's shape): 601 columns are 2 blocks and a part.
  cases.push_back({"sum/many_columns",
                   {{{120, 601}, any}},
                   [](const V& v) { return ops::sum(v[0], {0}); },
                   120,
                   false});
  cases.push_back({"max/dim0", {{{5, 7}, away}}, [](const V& v) { return ops::max(v[0], 0); }});
  cases.push_back(
      {"max/dim-1", {{{3, 4, 9}, away}}, [](const V& v) { return ops::max(v[0], -1, true); }});
}

// The cases of products, linear layers, softmax and losses.
void add_product_and_loss_cases(std::vector<OpCase>& cases) {
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
  // A result of 600 rows of 4096 (9.4 MiB in fp32): rounded to bf16 or f16 in blocks of 320
  // rows and then 280, each with its share of the bias. The input's gradient sums over the
  // 4096 outputs.
  cases.push_back({"linear/row_blocks",
                   {{{2, 300, 3}, any}, {{4096, 3}, any}, {{4096}, any}},
                   [](const V& v) { return ops::linear(v[0], v[1], v[2]); },
                   4096,
                   false});
  // 2200 rows: in bf16 on the fast path, the weight and bias gradients come from one pass
  // (kernels/cpu/linear_weight_grad.cpp, from 512 rows: here three blocks of row pairs, the
  // last one short); the bias gradient sums over the 2200 rows.
  cases.push_back({"linear/fused_bias_grad",
                   {{{2, 1100, 8}, any}, {{24, 8}, any}, {{24}, any}},
                   [](const V& v) { return ops::linear(v[0], v[1], v[2]); },
                   2200,
                   false});
  // 600 rows, even in-features and out-features in multiples of 16: in bf16 on the fast path
  // the forward and input-gradient products come from mixp's pair tiles
  // (kernels/cpu/matmul_pairs.cpp, from 512 rows), with a 16-column last panel for the 80
  // outputs, and the weight gradient from linear_weight_grad.cpp.
  cases.push_back({"linear/pair_tiles",
                   {{{2, 300, 32}, any}, {{80, 32}, any}, {{80}, any}},
                   [](const V& v) { return ops::linear(v[0], v[1], v[2]); },
                   600,
                   false});
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
}

// add_layer_norm: both results, summed so that both gradients flow (the sum's and the
// normalized one's, added in one pass in the fused backward).
void add_residual_norm_cases(std::vector<OpCase>& cases) {
  auto add_layer_norm = [](const V& v, const Tensor& w, const Tensor& b) {
    const ops::SumAndNorm r = ops::add_layer_norm(v[0], v[1], w, b);
    return ops::add(r.normalized, r.sum);
  };
  cases.push_back({"add_layer_norm/affine",
                   {{{4, 7}, any}, {{4, 7}, any}, {{7}, any}, {{7}, any}},
                   [add_layer_norm](const V& v) { return add_layer_norm(v, v[2], v[3]); },
                   7});
  cases.push_back({"add_layer_norm/plain_3d",
                   {{{2, 3, 16}, any}, {{2, 3, 16}, any}},
                   [add_layer_norm](const V& v) { return add_layer_norm(v, Tensor(), Tensor()); },
                   16});
  cases.push_back({"add_layer_norm/chunks",
                   {{{700, 16}, any}, {{700, 16}, any}, {{16}, any}, {{16}, any}},
                   [add_layer_norm](const V& v) { return add_layer_norm(v, v[2], v[3]); },
                   700,
                   false});
}

// The cases of layer and batch norms, alone and fused with ReLU and pooling.
void add_norm_cases(std::vector<OpCase>& cases) {
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
  // batch_norm then relu in one op. No central differences: a value at ReLU's kink depends on
  // every input of its channel, so no input range keeps the differences away from it.
  auto batch_norm_relu = [](const V& v, bool training) {
    const int64_t c = v[0].size(1);
    Tensor running_mean = zeros({c}), running_var = ones({c});
    return ops::batch_norm_relu(v[0], v[1], v[2], running_mean, running_var, training, 0.1, 1e-5);
  };
  cases.push_back({"batch_norm_relu/train_nchw",
                   {{{4, 3, 5, 5}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm_relu](const V& v) { return batch_norm_relu(v, true); },
                   100,
                   false});
  // The same followed by 2 x 2 max pooling, in one op; odd widths leave a column unread.
  auto batch_norm_relu_pool = [](const V& v, bool training) {
    const int64_t c = v[0].size(1);
    Tensor running_mean = zeros({c}), running_var = ones({c});
    return ops::batch_norm_relu_max_pool2d(v[0], v[1], v[2], running_mean, running_var, training,
                                           0.1, 1e-5);
  };
  cases.push_back({"batch_norm_relu_max_pool2d/train_nchw",
                   {{{4, 3, 6, 5}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm_relu_pool](const V& v) { return batch_norm_relu_pool(v, true); },
                   120,
                   false});
  cases.push_back({"batch_norm_relu_max_pool2d/eval_nchw",
                   {{{2, 3, 4, 4}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm_relu_pool](const V& v) { return batch_norm_relu_pool(v, false); },
                   32,
                   false});
  cases.push_back({"batch_norm_relu/eval_2d",
                   {{{8, 3}, any}, {{3}, any}, {{3}, any}},
                   [batch_norm_relu](const V& v) { return batch_norm_relu(v, false); },
                   8,
                   false});
}

// The cases of views, copies, indexing, dropout and head splits.
void add_shape_cases(std::vector<OpCase>& cases) {
  cases.push_back(
      {"transpose", {{{3, 4, 5}, any}}, [](const V& v) { return ops::transpose(v[0], 0, 2); }});
  cases.push_back({"permute", {{{2, 3, 4, 5}, any}}, [](const V& v) {
                     return ops::permute(v[0], {3, 1, 0, 2});
                   }});
  cases.push_back(
      {"reshape_slice", {{{6, 4}, any}}, [](const V& v) {
         return ops::mul(v[0].reshape({3, 8}).slice(1, 3), v[0].reshape({3, 8}).slice(0, 2));
       }});

  // The indices are built inside the case (i64 inputs cannot be InputSpecs); row 3 is picked
  // three times, so its gradient sums three terms.
  cases.push_back({"embedding",
                   {{{7, 5}, any}},
                   [](const V& v) {
                     const Tensor idx = from_values({3, 0, 6, 3, 1, 3}, {2, 3}, DType::i64);
                     return ops::embedding(v[0], idx);
                   },
                   3});
  // A fixed generator state inside the case: every evaluation draws the same mask.
  cases.push_back({"dropout", {{{6, 7}, any}}, [](const V& v) {
                     Philox gen(PhiloxState{123, 4, 10});
                     return ops::dropout(v[0], 0.3, gen);
                   }});
  cases.push_back({"dropout/eval", {{{3, 4}, any}}, [](const V& v) {
                     Philox gen(PhiloxState{123, 4, 10});
                     return ops::mul_scalar(ops::dropout(v[0], 0.5, gen, false), 2.0);
                   }});

  cases.push_back({"cat/dim0", {{{2, 3}, any}, {{1, 3}, any}, {{4, 3}, any}}, [](const V& v) {
                     return ops::cat({v[0], v[1], v[2]}, 0);
                   }});
  cases.push_back({"cat/dim1", {{{2, 3, 2}, any}, {{2, 1, 2}, any}}, [](const V& v) {
                     return ops::cat({v[0], v[1]}, 1);
                   }});
  cases.push_back(
      {"cat/dim-1_three", {{{3, 2}, any}, {{3, 4}, any}, {{3, 1}, any}}, [](const V& v) {
         return ops::cat({v[0], v[1], v[2]}, -1);
       }});
  // Chunks of 3, 3 and 1 rows put back in another order: every output matters.
  cases.push_back({"split/dim0", {{{7, 4}, any}}, [](const V& v) {
                     const std::vector<Tensor> c = ops::split(v[0], 3, 0);
                     return ops::cat({c[2], c[0], c[1]}, 0);
                   }});
  cases.push_back({"split/dim1", {{{3, 5}, any}}, [](const V& v) {
                     const std::vector<Tensor> c = ops::split(v[0], 2, 1);
                     return ops::mul(ops::cat({c[0], c[1]}, 0), ops::cat({c[1], c[0]}, 0));
                   }});
  // The middle chunk is unused: its gradient is undefined and must count as zeros.
  cases.push_back({"split/unused_chunk", {{{2, 7}, any}}, [](const V& v) {
                     const std::vector<Tensor> c = ops::split(v[0], 3, -1);
                     return ops::cat({c[2], c[0]}, 1);
                   }});
  // q, k and v weighted differently, so that the gradient check sees each put back in place.
  cases.push_back(
      {"split_heads", {{{2, 3, 12}, any}}, [](const V& v) {
         const std::vector<Tensor> p = ops::split_heads(v[0], 2);
         return ops::cat({p[0], ops::mul_scalar(p[1], 2.0), ops::mul_scalar(p[2], -3.0)}, 1);
       }});
  cases.push_back(
      {"narrow/dim1", {{{4, 6, 3}, any}}, [](const V& v) { return ops::narrow(v[0], 1, 2, 3); }});
  cases.push_back(
      {"narrow/dim0", {{{5, 2}, any}}, [](const V& v) { return ops::narrow(v[0], 0, 0, 4); }});
  cases.push_back(
      {"narrow/last", {{{3, 4}, any}}, [](const V& v) { return ops::narrow(v[0], -1, 3, 1); }});
}

// The cases of attention, plain and multi-head.
void add_attention_cases(std::vector<OpCase>& cases) {
  for (int64_t batch : {1, 2}) {
    for (bool causal : {true, false}) {
      const Shape s{batch, 2, 5, 4};
      cases.push_back(
          {std::string("attention/") + (causal ? "causal" : "full") + "/" + s.to_string(),
           {{s, any}, {s, any}, {s, any}},
           [causal](const V& v) {
             return ops::scaled_dot_product_attention(v[0], v[1], v[2], causal);
           },
           // sums over T = 5 keys of Dh = 4 products
           20});
    }
  }
  // Awkward sizes for the fast path's products and row loops; too large for differences.
  const Shape odd{1, 3, 37, 17};
  cases.push_back({"attention/causal/odd",
                   {{odd, any}, {odd, any}, {odd, any}},
                   [](const V& v) { return ops::scaled_dot_product_attention(v[0], v[1], v[2]); },
                   37 * 17,
                   false});
  // More (batch, head) pairs than one chunk of the fast path holds (32 pairs of 256 x 256
  // scores), and a last chunk of another size.
  const Shape chunked{1, 33, 256, 2};
  cases.push_back({"attention/causal/chunked",
                   {{chunked, any}, {chunked, any}, {chunked, any}},
                   [](const V& v) { return ops::scaled_dot_product_attention(v[0], v[1], v[2]); },
                   256 * 2,
                   false});
  // Head sizes that are multiples of 16 take the tiled bf16 path on AVX-512 BF16: one block of
  // an odd number of query rows, a block of 128 rows with one of 2, and the smallest and a
  // wide head size, causal or not.
  for (const Shape& tiled :
       {Shape{1, 2, 37, 32}, Shape{1, 2, 130, 64}, Shape{2, 1, 33, 16}, Shape{1, 1, 70, 128}}) {
    for (bool causal : {true, false}) {
      cases.push_back(
          {std::string("attention/tiled/") + (causal ? "causal/" : "full/") + tiled.to_string(),
           {{tiled, any}, {tiled, any}, {tiled, any}},
           [causal](const V& v) {
             return ops::scaled_dot_product_attention(v[0], v[1], v[2], causal);
           },
           tiled[2] * tiled[3],
           false});
    }
  }
  // multi_head_attention: qkv [B, T, 3C]. Dh = C / heads = 2 runs the composed ops (small enough
  // for central differences); Dh = 32 and 64 the tiled bf16 path, which reads the heads in place.
  cases.push_back({"multi_head_attention/composed",
                   {{{2, 5, 12}, any}},
                   [](const V& v) { return ops::multi_head_attention(v[0], 2); },
                   5 * 2});
  for (const auto& [qkv, heads] :
       {std::pair{Shape{2, 37, 192}, 2}, std::pair{Shape{1, 130, 384}, 2}}) {
    for (bool causal : {true, false}) {
      cases.push_back(
          {std::string("multi_head_attention/tiled/") + (causal ? "causal/" : "full/") +
               qkv.to_string(),
           {{qkv, any}},
           [causal, heads](const V& v) { return ops::multi_head_attention(v[0], heads, causal); },
           qkv[1] * (qkv[2] / 3 / heads),
           false});
    }
  }
  cases.push_back({"dropout/odd",
                   {{{3, 1031}, any}},
                   [](const V& v) {
                     Philox gen(PhiloxState{5, 1, 3});
                     return ops::dropout(v[0], 0.6, gen);
                   },
                   1,
                   false});
}

// The cases of convolutions and pooling.
void add_conv_and_pool_cases(std::vector<OpCase>& cases) {
  // conv2d: x [N, C, H, W], weight [O, C / g, kh, kw], bias [O]. The reduction length is the
  // longest sum of the case: the forward's (C / g kh kw), backward-data's (at most O / g kh kw)
  // or backward-weights' and the bias gradient's (N OH OW).
  auto conv = [&](std::string name, Shape xs, Shape ws, bool bias, ops::Conv2dOptions o) {
    const int64_t g = o.groups;
    const int64_t oh = (xs[2] + 2 * o.pad_h - o.dilation_h * (ws[2] - 1) - 1) / o.stride_h + 1;
    const int64_t ow = (xs[3] + 2 * o.pad_w - o.dilation_w * (ws[3] - 1) - 1) / o.stride_w + 1;
    const int64_t taps = ws[2] * ws[3];
    const int64_t length = std::max({xs[1] / g * taps, ws[0] / g * taps, xs[0] * oh * ow});
    std::vector<InputSpec> inputs = {{xs, any}, {ws, any}};
    if (bias) inputs.push_back({Shape{ws[0]}, any});
    cases.push_back(
        {"conv2d/" + name, inputs,
         [bias, o](const V& v) {
           ops::Conv2dOptions oo = o;
           if (o.out_dtype) {  // the wide output, narrowed for the comparison
             oo.out_dtype = v[0].dtype() == DType::f64 ? DType::f64 : DType::f32;
             return ops::conv2d(v[0], v[1], bias ? v[2] : Tensor(), oo).to(v[0].dtype());
           }
           return ops::conv2d(v[0], v[1], bias ? v[2] : Tensor(), oo);
         },
         length});
  };
  auto options = [](int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                    int64_t dilation_h, int64_t dilation_w, int64_t groups) {
    ops::Conv2dOptions o;
    o.stride_h = stride_h, o.stride_w = stride_w, o.pad_h = pad_h, o.pad_w = pad_w;
    o.dilation_h = dilation_h, o.dilation_w = dilation_w, o.groups = groups;
    return o;
  };
  conv("3x3", {2, 3, 7, 6}, {4, 3, 3, 3}, true, {});
  conv("stride2_pad1", {1, 2, 9, 8}, {3, 2, 3, 3}, true, options(2, 2, 1, 1, 1, 1, 1));
  conv("stride2_even", {3, 2, 6, 6}, {2, 2, 3, 3}, false, options(2, 2, 0, 0, 1, 1, 1));
  conv("dilation2", {3, 2, 7, 7}, {2, 2, 3, 3}, true, options(1, 1, 2, 1, 2, 2, 1));
  conv("groups2", {2, 4, 5, 6}, {6, 2, 3, 3}, true, options(1, 1, 1, 1, 1, 1, 2));
  conv("depthwise", {2, 3, 6, 5}, {3, 1, 3, 3}, false, options(1, 1, 1, 1, 1, 1, 3));
  conv("depthwise_x2", {1, 2, 7, 5}, {4, 1, 3, 2}, true, options(2, 1, 1, 0, 1, 1, 2));
  conv("1x1", {3, 5, 4, 3}, {7, 5, 1, 1}, true, {});
  conv("mixed", {1, 3, 8, 9}, {2, 3, 2, 3}, true, options(2, 1, 1, 0, 1, 2, 1));
  conv("kernel_covers_input", {2, 2, 3, 3}, {3, 2, 3, 3}, true, {});
  ops::Conv2dOptions wide = options(1, 2, 1, 1, 1, 1, 1);
  wide.out_dtype = DType::f32;
  conv("f32_out", {2, 3, 5, 7}, {4, 3, 3, 3}, true, wide);

  // pooling: kernel, stride (0: the kernel), padding; the reduction is the largest window
  auto pool = [&](std::string name, Shape xs, int64_t window,
                  std::function<Tensor(const Tensor&)> f) {
    cases.push_back({name, {{xs, any}}, [f](const V& v) { return f(v[0]); }, window});
  };
  pool("max_pool2d/2x2", {2, 3, 6, 7}, 4, [](const Tensor& x) { return ops::max_pool2d(x, 2, 2); });
  pool("max_pool2d/3x3_s2_p1", {1, 2, 7, 9}, 9,
       [](const Tensor& x) { return ops::max_pool2d(x, 3, 3, 2, 2, 1, 1); });
  pool("max_pool2d/3x2_s1_overlap", {3, 2, 5, 4}, 6,
       [](const Tensor& x) { return ops::max_pool2d(x, 3, 2, 1, 1, 1, 0); });
  pool("avg_pool2d/2x2", {2, 3, 6, 7}, 4, [](const Tensor& x) { return ops::avg_pool2d(x, 2, 2); });
  pool("avg_pool2d/3x3_s2_p1", {1, 2, 7, 9}, 9,
       [](const Tensor& x) { return ops::avg_pool2d(x, 3, 3, 2, 2, 1, 1); });
  pool("avg_pool2d/3x2_s1_overlap", {3, 2, 5, 4}, 6,
       [](const Tensor& x) { return ops::avg_pool2d(x, 3, 2, 1, 1, 1, 1); });
  pool("adaptive_avg_pool2d/7x5_to_3x2", {2, 3, 7, 5}, 9,
       [](const Tensor& x) { return ops::adaptive_avg_pool2d(x, 3, 2); });
  pool("adaptive_avg_pool2d/global", {3, 2, 5, 6}, 30,
       [](const Tensor& x) { return ops::adaptive_avg_pool2d(x, 1, 1); });
  pool("adaptive_avg_pool2d/upsample", {1, 2, 3, 4}, 4,
       [](const Tensor& x) { return ops::adaptive_avg_pool2d(x, 5, 7); });
}

}  // namespace

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> cases;
  add_elementwise_cases(cases);
  add_reduction_cases(cases);
  add_product_and_loss_cases(cases);
  add_norm_cases(cases);
  add_residual_norm_cases(cases);
  add_shape_cases(cases);
  add_attention_cases(cases);
  add_conv_and_pool_cases(cases);
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
