// oneDNN convolution, forward, backward-data and backward-weights (the 2.x API: an op desc,
// then a primitive desc). The primitives choose their own (blocked) layouts; the PyTorch-layout
// buffers of mixp are reordered in and out, which is exact. Building a primitive descriptor
// runs oneDNN's implementation search, as costly as a small convolution; a training step
// repeats the same shapes, so each pass's descriptor and primitive are kept per shape.
#include <omp.h>
#include <algorithm>
#include <cstring>
#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "kernels/channel_blocks.h"
#include "kernels/conv.h"
#include "kernels/cpu/dnnl_runtime.h"
#include "kernels/gemm.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;

struct Geometry {
  dims src, weights, dst, strides, dilates, pad_l, pad_r;
  tag weights_tag;
};

Geometry geometry(const ConvShape& s) {
  Geometry g;
  g.src = {s.n, s.c, s.h, s.w};
  g.dst = {s.n, s.o, s.oh, s.ow};
  if (s.groups == 1) {
    g.weights = {s.o, s.c, s.kh, s.kw};
    g.weights_tag = tag::oihw;
  } else {  // [o, c / g, kh, kw] is [g, o / g, c / g, kh, kw] in memory
    g.weights = {s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw};
    g.weights_tag = tag::goihw;
  }
  g.strides = {s.stride_h, s.stride_w};
  g.dilates = {s.dilation_h - 1, s.dilation_w - 1};  // oneDNN counts dilation from 0
  // oneDNN checks (src + pad_l + pad_r - extent) / stride + 1 == dst, with PyTorch's floor.
  g.pad_l = {s.pad_h, s.pad_w};
  g.pad_r = {s.pad_h, s.pad_w};
  return g;
}

dt dnnl_type(DType in) { return in == DType::bf16 ? dt::bf16 : dt::f32; }

dnnl::memory::desc any(const dims& d, dt type) { return dnnl::memory::desc(d, type, tag::any); }

// The forward without bias and with an f32 result: also the hint of the backward passes.
dnnl::convolution_forward::primitive_desc forward_pd(const Geometry& g, dt in, DnnlRuntime& r) {
  const dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, any(g.src, in),
      any(g.weights, in), any(g.dst, dt::f32), g.strides, g.dilates, g.pad_l, g.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, r.engine);
}

// The forward with an f32 bias added to the fp32 accumulation before the one rounding to `out`.
dnnl::convolution_forward::primitive_desc biased_forward_pd(const Geometry& g, dt in, dt out,
                                                            DnnlRuntime& r) {
  const dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, any(g.src, in),
      any(g.weights, in), dnnl::memory::desc({g.dst[1]}, dt::f32, tag::x), any(g.dst, out),
      g.strides, g.dilates, g.pad_l, g.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, r.engine);
}

