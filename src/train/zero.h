// ZeRO stage 1 in the trainer: each rank keeps the optimizer state (moments, fp32 masters or
// the low halves of bf16 masters) of its piece of every parameter only. Private to src/train.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixp/dist/communicator.h"
#include "mixp/state_dict.h"
#include "mixp/tensor.h"

namespace mixp::train {

class GradientReducer;

/// The pieces of the parameters and what moves them between the ranks.
///
/// Parameter i is cut into N pieces at multiples of optim::kGradNormChunk elements (so that the
/// gradient norm of the pieces is clip_grad_norm's, bit for bit): q_i = ceil(chunks_i / N)
/// chunks each, the last ones shorter or empty. The pieces go to the ranks so as to even out
/// their elements (assign_pieces), so that the parameters of one chunk or less (biases, norms)
/// spread over the ranks too. Any parameter count works; the ranks' shares differ by about one
/// chunk at most.
///
/// Each rank's optimizers update views of its pieces (1-D, sharing the parameters' storage), so
/// they allocate state for those elements only. The gradients are reduce-scattered (the
/// GradientReducer lays its buckets out rank by rank): each rank receives the reduced gradients
/// of its pieces only, which become its views' gradients.
class ZeroShards {
 public:
  struct Range {
    int64_t begin = 0, end = 0;
    int64_t size() const { return end - begin; }
  };

  /// `params` as the trainer holds them, the same on every rank.
  ZeroShards(dist::Communicator& comm, const std::vector<Tensor>& params);

  /// Rank `rank`'s piece of parameter i.
  Range range(size_t i, int rank) const;
  /// The view of this rank's piece of parameter i: the tensor its optimizer updates.
  const Tensor& view(size_t i) const { return views_[i]; }
  size_t parameters() const { return params_.size(); }

  /// Sets each view's gradient to the reduced gradient of its piece (unset where no rank's
  /// parameter had one).
  void attach_gradients(const GradientReducer& reducer);
  /// The total gradient norm clip_grad_norm would compute from the whole gradients, from each
  /// rank's pieces (an all-gather of their chunk squares); the same on every rank.
  double gradient_norm() const;
  /// Drops the parameters' own (local, unreduced) gradients.
  void drop_gradients();
  /// Writes every rank's updated pieces into every rank's parameters (one all-gather of bytes),
  /// without marking the parameters as written by someone else than the optimizer.
  void gather_parameters();
  /// The bytes of each rank's block in gather_parameters().
  int64_t gather_bytes() const;

  /// An optimizer's state as one process would hold it, on rank 0 (which writes checkpoints):
  /// each tensor "<key>/<j>" of this rank's pieces (member j of the optimizer is parameter
  /// members[j]) gathered from every rank into the whole parameter's shape; the other ranks
  /// get the state without those tensors. Collective: every rank calls it with the same keys.
  StateDict gather_state(const StateDict& pieces, const std::vector<size_t>& members) const;
  /// The reverse: this rank's pieces of a whole state.
  StateDict piece_of_state(const StateDict& whole, const std::vector<size_t>& members) const;

 private:
  void assign_pieces();
  std::vector<std::vector<size_t>> block_offsets(size_t& block) const;
  Range piece_range(size_t i, int piece) const;

  dist::Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<int64_t> chunks_per_piece_;
  std::vector<std::vector<int>> piece_of_rank_;  // [parameter][rank]
  std::vector<Tensor> views_;
  std::vector<int64_t> capacity_;  // the longest piece of each parameter, in elements
};

}  // namespace mixp::train
