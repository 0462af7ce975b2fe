// batch_norm: y = (x - mean[c]) * rstd[c] * weight[c] + bias[c] per channel c, rstd = 1 /
// sqrt(var + eps), computed in fp32 (f64 for f64 inputs); the result has x's dtype, rounded
// once. Training uses the batch's mean and biased variance over N and the spatial dims, and
// updates tracked running stats in place, as PyTorch does:
//   running_mean = (1 - momentum) running_mean + momentum mean,
//   running_var  = (1 - momentum) running_var  + momentum var * M / (M - 1)   (M values per
//   channel: the unbiased variance). Evaluation uses the running stats.
// Shape contract: x [N, C, ...] (NCHW, [N, C], [N, C, L]); weight and bias [C] (any floating
// dtype each) or undefined (no scale, no shift); running_mean and running_var f32 [C], or
// undefined when not tracked (training only); the result has x's shape and dtype.
// Backward, with xhat = (x - mean) * rstd and sums over the M values of a channel:
//   training  dx = weight rstd (g - sum(g) / M - xhat sum(g xhat) / M),
//   eval      dx = weight rstd g (the running stats are constants),
//   dweight = sum(g xhat), dbias = sum(g), accumulated in fp32 (f64 for f64) and returned in
//   the weight's and the bias's dtype.
// Saved: x in its dtype, and the per-channel mean and rstd used, in fp32 (f64 for f64).
#include <cmath>
#include <memory>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

/// x viewed as [n, c, s]: "units" are the n * c contiguous runs of s values, unit u belongs to
/// channel u % c.
struct Geometry {
  int64_t n, c, s;
  int64_t units() const { return n * c; }
  int64_t per_channel() const { return n * s; }
  /// Units per parallel chunk: about 16 blocks of values.
  int64_t grain() const {
    return std::max<int64_t>(1, 16 * kernels::kBlock / std::max<int64_t>(s, 1));
  }
};

/// Per-channel sums of `k` quantities: chunk(begin, end, partial) adds the contributions of
/// units [begin, end) to partial[channel * k + i]. Chunks are fixed by the geometry and their
/// partials are added in chunk order, so the sums do not depend on the thread count.
template <typename Acc, typename Chunk>
std::vector<Acc> channel_sums(Geometry geo, int64_t k, const Chunk& chunk) {
  const int64_t grain = geo.grain(), units = geo.units();
  const int64_t chunks = (units + grain - 1) / grain;
  std::vector<Acc> partial(static_cast<size_t>(chunks * geo.c * k), Acc(0));
  kernels::parallel_for(units, grain, [&](int64_t begin, int64_t end) {
    chunk(begin, end, partial.data() + (begin / grain) * geo.c * k);
  });
  std::vector<Acc> total(static_cast<size_t>(geo.c * k), Acc(0));
  for (int64_t p = 0; p < chunks; ++p) {
    for (int64_t i = 0; i < geo.c * k; ++i) total[size_t(i)] += partial[size_t(p * geo.c * k + i)];
  }
  return total;
}

/// A chunk's widened values: every element is written before it is read, so the buffer is
/// left uninitialized (a zeroed std::vector cost a memset of every chunk: 3% of a cnn step).
template <typename C>
std::unique_ptr<C[]> chunk_scratch(int64_t len) {
  return std::make_unique_for_overwrite<C[]>(static_cast<size_t>(len));
}

/// The per-channel statistics a forward uses and saves.
template <typename Acc>
struct Stats {
  std::vector<Acc> mean, rstd;
  std::vector<Acc> var;  // training: the biased batch variance, for the running update
};

// ---- fast: fp32 compute (f64 for f64), chunks of units in parallel ----

