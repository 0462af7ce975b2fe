// The figures of data-parallel training (`mixp bench dp`): `mixp train` under `mpirun` at one
// and two ranks with the same per-rank batch, read back from each run's summary.json, beside
// the standalone all-reduce of the same gradient payload (`mixp bench allreduce`), round after
// round, so that each figure is a ratio against a baseline of its own round.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "bench/median.h"
#include "mixp/dist/communicator.h"
#include "mixp/error.h"
#include "mixp/nn/models.h"

extern char** environ;

namespace mixp::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A target of the issue, checked on the medians.
constexpr double kEfficiencyTarget = 0.90;       // weak scaling, at least
constexpr double kExposedFractionTarget = 0.30;  // of the standalone all-reduce, at most
constexpr double kBf16BytesTarget = 0.5 * 1.01;  // of f32's bytes; 1% for the agreements
constexpr double kZeroStateTarget = 0.55;        // ZeRO-1's optimizer state at N=2, of N=1's

// Numbers as flags take them: the shortest text that reads back as the same double.
std::string number_text(double value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  MIXP_ASSERT(error == std::errc(), "a double did not fit in 32 characters");
  return std::string(text, end);
}

const json& field(const json& object, const char* key, const std::string& path) {
  MIXP_CHECK(object.is_object() && object.contains(key), "bench dp: ", path, " has no \"", key,
             "\"; is it the summary.json of a mixp train run?");
  return object.at(key);
}

template <typename T>
T number_field(const json& object, const char* key, const std::string& path) {
  const json& value = field(object, key, path);
  MIXP_CHECK(value.is_number(), "bench dp: \"", key, "\" of ", path, " is ", value.dump(),
             ", not a number");
  return value.get<T>();
}

// Runs `argv` (argv[0] looked up on PATH) with its stdout and stderr written to `log`, and
// returns its exit status (128 + the signal that ended it).
int run_to_log(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  MIXP_CHECK(error == 0, "bench dp: cannot start '", argv[0], "': ", std::strerror(error),
             " (Open MPI's mpirun comes with openmpi-bin; --mpirun gives its path)");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    MIXP_CHECK(errno == EINTR, "bench dp: waiting for '", argv[0], "': ", std::strerror(errno));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The last `count` lines of a file.
std::string last_lines(const fs::path& path, size_t count) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string text;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i)
    text += "\n  " + lines[i];
  return text;
}

void run_checked(const std::vector<std::string>& argv, const fs::path& log) {
  const int status = run_to_log(argv, log);
  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
  MIXP_CHECK(status == 0, "bench dp: `", command, "` ended with status ", status,
             "; the end of its output (", log.string(), "):", last_lines(log, 6));
}

void append(std::vector<std::string>& argv, const std::vector<std::string>& more) {
  argv.insert(argv.end(), more.begin(), more.end());
}

// mpirun -np ranks, with --allow-run-as-root for root and --oversubscribe when the ranks
// outnumber the cores.
std::vector<std::string> mpirun_prefix(const std::string& mpirun, int ranks, bool as_root,
                                       unsigned cores) {
  std::vector<std::string> argv{mpirun, "-np", std::to_string(ranks)};
  if (as_root) argv.push_back("--allow-run-as-root");
  if (cores < unsigned(ranks)) argv.push_back("--oversubscribe");
  return argv;
}

// mixp train of the bench's gpt, `ranks` x batch_per_rank sequences a step, without --out.
std::vector<std::string> train_flags(const DpBenchOptions& o, const std::string& mixp, int ranks) {
  std::vector<std::string> argv{mixp, "train", "--model", "gpt"};
  append(argv, {"--layers", std::to_string(o.layers), "--heads", std::to_string(o.heads)});
  append(argv, {"--width", std::to_string(o.width), "--context", std::to_string(o.context)});
  append(argv, {"--batch", std::to_string(o.batch_per_rank * ranks)});
  append(argv, {"--steps", std::to_string(o.steps), "--threads", "1"});
  append(argv, {"--data", o.data, "--val-fraction", number_text(o.val_fraction), "--overwrite"});
  return argv;
}

