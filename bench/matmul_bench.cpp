// mixp's matmul against a bare oneDNN matmul primitive of the same shape and dtypes, timed
// alternately in the same run.
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/bench.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"

namespace mixp::bench {
namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double seconds(F&& work) {
  const auto start = Clock::now();
  work();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int run_matmul(const MatmulBenchOptions& o, std::FILE* out) {
  MIXP_CHECK(o.dtype == DType::f32 || o.dtype == DType::bf16,
             "bench matmul: --dtype must be f32 or bf16, got ", name_of(o.dtype));
  MIXP_CHECK(o.m > 0 && o.k > 0 && o.n > 0, "bench matmul: sizes must be positive, got m ", o.m,
             " k ", o.k, " n ", o.n);
  MIXP_CHECK(o.reps >= 1, "bench matmul: --reps must be at least 1, got ", o.reps);
  NoGradGuard no_grad;
  Philox rng(PhiloxState{1, 0, 0});
  const Tensor a = randn({o.m, o.k}, rng, 1.0, o.dtype);
  const Tensor b = randn({o.k, o.n}, rng, 1.0, o.dtype);

  // The bare primitive: same shape, same input and output dtypes, plain row-major layouts.
  using dt = dnnl::memory::data_type;
  const dt type = o.dtype == DType::bf16 ? dt::bf16 : dt::f32;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::desc a_md({o.m, o.k}, type, dnnl::memory::format_tag::ab);
  const dnnl::memory::desc b_md({o.k, o.n}, type, dnnl::memory::format_tag::ab);
  const dnnl::memory::desc c_md({o.m, o.n}, type, dnnl::memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
  const dnnl::matmul bare(pd);
  Tensor c_bare = empty({o.m, o.n}, o.dtype);
  dnnl::memory a_mem(a_md, engine, const_cast<void*>(a.raw_data()));
  dnnl::memory b_mem(b_md, engine, const_cast<void*>(b.raw_data()));
  dnnl::memory c_mem(c_md, engine, c_bare.raw_data());
  auto run_bare = [&] {
    bare.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  };
  Tensor c_mixp;
  auto run_mixp = [&] { c_mixp = ops::matmul(a, b); };

  run_bare();  // warm up: JIT, caches, first touch
  run_mixp();
  std::vector<double> t_bare, t_mixp;
  for (int r = 0; r < o.reps; ++r) {
    t_bare.push_back(seconds(run_bare));
    t_mixp.push_back(seconds(run_mixp));
  }
  const double flop = 2.0 * double(o.m) * double(o.n) * double(o.k);
  const double g_bare = flop / median(t_bare) * 1e-9, g_mixp = flop / median(t_mixp) * 1e-9;
  std::fprintf(out,
               "mixp bench matmul: %s, m %lld k %lld n %lld, %d threads, median of %d runs "
               "(alternating)\n",
               name_of(o.dtype), static_cast<long long>(o.m), static_cast<long long>(o.k),
               static_cast<long long>(o.n), num_threads(), o.reps);
  std::fprintf(out, "%-14s %10s %10s\n", "", "ms", "GFLOP/s");
  std::fprintf(out, "%-14s %10.2f %10.1f\n", "oneDNN (bare)", median(t_bare) * 1e3, g_bare);
  std::fprintf(out, "%-14s %10.2f %10.1f\n", "mixp matmul", median(t_mixp) * 1e3, g_mixp);
  std::fprintf(out, "mixp / oneDNN: %.1f%%\n", 100.0 * g_mixp / g_bare);
  return 0;
}

}  // namespace mixp::bench
