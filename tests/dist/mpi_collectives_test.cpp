// Every collective of the MPI backend, run by ctest under `mpirun -np N`: each rank computes what
// every rank contributes, so it checks its result against values it computed alone.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dist/mpi_communicator.h"
#include "dist/reduction_data.h"
#include "mixp/dist/communicator.h"
#include "support/tolerance.h"

namespace mixp::dist {
namespace {

Communicator* world = nullptr;

int rank() { return world->rank(); }
int ranks() { return world->size(); }

// Rank r's element i, small integers whose sums are exact in every type and order.
template <typename T>
T integer_value(int r, size_t i) {
  return T(float((r + 1) * int(i % 7 + 1) - 3 * int(i % 5)));
}

template <typename T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

TEST(MpiCommunicator, RanksAreThoseMpirunStarted) {
  EXPECT_STREQ(world->backend_name(), "mpi");
  EXPECT_EQ(ranks(), std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  const std::vector<int32_t> mine{rank()};
  std::vector<int32_t> all(static_cast<size_t>(ranks()));
  world->all_gather(std::span<const int32_t>(mine), std::span(all));
  for (int r = 0; r < ranks(); ++r) EXPECT_EQ(all[size_t(r)], r);
}

template <typename T>
void expect_exact_all_reduce(size_t count) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
    std::vector<T> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = integer_value<T>(rank(), i);
    world->all_reduce(std::span(data), op);
    for (size_t i = 0; i < count; ++i) {
      double want = double(integer_value<T>(0, i));
      for (int r = 1; r < ranks(); ++r) {
        const double v = double(integer_value<T>(r, i));
        want = op == ReduceOp::sum ? want + v : std::max(want, v);
      }
      EXPECT_EQ(double(data[i]), want) << name_of(op) << " element " << i << " of " << count;
    }
  }
}

TEST(MpiCommunicator, AllReduceIsExactOnIntegerValuesInEveryType) {
  for (size_t count : {size_t(1), size_t(3), size_t(1001)}) {
    expect_exact_all_reduce<float>(count);
    expect_exact_all_reduce<double>(count);
    expect_exact_all_reduce<int32_t>(count);
    expect_exact_all_reduce<int64_t>(count);
    expect_exact_all_reduce<bfloat16>(count);
    expect_exact_all_reduce<float16>(count);
  }
}

template <typename T>
void expect_exact_reduce_scatter(size_t block) {
  const size_t count = block * size_t(ranks());
  std::vector<T> in(count), out(block);
  for (size_t i = 0; i < count; ++i) in[i] = integer_value<T>(rank(), i);
  world->reduce_scatter(std::span<const T>(in), std::span(out), ReduceOp::sum);
  for (size_t j = 0; j < block; ++j) {
    const size_t i = size_t(rank()) * block + j;
    double want = 0;
    for (int r = 0; r < ranks(); ++r) want += double(integer_value<T>(r, i));
    EXPECT_EQ(double(out[j]), want) << "element " << j << " of block " << rank();
  }
}

// ordered_sum on values with all their bits: every rank gets, bit for bit, the chain
// ((x_0 + x_1) + x_2) + ... that it computes alone, whatever order MPI would sum in.
template <typename T>
void expect_rank_order_sum(size_t count) {
  const auto value = [](int r, size_t i) { return T(test::contribution_f32(r, i)); };
  std::vector<T> data(count), block(count);
  for (size_t i = 0; i < count; ++i) data[i] = value(rank(), i);
  std::vector<T> in(count * size_t(ranks()));
  for (size_t i = 0; i < in.size(); ++i) in[i] = value(rank(), i);
  world->all_reduce(std::span(data), ReduceOp::ordered_sum);
  world->reduce_scatter(std::span<const T>(in), std::span(block), ReduceOp::ordered_sum);
  for (size_t i = 0; i < count; ++i) {
    T want = value(0, i), want_block = value(0, size_t(rank()) * count + i);
    for (int r = 1; r < ranks(); ++r) {
      want = T(want + value(r, i));
      want_block = T(want_block + value(r, size_t(rank()) * count + i));
    }
    ASSERT_TRUE(same_bits(data[i], want)) << "all_reduce element " << i << " of " << count;
    ASSERT_TRUE(same_bits(block[i], want_block)) << "reduce_scatter element " << i;
  }
}

TEST(MpiCommunicator, OrderedSumAddsInRankOrderOnEveryRank) {
  for (size_t count : {size_t(1), size_t(3), size_t(1001)}) {
    expect_rank_order_sum<float>(count);
    expect_rank_order_sum<double>(count);
  }
}

TEST(MpiCommunicator, ReduceScatterGivesEachRankItsBlock) {
  for (size_t block : {size_t(1), size_t(5), size_t(257)}) {
    expect_exact_reduce_scatter<float>(block);
    expect_exact_reduce_scatter<double>(block);
    expect_exact_reduce_scatter<int64_t>(block);
    expect_exact_reduce_scatter<bfloat16>(block);
    expect_exact_reduce_scatter<float16>(block);
  }
}

TEST(MpiCommunicator, AllGatherAndBroadcastMoveAnyDtype) {
  const size_t count = 5;
  std::vector<bfloat16> mine(count), all(count * size_t(ranks()));
  for (size_t i = 0; i < count; ++i) mine[i] = test::contribution(rank(), i);
  world->all_gather(std::span<const bfloat16>(mine), std::span(all));
  for (int r = 0; r < ranks(); ++r) {
    for (size_t i = 0; i < count; ++i) {
      EXPECT_EQ(all[size_t(r) * count + i].bits, test::contribution(r, i).bits);
    }
  }
  for (int root = 0; root < ranks(); ++root) {
    std::vector<uint8_t> bytes{uint8_t(rank()), uint8_t(rank() * 3), 7};
    world->broadcast(std::span(bytes), root);
    EXPECT_EQ(bytes, (std::vector<uint8_t>{uint8_t(root), uint8_t(root * 3), 7}));
    std::vector<double> values{double(rank()) + 0.25};
    world->broadcast_async(std::span(values), root).wait();
    EXPECT_EQ(values[0], double(root) + 0.25);
  }
}

// Every rank leaves a file before the barrier and finds all of them after it.
TEST(MpiCommunicator, BarrierHoldsEveryRankUntilAllArrive) {
  std::vector<int64_t> id{int64_t(::getpid())};
  world->broadcast(std::span(id), 0);
  const auto folder =
      std::filesystem::temp_directory_path() / ("mixp_barrier_" + std::to_string(id[0]));
  std::filesystem::create_directories(folder);
  if (rank() == ranks() - 1) usleep(200000);  // the last rank arrives late
  std::ofstream(folder / std::to_string(rank())) << rank();
  world->barrier();
  for (int r = 0; r < ranks(); ++r) {
    EXPECT_TRUE(std::filesystem::exists(folder / std::to_string(r))) << "rank " << r;
  }
  world->barrier_async().wait();
  if (rank() == 0) std::filesystem::remove_all(folder);
}

TEST(MpiCommunicator, RequestsInFlightTogetherCompleteInAnyOrder) {
  const size_t count = 999;
  std::vector<float> sum(count);
  std::vector<bfloat16> half(count);
  std::vector<int32_t> mine{rank()}, gathered(static_cast<size_t>(ranks()));
  for (size_t i = 0; i < count; ++i) {
    sum[i] = integer_value<float>(rank(), i);
    half[i] = test::contribution(rank(), i);
  }
  Request a = world->all_reduce_async(std::span(sum));
  Request b = world->all_reduce_async(std::span(half));
  Request c = world->all_gather_async(std::span<const int32_t>(mine), std::span(gathered));
  c.wait();
  while (!b.test()) {
  }
  a.wait();
  const auto all = test::contributions(ranks(), count);
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < ranks(); ++r) want += double(integer_value<float>(r, i));
    EXPECT_EQ(double(sum[i]), want);
    EXPECT_EQ(half[i].bits, test::fp32_sum_rounded_once(all, i).bits) << "element " << i;
  }
  for (int r = 0; r < ranks(); ++r) EXPECT_EQ(gathered[size_t(r)], r);
}

