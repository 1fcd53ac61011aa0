// `dlock run` as a scheduled job. Every machine's timer starts the same
// command; ScheduledJobGuard lets one of them run it per slot, and the
// others exit at once with a code that says why they skipped.
#include "run_job.h"

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "child_process.h"
#include "child_supervisor.h"
#include "dlock/adapters/config.h"
#include "dlock/adapters/job_guard.h"
#include "dlock/uri.h"

namespace dlock::cli {
namespace {

constexpr absl::Duration kLongestPeriod = kLongestLease;

struct JobPlan {
  std::string slot;  // empty: the job name alone
  absl::Time slot_end = absl::InfiniteFuture();
  bool derived_slot = false;
  absl::Duration at_least_for = absl::ZeroDuration();
  absl::Duration at_most_for;
};

// A run's lock lasts --at-most-for and is kept --at-least-for: leases.
constexpr DurationRange kJobLeaseRange{.min = absl::Milliseconds(10),
                                       .max = kLongestLease};

absl::Status FlagError(absl::string_view flag, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", status.message()));
}

absl::StatusOr<JobPlan> PlanJob(const RunFlags& run, absl::Time now) {
  if (!run.wait.empty() || !run.lease.empty()) {
    return absl::InvalidArgumentError(
        "--wait and --lease do not apply to a scheduled job: it never waits "
        "(a busy or finished slot is skipped), and its lock lasts "
        "--at-most-for");
  }
  if (!run.once_per.empty() && !run.slot.empty()) {
    return absl::InvalidArgumentError(
        "give --once-per (slots derived from the clock) or --slot (a slot "
        "you name), not both");
  }
  JobPlan plan;
  if (!run.once_per.empty()) {
    absl::StatusOr<absl::Duration> period =
        DurationFlag("--once-per", run.once_per,
                     {.min = absl::Seconds(1), .max = kLongestPeriod});
    if (!period.ok()) return period.status();
    absl::StatusOr<JobSlot> slot = SlotOf(now, *period);
    if (!slot.ok()) return FlagError("--once-per", slot.status());
    plan.slot = slot->id;
    plan.slot_end = slot->end;
    plan.derived_slot = true;
    // A run may take the whole slot, not longer: the next slot is another
    // run.
    plan.at_most_for = *period;
  } else {
    plan.slot = run.slot;
  }
  if (!run.at_least_for.empty()) {
    absl::StatusOr<absl::Duration> at_least =
        DurationFlag("--at-least-for", run.at_least_for, kJobLeaseRange);
    if (!at_least.ok()) return at_least.status();
    plan.at_least_for = *at_least;
  }
  if (!run.at_most_for.empty()) {
    absl::StatusOr<absl::Duration> at_most =
        DurationFlag("--at-most-for", run.at_most_for, kJobLeaseRange);
    if (!at_most.ok()) return at_most.status();
    plan.at_most_for = *at_most;
  } else if (!plan.derived_slot && plan.slot.empty()) {
    // --at-least-for alone: the user meant a job that runs once per slot.
    return absl::InvalidArgumentError(
        "--at-least-for makes a scheduled job, which needs a slot: add "
        "--once-per PERIOD (one run per period, e.g. --once-per 1h), or "
        "--slot NAME with --at-most-for");
  } else if (!plan.derived_slot) {
    return absl::InvalidArgumentError(
        "a scheduled job needs --at-most-for, the longest a run may keep "
        "others out (with --once-per it defaults to the period)");
  }
  if (plan.at_least_for > plan.at_most_for) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--at-least-for (", FormatDurationForPeople(plan.at_least_for),
        ") is longer than --at-most-for (",
        FormatDurationForPeople(plan.at_most_for),
        "): a stuck run would let others in before a finished one does"));
  }
  return plan;
}

std::string JobName(const std::string& name, const JobPlan& plan) {
  return plan.slot.empty() ? absl::StrCat("job '", name, "'")
                           : absl::StrCat("job '", name, "' slot ", plan.slot);
}

}  // namespace