template <typename T>
Stats<kernels::Compute<T>> batch_stats_fast(const T* x, Geometry geo, double eps) {
  using C = kernels::Compute<T>;
  const int64_t s = geo.s;
  const std::vector<C> sums = channel_sums<C>(geo, 1, [&](int64_t begin, int64_t end, C* p) {
    const auto v = chunk_scratch<C>((end - begin) * s);
    kernels::widen(x + begin * s, (end - begin) * s, v.get());
    for (int64_t u = begin; u < end; ++u)
      p[u % geo.c] += detail::row_sum(v.get() + (u - begin) * s, s);
  });
  Stats<C> st;
  st.mean.resize(sums.size());
  for (size_t c = 0; c < sums.size(); ++c) st.mean[c] = sums[c] / C(geo.per_channel());
  const std::vector<C> squares = channel_sums<C>(geo, 1, [&](int64_t begin, int64_t end, C* p) {
    const auto v = chunk_scratch<C>((end - begin) * s);
    kernels::widen(x + begin * s, (end - begin) * s, v.get());
    for (int64_t u = begin; u < end; ++u) {
      const C m = st.mean[size_t(u % geo.c)];
      C* run = v.get() + (u - begin) * s;  // a copy: becomes x - mean
      for (int64_t i = 0; i < s; ++i) run[i] -= m;
      p[u % geo.c] += detail::row_dot(run, run, s);
    }
  });
  st.var.resize(sums.size());
  st.rstd.resize(sums.size());
  for (size_t c = 0; c < sums.size(); ++c) {
    st.var[c] = squares[c] / C(geo.per_channel());
    st.rstd[c] = C(1) / std::sqrt(st.var[c] + C(eps));
  }
  return st;
}

template <typename T>
void normalize_fast(const T* x, Geometry geo, const Stats<kernels::Compute<T>>& st,
                    const std::vector<kernels::Compute<T>>& w,
                    const std::vector<kernels::Compute<T>>& b, T* y) {
  using C = kernels::Compute<T>;
  const int64_t s = geo.s;
  kernels::parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
    const auto v = chunk_scratch<C>((end - begin) * s);
    kernels::widen(x + begin * s, (end - begin) * s, v.get());
    for (int64_t u = begin; u < end; ++u) {
      const size_t c = size_t(u % geo.c);
      const C m = st.mean[c], rs = st.rstd[c];
      const C scale = w.empty() ? C(1) : w[c], shift = b.empty() ? C(0) : b[c];
      C* run = v.get() + (u - begin) * s;
      for (int64_t i = 0; i < s; ++i) run[i] = (run[i] - m) * rs * scale + shift;
    }
    kernels::narrow(v.get(), (end - begin) * s, y + begin * s);
  });
}

/// sum(g) and sum(g xhat) per channel, as [c][2].
template <typename T>
std::vector<kernels::Compute<T>> grad_sums_fast(const T* x, const T* g, Geometry geo,
                                                const kernels::Compute<T>* mean,
                                                const kernels::Compute<T>* rstd) {
  using C = kernels::Compute<T>;
  const int64_t s = geo.s;
  return channel_sums<C>(geo, 2, [&](int64_t begin, int64_t end, C* p) {
    const int64_t len = (end - begin) * s;
    const auto xv = chunk_scratch<C>(len), gv = chunk_scratch<C>(len);
    kernels::widen(x + begin * s, len, xv.get());
    kernels::widen(g + begin * s, len, gv.get());
    for (int64_t u = begin; u < end; ++u) {
      const int64_t c = u % geo.c;
      const C m = mean[c], rs = rstd[c];
      C* xhat = xv.get() + (u - begin) * s;  // a copy of x: becomes xhat
      const C* gr = gv.get() + (u - begin) * s;
      for (int64_t i = 0; i < s; ++i) xhat[i] = (xhat[i] - m) * rs;
      p[2 * c] += detail::row_sum(gr, s);
      p[2 * c + 1] += detail::row_dot(gr, xhat, s);
    }
  });
}

template <typename T>
void grad_input_fast(const T* x, const T* g, Geometry geo, const kernels::Compute<T>* mean,
                     const kernels::Compute<T>* rstd, const std::vector<kernels::Compute<T>>& w,
                     const std::vector<kernels::Compute<T>>& sums, bool training, T* dx) {
  using C = kernels::Compute<T>;
  const int64_t s = geo.s;
  const C count = C(geo.per_channel());
  kernels::parallel_for(geo.units(), geo.grain(), [&](int64_t begin, int64_t end) {
    const int64_t len = (end - begin) * s;
    const auto xv = chunk_scratch<C>(len), gv = chunk_scratch<C>(len);
    kernels::widen(x + begin * s, len, xv.get());
    kernels::widen(g + begin * s, len, gv.get());
    for (int64_t u = begin; u < end; ++u) {
      const int64_t c = u % geo.c;
      const C m = mean[c], rs = rstd[c], scale = w.empty() ? C(1) : w[size_t(c)];
      C* xr = xv.get() + (u - begin) * s;
      const C* gr = gv.get() + (u - begin) * s;
      if (training) {
        const C mean_g = sums[size_t(2 * c)] / count, mean_gx = sums[size_t(2 * c + 1)] / count;
        for (int64_t i = 0; i < s; ++i) {
          xr[i] = scale * rs * (gr[i] - mean_g - (xr[i] - m) * rs * mean_gx);
        }
      } else {
        for (int64_t i = 0; i < s; ++i) xr[i] = scale * rs * gr[i];
      }
    }
    kernels::narrow(xv.get(), len, dx + begin * s);
  });
}

