#include "train/data_parallel.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <span>

#include <nlohmann/json.hpp>

#include "mixp/autograd.h"
#include "mixp/error.h"

namespace mixp::train {

// ---- GradientReducer --------------------------------------------------------------------------

GradientReducer::GradientReducer(dist::Communicator& comm, const std::vector<Tensor>& params,
                                 Settings settings)
    : comm_(comm), params_(params), settings_(settings) {
  bucket_of_.assign(params_.size(), 0);
  ready_.assign(params_.size(), false);
  int64_t filled = 0;
  std::vector<DType> dtypes;  // each bucket's
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const DType dtype = settings_.wire.value_or(p.grad_dtype());
    const int64_t bytes = p.numel() * int64_t(size_of(dtype));
    const int64_t cap =
        buckets_.size() == 1 ? settings_.first_bucket_bytes : settings_.bucket_bytes;
    const bool fits = !buckets_.empty() && dtypes.back() == dtype && filled + bytes <= cap;
    if (!fits) {
      buckets_.emplace_back();
      dtypes.push_back(dtype);
      filled = 0;
    }
    Bucket& b = buckets_.back();
    b.params.push_back(k);
    b.starts.push_back(filled / int64_t(size_of(dtype)));
    filled += bytes;
    bucket_of_[k] = buckets_.size() - 1;
  }
  if (settings_.pieces) piece_gradients_.resize(params_.size());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (settings_.pieces) {
      lay_out_pieces(buckets_[i], dtypes[i]);
      continue;
    }
    int64_t count = 0;
    for (size_t k : buckets_[i].params) count += params_[k].numel();
    buckets_[i].buffer = zeros({count}, dtypes[i], MemoryTag::gradient);
    view_gradients_in(buckets_[i]);
  }
  had_gradient_.assign(params_.size(), false);
  for (size_t k = 0; k < params_.size(); ++k)
    autograd::set_gradient_accumulated_hook(params_[k], [this, k] { on_ready(k); });
}

GradientReducer::~GradientReducer() {
  for (const Tensor& p : params_) {
    autograd::set_gradient_accumulated_hook(p, {});
    autograd::set_gradient_storage(p, Tensor());
  }
  for (Bucket& b : buckets_) b.request = dist::Request();  // waits
}

void GradientReducer::arm() { armed_ = true; }

Tensor GradientReducer::part_of(const Bucket& b, size_t j) const {
  const Tensor& p = params_[b.params[j]];
  return b.buffer.slice(b.starts[j], b.starts[j] + p.numel()).view(p.shape());
}

// A gradient in the wire dtype lives in its bucket (PyTorch DDP's gradient_as_bucket_view):
// backward writes it there and the reduction sums it in place, with no copy in or out.
void GradientReducer::view_gradients_in(const Bucket& b) {
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Tensor& p = params_[b.params[j]];
    if (p.grad_dtype() == b.buffer.dtype()) autograd::set_gradient_storage(p, part_of(b, j));
  }
}

bool GradientReducer::in_bucket(const Tensor& gradient, const Bucket& b, size_t j) const {
  return gradient.defined() && gradient.dtype() == b.buffer.dtype() &&
         gradient.raw_data() == part_of(b, j).raw_data();
}

void GradientReducer::on_ready(size_t param) {
  if (!armed_ || ready_[param]) return;
  ready_[param] = true;
  ++buckets_[bucket_of_[param]].ready;
  start_ready_buckets();
  // MPI moves a non-blocking collective forward only inside MPI calls: give the oldest one in
  // flight a turn while backward goes on.
  for (size_t b = 0; b < next_to_start_; ++b) {
    if (buckets_[b].request.pending()) {
      buckets_[b].request.test();
      break;
    }
  }
}

void GradientReducer::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() &&
         buckets_[next_to_start_].ready == buckets_[next_to_start_].params.size())
    start(buckets_[next_to_start_++]);
}

