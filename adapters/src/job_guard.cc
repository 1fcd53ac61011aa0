// The design is described in job_guard.h.
#include "dlock/adapters/job_guard.h"

#include <algorithm>
#include <memory>
#include <random>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "dlock/errors.h"
#include "dlock/ride_out.h"

namespace dlock {
namespace {

// The shortest keep Hold::ReleaseAndKeepFor() takes; a keep shorter than
// that is rounded up, which only keeps others out slightly longer.
constexpr absl::Duration kMinKeep = absl::Milliseconds(10);

std::string RandomOwnerToken() {
  std::random_device random;
  return absl::StrCat("job-run-", absl::Hex(random(), absl::kZeroPad8),
                      absl::Hex(random(), absl::kZeroPad8),
                      absl::Hex(random(), absl::kZeroPad8));
}

absl::Status Validate(const JobOptions& options) {
  if (options.lock_at_most_for <= absl::ZeroDuration() ||
      options.lock_at_most_for == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "lock_at_most_for must be positive and finite");
  }
  if (options.lock_at_least_for < absl::ZeroDuration() ||
      options.lock_at_least_for > options.lock_at_most_for) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lock_at_least_for (", absl::FormatDuration(options.lock_at_least_for),
        ") must be from 0 to lock_at_most_for (",
        absl::FormatDuration(options.lock_at_most_for), ")"));
  }
  if (options.ride_out < absl::ZeroDuration() ||
      options.ride_out == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "ride_out must be zero (one try) or positive and finite");
  }
  return absl::OkStatus();
}

// Fires `token` at `deadline` unless stopped first.
class DeadlineTimer {
 public:
  DeadlineTimer(CancelToken token, absl::Time deadline)
      : thread_([this, token, deadline] {
          if (!done_.WaitForNotificationWithDeadline(deadline)) token.Cancel();
        }) {}
  ~DeadlineTimer() {
    done_.Notify();
    thread_.join();
  }

 private:
  absl::Notification done_;
  std::thread thread_;
};

// C15: the longest lock name every backend takes.
constexpr size_t kMaxLockNameBytes = 512;

// '@' separates the job and the slot in a lock name, so it is
// percent-encoded in the job and the slot, and '%' too so that the escape is
// reversible: then no job and slot can produce another's name. '#' is
// escaped as well, as when it named a marker lock, so that run keys keep
// their names; a name without these three characters keeps its lock name.
std::string EscapeJobPart(absl::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (char c : part) {
    switch (c) {
      case '%':
        out += "%25";
        break;
      case '@':
        out += "%40";
        break;
      case '#':
        out += "%23";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// A job name or slot for a message: escaped (it may be any bytes) and cut
// short (it may be too long, which is what the message may be about).
std::string Quoted(absl::string_view text) {
  constexpr size_t kShown = 40;
  if (text.size() <= kShown) {
    return absl::StrCat("'", absl::CHexEscape(text), "'");
  }
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, kShown)), "...' (",
                      text.size(), " bytes)");
}

std::string JobForMessages(absl::string_view job_name, absl::string_view slot) {
  return slot.empty()
             ? absl::StrCat("job ", Quoted(job_name))
             : absl::StrCat("job ", Quoted(job_name), " slot ", Quoted(slot));
}

// Errors name the job, not the lock names derived from it.
absl::Status ValidateJobName(absl::string_view job_name,
                             absl::string_view slot) {
  if (job_name.empty()) {
    return absl::InvalidArgumentError("a job needs a name; it is empty");
  }
  const size_t longest = JobRunLockName(job_name, slot).size();
  if (longest > kMaxLockNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        JobForMessages(job_name, slot), ": ",
        slot.empty() ? "the job name is" : "the job name and slot are",
        " too long: with '%', '@' and '#' escaped as %25, %40 and %23, the "
        "job's run lock name would be ",
        longest, " bytes, and lock names hold at most ", kMaxLockNameBytes,
        " bytes; shorten the job name", slot.empty() ? "" : " or the slot"));
  }
  return absl::OkStatus();
}

