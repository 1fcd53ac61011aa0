// Copyright dlock authors. What both forms of `dlock run` (a plain lock,
// a scheduled job) share: the signals dlock handles, and the loop that
// watches the command while the lock is held. Signals are handled
// synchronously: the main thread blocks them before any other thread exists
// and waits for them with sigtimedwait(), so no async-signal handler runs in
// this process.
#ifndef DLOCK_ADAPTERS_CLI_CHILD_SUPERVISOR_H_
#define DLOCK_ADAPTERS_CLI_CHILD_SUPERVISOR_H_

#include <signal.h>

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "child_process.h"

namespace dlock::cli {

// SIGUSR1 is our own wake-up: threads and lost callbacks send it so that the
// main thread's sigtimedwait() returns at once.
inline constexpr int kWakeSignal = SIGUSR1;

// Blocks the handled signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD and
// the wake-up) in the calling thread. Call it before any thread starts (the
// client starts its own), so that every thread inherits the mask.
void BlockHandledSignals();

// The next handled signal, or 0 after `timeout`.
int WaitForSignal(absl::Duration timeout);

// SIGINT, SIGTERM, SIGHUP and SIGQUIT: passed on to the command.
bool IsForwarded(int sig);

// "TERM", "SIGTERM", "term", ... InvalidArgument naming --on-lost-signal.
absl::StatusOr<int> ParseSignal(const std::string& text);

struct SupervisedExit {
  int wait_status = 0;  // as waitpid() gave it
  // The lock was lost while the command ran: it was sent the lost signal
  // (and SIGKILL after kill_after if it lingered).
  bool lost = false;
};

struct SupervisionOptions {
  std::string what;  // what is held, for messages: "lock 'x'"
  int lost_signal = SIGTERM;
  absl::Duration kill_after = absl::Seconds(10);
  // Why the lock counts as lost, in the message.
  std::string lost_why = "was lost";
};

// Waits for the command (the leader of its own process group) to exit,
// passing on forwarded signals. Once `lost()` says the lock is gone, sends
// the lost signal to the group, then SIGKILL after kill_after; anything the
// command left in its group is killed when it exits.
SupervisedExit SuperviseChild(const Spawned& child,
                              absl::FunctionRef<bool()> lost,
                              const SupervisionOptions& options);

}  // namespace dlock::cli

#endif  // DLOCK_ADAPTERS_CLI_CHILD_SUPERVISOR_H_
