// The signals that stop `mixp train` and `mixp compare`.
#pragma once

namespace mixp::cli {

/// Handlers for SIGINT, SIGTERM and SIGHUP. The first signal is said on stderr at once, and
/// stop_signal() then returns it: the run finishes its step, writes a checkpoint and exits 0.
/// A second signal ends the process at once, with the signal's conventional status (128 + its
/// number); every file stays whole, since each is written to a temporary and renamed.
void install_stop_handlers();
/// The first stop signal received, or 0.
int stop_signal();

}  // namespace mixp::cli
