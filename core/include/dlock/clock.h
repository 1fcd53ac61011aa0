// Copyright dlock authors. Local time: every lease deadline, renewal time and
// wait in dlock is counted on a monotonic clock, never on the wall clock, so
// that a step of the system time (NTP, an operator, a VM resumed) can neither
// stretch a hold's local deadline nor stall the watchdog (C19). The clock is
// an interface so that tests can move time by hand (ManualClock).
#ifndef DLOCK_CLOCK_H_
#define DLOCK_CLOCK_H_

#include <compare>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dlock {

// A point on a monotonic clock: the time since an arbitrary origin fixed for
// the life of the process. Only differences and comparisons mean anything;
// it is not a date and is never shown as one.
class MonoTime {
 public:
  constexpr MonoTime() = default;  // the origin
  static constexpr MonoTime FromSinceOrigin(absl::Duration d) {
    return MonoTime(d);
  }
  static constexpr MonoTime InfiniteFuture() {
    return MonoTime(absl::InfiniteDuration());
  }
  static constexpr MonoTime InfinitePast() {
    return MonoTime(-absl::InfiniteDuration());
  }

  constexpr absl::Duration since_origin() const { return since_origin_; }
  bool is_infinite_future() const {
    return since_origin_ == absl::InfiniteDuration();
  }

  friend MonoTime operator+(MonoTime t, absl::Duration d) {
    return MonoTime(t.since_origin_ + d);
  }
  friend MonoTime operator-(MonoTime t, absl::Duration d) {
    return MonoTime(t.since_origin_ - d);
  }
  friend absl::Duration operator-(MonoTime a, MonoTime b) {
    return a.since_origin_ - b.since_origin_;
  }
  MonoTime& operator+=(absl::Duration d) { return *this = *this + d; }
  friend bool operator==(MonoTime a, MonoTime b) {
    return a.since_origin_ == b.since_origin_;
  }
  friend bool operator<(MonoTime a, MonoTime b) {
    return a.since_origin_ < b.since_origin_;
  }
  friend bool operator>(MonoTime a, MonoTime b) { return b < a; }
  friend bool operator<=(MonoTime a, MonoTime b) { return !(b < a); }
  friend bool operator>=(MonoTime a, MonoTime b) { return !(a < b); }

 private:
  explicit constexpr MonoTime(absl::Duration d) : since_origin_(d) {}
  absl::Duration since_origin_ = absl::ZeroDuration();
};

// The source of local time. Implementations are thread-safe; a client keeps
// the one it was given (ClientOptions::clock) for its whole life.
class Clock {
 public:
  virtual ~Clock() = default;

  // The machine's clock since boot (CLOCK_BOOTTIME: monotonic, and it
  // counts time spent suspended, as the backend's lease does). Never
  // destroyed.
  static Clock& Real();

  virtual MonoTime Now() const = 0;

  // Blocks the caller, which holds `lock`, on `cv` until `ready()` is true or
  // Now() reaches `deadline`, and returns ready(). `ready` is evaluated with
  // `lock` held; whoever makes it true notifies `cv`. Spurious wake-ups are
  // absorbed here. Real(): a wall-clock step neither lengthens nor shortens
  // the wait, and a suspend ends it within a second of the resume.
  virtual bool WaitUntil(std::condition_variable& cv,
                         std::unique_lock<std::mutex>& lock, MonoTime deadline,
                         absl::FunctionRef<bool()> ready) const = 0;

  // Sleeps until `deadline`.
  void SleepUntil(MonoTime deadline) const;
};

// A condition variable for code whose state is guarded by an absl::Mutex,
// with deadlines on a Clock: absl::CondVar's timed waits count on the wall
// clock. Wait like this:
//   absl::MutexLock lock(&mu_);
//   while (!done_ && clock.Now() < deadline) cv_.WaitUntil(&mu_, deadline);
// and change the state under mu_ before calling Signal().
class ClockCondVar {
 public:
  explicit ClockCondVar(const Clock& clock) : clock_(clock) {}
  ClockCondVar(const ClockCondVar&) = delete;
  ClockCondVar& operator=(const ClockCondVar&) = delete;

  // Releases `mu` (held by the caller), waits for a Signal() or `deadline`,
  // and takes `mu` again. Returns true when signalled. A Signal() that comes
  // after the caller took `mu` and before this call is not missed.
  bool WaitUntil(absl::Mutex* mu, MonoTime deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Wakes every waiter.
  void Signal();
  // Wakes one waiter: for a resource freed one at a time (a pooled
  // connection), where waking all would only send the rest back to sleep.
  void SignalOne();

  const Clock& clock() const { return clock_; }

 private:
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t signals_ = 0;  // guarded by mu_
};

// A clock that moves only when told: for deterministic tests of leases,
// renewals and waits. Starts at an arbitrary nonzero point.
class ManualClock : public Clock {
 public:
  ManualClock();
  MonoTime Now() const override;
  bool WaitUntil(std::condition_variable& cv,
                 std::unique_lock<std::mutex>& lock, MonoTime deadline,
                 absl::FunctionRef<bool()> ready) const override;

  // Moves time forward and wakes every wait whose deadline it reached.
  void Advance(absl::Duration d);

 private:
  mutable absl::Mutex mu_;
  MonoTime now_ ABSL_GUARDED_BY(mu_);
  // Waits in progress, woken by Advance().
  mutable std::vector<std::condition_variable*> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock

#endif  // DLOCK_CLOCK_H_
