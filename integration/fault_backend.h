// Copyright dlock authors. A backend decorator for tests that makes chosen
// calls slow, stuck or ambiguous, in front of any real backend: what
// LevelDB's SpecialEnv does for files, done for locks. A test keeps a
// FaultPlan, installs it with ClientOptions::backend_decorator, and changes
// the plan while the client runs:
//
//   auto faults = std::make_shared<FaultPlan>();
//   ClientOptions options;
//   options.backend_decorator = faults->Decorator();
//   ... Connect(uri, options) ...
//   faults->Set(FaultPlan::kRelease, {.fail_after = true, .times = 1});
//
// The faults model the network and the server, not the core: a call that
// "fails after" really ran on the backend and only its reply was lost.
#ifndef DLOCK_INTEGRATION_FAULT_BACKEND_H_
#define DLOCK_INTEGRATION_FAULT_BACKEND_H_

#include <array>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/backend/forwarding_backend.h"

namespace dlock::test {

class FaultPlan : public std::enable_shared_from_this<FaultPlan> {
 public:
  // The calls a fault can target. kRenew covers Renew and the watchdog's
  // RenewMany (one call per batch); kForceUnlock both force unlocks.
  // kLiveness is the core's heartbeat (Backend::RenewLiveness).
  enum Op {
    kAcquire,
    kRelease,
    kRenew,
    kInspect,
    kForceUnlock,
    kLiveness,
    kOpCount
  };

  struct Fault {
    // Real time the call waits before it is sent on.
    absl::Duration delay_before = absl::ZeroDuration();
    // Real time its reply takes to come back (the call has run).
    absl::Duration delay_after = absl::ZeroDuration();
    // Holds the call, before it is sent on, until Unblock(op).
    bool block = false;
    // Unavailable without running the call (it never reached the server).
    bool fail_before = false;
    // Runs the call, then answers Unavailable: the reply was lost.
    bool fail_after = false;
    // Runs after the call ran, before its reply returns (for example to
    // move a ManualClock, as a slow reply would).
    std::function<void()> after;
    // How many calls the fault applies to; then it is cleared. -1: all.
    int times = -1;
  };

  FaultPlan() = default;
  FaultPlan(const FaultPlan&) = delete;
  FaultPlan& operator=(const FaultPlan&) = delete;

  // For ClientOptions::backend_decorator. The plan outlives every backend it
  // wraps (they share it).
  std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)> Decorator();

  // Replaces the fault for `op` (an empty Fault clears it). Thread-safe.
  void Set(Op op, Fault fault);
  void Clear(Op op) { Set(op, Fault{}); }
  // Lets the calls blocked on `op` go, and the next ones pass unblocked.
  void Unblock(Op op);

  // Caps what the wrapped backend's HeldUntil() answers, as a backend
  // whose session (ZooKeeper, PostgreSQL) stopped answering would.
  // InfiniteFuture: no cap.
  void SetHeldUntil(MonoTime until);
  MonoTime held_until() const;

  // Makes a backend that keeps no liveness record (memory://) declare one
  // and confirm every heartbeat, so that the core's liveness can be tested
  // on it; faults on kLiveness then decide what the core hears. Set before
  // Connect(): the core reads the traits once.
  void EmulateLivenessRecord();
  bool emulates_liveness() const;

  // Calls of `op` that reached the decorator, and of those, the ones that
  // are blocked now.
  int calls(Op op) const;
  // Waits until `count` calls of `op` have reached the decorator, or
  // `timeout` (real time) passes; returns whether they did.
  bool WaitForCalls(Op op, int count, absl::Duration timeout) const;
  bool WaitForBlocked(Op op, int count, absl::Duration timeout) const;

 private:
  friend class FaultInjectingBackend;
  // What the decorator does with one call of `op`: takes the fault (one
  // use of it) and waits out `block` and `delay_before`.
  Fault Enter(Op op);

  mutable absl::Mutex mu_;
  std::array<Fault, kOpCount> faults_ ABSL_GUARDED_BY(mu_);
  std::array<int, kOpCount> calls_ ABSL_GUARDED_BY(mu_) = {};
  std::array<int, kOpCount> blocked_ ABSL_GUARDED_BY(mu_) = {};
  std::array<uint64_t, kOpCount> unblocks_ ABSL_GUARDED_BY(mu_) = {};
  MonoTime held_until_ ABSL_GUARDED_BY(mu_) = MonoTime::InfiniteFuture();
  bool emulate_liveness_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_FAULT_BACKEND_H_
