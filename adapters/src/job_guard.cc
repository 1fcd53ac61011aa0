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

namespace dlock {
namespace {

// The backend's smallest lease; a marker shorter than that is rounded up,
// which only keeps others out slightly longer.
constexpr absl::Duration kMinLease = absl::Milliseconds(10);

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

// '@' and '#' separate the job, the slot and the role in a lock name, so
// they are percent-encoded in the job and the slot, and '%' too so that the
// escape is reversible: then no job, slot or marker can produce another's
// name, and a name without these three characters keeps its lock name.
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
  const size_t longest = JobMarkerLockName(job_name, slot).size();
  if (longest > kMaxLockNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        JobForMessages(job_name, slot), ": ",
        slot.empty() ? "the job name is" : "the job name and slot are",
        " too long: with '%', '@' and '#' escaped as %25, %40 and %23 and "
        "\"#ran\" added, the job's marker lock name would be ",
        longest, " bytes, and lock names hold at most ", kMaxLockNameBytes,
        " bytes; shorten the job name", slot.empty() ? "" : " or the slot"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string JobRunLockName(absl::string_view job_name, absl::string_view slot) {
  return slot.empty()
             ? EscapeJobPart(job_name)
             : absl::StrCat(EscapeJobPart(job_name), "@", EscapeJobPart(slot));
}

std::string JobMarkerLockName(absl::string_view job_name,
                              absl::string_view slot) {
  return absl::StrCat(JobRunLockName(job_name, slot), "#ran");
}

absl::Time ScheduledJobGuard::markers_expire() const {
  absl::MutexLock lock(&mu_);
  return last_marker_until_;
}

void ScheduledJobGuard::WaitOutMarkers() const {
  const absl::Time until = markers_expire();
  if (until > absl::Now()) absl::SleepFor(until - absl::Now());
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
  absl::StatusOr<std::unique_ptr<DistributedLock>> marker =
      client_.GetLock(JobMarkerLockName(job_name, options.slot));
  if (!marker.ok()) return named(marker.status());

  const std::string owner = RandomOwnerToken();
  JobResult result;
  // Taken before the request is sent: the backend starts the lease no
  // earlier, so every lease below ends no earlier than planned (C2).
  const absl::Time start = absl::Now();
  AcquireOptions acquire;
  acquire.wait = absl::ZeroDuration();
  acquire.lease = options.lock_at_most_for;
  acquire.owner_token = owner;
  absl::StatusOr<Hold> held = (*run)->Acquire(acquire);
  if (!held.ok()) {
    if (held.status().code() == absl::StatusCode::kDeadlineExceeded) {
      result.outcome = JobOutcome::kSkippedRunning;
      return result;
    }
    return held.status();
  }

  absl::StatusOr<LockInfo> recent = client_.Admin().Inspect((*marker)->name());
  if (!recent.ok() || recent->locked) {
    absl::Status released = held->Release();
    if (!recent.ok()) return recent.status();
    result.outcome = JobOutcome::kSkippedRecentlyRan;
    result.lock_status = released;
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
    result.job_status = job(context);
  }
  const absl::Time finished = absl::Now();
  result.elapsed = finished - start;

  const absl::Duration keep_out =
      std::max(options.lock_at_least_for - result.elapsed,
               options.slot_ends + options.lock_at_least_for - finished);
  absl::Status marker_kept;
  if (keep_out > absl::ZeroDuration()) {
    AcquireOptions mark;
    mark.wait = absl::ZeroDuration();
    mark.lease = std::max(keep_out, kMinLease);
    mark.owner_token = owner;
    absl::StatusOr<Hold> marked = (*marker)->Acquire(mark);
    if (!marked.ok()) {
      // Leave the run lock to expire after lock_at_most_for: later than
      // lock_at_least_for, so still safe. Its Hold is kept, unreleased,
      // until then.
      result.lock_status = WithContext(
          marked.status(),
          absl::StrCat("could not take the marker '", (*marker)->name(),
                       "', leaving the run lock to expire"));
      if (absl::Status kept = held->KeepUntilLeaseEnd(); !kept.ok()) {
        result.lock_status = WithContext(result.lock_status, kept.message());
      }
      return result;
    }
    result.marker_until = finished + keep_out;
    {
      absl::MutexLock lock(&mu_);
      last_marker_until_ = std::max(last_marker_until_, result.marker_until);
    }
    // Not released: the marker must run out with its lease.
    marker_kept = marked->KeepUntilLeaseEnd();
  }
  result.lock_status = held->Release();
  if (!marker_kept.ok()) {
    result.lock_status =
        WithContext(marker_kept, absl::StrCat("releasing the run lock: ",
                                              result.lock_status.ToString()));
  }
  return result;
}

}  // namespace dlock
