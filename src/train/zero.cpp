#include "train/zero.h"

#include <charconv>
#include <cstring>
#include <optional>
#include <span>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/optim/clip_grad.h"
#include "train/data_parallel.h"

namespace mixp::train {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The member index j of a state key "<name>/<j>", or nothing.
std::optional<size_t> member_of(const std::string& key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  size_t j = 0;
  const char* first = key.data() + slash + 1;
  const char* last = key.data() + key.size();
  const auto [end, error] = std::from_chars(first, last, j);
  if (error != std::errc() || end != last || first == last) return std::nullopt;
  return j;
}

const char* bytes_of(const Tensor& t) { return static_cast<const char*>(t.raw_data()); }
char* bytes_of(Tensor& t) { return static_cast<char*>(t.raw_data()); }

}  // namespace

ZeroShards::ZeroShards(dist::Communicator& comm, const std::vector<Tensor>& params)
    : comm_(comm), params_(params) {
  const int64_t ranks = comm_.size();
  for (const Tensor& p : params_) {
    const int64_t chunks = ceil_div(p.numel(), optim::kGradNormChunk);
    chunks_per_piece_.push_back(ceil_div(chunks, ranks));
  }
  assign_pieces();
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    // As the optimizers would for the whole parameter: low-precision gradients add up in fp32.
    if (p.dtype() == DType::bf16 || p.dtype() == DType::f16) p.set_grad_dtype(DType::f32);
    int64_t longest = 0;
    for (int r = 0; r < ranks; ++r) longest = std::max(longest, range(i, r).size());
    capacity_.push_back(longest);
    const Range mine = range(i, comm_.rank());
    Tensor view = p.detach().reshape({-1}).slice(mine.begin, mine.end);
    view.set_requires_grad(true);
    views_.push_back(view);
  }
}

// The largest parameters first, each one's pieces largest first to the rank that holds the
// fewest elements so far (the lowest rank on a tie): the same on every rank, and within one
// chunk per parameter of an even split.
void ZeroShards::assign_pieces() {
  const int ranks = comm_.size();
  std::vector<size_t> order(params_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return params_[a].numel() > params_[b].numel();
  });
  std::vector<int64_t> load(size_t(ranks), 0);
  piece_of_rank_.assign(params_.size(), std::vector<int>(size_t(ranks), 0));
  for (size_t i : order) {
    std::vector<int> pieces(static_cast<size_t>(ranks)), by_load(static_cast<size_t>(ranks));
    for (int k = 0; k < ranks; ++k) pieces[size_t(k)] = by_load[size_t(k)] = k;
    std::stable_sort(pieces.begin(), pieces.end(), [&](int a, int b) {
      return piece_range(i, a).size() > piece_range(i, b).size();
    });
    std::stable_sort(by_load.begin(), by_load.end(),
                     [&](int a, int b) { return load[size_t(a)] < load[size_t(b)]; });
    for (int k = 0; k < ranks; ++k) {
      piece_of_rank_[i][size_t(by_load[size_t(k)])] = pieces[size_t(k)];
      load[size_t(by_load[size_t(k)])] += piece_range(i, pieces[size_t(k)]).size();
    }
  }
}

ZeroShards::Range ZeroShards::piece_range(size_t i, int piece) const {
  const int64_t numel = params_[i].numel();
  const int64_t length = chunks_per_piece_[i] * optim::kGradNormChunk;
  return {std::min(numel, piece * length), std::min(numel, (piece + 1) * length)};
}

ZeroShards::Range ZeroShards::range(size_t i, int rank) const {
  return piece_range(i, piece_of_rank_[i][size_t(rank)]);
}

void ZeroShards::attach_gradients(const GradientReducer& reducer) {
  for (size_t i = 0; i < params_.size(); ++i) views_[i].set_grad(reducer.piece_gradient(i));
}