// oneDNN's threads for the scope: its primitives split their work over omp_get_max_threads()
// when they run, and one thread runs on the caller without a parallel region.
class DnnlThreads {
 public:
  explicit DnnlThreads(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~DnnlThreads() { omp_set_num_threads(saved_); }
  DnnlThreads(const DnnlThreads&) = delete;
  DnnlThreads& operator=(const DnnlThreads&) = delete;

 private:
  int saved_;
};

// A reorder of fewer bytes runs on the calling thread: the cnn's weights and weight gradients
// (36-74 KiB) took 20-80 us through a parallel region, whose sleeping workers each need a
// futex wake and a context switch, for a copy of a few microseconds.
constexpr size_t kSerialReorderBytes = size_t(256) << 10;

bool has_layout(const dnnl::memory::desc& d, tag layout) {
  return d == dnnl::memory::desc(d.dims(), d.data_type(), layout);
}

// A bf16 image between NCHW and 16-channel blocks by kernels/channel_blocks.h; false for every
// other reorder.
bool reorder_channel_blocks(const dnnl::memory& from, dnnl::memory& to) {
  const dnnl::memory::desc a = from.get_desc(), b = to.get_desc();
  if (a.data_type() != dt::bf16 || b.data_type() != dt::bf16 || a.dims().size() != 4 ||
      a.dims()[1] % 16 != 0) {
    return false;
  }
  const dims d = a.dims();
  const auto* src = static_cast<const uint16_t*>(from.get_data_handle());
  auto* dst = static_cast<uint16_t*>(to.get_data_handle());
  if (has_layout(a, tag::nchw) && has_layout(b, tag::aBcd16b)) {
    nchw_to_channel_blocks16(src, dst, d[0], d[1], d[2] * d[3]);
    return true;
  }
  if (has_layout(a, tag::aBcd16b) && has_layout(b, tag::nchw)) {
    channel_blocks16_to_nchw(src, dst, d[0], d[1], d[2] * d[3]);
    return true;
  }
  return false;
}

void reorder(const dnnl::memory& from, dnnl::memory& to, DnnlRuntime& r) {
  if (reorder_channel_blocks(from, to)) return;
  const bool small = to.get_desc().get_size() < kSerialReorderBytes;
  const DnnlThreads threads(small ? 1 : omp_get_max_threads());
  dnnl::reorder(from, to).execute(r.stream, const_cast<dnnl::memory&>(from), to);
  r.stream.wait();
}

// `user` in the layout `want`: itself, or a reordered copy.
dnnl::memory input_as(const dnnl::memory& user, const dnnl::memory::desc& want, DnnlRuntime& r) {
  if (user.get_desc() == want) return user;
  dnnl::memory m(want, r.engine);
  reorder(user, m, r);
  return m;
}

// Where the primitive writes `user`: itself, or a buffer reordered into it by finish_output.
dnnl::memory output_as(const dnnl::memory& user, const dnnl::memory::desc& want, DnnlRuntime& r) {
  if (user.get_desc() == want) return user;
  return dnnl::memory(want, r.engine);
}

void finish_output(dnnl::memory& produced, dnnl::memory& user, DnnlRuntime& r) {
  if (produced.get() != user.get()) reorder(produced, user, r);
}

struct Operand {
  int arg;                  // DNNL_ARG_*
  dnnl::memory user;        // mixp's buffer, in PyTorch's layout
  dnnl::memory::desc want;  // the layout the primitive chose
};

// Runs `primitive` on the two inputs and the output, reordering each from or to its user
// layout when the primitive chose another.
// `extra`: an argument passed as it is (the bias), if its memory is set.
void run(const dnnl::primitive& primitive, const Operand& a, const Operand& b, const Operand& out,
         DnnlRuntime& r, const std::pair<int, dnnl::memory>& extra = {}) {
  dnnl::memory a_mem = input_as(a.user, a.want, r);
  dnnl::memory b_mem = input_as(b.user, b.want, r);
  dnnl::memory out_mem = output_as(out.user, out.want, r);
  std::unordered_map<int, dnnl::memory> args{{a.arg, a_mem}, {b.arg, b_mem}, {out.arg, out_mem}};
  if (extra.second) args.emplace(extra.first, extra.second);
  primitive.execute(r.stream, args);
  dnnl::memory out_user = out.user;
  finish_output(out_mem, out_user, r);
  r.stream.wait();
}

void check_input(DType in) {
  MIXP_ASSERT(in == DType::f32 || (in == DType::bf16 && gemm_fast_has_bf16()),
              "oneDNN convolution on ", name_of(in));
}

struct ConvKey {
  ConvShape shape;
  DType in;
  DType out = DType::f32;  ///< the forward's result
  bool bias = false;       ///< the forward adds a bias
  friend bool operator==(const ConvKey& a, const ConvKey& b) {
    return std::memcmp(&a.shape, &b.shape, sizeof(ConvShape)) == 0 && a.in == b.in &&
           a.out == b.out && a.bias == b.bias;
  }
};
struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    const int64_t* v = reinterpret_cast<const int64_t*>(&k.shape);
    size_t h = size_t(k.in) * 64 + size_t(k.out) * 2 + size_t(k.bias);
    for (size_t i = 0; i < sizeof(ConvShape) / sizeof(int64_t); ++i)
      h = h * 1000003u ^ size_t(v[i]);
    return h;
  }
};
static_assert(sizeof(ConvShape) % sizeof(int64_t) == 0, "ConvShape must be int64 fields only");

template <typename PrimitiveDesc, typename Primitive>
struct Cached {
  PrimitiveDesc pd;
  Primitive primitive;
};

// The descriptor and primitive of one pass for a shape, made by `make` the first time.
template <typename PrimitiveDesc, typename Primitive, typename Make>
std::shared_ptr<const Cached<PrimitiveDesc, Primitive>> cached(const ConvKey& key, Make make) {
  static std::mutex mutex;
  // Never destroyed, as the matmuls' cache (kernels/cpu/dnnl_runtime.h).
  static auto& cache =
      *new std::unordered_map<ConvKey, std::shared_ptr<const Cached<PrimitiveDesc, Primitive>>,
                              ConvKeyHash>();
  constexpr size_t kMaxEntries = 256;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= kMaxEntries) cache.clear();
  PrimitiveDesc pd = make();
  auto entry = std::make_shared<const Cached<PrimitiveDesc, Primitive>>(
      Cached<PrimitiveDesc, Primitive>{.pd = pd, .primitive = Primitive(pd)});
  cache.emplace(key, entry);
  return entry;
}

