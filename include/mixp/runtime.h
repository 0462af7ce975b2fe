// mixp/runtime.h — process-wide switches of the kernels: the reference path and threads.
//
// The reference path runs every op with its plain scalar kernel from src/kernels/ref (FP64
// accumulation where cheap) instead of the optimized one. Tests use it to hold the two
// together; users use it to rule the fast kernels out when a result looks wrong. It is on when
// the environment has MIXP_REFERENCE=1 at the first kernel call, or in a ReferenceMode scope.
//
// Example:
//
//   {
//     mixp::ReferenceMode reference;        // this thread, this scope
//     mixp::Tensor y = mixp::ops::exp(x);   // scalar kernel
//   }
//   mixp::set_num_threads(1);               // OpenMP threads of mixp and oneDNN
//
// OpenMP workers of mixp programs sleep as soon as they are idle (GOMP_SPINCOUNT=0, unless the
// environment already sets OMP_WAIT_POLICY or GOMP_SPINCOUNT): spinning workers stall small
// shared machines. The companion library libmixp_openmp_env.so sets it before the OpenMP
// runtime reads its environment; mixp::mixp links it for you.
#pragma once

namespace mixp {

/// True when ops run their reference kernels on this thread.
bool reference_mode();

/// Forces the reference kernels on this thread for the scope.
class ReferenceMode {
 public:
  ReferenceMode();
  ~ReferenceMode();
  ReferenceMode(const ReferenceMode&) = delete;
  ReferenceMode& operator=(const ReferenceMode&) = delete;

 private:
  bool previous_;
};

/// Threads for parallel kernels (mixp's and oneDNN's); at least 1.
void set_num_threads(int threads);
int num_threads();
/// True when mixp limited OpenMP's spinning for this process (false when the user's environment
/// already chose a wait policy).
bool openmp_spin_limited();

}  // namespace mixp
