// Text generation from a gpt (mixp/train/sample.h) with the key/value cache and without it
// (nanoGPT's full forward of the context for every token), interleaved round by round so that a
// noisy machine slows both: tokens per second of each and their ratio.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/median.h"
#include "mixp/error.h"
#include "mixp/nn/models.h"
#include "mixp/runtime.h"
#include "mixp/train/sample.h"
#include "mixp/train/trained_model.h"

namespace mixp::bench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int run_sample_bench(const SampleBenchOptions& o, std::FILE* out) {
  MIXP_CHECK(o.tokens >= 1 && o.rounds >= 1,
             "mixp bench sample: --tokens and --rounds must be at "
             "least 1, got ",
             o.tokens, " and ", o.rounds);
  const nn::ModelConfig config{.name = "gpt",
                               .vocab = o.vocab,
                               .layers = o.layers,
                               .heads = o.heads,
                               .width = o.width,
                               .context = o.context};
  std::unique_ptr<nn::Model> model = nn::make_model(config, 0);  // random init: speed only
  model->train(false);
  std::string vocabulary;
  for (int64_t i = 0; i < o.vocab; ++i) vocabulary += char(' ' + i % 95);
  train::Inference inference(*model, o.precision);
  inference.cast_parameters();
  std::vector<double> cached_s, uncached_s;
  bool same_text = true;
  for (int round = 0; round < o.rounds; ++round) {
    std::string texts[2];
    for (const bool use_cache : {true, false}) {
      const train::SampleOptions options{
          .prompt = vocabulary.substr(0, 1), .tokens = o.tokens, .seed = 1, .use_cache = use_cache};
      const Clock::time_point start = Clock::now();
      texts[use_cache] = train::sample(*model, vocabulary, inference, options);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      (use_cache ? cached_s : uncached_s).push_back(s);
    }
    same_text = same_text && texts[0] == texts[1];
  }
  const double cached = double(o.tokens) / median_of(cached_s);
  const double uncached = double(o.tokens) / median_of(uncached_s);
  std::fprintf(out,
               "mixp bench sample: gpt %d layers, %d heads, width %lld, context %lld, %s, %lld "
               "tokens from a 1-character prompt, median of %d interleaved rounds, %d threads\n",
               o.layers, o.heads, (long long)o.width, (long long)o.context, o.precision.c_str(),
               (long long)o.tokens, o.rounds, num_threads());
  std::fprintf(out, "%-10s %12s %10s\n", "path", "tokens/s", "vs uncached");
  std::fprintf(out, "%-10s %12.1f %10.2f\n", "uncached", uncached, 1.0);
  std::fprintf(out, "%-10s %12.1f %10.2f\n", "cached", cached, cached / uncached);
  if (1 + o.tokens > o.context)
    std::fprintf(out, "same text: not compared (past the context the paths read other windows)\n");
  else
    std::fprintf(out, "same text: %s\n",
                 same_text ? "yes" : "no (rounding moved a draw across a boundary between tokens)");
  return 0;
}

}  // namespace mixp::bench
