// Data parallelism in the trainer: each rank's share of a batch, the reduction of the gradients
// in buckets that start during backward, and what the ranks must agree on (the loss, found-inf,
// FP8 amaxes, buffers, the configuration). Private to src/train.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixp/amp/fp8.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/dist/communicator.h"
#include "mixp/tensor.h"
#include "mixp/train/trainer.h"
#include "train/zero.h"

namespace mixp::train {

/// The gradients of a step reduced over the ranks, bucket by bucket. Buckets hold the
/// parameters in reverse order (backward reaches the last layers first), up to
/// first_bucket_bytes for the first and bucket_bytes for the others, in one dtype each. When
/// armed, each gradient-accumulated hook marks its parameter ready, and every bucket whose
/// parameters are all ready starts its non-blocking all-reduce, always in bucket order (so that
/// every rank starts the same collectives in the same order) while backward goes on.
class GradientReducer {
 public:
  struct Settings {
    dist::ReduceOp op = dist::ReduceOp::sum;
    /// The dtype the gradients travel and are reduced in (f32 or bf16); unset: each
    /// gradient's own dtype (the deterministic mode's ordered_sum).
    std::optional<DType> wire{};
    int64_t bucket_bytes = int64_t{25} << 20;
    int64_t first_bucket_bytes = int64_t{1} << 20;
    /// ZeRO stage 1: each bucket is laid out rank by rank (rank r's block holds its pieces of
    /// the bucket's parameters) and reduce-scattered, so that each rank receives the reduced
    /// gradients of its pieces only (piece_gradient); the parameters' own gradients are dropped
    /// once copied into their bucket.
    const ZeroShards* pieces = nullptr;
  };

  GradientReducer(dist::Communicator& comm, const std::vector<Tensor>& params, Settings settings);
  /// Removes the hooks; waits for what is in flight.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// The next backward is the step's last: its hooks start the buckets.
  void arm();
  /// After the last backward: starts the buckets not started yet, waits for every one, and
  /// writes the reduced gradients back in their dtypes, also on a rank that had none of a
  /// parameter when another rank had (an empty share of a short batch). A gradient no rank had
  /// stays unset. A gradient in the wire dtype is a view of its bucket (it is reduced in place),
  /// valid until the next step's backward writes the bucket again. `values` travel in the same
  /// all-gather as which gradients each rank had; returns every rank's, rank 0's first.
  std::vector<double> finish(const std::vector<double>& values = {});
  /// How many parameters it reduces.
  size_t parameters() const { return params_.size(); }
  /// The bytes of all buckets: what each rank contributes to the reduction per step.
  int64_t payload_bytes() const;
  /// What each rank sends per step: (N - 1) / N of the payload for a reduce-scatter, twice that
  /// for an all-reduce (a reduce-scatter and an all-gather).
  int64_t bytes_sent_per_step() const;
  /// ZeRO: the reduced gradient (f32) of this rank's piece of parameter i after finish(), or an
  /// undefined tensor when no rank's parameter had a gradient.
  Tensor piece_gradient(size_t i) const;
  /// Each bucket's parameters, by index, in bucket order.
  std::vector<std::vector<size_t>> bucket_parameters() const;
  /// How many buckets the last backward started from its hooks, before finish(): the
  /// reductions that overlapped the rest of backward.
  size_t started_during_backward() const { return started_during_backward_; }
  /// The dtypes the buckets travel in: "f32", "bf16", or several joined by "+".
  std::string wire_dtypes() const;

 private:
  struct Bucket {
    std::vector<size_t> params;   // indices into params_
    std::vector<int64_t> starts;  // each one's first element in `buffer`
    Tensor buffer;
    // ZeRO: rank r's block is buffer[r * block, (r + 1) * block); piece_starts[j][r] is where
    // param j's piece of rank r starts in it; `shard` receives this rank's block, reduced.
    int64_t block = 0;
    std::vector<std::vector<int64_t>> piece_starts;
    Tensor shard;
    size_t ready = 0;
    dist::Request request;
  };
  void on_ready(size_t param);
  void start_ready_buckets();
  void start(Bucket& bucket);
  void fill(Bucket& bucket);
  void write_back(const Bucket& bucket);
  Tensor part_of(const Bucket& bucket, size_t j) const;
  void view_gradients_in(const Bucket& bucket);
  bool in_bucket(const Tensor& gradient, const Bucket& bucket, size_t j) const;
  void lay_out_pieces(Bucket& bucket, DType dtype);
  void fill_pieces(Bucket& bucket);
  void finish_pieces(const Bucket& bucket);
  std::vector<double> agree_on_gradients(const std::vector<double>& values);

