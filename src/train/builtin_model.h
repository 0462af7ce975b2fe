// The TrainModel of the built-in models (nn::make_model): private to src/train.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixp/nn/models.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

class BuiltinModel : public TrainModel {
 public:
  explicit BuiltinModel(std::unique_ptr<nn::Model> model) : model_(std::move(model)) {}
  Tensor forward(const Tensor& x) override { return model_->forward(x); }
  nn::Task task() const override { return model_->task(); }
  nn::Module* module() override { return model_.get(); }
  std::vector<std::pair<std::string, Tensor*>> named_parameters() override {
    return model_->named_parameters();
  }
  std::vector<std::pair<std::string, Tensor*>> named_buffers() override {
    return model_->named_buffers();
  }
  std::vector<bool> norm_parameter_flags() override { return model_->norm_parameter_flags(); }
  void set_training(bool training) override { model_->train(training); }
  std::optional<PhiloxState> generator_state() const override {
    return model_->generator().state();
  }
  void set_generator_state(const PhiloxState& state) override {
    model_->generator().set_state(state);
  }
  nn::Model& model() { return *model_; }

 private:
  std::unique_ptr<nn::Model> model_;
};

}  // namespace mixp::train