double ZeroShards::gradient_norm() const {
  // Every chunk of every gradient, in order; each rank fills those of its pieces.
  std::vector<size_t> first_chunk;
  size_t total = 0;
  for (const Tensor& p : params_) {
    first_chunk.push_back(total);
    total += size_t(ceil_div(p.numel(), optim::kGradNormChunk));
  }
  std::vector<double> mine(total, 0.0);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = views_[i].grad();
    if (!g.defined()) continue;
    const size_t at = first_chunk[i] + size_t(range(i, comm_.rank()).begin / optim::kGradNormChunk);
    const std::vector<double> squares = optim::chunk_squares(g, /*f64=*/false);
    std::copy(squares.begin(), squares.end(), mine.begin() + std::ptrdiff_t(at));
  }
  std::vector<double> all(total * size_t(comm_.size()));
  comm_.all_gather(std::span<const double>(mine), std::span(all));
  std::vector<std::vector<double>> per_gradient;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!views_[i].grad().defined()) continue;  // no rank's parameter had a gradient
    std::vector<double>& chunks = per_gradient.emplace_back();
    for (int r = 0; r < comm_.size(); ++r) {
      const Range piece = range(i, r);
      const int64_t first = piece.begin / optim::kGradNormChunk;
      const int64_t count = ceil_div(piece.size(), optim::kGradNormChunk);
      for (int64_t c = 0; c < count; ++c)
        chunks.push_back(all[size_t(r) * total + first_chunk[i] + size_t(first + c)]);
    }
  }
  return optim::norm_from_chunk_squares(per_gradient, /*f64=*/false);
}

void ZeroShards::drop_gradients() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

// Rank r's block: its pieces one after another, in parameter order; each block as long as the
// longest.
std::vector<std::vector<size_t>> ZeroShards::block_offsets(size_t& block) const {
  std::vector<std::vector<size_t>> offsets(size_t(comm_.size()));
  block = 0;
  for (int r = 0; r < comm_.size(); ++r) {
    size_t filled = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      offsets[size_t(r)].push_back(filled);
      filled += size_t(range(i, r).size()) * size_of(params_[i].dtype());
    }
    block = std::max(block, filled);
  }
  return offsets;
}

int64_t ZeroShards::gather_bytes() const {
  size_t block = 0;
  (void)block_offsets(block);
  return int64_t(block);
}

void ZeroShards::gather_parameters() {
  size_t block = 0;
  const std::vector<std::vector<size_t>> offsets = block_offsets(block);
  const size_t me = size_t(comm_.rank());
  std::vector<uint8_t> mine(block), all(block * size_t(comm_.size()));
  for (size_t i = 0; i < params_.size(); ++i)
    std::memcpy(mine.data() + offsets[me][i], bytes_of(views_[i]), views_[i].nbytes());
  comm_.all_gather(std::span<const uint8_t>(mine), std::span(all));
  for (int r = 0; r < comm_.size(); ++r) {
    if (r == comm_.rank()) continue;
    for (size_t i = 0; i < params_.size(); ++i) {
      const Range piece = range(i, r);
      const size_t element = size_of(params_[i].dtype());
      std::memcpy(bytes_of(params_[i]) + size_t(piece.begin) * element,
                  all.data() + size_t(r) * block + offsets[size_t(r)][i],
                  size_t(piece.size()) * element);
    }
  }
}

StateDict ZeroShards::gather_state(const StateDict& pieces,
                                   const std::vector<size_t>& members) const {
  StateDict whole = pieces;
  for (const auto& [key, t] : pieces.tensors) {
    const std::optional<size_t> j = member_of(key);
    if (!j || *j >= members.size()) continue;
    const size_t i = members[*j];
    if (t.ndim() != 1 || t.numel() != range(i, comm_.rank()).size()) continue;
    const size_t element = size_of(t.dtype()), capacity = size_t(capacity_[i]) * element;
    std::vector<uint8_t> mine(capacity), all(capacity * size_t(comm_.size()));
    std::memcpy(mine.data(), bytes_of(t), t.nbytes());
    comm_.all_gather(std::span<const uint8_t>(mine), std::span(all));
    if (comm_.rank() != 0) {  // only rank 0 writes checkpoints
      whole.tensors.erase(key);
      continue;
    }
    Tensor full = empty(params_[i].shape(), t.dtype(), MemoryTag::workspace);
    for (int r = 0; r < comm_.size(); ++r) {
      const Range piece = range(i, r);
      std::memcpy(bytes_of(full) + size_t(piece.begin) * element, all.data() + size_t(r) * capacity,
                  size_t(piece.size()) * element);
    }
    whole.tensors[key] = full;
  }
  return whole;
}

StateDict ZeroShards::piece_of_state(const StateDict& whole,
                                     const std::vector<size_t>& members) const {
  StateDict piece = whole;
  for (const auto& [key, t] : whole.tensors) {
    const std::optional<size_t> j = member_of(key);
    if (!j || *j >= members.size()) continue;
    const size_t i = members[*j];
    if (!(t.shape() == params_[i].shape())) continue;
    const Range mine = range(i, comm_.rank());
    piece.tensors[key] = t.reshape({-1}).slice(mine.begin, mine.end).clone(MemoryTag::workspace);
  }
  return piece;
}

}  // namespace mixp::train
