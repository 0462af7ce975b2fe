// scaled_dot_product_attention: softmax(q k^T / sqrt(Dh) + mask) v, fused, with its own backward.
// Shape contract: q, k, v [B, H, T, Dh], the same shape and dtype (f32, f64, f16 or bf16), every
// size at least 1; the result is [B, H, T, Dh] in q's dtype. causal: query i sees keys j <= i.
// Scores, softmax and products are computed and accumulated in fp32 (f64 for f64); the result
// rounds once. Saved for backward: q, k, v and the per-row log-sum-exp of the scaled scores
// (fp32; f64 for f64), from which backward recomputes the probabilities P.
// Backward, with S = q k^T / sqrt(Dh), P = exp(S - lse) (0 where masked), dO the gradient:
//   dV = P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(P dP)) / sqrt(Dh),
//   dQ = dS K,    dK = dS^T Q.
// bf16 inputs (the amp-bf16 and bf16 presets): the four products with P or dS as an operand
// (P V; P^T dO, dS K, dS^T Q) run as bf16 GEMMs accumulating in fp32, P and dS rounded once to
// bf16 (to nearest, even) as PyTorch's bf16 matmuls see them under autocast; the softmax, the
// log-sum-exp and dS itself (from the unrounded P) stay fp32. The reference rounds P and dS at
// the same points. f32, f16 (no bf16-like units for f16 on the CPU) and f64 keep P and dS in
// the accumulation dtype.
// Under an enabled amp::Fp8Autocast scope the six products run as FP8 GEMMs (fp8_attention
// below): q, k, v and P quantized to the input format, dO and dS to the gradient format, each
// in the layout its product reduces along; the softmax and dS stay fp32.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/attention_internal.h"
#include "ops/fp8_ops.h"
#include "ops/gemm_op.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

using attention::Dims;
using attention::inverse_sqrt_head_size;

// The sizes of q, k and v, all [B, H, T, Dh], checked for `op` (the fp32/bf16 and fp8 paths).
Dims attention_dims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                    bool causal) {
  MIXP_CHECK(q.ndim() == 4 && q.shape() == k.shape() && q.shape() == v.shape(), op,
             ": q, k and v must all be [B, H, T, Dh], got ", q.shape().to_string(), ", ",
             k.shape().to_string(), " and ", v.shape().to_string());
  MIXP_CHECK(q.numel() > 0, op, ": every size must be at least 1, got ", q.shape().to_string());
  return Dims{
      .bh = q.shape()[0] * q.shape()[1], .t = q.shape()[2], .dh = q.shape()[3], .causal = causal};
}

// ---- fast: products by detail::gemm, rows of scores in parallel, fp32 (f64 for f64) ----

template <typename Body>
void for_rows(const Dims& d, Body body) {
  kernels::parallel_for(d.bh * d.t, std::max<int64_t>(1, 4096 / d.t),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t r = begin; r < end; ++r) body(r, r % d.t);
                        });
}

// Row r (of n values) rounded to bf16 into row r of `out` (for the bf16 products), when out is
// not null.
template <typename A>
void narrow_row(const A* row, int64_t r, int64_t n, bfloat16* out) {
  if constexpr (std::is_same_v<A, float>) {
    if (out != nullptr) kernels::narrow<bfloat16>(row, n, out + r * n);
  }
}

// Scores of each row (unscaled q k^T) become probabilities in place; lse gets each row's
// log-sum-exp of the scaled scores; p16, if not null, gets the probabilities rounded to bf16.
template <typename A>
void softmax_rows(A* s, A* lse, const Dims& d, A scale, bfloat16* p16 = nullptr) {
  for_rows(d, [&](int64_t r, int64_t i) {
    A* row = s + r * d.t;
    const int64_t n = d.visible(i);
    lse[r] = attention::softmax_row(row, n, scale);
    for (int64_t j = n; j < d.t; ++j) row[j] = 0;
    narrow_row(row, r, d.t, p16);
  });
}