// Rank r's block holds its pieces of the bucket's parameters one after another; every block
// has the length of the longest, so that a reduce-scatter of equal blocks hands each rank its own.
void GradientReducer::lay_out_pieces(Bucket& b, DType dtype) {
  const int ranks = comm_.size();
  std::vector<int64_t> filled(size_t(ranks), 0);
  for (size_t k : b.params) {
    std::vector<int64_t>& starts = b.piece_starts.emplace_back();
    for (int r = 0; r < ranks; ++r) {
      starts.push_back(filled[size_t(r)]);
      filled[size_t(r)] += settings_.pieces->range(k, r).size();
    }
  }
  b.block = *std::max_element(filled.begin(), filled.end());
  b.buffer = zeros({b.block * ranks}, dtype, MemoryTag::gradient);
  b.shard = zeros({b.block}, dtype, MemoryTag::gradient);
  // The optimizers take fp32 gradients: an f32 shard's pieces are theirs as they are.
  for (size_t j = 0; j < b.params.size(); ++j) {
    const int64_t at = b.piece_starts[j][size_t(comm_.rank())];
    const int64_t length = settings_.pieces->range(b.params[j], comm_.rank()).size();
    piece_gradients_[b.params[j]] = dtype == DType::f32
                                        ? b.shard.slice(at, at + length)
                                        : zeros({length}, DType::f32, MemoryTag::gradient);
  }
}

// Each gradient into the bucket, by pieces; the parameter's own then goes, since under ZeRO only
// the reduced pieces are used: the memory of the whole gradients is given back during backward.
void GradientReducer::fill_pieces(Bucket& b) {
  for (size_t j = 0; j < b.params.size(); ++j) {
    const size_t k = b.params[j];
    const Tensor g = params_[k].grad();
    params_[k].set_grad(Tensor());
    had_gradient_[k] = g.defined();
    for (int r = 0; r < comm_.size(); ++r) {
      const ZeroShards::Range piece = settings_.pieces->range(k, r);
      const int64_t at = r * b.block + b.piece_starts[j][size_t(r)];
      Tensor part = b.buffer.slice(at, at + piece.size());
      if (g.defined())
        part.copy_(g.reshape({-1}).slice(piece.begin, piece.end));
      else
        part.fill_(0.0);
    }
  }
}

void GradientReducer::finish_pieces(const Bucket& b) {
  if (b.shard.dtype() == DType::f32) return;  // the pieces are views of the shard
  const size_t me = size_t(comm_.rank());
  for (size_t j = 0; j < b.params.size(); ++j) {
    Tensor& piece = piece_gradients_[b.params[j]];
    const int64_t at = b.piece_starts[j][me];
    piece.copy_(b.shard.slice(at, at + piece.numel()));
  }
}

Tensor GradientReducer::piece_gradient(size_t i) const {
  return had_gradient_[i] ? piece_gradients_[i] : Tensor();
}

void GradientReducer::start(Bucket& b) {
  if (settings_.pieces) {
    fill_pieces(b);
    b.request = comm_.start_reduce_scatter(
        {b.buffer.raw_data(), size_t(b.buffer.numel()), b.buffer.dtype()},
        {b.shard.raw_data(), size_t(b.shard.numel()), b.shard.dtype()}, settings_.op);
    return;
  }
  fill(b);
  b.request = comm_.start_all_reduce(
      {b.buffer.raw_data(), size_t(b.buffer.numel()), b.buffer.dtype()}, settings_.op);
}

// Each gradient into its part of the bucket unless it is there already; zeros for a gradient
// this rank does not have.
void GradientReducer::fill(Bucket& b) {
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Tensor g = params_[b.params[j]].grad();
    had_gradient_[b.params[j]] = g.defined();
    if (in_bucket(g, b, j)) continue;
    Tensor part = part_of(b, j);
    if (g.defined())
      part.copy_(g);
    else
      part.fill_(0.0);
  }
}

std::vector<std::vector<size_t>> GradientReducer::bucket_parameters() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

