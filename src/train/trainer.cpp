// The training loop, built from parts that own their state (train/trainer.h).
#include "mixp/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <span>
#include <sstream>

#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/dist/communicator.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/memory.h"
#include "mixp/ops.h"
#include "mixp/optim/master_weights.h"
#include "mixp/runtime.h"
#include "train/counters.h"
#include "train/legacy_checkpoint.h"
#include "train/low_precision_state.h"
#include "train/optimizer_setup.h"
#include "train/report.h"
#include "train/run_folder.h"
#include "train/trainer_impl.h"

namespace mixp::train {

EvalMetrics evaluate(TrainModel& model, DataSource& data, const amp::Preset& preset,
                     amp::Fp8State* fp8, int64_t step, const DataParallel* parallel) {
  model.set_training(false);
  double loss_sum = 0.0;
  int64_t count = 0, correct = 0;
  {
    NoGradGuard no_grad;
    data.for_each_eval_batch([&](const data::Batch& whole) {
      data::Batch batch = whole;
      if (parallel) {
        const Share share = share_of(whole.x.size(0), parallel->rank(), parallel->size());
        if (share.begin == share.end) return;
        batch.x = whole.x.slice(share.begin, share.end);
        batch.y = whole.y.slice(share.begin, share.end);
      }
      Tensor logits, loss;
      {
        auto scope = preset.autocast();
        std::optional<amp::Fp8Autocast> fp8_scope;
        if (fp8) fp8_scope.emplace(*fp8);
        logits = model.forward(batch.x);
        loss = task_loss(logits, batch.y, model.task());
      }
      const int64_t n = batch.y.numel();
      loss_sum += loss.item() * double(n);
      count += n;
      if (model.task() == nn::Task::classification) {
        const std::vector<double> predicted = ops::argmax(logits, 1).to_vector();
        const std::vector<double> labels = batch.y.to_vector();
        for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
      }
    });
  }
  model.set_training(true);
  if (parallel) {
    const std::vector<double> sums =
        parallel->sum_over_ranks({loss_sum, double(count), double(correct)});
    loss_sum = sums[0];
    count = int64_t(sums[1]);
    correct = int64_t(sums[2]);
  }
  MIXP_CHECK(count > 0, "the evaluation data holds no samples");
  EvalMetrics e;
  e.step = step;
  e.loss = loss_sum / double(count);
  if (model.task() == nn::Task::classification)
    e.accuracy = double(correct) / double(count);
  else if (model.task() == nn::Task::language_model)
    e.bits_per_char = e.loss / std::numbers::ln2;
  return e;
}

std::string first_nonfinite_gradient(const std::vector<std::pair<std::string, Tensor*>>& named) {
  for (const auto& [name, p] : named) {
    const Tensor g = p->grad();
    if (!g.defined()) continue;
    const std::vector<double> v = g.to_vector();
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isfinite(v[i])) continue;
      std::ostringstream text;
      text << "the gradient of '" << name << "' holds " << v[i] << " at element " << i;
      return text.str();
    }
  }
  return "";
}

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t total_steps(const TrainOptions& o, int64_t per_epoch) {
  return o.steps > 0 ? o.steps : o.epochs * per_epoch;
}

amp::GradScalerOptions scaler_options(const TrainOptions& o) {
  amp::GradScalerOptions s;
  if (o.scaler_growth_interval > 0) s.growth_interval = o.scaler_growth_interval;
  s.underflow_fraction = o.scaler_underflow_fraction;
  s.underflow_check_interval = o.scaler_underflow_check_interval;
  return s;
}
}  // namespace

