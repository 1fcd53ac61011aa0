// `dlock run`: takes the lock, runs the command under it, and stops the
// command if the lock is lost. The scheduled-job form is in run_job.cc.
#include "run_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "child_process.h"
#include "child_supervisor.h"
#include "dlock/backoff.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "dlock/uri.h"
#include "run_job.h"

namespace dlock::cli {
namespace {

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

// After a loss, how long the command gets between the lost signal and
// SIGKILL.
constexpr DurationRange kKillAfterRange{.min = absl::Milliseconds(1),
                                        .max = absl::Hours(24)};

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
    absl::StatusOr<absl::Duration> lease = DurationFlag(
        "--lease", run.lease, {.min = kMinWatchdogLease, .max = kLongestLease});
    if (!lease.ok()) return lease.status();
    parsed.lease = *lease;
  }
  absl::StatusOr<absl::Duration> kill_after =
      DurationFlag("--kill-after", run.kill_after, kKillAfterRange);
  if (!kill_after.ok()) return kill_after.status();
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

// One try; if it is busy (or the backend is unavailable) and the wait
// allows more, says once on stderr what it waits for and why, then waits
// the rest.
absl::StatusOr<Held> AcquireSayingWhy(const RunMode& mode, RunTarget& target,
                                      AcquireOptions options, bool quiet) {
  if (options.wait == absl::ZeroDuration()) return target.acquire(options);
  const absl::Time start = absl::Now();
  AcquireOptions once = options;
  once.wait = absl::ZeroDuration();
  absl::StatusOr<Held> first = target.acquire(once);
  const bool held = IsHeldByAnother(first.status());
  // Unavailable: a failover under way, which the wait rides out.
  if (!held && !absl::IsUnavailable(first.status())) return first;
  if (held && !quiet) {
    Fail(0,
         absl::StrCat("waiting for ", mode.what, ", ", target.busy(),
                      options.wait == absl::InfiniteDuration()
                          ? ", until it is free (--wait forever)"
                          : absl::StrCat(", for up to ",
                                         FormatDurationForPeople(options.wait),
                                         " (--wait)")));
  }
  options.wait =
      std::max(options.wait - (absl::Now() - start), absl::ZeroDuration());
  return target.acquire(options);
}

// Acquires on a helper thread so that the main thread can keep waiting for
// signals: SIGINT/SIGTERM while waiting cancel the wait (nothing is left on
// the backend, C9) and dlock exits with 128 + the signal.
absl::StatusOr<Held> AcquireInterruptibly(const RunMode& mode,
                                          RunTarget& target,
                                          const AcquireOptions& options,
                                          bool quiet, int& interrupted_by) {
  std::atomic<bool> done{false};
  absl::StatusOr<Held> result;
  std::thread acquirer([&] {
    result = AcquireSayingWhy(mode, target, options, quiet);
    done = true;
    kill(getpid(), kWakeSignal);
  });
  while (!done) {
    const int sig = WaitForSignal(absl::Milliseconds(100));
    if (IsForwarded(sig) && interrupted_by == 0) {
      interrupted_by = sig;
      options.cancel.Cancel();
    }
  }
  acquirer.join();
  return result;
}

// A run with a finite wait rides out a backend it cannot reach yet (a
// master or leader failing over) within that wait, as the acquire after it
// does (docs/semantics.md, "Riding out a failover"); then the last error.
// With --wait forever (or 0) it connects once: a backend never reached may
// be a wrong address, which no wait fixes. A signal ends it
// (interrupted_by). `retried`: whether the first attempt failed.
absl::StatusOr<std::unique_ptr<LockClient>> ConnectWithin(
    const Profile& profile, const BackendFlags& flags, absl::Duration wait,
    int& interrupted_by, bool& retried) {
  const Clock& clock = Clock::Real();
  const MonoTime deadline = clock.Now() + wait;
  RetryBackoff backoff;
  while (true) {
    absl::StatusOr<std::unique_ptr<LockClient>> client =
        ConnectWith(profile, flags);
    if (client.ok() || !absl::IsUnavailable(client.status()) ||
        wait == absl::InfiniteDuration() || clock.Now() >= deadline) {
      return client;
    }
    retried = true;
    const MonoTime resume = std::min(deadline, clock.Now() + backoff.Next());
    while (clock.Now() < resume) {
      const int sig = WaitForSignal(resume - clock.Now());
      if (IsForwarded(sig)) {
        interrupted_by = sig;
        return client;
      }
    }
  }
}

// The mode the flags ask for; InvalidArgument for flags that contradict
// each other.
absl::StatusOr<RunMode> ModeOf(const RunFlags& run) {
  const int modes = int{run.shared} + int{run.permits > 0} + int{run.all} +
                    int{IsScheduledJob(run)};
  if (modes > 1) {
    return absl::InvalidArgumentError(
        "--shared, --permits, --all and the scheduled-job flags (--once-per, "
        "--slot, --at-least-for, --at-most-for) exclude each other");
  }
  if (run.take != 0 && run.permits == 0) {
    return absl::InvalidArgumentError(
        "--take says how many of a semaphore's permits to take: give "
        "--permits N too");
  }
  if (run.take > run.permits) {
    return absl::InvalidArgumentError(
        absl::StrCat("--take ", run.take, " asks more than the semaphore's ",
                     run.permits, " permits (--permits)"));
  }
  if (run.names.size() > 1 && !run.all) {
    return absl::InvalidArgumentError(absl::StrCat(
        run.names.size(), " lock names given ('",
        absl::StrJoin(run.names, "', '"),
        "'): to take them all at once add --all; otherwise put -- right "
        "after the one name"));
  }
  if (run.all && !run.double_dash) {
    return absl::InvalidArgumentError(
        "--all takes the names up to --: write dlock run --all NAME1 NAME2 "
        "-- CMD [ARGS...]");
  }
  if (run.shared) return ReadMode(run.name);
  if (run.permits > 0) {
    return PermitMode(run.name, run.permits, run.take == 0 ? 1 : run.take);
  }
  if (run.all) return AllMode(run.names);
  return LockMode(run.name);
}

// A run's acquisition: its own owner token, and `lost` set (and the main
// thread woken) when the hold is lost. No lease: the watchdog renews it at
// a third of --lease (C7).
AcquireOptions RunAcquireOptions(absl::Duration wait,
                                 std::shared_ptr<std::atomic<bool>> lost) {
  AcquireOptions acquire;
  acquire.wait = wait;
  acquire.owner_token = OwnerToken();
  acquire.on_lost = [lost](const LockLostEvent&) {
    *lost = true;
    kill(getpid(), kWakeSignal);
  };
  return acquire;
}

// The message of a grant not had within --wait.
int NotAcquired(const RunMode& mode, RunTarget& target, absl::Duration wait) {
  if (wait == absl::ZeroDuration()) {
    return Fail(kNotAcquired, absl::StrCat(mode.what, " is ", target.busy(),
                                           "; --wait 0 tries once"));
  }
  return Fail(kNotAcquired,
              absl::StrCat(mode.what, " not acquired within ",
                           FormatDurationForPeople(wait), "; ", target.busy()));
}

// Runs the command under `held` until it exits or `held` is lost.
int RunHeld(const RunFlags& run, const RunMode& mode, const ParsedRun& parsed,
            const std::string& path, const Profile& profile, Held& held,
            const std::atomic<bool>& lost) {
  Spawned child =
      Spawn(path, run.command,
            ChildEnvironment(held.env, SecretVariables(profile, run.pass_env)),
            parsed.lost_signal);
  if (child.pid < 0) {
    held.release().IgnoreError();
    return child.exit_code;
  }
  const SupervisedExit exit = SuperviseChild(
      child, [&] { return lost || held.lost(); },
      SupervisionOptions{.what = mode.what,
                         .lost_signal = parsed.lost_signal,
                         .kill_after = parsed.kill_after});
  const int child_code = ExitCodeOfChild(exit.wait_status);
  if (exit.lost) {
    held.release().IgnoreError();  // forgets the lost hold
    return kLost;
  }
  absl::Status released = held.release();
  if (released.code() == absl::StatusCode::kFailedPrecondition) {
    // Lost between the last check and the end of the command: the backend
    // no longer had the hold when the command ended.
    return Fail(kLost, absl::StrCat(mode.what,
                                    " was lost while the command ran: it "
                                    "expired, was force-unlocked or was "
                                    "taken over"));
  }
  if (!released.ok()) {
    Fail(0, absl::StrCat("releasing ", mode.what, " failed (",
                         released.message(), "); it expires with its lease"));
  }
  return child_code;
}

}  // namespace