absl::StatusOr<JobSlot> SlotOf(absl::Time now, absl::Duration period) {
  if (period < absl::Seconds(1) || period > kLongestPeriod ||
      period % absl::Seconds(1) != absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a period is a whole number of seconds from 1s to 366 days; got ",
        absl::FormatDuration(period)));
  }
  const int64_t seconds = absl::ToUnixSeconds(now);
  const int64_t length = absl::ToInt64Seconds(period);
  int64_t first = seconds - seconds % length;
  if (seconds < 0 && seconds % length != 0) first -= length;
  JobSlot slot;
  slot.start = absl::FromUnixSeconds(first);
  slot.end = slot.start + period;
  slot.id =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", slot.start, absl::UTCTimeZone());
  return slot;
}

bool IsScheduledJob(const RunFlags& run) {
  return !run.once_per.empty() || !run.slot.empty() ||
         !run.at_least_for.empty() || !run.at_most_for.empty();
}

int RunScheduledJob(const BackendFlags& flags, const RunFlags& run,
                    const Profile& profile, const std::string& path,
                    int lost_signal, absl::Duration kill_after) {
  const absl::Time start = absl::Now();
  absl::StatusOr<JobPlan> plan = PlanJob(run, start);
  if (!plan.ok()) return Fail(plan.status());
  BlockHandledSignals();  // before the client starts its threads
  absl::StatusOr<std::unique_ptr<LockClient>> client =
      ConnectWith(profile, flags);
  if (!client.ok()) return Fail(client.status());

  JobOptions options;
  options.slot = plan->slot;
  options.lock_at_most_for = plan->at_most_for;
  options.lock_at_least_for = plan->at_least_for;
  if (plan->derived_slot) options.slot_ends = plan->slot_end;
  std::optional<SupervisedExit> exit;
  bool spawn_failed = false;
  int spawn_code = 0;
  auto job = [&](const JobContext& context) -> absl::Status {
    std::vector<std::string> env = ChildEnvironment(
        JobRunLockName(run.name, plan->slot), context.fencing_token,
        SecretVariables(profile, run.pass_env));
    env.push_back(absl::StrCat("DLOCK_JOB_SLOT=", plan->slot));
    Spawned child = Spawn(path, run.command, std::move(env), lost_signal);
    if (child.pid < 0) {
      spawn_failed = true;
      spawn_code = child.exit_code;
      return absl::InternalError("the command did not start");
    }
    // Wakes the loop below at once when the run's time is up.
    ScopedCancelCallback wake(context.cancel,
                              [] { kill(getpid(), kWakeSignal); });
    // The run's lease is --at-most-for: its end and a loss look alike
    // (the hold is told lost a little before the lease ends).
    exit = SuperviseChild(
        child, [&] { return context.cancel.IsCancelled(); },
        SupervisionOptions{
            .what = absl::StrCat("lock '", JobRunLockName(run.name, plan->slot),
                                 "'"),
            .lost_signal = lost_signal,
            .kill_after = kill_after,
            .lost_why = absl::StrCat("ended: the run outlived --at-most-for (",
                                     FormatDurationForPeople(plan->at_most_for),
                                     ") or lost the lock, and the slot may run "
                                     "elsewhere")});
    return absl::OkStatus();
  };
  ScheduledJobGuard guard(**client);
  absl::StatusOr<JobResult> result = guard.Run(run.name, options, job);
  if (!result.ok()) return Fail(result.status());
  switch (result->outcome) {
    case JobOutcome::kSkippedRunning:
      if (run.quiet_skip) return kOk;
      return Fail(kNotAcquired,
                  absl::StrCat("skipped ", JobName(run.name, *plan),
                               ": another process is running it"));
    case JobOutcome::kSkippedRecentlyRan:
      if (run.quiet_skip) return kOk;
      return Fail(kAlreadyRan,
                  absl::StrCat("skipped ", JobName(run.name, *plan),
                               plan->derived_slot || !plan->slot.empty()
                                   ? ": it already ran in this slot"
                                   : ": it ran less than --at-least-for ago"));
    case JobOutcome::kRan:
      break;
  }
  if (spawn_failed) return spawn_code;
  if (exit->lost) return kLost;  // told why already
  if (!result->lock_status.ok()) {
    Fail(0, absl::StrCat(JobName(run.name, *plan), ": ",
                         result->lock_status.message()));
  }
  return ExitCodeOfChild(exit->wait_status);
}

}  // namespace dlock::cli