// Step 1 (job_guard.h), riding out Unavailable by the core's rule (a try
// when ride_out is 0). `start` is read before the attempt that answered is
// sent: the backend starts the lease no earlier, so every lease below ends
// no earlier than planned (C2).
absl::StatusOr<Hold> TakeRunLock(DistributedLock& run,
                                 const JobOptions& options, absl::Time& start) {
  AcquireOptions acquire;
  acquire.wait = absl::ZeroDuration();
  acquire.lease = options.lock_at_most_for;
  acquire.owner_token = RandomOwnerToken();
  absl::Duration ride_out = options.ride_out;
  if (options.slot_ends != absl::InfinitePast()) {
    ride_out = std::min(ride_out, options.slot_ends - absl::Now());
  }
  const Clock& clock = Clock::Real();
  RideOut ride(clock, run.name(),
               clock.Now() + std::max(ride_out, absl::ZeroDuration()),
               CancelToken());
  absl::StatusOr<Hold> held;
  do {
    start = absl::Now();
    held = run.Acquire(acquire);
  } while (!held.ok() && ride.Again(held.status()));
  if (!held.ok()) return ride.Final(held.status());
  return held;
}

}  // namespace

std::string JobRunLockName(absl::string_view job_name, absl::string_view slot) {
  return slot.empty()
             ? EscapeJobPart(job_name)
             : absl::StrCat(EscapeJobPart(job_name), "@", EscapeJobPart(slot));
}

absl::StatusOr<JobResult> ScheduledJobGuard::Run(absl::string_view job_name,
                                                 const JobOptions& options,
                                                 const Job& job) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  if (absl::Status s = ValidateJobName(job_name, options.slot); !s.ok()) {
    return s;
  }
  // The names are checked like any lock name (valid UTF-8, no control
  // characters); say which job they came from.
  auto named = [&](const absl::Status& s) {
    return absl::Status(
        s.code(), absl::StrCat(JobForMessages(job_name, options.slot), ": ",
                               s.message()));
  };
  absl::StatusOr<std::unique_ptr<DistributedLock>> run =
      client_.GetLock(JobRunLockName(job_name, options.slot));
  if (!run.ok()) return named(run.status());

  JobResult result;
  absl::Time start;
  absl::StatusOr<Hold> held = TakeRunLock(**run, options, start);
  if (!held.ok()) {
    if (!IsHeldByAnother(held.status())) return held.status();
    // Running elsewhere, or kept after a recent run: looked at after the
    // refusal (job_guard.h says what that race may report).
    absl::StatusOr<LockInfo> info = client_.Admin().Inspect((*run)->name());
    if (!info.ok()) return info.status();
    result.outcome = info->kept_after_release ? JobOutcome::kSkippedRecentlyRan
                                              : JobOutcome::kSkippedRunning;
    return result;
  }

  result.outcome = JobOutcome::kRan;
  result.fencing_token = held->fencing_token();
  JobContext context{.job_name = std::string(job_name),
                     .slot = options.slot,
                     .fencing_token = held->fencing_token(),
                     .started = start,
                     .cancel = CancelToken()};
  {
    DeadlineTimer timer(context.cancel, start + options.lock_at_most_for);
    // A loss before then (a force unlock, the liveness record lapsed) ends
    // the run's claim just as surely.
    ScopedCancelCallback lost(held->lost_token(),
                              [cancel = context.cancel] { cancel.Cancel(); });
    result.job_status = job(context);
  }
  const absl::Time finished = absl::Now();
  result.elapsed = finished - start;

  // Counted from `start` when the release is sent: kept until start +
  // lock_at_least_for on the backend's clock, or a little later; and for a
  // slot computed from the clock, to lock_at_least_for past its end.
  const absl::Duration keep_out =
      std::max(options.lock_at_least_for - result.elapsed,
               options.slot_ends + options.lock_at_least_for - finished);
  if (keep_out <= absl::ZeroDuration()) {
    result.lock_status = held->Release();
    return result;
  }
  result.lock_status = held->ReleaseAndKeepFor(std::max(keep_out, kMinKeep));
  // Unconfirmed (Unavailable) it is retried with the keep, so the slot
  // stays closed; a lost hold keeps nothing.
  if (result.lock_status.ok() || absl::IsUnavailable(result.lock_status)) {
    result.kept_until = finished + keep_out;
  }
  return result;
}

}  // namespace dlock
