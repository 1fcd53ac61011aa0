// `dlock run`: takes the lock, runs the command under it, and stops the
// command if the lock is lost. Signals are handled synchronously: the main
// thread blocks them before any other thread exists and waits for them with
// sigtimedwait(), so no async-signal handler runs in this process.
#include "run_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "child_process.h"
#include "dlock/uri.h"

namespace dlock::cli {
namespace {

// SIGUSR1 is our own wake-up: the acquiring thread and the lost callback
// send it so that the main thread's sigtimedwait() returns at once.
constexpr int kWakeSignal = SIGUSR1;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr absl::Duration kPoll = absl::Milliseconds(100);

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, kWakeSignal);
  return set;
}

// The next handled signal, or 0 after `timeout`.
int WaitForSignal(absl::Duration timeout, siginfo_t* info) {
  const sigset_t set = HandledSignals();
  timespec ts = absl::ToTimespec(timeout);
  const int sig = sigtimedwait(&set, info, &ts);
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

std::string RandomHex() {
  std::random_device random;
  return absl::StrCat(absl::Hex(random(), absl::kZeroPad8),
                      absl::Hex(random(), absl::kZeroPad8));
}

// The owner token of this run: readable in `dlock status`, unique per run.
std::string OwnerToken() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat("dlock-run:", host, ":", getpid(), ":", RandomHex());
}

struct ParsedRun {
  absl::Duration wait;
  absl::Duration lease;
  int lost_signal;
  absl::Duration kill_after;
};

absl::StatusOr<ParsedRun> ParseRunFlags(const RunFlags& run,
                                        const Profile& profile) {
  ParsedRun parsed{.wait = profile.default_wait,
                   .lease = profile.default_lease};
  if (!run.wait.empty()) {
    absl::StatusOr<absl::Duration> wait = ParseWait(run.wait);
    if (!wait.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--wait: ", wait.status().message()));
    }
    parsed.wait = *wait;
  }
  if (!run.lease.empty()) {
    absl::StatusOr<absl::Duration> lease = ParsePositiveDuration(run.lease);
    if (!lease.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lease: ", lease.status().message()));
    }
    parsed.lease = *lease;
  }
  absl::StatusOr<absl::Duration> kill_after =
      ParsePositiveDuration(run.kill_after);
  if (!kill_after.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kill-after: ", kill_after.status().message()));
  }
  parsed.kill_after = *kill_after;
  absl::StatusOr<int> sig = ParseSignal(run.on_lost_signal);
  if (!sig.ok()) return sig.status();
  parsed.lost_signal = *sig;
  if (run.command.empty()) {
    return absl::InvalidArgumentError(
        "no command given; write dlock run NAME -- CMD [ARGS...]");
  }
  return parsed;
}

// Acquires on a helper thread so that the main thread can keep waiting for
// signals: SIGINT/SIGTERM while waiting cancel the wait (nothing is left on
// the backend, C9) and dlock exits with 128 + the signal.
absl::StatusOr<Hold> AcquireInterruptibly(DistributedLock& lock,
                                          const AcquireOptions& options,
                                          int& interrupted_by) {
  std::atomic<bool> done{false};
  absl::StatusOr<Hold> result;
  std::thread acquirer([&] {
    result = lock.Acquire(options);
    done = true;
    kill(getpid(), kWakeSignal);
  });
  while (!done) {
    siginfo_t info;
    const int sig = WaitForSignal(kPoll, &info);
    if (IsForwarded(sig) && interrupted_by == 0) {
      interrupted_by = sig;
      options.cancel.Cancel();
    }
  }
  acquirer.join();
  return result;
}

}  // namespace