// ---- reference: serial, double ----

template <typename T>
Stats<double> batch_stats_reference(const T* x, Geometry geo, double eps) {
  Stats<double> st;
  st.mean.assign(static_cast<size_t>(geo.c), 0.0);
  st.var.assign(static_cast<size_t>(geo.c), 0.0);
  st.rstd.assign(static_cast<size_t>(geo.c), 0.0);
  for (int64_t u = 0; u < geo.units(); ++u) {
    for (int64_t i = 0; i < geo.s; ++i)
      st.mean[size_t(u % geo.c)] += kernels::to_double(x[u * geo.s + i]);
  }
  for (double& m : st.mean) m /= double(geo.per_channel());
  for (int64_t u = 0; u < geo.units(); ++u) {
    const size_t c = size_t(u % geo.c);
    for (int64_t i = 0; i < geo.s; ++i) {
      const double d = kernels::to_double(x[u * geo.s + i]) - st.mean[c];
      st.var[c] += d * d;
    }
  }
  for (size_t c = 0; c < st.var.size(); ++c) {
    st.var[c] /= double(geo.per_channel());
    st.rstd[c] = 1.0 / std::sqrt(st.var[c] + eps);
  }
  return st;
}

template <typename T>
void normalize_reference(const T* x, Geometry geo, const Stats<double>& st,
                         const std::vector<double>& w, const std::vector<double>& b, T* y) {
  for (int64_t u = 0; u < geo.units(); ++u) {
    const size_t c = size_t(u % geo.c);
    const double scale = w.empty() ? 1.0 : w[c], shift = b.empty() ? 0.0 : b[c];
    for (int64_t i = 0; i < geo.s; ++i) {
      const int64_t at = u * geo.s + i;
      y[at] = kernels::from_double<T>(
          (kernels::to_double(x[at]) - st.mean[c]) * st.rstd[c] * scale + shift);
    }
  }
}

template <typename T>
std::vector<double> grad_sums_reference(const T* x, const T* g, Geometry geo,
                                        const kernels::Compute<T>* mean,
                                        const kernels::Compute<T>* rstd) {
  std::vector<double> sums(static_cast<size_t>(2 * geo.c), 0.0);
  for (int64_t u = 0; u < geo.units(); ++u) {
    const int64_t c = u % geo.c;
    const double m = double(mean[c]), rs = double(rstd[c]);
    for (int64_t i = 0; i < geo.s; ++i) {
      const int64_t at = u * geo.s + i;
      const double gi = kernels::to_double(g[at]);
      sums[size_t(2 * c)] += gi;
      sums[size_t(2 * c + 1)] += gi * (kernels::to_double(x[at]) - m) * rs;
    }
  }
  return sums;
}

template <typename T>
void grad_input_reference(const T* x, const T* g, Geometry geo, const kernels::Compute<T>* mean,
                          const kernels::Compute<T>* rstd, const std::vector<double>& w,
                          const std::vector<double>& sums, bool training, T* dx) {
  const double count = double(geo.per_channel());
  for (int64_t u = 0; u < geo.units(); ++u) {
    const int64_t c = u % geo.c;
    const double m = double(mean[c]), rs = double(rstd[c]), scale = w.empty() ? 1.0 : w[size_t(c)];
    const double mean_g = sums[size_t(2 * c)] / count, mean_gx = sums[size_t(2 * c + 1)] / count;
    for (int64_t i = 0; i < geo.s; ++i) {
      const int64_t at = u * geo.s + i;
      const double gi = kernels::to_double(g[at]);
      const double xh = (kernels::to_double(x[at]) - m) * rs;
      dx[at] = kernels::from_double<T>(training ? scale * rs * (gi - mean_g - xh * mean_gx)
                                                : scale * rs * gi);
    }
  }
}

// ---- autograd ----

