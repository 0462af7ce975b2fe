// Checkpoints of format version 1, read into the parts' state of version 2.
//
// Version 1 kept the tensors as "param/<name>", "buffer/<name>", "optim/<k>/<i>/<what>" and
// "fp8/...", and every other value in JSON metadata entries of their own ("trainer",
// "optimizers", "scaler", "generator", "loader", "history", "options"); its optimizers were
// always AdamW, and it did not save the schedule's settings.
#include "train/legacy_checkpoint.h"

#include <nlohmann/json.hpp>

#include "mixp/error.h"
#include "train/counters.h"
#include "train/report.h"

namespace mixp::train {
namespace {

using nlohmann::json;

json metadata_json(const io::Checkpoint& c, const std::string& key) {
  const auto it = c.file.metadata.find(key);
  MIXP_CHECK(it != c.file.metadata.end(), "no metadata '", key, "'");
  const json j = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  MIXP_CHECK(!j.is_discarded(), "metadata '", key, "' is not JSON");
  return j;
}

void set_philox(StateDict& s, const std::string& key, const json& j) {
  s.set_philox(key, {.seed = j.at("seed").get<uint64_t>(),
                     .stream = j.at("stream").get<uint64_t>(),
                     .offset = j.at("offset").get<uint64_t>()});
}

// "optim/<k>/<i>/<what>" -> "optimizer.<k>/<what>/<i>"; other names keep their place.
std::string tensor_key(const std::string& name) {
  if (name.starts_with("param/") || name.starts_with("buffer/")) return "model/" + name;
  if (!name.starts_with("optim/")) return name;  // "fp8/..." is version 2's name too
  const size_t k_end = name.find('/', 6), i_end = name.find('/', k_end + 1);
  MIXP_CHECK(k_end != std::string::npos && i_end != std::string::npos, "tensor '", name,
             "' is not named as version 1 names optimizer state");
  return "optimizer." + name.substr(6, k_end - 6) + "/" + name.substr(i_end + 1) + "/" +
         name.substr(k_end + 1, i_end - k_end - 1);
}

// The trainer's part: version 1's counters in TrainerCounters, which writes its own keys.
void add_trainer(StateDict& s, const json& t, const json& history, const json& options) {
  TrainerCounters c;
  c.step = t.at("step").get<int64_t>();
  c.epoch = t.at("epoch").get<int64_t>();
  c.empty_in_a_row = t.at("empty_in_a_row").get<int64_t>();
  c.window_loss = t.at("window_loss").get<double>();
  c.window_ms = t.at("window_ms").get<double>();
  c.window_steps = t.at("window_steps").get<int64_t>();
  c.window_samples = t.at("window_samples").get<int64_t>();
  c.window_loss_steps = t.value("window_loss_steps", c.window_steps);
  c.train_ms = t.at("train_ms").get<double>();
  c.train_samples = t.at("train_samples").get<int64_t>();
  c.skipped = t.at("skipped_steps").get<int64_t>();
  c.nonfinite = t.value("nonfinite_steps", int64_t(0));
  c.step_ms = t.at("step_ms").get<std::vector<double>>();
  for (const json& m : history.at("log")) c.log.push_back(step_of(m));
  for (const json& e : history.at("evals")) c.evals.push_back(eval_of(e));
  StateDict trainer = c.state_dict();
  trainer.set_text("precision", options.at("precision").get<std::string>());
  trainer.set_text("optimizer_state", options.value("optimizer_state", std::string("f32")));
  trainer.set_int("total_steps", options.at("total").get<int64_t>());
  s.insert("trainer", trainer);
}

}  // namespace

StateDict legacy_checkpoint_state(const io::Checkpoint& c, const StateDict& schedule) {
  StateDict s;
  try {
    for (const auto& [name, t] : c.file.tensors) s.tensors[tensor_key(name)] = t;
    const json optimizers = metadata_json(c, "optimizers");
    for (size_t k = 0; k < optimizers.size(); ++k) {
      const json& o = optimizers[k];
      const std::string prefix = "optimizer." + std::to_string(k) + "/";
      s.set_text(prefix + "kind", "adamw");
      s.set_int(prefix + "steps", o.at("steps").get<int64_t>());
      s.set_real(prefix + "lr", o.at("lr").get<double>());
      set_philox(s, prefix + "rounding", o.at("rounding"));
      const auto steps = o.at("parameter_steps").get<std::vector<int64_t>>();
      for (size_t i = 0; i < steps.size(); ++i)
        s.set_int(prefix + "parameter_steps/" + std::to_string(i), steps[i]);
    }
    const json scaler = metadata_json(c, "scaler");
    for (auto it = scaler.begin(); it != scaler.end(); ++it)
      s.set_real("scaler/" + it.key(), it.value().get<double>());
    if (const json g = metadata_json(c, "generator"); !g.is_null())
      set_philox(s, "model/generator", g);
    const json loader = metadata_json(c, "loader");
    set_philox(s, "loader/rng", loader.at("rng"));
    s.set_int("loader/epoch", loader.at("epoch").get<int64_t>());
    s.set_int("loader/position", loader.at("position").get<int64_t>());
    add_trainer(s, metadata_json(c, "trainer"), metadata_json(c, "history"),
                metadata_json(c, "options"));
  } catch (const json::exception& e) {
    MIXP_CHECK(false, "a version 1 checkpoint with unreadable metadata: ", e.what());
  }
  s.insert("schedule", schedule);
  return s;
}

}  // namespace mixp::train