// The probabilities again, from unscaled scores and the saved log-sum-exp, as in forward.
template <typename A>
void probabilities_rows(A* s, const A* lse, const Dims& d, A scale, bfloat16* p16 = nullptr) {
  for_rows(d, [&](int64_t r, int64_t i) {
    A* row = s + r * d.t;
    const int64_t n = d.visible(i);
    attention::probabilities_row(row, n, scale, lse[r]);
    for (int64_t j = n; j < d.t; ++j) row[j] = 0;
    narrow_row(row, r, d.t, p16);
  });
}

// dP becomes dS in place, and ds16, if not null, gets dS rounded to bf16. Only the visible keys
// are read: dS is 0 where P is (masked keys), whatever dP holds there, as in the reference.
template <typename A>
void score_grad_rows(const A* p, A* dp, const Dims& d, A scale, bfloat16* ds16 = nullptr) {
  for_rows(d, [&](int64_t r, int64_t i) {
    A* grow = dp + r * d.t;
    const int64_t n = d.visible(i);
    attention::score_grad_row(p + r * d.t, grow, n, scale);
    for (int64_t j = n; j < d.t; ++j) grow[j] = 0;
    narrow_row(grow, r, d.t, ds16);
  });
}

DType accumulation_dtype(DType in) { return in == DType::f64 ? DType::f64 : DType::f32; }

// Calls f.template operator()<A>() with A double for f64, float for f32.
template <typename F>
void visit_accumulation(DType acc, F&& f) {
  if (acc == DType::f64) {
    f.template operator()<double>();
  } else {
    f.template operator()<float>();
  }
}

// The dtype of the products' operands beside P and dS: bf16 for bf16 inputs (see the top), else
// the accumulation dtype.
DType operand_dtype(DType in) { return in == DType::bf16 ? DType::bf16 : accumulation_dtype(in); }

Tensor as_operand(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : t.to(dtype).detach();
}

// q k^T for every (batch, head): [BH, T, T] in the accumulation dtype.
Tensor scores(const Tensor& q, const Tensor& k, const Dims& d) {
  return detail::gemm({.batch = d.bh,
                       .m = d.t,
                       .n = d.t,
                       .k = d.dh,
                       .trans_b = true,
                       .batch_a = d.bh,
                       .batch_b = d.bh},
                      q, k, Shape{d.bh, d.t, d.t}, accumulation_dtype(q.dtype()));
}

// (batch, head) pairs per chunk of the fast path. The T x T scores (and in backward their
// gradient) exist for one chunk at a time instead of for every pair at once: with nanoGPT's
// shape (96 pairs of 256 x 256) they were 24 MiB each, two of them alive at the peak of a bf16
// step's backward. At most 16 MiB of scores a chunk, counted at 8 bytes an element (f64's
// size; 8 MiB in fp32): smaller chunks made the gpt step slower (more, smaller products). The
// pairs are independent, so chunking changes no result.
int64_t pairs_per_chunk(const Dims& d) {
  constexpr int64_t kChunkBytes = int64_t(16) << 20;
  const int64_t per_pair = d.t * d.t * int64_t(sizeof(double));
  return std::clamp<int64_t>(kChunkBytes / per_pair, 1, d.bh);
}

// Calls body(begin, end, dims of the chunk) for consecutive chunks of the (batch, head) pairs.
template <typename Body>
void for_chunks(const Dims& d, Body body) {
  const int64_t step = pairs_per_chunk(d);
  for (int64_t begin = 0; begin < d.bh; begin += step) {
    Dims c = d;
    c.bh = std::min(step, d.bh - begin);
    body(begin, begin + c.bh, c);
  }
}

