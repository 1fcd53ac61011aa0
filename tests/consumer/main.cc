// Locks through an installed dlock; the memory backend needs no server. Two
// clients of one memory:// instance play two nodes. Exits non-zero on any
// failure. Also built inside the dlock tree, where its "schemes:" line is the
// reference the installed build must match (see check.cmake).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "dlock/backend/backend.h"  // RegisteredSchemes()
#include "dlock/dlock.h"

#ifdef DLOCK_CONSUMER_ADAPTERS
#include <mutex>  // dlock/dlock.h has the adapters' headers too
#endif

namespace {

bool failed = false;

void Expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "FAILED: " << what << "\n";
    failed = true;
  }
}

#ifdef DLOCK_CONSUMER_ADAPTERS
void CheckStdMutex(dlock::LockClient& node_a, dlock::LockClient& node_b) {
  dlock::DistributedMutex a(node_a, "consumer-mutex");
  dlock::DistributedMutex b(node_b, "consumer-mutex");
  {
    std::scoped_lock hold(a);
    Expect(!b.try_lock(), "try_lock fails while the other node holds it");
    std::unique_lock<dlock::DistributedMutex> other(b, std::try_to_lock);
    Expect(!other.owns_lock(), "unique_lock(try_to_lock) fails as well");
  }
  std::unique_lock<dlock::DistributedMutex> other(b, std::try_to_lock);
  Expect(other.owns_lock(), "unique_lock takes it once scoped_lock is gone");
}

void CheckJobGuard(dlock::LockClient& node_a, dlock::LockClient& node_b) {
  dlock::ScheduledJobGuard guard_a(node_a);
  dlock::ScheduledJobGuard guard_b(node_b);
  const dlock::JobOptions options = {.lock_at_most_for = absl::Minutes(1),
                                     .lock_at_least_for = absl::Minutes(1),
                                     .slot = "2026-01-01T00:00Z"};
  int runs = 0;
  const dlock::Job job = [&](const dlock::JobContext&) {
    ++runs;
    return absl::OkStatus();
  };
  absl::StatusOr<dlock::JobResult> during;  // node B tries while A runs it
  absl::StatusOr<dlock::JobResult> first =
      guard_a.Run("report", options, [&](const dlock::JobContext& context) {
        during = guard_b.Run("report", options, job);
        return job(context);
      });
  absl::StatusOr<dlock::JobResult> after = guard_b.Run("report", options, job);
  Expect(first.ok() && first->outcome == dlock::JobOutcome::kRan,
         "the job runs on node A");
  Expect(during.ok() && during->outcome == dlock::JobOutcome::kSkippedRunning,
         "node B skips the slot while A runs it");
  Expect(after.ok() && after->outcome == dlock::JobOutcome::kSkippedRecentlyRan,
         "node B skips the slot after A ran it");
  Expect(runs == 1, "the job ran exactly once");
}
#endif

}  // namespace

int main() {
  // The schemes this program's link registered: every backend installed.
  std::vector<std::string> schemes = dlock::RegisteredSchemes();
  std::sort(schemes.begin(), schemes.end());
  std::cout << "schemes:";
  for (const std::string& scheme : schemes) std::cout << " " << scheme;
  std::cout << "\n";

  auto node_a = dlock::Connect("memory://consumer");
  auto node_b = dlock::Connect("memory://consumer");
  if (!node_a.ok() || !node_b.ok()) {
    std::cerr << "FAILED: Connect: " << node_a.status() << " "
              << node_b.status() << "\n";
    return 1;
  }
  absl::StatusOr<dlock::Hold> held = (*node_a)->TryAcquire("installed");
  const uint64_t fencing_token = held.ok() ? held->fencing_token() : 0;
  Expect(held.ok() && held->Release().ok(), "TryAcquire, then Release");
#ifdef DLOCK_CONSUMER_ADAPTERS
  CheckStdMutex(**node_a, **node_b);
  CheckJobGuard(**node_a, **node_b);
#endif
  if (failed) return 1;
  std::cout << "consumer locked with fencing token " << fencing_token << "\n";
  return 0;
}
