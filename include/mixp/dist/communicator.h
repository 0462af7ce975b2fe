// mixp/dist/communicator.h — collective communication between the processes of a data-parallel
// run: all-reduce, reduce-scatter, all-gather, broadcast and barrier, each blocking or started
// and waited on later.
//
// A Communicator joins the `size()` processes of a run; each has a `rank()` in [0, size). Every
// rank calls the same collectives in the same order with buffers of the same length. Two
// backends implement it: a single-process one (size 1, no MPI at all) and Open MPI, used when
// the process was started by `mpirun` and mixp was built with MPI. make_communicator() picks.
//
// Example (run as `mpirun -np 4 ./a.out`, or alone as one process):
//
//   auto comm = mixp::dist::make_communicator();
//   std::vector<float> grad = local_gradient();             // this rank's contribution
//   comm->all_reduce(std::span(grad), mixp::dist::ReduceOp::sum);
//   for (float& g : grad) g /= float(comm->size());          // averaged over the ranks
//
//   std::vector<mixp::bfloat16> half = bf16_gradient();
//   mixp::dist::Request pending = comm->all_reduce_async(std::span(half));
//   do_other_work();                                         // overlaps the transfer
//   pending.wait();                                          // throws mixp::Error on failure
//
// Reductions (sum, max, ordered_sum) take f32, f64, i32 and i64 elements, which MPI reduces
// natively (except ordered_sum of floats), and the 16-bit floats bf16 and f16, which MPI has no
// type for. A 16-bit reduction sends 16-bit values
// but adds in fp32 and rounds once: each rank receives the N contributions to its 1/N of the
// elements, sums them in fp32 in rank order, rounds that sum to the 16-bit type (nearest, ties
// to even), and, for an all-reduce, the rounded parts are all-gathered. Its result is within one
// 16-bit rounding of the exact sum (plus fp32's error over N terms), at any number of ranks; a
// ring of 16-bit additions would round N - 1 times. ordered_sum takes the same path (all-to-all,
// local sum in rank order, all-gather) with the rounding its definition asks for. Every rank
// receives bitwise the same result.
//
// All-gather and broadcast move the bytes of any dtype. A Request must be waited on (or
// destroyed, which waits) before its buffers are touched again. Errors, from bad arguments or
// from MPI, are mixp::Error naming the operation and the rank.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "mixp/dtype.h"
#include "mixp/float_types.h"

namespace mixp::dist {

/// How a reduction combines the ranks' values. Append-only.
enum class ReduceOp : uint8_t {
  sum = 0,
  max = 1,
  /// The sum in rank order, ((x_0 + x_1) + x_2) + ..., each addition rounded to the element
  /// type (bf16 and f16: added in fp32 and rounded to 16 bits each time), so that the result is
  /// bitwise the one a single process gets by adding the ranks' values one after another, as
  /// gradient accumulation does. Integers: the same as sum (exact).
  ordered_sum = 2,
};

/// "sum", "max" or "ordered_sum".
const char* name_of(ReduceOp op);

namespace detail {

/// A collective that has started; the backend decides how it is driven to completion.
class PendingOperation {
 public:
  virtual ~PendingOperation() = default;
  /// Blocks until the operation is complete. Throws mixp::Error when it failed.
  virtual void wait() = 0;
  /// True once complete; drives the transfer forward without blocking. Throws on failure.
  virtual bool test() = 0;
};

}  // namespace detail

/// The storage types of mixp's dtypes: float, double, bfloat16, float16, the FP8 types, int32_t,
/// int64_t, uint8_t.
template <typename T>
concept Element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, float16> ||
    std::same_as<T, bfloat16> || std::same_as<T, float8_e4m3> || std::same_as<T, float8_e5m2> ||
    std::same_as<T, int32_t> || std::same_as<T, int64_t> || std::same_as<T, uint8_t>;

namespace detail {

template <Element T>
constexpr DType dtype_for() {
  if constexpr (std::same_as<T, float>) {
    return DType::f32;
  } else if constexpr (std::same_as<T, double>) {
    return DType::f64;
  } else if constexpr (std::same_as<T, float16>) {
    return DType::f16;
  } else if constexpr (std::same_as<T, bfloat16>) {
    return DType::bf16;
  } else if constexpr (std::same_as<T, float8_e4m3>) {
    return DType::e4m3;
  } else if constexpr (std::same_as<T, float8_e5m2>) {
    return DType::e5m2;
  } else if constexpr (std::same_as<T, int32_t>) {
    return DType::i32;
  } else if constexpr (std::same_as<T, int64_t>) {
    return DType::i64;
  } else {
    return DType::u8;
  }
}

}  // namespace detail

/// The handle of a started collective. Move-only. Destroying a pending request waits for it and
/// drops its error; call wait() to see errors.
class Request {
 public:
  /// A request that is already complete.
  Request() = default;
  explicit Request(std::unique_ptr<detail::PendingOperation> operation);
  Request(Request&&) noexcept = default;
  /// Waits for the request this one held, then takes `other`'s.
  Request& operator=(Request&& other);
  ~Request();