  dist::Communicator& comm_;
  std::vector<Tensor> params_;
  Settings settings_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // by parameter
  std::vector<bool> ready_;        // by parameter, this step
  std::vector<bool> had_gradient_;  // by parameter, this step: on any rank after finish()
  std::vector<Tensor> piece_gradients_;  // by parameter (ZeRO)
  size_t next_to_start_ = 0;
  size_t started_during_backward_ = 0;
  bool armed_ = false;
};

/// The ranks of a run and what they share each step.
class DataParallel {
 public:
  DataParallel(dist::Communicator& comm, const TrainOptions& options);

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  dist::Communicator& communicator() { return comm_; }

  /// Throws mixp::Error on every rank, naming the first rank whose `config` (the run's JSON
  /// configuration, with its data's fingerprint) or mixp version differs from rank 0's and the
  /// first key that differs.
  void check_same_configuration(const std::string& config) const;
  /// rank 0's text on every rank.
  std::string broadcast_text(const std::string& text) const;

  /// The reducer of `params` under the options' reduce dtype and mode; with `pieces` (ZeRO),
  /// one that reduce-scatters the pieces.
  void make_reducer(const std::vector<Tensor>& params, const ZeroShards* pieces = nullptr);
  GradientReducer& reducer() { return *reducer_; }

  /// The step's loss (the sum of the ranks' weighted losses, in rank order) and whether any
  /// rank was asked to stop.
  struct Agreement {
    double loss = 0.0;
    bool stop = false;
  };
  /// After the step's last backward: the reducer's finish(), whose all-gather carries the loss
  /// and the stop flag too.
  Agreement reduce_gradients(double local_loss, bool local_stop);
  /// Whether `local` is true on any rank.
  bool any(bool local) const;
  /// found-inf of each optimizer: true on every rank when true on any.
  void agree_on_found_inf(amp::GradScaler& scaler) const;
  /// This step's amax of every FP8 tensor: the maximum over the ranks (NaN when any saw NaN).
  void agree_on_amax(amp::Fp8State& fp8) const;
  /// Each element's maximum over the ranks (NaN when any rank's is NaN).
  std::vector<double> max_over_ranks(const std::vector<double>& local) const;
  /// The f32 buffers (batch norm's running statistics) averaged over the ranks, in rank order:
  /// each rank updated them from its own share of the batch; the i64 ones (batches seen) their
  /// maximum, as a rank with an empty share of a short batch saw one fewer.
  void average_buffers(TrainModel& model) const;
  /// Throws mixp::Error on every rank when the ranks' parameters and buffers are not bitwise
  /// the same after `step`, naming the first rank that differs from rank 0.
  void check_replicas(TrainModel& model, int64_t step) const;
  /// Sums of an evaluation over the ranks' shares, in rank order.
  std::vector<double> sum_over_ranks(const std::vector<double>& local) const;

  /// Closes a step's count of the bytes sent.
  void end_step();
  /// Bytes each rank sends in a step (the last one closed): the gradient all-reduce (2 (N - 1)
  /// / N of its payload: a reduce-scatter and an all-gather), the agreements and the buffers.
  int64_t bytes_sent_per_step() const;

 private:
  std::vector<double> gather(const std::vector<double>& local) const;

  dist::Communicator& comm_;
  std::string reduce_dtype_;
  bool deterministic_;
  int64_t bucket_bytes_, first_bucket_bytes_;
  std::unique_ptr<GradientReducer> reducer_;
  const ZeroShards* pieces_ = nullptr;
  // Values of 8 bytes sent by the agreements' all-gathers and buffer bytes broadcast, in all
  // and in the last closed step.
  mutable int64_t sent_values_ = 0, sent_buffer_bytes_ = 0;
  int64_t values_at_step_start_ = 0, buffer_bytes_at_step_start_ = 0;
  int64_t step_values_ = 0, step_buffer_bytes_ = 0;
};

/// The rows [begin, end) of a batch of `n` samples that global micro-batch `index` of `parts`
/// takes: the ranks' shares and, within each, its grad_accum micro-batches.
struct Share {
  int64_t begin = 0, end = 0;
};
inline Share share_of(int64_t n, int64_t index, int64_t parts) {
  return {n * index / parts, n * (index + 1) / parts};
}

}  // namespace mixp::train