Trainer::Trainer(TrainModel& model, DataSource& data, const TrainOptions& o)
    : model_(model),
      data_(data),
      o_(o),
      preset_(amp::preset(o.precision, o.mx_scale_rounding, o.fp4_without)),
      state_dtype_(optimizer_state_dtype(o)),
      fp8_(make_low_precision_state(preset_, model.module(), o.seed)),
      task_(model.task()),
      per_epoch_(data.batches_per_epoch()),
      total_(total_steps(o, per_epoch_)),
      eval_every_(o.eval_interval > 0                 ? o.eval_interval
                  : task_ == nn::Task::language_model ? std::max<int64_t>(1, total_ / 5)
                                                      : 0),
      observer_(o.observer ? *o.observer : no_observer_),
      scaler_(preset_.make_scaler(scaler_options(o))) {
  MIXP_CHECK(o.steps > 0 || (o.epochs > 0 && per_epoch_ > 0),
             "give a number of steps (this data has no epochs) or epochs > 0");
  if (o.checkpoint_every > 0 || o.resume) {
    MIXP_CHECK(!o.out_dir.empty(), "checkpoints need a run folder (out_dir)");
    MIXP_CHECK(data.loader_state().has_value(),
               "this data source cannot be checkpointed (it has no loader state)");
  }
  if (o.threads > 0) set_num_threads(o.threads);
  // The library prints nothing itself: the scaler's one warning goes to the observer.
  scaler_.set_warning_handler([this](const std::string& text) { observer_.on_note(text); });
  config_ = config_object(o).dump();
  cast_parameters();
  memory::reset_peaks();
  start_data_parallel();
  // Under ZeRO each rank's optimizers update views of its pieces of the parameters.
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < params_.size(); ++i)
    named.emplace_back(named_params_[i].first, zero_ ? zero_->view(i) : params_[i]);
  optimizers_ = make_optimizers(named, o, preset_, task_ == nn::Task::language_model, params_);
  for (const OptimizerGroup& g : optimizers_) {
    std::vector<size_t>& members = group_members_.emplace_back();
    for (const std::string& name : g.names)
      for (size_t i = 0; i < named_params_.size(); ++i)
        if (named_params_[i].first == name) members.push_back(i);
    if (zero_) {  // stochastic rounding draws the words of the whole parameters' elements
      std::vector<int64_t> whole, begin;
      for (size_t i : members) {
        whole.push_back(params_[i].numel());
        begin.push_back(zero_->range(i, parallel_->rank()).begin);
      }
      auto& pieces = dynamic_cast<optim::MasterWeightOptimizer&>(*g.optimizer);
      pieces.set_pieces_of(whole, begin);
    }
  }
  // After the optimizers, which set the gradients' dtypes the buckets take.
  if (parallel_) parallel_->make_reducer(params_, zero_.get());
  schedule_ = make_schedule(o, task_ == nn::Task::language_model, total_);
  prepare_samples();
}

// N > 1 ranks: the batch must split into N x grad_accum parts; ZeRO's pieces.
void Trainer::start_data_parallel() {
  dist::Communicator* comm = o_.parallel.communicator;
  if (comm == nullptr || comm->size() <= 1) return;
  const int64_t ranks = comm->size(), batch = data_.batch_size();
  MIXP_CHECK(batch <= 0 || batch % (ranks * o_.grad_accum) == 0, "a global batch of ", batch,
             " samples does not split into ", ranks, " processes",
             o_.grad_accum > 1
                 ? detail::concat(" x ", o_.grad_accum, " micro-batches (--grad-accum)")
                 : std::string(),
             ": choose a --batch that is a multiple of ", ranks * o_.grad_accum);
  MIXP_CHECK(!o_.parallel.deterministic || o_.grad_accum == 1, "--deterministic with ", ranks,
             " processes takes one micro-batch per process; it "
             "is then bitwise one process with --grad-accum ",
             ranks, ". Drop --grad-accum ", o_.grad_accum, ", or --deterministic");
  parallel_ = std::make_unique<DataParallel>(*comm, o_);
  if (o_.parallel.zero == 0) return;
  zero_ = std::make_unique<ZeroShards>(*comm, params_);
}

// The parameters as the preset stores them, written back into the model.
void Trainer::cast_parameters() {
  named_params_ = model_.named_parameters();
  std::vector<Tensor> values;
  for (const auto& [name, p] : named_params_) {
    MIXP_CHECK(p && p->defined(), "parameter '", name, "' of the model is undefined");
    values.push_back(*p);
  }
  const std::vector<bool> norms = model_.norm_parameter_flags();
  MIXP_CHECK(norms.size() == named_params_.size(), "the model gives ", norms.size(),
             " norm flags for ", named_params_.size(), " parameters");
  MIXP_CHECK(!values.empty(), "the model has no parameters");
  params_ = preset_.cast_parameters(values, norms);
  for (size_t i = 0; i < named_params_.size(); ++i) *named_params_[i].second = params_[i];
}

