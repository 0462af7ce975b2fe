// The single-process backend, the argument checks every backend shares, the requests, and the
// choice of backend from the launch.
#include "mixp/dist/communicator.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "mixp/error.h"

namespace mixp::dist {
namespace {

template <typename T>
std::vector<T> counting(size_t count, float first) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = T(first + float(i) * 0.375f);
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

static_assert(Element<bfloat16> && Element<float> && Element<int64_t> && Element<uint8_t>);
static_assert(!Element<char> && !Element<long double> && !Element<const float>);

TEST(SingleProcessCommunicator, IsRankZeroOfOne) {
  auto comm = make_communicator(Backend::single_process);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_STREQ(comm->backend_name(), "single-process");
}

template <typename T>
void expect_reductions_leave_one_rank_as_is(Communicator& comm) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
    std::vector<T> data = counting<T>(13, -2.5f);
    const std::vector<T> original = data;
    comm.all_reduce(std::span(data), op);
    EXPECT_TRUE(same_bits(data, original)) << name_of(op);
    std::vector<T> out(13);
    comm.reduce_scatter(std::span<const T>(original), std::span(out), op);
    EXPECT_TRUE(same_bits(out, original)) << name_of(op);
  }
}

TEST(SingleProcessCommunicator, AReductionOverOneRankIsItsOwnValue) {
  auto comm = make_communicator(Backend::single_process);
  expect_reductions_leave_one_rank_as_is<float>(*comm);
  expect_reductions_leave_one_rank_as_is<double>(*comm);
  expect_reductions_leave_one_rank_as_is<bfloat16>(*comm);
  expect_reductions_leave_one_rank_as_is<float16>(*comm);
  expect_reductions_leave_one_rank_as_is<int64_t>(*comm);
}

TEST(SingleProcessCommunicator, GatherAndBroadcastKeepTheRanksData) {
  auto comm = make_communicator(Backend::single_process);
  const std::vector<bfloat16> in = counting<bfloat16>(7, 1.0f);
  std::vector<bfloat16> out(7);
  comm->all_gather(std::span<const bfloat16>(in), std::span(out));
  EXPECT_TRUE(same_bits(out, in));
  std::vector<uint8_t> bytes{1, 2, 3};
  comm->broadcast(std::span(bytes), 0);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3}));
  comm->barrier();
  Request request = comm->barrier_async();
  EXPECT_FALSE(request.pending());
  EXPECT_TRUE(request.test());
}

TEST(Communicator, RefusesBadArgumentsNamingTheOperationTheRankAndTheValues) {
  auto comm = make_communicator(Backend::single_process);
  std::vector<float> in(6), out(4);
  EXPECT_EQ(message_of([&] { comm->reduce_scatter(std::span<const float>(in), std::span(out)); }),
            "reduce_scatter on rank 0 of 1: the input must hold one block of the output's 4 "
            "elements per rank, that is 4 elements, got 6");
  EXPECT_EQ(message_of([&] { comm->all_gather(std::span<const float>(in), std::span(out)); }),
            "all_gather on rank 0 of 1: the output must hold the input's 6 elements once per "
            "rank, that is 6 elements, got 4");
  EXPECT_EQ(message_of([&] { comm->broadcast(std::span(in), 1); }),
            "broadcast on rank 0 of 1: the root must be a rank in [0, 1), got 1");
  std::vector<float8_e4m3> fp8(3);
  EXPECT_EQ(message_of([&] { comm->all_reduce(std::span(fp8)); }),
            "all_reduce on rank 0 of 1: cannot reduce dtype e4m3; reductions take f32, f64, "
            "i32, i64, bf16 and f16");
  std::vector<float> both(8);
  EXPECT_EQ(message_of([&] {
              comm->all_gather(std::span<const float>(both.data(), 4),
                               std::span<float>(both.data() + 2, 4));
            }),
            "all_gather on rank 0 of 1: the input and output buffers overlap");
  EXPECT_EQ(message_of([&] {
              comm->start_reduce_scatter({in.data(), 4, DType::f32}, {out.data(), 4, DType::f64},
                                         ReduceOp::sum);
            }),
            "reduce_scatter on rank 0 of 1: input dtype f32 differs from output dtype f64");
}