// What every run of the bench shares.
struct Plan {
  DpBenchOptions options;
  std::string mixp, mpirun;
  bool as_root = false;
  unsigned cores = 1;
};

Plan make_plan(const DpBenchOptions& o) {
  MIXP_CHECK(o.rounds >= 1 && o.steps >= 1 && o.batch_per_rank >= 1 && o.allreduce_reps >= 1,
             "bench dp: --rounds, --steps, --batch-per-rank and --allreduce-reps must be at "
             "least 1, got ",
             o.rounds, ", ", o.steps, ", ", o.batch_per_rank, " and ", o.allreduce_reps);
  MIXP_CHECK(!o.bucket_mb.empty(), "bench dp: --bucket-mb needs at least one size");
  for (double mb : o.bucket_mb)
    MIXP_CHECK(mb > 0 && std::isfinite(mb), "bench dp: every --bucket-mb must be positive, got ",
               mb);
  MIXP_CHECK(o.val_fraction > 0 && o.val_fraction < 1,
             "bench dp: --val-fraction must be in (0, 1), got ", o.val_fraction);
  Plan plan;
  plan.options = o;
  if (plan.options.data.empty()) plan.options.data = "data/kjv.txt";
  MIXP_CHECK(fs::is_regular_file(plan.options.data), "bench dp: no text file at '",
             plan.options.data, "' (scripts/make-kjv.sh fetches data/kjv.txt; or give --data)");
  MIXP_CHECK(dist::mpi_built_in(),
             "bench dp: this mixp was built without MPI (install libopenmpi-dev and rebuild)");
  MIXP_CHECK(!dist::launch_from_environment().by_mpirun,
             "bench dp: run it as one process; it starts mpirun itself");
  plan.options.data = fs::absolute(plan.options.data).string();
  plan.mixp = o.mixp.empty() ? fs::read_symlink("/proc/self/exe").string() : o.mixp;
  plan.mpirun = o.mpirun;
  plan.as_root = ::geteuid() == 0;
  plan.cores = std::max(1u, std::thread::hardware_concurrency());
  return plan;
}

// One round's runs, each read back.
struct Round {
  DpRunSummary one;
  DpRunSummary pair;              // the slower of two one-rank runs at once
  std::vector<DpRunSummary> f32;  // by bucket size
  DpRunSummary bf16;              // the first bucket size
  DpRunSummary zero;              // f32, the first bucket size, ZeRO stage 1
  double allreduce_f32_ms = 0, allreduce_bf16_ms = 0;
};

DpRunSummary train_run(const Plan& plan, const fs::path& folder, int ranks,
                       const std::string& dtype, double bucket_mb, int zero = 0) {
  run_checked(dp_train_arguments(plan.options, plan.mixp, ranks, dtype, bucket_mb, folder.string(),
                                 plan.as_root, plan.cores, zero),
              folder.string() + ".log");
  return read_dp_summary((folder / "summary.json").string());
}

// Two one-rank runs at the same time, placed by mpirun as it places two ranks, that do not
// communicate: what two processes sharing the machine cost each other. A data-parallel step
// waits for the slower rank, so the slower run is kept.
DpRunSummary pair_run(const Plan& plan, const fs::path& folder) {
  run_checked(dp_pair_arguments(plan.options, plan.mixp, folder.string(), plan.as_root, plan.cores),
              folder.string() + ".log");
  const DpRunSummary a = read_dp_summary(folder.string() + "-0/summary.json");
  const DpRunSummary b = read_dp_summary(folder.string() + "-1/summary.json");
  return a.median_step_ms >= b.median_step_ms ? a : b;
}

