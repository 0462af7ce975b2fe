// The view of a tensor that ops working along one dimension pass to their kernels. Private to
// mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels {

/// A contiguous tensor seen as [outer, n, inner] around the dimension an op works along: the n
/// values of one line are `inner` apart.
struct Lines {
  int64_t outer, n, inner;
};

}  // namespace mixp::kernels
