// mixp sample: text from a trained gpt or lstm, printed as it is drawn.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/runtime.h"
#include "mixp/train/sample.h"
#include "mixp/train/trained_model.h"

namespace mixp::cli {

void add_sample_flags(CLI::App& command, SampleCommandOptions& o) {
  command
      .add_option("from", o.from,
                  "a run folder (its model.safetensors, else its newest checkpoint), a "
                  "model.safetensors or a checkpoint-N.safetensors")
      ->required();
  command.add_option(
      "--prompt", o.prompt,
      "the text to continue (default: a newline, or the vocabulary's first character "
      "when it has none)");
  command.add_option("--tokens", o.tokens, "characters to generate (default 200)");
  command.add_option("--temperature", o.temperature,
                     "divides the logits: below 1 sharper, above 1 flatter (default 1)");
  command.add_option("--top-k", o.top_k,
                     "draw among the k most likely characters only; 1 is greedy (default 0: all)");
  command.add_option("--seed", o.seed, "the draws' seed (default 0)");
  command.add_option("--precision", o.precision,
                     "the preset to run the model under (default: the run's own)");
  command.add_flag("--no-cache", o.no_cache,
                   "recompute the whole context for every character (nanoGPT's way) instead of "
                   "the gpt's key/value cache or the lstm's stepped state");
  command.add_option("--threads", o.threads, "compute threads (default: all)");
}

int run_sample_command(const SampleCommandOptions& o, std::FILE* out) {
  const train::SampleOptions options{.prompt = o.prompt.empty() ? "\n" : o.prompt,
                                     .tokens = o.tokens,
                                     .temperature = o.temperature,
                                     .top_k = o.top_k,
                                     .seed = parse_seed(o.seed),
                                     .use_cache = !o.no_cache};
  train::validate_sample_options(options);  // before the model is read
  MIXP_CHECK(o.threads >= 0, "--threads must be positive, got ", o.threads);
  if (o.threads > 0) set_num_threads(o.threads);
  train::TrainedModel t = train::load_trained_model(o.from);
  MIXP_CHECK(t.model->task() == nn::Task::language_model, o.from, " holds a ", t.config.model.name,
             " model; mixp sample needs a text model (gpt or lstm)");
  train::SampleOptions chosen = options;
  if (o.prompt.empty() && t.vocabulary.find('\n') == std::string::npos)
    chosen.prompt = std::string(1, t.vocabulary.front());
  const std::string precision = o.precision.empty() ? t.config.train.precision : o.precision;
  train::Inference inference(
      *t.model, precision, t.config.train.mx_scale_rounding,
      precision == t.config.train.precision ? t.config.train.fp4_without : amp::Fp4Ablation{});
  if (precision == t.config.train.precision)  // adaptive precision: the formats it reached
    if (const std::optional<StateDict> state = train::saved_precision_state(t))
      inference.load_precision_state(*state);
  inference.cast_parameters();
  train::sample(*t.model, t.vocabulary, inference, chosen, [&](const std::string& piece) {
    std::fputs(piece.c_str(), out);
    std::fflush(out);
  });
  std::fputs("\n", out);
  return 0;
}

}  // namespace mixp::cli
