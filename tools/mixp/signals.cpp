// Stop signals: the first asks the run to stop after its step, a second ends it at once.
#include "signals.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <csignal>
#include <initializer_list>

namespace mixp::cli {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_under_mpirun = 0;

// fcntl(2) is async-signal-safe.
void stop_blocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void say(const char* text) {
  // write(2) is async-signal-safe; what it fails to write is lost, which is harmless here.
  if (::write(STDERR_FILENO, text, ::strlen(text)) < 0) return;
}

extern "C" void on_stop_signal(int signal) {
  if (g_under_mpirun != 0) {
    stop_blocking(STDOUT_FILENO);
    stop_blocking(STDERR_FILENO);
  }
  if (g_stop_signal != 0) {
    say("\nmixp: second signal: exiting now\n");
    ::signal(signal, SIG_DFL);
    ::raise(signal);  // the conventional status, 128 + signal
    return;
  }
  g_stop_signal = signal;
  say(signal == SIGINT    ? "\nmixp: interrupted (SIGINT)"
      : signal == SIGHUP  ? "\nmixp: hangup (SIGHUP)"
      : signal == SIGUSR1 ? "\nmixp: asked to stop (SIGUSR1)"
                          : "\nmixp: terminated (SIGTERM)");
  say(": finishing this step, writing a checkpoint, then exiting; signal again to exit now\n");
}

}  // namespace

void install_stop_handlers(bool under_mpirun) {
  g_under_mpirun = under_mpirun ? 1 : 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) ::sigaction(signal, &action, nullptr);
}

int stop_signal() { return g_stop_signal; }

}  // namespace mixp::cli
