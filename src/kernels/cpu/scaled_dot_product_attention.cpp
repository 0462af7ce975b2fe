// The CPU candidates of kernels/scaled_dot_product_attention.h: the tiled bf16 path, the chunked
// path (products by kernels/gemm_product.h, rows of scores in parallel) and the reference.
#include "kernels/scaled_dot_product_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/attention_tiled_bf16.h"
#include "kernels/elementwise.h"
#include "kernels/gemm_product.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

using attention::Dims;
using attention::inverse_sqrt_head_size;

// ---- the row passes: body(r, i) for row r of the scores, query i of its pair ----

template <typename Body>
void for_rows(const Dims& d, bool parallel, Body body) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) body(r, r % d.t);
  };
  if (parallel) {
    parallel_for(d.bh * d.t, std::max<int64_t>(1, 4096 / d.t), run);
  } else {
    run(0, d.bh * d.t);
  }
}

// Row r (of n values) rounded to bf16 into row r of `out` (for the bf16 products), when out is
// not null.
template <typename A>
void narrow_row(const A* row, int64_t r, int64_t n, bfloat16* out) {
  if constexpr (std::is_same_v<A, float>) {
    if (out != nullptr) narrow<bfloat16>(row, n, out + r * n);
  }
}

// Scores of each row (unscaled q k^T) become probabilities in place; lse gets each row's
// log-sum-exp of the scaled scores; p16, if not null, gets the probabilities rounded to bf16.
template <typename A>
void softmax_rows(A* s, A* lse, const Dims& d, bool parallel, bfloat16* p16 = nullptr) {
  const A scale = inverse_sqrt_head_size<A>(d);
  for_rows(d, parallel, [&](int64_t r, int64_t i) {
    A* row = s + r * d.t;
    const int64_t n = d.visible(i);
    lse[r] = attention::softmax_row(row, n, scale);
    for (int64_t j = n; j < d.t; ++j) row[j] = 0;
    narrow_row(row, r, d.t, p16);
  });
}

// The probabilities again, from unscaled scores and the saved log-sum-exp, as in forward.
template <typename A>
void probabilities_rows(A* s, const A* lse, const Dims& d, bool parallel, bfloat16* p16 = nullptr) {
  const A scale = inverse_sqrt_head_size<A>(d);
  for_rows(d, parallel, [&](int64_t r, int64_t i) {
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
void score_grad_rows(const A* p, A* dp, const Dims& d, bool parallel, bfloat16* ds16 = nullptr) {
  const A scale = inverse_sqrt_head_size<A>(d);
  for_rows(d, parallel, [&](int64_t r, int64_t i) {
    A* grow = dp + r * d.t;
    const int64_t n = d.visible(i);
    attention::score_grad_row(p + r * d.t, grow, n, scale);
    for (int64_t j = n; j < d.t; ++j) grow[j] = 0;
    narrow_row(grow, r, d.t, ds16);
  });
}

template <bool Parallel>
void softmax_rows_f32(Tensor& scores, Tensor& lse, const Dims& d) {
  softmax_rows<float>(scores.data<float>(), lse.data<float>(), d, Parallel);
}

template <bool Parallel>
void probabilities_rows_f32(Tensor& scores, const Tensor& lse, const Dims& d) {
  probabilities_rows<float>(scores.data<float>(), lse.data<float>(), d, Parallel);
}

template <bool Parallel>
void score_grad_rows_f32(const Tensor& p, Tensor& dp, const Dims& d) {
  score_grad_rows<float>(p.data<float>(), dp.data<float>(), d, Parallel);
}

// ---- tiled: bf16 on AVX-512 BF16 ----

bool tiled_forward_applies(const Tensor& q, const Tensor&, const Tensor&, const Dims& d,
                           const Tensor&, const Tensor&) {
  return q.dtype() == DType::bf16 && d.dh % 16 == 0;
}

void tiled_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, Tensor& out,
                   Tensor& lse) {
  const attention::HeadRows dense = attention::HeadRows::dense(d);
  attention::tiled_bf16_forward(d, q.data<bfloat16>(), k.data<bfloat16>(), v.data<bfloat16>(),
                                dense, out.data<bfloat16>(), dense, lse.data<float>());
}

bool tiled_backward_applies(const Tensor& q, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Dims& d, const Tensor&, const Tensor&,
                            const Tensor&) {
  return q.dtype() == DType::bf16 && d.dh % 16 == 0;
}

void tiled_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                    const Tensor& g, const Dims& d, Tensor& dq, Tensor& dk, Tensor& dv) {
  auto out = [](Tensor& t) { return t.defined() ? t.data<bfloat16>() : nullptr; };
  const attention::HeadRows dense = attention::HeadRows::dense(d);
  attention::tiled_bf16_backward(d, q.data<bfloat16>(), k.data<bfloat16>(), v.data<bfloat16>(),
                                 dense, lse.data<float>(), g.data<bfloat16>(), dense, out(dq),
                                 out(dk), out(dv));
}

// ---- chunked: the products by gemm_product, rows of scores in parallel ----

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

// The dtype of the products' operands beside P and dS: bf16 for bf16 inputs, else the
// accumulation dtype.
DType operand_dtype(DType in) { return in == DType::bf16 ? DType::bf16 : accumulation_dtype(in); }

Tensor as_operand(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : t.to(dtype).detach();
}

// a b per s into a new [s.batch, s.m, s.n] tensor of `dtype`.
Tensor product(const GemmShape& s, const Tensor& a, const Tensor& b, DType dtype) {
  Tensor out = empty(Shape{s.batch, s.m, s.n}, dtype, MemoryTag::activation, a.device());
  gemm_product(s, a, b, Tensor(), out);
  return out;
}

// q k^T for every (batch, head): [BH, T, T] in the accumulation dtype.
Tensor scores(const Tensor& q, const Tensor& k, const Dims& d) {
  return product({.batch = d.bh,
                  .m = d.t,
                  .n = d.t,
                  .k = d.dh,
                  .trans_b = true,
                  .batch_a = d.bh,
                  .batch_b = d.bh},
                 q, k, accumulation_dtype(q.dtype()));
}

// (batch, head) pairs per chunk. The T x T scores (and in backward their gradient) exist for one
// chunk at a time instead of for every pair at once: with nanoGPT's shape (96 pairs of 256 x 256)
// they were 24 MiB each, two of them alive at the peak of a bf16 step's backward. At most 16 MiB
// of scores a chunk, counted at 8 bytes an element (f64's size; 8 MiB in fp32): smaller chunks
// made the gpt step slower (more, smaller products). The pairs are independent, so chunking
// changes no result.
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

void chunked_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, Tensor& out,
                     Tensor& lse) {
  const DType acc = accumulation_dtype(q.dtype()), operand = operand_dtype(q.dtype());
  const Shape s3{d.bh, d.t, d.dh};
  const Tensor q3 = q.view(s3), k3 = k.view(s3), v3 = v.view(s3), out3 = out.view(s3);
  for_chunks(d, [&](int64_t begin, int64_t end, const Dims& c) {
    Tensor p = scores(q3.slice(begin, end), k3.slice(begin, end), c);
    Tensor p16 = bf16_operand(c, operand);
    Tensor lse_c = lse.slice(begin, end);
    visit_accumulation(acc, [&]<typename A>() {
      softmax_rows<A>(p.data<A>(), lse_c.data<A>(), c, true, data_or_null(p16));
    });
    if (p16.defined()) p = Tensor();  // the fp32 probabilities are done with
    Tensor out_c = out3.slice(begin, end);
    gemm_product({.batch = c.bh, .m = c.t, .n = c.dh, .k = c.t, .batch_a = c.bh, .batch_b = c.bh},
                 p16.defined() ? p16 : p, as_operand(v3.slice(begin, end), operand), Tensor(),
                 out_c);
  });
}

