// mixp/train/progress.h — a TrainObserver that prints a run's progress, as `mixp train` does.
//
// On a terminal a bar redrawn in place (step, loss, samples/s, loss scale, ETA); otherwise one
// plain line per metrics line (TrainOptions::log_interval steps). Evaluations and notes are
// lines of their own, samples (TrainOptions::sample_every) a heading line and their text, and the
// end of the run one summary line.
//
// Example:
//
//   mixp::train::ProgressPrinter progress(stdout);               // bar or lines, as stdout is
//   options.observer = &progress;
//   mixp::train::train(model, data, options);
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "mixp/train/trainer.h"

namespace mixp::train {

enum class Progress : uint8_t {
  automatic = 0,  ///< a bar when the output is a terminal, else lines
  bar = 1,
  lines = 2,
};

class ProgressPrinter : public TrainObserver {
 public:
  explicit ProgressPrinter(std::FILE* out, Progress mode = Progress::automatic);

  void on_start(const std::string& model, const std::string& precision, int64_t total_steps,
                int64_t first_step) override;
  void on_step(int64_t step, int64_t total, double loss, double samples_per_s, double scale,
               double eta_s, const StepMetrics* metrics) override;
  void on_eval(const EvalMetrics& eval) override;
  void on_note(const std::string& text) override;
  void on_sample(int64_t step, const std::string& text) override;
  void on_finish(const TrainResult& result) override;

 private:
  void line(const std::string& text);

  std::FILE* out_;
  Progress mode_;
  bool drawn_ = false;  // a bar is on the current line
};

/// "eval step 40: loss 1.2345 accuracy 81.20%" and the like.
std::string eval_line(const EvalMetrics& eval);

}  // namespace mixp::train