// Several rank-order all-reduces in flight, waited on in a different order on each rank, with
// a collective started between them: their all-gathers must still meet in one order (MPI's rule
// for the collectives of a communicator), whatever each rank waits on first.
TEST(MpiCommunicator, RankOrderAllReducesCompleteInAnyOrderOnEachRank) {
  const size_t count = 4099, operations = 6;
  std::vector<std::vector<float>> data(operations, std::vector<float>(count));
  std::vector<Request> pending;
  std::vector<int32_t> mine{rank()}, gathered(static_cast<size_t>(ranks()));
  for (size_t k = 0; k < operations; ++k) {
    for (size_t i = 0; i < count; ++i) data[k][i] = test::contribution_f32(rank(), i + k);
    pending.push_back(world->all_reduce_async(std::span(data[k]), ReduceOp::ordered_sum));
    if (k == 2) world->all_gather(std::span<const int32_t>(mine), std::span(gathered));
  }
  // Odd ranks wait from the last, even ranks test the middle one first, then from the first.
  if (rank() % 2 == 1) {
    for (size_t k = operations; k-- > 0;) pending[k].wait();
  } else {
    while (!pending[3].test()) {
    }
    for (Request& r : pending) r.wait();
  }
  for (size_t k = 0; k < operations; ++k) {
    for (size_t i = 0; i < count; ++i) {
      float want = test::contribution_f32(0, i + k);
      for (int r = 1; r < ranks(); ++r) want += test::contribution_f32(r, i + k);
      ASSERT_TRUE(same_bits(data[k][i], want)) << "operation " << k << ", element " << i;
    }
  }
  for (int r = 0; r < ranks(); ++r) EXPECT_EQ(gathered[size_t(r)], r);
}