// The bf16 copy of a chunk's P or dS for the bf16 products, or an undefined tensor when the
// products take the accumulation dtype.
Tensor bf16_operand(const Dims& c, DType operand) {
  return operand == DType::bf16 ? empty(Shape{c.bh, c.t, c.t}, DType::bf16) : Tensor();
}

bfloat16* data_or_null(Tensor& t) { return t.defined() ? t.data<bfloat16>() : nullptr; }

Tensor forward_fast(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, Tensor& lse) {
  NoGradGuard no_grad;
  const DType acc = accumulation_dtype(q.dtype()), operand = operand_dtype(q.dtype());
  const Shape s3{d.bh, d.t, d.dh};
  const Tensor q3 = q.view(s3), k3 = k.view(s3), v3 = v.view(s3);
  Tensor out = detail::empty_like(q);
  const Tensor out3 = out.view(s3);
  lse = empty(Shape{d.bh, d.t}, acc);
  if (q.dtype() == DType::bf16 && attention::tiled_bf16_applies(d)) {
    const attention::HeadRows dense = attention::HeadRows::dense(d);
    attention::tiled_bf16_forward(d, q.data<bfloat16>(), k.data<bfloat16>(), v.data<bfloat16>(),
                                  dense, out.data<bfloat16>(), dense, lse.data<float>());
    return out;
  }
  for_chunks(d, [&](int64_t begin, int64_t end, const Dims& c) {
    Tensor p = scores(q3.slice(begin, end), k3.slice(begin, end), c);
    Tensor p16 = bf16_operand(c, operand);
    Tensor lse_c = lse.slice(begin, end);
    visit_accumulation(acc, [&]<typename A>() {
      softmax_rows<A>(p.data<A>(), lse_c.data<A>(), c, inverse_sqrt_head_size<A>(c),
                      data_or_null(p16));
    });
    if (p16.defined()) p = Tensor();  // the fp32 probabilities are done with
    detail::gemm_into(
        {.batch = c.bh, .m = c.t, .n = c.dh, .k = c.t, .batch_a = c.bh, .batch_b = c.bh},
        p16.defined() ? p16 : p, as_operand(v3.slice(begin, end), operand), out3.slice(begin, end));
  });
  return out;
}

std::vector<Tensor> backward_fast(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& lse, const Tensor& g, const Dims& d,
                                  const bool need[3]) {
  const DType acc = accumulation_dtype(q.dtype()), operand = operand_dtype(q.dtype());
  const Shape s3{d.bh, d.t, d.dh};
  const Tensor q3 = q.view(s3), k3 = k.view(s3), v3 = v.view(s3), g3 = g.view(s3);
  const Tensor lse_acc = lse.to(acc).detach();
  std::vector<Tensor> result(3);
  const Tensor* inputs[3] = {&q, &k, &v};
  for (size_t i = 0; i < 3; ++i) {
    if (need[i]) result[i] = detail::empty_like(*inputs[i]);
  }
  if (q.dtype() == DType::bf16 && attention::tiled_bf16_applies(d)) {
    auto out = [&](size_t i) { return need[i] ? result[i].data<bfloat16>() : nullptr; };
    const attention::HeadRows dense = attention::HeadRows::dense(d);
    attention::tiled_bf16_backward(d, q.data<bfloat16>(), k.data<bfloat16>(), v.data<bfloat16>(),
                                   dense, lse_acc.data<float>(), g.data<bfloat16>(), dense, out(0),
                                   out(1), out(2));
    return result;
  }
  for_chunks(d, [&](int64_t begin, int64_t end, const Dims& c) {
    const kernels::GemmShape transposed_a{.batch = c.bh,
                                          .m = c.t,
                                          .n = c.dh,
                                          .k = c.t,
                                          .trans_a = true,
                                          .batch_a = c.bh,
                                          .batch_b = c.bh};
    const kernels::GemmShape plain{
        .batch = c.bh, .m = c.t, .n = c.dh, .k = c.t, .batch_a = c.bh, .batch_b = c.bh};
    const Tensor qc = q3.slice(begin, end), kc = k3.slice(begin, end);
    const Tensor vc = v3.slice(begin, end), gc = g3.slice(begin, end);
    const Tensor lse_c = lse_acc.slice(begin, end);
    auto part = [&](size_t i) { return result[i].view(s3).slice(begin, end); };
    Tensor p = scores(qc, kc, c);
    Tensor p16 = bf16_operand(c, operand);
    visit_accumulation(acc, [&]<typename A>() {
      probabilities_rows<A>(p.data<A>(), lse_c.data<A>(), c, inverse_sqrt_head_size<A>(c),
                            data_or_null(p16));
    });
    if (need[2]) {
      detail::gemm_into(transposed_a, p16.defined() ? p16 : p, as_operand(gc, operand), part(2));
    }
    p16 = Tensor();
    if (!need[0] && !need[1]) return;
    Tensor ds = detail::gemm({.batch = c.bh,
                              .m = c.t,
                              .n = c.t,
                              .k = c.dh,
                              .trans_b = true,
                              .batch_a = c.bh,
                              .batch_b = c.bh},
                             gc, vc, Shape{c.bh, c.t, c.t}, acc);
    Tensor ds16 = bf16_operand(c, operand);
    visit_accumulation(acc, [&]<typename A>() {
      score_grad_rows<A>(p.data<A>(), ds.data<A>(), c, inverse_sqrt_head_size<A>(c),
                         data_or_null(ds16));
    });
    p = Tensor();
    if (ds16.defined()) ds = ds16;
    if (need[0]) detail::gemm_into(plain, ds, as_operand(kc, operand), part(0));
    if (need[1]) detail::gemm_into(transposed_a, ds, as_operand(qc, operand), part(1));
  });
  return result;
}

