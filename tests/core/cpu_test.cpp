#include <gtest/gtest.h>

#include <omp.h>

#include <mutex>
#include <set>
#include <thread>

#include "core/parallel.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/runtime.h"

namespace mixp {
namespace {

TEST(Cpu, BestIsaMatchesTheFeatures) {
  const CpuFeatures& f = cpu_features();
  const Isa best = best_isa();
  EXPECT_EQ(best >= Isa::avx2, f.avx2 && f.f16c && f.fma);
  EXPECT_EQ(best >= Isa::avx512,
            best >= Isa::avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
  EXPECT_EQ(best >= Isa::avx512_bf16, best >= Isa::avx512 && f.avx512_bf16);
  EXPECT_EQ(active_isa(), best);
}

TEST(Cpu, IsaLimitNestsAndOnlyLowers) {
  const Isa best = best_isa();
  {
    IsaLimit outer(Isa::avx2);
    EXPECT_EQ(active_isa(), std::min(best, Isa::avx2));
    {
      IsaLimit inner(Isa::avx512_bf16);  // cannot raise the cap
      EXPECT_EQ(active_isa(), std::min(best, Isa::avx2));
      IsaLimit lowest(Isa::scalar);
      EXPECT_EQ(active_isa(), Isa::scalar);
    }
    EXPECT_EQ(active_isa(), std::min(best, Isa::avx2));
  }
  EXPECT_EQ(active_isa(), best);
}

TEST(Cpu, IsaLimitIsPerThread) {
  IsaLimit limit(Isa::scalar);
  Isa other = Isa::scalar;
  std::thread([&] { other = active_isa(); }).join();
  EXPECT_EQ(other, best_isa());
}

// `--isa` and ReferenceMode set the calling thread's limits; a parallel region's workers are
// other threads, and must choose kernels under the caller's limits too.
TEST(Cpu, AParallelRegionRunsUnderItsCallersLimits) {
  const int threads_before = num_threads();
  set_num_threads(2);
  std::mutex mutex;
  std::set<Isa> isas;
  std::set<bool> references;
  std::set<int> workers;
  {
    IsaLimit limit(Isa::scalar);
    ReferenceMode reference;
    parallel_for(64, 1, [&](int64_t, int64_t) {
      // Chunks are handed out as threads ask; each one long enough that the worker, woken
      // after the caller has started, still takes some.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard lock(mutex);
      isas.insert(active_isa());
      references.insert(reference_mode());
      workers.insert(omp_get_thread_num());
    });
  }
  EXPECT_EQ(isas, std::set<Isa>{Isa::scalar});
  EXPECT_EQ(references, std::set<bool>{true});
  EXPECT_EQ(workers.size(), 2u) << "the region should have used two threads";
  // The workers are back to their own limits afterwards.
  std::set<Isa> after;
  std::set<int> workers_after;
  parallel_for(64, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard lock(mutex);
    after.insert(active_isa());
    workers_after.insert(omp_get_thread_num());
  });
  set_num_threads(threads_before);
  EXPECT_EQ(after, std::set<Isa>{best_isa()});
  EXPECT_EQ(workers_after.size(), 2u);
}

TEST(Cpu, IsaNames) {
  for (Isa isa : kAllIsas) EXPECT_EQ(parse_isa(name_of(isa)), isa);
  EXPECT_THROW(parse_isa("sse9"), Error);
}

}  // namespace
}  // namespace mixp
