#include "mixp/runtime.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "mixp/error.h"

namespace mixp {
namespace {

// Runs before any shared library's initializer, so before libgomp reads its environment:
// entries of .preinit_array run first (they exist only in executables, which is why this
// needs mixp linked statically; a shared build leaves OpenMP's own default).
void limit_openmp_spinning(int, char**, char**) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    setenv("GOMP_SPINCOUNT", "10000", 0);
  }
}
#ifndef MIXP_SHARED_LIBRARY
[[gnu::used, gnu::section(".preinit_array")]] void (*const kPreinit)(int, char**, char**) =
    &limit_openmp_spinning;
#endif

bool reference_from_environment() {
  const char* v = std::getenv("MIXP_REFERENCE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

thread_local int t_reference_depth = 0;

}  // namespace

bool reference_mode() {
  static const bool from_environment = reference_from_environment();
  return from_environment || t_reference_depth > 0;
}

ReferenceMode::ReferenceMode() : previous_(t_reference_depth > 0) { ++t_reference_depth; }
ReferenceMode::~ReferenceMode() { --t_reference_depth; }

void set_num_threads(int threads) {
  MIXP_CHECK(threads >= 1, "set_num_threads: need at least one thread, got ", threads);
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace mixp
