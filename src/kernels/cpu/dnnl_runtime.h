// The one oneDNN CPU engine and stream of mixp, shared by the matmul and convolution kernels.
// Private to mixp.
#pragma once

#include <dnnl.hpp>

namespace mixp::kernels {

struct DnnlRuntime {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

/// Never destroyed, nor are the primitives cached with it: static destructors run in an order
/// no file controls, and a primitive destroyed after its engine or after oneDNN's own static
/// state crashes the process at exit. The operating system reclaims them.
inline DnnlRuntime& dnnl_runtime() {
  static DnnlRuntime& r = *new DnnlRuntime();
  return r;
}

}  // namespace mixp::kernels
