// A node of the scheduled-job tests: runs one job through
// ScheduledJobGuard as a separate process would in production.
//   dlock_job_runner URI JOB SLOT AT_MOST AT_LEAST JOB_DURATION OUT_FILE
// The job appends "ran <pid>" to OUT_FILE. Exit, right after the run as a
// process run from cron would: 0 ran, 3 skipped (printed: "skipped running"
// or "skipped recently ran"), 1 error.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/adapters/config.h"
#include "dlock/adapters/job_guard.h"

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr,
                 "usage: %s URI JOB SLOT AT_MOST AT_LEAST DURATION OUT\n",
                 argv[0]);
    return 1;
  }
  auto duration = [](const char* text) {
    absl::StatusOr<absl::Duration> d = dlock::ParseWait(text);
    return d.ok() ? *d : absl::ZeroDuration();
  };
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::Connect(argv[1]);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  dlock::ScheduledJobGuard guard(**client);
  const std::string out = argv[7];
  const absl::Duration job_time = duration(argv[6]);
  absl::StatusOr<dlock::JobResult> result = guard.Run(
      argv[2],
      dlock::JobOptions{.lock_at_most_for = duration(argv[4]),
                        .lock_at_least_for = duration(argv[5]),
                        .slot = argv[3]},
      [&](const dlock::JobContext& context) {
        const int fd = open(out.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
        const std::string line = absl::StrCat("ran ", getpid(), " token ",
                                              context.fencing_token, "\n");
        if (fd < 0 || write(fd, line.data(), line.size()) < 0) {
          return absl::InternalError("cannot write the output file");
        }
        close(fd);
        absl::SleepFor(job_time);
        return absl::OkStatus();
      });
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
    return 1;
  }
  // No waiting: the run key stays kept on the backend after the exit.
  switch (result->outcome) {
    case dlock::JobOutcome::kRan:
      std::printf("ran\n");
      if (!result->lock_status.ok()) {
        std::fprintf(stderr, "%s\n", result->lock_status.ToString().c_str());
      }
      return result->job_status.ok() ? 0 : 1;
    case dlock::JobOutcome::kSkippedRunning:
      std::printf("skipped running\n");
      return 3;
    case dlock::JobOutcome::kSkippedRecentlyRan:
      std::printf("skipped recently ran\n");
      return 3;
  }
  return 1;
}
