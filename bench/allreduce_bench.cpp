// The standalone all-reduce: a timed loop of Communicator::all_reduce on one buffer between the
// ranks that mpirun started, with nothing else running. `mixp bench dp` compares the step time
// that data parallelism adds with this.
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "bench/bench.h"
#include "bench/median.h"
#include "mixp/dist/communicator.h"
#include "mixp/error.h"
#include "mixp/float_types.h"

namespace mixp::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Values of a gradient's size (around 2^-3), refilled before every repetition so that the sums
// neither grow nor become subnormal over the loop.
template <typename T>
void fill(std::vector<T>& buffer, int rank) {
  for (size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = T(float((i + size_t(rank)) % 251) * 0x1p-10f);
}

// Milliseconds of each timed all-reduce, as the slowest rank saw it.
template <typename T>
std::vector<double> time_all_reduces(dist::Communicator& comm, const AllReduceBenchOptions& o) {
  std::vector<T> buffer(static_cast<size_t>(o.elements));
  std::vector<double> ms;
  for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
    fill(buffer, comm.rank());
    comm.barrier();
    const Clock::time_point start = Clock::now();
    comm.all_reduce(std::span(buffer));
    std::vector<double> slowest{
        std::chrono::duration<double, std::milli>(Clock::now() - start).count()};
    comm.all_reduce(std::span(slowest), dist::ReduceOp::max);
    if (rep >= o.warmup) ms.push_back(slowest[0]);
  }
  return ms;
}

}  // namespace

int run_allreduce_bench(const AllReduceBenchOptions& o, std::FILE* out) {
  MIXP_CHECK(o.elements >= 1, "mixp bench allreduce: --elements must be at least 1, got ",
             o.elements);
  MIXP_CHECK(o.reps >= 1 && o.warmup >= 0,
             "mixp bench allreduce: --reps must be at least 1 and --warmup at least 0, got ",
             o.reps, " and ", o.warmup);
  MIXP_CHECK(o.dtype == DType::f32 || o.dtype == DType::bf16,
             "mixp bench allreduce: --dtype must be f32 or bf16 (the gradients' wire dtypes), "
             "got ",
             name_of(o.dtype));
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
  const std::vector<double> ms = o.dtype == DType::f32 ? time_all_reduces<float>(*comm, o)
                                                       : time_all_reduces<bfloat16>(*comm, o);
  if (comm->rank() != 0) return 0;
  const nlohmann::json line = {{"bench", "allreduce"},
                               {"backend", comm->backend_name()},
                               {"ranks", comm->size()},
                               {"dtype", name_of(o.dtype)},
                               {"elements", o.elements},
                               {"bytes", o.elements * int64_t(size_of(o.dtype))},
                               {"reps", o.reps},
                               {"median_ms", median_of(ms)},
                               {"min_ms", *std::min_element(ms.begin(), ms.end())}};
  std::fprintf(out, "%s\n", line.dump().c_str());
  return 0;
}

}  // namespace mixp::bench
