// A trained model read back from its run folder, model file or checkpoint; inference scopes.
#include "mixp/train/trained_model.h"

#include <filesystem>
#include <optional>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "train/low_precision_state.h"
#include "train/run_folder.h"

namespace mixp::train {
namespace {

// The weights and configuration of one file: a model.safetensors (tensors by name) or a
// checkpoint (tensors under "model/param/" and "model/buffer/").
struct WeightFile {
  std::map<std::string, Tensor> tensors;
  std::string config;
  int64_t step = 0;
};

WeightFile read_model_file(const std::string& path) {
  io::SafetensorsFile file = io::read_safetensors(path);
  const auto config = file.metadata.find("config");
  MIXP_CHECK(config != file.metadata.end() && !config->second.empty(), path,
             ": no run configuration in its metadata, so the model it holds is unknown (mixp "
             "writes one into every model.safetensors of a run)");
  WeightFile w{.tensors = std::move(file.tensors), .config = config->second};
  if (const auto step = file.metadata.find("step"); step != file.metadata.end())
    w.step = std::stoll(step->second);
  return w;
}

WeightFile read_checkpoint_file(const std::string& path) {
  io::Checkpoint c = io::read_checkpoint(path);
  const auto config = c.file.metadata.find("config");
  MIXP_CHECK(config != c.file.metadata.end() && !config->second.empty(), path,
             ": no run configuration in the checkpoint's metadata");
  WeightFile w{.tensors = {}, .config = config->second, .step = c.step};
  // Version 1 stored the same tensors under "model/<name>"; version 2 under model/param/ and
  // model/buffer/.
  for (auto& [key, tensor] : c.file.tensors) {
    for (const char* prefix : {"model/param/", "model/buffer/", "model/"}) {
      if (key.rfind(prefix, 0) != 0) continue;
      w.tensors.emplace(key.substr(std::string(prefix).size()), tensor);
      break;
    }
  }
  MIXP_CHECK(!w.tensors.empty(), path, ": the checkpoint holds no model tensors");
  return w;
}

bool is_checkpoint_name(const std::string& path) {
  return std::filesystem::path(path).filename().string().rfind("checkpoint-", 0) == 0;
}

// A run folder: the finished model, else the newest checkpoint of the folder's run that reads.
std::string weights_in_folder(const std::string& dir, bool& checkpoint) {
  const std::string model = dir + "/model.safetensors";
  checkpoint = false;
  if (std::filesystem::is_regular_file(model)) return model;
  std::string skipped_reasons;
  const std::optional<io::Checkpoint> newest = io::read_newest_checkpoint(
      dir, folder_run_id(dir), {}, [&](const std::string& why) { skipped_reasons += " " + why; });
  MIXP_CHECK(newest.has_value(), dir,
             " holds no model.safetensors and no usable checkpoint: it is not a run folder, or "
             "its run wrote nothing yet",
             skipped_reasons.empty() ? "" : " (" + skipped_reasons.substr(1) + ")");
  checkpoint = true;
  return newest->path;
}

}  // namespace

void load_weights(nn::Model& model, const std::map<std::string, Tensor>& tensors,
                  const std::string& source) {
  std::vector<std::pair<std::string, Tensor*>> wanted = model.named_parameters();
  for (const auto& b : model.named_buffers()) wanted.push_back(b);
  std::vector<std::string> problems;
  std::map<std::string, bool> used;
  for (const auto& [name, target] : wanted) {
    const auto found = tensors.find(name);
    if (found == tensors.end()) {
      problems.push_back("'" + name + "' " + target->shape().to_string() + " is missing");
      continue;
    }
    used[name] = true;
    if (found->second.shape() != target->shape())
      problems.push_back("'" + name + "' is " + found->second.shape().to_string() +
                         " where the model has " + target->shape().to_string());
  }
  for (const auto& [name, tensor] : tensors)
    if (!used.count(name))
      problems.push_back("'" + name + "' " + tensor.shape().to_string() +
                         " is not a tensor of the model");
  if (!problems.empty()) {
    std::string list;
    for (const std::string& p : problems) list += "\n  " + p;
    MIXP_CHECK(false, source, " does not match the ", model.config().name, " model (",
               problems.size(), problems.size() == 1 ? " difference" : " differences", "):", list);
  }
  NoGradGuard no_grad;
  for (const auto& [name, target] : wanted) target->copy_(tensors.at(name));
}

TrainedWeights read_trained_weights(const std::string& path) {
  MIXP_CHECK(std::filesystem::exists(path), path, ": no such run folder or model file");
  bool checkpoint = false;
  const std::string file = std::filesystem::is_directory(path)
                               ? weights_in_folder(path, checkpoint)
                               : (checkpoint = is_checkpoint_name(path), path);
  WeightFile w = checkpoint ? read_checkpoint_file(file) : read_model_file(file);
  TrainedWeights t{.tensors = std::move(w.tensors),
                   .config = run_config_from_json(w.config),
                   .source = file,
                   .step = w.step};
  if (task_of(t.config.model.name) == nn::Task::language_model) {
    const bool known = t.config.fingerprint && !t.config.fingerprint->vocabulary.empty();
    MIXP_CHECK(known, file,
               ": the run's configuration has no vocabulary, so its tokens cannot be read");
    t.config.model.vocab = int64_t(t.config.fingerprint->vocabulary.size());
  }
  return t;
}

TrainedModel load_trained_model(const std::string& path) {
  return build_trained_model(read_trained_weights(path));
}

TrainedModel build_trained_model(const TrainedWeights& w) {
  TrainedModel t;
  t.config = w.config;
  t.source = w.source;
  t.step = w.step;
  if (t.config.fingerprint) t.vocabulary = t.config.fingerprint->vocabulary;
  t.model = nn::make_model(t.config.model, t.config.train.seed);
  load_weights(*t.model, w.tensors, w.source);
  t.model->train(false);
  return t;
}

Inference::Inference(nn::Model& model, const std::string& precision,
                     amp::MxScaleRounding mx_rounding, const amp::Fp4Ablation& fp4_without)
    : model_(model),
      preset_(amp::preset(precision, mx_rounding, fp4_without)),
      fp8_(make_low_precision_state(preset_, &model_, 0)) {}

void Inference::cast_parameters() {
  std::vector<Tensor> values;
  for (const auto& [name, p] : model_.named_parameters()) values.push_back(p->detach());
  const std::vector<Tensor> cast = preset_.cast_parameters(values, model_.norm_parameter_flags());
  nn::replace_parameters(model_, cast);
}

std::optional<StateDict> saved_precision_state(const TrainedModel& t) {
  const std::filesystem::path source(t.source);
  const std::string checkpoint =
      source.filename().string().rfind("checkpoint-", 0) == 0
          ? t.source
          : (source.parent_path() / io::checkpoint_file_name(t.step)).string();
  if (t.step <= 0 || !std::filesystem::is_regular_file(checkpoint)) return std::nullopt;
  const io::Checkpoint c = io::read_checkpoint(checkpoint);
  if (c.version < 2 || c.step != t.step) return std::nullopt;
  StateDict fp8 = c.state.part("fp8");
  if (fp8.tensors.empty()) return std::nullopt;
  return fp8;
}

void Inference::load_precision_state(const StateDict& state) {
  if (fp8_ && fp8_->extension()) fp8_->load_state_dict(state);
}

void Inference::run(const std::function<void()>& f) {
  NoGradGuard no_grad;
  {
    auto scope = preset_.autocast();
    std::optional<amp::Fp8Autocast> fp8_scope;
    if (fp8_) fp8_scope.emplace(*fp8_);
    f();
  }
  if (fp8_) fp8_->update();
}

}  // namespace mixp::train
