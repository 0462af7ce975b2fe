// The signals that stop `mixp train` and `mixp compare`.
#pragma once

namespace mixp::cli {

/// Handlers for SIGINT, SIGTERM, SIGHUP and SIGUSR1. The first signal is said on stderr at
/// once, and stop_signal() then returns it: the run finishes its step, writes a checkpoint and
/// exits 0. A second signal ends the process at once, with the signal's conventional status
/// (128 + its number); every file stays whole, since each is written to a temporary and renamed.
///
/// `under_mpirun`: a rank of a job that mpirun is ending. mpirun forwards SIGUSR1 to every rank
/// at once and lets the job finish; on SIGTERM it stops reading the ranks' output, sends them
/// SIGTERM after odls_base_sigkill_timeout seconds (1 by default) and SIGKILL as many seconds
/// later. So a signal also makes standard output and error non-blocking: a rank whose output
/// mpirun no longer reads loses that output instead of blocking before its checkpoint.
void install_stop_handlers(bool under_mpirun = false);
/// The first stop signal received, or 0.
int stop_signal();

}  // namespace mixp::cli
