// Copyright dlock authors. How the client core's tables ask its two threads
// for attention: each thread says when it plans to look at the tables next,
// and a change that needs it sooner signals it; others do not, so that an
// acquisition or a release costs no wake-up of either thread.
#ifndef DLOCK_CORE_SRC_ALARMS_H_
#define DLOCK_CORE_SRC_ALARMS_H_

#include "dlock/clock.h"

namespace dlock::internal {

// Guarded by the client core's mutex, as the tables that own one are: every
// method but the signals' waits runs with that mutex held.
class Alarms {
 public:
  explicit Alarms(const Clock& clock)
      : renewer_(clock), notifier_(clock), released_(clock) {}
  Alarms(const Alarms&) = delete;
  Alarms& operator=(const Alarms&) = delete;

  // A renewal, a heartbeat or a release retry is due at `at`.
  void RenewerDue(MonoTime at) {
    if (at < renewer_wakes_at_) renewer_.Signal();
  }
  // A hold's notice time is `at`, or (at: the past) a notice is queued.
  void NotifierDue(MonoTime at) {
    if (at < notifier_wakes_at_) notifier_.Signal();
  }
  // The threads say when they plan to look next; InfinitePast while they
  // work (every change signals then).
  void RenewerPlans(MonoTime at) { renewer_wakes_at_ = at; }
  void NotifierPlans(MonoTime at) { notifier_wakes_at_ = at; }

  // What each thread waits on, and what a caller waiting for a release in
  // flight for a key waits on.
  ClockCondVar& renewer() { return renewer_; }
  ClockCondVar& notifier() { return notifier_; }
  ClockCondVar& released() { return released_; }

 private:
  MonoTime renewer_wakes_at_ = MonoTime::InfiniteFuture();
  MonoTime notifier_wakes_at_ = MonoTime::InfiniteFuture();
  ClockCondVar renewer_;
  ClockCondVar notifier_;
  ClockCondVar released_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_ALARMS_H_