// ---- reference: serial, in double, rounded once (P and dS also once for bf16) ----

// P or dS as the products see it: rounded once to bf16 for bf16 inputs (see the top).
template <typename T>
double product_operand(double x) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return kernels::to_double(kernels::from_double<T>(x));
  } else {
    return x;
  }
}

template <typename T>
void scaled_scores_reference(const T* q, const T* k, const Dims& d, int64_t b, int64_t i,
                             std::vector<double>& s, double& lse) {
  const double scale = 1.0 / std::sqrt(double(d.dh));
  const int64_t n = d.visible(i);
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    double dot = 0;
    for (int64_t c = 0; c < d.dh; ++c) {
      dot += kernels::to_double(q[(b * d.t + i) * d.dh + c]) *
             kernels::to_double(k[(b * d.t + j) * d.dh + c]);
    }
    s[size_t(j)] = dot * scale;
    m = std::max(m, s[size_t(j)]);
  }
  double total = 0;
  for (int64_t j = 0; j < n; ++j) total += std::exp(s[size_t(j)] - m);
  lse = m + std::log(total);
}

template <typename T, typename L>
void forward_reference(const T* q, const T* k, const T* v, const Dims& d, T* out, L* lse) {
  std::vector<double> s(static_cast<size_t>(d.t)), o(static_cast<size_t>(d.dh));
  for (int64_t b = 0; b < d.bh; ++b) {
    for (int64_t i = 0; i < d.t; ++i) {
      double l = 0;
      scaled_scores_reference(q, k, d, b, i, s, l);
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j < d.visible(i); ++j) {
        const double pj = product_operand<T>(std::exp(s[size_t(j)] - l));
        for (int64_t c = 0; c < d.dh; ++c) {
          o[size_t(c)] += pj * kernels::to_double(v[(b * d.t + j) * d.dh + c]);
        }
      }
      for (int64_t c = 0; c < d.dh; ++c) {
        out[(b * d.t + i) * d.dh + c] = kernels::from_double<T>(o[size_t(c)]);
      }
      lse[b * d.t + i] = L(l);
    }
  }
}

