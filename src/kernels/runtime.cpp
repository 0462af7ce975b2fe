#include "mixp/runtime.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "core/choice_context.h"
#include "mixp/error.h"

extern "C" bool mixp_openmp_env_applied();  // src/runtime/openmp_env.cpp

namespace mixp {
namespace {

bool reference_from_environment() {
  const char* v = std::getenv("MIXP_REFERENCE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

bool reference_mode() {
  static const bool from_environment = reference_from_environment();
  return from_environment || detail::reference_depth() > 0;
}

ReferenceMode::ReferenceMode() : previous_(detail::reference_depth() > 0) {
  ++detail::reference_depth();
}
ReferenceMode::~ReferenceMode() { --detail::reference_depth(); }

void set_num_threads(int threads) {
  MIXP_CHECK(threads >= 1, "set_num_threads: need at least one thread, got ", threads);
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

bool openmp_spin_limited() { return mixp_openmp_env_applied(); }

}  // namespace mixp
