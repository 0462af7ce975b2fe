// ZeRO stage 1 in the trainer: each rank keeps the optimizer state (moments, fp32 masters or
// the low halves of bf16 masters) of its piece of every parameter only. Private to src/train.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
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
/// their elements (partition), so that the parameters of one chunk or less (biases, norms)
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
  Range range(size_t i, int rank) const { return ranges_[i][size_t(rank)]; }
  /// The view of this rank's piece of parameter i: the tensor its optimizer updates.
  const Tensor& view(size_t i) const { return views_[i]; }
  size_t parameters() const { return params_.size(); }

  /// Sets each view's gradient to the reduced gradient of its piece (unset where no rank's
  /// parameter had one).
  void attach_gradients(const GradientReducer& reducer);
  /// The total gradient norm clip_grad_norm would compute from the whole gradients, from each
  /// rank's pieces (an all-gather of their chunk squares); the same on every rank.
  double gradient_norm() const;
  /// Writes every rank's updated pieces into every rank's parameters (one all-gather of bytes),
  /// without marking the parameters as written by someone else than the optimizer.
  void gather_parameters();
  /// The bytes of each rank's block in gather_parameters().
  int64_t gather_bytes() const;

  /// An optimizer's state split into what every rank holds alike and this rank's pieces: each
  /// tensor "<key>/<j>" (member j of the optimizer is parameter members[j]).
  std::pair<StateDict, StateDict> split_pieces(const StateDict& state,
                                               const std::vector<size_t>& members) const;
  /// The whole tensors of an optimizer's state from the pieces of every rank of a run of
  /// shards.size() ranks (shards[r] is rank r's, as split_pieces gave it), for `params`. Throws
  /// mixp::Error naming a piece that is missing or of another size.
  static StateDict assemble(const std::vector<StateDict>& shards,
                            const std::vector<size_t>& members, const std::vector<Tensor>& params);
  /// The pieces of parameters of `numels` elements among `ranks` ranks: [parameter][rank].
  static std::vector<std::vector<Range>> partition(const std::vector<int64_t>& numels, int ranks);
  /// This rank's pieces of a whole state.
  StateDict piece_of_state(const StateDict& whole, const std::vector<size_t>& members) const;

 private:
  std::vector<std::vector<size_t>> block_offsets(size_t& block) const;

  dist::Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<std::vector<Range>> ranges_;  // [parameter][rank]
  std::vector<Tensor> views_;
};

}  // namespace mixp::train
