// mixp report: runs, compare and inspect folders read back into one self-contained HTML file.
#include "mixp/train/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "mixp/diag/svg.h"
#include "mixp/error.h"
#include "mixp/io/safetensors.h"
#include "mixp/train/run.h"
#include "train/report.h"

namespace mixp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ReportRun {
  std::string folder;
  std::string label;  // the precision, or the folder's name when runs share a precision
  bool finished = false;
  TrainResult result;
  std::string mixp_version;
  json config;
};

struct ReportInspect {
  std::string folder{};
  json inspect{};
  std::string histogram_svg{};  // activation_gradients.svg, when there
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  MIXP_CHECK(in, "cannot read ", path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json(const fs::path& path) {
  const json j = json::parse(slurp(path), nullptr, /*allow_exceptions=*/false);
  MIXP_CHECK(j.is_object(), path.string(), " is not a JSON object");
  return j;
}

// An SVG file's text without its XML declaration, to sit inside HTML.
std::string inline_svg(const std::string& svg) {
  const size_t open = svg.find("<svg");
  return open == std::string::npos ? std::string() : svg.substr(open);
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return "&mdash;";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string general(double v) {
  if (!std::isfinite(v)) return "&mdash;";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// Model and precision of a configuration: a RunConfig's ({"model": {"name"}, "train": {...}})
// or the trainer's own options ({"model": "name", "precision"}).
void describe_from_config(TrainResult& r, const json& config) {
  if (!config.is_object()) return;
  const json& model = config.value("model", json());
  if (model.is_string()) r.model_name = model.get<std::string>();
  if (model.is_object()) r.model_name = model.value("name", std::string());
  const json& train = config.contains("train") ? config["train"] : config;
  if (train.is_object()) r.precision = train.value("precision", std::string());
}

// A run that has not finished: run.json and what metrics.jsonl logged.
ReportRun read_unfinished_run(const fs::path& folder) {
  ReportRun run;
  run.folder = folder.string();
  const json about = read_json(folder / "run.json");
  run.config = about.value("config", json());
  run.mixp_version = about.value("mixp_version", std::string());
  TrainResult& r = run.result;
  r.run_id = about.value("run_id", std::string());
  describe_from_config(r, run.config);
  try {
    r.task = task_of(r.model_name);
  } catch (const Error&) {
    r.task = nn::Task::classification;  // a model the built-in list does not know
  }
  if (fs::exists(folder / "metrics.jsonl")) {
    MetricsFile metrics = read_metrics((folder / "metrics.jsonl").string());
    r.log = std::move(metrics.log);
    r.evals = std::move(metrics.evals);
  }
  if (!r.log.empty()) {
    r.steps = r.log.back().step;
    r.final_train_loss = r.log.back().loss;
    r.final_loss_scale = r.log.back().scale;
    for (const StepMetrics& m : r.log) r.skipped_steps += m.skipped;
  }
  if (!r.evals.empty()) {
    r.final_eval_loss = r.evals.back().loss;
    r.test_accuracy = r.evals.back().accuracy;
    r.bits_per_char = r.evals.back().bits_per_char;
  }
  return run;
}

ReportRun read_run(const fs::path& folder) {
  if (!fs::exists(folder / "summary.json")) return read_unfinished_run(folder);
  ReportRun run;
  run.folder = folder.string();
  run.finished = true;
  run.result = read_finished_run(folder.string());
  const json summary = read_json(folder / "summary.json");
  run.config = summary.value("config", json());
  run.mixp_version = summary.value("mixp_version", std::string());
  return run;
}

bool is_run_folder(const fs::path& folder) {
  return fs::exists(folder / "summary.json") || fs::exists(folder / "run.json");
}

// Every folder given, sorted into runs and inspections.
void read_folders(const std::vector<std::string>& folders, std::vector<ReportRun>& runs,
                  std::vector<ReportInspect>& inspections) {
  for (const std::string& name : folders) {
    const fs::path folder(name);
    if (is_run_folder(folder)) {
      runs.push_back(read_run(folder));
    } else if (fs::exists(folder / "compare.json")) {
      const json doc = read_json(folder / "compare.json");
      for (const json& entry : doc.value("runs", json::array())) {
        const fs::path run = folder / entry.value("run_dir", std::string());
        if (is_run_folder(run)) runs.push_back(read_run(run));
      }
    } else if (fs::exists(folder / "inspect.json")) {
      ReportInspect inspection{.folder = name, .inspect = read_json(folder / "inspect.json")};
      if (fs::exists(folder / "activation_gradients.svg"))
        inspection.histogram_svg = inline_svg(slurp(folder / "activation_gradients.svg"));
      inspections.push_back(std::move(inspection));
    } else {
      MIXP_CHECK(false, name,
                 " is not a run folder (summary.json or run.json), a compare folder "
                 "(compare.json) or an inspect folder (inspect.json)");
    }
  }
  std::map<std::string, int> precisions;
  for (const ReportRun& run : runs) ++precisions[run.result.precision];
  for (ReportRun& run : runs) {
    fs::path folder = fs::path(run.folder).lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();
    run.label = precisions[run.result.precision] > 1 || run.result.precision.empty()
                    ? folder.filename().string()
                    : run.result.precision;
  }
}

const ReportRun* baseline_of(const std::vector<ReportRun>& runs) {
  const ReportRun* base = nullptr;
  for (const ReportRun& run : runs) {
    if (!run.finished || !run.result.peak_memory.count("total")) continue;
    if (!base || (run.result.precision == "fp32" && base->result.precision != "fp32")) base = &run;
  }
  return base;
}

std::string runs_table(const std::vector<ReportRun>& runs) {
  const ReportRun* base = runs.size() > 1 ? baseline_of(runs) : nullptr;
  std::string s =
      "<table class=\"runs\"><tr><th>run</th><th>folder</th><th>run id</th><th>mixp</th>"
      "<th>model</th><th>precision</th><th>status</th><th>steps</th><th>train loss</th>"
      "<th>eval loss</th><th>accuracy / bits per char</th><th>ms/step</th><th>samples/s</th>"
      "<th>peak MiB</th><th>loss scale</th><th>skipped</th>";
  if (base) s += "<th>speed</th><th>memory</th>";
  s += "</tr>\n";
  for (const ReportRun& run : runs) {
    const TrainResult& r = run.result;
    const std::string metric = r.test_accuracy   ? fixed(100 * *r.test_accuracy, 2) + "%"
                               : r.bits_per_char ? fixed(*r.bits_per_char, 4) + " bits"
                                                 : "&mdash;";
    const double peak =
        r.peak_memory.count("total") ? double(r.peak_memory.at("total")) / (1 << 20) : NAN;
    s += "<tr><td>" + diag::escape_xml(run.label) + "</td><td>" + diag::escape_xml(run.folder) +
         "</td><td><code>" + diag::escape_xml(r.run_id) + "</code></td><td>" +
         diag::escape_xml(run.mixp_version) + "</td><td>" + diag::escape_xml(r.model_name) +
         "</td><td>" + diag::escape_xml(r.precision) + "</td><td>" +
         (run.finished ? "finished" : "<span class=\"bad\">not finished</span>") + "</td><td>" +
         std::to_string(r.steps) + "</td><td>" + general(r.final_train_loss) + "</td><td>" +
         (r.evals.empty() ? "&mdash;" : general(r.final_eval_loss)) + "</td><td>" + metric +
         "</td><td>" + (run.finished ? fixed(r.median_step_ms, 2) : "&mdash;") + "</td><td>" +
         (run.finished ? fixed(r.samples_per_s, 1) : "&mdash;") + "</td><td>" + fixed(peak, 1) +
         "</td><td>" + general(r.final_loss_scale) + "</td><td>" + std::to_string(r.skipped_steps) +
         "</td>";
    if (base) {
      const bool comparable = run.finished && r.peak_memory.count("total");
      const double speed = r.samples_per_s / base->result.samples_per_s;
      const double memory = comparable ? double(r.peak_memory.at("total")) /
                                             double(base->result.peak_memory.at("total"))
                                       : NAN;
      s += "<td>" + (comparable ? fixed(speed, 2) + "&times;" : "&mdash;") + "</td><td>" +
           (comparable ? fixed(memory, 2) + "&times;" : "&mdash;") + "</td>";
    }
    s += "</tr>\n";
  }
  s += "</table>\n";
  if (base)
    s += "<p class=\"note\">speed (samples/s) and memory (peak total) are relative to " +
         diag::escape_xml(base->label) + ".</p>\n";
  return s;
}

// A plot and its caption; `kind` (its class) lets a reader find the plots of one kind.
std::string figure(const std::string& kind, const std::string& svg, const std::string& caption) {
  return "<figure class=\"" + kind + "\">" + inline_svg(svg) + "<figcaption>" +
         diag::escape_xml(caption) + "</figcaption></figure>\n";
}

std::string loss_section(const std::vector<ReportRun>& runs) {
  std::string s = "<h2>Loss</h2>\n";
  if (runs.size() > 1) {
    std::vector<diag::Curve> all;
    for (const ReportRun& run : runs)
      for (diag::Curve& c : loss_curves(run.result, run.label + " ")) all.push_back(std::move(c));
    diag::PlotOptions options = loss_plot_options(runs.front().result);
    options.spans.clear();
    options.title = "every run: training loss and evaluation loss (markers)";
    options.width = 1000;
    options.log_y = diag::spans_decades(all);
    s += figure("loss-all", diag::line_plot_svg(all, options), "All runs together.");
  }
  s += "<div class=\"grid\">\n";
  for (const ReportRun& run : runs) {
    diag::PlotOptions options = loss_plot_options(run.result);
    options.title = run.label + ": " + run.result.model_name + " (" + run.result.precision + ")";
    s += figure("loss", diag::line_plot_svg(loss_curves(run.result, ""), options),
                run.label + ": the training loss is the mean of each window of " +
                    "logged steps; shaded windows skipped steps or had a non-finite loss.");
  }
  return s + "</div>\n";
}

// The loss scale as log2, and the gradient norm before clipping, every run in one plot each.
std::string scale_section(const std::vector<ReportRun>& runs) {
  std::vector<diag::Curve> scales, norms;
  std::vector<diag::Span> skipped;
  bool any_norm = false;
  for (const ReportRun& run : runs) {
    diag::Curve scale{.label = run.label}, norm{.label = run.label};
    for (const StepMetrics& m : run.result.log) {
      scale.x.push_back(double(m.step));
      scale.y.push_back(m.scale > 0 ? std::log2(m.scale) : NAN);
      norm.x.push_back(double(m.step));
      norm.y.push_back(m.grad_norm.value_or(NAN));
      any_norm = any_norm || m.grad_norm.has_value();
    }
    scales.push_back(std::move(scale));
    norms.push_back(std::move(norm));
    for (diag::Span span : step_spans(run.result)) {
      if (span.kind != diag::SpanKind::skipped_steps) continue;
      if (runs.size() > 1) span.label = run.label + ", " + span.label;
      skipped.push_back(std::move(span));
    }
  }
  std::string s = "<h2>Loss scale and gradient norm</h2>\n";
  s += figure("loss-scale",
              diag::line_plot_svg(scales, {.title = "loss scale",
                                           .x_label = "step",
                                           .y_label = "log2 of the loss scale",
                                           .width = 1000,
                                           .height = 360,
                                           .spans = skipped}),
              "The loss scale at each logged step (1, that is 2^0, without loss scaling); "
              "shaded: windows with skipped steps.");
  if (!any_norm)  // runs from before metrics.jsonl recorded it
    return s + "<p>These runs' metrics.jsonl records no gradient norms.</p>\n";
  s += figure("grad-norm",
              diag::line_plot_svg(norms, {.title = "gradient norm before clipping",
                                          .x_label = "step",
                                          .y_label = "total gradient norm (window mean)",
                                          .width = 1000,
                                          .height = 360,
                                          .log_y = diag::spans_decades(norms)}),
              "The mean total gradient norm of each window's steps whose norm was finite.");
  return s;
}

std::string memory_section(const std::vector<ReportRun>& runs) {
  std::vector<std::string> tags, dtypes;
  std::set<std::string> seen_dtypes;
  for (const ReportRun& run : runs) {
    for (const auto& [tag, bytes] : run.result.peak_memory)
      if (tag != "total" && bytes > 0 && std::find(tags.begin(), tags.end(), tag) == tags.end())
        tags.push_back(tag);
    for (const auto& [dtype, bytes] : run.result.peak_memory_by_dtype)
      if (seen_dtypes.insert(dtype).second) dtypes.push_back(dtype);
  }
  std::string s = "<h2>Peak memory</h2>\n";
  if (tags.empty())
    return s + "<p class=\"note\">No run recorded its memory (finished runs do).</p>\n";
  std::vector<diag::BarSeries> by_tag, by_dtype;
  for (const ReportRun& run : runs) {
    if (run.result.peak_memory.empty()) continue;
    diag::BarSeries tag_bars{.label = run.label}, dtype_bars{.label = run.label};
    for (const std::string& tag : tags) {
      const auto it = run.result.peak_memory.find(tag);
      tag_bars.values.push_back(
          it == run.result.peak_memory.end() ? 0.0 : double(it->second) / (1 << 20));
    }
    for (const std::string& dtype : dtypes) {
      const auto it = run.result.peak_memory_by_dtype.find(dtype);
      dtype_bars.values.push_back(
          it == run.result.peak_memory_by_dtype.end() ? 0.0 : double(it->second) / (1 << 20));
    }
    by_tag.push_back(std::move(tag_bars));
    by_dtype.push_back(std::move(dtype_bars));
  }
  s += figure("memory-tag",
              diag::bar_chart_svg(
                  tags, by_tag,
                  {.title = "peak memory by tag", .x_label = "MiB", .width = 1000, .height = 200}),
              "Each tag's own peak over the run (the peaks of different tags need not coincide).");
  if (dtypes.empty())
    return s + "<p class=\"note\">These runs' summaries predate memory by dtype.</p>\n";
  return s +
         figure(
             "memory-dtype",
             diag::bar_chart_svg(
                 dtypes, by_dtype,
                 {.title = "peak memory by dtype", .x_label = "MiB", .width = 1000, .height = 150}),
             "Each dtype's own peak over the run: low-precision tensors take their own "
             "bytes.");
}

// inspect.json's numbers: NaN where one is missing or null (a NaN or an infinity written).
double number(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

int64_t count_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}

std::string text(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::string safe_scale(const json& k) {
  if (!k.is_object() || !k.contains("exponent") || !k["exponent"].is_number_integer())
    return "&mdash;";
  return "2<sup>" + std::to_string(k["exponent"].get<int>()) + "</sup>";
}

std::string percent(double f) { return fixed(100 * f, 2) + "%"; }

std::string inspection_section(const ReportInspect& in) {
  const json& j = in.inspect;
  std::string s =
      "<h3>" + diag::escape_xml(text(j, "model")) + " under " +
      diag::escape_xml(text(j, "precision")) + " (" + diag::escape_xml(in.folder) + ")</h3>\n<p>" +
      std::to_string(count_of(j, "steps")) + " training steps" +
      (j.contains("source") ? ", weights from " + diag::escape_xml(text(j, "source")) : "") +
      "; loss " + general(number(j, "loss")) + " at loss scale " +
      general(number(j, "loss_scale")) +
      ". Activation gradients of an fp32 probe step, against fp16:</p>\n";
  s += "<table class=\"numerics\"><tr><th>layer</th><th>values</th><th>min |g|</th>"
       "<th>max |g|</th><th>fp16 zero, unscaled</th><th>fp16 zero at the loss scale</th>"
       "<th>keeps 99.9% from</th><th>no overflow up to</th></tr>\n";
  json layers = j.contains("layers") && j["layers"].is_array() ? j["layers"] : json::array();
  if (j.contains("all")) layers.push_back(j["all"]);
  for (const json& l : layers) {
    const json g = l.contains("activation_gradients") ? l["activation_gradients"] : json::object();
    s += "<tr><td>" + diag::escape_xml(text(l, "layer")) + "</td><td>" +
         std::to_string(count_of(g, "count")) + "</td><td>" + general(number(g, "min_abs")) +
         "</td><td>" + general(number(g, "max_abs")) + "</td><td>" +
         percent(number(l, "fp16_underflow_unscaled")) + "</td><td>" +
         percent(number(l, "fp16_underflow_at_loss_scale")) + "</td><td>" +
         safe_scale(l.value("smallest_safe_loss_scale", json())) + "</td><td>" +
         safe_scale(l.value("largest_safe_loss_scale", json())) + "</td></tr>\n";
  }
  s += "</table>\n";
  if (j.contains("advice") && j["advice"].is_array())
    for (const json& a : j["advice"])
      s += "<p class=\"bad\">keep " + diag::escape_xml(text(a, "layer")) +
           " in higher precision: " + diag::escape_xml(text(a, "reason")) + "</p>\n";
  if (!in.histogram_svg.empty())
    s += "<figure class=\"numerics\">" + in.histogram_svg +
         "<figcaption>Every layer's activation gradients per binade, over fp16's range."
         "</figcaption></figure>\n";
  return s;
}

// "a.b.c" = value rows of a JSON object, arrays as their JSON text.
void flatten(const json& j, const std::string& prefix, std::vector<std::string>& keys,
             std::map<std::string, std::string>& values) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [key, value] : j.items())
      flatten(value, prefix.empty() ? key : prefix + "." + key, keys, values);
    return;
  }
  if (std::find(keys.begin(), keys.end(), prefix) == keys.end()) keys.push_back(prefix);
  values[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
}

std::string config_section(const std::vector<ReportRun>& runs) {
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> values(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) flatten(runs[i].config, "", keys, values[i]);
  std::string s = "<h2>Configuration</h2>\n<table class=\"config\"><tr><th>setting</th>";
  for (const ReportRun& run : runs) s += "<th>" + diag::escape_xml(run.label) + "</th>";
  s += "</tr>\n";
  for (const std::string& key : keys) {
    bool differs = false;
    for (size_t i = 1; i < runs.size(); ++i) differs = differs || values[i][key] != values[0][key];
    s += std::string(differs ? "<tr class=\"differs\">" : "<tr>") + "<td>" + diag::escape_xml(key) +
         "</td>";
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto it = values[i].find(key);
      s += "<td>" +
           (it == values[i].end() ? std::string("&mdash;") : diag::escape_xml(it->second)) +
           "</td>";
    }
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}"
    "h3{font-size:15px}p{font-size:14px}table{border-collapse:collapse;font-size:11px;margin:8px 0}"
    "th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f3f3f3}"
    "td{font-variant-numeric:tabular-nums}figure{margin:12px 0}"
    "figcaption{font-size:12px;color:#555}svg{max-width:100%;height:auto}"
    ".bad{color:#b00020}.note{font-size:12px;color:#555}tr.differs td{background:#fff6d6}"
    "code{font-size:11px}.grid{display:grid;grid-template-columns:1fr 1fr;gap:8px}";

}  // namespace

std::string html_report(const std::vector<std::string>& folders) {
  MIXP_CHECK(!folders.empty(), "report: no folders given");
  std::vector<ReportRun> runs;
  std::vector<ReportInspect> inspections;
  read_folders(folders, runs, inspections);
  std::string title = "mixp report";
  if (runs.size() == 1) title += ": " + runs.front().label + " (" + runs.front().folder + ")";
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                  diag::escape_xml(title) + "</title><style>" + kStyle +
                  "</style></head><body>\n<h1>" + diag::escape_xml(title) +
                  "</h1>\n<p class=\"note\">Written by mixp " + version() + ".</p>\n";
  if (!runs.empty()) {
    s += "<h2>Runs</h2>\n" + runs_table(runs) + loss_section(runs) + scale_section(runs) +
         memory_section(runs);
  }
  if (!inspections.empty()) {
    s += "<h2>Per-layer numerics</h2>\n";
    for (const ReportInspect& in : inspections) s += inspection_section(in);
  }
  if (!runs.empty()) s += config_section(runs);
  return s + "</body></html>\n";
}

void write_html_report(const std::vector<std::string>& folders, const std::string& path) {
  io::write_file_atomically(path, html_report(folders));
}

}  // namespace mixp::train
