#include "child_supervisor.h"

#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli_common.h"

namespace dlock::cli {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
// How often the loop looks at the lock when no signal comes.
constexpr absl::Duration kPoll = absl::Milliseconds(100);

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, kWakeSignal);
  return set;
}

}  // namespace

void BlockHandledSignals() {
  const sigset_t handled = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
}

int WaitForSignal(absl::Duration timeout) {
  const sigset_t set = HandledSignals();
  timespec ts = absl::ToTimespec(timeout);
  siginfo_t info;
  const int sig = sigtimedwait(&set, &info, &ts);
  return sig < 0 ? 0 : sig;
}

bool IsForwarded(int sig) {
  for (int s : kForwarded) {
    if (s == sig) return true;
  }
  return false;
}

absl::StatusOr<int> ParseSignal(const std::string& text) {
  std::string name = absl::AsciiStrToUpper(text);
  if (absl::StartsWith(name, "SIG")) name = name.substr(3);
  static constexpr std::pair<const char*, int> kNames[] = {
      {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},  {"QUIT", SIGQUIT},
      {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
  for (const auto& [n, sig] : kNames) {
    if (name == n) return sig;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--on-lost-signal: '", text,
      "' is not a signal; use TERM, INT, HUP, QUIT, KILL, USR1 or USR2"));
}

SupervisedExit SuperviseChild(const Spawned& child,
                              absl::FunctionRef<bool()> lost,
                              const SupervisionOptions& options) {
  SupervisedExit exit;
  bool killed = false;
  absl::Time kill_at = absl::InfiniteFuture();
  for (;;) {
    const int sig = WaitForSignal(kPoll);
    if (IsForwarded(sig)) kill(-child.pid, sig);
    if (waitpid(child.pid, &exit.wait_status, WNOHANG) == child.pid) break;
    if (!exit.lost && lost()) {
      exit.lost = true;
      Fail(0,
           absl::StrCat(options.what, " ", options.lost_why, "; sending SIG",
                        sigabbrev_np(options.lost_signal), " to the command"));
      kill(-child.pid, options.lost_signal);
      kill_at = absl::Now() + options.kill_after;
    }
    if (exit.lost && !killed && absl::Now() >= kill_at) {
      killed = true;
      Fail(0, absl::StrCat("the command outlived --kill-after (",
                           absl::FormatDuration(options.kill_after),
                           "); sending SIGKILL"));
      kill(-child.pid, SIGKILL);
    }
  }
  // Anything the command left in its group goes with it.
  if (exit.lost) kill(-child.pid, SIGKILL);
  return exit;
}

}  // namespace dlock::cli
