#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <deque>
#include <mutex>
#include <vector>

#include "dist/chunk_reduction.h"

namespace mixp::dist {

Error mpi_error(int code, const char* operation, int rank, int size) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  const std::string description = length > 0 ? std::string(text, size_t(length))
                                             : mixp::detail::concat("MPI error code ", code);
  return Error(
      mixp::detail::concat(operation, " failed on rank ", rank, " of ", size, ": ", description),
      SourceLocation::current());
}

namespace {

// MPI_Init once per process, MPI_Finalize when the last communicator is gone, unless the
// program initialized MPI itself (then it finalizes it too).
class MpiLibrary {
 public:
  static std::shared_ptr<MpiLibrary> acquire() {
    static std::mutex mutex;
    static std::weak_ptr<MpiLibrary> current;
    const std::lock_guard lock(mutex);
    if (auto library = current.lock()) return library;
    int finalized = 0, initialized = 0;
    MPI_Finalized(&finalized);
    MIXP_CHECK(!finalized,
               "MPI was finalized in this process and cannot be started again: keep "
               "one communicator for the whole run");
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      if (code != MPI_SUCCESS) throw mpi_error(code, "MPI_Init_thread", 0, 0);
      prefer_ring_for_non_blocking_all_reduce();
    }
    auto library = std::shared_ptr<MpiLibrary>(new MpiLibrary(!initialized));
    current = library;
    return library;
  }
  ~MpiLibrary() {
    if (owns_mpi_) MPI_Finalize();
  }
  MpiLibrary(const MpiLibrary&) = delete;
  MpiLibrary& operator=(const MpiLibrary&) = delete;

 private:
  explicit MpiLibrary(bool owns_mpi) : owns_mpi_(owns_mpi) {}

  // Open MPI's libnbc reduces an in-place all-reduce, or one among fewer than 4 ranks, on a
  // binomial tree: rank 0 receives every element, adds, and sends the sums back, alone. Its ring
  // splits the sums between the ranks; over shared memory it ran 12 MiB of f32 at 2 ranks in
  // about a fifth of the time, as fast as the blocking MPI_Allreduce. Through MPI's tool
  // interface, and only where nobody chose an algorithm (0: libnbc decides); another MPI has no
  // such variable and is left as it is.
  static void prefer_ring_for_non_blocking_all_reduce() {
    int provided = 0;
    if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return;
    int index = 0;
    MPI_T_cvar_handle handle = nullptr;
    int elements = 0, chosen = -1;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &elements) == MPI_SUCCESS) {
      if (elements == 1 && MPI_T_cvar_read(handle, &chosen) == MPI_SUCCESS && chosen == 0) {
        const int ring = 1;
        MPI_T_cvar_write(handle, &ring);
      }
      MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
  }
  bool owns_mpi_;
};

struct Origin {
  const char* operation;
  int rank, size;
  void check(int code) const {
    if (code != MPI_SUCCESS) throw mpi_error(code, operation, rank, size);
  }
};

bool finished(MPI_Request& request, const Origin& origin) {
  int flag = 0;
  origin.check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
  return flag != 0;
}

// One MPI request started by a native collective.
class SingleRequest final : public detail::PendingOperation {
 public:
  explicit SingleRequest(Origin origin) : origin_(origin) {}
  MPI_Request* handle() { return &request_; }
  void wait() override { origin_.check(MPI_Wait(&request_, MPI_STATUS_IGNORE)); }
  bool test() override { return finished(request_, origin_); }