// Recomputes everything from q, k and v in double (the saved log-sum-exp is not used, so the
// reference stays independent of the fast forward).
template <typename T>
void backward_reference(const T* q, const T* k, const T* v, const T* g, const Dims& d, T* dq, T* dk,
                        T* dv) {
  const double scale = 1.0 / std::sqrt(double(d.dh));
  const size_t total = size_t(d.bh * d.t * d.dh);
  std::vector<double> aq(total, 0.0), ak(total, 0.0), av(total, 0.0);
  std::vector<double> s(static_cast<size_t>(d.t)), dp(static_cast<size_t>(d.t));
  auto at = [&](int64_t b, int64_t row, int64_t c) { return (b * d.t + row) * d.dh + c; };
  for (int64_t b = 0; b < d.bh; ++b) {
    for (int64_t i = 0; i < d.t; ++i) {
      double l = 0;
      scaled_scores_reference(q, k, d, b, i, s, l);
      const int64_t n = d.visible(i);
      double dot = 0;
      for (int64_t j = 0; j < n; ++j) {
        s[size_t(j)] = std::exp(s[size_t(j)] - l);  // now P
        double acc = 0;
        for (int64_t c = 0; c < d.dh; ++c) {
          acc += kernels::to_double(g[at(b, i, c)]) * kernels::to_double(v[at(b, j, c)]);
        }
        dp[size_t(j)] = acc;
        dot += s[size_t(j)] * acc;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double pj = product_operand<T>(s[size_t(j)]);
        const double ds = product_operand<T>(s[size_t(j)] * (dp[size_t(j)] - dot) * scale);
        for (int64_t c = 0; c < d.dh; ++c) {
          aq[size_t(at(b, i, c))] += ds * kernels::to_double(k[at(b, j, c)]);
          ak[size_t(at(b, j, c))] += ds * kernels::to_double(q[at(b, i, c)]);
          av[size_t(at(b, j, c))] += pj * kernels::to_double(g[at(b, i, c)]);
        }
      }
    }
  }
  for (size_t e = 0; e < total; ++e) {
    dq[e] = kernels::from_double<T>(aq[e]);
    dk[e] = kernels::from_double<T>(ak[e]);
    dv[e] = kernels::from_double<T>(av[e]);
  }
}

struct AttentionBackward : autograd::Node {
  autograd::SavedTensor q, k, v, lse;
  Dims d;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor qv = q.get(), kv = k.get(), vv = v.get();
    const Tensor g = grads[0].to(qv.dtype()).detach();
    const bool need[3] = {next[0].node != nullptr, next[1].node != nullptr,
                          next[2].node != nullptr};
    if (!reference_mode()) return backward_fast(qv, kv, vv, lse.get(), g, d, need);
    std::vector<Tensor> result = {detail::empty_like(qv), detail::empty_like(kv),
                                  detail::empty_like(vv)};
    visit_floating(qv.dtype(), name, [&]<typename T>() {
      backward_reference(qv.data<T>(), kv.data<T>(), vv.data<T>(), g.data<T>(), d,
                         result[0].data<T>(), result[1].data<T>(), result[2].data<T>());
    });
    for (int i = 0; i < 3; ++i) {
      if (!need[i]) result[size_t(i)] = Tensor();
    }
    return result;
  }
  void release() override {
    q.reset();
    k.reset();
    v.reset();
    lse.reset();
  }
};

// ---- fp8: the products by amp::fp8_gemm, quantized per the state's recipe ----

constexpr amp::Fp8Role kAttentionRoles[] = {amp::Fp8Role::input,    amp::Fp8Role::input,
                                            amp::Fp8Role::input,    amp::Fp8Role::input,
                                            amp::Fp8Role::gradient, amp::Fp8Role::gradient};
enum Fp8Slot { slot_q = 0, slot_k, slot_v, slot_p, slot_do, slot_ds };