std::vector<double> GradientReducer::finish(const std::vector<double>& values) {
  armed_ = false;
  started_during_backward_ = next_to_start_;
  while (next_to_start_ < buckets_.size()) start(buckets_[next_to_start_++]);
  std::vector<double> all = agree_on_gradients(values);
  for (Bucket& b : buckets_) {
    b.request.wait();
    b.ready = 0;
    if (settings_.pieces)
      finish_pieces(b);
    else
      write_back(b);
  }
  ready_.assign(params_.size(), false);
  next_to_start_ = 0;
  return all;
}

// The reduced gradients into the parameters' own, in their dtypes, unless they are views of the
// bucket; a parameter this rank had no gradient of gets one when another rank had.
void GradientReducer::write_back(const Bucket& b) {
  for (size_t j = 0; j < b.params.size(); ++j) {
    const size_t k = b.params[j];
    if (!had_gradient_[k]) continue;
    Tensor p = params_[k];
    Tensor g = p.grad();
    if (in_bucket(g, b, j)) continue;
    const Tensor sum = part_of(b, j);
    if (!g.defined()) {  // this rank's share of the batch was empty, not the others'
      if (p.grad_dtype() == sum.dtype()) {
        p.set_grad(sum);
        continue;
      }
      g = empty(p.shape(), p.grad_dtype(), MemoryTag::gradient);
      p.set_grad(g);
    }
    g.copy_(sum);
  }
}

// A parameter has a gradient after the step when it had one on any rank: a rank whose share of
// a short last batch was empty still takes the step the others take. The same all-gather
// carries the caller's values (the loss and the stop flag), one small collective fewer a step.
std::vector<double> GradientReducer::agree_on_gradients(const std::vector<double>& values) {
  std::vector<double> mine(had_gradient_.begin(), had_gradient_.end());
  mine.insert(mine.end(), values.begin(), values.end());
  std::vector<double> all(mine.size() * size_t(comm_.size()));
  comm_.all_gather(std::span<const double>(mine), std::span(all));
  std::vector<double> gathered;
  for (int r = 0; r < comm_.size(); ++r) {
    const auto at = all.begin() + std::ptrdiff_t(size_t(r) * mine.size());
    for (size_t i = 0; i < had_gradient_.size(); ++i)
      if (at[std::ptrdiff_t(i)] != 0.0) had_gradient_[i] = true;
    gathered.insert(gathered.end(), at + std::ptrdiff_t(had_gradient_.size()),
                    at + std::ptrdiff_t(mine.size()));
  }
  return gathered;
}

std::string GradientReducer::wire_dtypes() const {
  std::string names;
  for (const Bucket& b : buckets_) {
    const std::string name = name_of(b.buffer.dtype());
    if (names.find(name) == std::string::npos) names += (names.empty() ? "" : "+") + name;
  }
  return names;
}

int64_t GradientReducer::bytes_sent_per_step() const {
  const int64_t n = comm_.size();
  return payload_bytes() * (settings_.pieces ? 1 : 2) * (n - 1) / n;
}

int64_t GradientReducer::payload_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += b.buffer.nbytes();
  return bytes;
}

// ---- DataParallel -----------------------------------------------------------------------------

namespace {

// The first key (a JSON pointer) whose value differs, and both values.
std::string first_difference(const nlohmann::json& mine, const nlohmann::json& rank0) {
  const nlohmann::json a = mine.flatten(), b = rank0.flatten();
  for (const auto& [key, value] : b.items()) {
    if (!a.contains(key)) return key + " is " + value.dump() + " on rank 0 and absent here";
    if (a.at(key) != value)
      return key + " is " + a.at(key).dump() + " here and " + value.dump() + " on rank 0";
  }
  for (const auto& [key, value] : a.items())
    if (!b.contains(key)) return key + " is " + value.dump() + " here and absent on rank 0";
  return "";
}

uint64_t fnv1a(uint64_t hash, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ULL;
  return hash;
}

}  // namespace