Geometry geometry_of(const Shape& shape) {
  Geometry geo{.n = shape[0], .c = shape[1], .s = 1};
  for (int d = 2; d < shape.ndim(); ++d) geo.s *= shape[d];
  return geo;
}

struct BatchNormBackward : autograd::Node {
  autograd::SavedTensor x, weight, mean, rstd;
  DType weight_dtype = DType::f32, bias_dtype = DType::f32;
  bool has_bias = false, training = true;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get(), mv = mean.get(), rv = rstd.get();
    const Tensor g = grads[0].dtype() == xv.dtype() ? grads[0] : grads[0].to(xv.dtype()).detach();
    const Geometry geo = geometry_of(xv.shape());
    const bool want_dx = next[0].node != nullptr;
    const bool want_dw = wv.defined() && next[1].node, want_db = has_bias && next[2].node;
    const bool need_sums = (want_dx && training) || want_dw || want_db;
    Tensor dx = want_dx ? detail::empty_like(xv) : Tensor(), dw, db;
    visit_floating(xv.dtype(), name, [&]<typename T>() {
      using C = kernels::Compute<T>;
      auto finish = [&]<typename Acc>(const std::vector<Acc>& sums) {
        std::vector<Acc> sum_g(static_cast<size_t>(geo.c)), sum_gx(static_cast<size_t>(geo.c));
        for (size_t c = 0; c < sum_g.size(); ++c) {
          sum_g[c] = sums[2 * c];
          sum_gx[c] = sums[2 * c + 1];
        }
        if (want_dw) dw = detail::tensor_from(sum_gx, weight_dtype);
        if (want_db) db = detail::tensor_from(sum_g, bias_dtype);
      };
      const T* xd = xv.data<T>();
      const T* gd = g.data<T>();
      if (reference_mode()) {
        std::vector<double> sums(static_cast<size_t>(2 * geo.c), 0.0);
        if (need_sums) sums = grad_sums_reference<T>(xd, gd, geo, mv.data<C>(), rv.data<C>());
        if (want_dx) {
          grad_input_reference<T>(xd, gd, geo, mv.data<C>(), rv.data<C>(),
                                  detail::values_as<double>(wv), sums, training, dx.data<T>());
        }
        finish(sums);
      } else {
        std::vector<C> sums(static_cast<size_t>(2 * geo.c), C(0));
        if (need_sums) sums = grad_sums_fast<T>(xd, gd, geo, mv.data<C>(), rv.data<C>());
        if (want_dx) {
          grad_input_fast<T>(xd, gd, geo, mv.data<C>(), rv.data<C>(), detail::values_as<C>(wv),
                             sums, training, dx.data<T>());
        }
        finish(sums);
      }
    });
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
    mean.reset();
    rstd.reset();
  }
};

void check_channels(const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  MIXP_CHECK(t.ndim() == 1 && t.size(0) == x.size(1), "batch_norm: the ", what, " must be [",
             x.size(1), "] for input ", x.shape().to_string(), " (channels in dimension 1), got ",
             t.shape().to_string());
}

void check_running(const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  check_channels(x, t, what);
  MIXP_CHECK(t.dtype() == DType::f32, "batch_norm: the ", what, " must be f32, got ",
             name_of(t.dtype()), " ", t.shape().to_string(),
             " (running stats stay fp32 whatever the input's dtype)");
}

/// running = (1 - momentum) running + momentum batch, in Acc, stored as f32 with copy_ (which
/// autograd does not record, and which bumps the version so that a saved copy would notice).
template <typename Acc>
void update_running(Tensor& running, const std::vector<Acc>& batch, double momentum) {
  if (!running.defined()) return;
  std::vector<Acc> updated = detail::values_as<Acc>(running);
  for (size_t c = 0; c < updated.size(); ++c) {
    updated[c] = (Acc(1) - Acc(momentum)) * updated[c] + Acc(momentum) * batch[c];
  }
  running.copy_(detail::tensor_from(updated, DType::f32));
}

/// The statistics an evaluation normalizes with: the running mean, and rstd from the running
/// variance.
template <typename Acc>
Stats<Acc> running_stats(const Tensor& running_mean, const Tensor& running_var, double eps) {
  Stats<Acc> st;
  st.mean = detail::values_as<Acc>(running_mean);
  st.rstd = detail::values_as<Acc>(running_var);
  for (Acc& r : st.rstd) r = Acc(1) / std::sqrt(r + Acc(eps));
  return st;
}

