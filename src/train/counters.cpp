// TrainerCounters' state_dict.
#include "train/counters.h"

#include <nlohmann/json.hpp>

#include "mixp/error.h"
#include "train/report.h"

namespace mixp::train {

StateDict TrainerCounters::state_dict() const {
  StateDict s;
  s.set_int("step", step);
  s.set_int("epoch", epoch);
  s.set_int("empty_in_a_row", empty_in_a_row);
  s.set_real("window_loss", window_loss);
  s.set_real("window_ms", window_ms);
  s.set_int("window_steps", window_steps);
  s.set_int("window_samples", window_samples);
  s.set_int("window_loss_steps", window_loss_steps);
  s.set_real("window_grad_norm", window_grad_norm);
  s.set_real("window_grad_norm_max", window_grad_norm_max);
  s.set_int("window_grad_norm_steps", window_grad_norm_steps);
  s.set_int("window_skipped", window_skipped);
  s.set_int("window_nonfinite", window_nonfinite);
  s.set_int("window_nonfinite_losses", window_nonfinite_losses);
  s.set_real("train_ms", train_ms);
  s.set_int("train_samples", train_samples);
  s.set_int("skipped_steps", skipped);
  s.set_int("nonfinite_steps", nonfinite);
  s.set_int("skipped_in_a_row", skipped_in_a_row);
  s.set_text("first_overflow", first_overflow);
  s.set_text("streak_overflow", streak_overflow);
  s.set_text("step_ms", nlohmann::json(step_ms).dump());
  nlohmann::json history = {{"log", nlohmann::json::array()}, {"evals", nlohmann::json::array()}};
  for (const StepMetrics& m : log) history["log"].push_back(step_json(m));
  for (const EvalMetrics& e : evals) history["evals"].push_back(eval_json(e));
  s.set_text("history", history.dump());
  return s;
}

void TrainerCounters::load_state_dict(const StateDict& s) {
  TrainerCounters c;
  c.step = s.get_int("step");
  c.epoch = s.get_int("epoch");
  c.empty_in_a_row = s.get_int("empty_in_a_row");
  c.window_loss = s.get_real("window_loss");
  c.window_ms = s.get_real("window_ms");
  c.window_steps = s.get_int("window_steps");
  c.window_samples = s.get_int("window_samples");
  c.window_loss_steps = s.get_int("window_loss_steps");
  // Checkpoints written before the window kept these counts resume with the window's counts
  // from the resumed step on.
  if (s.has_value("window_grad_norm_steps")) {
    c.window_grad_norm = s.get_real("window_grad_norm");
    c.window_grad_norm_max = s.get_real("window_grad_norm_max");
    c.window_grad_norm_steps = s.get_int("window_grad_norm_steps");
    c.window_skipped = s.get_int("window_skipped");
    c.window_nonfinite = s.get_int("window_nonfinite");
    c.window_nonfinite_losses = s.get_int("window_nonfinite_losses");
  }
  c.train_ms = s.get_real("train_ms");
  c.train_samples = s.get_int("train_samples");
  c.skipped = s.get_int("skipped_steps");
  c.nonfinite = s.get_int("nonfinite_steps");
  c.skipped_in_a_row = s.get_int("skipped_in_a_row");
  c.first_overflow = s.get_text("first_overflow");
  c.streak_overflow = s.get_text("streak_overflow");
  MIXP_CHECK(c.step >= 0 && c.epoch >= 0 && c.skipped >= 0 && c.nonfinite >= 0 &&
                 c.window_grad_norm_steps >= 0 && c.window_skipped >= 0 &&
                 c.window_nonfinite >= 0 && c.window_nonfinite_losses >= 0,
             "saved trainer counters are negative");
  try {
    c.step_ms = nlohmann::json::parse(s.get_text("step_ms")).get<std::vector<double>>();
    const nlohmann::json history = nlohmann::json::parse(s.get_text("history"));
    for (const nlohmann::json& m : history.at("log")) c.log.push_back(step_of(m));
    for (const nlohmann::json& e : history.at("evals")) c.evals.push_back(eval_of(e));
  } catch (const nlohmann::json::exception& e) {
    MIXP_CHECK(false, "the saved metrics history is not readable: ", e.what());
  }
  *this = std::move(c);
}

}  // namespace mixp::train