void fail(const char* pass, const dnnl::error& e, const ConvShape& s) {
  MIXP_ASSERT(false, "oneDNN convolution ", pass, " failed (", e.what(), ") for x [", s.n, ", ",
              s.c, ", ", s.h, ", ", s.w, "], weight [", s.o, ", ", s.c / s.groups, ", ", s.kh, ", ",
              s.kw, "], groups ", s.groups);
}

using BackwardData =
    Cached<dnnl::convolution_backward_data::primitive_desc, dnnl::convolution_backward_data>;
using BackwardWeights =
    Cached<dnnl::convolution_backward_weights::primitive_desc, dnnl::convolution_backward_weights>;

// The backward-data pass writing `out` from inputs of type `t`, made once per shape.
std::shared_ptr<const BackwardData> backward_data(const ConvShape& s, DType in, DType out,
                                                  const Geometry& g, DnnlRuntime& r) {
  const dt t = dnnl_type(in), out_t = dnnl_type(out);
  return cached<dnnl::convolution_backward_data::primitive_desc, dnnl::convolution_backward_data>(
      {.shape = s, .in = in, .out = out}, [&] {
        const dnnl::convolution_backward_data::desc d(
            dnnl::algorithm::convolution_direct, any(g.src, out_t), any(g.weights, t),
            any(g.dst, t), g.strides, g.dilates, g.pad_l, g.pad_r);
        return dnnl::convolution_backward_data::primitive_desc(d, r.engine, forward_pd(g, t, r));
      });
}

// The backward-weights pass (an f32 result) from inputs of type `in`, made once per shape.
std::shared_ptr<const BackwardWeights> backward_weights(const ConvShape& s, DType in,
                                                        const Geometry& g, DnnlRuntime& r) {
  const dt t = dnnl_type(in);
  return cached<dnnl::convolution_backward_weights::primitive_desc,
                dnnl::convolution_backward_weights>({.shape = s, .in = in}, [&] {
    const dnnl::convolution_backward_weights::desc d(
        dnnl::algorithm::convolution_direct, any(g.src, t), any(g.weights, dt::f32), any(g.dst, t),
        g.strides, g.dilates, g.pad_l, g.pad_r);
    return dnnl::convolution_backward_weights::primitive_desc(d, r.engine, forward_pd(g, t, r));
  });
}

void run_backward_data(const BackwardData& c, const Geometry& g, dt t, const dnnl::memory& dy,
                       const void* weight, dt out_t, void* dx, DnnlRuntime& r) {
  run(c.primitive, {.arg = DNNL_ARG_DIFF_DST, .user = dy, .want = c.pd.diff_dst_desc()},
      {.arg = DNNL_ARG_WEIGHTS,
       .user = {{g.weights, t, g.weights_tag}, r.engine, const_cast<void*>(weight)},
       .want = c.pd.weights_desc()},
      {.arg = DNNL_ARG_DIFF_SRC,
       .user = {{g.src, out_t, tag::nchw}, r.engine, dx},
       .want = c.pd.diff_src_desc()},
      r);
}

void run_backward_weights(const BackwardWeights& c, const Geometry& g, dt t, const void* x,
                          const dnnl::memory& dy, float* dweight, DnnlRuntime& r) {
  run(c.primitive,
      {.arg = DNNL_ARG_SRC,
       .user = {{g.src, t, tag::nchw}, r.engine, const_cast<void*>(x)},
       .want = c.pd.src_desc()},
      {.arg = DNNL_ARG_DIFF_DST, .user = dy, .want = c.pd.diff_dst_desc()},
      {.arg = DNNL_ARG_DIFF_WEIGHTS,
       .user = {{g.weights, dt::f32, g.weights_tag}, r.engine, dweight},
       .want = c.pd.diff_weights_desc()},
      r);
}

dnnl::memory user_dy(const Geometry& g, dt t, const void* dy, DnnlRuntime& r) {
  return {{g.dst, t, tag::nchw}, r.engine, const_cast<void*>(dy)};
}

// An empty batch's weight gradient: every sum is empty.
void zero_weight_gradient(const ConvShape& s, float* dweight) {
  std::fill_n(dweight, s.o * (s.c / s.groups) * s.kh * s.kw, 0.0f);
}

}  // namespace

void conv2d_forward_fast(const ConvShape& s, DType in, const void* x, const void* weight,
                         float* y) {
  conv2d_forward_fast_to(s, in, x, weight, nullptr, DType::f32, y);
}

