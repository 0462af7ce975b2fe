// The state_dict() of the trainer's model and data source.
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

StateDict TrainModel::state_dict() {
  StateDict s;
  for (const auto& [name, p] : named_parameters()) s.tensors["param/" + name] = p->detach();
  for (const auto& [name, b] : named_buffers()) s.tensors["buffer/" + name] = *b;
  if (const std::optional<PhiloxState> g = generator_state()) s.set_philox("generator", *g);
  return s;
}

void TrainModel::load_state_dict(const StateDict& state) {
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source), all checked first
  for (const auto& [name, p] : named_parameters())
    copies.emplace_back(*p, state.tensor("param/" + name, *p));
  for (const auto& [name, b] : named_buffers())
    copies.emplace_back(*b, state.tensor("buffer/" + name, *b));
  std::optional<PhiloxState> generator;
  if (generator_state()) generator = state.get_philox("generator");
  NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src);
  if (generator) set_generator_state(*generator);
}

StateDict DataSource::state_dict() const {
  const std::optional<data::LoaderState> s = loader_state();
  MIXP_CHECK(s.has_value(), "this data source cannot be checkpointed (it has no loader state)");
  StateDict out;
  out.set_philox("rng", s->rng);
  out.set_int("epoch", s->epoch);
  out.set_int("position", s->position);
  return out;
}

void DataSource::load_state_dict(const StateDict& state) {
  const data::LoaderState s{.rng = state.get_philox("rng"),
                            .epoch = state.get_int("epoch"),
                            .position = state.get_int("position")};
  MIXP_CHECK(s.epoch >= 0 && s.position >= 0, "saved loader position ", s.epoch, "/", s.position,
             " is not valid");
  set_loader_state(s);
}

}  // namespace mixp::train
