// mixp/train/html_report.h — `mixp report`: one self-contained HTML file to look at runs.
//
// The file needs no server and nothing from the network: the plots are inline SVG
// (mixp/diag/svg.h), the style inline CSS, and there are no scripts, fonts or images. It holds,
// for the folders given:
//   - a table of the runs: folder, run id, mixp version, model, precision, whether the run
//     finished, steps, final losses, accuracy or bits per character, speed, peak memory, loss
//     scale and skipped steps; with several finished runs, speed and memory as ratios to a
//     baseline (fp32 when there, else the first), as `mixp compare` prints them;
//   - per run, the training loss (a line per metrics window) and the evaluation loss (a marker
//     per evaluation), with the windows that skipped steps or had a non-finite loss shaded;
//     with several runs, every run's curves in one plot as well;
//   - the loss scale (log2) over the steps, with the skipped steps shaded, and the gradient
//     norm before clipping;
//   - peak memory by tag and by dtype (summary.json's peak_memory_bytes and
//     peak_memory_by_dtype_bytes), a bar per run;
//   - per inspect folder, the per-layer numerics of `mixp inspect` (inspect.json's table and
//     activation_gradients.svg);
//   - each run's configuration, one column per run.
//
// A folder may be a run folder (summary.json when finished; run.json and metrics.jsonl of a run
// that stopped or diverged, shown as not finished), a compare folder (compare.json: its runs),
// or an inspect folder (inspect.json). Anything else is a mixp::Error naming it.
//
// Example:
//
//   mixp::train::write_html_report({"runs/compare-cnn"}, "runs/compare-cnn/report.html");
#pragma once

#include <string>
#include <vector>

namespace mixp::train {

/// The HTML text of the report of `folders` (see above). Throws mixp::Error naming a folder
/// that is none of the kinds above or whose files do not read.
std::string html_report(const std::vector<std::string>& folders);

/// Writes html_report(folders) to `path` atomically.
void write_html_report(const std::vector<std::string>& folders, const std::string& path);

}  // namespace mixp::train
