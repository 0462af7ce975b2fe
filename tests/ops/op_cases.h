// Every op of mixp/ops.h as test cases: inputs (shapes and the domain their values come from)
// and a function of them. The op tests run each case on every dtype, fast against reference,
// and in f64 against central differences.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "mixp/ops.h"

namespace mixp::test {

enum class Domain {
  any,             ///< standard normal
  positive,        ///< in [0.5, 2]
  away_from_zero,  ///< |x| in [0.5, 2], random sign (for relu, div, max)
};

struct InputSpec {
  Shape shape;
  Domain domain = Domain::any;
  bool differentiable = true;
};

struct OpCase {
  std::string name;
  std::vector<InputSpec> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  int64_t reduction_length = 1;  ///< terms summed per output element, for the tolerance
  bool gradcheck = true;         ///< false for cases too large for central differences
};
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

std::vector<OpCase> all_op_cases();
/// Random inputs for a case in `dtype`, from a fixed seed.
std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, uint64_t seed);

}  // namespace mixp::test
