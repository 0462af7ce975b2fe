#include <gtest/gtest.h>

#include <thread>

#include "mixp/cpu.h"
#include "mixp/error.h"

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

TEST(Cpu, IsaNames) {
  for (Isa isa : kAllIsas) EXPECT_EQ(parse_isa(name_of(isa)), isa);
  EXPECT_THROW(parse_isa("sse9"), Error);
}

}  // namespace
}  // namespace mixp