/// Updates tracked running stats from the batch's: its mean, and its variance made unbiased.
template <typename Acc>
void update_running_stats(const Stats<Acc>& batch, Geometry geo, double momentum,
                          Tensor& running_mean, Tensor& running_var) {
  const Acc unbias = Acc(double(geo.per_channel()) / double(geo.per_channel() - 1));
  std::vector<Acc> unbiased(batch.var.size());
  for (size_t c = 0; c < unbiased.size(); ++c) unbiased[c] = batch.var[c] * unbias;
  update_running(running_mean, batch.mean, momentum);
  update_running(running_var, unbiased, momentum);
}

/// Copies the statistics used into the tensors saved for backward.
template <typename Acc, typename C>
void save_stats(const Stats<Acc>& st, Tensor& mean, Tensor& rstd) {
  for (size_t c = 0; c < st.mean.size(); ++c) {
    mean.data<C>()[c] = C(st.mean[c]);
    rstd.data<C>()[c] = C(st.rstd[c]);
  }
}

}  // namespace

Tensor batch_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                  Tensor& running_mean, Tensor& running_var, bool training, double momentum,
                  double eps) {
  const auto cast = amp::autocast_inputs(OpKind::batch_norm, {&x_in, &weight_in, &bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  detail::check_floating("batch_norm", x);
  MIXP_CHECK(x.ndim() >= 2, "batch_norm: the input must be [N, C, ...], got ",
             x.shape().to_string());
  MIXP_CHECK(std::isfinite(eps) && eps >= 0,
             "batch_norm: eps must be finite and non-negative, got ", eps);
  MIXP_CHECK(momentum >= 0 && momentum <= 1, "batch_norm: momentum must be in [0, 1], got ",
             momentum);
  if (weight.defined()) detail::check_floating("batch_norm", weight, "weight");
  if (bias.defined()) detail::check_floating("batch_norm", bias, "bias");
  check_channels(x, weight, "weight");
  check_channels(x, bias, "bias");
  check_running(x, running_mean, "running_mean");
  check_running(x, running_var, "running_var");
  MIXP_CHECK(
      running_mean.defined() == running_var.defined(),
      "batch_norm: running_mean and running_var must both be given or both be undefined (input ",
      x.shape().to_string(), ")");
  const Geometry geo = geometry_of(x.shape());
  if (training) {
    MIXP_CHECK(geo.per_channel() > 1,
               "batch_norm: training needs more than one value per channel, got input ",
               x.shape().to_string());
  } else {
    MIXP_CHECK(running_mean.defined(),
               "batch_norm: evaluation needs running_mean and running_var (input ",
               x.shape().to_string(), ")");
  }
  Tensor y = detail::empty_like(x);
  Tensor mean = empty({geo.c}, detail::accumulation_dtype(x.dtype()));
  Tensor rstd = empty({geo.c}, detail::accumulation_dtype(x.dtype()));
  visit_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using C = kernels::Compute<T>;
    if (reference_mode()) {
      Stats<double> st;
      if (training) {
        st = batch_stats_reference<T>(x.data<T>(), geo, eps);
        update_running_stats(st, geo, momentum, running_mean, running_var);
      } else {
        st = running_stats<double>(running_mean, running_var, eps);
      }
      normalize_reference<T>(x.data<T>(), geo, st, detail::values_as<double>(weight),
                             detail::values_as<double>(bias), y.data<T>());
      save_stats<double, C>(st, mean, rstd);
    } else {
      Stats<C> st;
      if (training) {
        st = batch_stats_fast<T>(x.data<T>(), geo, eps);
        update_running_stats(st, geo, momentum, running_mean, running_var);
      } else {
        st = running_stats<C>(running_mean, running_var, eps);
      }
      normalize_fast<T>(x.data<T>(), geo, st, detail::values_as<C>(weight),
                        detail::values_as<C>(bias), y.data<T>());
      save_stats<C, C>(st, mean, rstd);
    }
  });
  if (auto node = autograd::make_node<BatchNormBackward>("batch_norm", {&x, &weight, &bias})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->mean = autograd::SavedTensor(mean);
    node->rstd = autograd::SavedTensor(rstd);
    if (weight.defined()) node->weight_dtype = weight.dtype();
    if (bias.defined()) node->bias_dtype = bias.dtype();
    node->has_bias = bias.defined();
    node->training = training;
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