// The folder, locked; a new run's id and run.json, or the resumed run's id.
// With data parallelism rank 0 holds the folder and the others take its run id.
void Trainer::open_folder() {
  if (o_.out_dir.empty()) {
    run_id_ = new_run_id();
  } else if (!writes()) {
    if (o_.resume) run_id_ = folder_run_id(o_.out_dir);
  } else {
    folder_.emplace(o_.out_dir, o_.resume, o_.overwrite);
    if (o_.resume) {
      run_id_ = folder_run_id(o_.out_dir);  // "" for a folder from before run ids: any checkpoint
    } else {
      run_id_ = new_run_id();
      write_run_json();
    }
  }
  if (parallel_) run_id_ = parallel_->broadcast_text(run_id_);
}

void Trainer::write_run_json() const {
  const nlohmann::json run = {
      {"run_id", run_id_}, {"mixp_version", version()}, {"config", nlohmann::json::parse(config_)}};
  io::write_file_atomically(o_.out_dir + "/run.json", run.dump(2) + "\n");
}

// Under ZeRO the optimizers' pieces go into `pieces` (this rank's shard) instead.
StateDict Trainer::state_dict(const Before* before, StateDict* pieces) const {
  StateDict s;
  StateDict model = model_.state_dict();
  if (before && before->generator) model.set_philox("generator", *before->generator);
  s.insert("model", model);
  for (size_t k = 0; k < optimizers_.size(); ++k) {
    StateDict state = optimizers_[k].optimizer->state_dict();
    if (zero_) {
      auto [replicated, mine] = zero_->split_pieces(state, group_members_[k]);
      state = replicated;
      pieces->insert("optimizer." + std::to_string(k), mine);
    }
    s.insert("optimizer." + std::to_string(k), state);
  }
  s.insert("schedule", schedule_->state_dict());
  s.insert("scaler", scaler_.state_dict());
  if (fp8_) s.insert("fp8", fp8_->state_dict());
  s.insert("loader", before ? before->loader : data_.state_dict());
  StateDict trainer = c_.state_dict();
  trainer.set_text("precision", preset_.name);
  trainer.set_text("optimizer_state", name_of(state_dtype_));
  trainer.set_int("total_steps", total_);
  s.insert("trainer", trainer);
  return s;
}

// The settings a checkpoint must share with this run to continue it; with `step`, also that
// it is not past the run's end (apart, so that resume() can pick the newest checkpoint of the
// run and then say why a shorter extension cannot continue it).
void Trainer::check_run_settings(const StateDict& trainer, bool step_too) const {
  const std::string precision = trainer.get_text("precision");
  MIXP_CHECK(precision == preset_.name, "it was written under preset ", precision, ", not ",
             preset_.name);
  const std::string moments = trainer.get_text("optimizer_state");
  MIXP_CHECK(moments == name_of(state_dtype_), "it was written with ", moments,
             " optimizer moments, this run keeps ", name_of(state_dtype_), " (--optimizer-state)");
  const int64_t total = trainer.get_int("total_steps");
  MIXP_CHECK(total == total_ || o_.extend, "it is of a run of ", total, " steps, not ", total_);
  if (!step_too) return;
  const int64_t step = trainer.get_int("step");
  MIXP_CHECK(step >= 0, "its step ", step, " is not valid");
  MIXP_CHECK(step <= total_, "it is at step ", step, ", past the ", total_, " steps asked",
             o_.extend ? ": a run extends to at least the steps it has done" : "");
}

