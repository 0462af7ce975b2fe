// The one oneDNN CPU engine and stream of mixp, shared by the matmul and convolution kernels.
// Private to mixp.
#pragma once

#include <dnnl.hpp>

namespace mixp::kernels {

struct DnnlRuntime {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

inline DnnlRuntime& dnnl_runtime() {
  static DnnlRuntime r;
  return r;
}

}  // namespace mixp::kernels
