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

// memcpy that allows nothing to copy: a rank's piece of a small tensor can be empty, and an empty
// tensor's or vector's pointer null, which memcpy may not be given even for zero bytes.
void copy_bytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

}  // namespace

ZeroShards::ZeroShards(dist::Communicator& comm, const std::vector<Tensor>& params)
    : comm_(comm), params_(params) {
  std::vector<int64_t> numels;
  for (const Tensor& p : params_) numels.push_back(p.numel());
  ranges_ = partition(numels, comm_.size());
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    // As the optimizers would for the whole parameter: low-precision gradients add up in fp32.
    if (p.dtype() == DType::bf16 || p.dtype() == DType::f16) p.set_grad_dtype(DType::f32);
    const Range mine = range(i, comm_.rank());
    Tensor view = p.detach().reshape({-1}).slice(mine.begin, mine.end);
    view.set_requires_grad(true);
    views_.push_back(view);
  }
}

// Each parameter in pieces of q = ceil(chunks / N) chunks; the largest parameters first, each
// one's pieces largest first to the rank that holds the fewest elements so far (the lowest rank
// on a tie): a function of the sizes and N alone, so every rank (and a resume on another N)
// computes the same.
std::vector<std::vector<ZeroShards::Range>> ZeroShards::partition(
    const std::vector<int64_t>& numels, int ranks) {
  const auto piece = [&](size_t i, int k) {
    const int64_t chunks = ceil_div(numels[i], optim::kGradNormChunk);
    const int64_t length = ceil_div(chunks, ranks) * optim::kGradNormChunk;
    return Range{std::min(numels[i], k * length), std::min(numels[i], (k + 1) * length)};
  };
  std::vector<size_t> order(numels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  std::vector<int64_t> load(size_t(ranks), 0);
  std::vector<std::vector<Range>> ranges(numels.size(), std::vector<Range>(size_t(ranks)));
  for (size_t i : order) {
    std::vector<int> pieces(static_cast<size_t>(ranks)), by_load(static_cast<size_t>(ranks));
    for (int k = 0; k < ranks; ++k) pieces[size_t(k)] = by_load[size_t(k)] = k;
    std::stable_sort(pieces.begin(), pieces.end(),
                     [&](int a, int b) { return piece(i, a).size() > piece(i, b).size(); });
    std::stable_sort(by_load.begin(), by_load.end(),
                     [&](int a, int b) { return load[size_t(a)] < load[size_t(b)]; });
    for (int k = 0; k < ranks; ++k) {
      const size_t rank = size_t(by_load[size_t(k)]);
      ranges[i][rank] = piece(i, pieces[size_t(k)]);
      load[rank] += ranges[i][rank].size();
    }
  }
  return ranges;
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
    copy_bytes(mine.data() + offsets[me][i], bytes_of(views_[i]), views_[i].nbytes());
  comm_.all_gather(std::span<const uint8_t>(mine), std::span(all));
  for (int r = 0; r < comm_.size(); ++r) {
    if (r == comm_.rank()) continue;
    for (size_t i = 0; i < params_.size(); ++i) {
      const Range piece = range(i, r);
      const size_t element = size_of(params_[i].dtype());
      copy_bytes(bytes_of(params_[i]) + size_t(piece.begin) * element,
                 all.data() + size_t(r) * block + offsets[size_t(r)][i],
                 size_t(piece.size()) * element);
    }
  }
}

std::pair<StateDict, StateDict> ZeroShards::split_pieces(
    const StateDict& state, const std::vector<size_t>& members) const {
  StateDict rest = state, pieces;
  for (const auto& [key, t] : state.tensors) {
    const std::optional<size_t> j = member_of(key);
    if (!j || *j >= members.size()) continue;
    pieces.tensors[key] = t;
    rest.tensors.erase(key);
  }
  return {rest, pieces};
}

StateDict ZeroShards::assemble(const std::vector<StateDict>& shards,
                               const std::vector<size_t>& members,
                               const std::vector<Tensor>& params) {
  std::vector<int64_t> numels;
  for (const Tensor& p : params) numels.push_back(p.numel());
  const std::vector<std::vector<Range>> ranges = partition(numels, int(shards.size()));
  StateDict whole;
  for (const auto& [key, first] : shards.front().tensors) {
    const std::optional<size_t> j = member_of(key);
    MIXP_CHECK(j && *j < members.size(), "a checkpoint shard holds '", key,
               "', which is no piece of this run's optimizer");
    const size_t i = members[*j], element = size_of(first.dtype());
    Tensor full = empty(params[i].shape(), first.dtype(), MemoryTag::workspace);
    for (size_t r = 0; r < shards.size(); ++r) {
      const auto it = shards[r].tensors.find(key);
      MIXP_CHECK(it != shards[r].tensors.end() && it->second.numel() == ranges[i][r].size() &&
                     it->second.dtype() == first.dtype(),
                 "checkpoint shard ", r, " of ", shards.size(), " holds no piece '", key,
                 "' of ", ranges[i][r].size(), " elements, as this run's parameters need");
      copy_bytes(bytes_of(full) + size_t(ranges[i][r].begin) * element, bytes_of(it->second),
                 it->second.nbytes());
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