// The gradients of one chunk of pairs: the slices of q, k, v, g, lse and of the needed results.
struct ChunkGrads {
  Tensor q, k, v, g, lse;
  Tensor dq, dk, dv;  // undefined where not needed
};

void chunked_backward_chunk(ChunkGrads& t, const Dims& c, DType acc, DType operand) {
  const GemmShape transposed_a{.batch = c.bh,
                               .m = c.t,
                               .n = c.dh,
                               .k = c.t,
                               .trans_a = true,
                               .batch_a = c.bh,
                               .batch_b = c.bh};
  const GemmShape plain{
      .batch = c.bh, .m = c.t, .n = c.dh, .k = c.t, .batch_a = c.bh, .batch_b = c.bh};
  Tensor p = scores(t.q, t.k, c);
  Tensor p16 = bf16_operand(c, operand);
  visit_accumulation(acc, [&]<typename A>() {
    probabilities_rows<A>(p.data<A>(), t.lse.data<A>(), c, true, data_or_null(p16));
  });
  if (t.dv.defined()) {
    gemm_product(transposed_a, p16.defined() ? p16 : p, as_operand(t.g, operand), Tensor(), t.dv);
  }
  p16 = Tensor();
  if (!t.dq.defined() && !t.dk.defined()) return;
  Tensor ds = product({.batch = c.bh,
                       .m = c.t,
                       .n = c.t,
                       .k = c.dh,
                       .trans_b = true,
                       .batch_a = c.bh,
                       .batch_b = c.bh},
                      t.g, t.v, acc);
  Tensor ds16 = bf16_operand(c, operand);
  visit_accumulation(acc, [&]<typename A>() {
    score_grad_rows<A>(p.data<A>(), ds.data<A>(), c, true, data_or_null(ds16));
  });
  p = Tensor();
  if (ds16.defined()) ds = ds16;
  if (t.dq.defined()) gemm_product(plain, ds, as_operand(t.k, operand), Tensor(), t.dq);
  if (t.dk.defined()) gemm_product(transposed_a, ds, as_operand(t.q, operand), Tensor(), t.dk);
}

