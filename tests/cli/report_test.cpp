// Looking at runs after the fact: `mixp compare --from` rebuilds a comparison from finished
// folders, `mixp inspect --from` inspects a trained model, and `mixp report` writes one HTML
// file that a headless Chromium renders whole.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "cli/cli_fixture.h"
#include "mixp/io/checkpoint.h"

namespace mixp::cli_test {
namespace {

using nlohmann::json;
using test::slurp;

std::string deep_mlp(const fs::path& out, const std::string& more) {
  return "train --model deep-mlp --threads 1 --out '" + out.string() + "' " + more;
}

// Every file of a folder and its bytes: equal maps, an unchanged folder.
std::map<std::string, std::string> contents(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = slurp(e.path());
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(Cli, CompareFromRebuildsTheComparisonOfFinishedRuns) {
  const fs::path a = dir_ / "a", b = dir_ / "b", out = dir_ / "cmp";
  ASSERT_EQ(mixp(deep_mlp(a, "--steps 6 --precision amp-bf16")).status, 0);
  ASSERT_EQ(mixp(deep_mlp(b, "--steps 6 --precision fp32")).status, 0);
  const auto before_a = contents(a), before_b = contents(b);
  const CliResult r =
      mixp("compare --from '" + a.string() + "' '" + b.string() + "' --out '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("amp-bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speed and memory are relative to fp32"), std::string::npos) << r.out;
  const json doc = json::parse(slurp(out / "compare.json"));
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["baseline"], "fp32");
  EXPECT_EQ(doc["model"], "deep-mlp");
  const json summary_a = json::parse(slurp(a / "summary.json"));
  EXPECT_EQ(doc["runs"][0]["run_id"], summary_a["run_id"]);
  EXPECT_EQ(doc["runs"][0]["run_dir"], "../a");
  EXPECT_EQ(doc["runs"][1]["speed_vs_baseline"], 1.0);
  const std::string svg = slurp(out / "compare.svg");
  EXPECT_EQ(count(svg, "<path"), 2u);
  // Read only: the run folders are as they were.
  EXPECT_EQ(contents(a), before_a);
  EXPECT_EQ(contents(b), before_b);
  // The compare folder reports its runs, found through compare.json.
  const CliResult report = mixp("report '" + out.string() + "'");
  ASSERT_EQ(report.status, 0) << report.err;
  const std::string page = slurp(out / "report.html");
  EXPECT_NE(page.find(summary_a["run_id"].get<std::string>()), std::string::npos);
  EXPECT_NE(page.find(json::parse(slurp(b / "summary.json"))["run_id"].get<std::string>()),
            std::string::npos);

  // A folder that is not a finished run is an error naming it, before anything is written.
  const fs::path diverged = dir_ / "diverged", out2 = dir_ / "cmp2";
  EXPECT_EQ(mixp(deep_mlp(diverged, "--steps 30 --lr 1000")).status, 2);
  ASSERT_TRUE(fs::exists(diverged / "run.json"));
  const CliResult e = mixp("compare --from '" + a.string() + "' '" + diverged.string() +
                           "' --out '" + out2.string() + "'");
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find("not finished runs (no summary.json): " + diverged.string()),
            std::string::npos)
      << e.err;
  EXPECT_FALSE(fs::exists(out2));
  // Training flags do not go with --from.
  const CliResult f =
      mixp("compare --from '" + a.string() + "' --steps 3 --out '" + out2.string() + "'");
  EXPECT_EQ(f.status, 2);
  EXPECT_NE(f.err.find("--steps does not go with it"), std::string::npos) << f.err;
}

// The largest |value| of the tensors of `file` whose names start with `prefix`.
double max_abs(const fs::path& file, const std::string& prefix) {
  double m = 0.0;
  for (const auto& [name, t] : io::read_safetensors(file.string()).tensors)
    if (name.rfind(prefix, 0) == 0)
      for (double v : t.to_vector()) m = std::max(m, std::fabs(v));
  return m;
}

TEST_F(Cli, InspectFromATrainedRunLoadsItsWeightsAndLeavesItsFolder) {
  const fs::path run = dir_ / "run", out = dir_ / "inspect", again = dir_ / "again";
  ASSERT_EQ(mixp(deep_mlp(run, "--steps 6 --checkpoint-every 3 --precision fp32")).status, 0);
  const auto before = contents(run);
  CliResult r = mixp("inspect --from '" + run.string() + "' --out '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("trained weights from " + (run / "model.safetensors").string(), 0), 0u)
      << r.out;
  json doc = json::parse(slurp(out / "inspect.json"));
  EXPECT_EQ(doc["source"], (run / "model.safetensors").string());
  EXPECT_EQ(doc["precision"], "fp32");  // the run's
  EXPECT_EQ(doc["steps"], 0);           // the trained weights as they are
  // The probe saw the trained weights: its statistics of fc1 are those of the file's.
  ASSERT_EQ(doc["layers"][0]["layer"], "fc1");
  EXPECT_EQ(doc["layers"][0]["weights"]["max_abs"].get<double>(),
            max_abs(run / "model.safetensors", "fc1."));
  EXPECT_EQ(contents(run), before);

  // A checkpoint, under another preset and with more training.
  const fs::path checkpoint = run / io::checkpoint_file_name(3);
  r = mixp("inspect --from '" + checkpoint.string() + "' --precision amp-fp16 --steps 2 --out '" +
           again.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  doc = json::parse(slurp(again / "inspect.json"));
  EXPECT_EQ(doc["source"], checkpoint.string());
  EXPECT_EQ(doc["source_step"], 3);
  EXPECT_EQ(doc["precision"], "amp-fp16");
  EXPECT_EQ(doc["steps"], 2);
  EXPECT_EQ(contents(run), before);

  // Without training, the loss scale is the one the run ended with under its preset: at lr 1
  // deep-mlp's amp-fp16 run backs off from 2^16 within 6 steps.
  const fs::path scaled = dir_ / "scaled";
  ASSERT_EQ(
      mixp(deep_mlp(scaled, "--steps 6 --lr 1 --checkpoint-every 3 --precision amp-fp16")).status,
      0);
  const double final_scale =
      json::parse(slurp(scaled / "summary.json"))["final_loss_scale"].get<double>();
  ASSERT_LT(final_scale, 65536.0);
  const auto checkpoints = io::list_checkpoints(scaled.string());
  ASSERT_FALSE(checkpoints.empty());
  const fs::path scaled_checkpoint = checkpoints.back().second;  // the oldest
  const double checkpoint_scale =
      io::read_checkpoint(scaled_checkpoint.string()).state.get_real("scaler/scale");
  for (const auto& [from, scale] :
       {std::pair{scaled, final_scale}, std::pair{scaled_checkpoint, checkpoint_scale}}) {
    const fs::path at = dir_ / ("at-" + from.filename().string());
    ASSERT_EQ(mixp("inspect --from '" + from.string() + "' --out '" + at.string() + "'").status, 0);
    EXPECT_EQ(json::parse(slurp(at / "inspect.json"))["loss_scale"], scale) << from;
  }

  // A folder without a model or checkpoint, and flags that would describe another model.
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty);
  r = mixp("inspect --from '" + empty.string() + "' --out '" + (dir_ / "never").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(empty.string() + " holds no model.safetensors and no usable checkpoint"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_empty(empty));
  EXPECT_FALSE(fs::exists(dir_ / "never"));
  r = mixp("inspect --from '" + run.string() + "' --width 8");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--width does not go with --from"), std::string::npos) << r.err;
}

// What the page looks like to a browser: each figure kind, how many of its SVGs rendered with
// a size, and the script errors. Appended to a copy of the report, which has no script of its
// own.
constexpr const char* kRenderCheck = R"(<script>
const errors = [];
window.addEventListener('error', e => errors.push(e.message));
const kinds = ['loss-all', 'loss', 'loss-scale', 'grad-norm', 'memory-tag', 'memory-dtype',
               'numerics'];
const parts = kinds.map(kind => {
  const svgs = [...document.querySelectorAll('figure.' + kind + ' > svg')];
  const sized = svgs.filter(s => {
    const box = s.getBoundingClientRect();
    return box.width > 200 && box.height > 100;
  });
  return kind + ' ' + sized.length + '/' + svgs.length;
});
const out = document.createElement('pre');
out.id = 'render-check';
out.textContent = parts.join('; ') + '; errors ' + errors.length;
document.body.appendChild(out);
</script>)";

TEST_F(Cli, TheReportRendersInChromiumWithEveryPlot) {
  const CliResult version = mixp("--version");
  ASSERT_EQ(std::system("chromium --version > /dev/null 2>&1"), 0)
      << "chromium is missing: scripts/install-deps.sh installs it";
  const fs::path a = dir_ / "a", b = dir_ / "b", inspect = dir_ / "inspect",
                 diverged = dir_ / "diverged", html = dir_ / "report.html";
  ASSERT_EQ(mixp(deep_mlp(a, "--steps 6 --precision amp-fp16")).status, 0);
  ASSERT_EQ(mixp(deep_mlp(b, "--steps 6 --precision fp32")).status, 0);
  ASSERT_EQ(mixp(deep_mlp(diverged, "--steps 30 --lr 1000")).status, 2);
  ASSERT_EQ(mixp("inspect --model deep-mlp --steps 2 --threads 1 --out '" + inspect.string() + "'")
                .status,
            0);
  const CliResult r =
      mixp("report '" + a.string() + "' '" + b.string() + "' '" + diverged.string() + "' '" +
           inspect.string() + "' --out '" + html.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string page = slurp(html);

  // Self-contained: no script, stylesheet, font or image from anywhere.
  for (const char* outside : {"<script", "<link", "<img", "@import", "url(", "src="})
    EXPECT_EQ(page.find(outside), std::string::npos) << outside;
  EXPECT_EQ(std::regex_replace(page, std::regex("http://www.w3.org/2000/svg"), "").find("http"),
            std::string::npos);
  // The runs named by id, the version, the configuration and the unfinished run.
  for (const fs::path& run : {a, b})
    EXPECT_NE(page.find(json::parse(slurp(run / "summary.json"))["run_id"].get<std::string>()),
              std::string::npos);
  EXPECT_NE(page.find(json::parse(slurp(diverged / "run.json"))["run_id"].get<std::string>()),
            std::string::npos);
  EXPECT_NE(page.find("mixp " + version.out.substr(5, version.out.find('\n') - 5)),
            std::string::npos);
  EXPECT_NE(page.find("<td>train.precision</td>"), std::string::npos);
  EXPECT_EQ(count(page, "not finished"), 1u);

  const fs::path checked = dir_ / "checked.html", dom = dir_ / "dom.html", log = dir_ / "log";
  std::string with_check = page;
  with_check.insert(with_check.rfind("</body>"), kRenderCheck);
  std::ofstream(checked) << with_check;
  const std::string command =
      "chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 "
      "--window-size=1200,1600 --dump-dom 'file://" +
      checked.string() + "' > '" + dom.string() + "' 2> '" + log.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << slurp(log);
  const std::string rendered = slurp(dom);
  const std::smatch found = [&] {
    std::smatch m;
    std::regex_search(rendered, m, std::regex("<pre id=\"render-check\">([^<]*)</pre>"));
    return m;
  }();
  ASSERT_EQ(found.size(), 2u) << "the check did not run:\n" << slurp(log);
  // Three runs (one plot each, and all together), one inspect folder.
  EXPECT_EQ(found[1].str(),
            "loss-all 1/1; loss 3/3; loss-scale 1/1; grad-norm 1/1; memory-tag 1/1; "
            "memory-dtype 1/1; numerics 1/1; errors 0");
  // Chromium logs what the page writes to its console (errors included) as CONSOLE lines.
  const std::string browser_log = slurp(log);
  EXPECT_EQ(browser_log.find(":CONSOLE"), std::string::npos) << browser_log;
}

TEST_F(Cli, TheReportRefusesAFolderOfNoKnownKind) {
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty);
  const CliResult r = mixp("report '" + empty.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(empty.string() + " is not a run folder"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(empty / "report.html"));
}

}  // namespace
}  // namespace mixp::cli_test