double allreduce_ms(const Plan& plan, const fs::path& log, int64_t elements,
                    const std::string& dtype) {
  std::vector<std::string> argv = mpirun_prefix(plan.mpirun, 2, plan.as_root, plan.cores);
  append(argv, {plan.mixp, "bench", "allreduce", "--elements", std::to_string(elements), "--dtype",
                dtype, "--reps", std::to_string(plan.options.allreduce_reps)});
  run_checked(argv, log);
  std::ifstream in(log);
  json line;
  for (std::string text; std::getline(in, text);)
    if (!text.empty() && text.front() == '{') line = json::parse(text, nullptr, false);
  return number_field<double>(line, "median_ms", log.string());
}

Round run_round(const Plan& plan, int round, std::FILE* out) {
  const fs::path dir = fs::path(plan.options.out) / ("round-" + std::to_string(round));
  fs::create_directories(dir);
  Round r;
  const auto say = [&](const std::string& name, const DpRunSummary& s) {
    std::fprintf(out, "round %d: %-22s %8.2f ms/step  %8.1f samples/s per rank\n", round,
                 name.c_str(), s.median_step_ms, s.samples_per_s / s.world_size);
    std::fflush(out);
  };
  r.one = train_run(plan, dir / "n1", 1, "f32", 0);
  say("N=1", r.one);
  r.pair = pair_run(plan, dir / "pair");
  say("2 x N=1 at once", r.pair);
  const std::string first = number_text(plan.options.bucket_mb.front());
  for (double mb : plan.options.bucket_mb) {
    r.f32.push_back(train_run(plan, dir / ("n2-f32-bucket-" + number_text(mb)), 2, "f32", mb));
    say("N=2 f32 " + number_text(mb) + " MiB", r.f32.back());
  }
  r.bf16 =
      train_run(plan, dir / ("n2-bf16-bucket-" + first), 2, "bf16", plan.options.bucket_mb.front());
  say("N=2 bf16 " + first + " MiB", r.bf16);
  r.zero = train_run(plan, dir / ("n2-f32-zero1-bucket-" + first), 2, "f32",
                     plan.options.bucket_mb.front(), /*zero=*/1);
  say("N=2 f32 ZeRO-1 " + first + " MiB", r.zero);
  const int64_t elements = gradient_payload_bytes(r.one.model) / 4;
  r.allreduce_f32_ms = allreduce_ms(plan, dir / "allreduce-f32.log", elements, "f32");
  r.allreduce_bf16_ms = allreduce_ms(plan, dir / "allreduce-bf16.log", elements, "bf16");
  std::fprintf(out, "round %d: standalone all-reduce of %lld values: f32 %.2f ms, bf16 %.2f ms\n",
               round, (long long)elements, r.allreduce_f32_ms, r.allreduce_bf16_ms);
  std::fflush(out);
  return r;
}

// A figure over the rounds: its median, and each round's value.
struct Figure {
  double median = 0;
  std::vector<double> rounds;
};

template <typename F>
Figure over_rounds(const std::vector<Round>& rounds, F value) {
  Figure f;
  for (const Round& r : rounds) f.rounds.push_back(value(r));
  f.median = median_of(f.rounds);
  return f;
}

std::string with_rounds(const Figure& f, const char* format, double scale = 1.0) {
  char text[64];
  std::snprintf(text, sizeof text, format, f.median * scale);
  std::string s = text;
  if (f.rounds.size() < 2) return s;
  s += " (";
  for (size_t i = 0; i < f.rounds.size(); ++i) {
    std::snprintf(text, sizeof text, format, f.rounds[i] * scale);
    s += (i ? ", " : "") + std::string(text);
  }
  return s + ")";
}

using RunOf = std::function<const DpRunSummary&(const Round&)>;

