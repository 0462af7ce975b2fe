// The calling thread's limits on kernel choice: its IsaLimit cap and its ReferenceMode depth.
// Both are thread-local, so that a scope on one thread leaves the others alone; a parallel
// region carries its caller's into every worker (core/parallel.h), so that `--isa avx2` or a
// ReferenceMode scope governs every kernel the region runs, not only those on the calling
// thread. Private to mixp.
#pragma once

#include "mixp/cpu.h"

namespace mixp::detail {

struct ChoiceContext {
  Isa isa_cap = Isa::avx512_bf16;
  int reference_depth = 0;
};

/// This thread's context.
ChoiceContext current_choice_context();

/// Makes `context` this thread's while it lives, then restores the one before.
class ChoiceContextScope {
 public:
  explicit ChoiceContextScope(const ChoiceContext& context);
  ~ChoiceContextScope();
  ChoiceContextScope(const ChoiceContextScope&) = delete;
  ChoiceContextScope& operator=(const ChoiceContextScope&) = delete;

 private:
  ChoiceContext previous_;
};

/// The ReferenceMode depth of this thread (mixp/runtime.h reads and changes it).
int& reference_depth();

}  // namespace mixp::detail
