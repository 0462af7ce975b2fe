// libmixp_openmp_env: a tiny shared library whose only job is to run before libgomp reads its
// environment. libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its own constructor;
// shared-library constructors run dependencies first and otherwise in reverse load order, so a
// library without dependencies that is loaded after libgomp (mixp links it after OpenMP)
// initializes before it. Setting the variable later, from mixp itself, would be too late.
#include <cstdlib>

namespace {
bool g_applied = false;

[[gnu::constructor]] void limit_openmp_spinning() {
  // Idle workers sleep at once (OMP_WAIT_POLICY=PASSIVE's spin count): on a shared 2-core
  // machine, spinning workers stall the thread that has work. Measured interleaved against
  // 10000 spins (docs/performance.md): cnn amp-bf16 steps 3.4x faster, mlp 3-5x, gpt 1.1x.
  // A choice the user made in the environment stands.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    g_applied = setenv("GOMP_SPINCOUNT", "0", 0) == 0;
  }
}
}  // namespace

/// True when this library set GOMP_SPINCOUNT. Referenced by libmixp, which keeps the library
/// from being dropped by --as-needed linking.
extern "C" [[gnu::visibility("default")]] bool mixp_openmp_env_applied() { return g_applied; }