DataParallel::DataParallel(dist::Communicator& comm, const TrainOptions& o)
    : comm_(comm),
      reduce_dtype_(o.parallel.reduce_dtype),
      deterministic_(o.parallel.deterministic),
      bucket_bytes_(o.parallel.bucket_bytes),
      first_bucket_bytes_(o.parallel.first_bucket_bytes) {}

std::string DataParallel::broadcast_text(const std::string& text) const {
  std::vector<int64_t> length{int64_t(text.size())};
  comm_.broadcast(std::span(length), 0);
  std::vector<uint8_t> bytes(static_cast<size_t>(length[0]));
  if (rank() == 0 && !bytes.empty()) std::memcpy(bytes.data(), text.data(), bytes.size());
  comm_.broadcast(std::span(bytes), 0);
  return std::string(bytes.begin(), bytes.end());
}

void DataParallel::check_same_configuration(const std::string& config) const {
  const nlohmann::json mine = {{"config", nlohmann::json::parse(config)},
                               {"mixp_version", version()}};
  const nlohmann::json rank0 = nlohmann::json::parse(broadcast_text(mine.dump()));
  const std::string difference = first_difference(mine, rank0);
  std::vector<int32_t> differs{difference.empty() ? 0 : 1}, all(static_cast<size_t>(size()));
  comm_.all_gather(std::span<const int32_t>(differs), std::span(all));
  for (int r = 0; r < size(); ++r) {
    if (all[size_t(r)] == 0) continue;
    MIXP_CHECK(r != rank(), "this process (rank ", r, " of ", size(),
               ") was started with another configuration than rank 0: ", difference,
               ". Every process of a run needs the same flags, data and mixp");
    MIXP_CHECK(false, "rank ", r, " of ", size(),
               " was started with another configuration than rank 0 (its message names the "
               "difference). Every process of a run needs the same flags, data and mixp");
  }
}

void DataParallel::make_reducer(const std::vector<Tensor>& params, const ZeroShards* pieces) {
  pieces_ = pieces;
  GradientReducer::Settings s{.bucket_bytes = bucket_bytes_,
                              .first_bucket_bytes = first_bucket_bytes_,
                              .pieces = pieces};
  if (deterministic_) {
    s.op = dist::ReduceOp::ordered_sum;
  } else {
    s.wire = parse_dtype(reduce_dtype_);
  }
  reducer_ = std::make_unique<GradientReducer>(comm_, params, s);
}

std::vector<double> DataParallel::gather(const std::vector<double>& local) const {
  std::vector<double> all(local.size() * size_t(size()));
  comm_.all_gather(std::span<const double>(local), std::span(all));
  sent_values_ += int64_t(local.size()) * (size() - 1);
  return all;
}

DataParallel::Agreement DataParallel::reduce_gradients(double local_loss, bool local_stop) {
  const std::vector<double> mine{local_loss, local_stop ? 1.0 : 0.0};
  const std::vector<double> all = reducer_->finish(mine);
  // The all-gather's values: one flag per parameter (had a gradient) and these.
  sent_values_ += int64_t(reducer_->parameters() + mine.size()) * (size() - 1);
  Agreement a;
  for (int r = 0; r < size(); ++r) {
    a.loss += all[size_t(2 * r)];
    a.stop = a.stop || all[size_t(2 * r + 1)] != 0.0;
  }
  return a;
}

bool DataParallel::any(bool local) const {
  for (double v : gather({local ? 1.0 : 0.0}))
    if (v != 0.0) return true;
  return false;
}

void DataParallel::agree_on_found_inf(amp::GradScaler& scaler) const {
  const std::vector<bool> mine = scaler.found_inf_flags();
  const std::vector<double> all = gather(std::vector<double>(mine.begin(), mine.end()));
  std::vector<bool> any(mine.size(), false);
  for (size_t i = 0; i < all.size(); ++i) any[i % mine.size()] = any[i % mine.size()] || all[i] != 0;
  scaler.set_found_inf_flags(any);
}

