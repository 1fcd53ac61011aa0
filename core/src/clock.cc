#include "dlock/clock.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace dlock {
namespace {

// Longest single wait. Waits run on CLOCK_MONOTONIC, which stands still
// while the machine is suspended; time is read on CLOCK_BOOTTIME, which
// does not. Waking at least this often notices a resume promptly.
constexpr absl::Duration kMaxSlice = absl::Seconds(1);

// A wait whose deadline has not come yet re-checks a ManualClock at least
// this often: Advance() notifies, and this covers a notification that fell
// between a waiter's check and its wait.
constexpr auto kManualRecheck = std::chrono::milliseconds(10);

// The time since boot, suspended time included: a lease keeps running on
// the backend while this machine sleeps, so the local deadline must too.
class SteadyClock : public Clock {
 public:
  MonoTime Now() const override {
    timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return MonoTime::FromSinceOrigin(absl::Seconds(ts.tv_sec) +
                                     absl::Nanoseconds(ts.tv_nsec));
  }

  bool WaitUntil(std::condition_variable& cv,
                 std::unique_lock<std::mutex>& lock, MonoTime deadline,
                 absl::FunctionRef<bool()> ready) const override {
    while (!ready()) {
      const MonoTime now = Now();
      if (now >= deadline) return false;
      const absl::Duration left = std::min(deadline - now, kMaxSlice);
      // libstdc++ waits on a steady_clock deadline with
      // pthread_cond_clockwait(CLOCK_MONOTONIC).
      cv.wait_until(lock, std::chrono::steady_clock::now() +
                              absl::ToChronoNanoseconds(left));
    }
    return true;
  }
};

}  // namespace

Clock& Clock::Real() {
  static SteadyClock* clock = new SteadyClock;  // never destroyed
  return *clock;
}

void Clock::SleepUntil(MonoTime deadline) const {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  WaitUntil(cv, lock, deadline, [] { return false; });
}

bool ClockCondVar::WaitUntil(absl::Mutex* mu, MonoTime deadline) {
  // The count is read while the caller still holds `mu`: a Signal() for a
  // change made under `mu` after this point is seen below.
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t seen = signals_;
  mu->Unlock();
  const bool signalled =
      clock_.WaitUntil(cv_, lock, deadline, [&] { return signals_ != seen; });
  lock.unlock();
  mu->Lock();
  return signalled;
}

void ClockCondVar::Signal() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++signals_;
  }
  cv_.notify_all();
}

void ClockCondVar::SignalOne() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++signals_;
  }
  cv_.notify_one();
}

ManualClock::ManualClock() : now_(MonoTime::FromSinceOrigin(absl::Hours(1))) {}

MonoTime ManualClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

bool ManualClock::WaitUntil(std::condition_variable& cv,
                            std::unique_lock<std::mutex>& lock,
                            MonoTime deadline,
                            absl::FunctionRef<bool()> ready) const {
  {
    absl::MutexLock l(&mu_);
    waiting_.push_back(&cv);
  }
  while (!ready() && Now() < deadline) cv.wait_for(lock, kManualRecheck);
  {
    absl::MutexLock l(&mu_);
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &cv));
  }
  return ready();
}

void ManualClock::Advance(absl::Duration d) {
  // Notified with mu_ held: a waiter unregisters (and may destroy its
  // condition variable) only under mu_.
  absl::MutexLock lock(&mu_);
  now_ += d;
  for (std::condition_variable* cv : waiting_) cv->notify_all();
}

}  // namespace dlock
