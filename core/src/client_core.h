// Copyright dlock authors. The backend-independent half of every client: the
// local hold table, the local deadline of each hold (C19), the watchdog
// (C7), lost notifications told exactly once (C20), releases that the
// backend did not confirm (C21), and shutdown (C13).
//
// Two threads per client, whatever the number of locks: the renewer sends
// the watchdog's renewals and retries unconfirmed releases; the notifier
// wakes at each hold's local deadline and runs the lost callbacks. They are
// apart so that a renewal stuck in a slow network call cannot delay the
// notice that its hold is over.
#ifndef DLOCK_CORE_SRC_CLIENT_CORE_H_
#define DLOCK_CORE_SRC_CLIENT_CORE_H_

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend.h"
#include "dlock/client.h"
#include "dlock/clock.h"

namespace dlock::internal {

class ClientCore : public BackendListener,
                   public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(ClientOptions options, std::string lock_namespace,
             std::string client_id, std::string endpoint);
  ~ClientCore() override;

  // Takes the backend and starts the threads; called once.
  void Start(std::unique_ptr<Backend> backend);

  absl::StatusOr<Acquired> Acquire(absl::string_view name,
                                   const AcquireOptions& options);
  absl::Status Release(absl::string_view name, absl::string_view owner_token);
  absl::Status Renew(absl::string_view name,
                     std::optional<absl::Duration> lease,
                     absl::string_view owner_token);
  absl::StatusOr<LockInfo> Inspect(absl::string_view name);
  absl::StatusOr<bool> IsHeldByMe(absl::string_view name,
                                  absl::string_view owner_token);
  absl::Status ForceUnlock(absl::string_view name);
  LockState State(absl::string_view name, absl::string_view owner_token);
  absl::StatusOr<uint64_t> FencingToken(absl::string_view name,
                                        absl::string_view owner_token);
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix);
  absl::Status Close();

  void OnHoldLost(absl::string_view name, absl::string_view owner,
                  const absl::Status& reason) override;

  const std::string& client_id() const { return client_id_; }
  const std::string& lock_namespace() const { return lock_namespace_; }
  const std::string& endpoint() const { return endpoint_; }
  // Unique to this client object in this process, even when two clients (or
  // two processes, or a parent and its forked child) share a client id.
  std::string CurrentOwner() const;
  const Clock& clock() const { return clock_; }

 private:
  using HoldKey = std::pair<std::string, std::string>;  // name, owner

  struct Hold {
    uint64_t generation = 0;  // tells a call's hold from a later one
    uint64_t fencing_token = 0;
    int64_t local_holds = 0;  // taken through this client, not yet released
    // Releases the backend did not confirm: the final release takes them
    // off too, and so do acquisitions whose reply was lost (C21).
    int64_t unsynced = 0;
    absl::Duration lease;  // the longest asked for this hold
    bool renewed = false;  // by the watchdog
    // Believed held until here: the send time of the last grant or renewal
    // the backend confirmed, plus the lease, less the drift margin (C19).
    MonoTime valid_until;
    MonoTime next_renewal;
    absl::Status renewal_error;  // the last transient renewal failure
    bool lost = false;           // no longer believed; told, or being told
    absl::Status lost_reason;
    std::vector<LockLostCallback> on_lost;  // one per acquisition that asked
  };

  // A release the backend did not confirm. Retried in the background until
  // it is confirmed or the backend's lease must be over (C21).
  struct PendingRelease {
    int64_t holds = 0;
    MonoTime give_up;
    MonoTime next_try;
    absl::Duration retry_every;
    bool in_flight = false;  // a thread is sending it now
  };

  // Acquisitions that failed in a way that may have happened on the
  // backend (a lost reply): a later grant counting more holds than the
  // client knows of includes them (C21).
  struct UncertainAcquires {
    int64_t count = 0;
    MonoTime until;  // by then their lease is over on the backend
  };

  struct Delivery {
    LockLostEvent event;
    std::vector<LockLostCallback> callbacks;
  };

  absl::StatusOr<std::string> ResolveOwner(absl::string_view owner_token) const;
  absl::Status CheckOpen() const;
  absl::Status ClosedError() const;
  MonoTime LocalDeadline(MonoTime sent, absl::Duration lease) const;
  // The earlier of the hold's lease deadline and the backend's bound.
  MonoTime DeadlineOf(const HoldKey& key, const Hold& hold)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks a hold lost and adds its notice to `out`; deliver it with
  // Deliver() once no lock is held. A hold is marked lost once (C20).
  void MarkLost(const HoldKey& key, Hold& hold, absl::Status reason,
                std::vector<Delivery>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::vector<Delivery>& deliveries);
  // Records the new state of a hold after a grant; returns how many of the
  // backend's holds the client will take off at the final release beyond
  // the caller's own.
  int64_t RecordGrant(const HoldKey& key, const Grant& grant,
                      const AcquireOptions& options, absl::Duration lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before a new acquisition of `key`: a release still pending for it must
  // be confirmed first, so that the acquisition is fresh (C21).
  absl::Status SettlePendingRelease(const HoldKey& key);
  // Release() without the owner's resolution; adds the notices to tell.
  absl::Status ReleaseHold(const HoldKey& key,
                           std::vector<Delivery>& deliveries);
  void AddPendingRelease(const HoldKey& key, int64_t holds,
                         absl::Duration lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteUncertainAcquire(const HoldKey& key, absl::Duration lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void RenewerLoop();
  void RenewDue(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetryReleases(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifierLoop();
  // Marks holds past their deadline lost; returns the next deadline.
  MonoTime ExpireOverdue(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientOptions options_;
  const std::shared_ptr<Clock> clock_owner_;  // may be null: Clock::Real()
  const Clock& clock_;
  const std::string lock_namespace_;
  const std::string client_id_;
  const std::string endpoint_;
  const uint64_t instance_;  // random, tells this client object apart
  std::unique_ptr<Backend> backend_;
  CancelToken closing_;

  // Held shared by every call into the backend from a caller's thread,
  // exclusively by Close() around Backend::Shutdown(), so that no call runs
  // on a shut-down backend.
  absl::Mutex ops_mu_;
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(ops_mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<HoldKey, Hold> holds_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<HoldKey, PendingRelease> pending_releases_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<HoldKey, UncertainAcquires> uncertain_
      ABSL_GUARDED_BY(mu_);
  // Notices for the notifier's thread: losses a backend reported, or the
  // renewer found.
  std::vector<Delivery> queued_ ABSL_GUARDED_BY(mu_);
  ClockCondVar renewer_wake_;   // new renewals or releases are due
  ClockCondVar notifier_wake_;  // a new deadline, or notices to deliver
  ClockCondVar released_;       // a pending release is no longer in flight
  std::thread renewer_;
  std::thread notifier_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_CLIENT_CORE_H_
