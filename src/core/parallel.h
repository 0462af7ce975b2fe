// Fixed chunks over OpenMP threads. The split depends only on the size and the grain, and every
// chunk's result is written by one thread, so results are identical for any thread count as long
// as each chunk computes the same thing (reductions combine per-chunk partials in chunk order).
// In core, below tensor/, whose conversions split their work the same way.
//
// The chunks go to the threads as they ask for them, not in fixed shares: a worker asleep
// between regions takes tens of microseconds to wake on a VM, and the calling thread, which
// starts at once, works through the chunks meanwhile instead of waiting at the region's end
// for a late worker's share (docs/performance.md, "Threads").
//
// Every chunk runs under the calling thread's IsaLimit and ReferenceMode (core/choice_context.h):
// OpenMP's workers are other threads, whose own thread-local limits are not the caller's.
#pragma once

#include <cstdint>

#include "core/choice_context.h"

namespace mixp {

/// Calls body(begin, end) over [0, n) in chunks of `grain` elements, in parallel.
template <typename Body>
void parallel_for(int64_t n, int64_t grain, Body body) {
  if (n <= 0) return;
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1) {
    body(int64_t(0), n);
    return;
  }
  const detail::ChoiceContext context = detail::current_choice_context();
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const detail::ChoiceContextScope caller(context);
    const int64_t begin = c * grain;
    const int64_t end = begin + grain < n ? begin + grain : n;
    body(begin, end);
  }
}

}  // namespace mixp