// The median over rounds of each tag's peak.
std::map<std::string, int64_t> median_memory(const std::vector<Round>& rounds, const RunOf& run) {
  std::map<std::string, int64_t> memory;
  for (const auto& [tag, bytes] : run(rounds.front()).peak_memory_bytes)
    memory[tag] = int64_t(over_rounds(rounds, [&](const Round& r) {
                            const auto& peaks = run(r).peak_memory_bytes;
                            const auto it = peaks.find(tag);
                            return it == peaks.end() ? 0.0 : double(it->second);
                          }).median);
  return memory;
}

// The row of one two-rank configuration, printed and added to `rows`.
void two_rank_row(const std::vector<Round>& rounds, const std::string& name, const char* dtype,
                  double bucket_mb, const RunOf& run, std::FILE* out, json& rows) {
  const bool f32 = std::string(dtype) == "f32";
  const auto standalone = [&](const Round& r) {
    return f32 ? r.allreduce_f32_ms : r.allreduce_bf16_ms;
  };
  const Figure step = over_rounds(rounds, [&](const Round& r) { return run(r).median_step_ms; });
  const Figure per_rank =
      over_rounds(rounds, [&](const Round& r) { return run(r).samples_per_s / run(r).world_size; });
  const Figure efficiency =
      over_rounds(rounds, [&](const Round& r) { return weak_scaling_efficiency(r.one, run(r)); });
  const Figure exposed =
      over_rounds(rounds, [&](const Round& r) { return exposed_communication_ms(r.one, run(r)); });
  const Figure alone = over_rounds(rounds, standalone);
  const Figure fraction = over_rounds(rounds, [&](const Round& r) {
    return exposed_communication_ms(r.one, run(r)) / standalone(r);
  });
  // Beyond what two processes cost each other without communicating.
  const Figure beyond =
      over_rounds(rounds, [&](const Round& r) { return exposed_communication_ms(r.pair, run(r)); });
  const Figure beyond_fraction = over_rounds(rounds, [&](const Round& r) {
    return exposed_communication_ms(r.pair, run(r)) / standalone(r);
  });
  const Figure bytes =
      over_rounds(rounds, [&](const Round& r) { return double(run(r).bytes_sent_per_step); });
  std::fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n", name.c_str(),
               with_rounds(step, "%.1f").c_str(), with_rounds(per_rank, "%.1f").c_str(),
               with_rounds(efficiency, "%.1f%%", 100).c_str(), with_rounds(exposed, "%.2f").c_str(),
               with_rounds(beyond, "%.2f").c_str(), with_rounds(alone, "%.2f").c_str(),
               with_rounds(fraction, "%.0f%%", 100).c_str(),
               with_rounds(beyond_fraction, "%.0f%%", 100).c_str(), bytes.median);
  rows.push_back({{"reduce_dtype", dtype},
                  {"bucket_mb", bucket_mb},
                  {"median_step_ms", step.median},
                  {"samples_per_s_per_rank", per_rank.median},
                  {"weak_scaling_efficiency", efficiency.median},
                  {"weak_scaling_efficiency_rounds", efficiency.rounds},
                  {"exposed_ms", exposed.median},
                  {"standalone_allreduce_ms", alone.median},
                  {"exposed_fraction", fraction.median},
                  {"exposed_fraction_rounds", fraction.rounds},
                  {"exposed_beyond_pair_ms", beyond.median},
                  {"exposed_beyond_pair_fraction", beyond_fraction.median},
                  {"bytes_sent_per_step", int64_t(bytes.median)}});
}