struct Fp8Quantizer {
  amp::Fp8Recipe recipe;
  std::shared_ptr<amp::Fp8State::Site> site;
  float scales[6] = {1, 1, 1, 1, 1, 1};  // the forward's scales of q, k, v, p (delayed scaling)
  bool record = true;
  // t: [BH, rows, cols] with the reduction along cols.
  amp::Fp8Tensor operator()(const Tensor& t, Fp8Slot slot, bool record_amax) const {
    amp::Fp8Meta& meta = site->metas[size_t(slot)];
    const float scale = slot >= slot_do ? meta.scale : scales[slot];
    const amp::Fp8Tensor q =
        amp::quantize(t, amp::fp8_dtype(recipe.format, meta.role),
                      detail::activation_scaling(recipe.scaling), scale, recipe.mx_scale_rounding);
    if (record_amax && record) meta.record(q.amax);
    return q;
  }
};

// Probabilities [BH, T, T] from fp8 scores; lse is filled when `fill_lse`, else read.
Tensor fp8_probabilities(const amp::Fp8Tensor& qq, const amp::Fp8Tensor& qk, const Dims& d,
                         Tensor& lse, bool fill_lse) {
  Tensor p = amp::fp8_gemm(qq, qk);
  if (fill_lse) {
    lse = empty(Shape{d.bh, d.t}, DType::f32);
    softmax_rows<float>(p.data<float>(), lse.data<float>(), d, inverse_sqrt_head_size<float>(d));
  } else {
    probabilities_rows<float>(p.data<float>(), lse.data<float>(), d,
                              inverse_sqrt_head_size<float>(d));
  }
  return p;
}

Tensor as_dtype(Tensor t, const Shape& shape, DType dtype) {
  t = t.view(shape);
  return t.dtype() == dtype ? t : t.to(dtype).detach();
}

struct Fp8AttentionBackward : autograd::Node {
  autograd::SavedTensor q, k, v, lse;
  Dims d;
  Fp8Quantizer quant;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    NoGradGuard no_grad;
    const Tensor qv = q.get(), kv = k.get(), vv = v.get(), lv = lse.get();
    const Shape s3{d.bh, d.t, d.dh};
    const Tensor q3 = qv.view(s3), k3 = kv.view(s3), v3 = vv.view(s3);
    Tensor l = lv;
    const Tensor p =
        fp8_probabilities(quant(q3, slot_q, false), quant(k3, slot_k, false), d, l, false);
    const Tensor g = grads[0].view(s3);
    std::vector<Tensor> result(3);
    const amp::Fp8Tensor qg = quant(g, slot_do, true);
    if (next[2].node) {  // dV = P^T dO
      const Tensor dv = amp::fp8_gemm(quant(detail::transpose_last2(p), slot_p, false),
                                      quant(detail::transpose_last2(g), slot_do, false));
      result[2] = as_dtype(dv, vv.shape(), vv.dtype());
    }
    if (next[0].node || next[1].node) {
      Tensor ds = amp::fp8_gemm(qg, quant(v3, slot_v, false));  // dP = dO V^T
      score_grad_rows<float>(p.data<float>(), ds.data<float>(), d,
                             inverse_sqrt_head_size<float>(d));
      if (next[0].node) {  // dQ = dS K
        const Tensor dq = amp::fp8_gemm(quant(ds, slot_ds, true),
                                        quant(detail::transpose_last2(k3), slot_k, false));
        result[0] = as_dtype(dq, qv.shape(), qv.dtype());
      }
      if (next[1].node) {  // dK = dS^T Q
        const Tensor dk = amp::fp8_gemm(quant(detail::transpose_last2(ds), slot_ds, !next[0].node),
                                        quant(detail::transpose_last2(q3), slot_q, false));
        result[1] = as_dtype(dk, kv.shape(), kv.dtype());
      }
    }
    return result;
  }
  void release() override {
    q.reset();
    k.reset();
    v.reset();
    lse.reset();
    quant.site.reset();
  }
};

}  // namespace

