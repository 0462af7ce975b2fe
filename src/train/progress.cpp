// ProgressPrinter: the bar or the plain lines of `mixp train`.
#include "mixp/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace mixp::train {
namespace {

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = int64_t(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

}  // namespace

std::string eval_line(const EvalMetrics& e) {
  char buf[160];
  if (e.accuracy)
    std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4f accuracy %.2f%%", (long long)e.step,
                  e.loss, 100.0 * *e.accuracy);
  else if (e.bits_per_char)
    std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4f bits/char %.4f", (long long)e.step,
                  e.loss, *e.bits_per_char);
  else
    std::snprintf(buf, sizeof buf, "eval step %lld: loss %.4g", (long long)e.step, e.loss);
  return buf;
}

ProgressPrinter::ProgressPrinter(std::FILE* out, Progress mode) : out_(out), mode_(mode) {
  if (mode_ == Progress::automatic)
    mode_ = out_ && ::isatty(::fileno(out_)) ? Progress::bar : Progress::lines;
}

void ProgressPrinter::line(const std::string& text) {
  if (!out_) return;
  if (drawn_) std::fputs("\r\033[K", out_);
  drawn_ = false;
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void ProgressPrinter::on_start(const std::string& model, const std::string& precision,
                               int64_t total_steps, int64_t first_step) {
  std::string text =
      "train " + model + " (" + precision + "): " + std::to_string(total_steps) + " steps";
  if (first_step > 0) text += ", resumed at step " + std::to_string(first_step);
  line(text);
}

void ProgressPrinter::on_step(int64_t step, int64_t total, double loss, double samples_per_s,
                              double scale, double eta_s, const StepMetrics* metrics) {
  if (!out_) return;
  if (mode_ == Progress::bar) {
    constexpr int kWidth = 24;
    const int filled = int(double(kWidth) * double(step) / double(std::max<int64_t>(1, total)));
    std::string bar(size_t(filled), '#');
    bar.append(size_t(kWidth - filled), '.');
    std::fprintf(out_, "\r[%s] step %lld/%lld loss %.4f %.0f samples/s scale %g ETA %s\033[K",
                 bar.c_str(), (long long)step, (long long)total, metrics ? metrics->loss : loss,
                 samples_per_s, scale, duration_text(eta_s).c_str());
    std::fflush(out_);
    drawn_ = true;
  } else if (metrics) {
    std::fprintf(out_, "step %lld/%lld loss %.4f samples/s %.1f scale %g eta %s\n", (long long)step,
                 (long long)total, metrics->loss, samples_per_s, scale,
                 duration_text(eta_s).c_str());
    std::fflush(out_);
  }
}

void ProgressPrinter::on_eval(const EvalMetrics& eval) { line(eval_line(eval)); }

void ProgressPrinter::on_note(const std::string& text) { line(text); }

void ProgressPrinter::on_sample(int64_t step, const std::string& text) {
  // A prompt of "\n" already starts the text on a line of its own.
  line("sample at step " + std::to_string(step) + ":" + (text.starts_with('\n') ? "" : "\n") +
       text);
}

void ProgressPrinter::on_finish(const TrainResult& r) {
  if (r.stopped) {
    line("stopped at step " + std::to_string(r.steps) + ": checkpoint " + r.last_checkpoint);
    return;
  }
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "done: %lld steps, train loss %.4f, eval loss %.4f, %.1f samples/s, %lld skipped, "
                "loss scale %g",
                (long long)r.steps, r.final_train_loss, r.final_eval_loss, r.samples_per_s,
                (long long)r.skipped_steps, r.final_loss_scale);
  line(buf);
}

}  // namespace mixp::train