// The error of each reduction against the exact sum: f32 (of fp32 values) within the tests'
// tolerance for fp32 sums over the ranks; bf16 (of bf16 values) within one bf16 rounding, and
// bitwise the rank-order fp32 sum rounded once; each bitwise the same on every rank. The bf16
// ring is computed here as the control.
TEST(MpiCommunicator, Bf16AllReduceStaysWithinOneRoundingOfTheExactSum) {
  const size_t count = 4099;  // not a multiple of any rank count: uneven chunks
  const auto all = test::contributions(ranks(), count);
  std::vector<float> f32(count);
  std::vector<bfloat16> bf16(count);
  for (size_t i = 0; i < count; ++i) {
    bf16[i] = all[size_t(rank())][i];
    f32[i] = test::contribution_f32(rank(), i);
  }
  world->all_reduce(std::span(f32));
  world->all_reduce(std::span(bf16));
  std::vector<bfloat16> everyones(count * size_t(ranks()));
  world->all_gather(std::span<const bfloat16>(bf16), std::span(everyones));
  std::vector<float> everyones_f32(count * size_t(ranks()));
  world->all_gather(std::span<const float>(f32), std::span(everyones_f32));

  // Sums of at most 8 values of 24 bits over 5 binades are exact in fp64.
  std::vector<double> exact(count), exact_f32(count, 0.0);
  std::vector<bfloat16> naive(count);
  const test::Tolerance f32_tolerance = test::tolerance(DType::f32, ranks());
  for (size_t i = 0; i < count; ++i) {
    exact[i] = test::exact_sum(all, i);
    naive[i] = test::naive_bf16_ring_sum(all, i);
    for (int r = 0; r < ranks(); ++r) exact_f32[i] += double(test::contribution_f32(r, i));
    EXPECT_LE(std::fabs(f32[i] - exact_f32[i]),
              f32_tolerance.atol + f32_tolerance.rtol * exact_f32[i]);
    EXPECT_LE(std::fabs(double(float(bf16[i])) - exact[i]),
              test::one_bf16_rounding(exact[i], ranks()))
        << "element " << i;
    EXPECT_EQ(bf16[i].bits, test::fp32_sum_rounded_once(all, i).bits) << "element " << i;
    for (int r = 0; r < ranks(); ++r) {
      EXPECT_EQ(everyones[size_t(r) * count + i].bits, bf16[i].bits) << "rank " << r;
      EXPECT_TRUE(same_bits(everyones_f32[size_t(r) * count + i], f32[i])) << "rank " << r;
    }
  }
  const auto f32_error = test::relative_error(f32, exact_f32);
  const auto bf16_error = test::relative_error(bf16, exact);
  const auto naive_error = test::relative_error(naive, exact);
  if (rank() == 0) {
    std::printf(
        "relative error against the fp64 sum over %d ranks, %zu elements (mean / max):\n"
        "  f32 all-reduce            %.3g / %.3g\n"
        "  bf16, fp32 sum once       %.3g / %.3g\n"
        "  bf16 ring (control)       %.3g / %.3g\n",
        ranks(), count, f32_error.mean, f32_error.max, bf16_error.mean, bf16_error.max,
        naive_error.mean, naive_error.max);
  }
  EXPECT_GE(naive_error.mean, bf16_error.mean);
  if (ranks() >= 4) {
    EXPECT_GT(naive_error.mean, bf16_error.mean);
  }
}