// The table's header and its two baselines: one rank alone, and two one-rank runs at once.
void print_baseline_rows(const std::vector<Round>& rounds, std::FILE* out, json& result) {
  std::fprintf(out,
               "| run | ms/step | samples/s per rank | weak scaling | exposed ms | exposed ms "
               "beyond 2 x N=1 | standalone all-reduce ms | exposed / standalone | exposed beyond "
               "2 x N=1 / standalone | bytes sent/step |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n");
  const Figure one_step = over_rounds(rounds, [](const Round& r) { return r.one.median_step_ms; });
  const Figure one_rate = over_rounds(rounds, [](const Round& r) { return r.one.samples_per_s; });
  std::fprintf(out, "| N=1 (baseline) | %s | %s | 100%% | 0 | - | - | - | - | %lld |\n",
               with_rounds(one_step, "%.1f").c_str(), with_rounds(one_rate, "%.1f").c_str(),
               (long long)rounds.front().one.bytes_sent_per_step);
  const Figure pair_step =
      over_rounds(rounds, [](const Round& r) { return r.pair.median_step_ms; });
  const Figure pair_rate = over_rounds(rounds, [](const Round& r) { return r.pair.samples_per_s; });
  const Figure pair_efficiency =
      over_rounds(rounds, [](const Round& r) { return weak_scaling_efficiency(r.one, r.pair); });
  const Figure pair_exposed =
      over_rounds(rounds, [](const Round& r) { return exposed_communication_ms(r.one, r.pair); });
  std::fprintf(out,
               "| 2 x N=1 at once, no communication | %s | %s | %s | %s | 0 | - | - | - | 0 |\n",
               with_rounds(pair_step, "%.1f").c_str(), with_rounds(pair_rate, "%.1f").c_str(),
               with_rounds(pair_efficiency, "%.1f%%", 100).c_str(),
               with_rounds(pair_exposed, "%.2f").c_str());
  result["n1"] = {{"median_step_ms", one_step.median}, {"samples_per_s", one_rate.median}};
  result["pair"] = {{"median_step_ms", pair_step.median},
                    {"samples_per_s", pair_rate.median},
                    {"weak_scaling_efficiency", pair_efficiency.median},
                    {"exposed_ms", pair_exposed.median}};
}

void print_memory(const std::vector<Round>& rounds, double bucket_mb, std::FILE* out,
                  json& result) {
  const std::map<std::string, int64_t> one =
      median_memory(rounds, [](const Round& r) -> const DpRunSummary& { return r.one; });
  const std::map<std::string, int64_t> two =
      median_memory(rounds, [](const Round& r) -> const DpRunSummary& { return r.f32.front(); });
  const std::map<std::string, int64_t> zero =
      median_memory(rounds, [](const Round& r) -> const DpRunSummary& { return r.zero; });
  std::fprintf(out, "\npeak memory of rank 0 by tag, MiB (N=2: f32 reduction, %s MiB buckets)\n",
               number_text(bucket_mb).c_str());
  std::fprintf(out,
               "| tag | N=1 | N=2 | N=2 ZeRO-1 | N=2 / N=1 | N=2 ZeRO-1 / N=1 |\n"
               "|---|---|---|---|---|---|\n");
  const auto mib = [](int64_t bytes) { return double(bytes) / (1 << 20); };
  for (const auto& [tag, bytes] : one) {
    const int64_t other = two.count(tag) ? two.at(tag) : 0;
    const int64_t sharded = zero.count(tag) ? zero.at(tag) : 0;
    if (bytes == 0 && other == 0 && sharded == 0) continue;
    std::fprintf(out, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", tag.c_str(), mib(bytes),
                 mib(other), mib(sharded), bytes > 0 ? double(other) / double(bytes) : 0.0,
                 bytes > 0 ? double(sharded) / double(bytes) : 0.0);
  }
  result["peak_memory_bytes"] = {{"n1", one}, {"n2", two}, {"n2_zero1", zero}};
}

}  // namespace

