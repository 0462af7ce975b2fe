// The trainer's loop as a class of parts: private to src/train.
#pragma once

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixp/amp/fp8.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/amp/presets.h"
#include "mixp/io/checkpoint.h"
#include "mixp/optim/lr_schedule.h"
#include "mixp/train/trained_model.h"
#include "mixp/train/trainer.h"
#include "train/counters.h"
#include "train/data_parallel.h"
#include "train/zero.h"
#include "train/optimizer_setup.h"
#include "train/run_folder.h"

namespace mixp::train {

/// The loss and accuracy or bits per character of `model` on every evaluation batch of `data`,
/// under the preset (and its FP8 state), at `step`.
/// With `parallel`, each rank evaluates its share of every batch and the sums are added over
/// the ranks.
EvalMetrics evaluate(TrainModel& model, DataSource& data, const amp::Preset& preset,
                     amp::Fp8State* fp8, int64_t step, const DataParallel* parallel = nullptr);

/// The first parameter whose gradient holds a NaN or an infinity: "the gradient of 'fc.weight'
/// holds nan at element 3", or "" when every gradient is finite.
std::string first_nonfinite_gradient(const std::vector<std::pair<std::string, Tensor*>>& named);

// The loader and generator as they were before the current batch: the checkpoint of the last
// good state when a non-finite step stops the run.
struct Before {
  StateDict loader;
  std::optional<PhiloxState> generator;
};

// What one step did.
struct StepOutcome {
  double loss = 0.0;
  double scale = 1.0;  // the loss scale the step used
  double grad_norm = 0.0;  // the total gradient norm before clipping
  bool applied = false;
  bool dropped = false;  // on_nonfinite = skip dropped the batch
  bool stop = false;     // data parallelism: some rank was asked to stop
  int64_t samples = 0;
  double ms = 0.0;
};

class Trainer {
 public:
  Trainer(TrainModel& model, DataSource& data, const TrainOptions& options);
  TrainResult run();

 private:
  void cast_parameters();
  void start_data_parallel();
  // This process writes the run folder: it has one and is rank 0.
  bool writes() const { return !o_.out_dir.empty() && (!parallel_ || parallel_->rank() == 0); }
  void micro_batch(const data::Batch& batch, Share share, int64_t n, bool weighted,
                   double& loss_sum);
  void check_memory();
  void open_folder();
  void write_run_json() const;
  void resume();
  StateDict state_dict(const Before* before, StateDict* pieces) const;
  void merge_shards(StateDict& state, const std::vector<io::Checkpoint>& shards) const;
  void load_state_dict(const StateDict& state);
  void check_run_settings(const StateDict& trainer, bool step_too) const;
  void extend_schedule(const StateDict& saved);
  void save_checkpoint(const Before* before);
  StepOutcome step(const data::Batch& batch, const Before& before);
  double forward_backward(const data::Batch& batch);
  void update_low_precision_state();
  double clip_pieces(double max_norm);
  [[noreturn]] void stop_nonfinite(double loss, double grad_norm, const Before& before);
  void record(const StepOutcome& outcome);
  void write_metrics_history();
  StepMetrics close_window(const StepOutcome& last);
  void run_eval();
  void check_divergence(const StepOutcome& outcome);
  [[noreturn]] void diverged(const std::string& why) const;
  TrainResult result() const;
  void notify_step(const StepOutcome& outcome, const StepMetrics* logged) const;
  void prepare_samples();
  void sample_if_due();

  TrainModel& model_;
  DataSource& data_;
  const TrainOptions& o_;
  const amp::Preset preset_;
  const DType state_dtype_;
  const std::unique_ptr<amp::Fp8State> fp8_;
  const nn::Task task_;
  const int64_t per_epoch_, total_, eval_every_;
  TrainObserver no_observer_;
  TrainObserver& observer_;
  std::vector<std::pair<std::string, Tensor*>> named_params_;
  std::vector<Tensor> params_;
  std::vector<OptimizerGroup> optimizers_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  amp::GradScaler scaler_;
  TrainerCounters c_;
  std::string config_, run_id_, last_checkpoint_;
  int64_t checkpoint_step_ = -1;  // the step of the newest checkpoint written or resumed
  int64_t resumed_from_ = 0;
  std::optional<RunFolder> folder_;
  std::ofstream metrics_;
  std::unique_ptr<DataParallel> parallel_;
  std::unique_ptr<ZeroShards> zero_;                // ZeRO stage 1
  std::vector<std::vector<size_t>> group_members_;  // per optimizer: its parameters' indices
  nn::Model* sample_model_ = nullptr;  // the model behind model_, when samples are drawn
  std::unique_ptr<Inference> sample_inference_;
};

}  // namespace mixp::train