TEST(MpiCommunicator, MpiErrorsNameTheOperationAndTheRank) {
  const std::string message = mpi_error(MPI_ERR_COUNT, "all_reduce", 3, 4).message();
  EXPECT_EQ(message.rfind("all_reduce failed on rank 3 of 4: ", 0), 0u) << message;
  EXPECT_GT(message.size(), std::strlen("all_reduce failed on rank 3 of 4: ")) << message;
  std::vector<float> in(3), out(2);
  try {
    world->reduce_scatter(std::span<const float>(in), std::span(out));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.message())
                  .rfind("reduce_scatter on rank " + std::to_string(rank()) + " of " +
                             std::to_string(ranks()) + ": ",
                         0),
              0u)
        << e.message();
  }
}

// Open MPI's libnbc would reduce a started all-reduce of 2 or 3 ranks, or any in place, on a
// binomial tree (rank 0 adds alone); the communicator that initialized MPI chose the ring, which
// splits the additions between the ranks. Other MPIs have no such variable.
TEST(MpiCommunicator, StartedAllReducesTakeLibnbcsRing) {
  int provided = 0;
  ASSERT_EQ(MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided), MPI_SUCCESS);
  int index = 0;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) {
    MPI_T_finalize();
    GTEST_SKIP() << "this MPI has no libnbc";
  }
  MPI_T_cvar_handle handle = nullptr;
  int elements = 0, algorithm = -1;
  ASSERT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &elements), MPI_SUCCESS);
  ASSERT_EQ(MPI_T_cvar_read(handle, &algorithm), MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  EXPECT_EQ(algorithm, 1) << "libnbc's iallreduce algorithm (1: ring)";
}

TEST(MpiCommunicator, ASecondCommunicatorSharesTheSession) {
  auto second = make_communicator();
  EXPECT_EQ(second->size(), ranks());
  std::vector<int64_t> one{1};
  second->all_reduce(std::span(one));
  EXPECT_EQ(one[0], ranks());
}

}  // namespace
}  // namespace mixp::dist

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = mixp::dist::make_communicator();
  mixp::dist::world = world.get();
  // A rank's failure fails every rank, so that mpirun's status says it whichever rank failed.
  std::vector<int32_t> failed{RUN_ALL_TESTS() != 0 ? 1 : 0};
  world->all_reduce(std::span(failed), mixp::dist::ReduceOp::max);
  world.reset();
  return failed[0];
}