int RunCommand(const BackendFlags& flags, const RunFlags& run) {
  absl::StatusOr<RunMode> mode = ModeOf(run);
  if (!mode.ok()) return Fail(mode.status());
  return RunUnder(flags, run, *mode);
}

int RunUnder(const BackendFlags& flags, const RunFlags& run,
             const RunMode& mode) {
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

  if (IsScheduledJob(run)) {
    return RunScheduledJob(flags, run, *profile, *path, parsed->lost_signal,
                           parsed->kill_after);
  }

  // Before any thread exists (the client starts its watchdog), so that every
  // thread inherits the mask and only sigtimedwait() below sees the signals.
  BlockHandledSignals();

  profile->default_lease = parsed->lease;
  // A final release that meets a failover is tried again until the lease
  // would free the lock anyway, rather than leaving it to the lease (C21).
  if (!profile->close_timeout) profile->close_timeout = parsed->lease;
  const MonoTime connecting = Clock::Real().Now();
  int interrupted_by = 0;
  bool retried = false;
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectWithin(*profile, flags, parsed->wait, interrupted_by, retried);
  if (interrupted_by != 0) {
    Fail(0, absl::StrCat("interrupted while waiting for ", mode.what,
                         " (connecting)"));
    return 128 + interrupted_by;
  }
  if (!client.ok()) return Fail(client.status());
  absl::StatusOr<RunTarget> target = mode.target(**client);
  if (!target.ok()) return Fail(target.status());

  // Shared with the callback, which runs on the watchdog's thread and may
  // outlive this frame until the client closes.
  auto lost = std::make_shared<std::atomic<bool>>(false);
  // What riding out the connection left of the wait.
  const absl::Duration wait =
      retried ? std::max(absl::ZeroDuration(),
                         parsed->wait - (Clock::Real().Now() - connecting))
              : parsed->wait;
  absl::StatusOr<Held> acquired = AcquireInterruptibly(
      mode, *target, RunAcquireOptions(wait, lost), run.quiet, interrupted_by);
  if (acquired.ok() && interrupted_by != 0) {
    // The signal came as it was granted: honour the signal.
    acquired->release().IgnoreError();
  }
  if (interrupted_by != 0) {
    Fail(0, absl::StrCat("interrupted while waiting for ", mode.what));
    return 128 + interrupted_by;
  }
  if (acquired.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return NotAcquired(mode, *target, parsed->wait);
  }
  if (!acquired.ok()) return Fail(acquired.status());
  return RunHeld(run, mode, *parsed, *path, *profile, *acquired, *lost);
}

}  // namespace dlock::cli
