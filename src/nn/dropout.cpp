#include "mixp/nn/dropout.h"

#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

Dropout::Dropout(const DropoutOptions& options, std::shared_ptr<Philox> generator)
    : options_(options), generator_(std::move(generator)) {
  MIXP_CHECK(options.p >= 0 && options.p < 1, "Dropout: p must be in [0, 1), got ", options.p);
  MIXP_CHECK(generator_ != nullptr,
             "Dropout: a generator is required, shared with the model that owns the module");
}

Tensor Dropout::forward(const Tensor& x) {
  return ops::dropout(x, options_.p, *generator_, is_training());
}

std::string Dropout::extra_repr() const {
  return detail::concat("p=", options_.p, ", inplace=False");
}

}  // namespace mixp::nn