int RunCommand(const BackendFlags& flags, const RunFlags& run) {
  absl::StatusOr<Profile> profile = ResolveProfile(flags);
  if (!profile.ok()) return Fail(profile.status());
  absl::StatusOr<ParsedRun> parsed = ParseRunFlags(run, *profile);
  if (!parsed.ok()) return Fail(parsed.status());
  absl::StatusOr<std::string> path = ResolveCommand(run.command[0]);
  if (!path.ok()) {
    return Fail(path.status().code() == absl::StatusCode::kNotFound
                    ? kCommandNotFound
                    : kCannotExecute,
                path.status().message());
  }

  // Before any thread exists (the client starts its watchdog), so that every
  // thread inherits the mask and only sigtimedwait() below sees the signals.
  const sigset_t handled = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);

  profile->default_lease = parsed->lease;
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectWith(*profile, flags);
  if (!client.ok()) return Fail(client.status());
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock =
      (*client)->GetLock(run.name);
  if (!lock.ok()) return Fail(lock.status());

  const std::string owner = OwnerToken();
  // Shared with the callback, which runs on the watchdog's thread and may
  // outlive this frame until the client closes.
  auto lost = std::make_shared<std::atomic<bool>>(false);
  AcquireOptions acquire;
  acquire.wait = parsed->wait;
  acquire.owner_token = owner;
  // No lease: the watchdog renews it at a third of --lease (C7).
  acquire.on_lost = [lost](const LockLostEvent&) {
    *lost = true;
    kill(getpid(), kWakeSignal);
  };
  int interrupted_by = 0;
  absl::StatusOr<Hold> acquired =
      AcquireInterruptibly(**lock, acquire, interrupted_by);
  if (acquired.ok() && interrupted_by != 0) {
    // The signal came as the lock was granted: honour the signal.
    acquired->Release().IgnoreError();
  }
  if (!acquired.ok() || interrupted_by != 0) {
    if (interrupted_by != 0) {
      Fail(0,
           absl::StrCat("interrupted while waiting for lock '", run.name, "'"));
      return 128 + interrupted_by;
    }
    if (acquired.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return Fail(kNotAcquired,
                  absl::StrCat("lock '", run.name, "' not acquired within ",
                               absl::FormatDuration(parsed->wait)));
    }
    return Fail(acquired.status());
  }

  Hold& hold = *acquired;
  Spawned child = Spawn(*path, run.command,
                        ChildEnvironment(run.name, hold.fencing_token()),
                        parsed->lost_signal);
  if (child.pid < 0) {
    hold.Release().IgnoreError();
    return child.exit_code;
  }

  bool lost_handled = false;
  bool killed = false;
  absl::Time kill_at = absl::InfiniteFuture();
  int status = 0;
  for (;;) {
    siginfo_t info;
    const int sig = WaitForSignal(kPoll, &info);
    if (IsForwarded(sig)) kill(-child.pid, sig);
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) break;
    if (!lost_handled && (*lost || hold.lost())) {
      lost_handled = true;
      Fail(0,
           absl::StrCat("lock '", run.name, "' was lost; sending SIG",
                        sigabbrev_np(parsed->lost_signal), " to the command"));
      kill(-child.pid, parsed->lost_signal);
      kill_at = absl::Now() + parsed->kill_after;
    }
    if (lost_handled && !killed && absl::Now() >= kill_at) {
      killed = true;
      Fail(0, absl::StrCat("the command outlived --kill-after (",
                           absl::FormatDuration(parsed->kill_after),
                           "); sending SIGKILL"));
      kill(-child.pid, SIGKILL);
    }
  }
  // Anything the command left in its group goes with it.
  if (lost_handled) kill(-child.pid, SIGKILL);

  const int child_code = ExitCodeOfChild(status);
  if (lost_handled) {
    hold.Release().IgnoreError();  // forgets the lost hold
    return kLost;
  }
  absl::Status released = hold.Release();
  if (released.code() == absl::StatusCode::kFailedPrecondition) {
    // Lost between the last check and the end of the command.
    return Fail(kLost, absl::StrCat("lock '", run.name,
                                    "' was lost while the command ran: ",
                                    released.message()));
  }
  if (!released.ok()) {
    Fail(0, absl::StrCat("releasing lock '", run.name, "' failed (",
                         released.message(), "); it expires with its lease"));
  }
  return child_code;
}

}  // namespace dlock::cli
