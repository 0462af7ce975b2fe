#include "mixp/optim/adamw.h"

#include "optim/adam_update.h"

namespace mixp::optim {

namespace {
const AdamWOptions& checked(const AdamWOptions& o) {
  detail::check_adam_options("AdamW", o.eps, o.betas, o.weight_decay);
  return o;
}
}  // namespace

AdamW::AdamW(std::vector<Tensor> parameters, const AdamWOptions& options)
    : AdamFamily("AdamW", std::move(parameters), options.lr, checked(options).precision,
                 options.rounding, options.state_dtype),
      options_(options) {}

void AdamW::step() {
  update(options_.betas, options_.eps, options_.weight_decay, WeightDecay::decoupled);
}

}  // namespace mixp::optim