void Trainer::load_state_dict(const StateDict& s) {
  check_run_settings(s.part("trainer"), /*step_too=*/true);
  if (o_.extend)
    extend_schedule(s.part("schedule"));
  else
    schedule_->load_state_dict(s.part("schedule"));
  model_.load_state_dict(s.part("model"));
  // After the model: a master writes its parameter as the master rounded.
  for (size_t k = 0; k < optimizers_.size(); ++k) {
    StateDict part = s.part("optimizer." + std::to_string(k));
    MIXP_CHECK(!part.values.empty(), "it has no state for optimizer ", k, " of the ",
               optimizers_.size(), " this run has");
    if (zero_) part = zero_->piece_of_state(part, group_members_[k]);
    optimizers_[k].optimizer->load_state_dict(part);
  }
  MIXP_CHECK(s.part("optimizer." + std::to_string(optimizers_.size())).values.empty(),
             "it holds more optimizers than the ", optimizers_.size(), " this run has");
  scaler_.load_state_dict(s.part("scaler"));
  if (fp8_) fp8_->load_state_dict(s.part("fp8"));
  data_.load_state_dict(s.part("loader"));
  c_.load_state_dict(s.part("trainer"));
}

// The run's schedule over the new total: its own settings (the warmup it had, which a default
// computed from the new total could change), with total_steps = total_.
void Trainer::extend_schedule(const StateDict& saved) {
  if (saved.get_text("kind") != "warmup-cosine") {
    schedule_->load_state_dict(saved);
    return;
  }
  const optim::WarmupCosineOptions options{.peak_lr = saved.get_real("peak_lr"),
                                           .min_lr = saved.get_real("min_lr"),
                                           .warmup_steps = saved.get_int("warmup_steps"),
                                           .total_steps = total_};
  MIXP_CHECK(options.warmup_steps <= total_, "its warmup of ", options.warmup_steps,
             " steps is longer than the ", total_, " steps asked");
  auto extended = std::make_unique<optim::WarmupCosineLr>(options);
  // Every other setting must still be this run's: only the total changes.
  StateDict mine = schedule_->state_dict(), theirs = extended->state_dict();
  mine.values.erase("total_steps");
  mine.values.erase("warmup_steps");
  for (const auto& [key, value] : mine.values)
    MIXP_CHECK(theirs.get_text(key) == value, "the saved learning-rate schedule has ", key, " ",
               theirs.get_text(key), ", this run's has ", value);
  schedule_ = std::move(extended);
}

void Trainer::resume() {
  std::optional<StateDict> state;
  std::vector<io::Checkpoint> shards;
  const std::optional<io::Checkpoint> c = io::read_newest_checkpoint(
      o_.out_dir, run_id_,
      [&](const io::Checkpoint& c) {
        io::check_finite(c.file, c.path);  // a poisoned state is no place to continue from
        state = c.version >= 2 ? c.state : legacy_checkpoint_state(c, schedule_->state_dict());
        check_run_settings(state->part("trainer"), /*step_too=*/false);
        shards = io::read_checkpoint_shards(c);  // refuses one whose shards are missing
      },
      [&](const std::string& why) { observer_.on_note(why); });
  MIXP_CHECK(c.has_value(), "no usable checkpoint of this run in ", o_.out_dir, " to resume from");
  try {
    if (!shards.empty()) merge_shards(*state, shards);
    load_state_dict(*state);
  } catch (const Error& e) {
    MIXP_CHECK(false, c->path, ": ", e.message());
  }
  if (run_id_.empty()) {  // a folder from before run.json: the run takes an id from now on
    run_id_ = c->run_id.empty() ? new_run_id() : c->run_id;
    if (parallel_) run_id_ = parallel_->broadcast_text(run_id_);
    if (writes()) write_run_json();
  }
  resumed_from_ = c->step;
  last_checkpoint_ = c->path;
  checkpoint_step_ = c->step;
  observer_.on_note("resumed from " + c->path + " at step " + std::to_string(c_.step));
}