namespace detail {

Tensor fp8_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal,
                     amp::Fp8State& state) {
  const Tensor* inputs[] = {&q_in, &k_in, &v_in};
  const Fp8OpEntry entry = enter_fp8_op(OpKind::scaled_dot_product_attention, inputs);
  const Tensor &q = q_in, &k = k_in, &v = v_in;
  constexpr const char* op = "scaled_dot_product_attention (fp8)";
  for (const Tensor* t : inputs) {
    MIXP_CHECK(t->defined() && (t->dtype() == DType::f32 || t->dtype() == DType::bf16), op,
               ": q, k and v must be f32 or bf16");
  }
  const Dims d = attention_dims(op, q, k, v, causal);
  Fp8Quantizer quant;
  quant.recipe = state.recipe();
  quant.site = state.site(amp::fp8_next_site(), "attention", kAttentionRoles);
  quant.record = grad_mode_enabled();
  for (int s = 0; s < 4; ++s) quant.scales[s] = quant.site->metas[size_t(s)].scale;
  const DType out_dtype = entry.autocast_output.value_or(q.dtype());
  Tensor out, lse;
  {
    NoGradGuard no_grad;
    const Shape s3{d.bh, d.t, d.dh};
    const Tensor p = fp8_probabilities(quant(q.view(s3), slot_q, true),
                                       quant(k.view(s3), slot_k, true), d, lse, true);
    const Tensor o =
        amp::fp8_gemm(quant(p, slot_p, true), quant(transpose_last2(v.view(s3)), slot_v, true));
    out = as_dtype(o, q.shape(), out_dtype);
  }
  if (auto node = autograd::make_node<Fp8AttentionBackward>(op, {&q, &k, &v})) {
    node->q = autograd::SavedTensor(q);
    node->k = autograd::SavedTensor(k);
    node->v = autograd::SavedTensor(v);
    node->lse = autograd::SavedTensor(lse);
    node->d = d;
    node->quant = quant;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace detail

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    bool causal) {
  if (amp::Fp8State* fp8 = amp::fp8_active(); fp8 && !fp8->recipe().fp4) {
    return detail::fp8_attention(q_in, k_in, v_in, causal, *fp8);
  }
  const auto cast =
      amp::autocast_inputs(OpKind::scaled_dot_product_attention, {&q_in, &k_in, &v_in});
  const Tensor &q = cast[0], &k = cast[1], &v = cast[2];
  constexpr const char* op = "scaled_dot_product_attention";
  detail::check_floating(op, q, "query");
  detail::check_floating(op, k, "key");
  detail::check_floating(op, v, "value");
  detail::check_same_dtype(op, q, k);
  detail::check_same_dtype(op, q, v);
  const Dims d = attention_dims(op, q, k, v, causal);
  Tensor out, lse;
  if (reference_mode()) {
    out = detail::empty_like(q);
    lse = empty(Shape{d.bh, d.t}, accumulation_dtype(q.dtype()));
    visit_floating(q.dtype(), op, [&]<typename T>() {
      if (lse.dtype() == DType::f64) {
        forward_reference(q.data<T>(), k.data<T>(), v.data<T>(), d, out.data<T>(),
                          lse.data<double>());
      } else {
        forward_reference(q.data<T>(), k.data<T>(), v.data<T>(), d, out.data<T>(),
                          lse.data<float>());
      }
    });
  } else {
    out = forward_fast(q, k, v, d, lse);
  }
  if (auto node = autograd::make_node<AttentionBackward>(op, {&q, &k, &v})) {
    node->q = autograd::SavedTensor(q);
    node->k = autograd::SavedTensor(k);
    node->v = autograd::SavedTensor(v);
    node->lse = autograd::SavedTensor(lse);
    node->d = d;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