 private:
  Origin origin_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// How a reduction in rank order splits its elements: rank r reduces counts[r] elements from displs[r].
struct Chunks {
  std::vector<int> counts, displs;
};

class RankOrderReduction;

// The all-gathers that end rank-order all-reduces. MPI needs every rank to start the
// collectives of a communicator in the same order, but an all-gather can start only once its
// all-to-all has completed, which happens at different times on different ranks, between the
// collectives the program starts. So the all-gathers run on a communicator of their own, each
// in the order its all-reduce was started (its ticket), driven forward by whichever of them is
// waited on or tested.
struct GatherSequence {
  MPI_Comm comm = MPI_COMM_NULL;
  uint64_t issued = 0;       // tickets handed out
  uint64_t next_gather = 0;  // the ticket whose all-gather starts next
  std::deque<RankOrderReduction*> live;  // the all-reduces not yet complete, by ticket
};

// A reduction in rank order (chunk_reduction.h): an all-to-all sends each rank its chunk of
// every rank's data, each rank reduces its chunk locally in rank order, and an all-reduce then
// all-gathers the reduced chunks in place (GatherSequence). MPI sees only words of the element's
// width.
class RankOrderReduction final : public detail::PendingOperation {
 public:
  // `gather_into` is the all-reduce's buffer, or null for a reduce-scatter, which ends with
  // the local reduction into `own_chunk`.
  RankOrderReduction(Origin origin, MPI_Comm comm, GatherSequence& sequence, ReduceOp op,
                     ConstBuffer in, Buffer own_chunk, void* gather_into, Chunks chunks)
      : origin_(origin),
        sequence_(sequence),
        op_(op),
        dtype_(in.dtype),
        own_chunk_(own_chunk),
        gather_into_(gather_into),
        chunks_(std::move(chunks)),
        word_(word_type(in.dtype)),
        received_(size_t(origin.size) * own_chunk.count * size_t(size_of(in.dtype))) {
    const int mine = int(own_chunk.count);
    receive_counts_.assign(size_t(origin.size), mine);
    for (int r = 0; r < origin.size; ++r) receive_displs_.push_back(r * mine);
    origin_.check(MPI_Ialltoallv(in.data, chunks_.counts.data(), chunks_.displs.data(),
                                 word_, received_.data(), receive_counts_.data(),
                                 receive_displs_.data(), word_, comm, &request_));
    if (gather_into_ != nullptr) {
      ticket_ = sequence_.issued++;
      sequence_.live.push_back(this);
    }
  }
  ~RankOrderReduction() override {
    auto& live = sequence_.live;
    if (auto it = std::find(live.begin(), live.end(), this); it != live.end()) live.erase(it);
  }

  void wait() override {
    while (!test()) {
    }
  }
  bool test() override {
    if (gather_into_ == nullptr) {
      poll();
      return stage_ == Stage::done;
    }
    // The all-reduces started before this one first: their all-gathers come first.
    const std::deque<RankOrderReduction*> earlier = sequence_.live;
    for (RankOrderReduction* op : earlier) {
      op->poll();
      if (op == this) break;
    }
    return stage_ == Stage::done;
  }

 private:
  enum class Stage { exchanging, reduced, gathering, done };

  // The elements travel as unsigned words of their width: MPI only moves them.
  static MPI_Datatype word_type(DType dtype) {
    switch (size_of(dtype)) {
      case 2: return MPI_UINT16_T;
      case 4: return MPI_UINT32_T;
      default: return MPI_UINT64_T;
    }
  }

  // Moves this operation forward as far as it can go without blocking.
  void poll() {
    if (stage_ == Stage::exchanging && finished(request_, origin_)) {
      reduce_chunks_in_rank_order(
          {received_.data(), own_chunk_.count * size_t(origin_.size), dtype_}, origin_.size,
          own_chunk_, op_);
      stage_ = gather_into_ == nullptr ? Stage::done : Stage::reduced;
    }
    if (stage_ == Stage::reduced && sequence_.next_gather == ticket_) {
      origin_.check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gather_into_,
                                    chunks_.counts.data(), chunks_.displs.data(), word_,
                                    sequence_.comm, &request_));
      ++sequence_.next_gather;
      stage_ = Stage::gathering;
    }
    if (stage_ == Stage::gathering && finished(request_, origin_)) {
      stage_ = Stage::done;
      auto& live = sequence_.live;
      live.erase(std::find(live.begin(), live.end(), this));
    }
  }

  Origin origin_;
  GatherSequence& sequence_;
  ReduceOp op_;
  DType dtype_;
  Buffer own_chunk_;
  void* gather_into_;
  Chunks chunks_;
  std::vector<int> receive_counts_, receive_displs_;
  MPI_Datatype word_;
  std::vector<unsigned char> received_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  Stage stage_ = Stage::exchanging;
  uint64_t ticket_ = 0;
};

MPI_Datatype native_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