  /// Blocks until the collective is complete; afterwards its buffers hold the result. Throws
  /// mixp::Error when it failed. Does nothing on a complete request.
  void wait();
  /// True when complete (then as after wait()); false while in flight. Never blocks.
  bool test();
  /// True until wait() or a successful test() completed it.
  bool pending() const { return operation_ != nullptr; }

 private:
  std::unique_ptr<detail::PendingOperation> operation_;
};

/// A typed view of a buffer, as the backends receive it.
struct Buffer {
  void* data;
  size_t count;  ///< elements
  DType dtype;
};
struct ConstBuffer {
  const void* data;
  size_t count;  ///< elements
  DType dtype;
};

/// The processes of a run, and the collectives between them.
class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This process, in [0, size()).
  virtual int rank() const = 0;
  /// The number of processes.
  virtual int size() const = 0;
  /// "single-process" or "mpi".
  virtual const char* backend_name() const = 0;

  /// Replaces `data` on every rank with the elementwise reduction over the ranks.
  template <Element T>
  Request all_reduce_async(std::span<T> data, ReduceOp op = ReduceOp::sum) {
    return start_all_reduce({data.data(), data.size(), detail::dtype_for<T>()}, op);
  }
  /// Rank r receives in `out` block r of the reduction of `in`: `in` holds size() blocks of
  /// out.size() elements each. `in` and `out` must not overlap.
  template <Element T>
  Request reduce_scatter_async(std::span<const T> in, std::span<T> out,
                               ReduceOp op = ReduceOp::sum) {
    return start_reduce_scatter({in.data(), in.size(), detail::dtype_for<T>()},
                                {out.data(), out.size(), detail::dtype_for<T>()}, op);
  }
  /// Every rank receives in `out` the `in` of every rank, rank 0's first: out.size() must be
  /// size() * in.size(). `in` and `out` must not overlap.
  template <Element T>
  Request all_gather_async(std::span<const T> in, std::span<T> out) {
    return start_all_gather({in.data(), in.size(), detail::dtype_for<T>()},
                            {out.data(), out.size(), detail::dtype_for<T>()});
  }
  /// Every rank receives `root`'s `data`.
  template <Element T>
  Request broadcast_async(std::span<T> data, int root) {
    return start_broadcast({data.data(), data.size(), detail::dtype_for<T>()}, root);
  }
  /// Complete once every rank has started it.
  Request barrier_async() { return start_barrier(); }

  template <Element T>
  void all_reduce(std::span<T> data, ReduceOp op = ReduceOp::sum) {
    all_reduce_async(data, op).wait();
  }
  template <Element T>
  void reduce_scatter(std::span<const T> in, std::span<T> out, ReduceOp op = ReduceOp::sum) {
    reduce_scatter_async(in, out, op).wait();
  }
  template <Element T>
  void all_gather(std::span<const T> in, std::span<T> out) {
    all_gather_async(in, out).wait();
  }
  template <Element T>
  void broadcast(std::span<T> data, int root) {
    broadcast_async(data, root).wait();
  }
  void barrier() { barrier_async().wait(); }

  /// The type-erased forms: they check the arguments (same dtype, lengths, root, no overlap,
  /// a dtype the reduction takes), then start the backend's operation.
  Request start_all_reduce(Buffer data, ReduceOp op);
  Request start_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op);
  Request start_all_gather(ConstBuffer in, Buffer out);
  Request start_broadcast(Buffer data, int root);
  Request start_barrier();

 protected:
  /// The backends' operations, called with arguments already checked.
  virtual Request do_all_reduce(Buffer data, ReduceOp op) = 0;
  virtual Request do_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) = 0;
  virtual Request do_all_gather(ConstBuffer in, Buffer out) = 0;
  virtual Request do_broadcast(Buffer data, int root) = 0;
  virtual Request do_barrier() = 0;

 private:
  std::string where(const char* operation) const;
};

/// True when a dtype can be reduced: f32, f64, i32, i64 natively, bf16 and f16 in fp32.
bool reducible(DType dtype);

/// The backends a communicator can have. Append-only.
enum class Backend : uint8_t {
  single_process = 0,
  mpi = 1,
};

/// How this process was started, read from the variables a launcher sets.
struct Launch {
  bool by_mpirun = false;  ///< Open MPI's mpirun set OMPI_COMM_WORLD_SIZE
  int world_size = 1;
  int rank = 0;
};

/// Reads OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK (the program's edge: nothing else in mixp
/// reads them). Throws mixp::Error when they are set but are not numbers in range.
Launch launch_from_environment();

/// True when this mixp was built with MPI.
bool mpi_built_in();

/// The backend for a launch: MPI when started by mpirun, else the single process. Throws
/// mixp::Error when started by mpirun but `mpi_available` is false, since the ranks would each
/// train alone.
Backend choose_backend(const Launch& launch, bool mpi_available);

/// A communicator of the given backend. The MPI one initializes MPI on first use and finalizes
/// it when the last MPI communicator is destroyed; MPI cannot be started again afterwards.
/// Throws mixp::Error for the MPI backend in a build without MPI.
std::unique_ptr<Communicator> make_communicator(Backend backend);

/// The communicator for this process: make_communicator(choose_backend(
/// launch_from_environment(), mpi_built_in())).
std::unique_ptr<Communicator> make_communicator();

}  // namespace mixp::dist