// A pending operation that completes on its `polls`-th test, or fails when waited on.
class ScriptedOperation final : public detail::PendingOperation {
 public:
  ScriptedOperation(int* waits, int polls, bool fails)
      : waits_(waits), polls_(polls), fails_(fails) {}
  void wait() override {
    ++*waits_;
    MIXP_CHECK(!fails_, "scripted failure");
  }
  bool test() override { return --polls_ <= 0; }

 private:
  int* waits_;
  int polls_;
  bool fails_;
};

TEST(Request, WaitsOnceAndReportsItsError) {
  int waits = 0;
  Request failing(std::make_unique<ScriptedOperation>(&waits, 1, true));
  EXPECT_TRUE(failing.pending());
  EXPECT_EQ(message_of([&] { failing.wait(); }), "scripted failure");
  EXPECT_FALSE(failing.pending());
  failing.wait();
  EXPECT_EQ(waits, 1);
}

TEST(Request, TestCompletesWithoutWaitingAndDestructionWaits) {
  int waits = 0;
  {
    Request polled(std::make_unique<ScriptedOperation>(&waits, 3, false));
    EXPECT_FALSE(polled.test());
    EXPECT_FALSE(polled.test());
    EXPECT_TRUE(polled.test());
    EXPECT_FALSE(polled.pending());
  }
  EXPECT_EQ(waits, 0);
  {
    Request dropped(std::make_unique<ScriptedOperation>(&waits, 1, true));
    Request replaced(std::make_unique<ScriptedOperation>(&waits, 1, false));
    replaced = Request(std::make_unique<ScriptedOperation>(&waits, 1, false));
    EXPECT_EQ(waits, 1);  // the replaced one
  }
  EXPECT_EQ(waits, 3);  // both left at the end of the scope, the failing one without throwing
}

TEST(ChooseBackend, MpiWhenStartedByMpirunAndBuiltIn) {
  EXPECT_EQ(choose_backend(Launch{}, true), Backend::single_process);
  EXPECT_EQ(choose_backend(Launch{}, false), Backend::single_process);
  EXPECT_EQ(choose_backend(Launch{true, 4, 1}, true), Backend::mpi);
  EXPECT_EQ(choose_backend(Launch{true, 1, 0}, true), Backend::mpi);
}

TEST(ChooseBackend, AnMpirunLaunchWithoutMpiIsRefused) {
  const std::string message = message_of([] { choose_backend(Launch{true, 4, 1}, false); });
  EXPECT_NE(message.find("started by mpirun as rank 1 of 4"), std::string::npos) << message;
  EXPECT_NE(message.find("built without MPI"), std::string::npos) << message;
}

TEST(ChooseBackend, TheMpiBackendIsRefusedInABuildWithoutMpi) {
  if (mpi_built_in()) {
    GTEST_SKIP() << "MPI is built in: the dist.mpi.* tests run the MPI backend under mpirun";
  }
  EXPECT_NE(message_of([] { make_communicator(Backend::mpi); }).find("built without MPI"),
            std::string::npos);
}

// Sets an environment variable for the scope and restores what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(LaunchFromEnvironment, ReadsOpenMpisVariables) {
  {
    ScopedVariable size("OMPI_COMM_WORLD_SIZE", nullptr), rank("OMPI_COMM_WORLD_RANK", nullptr);
    const Launch alone = launch_from_environment();
    EXPECT_FALSE(alone.by_mpirun);
    EXPECT_EQ(alone.world_size, 1);
    EXPECT_EQ(make_communicator()->size(), 1);
  }
  {
    ScopedVariable size("OMPI_COMM_WORLD_SIZE", "4"), rank("OMPI_COMM_WORLD_RANK", "2");
    const Launch launched = launch_from_environment();
    EXPECT_TRUE(launched.by_mpirun);
    EXPECT_EQ(launched.world_size, 4);
    EXPECT_EQ(launched.rank, 2);
  }
  {
    ScopedVariable size("OMPI_COMM_WORLD_SIZE", "4"), rank("OMPI_COMM_WORLD_RANK", "4");
    EXPECT_EQ(message_of([] { launch_from_environment(); }),
              "the environment variable OMPI_COMM_WORLD_RANK must be an integer in [0, 3], got "
              "'4'");
  }
  {
    ScopedVariable size("OMPI_COMM_WORLD_SIZE", "two"), rank("OMPI_COMM_WORLD_RANK", "0");
    EXPECT_NE(message_of([] { launch_from_environment(); }).find("got 'two'"), std::string::npos);
  }
}

}  // namespace
}  // namespace mixp::dist
