// mixp report: run, compare and inspect folders in one self-contained HTML file.
#include <CLI/CLI.hpp>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/train/html_report.h"

namespace mixp::cli {

void add_report_flags(CLI::App& command, ReportCommandOptions& o) {
  command
      .add_option("folders", o.folders,
                  "run folders (finished or not), compare folders (their runs) and inspect "
                  "folders")
      ->required();
  command.add_option("--out", o.out, "the HTML file (default: report.html in the first folder)");
}

int run_report_command(const ReportCommandOptions& o, std::FILE* out) {
  MIXP_CHECK(!o.folders.empty(), "report: name at least one folder");
  const std::string path = o.out.empty() ? o.folders.front() + "/report.html" : o.out;
  train::write_html_report(o.folders, path);
  std::fprintf(out, "wrote %s\n", path.c_str());
  return 0;
}

}  // namespace mixp::cli
