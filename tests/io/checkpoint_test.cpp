// Checkpoint files: format version 2 with a run id and a crc32 per tensor, verified at read;
// a newer version refused naming both; pruning and the newest checkpoint by run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "support/scratch.h"

namespace mixp {
namespace {

namespace fs = std::filesystem;

class Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_path("mixp_checkpoint_test_");
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static StateDict state(double value) {
    StateDict s;
    s.tensors["model/param/w"] = full({2, 3}, value);
    s.tensors["optimizer.0/exp_avg/0"] = full({2, 3}, value / 2);
    s.set_int("trainer/step", 7);
    s.set_real("scaler/scale", 65536.0);
    return s;
  }
  // Rewrites the file at `path` with `change` applied to its tensors and metadata, as a
  // damaged disk or an older or newer writer would leave it.
  static void rewrite(const std::string& path,
                      const std::function<void(io::SafetensorsFile&)>& change) {
    io::SafetensorsFile f = io::read_safetensors(path);
    change(f);
    io::write_safetensors(path, {f.tensors.begin(), f.tensors.end()}, f.metadata);
  }
  fs::path dir_;
};

TEST_F(Checkpoints, ReadBackTheStateTheyWereWrittenWith) {
  const std::string path =
      io::write_checkpoint(dir_.string(), 7, "run-a", state(1.5), {{"config", "{}"}});
  const io::Checkpoint c = io::read_checkpoint(path);
  EXPECT_EQ(c.version, io::kCheckpointVersion);
  EXPECT_EQ(c.run_id, "run-a");
  EXPECT_EQ(c.step, 7);
  EXPECT_EQ(c.state.get_int("trainer/step"), 7);
  EXPECT_EQ(c.state.get_real("scaler/scale"), 65536.0);
  EXPECT_EQ(c.state.tensor("model/param/w").to_vector(), std::vector<double>(6, 1.5));
  EXPECT_EQ(c.file.metadata.at("config"), "{}");
  EXPECT_EQ(io::checkpoint_run_id(path), "run-a");
}

// A checkpoint in shards: each rank's file, then the checkpoint naming them; pruned together,
// and the shards of a checkpoint never written with them.
TEST_F(Checkpoints, ShardsAreReadThroughTheirManifestAndPrunedWithTheirCheckpoint) {
  const auto write = [&](int64_t step) {
    nlohmann::json manifest = nlohmann::json::array();
    for (int r = 0; r < 2; ++r) {
      const uint32_t crc =
          io::write_checkpoint_shard(dir_.string(), step, "run-a", r, 2, state(double(r)));
      manifest.push_back({{"file", io::checkpoint_shard_file_name(step, r, 2)}, {"crc32", crc}});
    }
    return io::write_checkpoint(dir_.string(), step, "run-a", state(9.0),
                                {{"shards", manifest.dump()}}, /*keep=*/1);
  };
  write(4);
  // A crash after the shards of step 6, before its checkpoint: strays for the next write.
  io::write_checkpoint_shard(dir_.string(), 6, "run-a", 0, 2, state(0.0));
  const std::string path = write(8);
  const std::vector<io::Checkpoint> shards = io::read_checkpoint_shards(io::read_checkpoint(path));
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[1].state.tensor("model/param/w").to_vector(), std::vector<double>(6, 1.0));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  const std::vector<std::string> want{io::checkpoint_file_name(8),
                                      io::checkpoint_shard_file_name(8, 0, 2),
                                      io::checkpoint_shard_file_name(8, 1, 2)};
  EXPECT_EQ(names, want);
  EXPECT_EQ(io::list_checkpoints(dir_.string()).size(), 1u) << "shards are not checkpoints";
}

TEST_F(Checkpoints, ChangedTensorBytesOrValuesAreFoundNamingWhat) {
  const std::string path = io::write_checkpoint(dir_.string(), 7, "run-a", state(1.5), {});
  rewrite(path, [](io::SafetensorsFile& f) {
    std::vector<double> v = f.tensors.at("optimizer.0/exp_avg/0").to_vector();
    v[4] = 0.0;
    f.tensors["optimizer.0/exp_avg/0"] = from_values(v, {2, 3});
  });
  try {
    (void)io::read_checkpoint(path);
    FAIL() << "a changed tensor read";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("tensor 'optimizer.0/exp_avg/0' is corrupt"), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find(path), std::string::npos) << e.message();
  }
  const std::string other = io::write_checkpoint(dir_.string(), 8, "run-a", state(1.5), {});
  rewrite(other, [](io::SafetensorsFile& f) {
    const std::string values = f.metadata.at("state");
    const size_t at = values.find("65536");
    f.metadata["state"] = values.substr(0, at) + "65537" + values.substr(at + 5);
  });
  EXPECT_THROW((void)io::read_checkpoint(other), Error);
}

TEST_F(Checkpoints, ANewerVersionIsRefusedNamingBothVersions) {
  const std::string path = io::write_checkpoint(dir_.string(), 7, "run-a", state(1.5), {});
  rewrite(path, [](io::SafetensorsFile& f) { f.metadata["version"] = "3"; });
  try {
    (void)io::read_checkpoint(path);
    FAIL() << "a newer version read";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("format version 3 is newer than this mixp reads (version 2)"),
              std::string::npos)
        << e.message();
  }
  rewrite(path, [](io::SafetensorsFile& f) { f.metadata["version"] = "two"; });
  EXPECT_THROW((void)io::read_checkpoint(path), Error);
}

TEST_F(Checkpoints, PruningAndTheNewestConsiderOnlyTheirRun) {
  io::write_checkpoint(dir_.string(), 100, "other", state(9), {});
  io::write_checkpoint(dir_.string(), 200, "other", state(9), {});
  for (int step = 1; step <= 4; ++step)
    io::write_checkpoint(dir_.string(), step, "mine", state(step), {}, /*keep=*/2);
  std::vector<int64_t> steps;
  for (const auto& [step, path] : io::list_checkpoints(dir_.string())) steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<int64_t>{200, 100, 4, 3}));
  std::string skipped;
  const auto c = io::read_newest_checkpoint(
      dir_.string(), "mine", {}, [&](const std::string& why) { skipped += why + "\n"; });
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 4);
  EXPECT_NE(skipped.find("checkpoint-00000200.safetensors: it belongs to another run"),
            std::string::npos)
      << skipped;
}

}  // namespace
}  // namespace mixp