DpRunSummary read_dp_summary(const std::string& path) {
  std::ifstream in(path);
  MIXP_CHECK(in.good(), "bench dp: cannot read ", path);
  const json j = json::parse(in, nullptr, false);
  MIXP_CHECK(!j.is_discarded(), "bench dp: ", path, " is not JSON");
  DpRunSummary s;
  s.world_size = number_field<int>(j, "world_size", path);
  const json& dtype = field(j, "reduce_dtype", path);
  MIXP_CHECK(dtype.is_null() || dtype.is_string(), "bench dp: \"reduce_dtype\" of ", path, " is ",
             dtype.dump(), ", not a name or null");
  if (dtype.is_string()) s.reduce_dtype = dtype.get<std::string>();
  s.bytes_sent_per_step = number_field<int64_t>(j, "bytes_sent_per_step", path);
  s.median_step_ms = number_field<double>(j, "median_step_ms", path);
  s.samples_per_s = number_field<double>(j, "samples_per_s", path);
  const json& memory = field(j, "peak_memory_bytes", path);
  MIXP_CHECK(memory.is_object(), "bench dp: \"peak_memory_bytes\" of ", path,
             " is not an object of tags");
  for (const auto& [tag, bytes] : memory.items())
    s.peak_memory_bytes[tag] = number_field<int64_t>(memory, tag.c_str(), path);
  const json& model = field(field(j, "config", path), "model", path);
  s.model.name = field(model, "name", path).get<std::string>();
  s.model.vocab = number_field<int64_t>(model, "vocab", path);
  s.model.layers = number_field<int>(model, "layers", path);
  s.model.heads = number_field<int>(model, "heads", path);
  s.model.width = number_field<int64_t>(model, "width", path);
  s.model.context = number_field<int64_t>(model, "context", path);
  s.model.classes = number_field<int64_t>(model, "classes", path);
  s.model.image_size = number_field<int64_t>(model, "image_size", path);
  MIXP_CHECK(s.world_size >= 1, "bench dp: \"world_size\" of ", path, " is ", s.world_size);
  return s;
}

int64_t gradient_payload_bytes(const nn::ModelConfig& model) {
  const std::unique_ptr<nn::Model> built = nn::make_model(model, 0);
  int64_t elements = 0;
  for (const auto& [name, p] : built->named_parameters()) elements += p->numel();
  return elements * int64_t(sizeof(float));
}

double weak_scaling_efficiency(const DpRunSummary& one, const DpRunSummary& several) {
  MIXP_CHECK(one.samples_per_s > 0, "bench dp: the one-rank run has no samples/s");
  return several.samples_per_s / several.world_size / one.samples_per_s;
}

double exposed_communication_ms(const DpRunSummary& one, const DpRunSummary& several) {
  return several.median_step_ms - one.median_step_ms;
}

std::vector<std::string> dp_train_arguments(const DpBenchOptions& o, const std::string& mixp,
                                            int ranks, const std::string& reduce_dtype,
                                            double bucket_mb, const std::string& folder,
                                            bool as_root, unsigned cores, int zero) {
  std::vector<std::string> argv = mpirun_prefix(o.mpirun, ranks, as_root, cores);
  append(argv, train_flags(o, mixp, ranks));
  append(argv, {"--out", folder});
  if (ranks > 1)
    append(argv, {"--reduce-dtype", reduce_dtype, "--bucket-mb", number_text(bucket_mb)});
  if (ranks > 1 && zero > 0) append(argv, {"--zero", std::to_string(zero)});
  return argv;
}

std::vector<std::string> dp_pair_arguments(const DpBenchOptions& o, const std::string& mixp,
                                           const std::string& folder, bool as_root,
                                           unsigned cores) {
  std::vector<std::string> argv = mpirun_prefix(o.mpirun, 2, as_root, cores);
  // Without the rank and size that mpirun sets, mixp trains as one process; each rank writes
  // to folder-0 or folder-1.
  append(argv, {"sh", "-c",
                "exec env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK \"$@\" "
                "--out \"$0-$OMPI_COMM_WORLD_RANK\"",
                folder});
  append(argv, train_flags(o, mixp, 1));
  return argv;
}