void chunked_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                      const Tensor& g, const Dims& d, Tensor& dq, Tensor& dk, Tensor& dv) {
  const DType acc = accumulation_dtype(q.dtype()), operand = operand_dtype(q.dtype());
  const Shape s3{d.bh, d.t, d.dh};
  const Tensor lse_acc = lse.to(acc).detach();
  auto part = [&](const Tensor& t, int64_t begin, int64_t end) {
    return t.defined() ? t.view(s3).slice(begin, end) : Tensor();
  };
  for_chunks(d, [&](int64_t begin, int64_t end, const Dims& c) {
    ChunkGrads t{.q = part(q, begin, end),
                 .k = part(k, begin, end),
                 .v = part(v, begin, end),
                 .g = part(g, begin, end),
                 .lse = lse_acc.slice(begin, end),
                 .dq = part(dq, begin, end),
                 .dk = part(dk, begin, end),
                 .dv = part(dv, begin, end)};
    chunked_backward_chunk(t, c, acc, operand);
  });
}

// ---- reference: serial, in double, rounded once (P and dS also once for bf16) ----

// P or dS as the products see it: rounded once to bf16 for bf16 inputs.
template <typename T>
double product_operand(double x) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return to_double(from_double<T>(x));
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
      dot += to_double(q[(b * d.t + i) * d.dh + c]) * to_double(k[(b * d.t + j) * d.dh + c]);
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
          o[size_t(c)] += pj * to_double(v[(b * d.t + j) * d.dh + c]);
        }
      }
      for (int64_t c = 0; c < d.dh; ++c) {
        out[(b * d.t + i) * d.dh + c] = from_double<T>(o[size_t(c)]);
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
          acc += to_double(g[at(b, i, c)]) * to_double(v[at(b, j, c)]);
        }
        dp[size_t(j)] = acc;
        dot += s[size_t(j)] * acc;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double pj = product_operand<T>(s[size_t(j)]);
        const double ds = product_operand<T>(s[size_t(j)] * (dp[size_t(j)] - dot) * scale);
        for (int64_t c = 0; c < d.dh; ++c) {
          aq[size_t(at(b, i, c))] += ds * to_double(k[at(b, j, c)]);
          ak[size_t(at(b, j, c))] += ds * to_double(q[at(b, i, c)]);
          av[size_t(at(b, j, c))] += pj * to_double(g[at(b, i, c)]);
        }
      }
    }
  }
  for (size_t e = 0; e < total; ++e) {
    if (dq != nullptr) dq[e] = from_double<T>(aq[e]);
    if (dk != nullptr) dk[e] = from_double<T>(ak[e]);
    if (dv != nullptr) dv[e] = from_double<T>(av[e]);
  }
}

void reference_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d,
                       Tensor& out, Tensor& lse) {
  visit_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    if (lse.dtype() == DType::f64) {
      forward_reference(q.data<T>(), k.data<T>(), v.data<T>(), d, out.data<T>(),
                        lse.data<double>());
    } else {
      forward_reference(q.data<T>(), k.data<T>(), v.data<T>(), d, out.data<T>(), lse.data<float>());
    }
  });
}

void reference_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&,
                        const Tensor& g, const Dims& d, Tensor& dq, Tensor& dk, Tensor& dv) {
  visit_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    auto out = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
    backward_reference(q.data<T>(), k.data<T>(), v.data<T>(), g.data<T>(), d, out(dq), out(dk),
                       out(dv));
  });
}

}  // namespace

Kernel<AttentionForwardFn> attention_forward(
    "attention_forward", {{.name = "tiled_bf16",
                           .isa = Isa::avx512_bf16,
                           .applies = tiled_forward_applies,
                           .fn = tiled_forward},
                          {.name = "chunked", .fn = chunked_forward},
                          {.name = "reference", .fn = reference_forward, .fallback = true}});

Kernel<AttentionBackwardFn> attention_backward(
    "attention_backward", {{.name = "tiled_bf16",
                            .isa = Isa::avx512_bf16,
                            .applies = tiled_backward_applies,
                            .fn = tiled_backward},
                           {.name = "chunked", .fn = chunked_backward},
                           {.name = "reference", .fn = reference_backward, .fallback = true}});

Kernel<AttentionSoftmaxRowsFn> attention_softmax_rows(
    "attention_softmax_rows",
    {{.name = "openmp", .fn = softmax_rows_f32<true>},
     {.name = "scalar", .fn = softmax_rows_f32<false>, .fallback = true}});

Kernel<AttentionProbabilitiesRowsFn> attention_probabilities_rows(
    "attention_probabilities_rows",
    {{.name = "openmp", .fn = probabilities_rows_f32<true>},
     {.name = "scalar", .fn = probabilities_rows_f32<false>, .fallback = true}});

Kernel<AttentionScoreGradRowsFn> attention_score_grad_rows(
    "attention_score_grad_rows",
    {{.name = "openmp", .fn = score_grad_rows_f32<true>},
     {.name = "scalar", .fn = score_grad_rows_f32<false>, .fallback = true}});

}  // namespace mixp::kernels