void DataParallel::agree_on_amax(amp::Fp8State& fp8) const {
  std::vector<double> mine;
  for (size_t s = 0; s < fp8.sites(); ++s)
    for (const amp::Fp8Meta& m : fp8.metas(s)) mine.push_back(m.amax);
  if (mine.empty()) return;
  const std::vector<double> most = max_over_ranks(mine);
  size_t i = 0;
  for (size_t s = 0; s < fp8.sites(); ++s)
    for (amp::Fp8Meta& m : fp8.metas(s)) m.amax = float(most[i++]);
}

std::vector<double> DataParallel::max_over_ranks(const std::vector<double>& local) const {
  if (local.empty()) return {};
  const std::vector<double> all = gather(local);
  std::vector<double> most(local.size(), -INFINITY);
  for (size_t i = 0; i < all.size(); ++i) {
    double& m = most[i % local.size()];
    m = std::isnan(m) || std::isnan(all[i]) ? NAN : std::max(m, all[i]);
  }
  return most;
}

void DataParallel::average_buffers(TrainModel& model) const {
  const float share = 1.0f / float(size());
  for (const auto& [name, buffer] : model.named_buffers()) {
    if (!buffer || !buffer->defined() || buffer->numel() == 0) continue;
    if (buffer->dtype() == DType::i64) {  // counts (batches seen): the most any rank saw
      auto* counts = static_cast<int64_t*>(buffer->raw_data());
      comm_.all_reduce(std::span(counts, size_t(buffer->numel())), dist::ReduceOp::max);
      continue;
    }
    if (buffer->dtype() != DType::f32) continue;
    auto* values = static_cast<float*>(buffer->raw_data());
    const std::span<float> all(values, size_t(buffer->numel()));
    comm_.all_reduce(all, dist::ReduceOp::ordered_sum);
    for (float& v : all) v *= share;
    sent_buffer_bytes_ += 2 * buffer->nbytes();
  }
}

void DataParallel::check_replicas(TrainModel& model, int64_t step) const {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [name, p] : model.named_parameters()) hash = fnv1a(hash, p->raw_data(), p->nbytes());
  for (const auto& [name, b] : model.named_buffers())
    if (b && b->defined()) hash = fnv1a(hash, b->raw_data(), b->nbytes());
  const std::vector<int64_t> mine{std::bit_cast<int64_t>(hash)};
  std::vector<int64_t> all(static_cast<size_t>(size()));
  comm_.all_gather(std::span<const int64_t>(mine), std::span(all));
  for (int r = 1; r < size(); ++r)
    MIXP_CHECK(all[size_t(r)] == all[0], "after step ", step, " the parameters of rank ", r,
               " differ from rank 0's (hash ", std::bit_cast<uint64_t>(all[size_t(r)]), " against ",
               std::bit_cast<uint64_t>(all[0]), "): the replicas have drifted apart");
}

std::vector<double> DataParallel::sum_over_ranks(const std::vector<double>& local) const {
  const std::vector<double> all = gather(local);
  std::vector<double> sum(local.size(), 0.0);
  for (size_t i = 0; i < all.size(); ++i) sum[i % local.size()] += all[i];
  return sum;
}

void DataParallel::end_step() {
  step_values_ = sent_values_ - values_at_step_start_;
  values_at_step_start_ = sent_values_;
  step_buffer_bytes_ = sent_buffer_bytes_ - buffer_bytes_at_step_start_;
  buffer_bytes_at_step_start_ = sent_buffer_bytes_;
}

int64_t DataParallel::bytes_sent_per_step() const {
  const int64_t n = size();
  const int64_t gradients = reducer_ ? reducer_->bytes_sent_per_step() : 0;
  // ZeRO's all-gather of the parameters: each rank's block to the N - 1 others.
  const int64_t parameters = pieces_ ? pieces_->gather_bytes() * (n - 1) : 0;
  return gradients + parameters + step_values_ * int64_t(sizeof(double)) +
         step_buffer_bytes_ * (n - 1) / n;
}

}  // namespace mixp::train
