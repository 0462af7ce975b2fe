#include "mixp/dist/communicator.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "dist/single_process.h"
#include "mixp/error.h"
#if MIXP_HAVE_MPI
#include "dist/mpi_communicator.h"
#endif

namespace mixp::dist {

const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::ordered_sum: return "ordered_sum";
  }
  MIXP_ASSERT(false, "unknown ReduceOp ", int(op));
}

bool reducible(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::bf16:
    case DType::f16: return true;
    default: return false;
  }
}

// ---- Request ----------------------------------------------------------------------------------

Request::Request(std::unique_ptr<detail::PendingOperation> operation)
    : operation_(std::move(operation)) {}

Request& Request::operator=(Request&& other) {
  if (this != &other) {
    wait();
    operation_ = std::move(other.operation_);
  }
  return *this;
}

Request::~Request() {
  if (!operation_) return;
  try {
    operation_->wait();
  } catch (const Error&) {
    // A destructor cannot throw; the caller who wanted the error calls wait().
  }
}

void Request::wait() {
  if (!operation_) return;
  // Cleared whether or not it fails: a failed operation is over and must not be waited again.
  auto operation = std::move(operation_);
  operation->wait();
}

bool Request::test() {
  if (!operation_) return true;
  bool done = false;
  try {
    done = operation_->test();
  } catch (const Error&) {
    operation_.reset();
    throw;
  }
  if (done) operation_.reset();
  return done;
}

// ---- argument checks, shared by the backends --------------------------------------------------

namespace {

bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0) return false;
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

size_t bytes_of(size_t count, DType dtype) { return count * size_t(size_of(dtype)); }

}  // namespace

std::string Communicator::where(const char* operation) const {
  return mixp::detail::concat(operation, " on rank ", rank(), " of ", size());
}

Request Communicator::start_all_reduce(Buffer data, ReduceOp op) {
  MIXP_CHECK(reducible(data.dtype), where("all_reduce"), ": cannot reduce dtype ",
             mixp::name_of(data.dtype), "; reductions take f32, f64, i32, i64, bf16 and f16");
  return do_all_reduce(data, op);
}

Request Communicator::start_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) {
  MIXP_CHECK(in.dtype == out.dtype, where("reduce_scatter"), ": input dtype ",
             mixp::name_of(in.dtype), " differs from output dtype ", mixp::name_of(out.dtype));
  MIXP_CHECK(reducible(in.dtype), where("reduce_scatter"), ": cannot reduce dtype ",
             mixp::name_of(in.dtype), "; reductions take f32, f64, i32, i64, bf16 and f16");
  MIXP_CHECK(in.count == out.count * size_t(size()), where("reduce_scatter"),
             ": the input must hold one block of the output's ", out.count,
             " elements per rank, that is ", out.count * size_t(size()), " elements, got ",
             in.count);
  MIXP_CHECK(
      !overlap(in.data, bytes_of(in.count, in.dtype), out.data, bytes_of(out.count, out.dtype)),
      where("reduce_scatter"), ": the input and output buffers overlap");
  return do_reduce_scatter(in, out, op);
}

Request Communicator::start_all_gather(ConstBuffer in, Buffer out) {
  MIXP_CHECK(in.dtype == out.dtype, where("all_gather"), ": input dtype ", mixp::name_of(in.dtype),
             " differs from output dtype ", mixp::name_of(out.dtype));
  MIXP_CHECK(out.count == in.count * size_t(size()), where("all_gather"),
             ": the output must hold the input's ", in.count, " elements once per rank, that is ",
             in.count * size_t(size()), " elements, got ", out.count);
  MIXP_CHECK(
      !overlap(in.data, bytes_of(in.count, in.dtype), out.data, bytes_of(out.count, out.dtype)),
      where("all_gather"), ": the input and output buffers overlap");
  return do_all_gather(in, out);
}

Request Communicator::start_broadcast(Buffer data, int root) {
  MIXP_CHECK(root >= 0 && root < size(), where("broadcast"), ": the root must be a rank in [0, ",
             size(), "), got ", root);
  return do_broadcast(data, root);
}

Request Communicator::start_barrier() { return do_barrier(); }

// ---- choosing the backend ---------------------------------------------------------------------

namespace {

int integer_variable(const char* name, int low, int high) {
  const char* text = std::getenv(name);
  const std::string_view view = text;
  int value = 0;
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  MIXP_CHECK(
      error == std::errc() && end == view.data() + view.size() && value >= low && value <= high,
      "the environment variable ", name, " must be an integer in [", low, ", ", high, "], got '",
      view, "'");
  return value;
}

}  // namespace

Launch launch_from_environment() {
  Launch launch;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return launch;
  launch.by_mpirun = true;
  launch.world_size = integer_variable("OMPI_COMM_WORLD_SIZE", 1, 1 << 24);
  MIXP_CHECK(std::getenv("OMPI_COMM_WORLD_RANK") != nullptr,
             "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not: start mixp with "
             "Open MPI's mpirun, or unset OMPI_COMM_WORLD_SIZE");
  launch.rank = integer_variable("OMPI_COMM_WORLD_RANK", 0, launch.world_size - 1);
  return launch;
}

bool mpi_built_in() { return MIXP_HAVE_MPI != 0; }

Backend choose_backend(const Launch& launch, bool mpi_available) {
  if (!launch.by_mpirun) return Backend::single_process;
  MIXP_CHECK(mpi_available, "this process was started by mpirun as rank ", launch.rank, " of ",
             launch.world_size,
             ", but this mixp was built without MPI, so each rank would train alone. Install "
             "libopenmpi-dev (scripts/install-deps.sh) and rebuild, or run without mpirun");
  return Backend::mpi;
}

std::unique_ptr<Communicator> make_communicator(Backend backend) {
  switch (backend) {
    case Backend::single_process: return make_single_process_communicator();
    case Backend::mpi:
#if MIXP_HAVE_MPI
      return make_mpi_communicator();
#else
      MIXP_CHECK(false,
                 "the MPI communicator was asked for, but this mixp was built without "
                 "MPI: install libopenmpi-dev (scripts/install-deps.sh) and rebuild");
#endif
  }
  MIXP_CHECK(false, "unknown communicator backend ", int(backend));
}

std::unique_ptr<Communicator> make_communicator() {
  return make_communicator(choose_backend(launch_from_environment(), mpi_built_in()));
}

}  // namespace mixp::dist