void conv2d_forward_fast_to(const ConvShape& s, DType in, const void* x, const void* weight,
                            const float* bias, DType out, void* y) {
  check_input(in);
  MIXP_ASSERT(out == DType::f32 || (out == DType::bf16 && in == DType::bf16),
              "oneDNN convolution from ", name_of(in), " to ", name_of(out));
  if (s.n == 0) return;
  DnnlRuntime& r = dnnl_runtime();
  const Geometry g = geometry(s);
  const dt t = dnnl_type(in), out_t = dnnl_type(out);
  try {
    const auto c = cached<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward>(
        {.shape = s, .in = in, .out = out, .bias = bias != nullptr},
        [&] { return bias != nullptr ? biased_forward_pd(g, t, out_t, r) : forward_pd(g, t, r); });
    const auto& pd = c->pd;
    const Operand src{.arg = DNNL_ARG_SRC,
                      .user = {{g.src, t, tag::nchw}, r.engine, const_cast<void*>(x)},
                      .want = pd.src_desc()};
    const Operand weights{
        .arg = DNNL_ARG_WEIGHTS,
        .user = {{g.weights, t, g.weights_tag}, r.engine, const_cast<void*>(weight)},
        .want = pd.weights_desc()};
    const Operand dst{.arg = DNNL_ARG_DST,
                      .user = {{g.dst, out_t, tag::nchw}, r.engine, y},
                      .want = pd.dst_desc()};
    if (bias == nullptr) {
      run(c->primitive, src, weights, dst, r);
    } else {
      const dnnl::memory bias_mem({{s.o}, dt::f32, tag::x}, r.engine, const_cast<float*>(bias));
      run(c->primitive, src, weights, dst, r, {DNNL_ARG_BIAS, bias_mem});
    }
  } catch (const dnnl::error& e) {
    fail("forward", e, s);
  }
}

void conv2d_backward_data_fast(const ConvShape& s, DType in, const void* dy, const void* weight,
                               float* dx) {
  conv2d_backward_data_fast_to(s, in, dy, weight, DType::f32, dx);
}

void conv2d_backward_data_fast_to(const ConvShape& s, DType in, const void* dy, const void* weight,
                                  DType out, void* dx) {
  check_input(in);
  MIXP_ASSERT(out == DType::f32 || (out == DType::bf16 && in == DType::bf16),
              "oneDNN convolution's backward-data from ", name_of(in), " to ", name_of(out));
  if (s.n == 0) return;
  DnnlRuntime& r = dnnl_runtime();
  const Geometry g = geometry(s);
  const dt t = dnnl_type(in);
  try {
    run_backward_data(*backward_data(s, in, out, g, r), g, t, user_dy(g, t, dy, r), weight,
                      dnnl_type(out), dx, r);
  } catch (const dnnl::error& e) {
    fail("backward-data", e, s);
  }
}

void conv2d_backward_weights_fast(const ConvShape& s, DType in, const void* x, const void* dy,
                                  float* dweight) {
  check_input(in);
  if (s.n == 0) return zero_weight_gradient(s, dweight);
  DnnlRuntime& r = dnnl_runtime();
  const Geometry g = geometry(s);
  const dt t = dnnl_type(in);
  try {
    run_backward_weights(*backward_weights(s, in, g, r), g, t, x, user_dy(g, t, dy, r), dweight, r);
  } catch (const dnnl::error& e) {
    fail("backward-weights", e, s);
  }
}

void conv2d_backward_fast(const ConvShape& s, DType in, const void* x, const void* dy,
                          const void* weight, DType dx_type, void* dx, float* dweight) {
  check_input(in);
  MIXP_ASSERT(dx_type == DType::f32 || (dx_type == DType::bf16 && in == DType::bf16),
              "oneDNN convolution's backward-data from ", name_of(in), " to ", name_of(dx_type));
  if (s.n == 0) return zero_weight_gradient(s, dweight);
  DnnlRuntime& r = dnnl_runtime();
  const Geometry g = geometry(s);
  const dt t = dnnl_type(in);
  try {
    const auto data = backward_data(s, in, dx_type, g, r);
    const auto weights = backward_weights(s, in, g, r);
    // dy in the backward-data pass's layout, reordered once; the backward-weights pass reads
    // that copy where it chose the same layout (run reorders it again where it did not).
    const dnnl::memory dy_mem = input_as(user_dy(g, t, dy, r), data->pd.diff_dst_desc(), r);
    run_backward_data(*data, g, t, dy_mem, weight, dnnl_type(dx_type), dx, r);
    const bool shared = weights->pd.diff_dst_desc() == data->pd.diff_dst_desc();
    run_backward_weights(*weights, g, t, x, shared ? dy_mem : user_dy(g, t, dy, r), dweight, r);
  } catch (const dnnl::error& e) {
    fail("backward", e, s);
  }
}

}  // namespace mixp::kernels
