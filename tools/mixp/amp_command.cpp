// mixp amp policy: the autocast cast-policy table, printed from the library's OpKind table, so
// that what it shows is what autocast does.
#include <string>

#include "commands.h"
#include "mixp/op_kind.h"

namespace mixp::cli {
namespace {

// What an op returns under autocast when given fp32 inputs (and in general).
std::string output_rule(const OpInfo& op) {
  switch (op.policy) {
    case CastPolicy::lower_precision: return "autocast dtype";
    case CastPolicy::fp32_compute: return op.fp32_output ? "f32" : "input dtype (computed in f32)";
    case CastPolicy::promote: return "widest input dtype";
    case CastPolicy::banned:
      return std::string("error; use ") + (op.alternative ? op.alternative : "an fp32 region");
    case CastPolicy::keep: return "input dtype";
  }
  return "?";
}

}  // namespace

int run_amp_policy(std::FILE* out) {
  std::fprintf(out, "%-30s %-16s %s\n", "op", "policy", "output dtype");
  for (const OpInfo& op : all_ops()) {
    std::fprintf(out, "%-30s %-16s %s\n", op.name, name_of(op.policy), output_rule(op).c_str());
  }
  std::fprintf(out,
               "\nlower_precision: f32/f16/bf16 inputs cast to the autocast dtype (fp32 "
               "accumulation).\nfp32_compute: f16/bf16 inputs widened to f32.\npromote: mixed "
               "floating inputs go to the widest (f64 > f32 > bf16, f16; bf16 with f16 -> "
               "f32).\nInteger inputs are never cast; f64 inputs are not narrowed.\n");
  return 0;
}

}  // namespace mixp::cli
