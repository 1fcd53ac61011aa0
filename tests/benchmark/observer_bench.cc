// What an observer costs: memory:// acquire/release pairs per second on one
// thread with no observer, and with a PrometheusMetrics observer (every
// event counted, every backend call timed), in alternating rounds of one
// run so that both see the same machine load.
//
//   dlock_observer_bench [SECONDS]   (default 6; half for each)
#include <cstdio>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "dlock/adapters/metrics.h"
#include "dlock/dlock.h"

namespace {

// Pairs done in `duration`; -1 on an error.
int64_t Pairs(dlock::DistributedLock& lock, absl::Duration duration) {
  int64_t pairs = 0;
  const absl::Time end = absl::Now() + duration;
  while (absl::Now() < end) {
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<dlock::Hold> hold = lock.TryAcquire();
      if (!hold.ok() || !hold->Release().ok()) return -1;
    }
    pairs += 100;
  }
  return pairs;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 6;
  if (argc > 1 && (!absl::SimpleAtod(argv[1], &seconds) || seconds <= 0)) {
    std::fprintf(stderr, "usage: %s [SECONDS]\n", argv[0]);
    return 2;
  }
  dlock::ClientOptions observed;
  auto metrics = std::make_shared<dlock::PrometheusMetrics>();
  observed.observer = metrics;
  auto plain_client = dlock::Connect("memory://observer-bench-plain");
  auto observed_client =
      dlock::Connect("memory://observer-bench-observed", observed);
  if (!plain_client.ok() || !observed_client.ok()) return 1;
  auto plain_lock = (*plain_client)->GetLock("bench");
  auto observed_lock = (*observed_client)->GetLock("bench");
  if (!plain_lock.ok() || !observed_lock.ok()) return 1;

  constexpr int kRounds = 10;
  const absl::Duration slice = absl::Seconds(seconds / (2 * kRounds));
  int64_t plain = 0;
  int64_t with_observer = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int64_t a = Pairs(**plain_lock, slice);
    const int64_t b = Pairs(**observed_lock, slice);
    if (a < 0 || b < 0) return 1;
    plain += a;
    with_observer += b;
  }
  const double half = seconds / 2;
  std::printf("memory:// acquire/release pairs per second, 1 thread\n");
  std::printf("  no observer:        %.0f\n", plain / half);
  std::printf("  PrometheusMetrics:  %.0f\n", with_observer / half);
  std::printf("  ratio:              %.3f\n",
              static_cast<double>(with_observer) / static_cast<double>(plain));
  return 0;
}