// Integer sums are exact, so ordered_sum of integers is MPI's sum.
MPI_Op native_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() : library_(MpiLibrary::acquire()) {
    // MPI_COMM_WORLD's errors stay fatal, as the program chose; this duplicate returns them.
    Origin{"MPI_Comm_dup", 0, 0}.check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    Origin{"MPI_Comm_dup", 0, 0}.check(MPI_Comm_dup(comm_, &gathers_.comm));
    MPI_Comm_set_errhandler(gathers_.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    MPI_Comm_free(&gathers_.comm);
    MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "mpi"; }

 protected:
  Request do_all_reduce(Buffer data, ReduceOp op) override {
    const Origin origin = limited("all_reduce", data.count, 1);
    if (reduced_in_rank_order(data.dtype, op)) {
      Chunks chunks = balanced_chunks(data.count);
      const auto mine = size_t(rank_);
      auto* own = static_cast<unsigned char*>(data.data) +
                  size_t(chunks.displs[mine]) * size_t(size_of(data.dtype));
      const Buffer own_chunk{own, size_t(chunks.counts[mine]), data.dtype};
      return Request(std::make_unique<RankOrderReduction>(
          origin, comm_, gathers_, op, ConstBuffer{data.data, data.count, data.dtype}, own_chunk,
          data.data, std::move(chunks)));
    }
    auto request = std::make_unique<SingleRequest>(origin);
    origin.check(MPI_Iallreduce(MPI_IN_PLACE, data.data, int(data.count), native_type(data.dtype),
                                native_op(op), comm_, request->handle()));
    return Request(std::move(request));
  }

  Request do_reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op) override {
    const Origin origin = limited("reduce_scatter", in.count, 1);
    if (reduced_in_rank_order(in.dtype, op)) {
      Chunks chunks;
      for (int r = 0; r < size_; ++r) {
        chunks.counts.push_back(int(out.count));
        chunks.displs.push_back(r * int(out.count));
      }
      return Request(std::make_unique<RankOrderReduction>(origin, comm_, gathers_, op, in, out,
                                                          nullptr, std::move(chunks)));
    }
    auto request = std::make_unique<SingleRequest>(origin);
    origin.check(MPI_Ireduce_scatter_block(in.data, out.data, int(out.count), native_type(in.dtype),
                                           native_op(op), comm_, request->handle()));
    return Request(std::move(request));
  }

  Request do_all_gather(ConstBuffer in, Buffer out) override {
    const size_t element_bytes = size_t(size_of(in.dtype));
    const Origin origin = limited("all_gather", out.count, element_bytes);
    const int bytes = int(in.count * element_bytes);
    auto request = std::make_unique<SingleRequest>(origin);
    origin.check(MPI_Iallgather(in.data, bytes, MPI_BYTE, out.data, bytes, MPI_BYTE, comm_,
                                request->handle()));
    return Request(std::move(request));
  }

  Request do_broadcast(Buffer data, int root) override {
    const size_t element_bytes = size_t(size_of(data.dtype));
    const Origin origin = limited("broadcast", data.count, element_bytes);
    auto request = std::make_unique<SingleRequest>(origin);
    origin.check(MPI_Ibcast(data.data, int(data.count * element_bytes), MPI_BYTE, root, comm_,
                            request->handle()));
    return Request(std::move(request));
  }

  Request do_barrier() override {
    auto request = std::make_unique<SingleRequest>(Origin{"barrier", rank_, size_});
    Origin{"barrier", rank_, size_}.check(MPI_Ibarrier(comm_, request->handle()));
    return Request(std::move(request));
  }

 private:
  // MPI counts and displacements are ints.
  Origin limited(const char* operation, size_t count, size_t element_bytes) const {
    MIXP_CHECK(count * element_bytes <= size_t(INT_MAX), operation, " on rank ", rank_, " of ",
               size_, ": ", count, " elements are more than one MPI call can move (",
               INT_MAX / element_bytes, "); split the buffer");
    return {operation, rank_, size_};
  }

  // Rank r's share: the first (count mod size) ranks take one element more.
  Chunks balanced_chunks(size_t count) const {
    Chunks chunks;
    const size_t base = count / size_t(size_), extra = count % size_t(size_);
    size_t offset = 0;
    for (size_t r = 0; r < size_t(size_); ++r) {
      const size_t n = base + (r < extra ? 1 : 0);
      chunks.counts.push_back(int(n));
      chunks.displs.push_back(int(offset));
      offset += n;
    }
    return chunks;
  }

  std::shared_ptr<MpiLibrary> library_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  GatherSequence gathers_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

}  // namespace mixp::dist