int run_dp_bench(const DpBenchOptions& options, std::FILE* out) {
  const Plan plan = make_plan(options);
  const DpBenchOptions& o = plan.options;
  double load[3] = {0, 0, 0};
  const bool have_load = ::getloadavg(load, 3) == 3;
  std::fprintf(out,
               "bench dp: gpt, %d layers, %d heads, width %lld, context %lld; %lld sequences per "
               "rank, %lld steps, one thread per rank; %d rounds; %u cores, load average %.2f\n",
               o.layers, o.heads, (long long)o.width, (long long)o.context,
               (long long)o.batch_per_rank, (long long)o.steps, o.rounds, plan.cores,
               have_load ? load[0] : 0.0);
  std::vector<Round> rounds;
  for (int r = 1; r <= o.rounds; ++r) rounds.push_back(run_round(plan, r, out));

  const int64_t payload = gradient_payload_bytes(rounds.front().one.model);
  std::fprintf(out,
               "\nmedians over %d rounds (each round's value in brackets); gradient payload %lld "
               "bytes in f32\n",
               o.rounds, (long long)payload);
  json result = {{"bench", "dp"}};
  print_baseline_rows(rounds, out, result);
  json rows = json::array();
  for (size_t b = 0; b < o.bucket_mb.size(); ++b)
    two_rank_row(
        rounds, "N=2 f32, " + number_text(o.bucket_mb[b]) + " MiB buckets", "f32", o.bucket_mb[b],
        [b](const Round& r) -> const DpRunSummary& { return r.f32[b]; }, out, rows);
  two_rank_row(
      rounds, "N=2 bf16, " + number_text(o.bucket_mb.front()) + " MiB buckets", "bf16",
      o.bucket_mb.front(), [](const Round& r) -> const DpRunSummary& { return r.bf16; }, out, rows);
  const Figure bytes_ratio = over_rounds(rounds, [](const Round& r) {
    return double(r.bf16.bytes_sent_per_step) / double(r.f32.front().bytes_sent_per_step);
  });

  result.update(json{{"rounds", o.rounds},
                     {"model",
                      {{"name", "gpt"},
                       {"layers", o.layers},
                       {"heads", o.heads},
                       {"width", o.width},
                       {"context", o.context}}},
                     {"batch_per_rank", o.batch_per_rank},
                     {"steps", o.steps},
                     {"gradient_payload_bytes", payload},
                     {"out", o.out},
                     {"n2", rows},
                     {"bf16_over_f32_bytes", bytes_ratio.median}});
  print_memory(rounds, o.bucket_mb.front(), out, result);

  std::fprintf(out, "\ntargets, on the medians:\n");
  for (const json& row : rows) {
    const double e = row["weak_scaling_efficiency"], x = row["exposed_fraction"];
    std::fprintf(out,
                 "  N=2 %s, %s MiB buckets: weak scaling %.1f%% (>= %.0f%%: %s), exposed "
                 "communication %.0f%% of the standalone all-reduce (<= %.0f%%: %s)\n",
                 row["reduce_dtype"].get<std::string>().c_str(),
                 number_text(row["bucket_mb"].get<double>()).c_str(), 100 * e,
                 100 * kEfficiencyTarget, e >= kEfficiencyTarget ? "met" : "NOT met", 100 * x,
                 100 * kExposedFractionTarget, x <= kExposedFractionTarget ? "met" : "NOT met");
  }
  std::fprintf(out, "  bytes sent per step, bf16 / f32 reduction: %.4f (half: %s)\n",
               bytes_ratio.median, bytes_ratio.median <= kBf16BytesTarget ? "met" : "NOT met");
  const json& memory = result["peak_memory_bytes"];
  const double state = double(memory["n2_zero1"].value("optimizer_state", int64_t{0})) /
                       double(memory["n1"].value("optimizer_state", int64_t{1}));
  std::fprintf(out, "  optimizer state per rank, N=2 ZeRO-1 / N=1: %.3f (<= %.2f: %s)\n", state,
               kZeroStateTarget, state <= kZeroStateTarget ? "met" : "NOT met");
  result["zero1_optimizer_state_over_n1"] = state;
  std::fprintf(out, "%s\n", result.dump().c_str());
  return 0;
}

}  // namespace mixp::bench
