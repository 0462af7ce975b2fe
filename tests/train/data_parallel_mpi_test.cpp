// The trainer across processes, run by ctest under `mpirun -np N`: every rank trains, and rank 0
// also trains the same run alone, so each test compares N ranks with one process in the same
// invocation.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dataset/files.h"
#include "mixp/dist/communicator.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/train/run.h"
#include "support/scratch.h"
#include "support/tolerance.h"

namespace mixp::train {
namespace {

namespace fs = std::filesystem;
dist::Communicator* world = nullptr;

int rank() { return world->rank(); }
int ranks() { return world->size(); }

// A barrier that sleeps while it waits: a rank training alone keeps the cores.
void quiet_barrier() {
  dist::Request r = world->barrier_async();
  while (!r.test()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

// Rank 0's text on every rank.
std::string from_rank0(const std::string& text) {
  std::vector<int64_t> length{int64_t(text.size())};
  world->broadcast(std::span(length), 0);
  std::vector<uint8_t> bytes(static_cast<size_t>(length[0]));
  if (rank() == 0) std::memcpy(bytes.data(), text.data(), bytes.size());
  world->broadcast(std::span(bytes), 0);
  return std::string(bytes.begin(), bytes.end());
}

// A folder every rank sees, with a small text and a small image set written by rank 0.
fs::path shared_folder() {
  static const fs::path dir = [] {
    const fs::path d = from_rank0(test::scratch_path("mixp_dp_test_").string());
    if (rank() == 0) {
      fs::create_directories(d / "images");
      std::ofstream text(d / "corpus.txt");
      for (int i = 0; i < 300; ++i) text << "in the beginning was the word. " << i % 7 << "\n";
      std::vector<uint8_t> px, labels;
      for (uint32_t i = 0; i < 96; ++i) {
        labels.push_back(uint8_t(i % 4));
        for (uint32_t p = 0; p < 16 * 16; ++p)
          px.push_back(uint8_t((p % 4 == i % 4 ? 180 : 20) + (p * 7 + i) % 31));
      }
      using data::test::idx_bytes, data::test::write_file;
      write_file(d / "images/train-images-idx3-ubyte", idx_bytes(0x803, {96, 16, 16}, px));
      write_file(d / "images/train-labels-idx1-ubyte", idx_bytes(0x801, {96}, labels));
      write_file(d / "images/t10k-images-idx3-ubyte", idx_bytes(0x803, {96, 16, 16}, px));
      write_file(d / "images/t10k-labels-idx1-ubyte", idx_bytes(0x801, {96}, labels));
      // 89 training images: the last batch of 8 holds one, so a rank's share of it is empty.
      fs::create_directories(d / "images-short");
      const std::vector<uint8_t> px89(px.begin(), px.begin() + 89 * 256);
      const std::vector<uint8_t> labels89(labels.begin(), labels.begin() + 89);
      write_file(d / "images-short/train-images-idx3-ubyte", idx_bytes(0x803, {89, 16, 16}, px89));
      write_file(d / "images-short/train-labels-idx1-ubyte", idx_bytes(0x801, {89}, labels89));
      write_file(d / "images-short/t10k-images-idx3-ubyte", idx_bytes(0x803, {96, 16, 16}, px));
      write_file(d / "images-short/t10k-labels-idx1-ubyte", idx_bytes(0x801, {96}, labels));
    }
    quiet_barrier();
    return d;
  }();
  return dir;
}

RunConfig gpt_run(const std::string& precision, const fs::path& out) {
  RunConfig c;
  c.model = {.name = "gpt", .layers = 1, .heads = 2, .width = 16, .context = 16, .dropout = 0.1};
  c.data = (shared_folder() / "corpus.txt").string();
  c.batch = 8;
  c.train = {.precision = precision, .steps = 8, .lr = 0.01, .seed = 5, .threads = 1,
             .out_dir = out.string(), .eval_interval = 4};
  return c;
}

RunConfig cnn_run(const std::string& precision, const fs::path& out) {
  RunConfig c;
  c.model = {.name = "cnn", .classes = 4};
  c.data = (shared_folder() / "images").string();
  c.batch = 8;
  c.train = {.precision = precision, .steps = 6, .lr = 0.01, .seed = 5, .threads = 1,
             .out_dir = out.string(), .eval_interval = 3};
  return c;
}

// Every tensor of a model file, encoded; with `parameters_only`, not batch norm's buffers.
std::map<std::string, std::vector<uint8_t>> tensors_of(const fs::path& file,
                                                      bool parameters_only = false) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& [name, t] : io::read_safetensors(file.string()).tensors) {
    const bool buffer = name.find("running_") != std::string::npos ||
                        name.find("num_batches_tracked") != std::string::npos;
    if (!parameters_only || !buffer) out[name] = io::encode_safetensors({{name, t}});
  }
  return out;
}

// The names of the tensors that differ between two model files (both must hold the same names).
std::vector<std::string> differences(const fs::path& a, const fs::path& b,
                                     bool parameters_only = false) {
  const auto x = tensors_of(a, parameters_only), y = tensors_of(b, parameters_only);
  std::vector<std::string> names;
  for (const auto& [name, bytes] : x)
    if (!y.contains(name) || y.at(name) != bytes) names.push_back(name);
  if (x.size() != y.size()) names.push_back("(the number of tensors)");
  return names;
}

// The run on every rank, deterministic, and the same run alone on rank 0 accumulating over
// as many micro-batches as there are ranks.
struct Pair {
  TrainResult ranks, alone;
  fs::path ranks_dir, alone_dir;
};
Pair deterministic_pair(RunConfig c, const std::string& name) {
  Pair p;
  p.ranks_dir = shared_folder() / (name + "-ranks");
  p.alone_dir = shared_folder() / (name + "-alone");
  c.train.out_dir = p.ranks_dir.string();
  c.train.parallel = {.communicator = world, .deterministic = true, .check_replicas = true,
                      .zero = c.train.parallel.zero};
  p.ranks = run_train(c);
  if (rank() == 0) {
    c.train.out_dir = p.alone_dir.string();
    c.train.parallel = {};
    c.train.grad_accum = ranks();
    p.alone = run_train(c);
  }
  quiet_barrier();
  return p;
}

// FP4 too: its stochastic rounding draws by micro-batch, and adaptive precision decides on the
// ranks' agreed measurements of micro-batch 0.
TEST(DataParallel, DeterministicRanksAreBitwiseOneProcessAccumulating) {
  for (const char* precision : {"fp32", "amp-bf16", "bf16", "amp-fp16", "nvfp4", "auto-fp4"}) {
    SCOPED_TRACE(precision);
    const Pair p = deterministic_pair(gpt_run(precision, ""), std::string("gpt-") + precision);
    EXPECT_EQ(p.ranks.world_size, ranks());
    if (rank() != 0) continue;
    EXPECT_EQ(differences(p.ranks_dir / "model.safetensors", p.alone_dir / "model.safetensors"), std::vector<std::string>{});
    ASSERT_EQ(p.ranks.log.size(), p.alone.log.size());
    for (size_t i = 0; i < p.ranks.log.size(); ++i)
      EXPECT_EQ(p.ranks.log[i].loss, p.alone.log[i].loss) << "line " << i;
    // Evaluation is shared and summed: the same up to the fp32 means of the loss over a
    // batch's share instead of the whole batch. Not under FP4, whose tensor scale is the
    // amax of what is quantized: a share of an evaluation batch scales by its own.
    if (std::string(precision).find("fp4") != std::string::npos) continue;
    const double rtol = test::tolerance(DType::f32, 8 * 16).rtol;
    EXPECT_NEAR(p.ranks.final_eval_loss, p.alone.final_eval_loss,
                rtol * std::fabs(p.alone.final_eval_loss));
  }
}

// ZeRO stage 1: each rank keeps the optimizer state of its pieces; deterministic, the run is
// still bitwise one process accumulating, with masters (bf16, fp16 parameters) or without, and
// with stochastic rounding (bf16's bf16 moments, bf16-sr's parameters), whose words each piece
// draws where its whole parameter's elements would.
TEST(DataParallel, ZeroStageOneIsBitwiseOneProcessAccumulating) {
  for (const char* precision : {"fp32", "amp-bf16", "bf16", "fp16", "bf16-sr"}) {
    SCOPED_TRACE(precision);
    RunConfig c = gpt_run(precision, "");
    c.model.width = 64;
    c.train.parallel.zero = 1;
    const Pair p = deterministic_pair(c, std::string("zero-") + precision);
    EXPECT_EQ(p.ranks.zero_stage, 1);
    if (rank() != 0) continue;
    EXPECT_EQ(differences(p.ranks_dir / "model.safetensors", p.alone_dir / "model.safetensors"), std::vector<std::string>{});
    EXPECT_EQ(p.ranks.final_train_loss, p.alone.final_train_loss);
  }
}

// The optimizer state per rank is about 1/N of one process's: each parameter's pieces are whole
// chunks of 16384 elements, so a rank holds at most one chunk per parameter more than 1/N.
TEST(DataParallel, ZeroStageOneKeepsAboutOneNthOfTheOptimizerStatePerRank) {
  RunConfig c = gpt_run("amp-bf16", "");
  c.model = {.name = "gpt", .layers = 1, .heads = 2, .width = 128, .context = 16};
  c.train.steps = 2;
  c.train.parallel.zero = 1;
  const Pair p = deterministic_pair(c, "zero-memory");
  const double mine = double(p.ranks.peak_memory.at("optimizer_state"));
  std::vector<double> all(static_cast<size_t>(ranks()));
  world->all_gather(std::span<const double>(&mine, 1), std::span(all));
  if (rank() != 0) return;
  const double whole = double(p.alone.peak_memory.at("optimizer_state"));
  double sum = 0;
  for (double bytes : all) sum += bytes;
  EXPECT_EQ(sum, whole) << "the pieces of the state add up to one process's";
  const double chunk_bytes = 2.0 * 4.0 * 16384;  // the two fp32 moments of one chunk
  for (int r = 0; r < ranks(); ++r) {
    EXPECT_LE(all[size_t(r)], whole / ranks() + chunk_bytes) << "rank " << r;
    std::printf("rank %d keeps %.3f of the optimizer state\n", r, all[size_t(r)] / whole);
  }
}

// A ZeRO checkpoint holds the whole state: it resumes on the ranks, with or without ZeRO, and
// on one process accumulating, each time bitwise the uninterrupted run.
TEST(DataParallel, AZeroCheckpointResumesOnAnyNumberOfRanks) {
  const fs::path whole = shared_folder() / "zero-whole", part = shared_folder() / "zero-part";
  RunConfig c = gpt_run("bf16", whole);
  c.train.optimizer_state = "f32";
  c.train.checkpoint_every = 4;
  c.train.parallel = {.communicator = world, .deterministic = true, .check_replicas = true,
                      .zero = 1};
  run_train(c);
  c.train.out_dir = part.string();
  int steps = 0;
  c.train.stop_requested = [&] { return ++steps == 4; };
  EXPECT_TRUE(run_train(c).stopped);
  if (rank() == 0) {
    fs::copy(part, shared_folder() / "zero-alone", fs::copy_options::recursive);
    fs::copy(part, shared_folder() / "zero-off", fs::copy_options::recursive);
  }
  quiet_barrier();
  c.train.stop_requested = {};
  c.train.resume = true;
  EXPECT_EQ(run_train(c).resumed_from, 4);
  c.train.out_dir = (shared_folder() / "zero-off").string();
  c.train.parallel.zero = 0;
  EXPECT_EQ(run_train(c).resumed_from, 4);
  if (rank() == 0) {
    EXPECT_EQ(differences(part / "model.safetensors", whole / "model.safetensors"), std::vector<std::string>{});
    EXPECT_EQ(differences(shared_folder() / "zero-off" / "model.safetensors", whole / "model.safetensors"), std::vector<std::string>{});
    c.train.out_dir = (shared_folder() / "zero-alone").string();
    c.train.parallel = {};
    c.train.grad_accum = ranks();
    EXPECT_EQ(run_train(c).resumed_from, 4);
    EXPECT_EQ(differences(shared_folder() / "zero-alone" / "model.safetensors", whole / "model.safetensors"), std::vector<std::string>{});
  }
  quiet_barrier();
}

// Notes the trainer gives (why a checkpoint was skipped).
class NoteTaker : public TrainObserver {
 public:
  void on_note(const std::string& text) override { notes += text + "\n"; }
  std::string notes;
};

// A ZeRO checkpoint is each rank's shard of the optimizer state and rank 0's file of the rest,
// which names every shard with its checksum. One whose shard is missing or is another one's is
// refused, and the run resumes from the checkpoint before it.
TEST(DataParallel, AZeroCheckpointWithAMissingOrForeignShardIsRefused) {
  const fs::path dir = shared_folder() / "zero-shards";
  RunConfig c = gpt_run("amp-bf16", dir);
  c.train.checkpoint_every = 4;
  c.train.parallel = {.communicator = world, .deterministic = true, .zero = 1};
  run_train(c);
  const std::string last = io::checkpoint_shard_file_name(8, ranks() - 1, ranks());
  if (rank() == 0) {
    for (int r = 0; r < ranks(); ++r) {
      EXPECT_TRUE(fs::exists(dir / io::checkpoint_shard_file_name(4, r, ranks()))) << r;
      EXPECT_TRUE(fs::exists(dir / io::checkpoint_shard_file_name(8, r, ranks()))) << r;
    }
    const fs::path missing = shared_folder() / "zero-shard-missing";
    const fs::path foreign = shared_folder() / "zero-shard-foreign";
    fs::copy(dir, missing, fs::copy_options::recursive);
    fs::copy(dir, foreign, fs::copy_options::recursive);
    fs::remove(missing / last);
    fs::copy_file(foreign / io::checkpoint_shard_file_name(4, ranks() - 1, ranks()),
                  foreign / last, fs::copy_options::overwrite_existing);
    for (const auto& [folder, why] :
         {std::pair{missing, " (rank " + std::to_string(ranks() - 1) + " of " +
                                 std::to_string(ranks()) + ") is missing"},
          std::pair{foreign, std::string(" does not match the checksum")}}) {
      NoteTaker notes;
      RunConfig alone = c;
      alone.train.out_dir = folder.string();
      alone.train.parallel = {};
      alone.train.grad_accum = ranks();
      alone.train.resume = true;
      alone.train.observer = &notes;
      EXPECT_EQ(run_train(alone).resumed_from, 4) << notes.notes;
      EXPECT_NE(notes.notes.find("its shard " + last + why), std::string::npos) << notes.notes;
    }
  }
  quiet_barrier();
}


// Batch norm's running statistics are averaged over the ranks once a step, where one process
// updates them once a micro-batch, so only the parameters are one process's bits.
TEST(DataParallel, DeterministicCnnParametersAreOneProcessAccumulating) {
  const Pair p = deterministic_pair(cnn_run("amp-bf16", ""), "cnn");
  if (rank() != 0) return;
  const auto ranks_tensors = tensors_of(p.ranks_dir / "model.safetensors", true);
  const auto alone_tensors = tensors_of(p.alone_dir / "model.safetensors", true);
  ASSERT_EQ(ranks_tensors.size(), alone_tensors.size());
  for (const auto& [name, bytes] : ranks_tensors)
    EXPECT_TRUE(bytes == alone_tensors.at(name)) << name << " differs";
  EXPECT_EQ(p.ranks.final_train_loss, p.alone.final_train_loss);
}

// An epoch of 89 images in batches of 8 ends with a batch of one: some ranks' shares of it are
// empty. They still take the step the others take (the replicas stay equal), and the run is
// still one process accumulating, bit for bit in its parameters.
TEST(DataParallel, AShortLastBatchLeavesSomeRanksEmptyHandedAndTheStepTheSame) {
  for (const int zero : {0, 1}) {
    SCOPED_TRACE(zero);
    RunConfig c = cnn_run("fp32", "");
    c.data = (shared_folder() / "images-short").string();
    c.train.steps = 0;
    c.train.epochs = 1;
    c.train.parallel.zero = zero;
    const Pair p = deterministic_pair(c, "short-batch-" + std::to_string(zero));
    EXPECT_EQ(p.ranks.steps, 12);
    if (rank() != 0) continue;
    EXPECT_EQ(differences(p.ranks_dir / "model.safetensors", p.alone_dir / "model.safetensors",
                          /*parameters_only=*/true),
              std::vector<std::string>{});
  }
}

// Without --deterministic the ranks reduce with MPI (f32) or in fp32 from bf16: the run is the
// one-process run with the same global batch up to the order of the sums (f32) or one bf16
// rounding of each gradient (bf16). (Without dropout, whose masks differ when a step has
// several micro-batches.)
TEST(DataParallel, RanksTrainToTheQualityOfOneProcess) {
  for (const char* reduce : {"f32", "bf16"}) {
    for (const char* precision : {"fp32", "amp-bf16"}) {
      SCOPED_TRACE(std::string(reduce) + " " + precision);
      const std::string name = std::string("quality-") + reduce + "-" + precision;
      RunConfig c = gpt_run(precision, shared_folder() / (name + "-ranks"));
      c.model.dropout = 0.0;
      c.train.parallel = {.communicator = world, .reduce_dtype = reduce, .check_replicas = true};
      const TrainResult together = run_train(c);
      EXPECT_EQ(together.reduce_dtype, reduce);
      if (rank() == 0) {
        c.train.out_dir = (shared_folder() / (name + "-alone")).string();
        c.train.parallel = {};
        const TrainResult alone = run_train(c);
        // Rounded once more in bf16 when it is on the wire or the backward's compute dtype.
        const bool bf16 = std::string(reduce) == "bf16" || std::string(precision) == "amp-bf16";
        const double rtol = test::tolerance(bf16 ? DType::bf16 : DType::f32, c.batch * 16).rtol;
        EXPECT_NEAR(together.final_eval_loss, alone.final_eval_loss,
                    rtol * std::fabs(alone.final_eval_loss))
            << "rtol " << rtol;
      }
      quiet_barrier();
    }
  }
}

// An overflow on one rank only: every rank skips that step, and all keep one scale.
TEST(DataParallel, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  RunConfig c = gpt_run("amp-fp16", shared_folder() / "overflow");
  c.train.parallel = {.communicator = world, .check_replicas = true};
  c.train.on_gradients = [](int64_t step, const std::vector<std::pair<std::string, Tensor*>>& ps) {
    if (step != 3 || rank() != ranks() - 1) return;
    Tensor g = ps.front().second->grad();
    Tensor poisoned = g.clone();
    poisoned.fill_(INFINITY);
    g.copy_(poisoned);
  };
  const TrainResult r = run_train(c);
  EXPECT_EQ(r.skipped_steps, 1);
  const std::vector<double> mine{r.final_loss_scale, double(r.skipped_steps)};
  std::vector<double> all(2 * size_t(ranks()));
  world->all_gather(std::span<const double>(mine), std::span(all));
  for (int k = 1; k < ranks(); ++k) {
    EXPECT_EQ(all[size_t(2 * k)], all[0]) << "the loss scale of rank " << k;
    EXPECT_EQ(all[size_t(2 * k + 1)], all[1]) << "the skipped steps of rank " << k;
  }
}

TEST(DataParallel, ADifferentConfigurationIsRefusedNamingTheRankAndTheSetting) {
  RunConfig c = gpt_run("fp32", shared_folder() / "mismatch");
  c.train.parallel = {.communicator = world};
  const int odd = ranks() - 1;
  if (rank() == odd) c.train.lr = 0.02;
  try {
    run_train(c);
    ADD_FAILURE() << "a run whose ranks differ started";
  } catch (const Error& e) {
    const std::string m = e.message();
    EXPECT_NE(m.find("rank " + std::to_string(odd)), std::string::npos) << m;
    if (rank() == odd) {
      EXPECT_NE(m.find("/train/lr is 0.02 here and 0.01 on rank 0"), std::string::npos) << m;
    }
  }
  EXPECT_FALSE(fs::exists(shared_folder() / "mismatch" / "run.json"));
  quiet_barrier();
}

TEST(DataParallel, ABatchTheRanksDoNotSplitIsRefusedNamingBoth) {
  RunConfig c = gpt_run("fp32", shared_folder() / "odd-batch");
  c.batch = 2 * ranks() + 1;
  c.train.parallel = {.communicator = world};
  try {
    run_train(c);
    ADD_FAILURE() << "a batch of " << c.batch << " was split";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("a global batch of " + std::to_string(c.batch) +
                               " samples does not split into " + std::to_string(ranks()) +
                               " processes"),
              std::string::npos)
        << e.message();
  }
  quiet_barrier();
}

// Stopped after 4 steps, a run resumes on every rank (bitwise the uninterrupted run) and on one
// process accumulating over as many micro-batches (bitwise too: the checkpoint is the same
// replicated state whatever the number of ranks, and so is the order of the samples).
TEST(DataParallel, ACheckpointResumesOnTheSameOrAnotherNumberOfRanks) {
  const fs::path whole = shared_folder() / "resume-whole", part = shared_folder() / "resume-part";
  RunConfig c = gpt_run("amp-bf16", whole);
  c.train.checkpoint_every = 4;
  c.train.parallel = {.communicator = world, .deterministic = true, .check_replicas = true};
  run_train(c);
  c.train.out_dir = part.string();
  int steps = 0;
  c.train.stop_requested = [&] { return ++steps == 4; };
  EXPECT_TRUE(run_train(c).stopped);
  if (rank() == 0) fs::copy(part, shared_folder() / "resume-alone", fs::copy_options::recursive);
  quiet_barrier();
  c.train.stop_requested = {};
  c.train.resume = true;
  const TrainResult again = run_train(c);
  EXPECT_EQ(again.resumed_from, 4);
  if (rank() == 0) {
    EXPECT_EQ(differences(part / "model.safetensors", whole / "model.safetensors"), std::vector<std::string>{});
    c.train.out_dir = (shared_folder() / "resume-alone").string();
    c.train.parallel = {};
    c.train.grad_accum = ranks();
    EXPECT_EQ(run_train(c).resumed_from, 4);
    EXPECT_EQ(differences(shared_folder() / "resume-alone" / "model.safetensors", whole / "model.safetensors"), std::vector<std::string>{});
  }
  quiet_barrier();
}

}  // namespace
}  // namespace mixp::train

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = mixp::dist::make_communicator();
  mixp::train::world = world.get();
  std::vector<int32_t> failed{RUN_ALL_TESTS() != 0 ? 1 : 0};
  world->all_reduce(std::span(failed), mixp::dist::ReduceOp::max);
  if (world->rank() == 0 && failed[0] == 0)
    std::filesystem::remove_all(mixp::train::shared_folder());
  world.reset();
  return failed[0];
}
