// A small service whose lock backend comes from configuration alone: the
// code names no backend. Run it with any of
//   DLOCK_BACKEND=memory:// report_service ./counter
//   DLOCK_BACKEND=redis://127.0.0.1:6379 report_service ./counter
//   DLOCK_CONFIG=dlock.toml DLOCK_PROFILE=prod report_service ./counter
//
// Each round it (1) runs the hourly report at most once across every
// instance for the current hour, and (2) adds one to a shared counter file
// under a distributed lock, writing the fencing token next to the value so
// that a stale writer could be refused.
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/adapters/config.h"
#include "dlock/adapters/job_guard.h"
#include "dlock/adapters/std_mutex.h"

namespace {

int64_t ReadCounter(const std::string& path) {
  std::ifstream in(path);
  int64_t value = 0;
  std::string text;
  if (in >> text && absl::SimpleAtoi(text, &value)) return value;
  return 0;
}

int Serve(const std::string& counter_path, int rounds) {
  // The whole choice of backend: DLOCK_BACKEND, or DLOCK_PROFILE with
  // DLOCK_CONFIG (a TOML file with named profiles).
  absl::StatusOr<std::unique_ptr<dlock::LockClient>> client =
      dlock::ConnectFromEnv();
  if (!client.ok()) {
    std::fprintf(stderr, "report_service: %s\n",
                 std::string(client.status().message()).c_str());
    return 1;
  }

  dlock::ScheduledJobGuard scheduler(**client);
  const std::string slot =
      absl::FormatTime("%Y-%m-%dT%H:00Z", absl::Now(), absl::UTCTimeZone());
  absl::StatusOr<dlock::JobResult> report = scheduler.Run(
      "hourly-report",
      {.lock_at_most_for = absl::Minutes(10),
       .lock_at_least_for = absl::Seconds(1),
       .slot = slot},
      [](const dlock::JobContext& job) {
        std::printf("report for %s written (fencing token %llu)\n",
                    job.slot.c_str(),
                    static_cast<unsigned long long>(job.fencing_token));
        return absl::OkStatus();
      });
  if (!report.ok()) {
    std::fprintf(stderr, "report_service: %s\n",
                 std::string(report.status().message()).c_str());
    return 1;
  }
  if (report->outcome != dlock::JobOutcome::kRan) {
    std::printf("report for %s: another instance has it\n", slot.c_str());
  }

  absl::StatusOr<std::unique_ptr<dlock::DistributedMutex>> counter_lock =
      dlock::DistributedMutex::Create(**client, "counter");
  if (!counter_lock.ok()) return 1;
  try {
    for (int i = 0; i < rounds; ++i) {
      std::scoped_lock lock(**counter_lock);  // throws std::system_error
      const int64_t value = ReadCounter(counter_path) + 1;
      std::ofstream(counter_path, std::ios::trunc)
          << value << " " << *(*counter_lock)->fencing_token() << "\n";
    }
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "report_service: %s\n", e.what());
    return 1;
  }
  std::printf("counter now %lld\n",
              static_cast<long long>(ReadCounter(counter_path)));
  // No waiting before exit: the report's run key stays kept on the backend
  // for lock_at_least_for (job_guard.h).
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s COUNTER_FILE [ROUNDS]\n", argv[0]);
    return 2;
  }
  int rounds = 10;
  if (argc == 3 && (!absl::SimpleAtoi(argv[2], &rounds) || rounds < 0)) {
    std::fprintf(stderr, "ROUNDS must be a whole number\n");
    return 2;
  }
  return Serve(argv[1], rounds);
}