// With data parallelism the state is the same on every rank and rank 0 writes it, except under
// ZeRO the optimizers' pieces: each rank writes its own as a shard first, and rank 0 then the
// checkpoint, which names the shards and their checksums (io::write_checkpoint_shard).
void Trainer::save_checkpoint(const Before* before) {
  MIXP_CHECK(!o_.out_dir.empty(), "stopping writes a checkpoint, which needs a run folder");
  std::map<std::string, std::string> metadata{{"config", config_}};
  StateDict pieces;
  const StateDict state = state_dict(before, &pieces);
  if (zero_) {
    const int rank = parallel_->rank(), ranks = parallel_->size();
    const std::vector<int64_t> mine{
        io::write_checkpoint_shard(o_.out_dir, c_.step, run_id_, rank, ranks, pieces)};
    std::vector<int64_t> crcs(static_cast<size_t>(ranks));
    parallel_->communicator().all_gather(std::span<const int64_t>(mine), std::span(crcs));
    nlohmann::json manifest = nlohmann::json::array();
    for (int r = 0; r < ranks; ++r)
      manifest.push_back({{"file", io::checkpoint_shard_file_name(c_.step, r, ranks)},
                          {"crc32", crcs[size_t(r)]}});
    metadata["shards"] = manifest.dump();
  }
  if (writes())
    last_checkpoint_ =
        io::write_checkpoint(o_.out_dir, c_.step, run_id_, state, metadata, o_.keep_checkpoints);
  // No rank goes on before the checkpoint is whole: a job being stopped may end all ranks as
  // soon as one of them exits.
  if (parallel_) parallel_->communicator().barrier();
  checkpoint_step_ = c_.step;
}

// A checkpoint written in shards (ZeRO): the optimizers' whole state put together from every
// shard, whatever number of ranks wrote them, into `state`.
void Trainer::merge_shards(StateDict& state, const std::vector<io::Checkpoint>& shards) const {
  for (size_t k = 0; k < optimizers_.size(); ++k) {
    const std::string name = "optimizer." + std::to_string(k);
    std::vector<StateDict> parts;
    for (const io::Checkpoint& shard : shards) parts.push_back(shard.state.part(name));
    state.insert(name, ZeroShards::assemble(parts, group_members_[k], params_));
  }
}

TrainResult Trainer::result() const {
  TrainResult r;
  r.model_name = o_.model_name;
  r.precision = preset_.name;
  r.optimizer_state = name_of(state_dtype_);
  r.run_id = run_id_;
  r.config = config_;
  r.task = task_;
  r.steps = c_.step;
  r.epochs = per_epoch_ > 0 ? c_.step / per_epoch_ : 0;
  r.log = c_.log;
  r.evals = c_.evals;
  r.final_train_loss = r.log.empty() ? 0.0 : r.log.back().loss;
  r.median_step_ms = median(c_.step_ms);
  r.samples_per_s = c_.train_ms > 0 ? double(c_.train_samples) / (c_.train_ms / 1000.0) : 0.0;
  r.final_loss_scale = scaler_.get_scale();
  r.skipped_steps = c_.skipped;
  r.nonfinite_steps = c_.nonfinite;
  r.resumed_from = resumed_from_;
  r.last_checkpoint = last_checkpoint_;
  if (parallel_) {
    r.world_size = parallel_->size();
    r.reduce_dtype = parallel_->reducer().wire_dtypes();
    r.deterministic = o_.parallel.deterministic;
    r.bytes_sent_per_step = parallel_->bytes_sent_per_step();
    r.zero_stage = zero_ ? 1 : 0;
  }
  if (fp8_ && fp8_->recipe().fp4) {
    const std::array<double, 3>& flops = fp8_->linear_flops();
    const double total = flops[0] + flops[1] + flops[2];
    for (int f = 0; f < 3; ++f)
      r.linear_flop_shares[amp::name_of(amp::LayerFormat(f))] =
          total > 0 ? flops[size_t(f)] / total : 0.0;
  }
  if (amp::AdaptivePrecision* adaptive = fp8_ ? amp::adaptive_of(*fp8_) : nullptr) {
    r.precision_decisions = adaptive->decisions();
    for (size_t i = 0; i < adaptive->layers().size(); ++i)
      r.layer_formats.emplace_back(adaptive->layers()[i], amp::name_of(adaptive->format(i)));
  }
  return r;
}

}  // namespace mixp::train
