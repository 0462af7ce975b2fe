// mixp/train/run.h — `mixp train` and `mixp compare` on the built-in models and data sets.
//
// The model comes from nn::make_model (mlp, cnn: image classifiers; lstm, gpt: character
// language models), the data from mixp/data:
//   classifiers       a folder of IDX files (default /usr/share/datasets/fashion-mnist, from
//                     Debian's dataset-fashion-mnist), normalized with Fashion-MNIST's mean
//                     0.2860 and standard deviation 0.3530, shuffled by the seed; evaluated on
//                     the whole test set.
//   language models   a text file (default data/kjv.txt relative to the working directory,
//                     which scripts/make-kjv.sh writes from Debian's bible-kjv; the CLI also
//                     reads the environment variable MIXP_KJV); random windows of `context`
//                     characters from the first 1 - val_fraction (default 90%), evaluated on
//                     every window of the rest, in order (data::for_each_text_window). An
//                     epoch of text is train_tokens / (batch * context) steps.
//   deep-mlp          synthetic: data::make_tiny_gradient_regression(seed), 4096 training
//                     samples in one full batch by default, evaluated on its 1024 test samples.
// A missing data set is a mixp::Error saying how to get it. Everything else is train().
//
// Example:
//
//   mixp::train::RunConfig config;
//   config.model.name = "cnn";
//   config.train = {.precision = "amp-bf16", .epochs = 1, .out_dir = "runs/cnn-bf16"};
//   mixp::train::TrainResult r = mixp::train::run_train(config);
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mixp/nn/models.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

/// What identifies a run's data: the absolute path, and the size and crc32 of the training
/// split (the token or image and label bytes); the text models' vocabulary. A resumed run
/// must find the same fingerprint.
struct DataFingerprint {
  std::string path;
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  std::string vocabulary;  ///< language models
};

struct RunConfig {
  nn::ModelConfig model;  ///< name and shape; vocab, classes and image size come from the data
  std::string data{};     ///< a folder of IDX files or a text file; empty: the default
  int64_t batch = 0;      ///< 0: 64 for classifiers, 16 for language models
  /// Language models: the last fraction of the text validates, in (0, 1) (nanoGPT's split).
  double val_fraction = 0.1;
  /// A trained model (mixp/train/trained_model.h: a run folder, model.safetensors or
  /// checkpoint) whose weights the run starts from instead of the seed's initialization, with a
  /// fresh optimizer: fine-tuning. Its tensors must be exactly the model's, by name and shape
  /// (every difference is listed), and a text model's vocabulary must be the new data's.
  std::string init_from{};
  TrainOptions train{};   ///< model_name is set from model.name
  /// The fingerprint the run's data must have: set when the config is read from a run, so
  /// that its resumption checks the data.
  std::optional<DataFingerprint> fingerprint{};
};

/// The task of a built-in model name; throws mixp::Error listing the names otherwise.
nn::Task task_of(const std::string& model_name);
/// The data a run of `model_name` reads when RunConfig::data is empty ("" for deep-mlp, whose
/// data is synthetic).
std::string default_data_path(const std::string& model_name);

/// The config as JSON text (what run.json, checkpoints, summary.json and model.safetensors
/// store as "config"), with the data's fingerprint when known, and back; the latter throws
/// mixp::Error naming a missing or bad key. out_dir, observer, resume, overwrite and
/// stop_requested are not part of it.
std::string run_config_json(const RunConfig& config, const DataFingerprint* data = nullptr);
RunConfig run_config_from_json(const std::string& text);
/// The config of the run in `dir`, from its newest usable checkpoint, with out_dir = dir and
/// resume set: run_train() of it continues the run, after checking that the data has the
/// fingerprint the run started with. Checkpoints skipped are reported to `skipped`; throws
/// mixp::Error when none is usable.
RunConfig resume_config(const std::string& dir,
                        const std::function<void(const std::string&)>& skipped = {});

/// What run_train(config) trains: its options (steps resolved, the config stored) and a fresh
/// model and data. For callers that add to the run, such as `mixp inspect`'s hooks.
struct PreparedRun {
  TrainOptions options;
  RunInputs inputs;
};
PreparedRun prepare_run(const RunConfig& config);

/// Trains config.model on config.data under config.train (see train()); stores
/// run_config_json(config) in its checkpoints unless config.train.config is set.
TrainResult run_train(const RunConfig& config);
/// compare() of config under each precision, the data loaded once.
CompareResult run_compare(const RunConfig& config, const std::vector<std::string>& precisions);

}  // namespace mixp::train
