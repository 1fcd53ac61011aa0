// Copyright dlock authors. The backend-independent half of every client: the
// local hold table, the local deadline of each hold (C19), the watchdog
// (C7), lost notifications told exactly once (C20), releases that the
// backend did not confirm (C21), and shutdown (C13).
//
// Two threads per client, whatever the number of locks: the renewer sends
// the watchdog's renewals and retries unconfirmed releases; the notifier
// marks holds lost at their deadlines and runs the lost callbacks. They are
// apart so that a renewal stuck in a slow network call cannot delay the
// notice that its hold is over.
//
// The calls service code makes are in client_core.cc; the two threads and
// Close() in client_core_background.cc.
#ifndef DLOCK_CORE_SRC_CLIENT_CORE_H_
#define DLOCK_CORE_SRC_CLIENT_CORE_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/hold_key.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "hold_site.h"
#include "observer_calls.h"

namespace dlock::internal {

using ::dlock::HoldKey;
using ::dlock::HoldKeyHash;
using ::dlock::HoldKeyView;
using ::dlock::HoldMap;

class ClientCore : public BackendListener,
                   public HoldSite,
                   public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(ClientOptions options, std::string lock_namespace,
             std::string client_id, std::string endpoint);
  ~ClientCore() override;

  // Takes the backend and starts the threads; called once.
  void Start(std::unique_ptr<Backend> backend);

  // Tells the observer, if any, around AcquireHold().
  absl::StatusOr<::dlock::Hold> Acquire(absl::string_view name,
                                        const AcquireOptions& options);
  // By an explicit owner token (C6): one hold of that owner, whichever.
  absl::Status ReleaseByToken(absl::string_view name,
                              absl::string_view owner_token);
  absl::Status RenewByToken(absl::string_view name,
                            absl::string_view owner_token,
                            std::optional<absl::Duration> lease);
  LockState StateByToken(absl::string_view name, absl::string_view owner_token);

  // HoldSite: what a Hold asks.
  // Takes one acquisition off: `ref.generation` 0 is whichever hold the
  // owner has, `ref.acquisition` 0 its innermost acquisition.
  absl::Status ReleaseAcquisition(const HoldRef& ref,
                                  absl::Duration keep_for) override;
  absl::Status KeepUntilLeaseEnd(const HoldRef& ref) override;
  absl::Status RenewAcquisition(const HoldRef& ref,
                                std::optional<absl::Duration> lease) override;
  LockState StateOf(const HoldRef& ref, absl::Status* reason) override;
  absl::StatusOr<bool> IsHeldOnBackend(const HoldRef& ref) override;
  void ReportReleaseError(absl::string_view name,
                          const absl::Status& error) override;

  // LockAdmin's calls.
  absl::StatusOr<LockInfo> Inspect(absl::string_view name);
  absl::Status ForceUnlock(absl::string_view name);
  absl::Status ForceUnlock(absl::string_view name, uint64_t fencing_token);
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix);
  absl::StatusOr<ServerMemory> ServerMemoryUse();
  absl::Status Close();

  void OnHoldLost(absl::string_view name, absl::string_view owner,
                  const absl::Status& reason) override;

  const std::string& client_id() const { return client_id_; }
  const std::string& lock_namespace() const { return lock_namespace_; }
  const std::string& endpoint() const { return endpoint_; }
  // Unique to this client object in this process, even when two clients (or
  // two processes, or a parent and its forked child) share a client id.
  std::string CurrentOwner() const { return ThreadOwnerRef(); }
  const Clock& clock() const { return clock_; }
  const BackendTraits& traits() const { return traits_; }
  const ObserverCalls& observer() const { return observer_; }

 private:
  // What an acquisition asked to be told of a loss.
  struct Acquisition {
    uint64_t id = 0;
    MonoTime granted;          // for the observer's hold time
    LockLostCallback on_lost;  // may be empty
    CancelToken lost;          // its Hold's lost_token()
  };

  struct HoldEntry {
    uint64_t generation = 0;  // tells a call's hold from a later one
    uint64_t fencing_token = 0;
    MonoTime granted;  // when this client recorded the hold's first grant
    int64_t local_holds = 0;  // taken through this client, not yet released
    // Explicit owner tokens only: holds the backend counts that the final
    // release must take off besides the caller's (inner releases that
    // could not reach it). A thread owner's final release takes off all.
    int64_t unsynced = 0;
    absl::Duration lease;  // of the renewals (and of the first grant)
    // The longest lease ever asked of the backend for this hold: it keeps
    // that maximum (C5), so the hold can outlive the client by as much.
    absl::Duration max_lease;
    bool renewed = false;                // by the watchdog
    std::shared_ptr<HoldRecord> record;  // the backend's (backend.h)
    // Believed held until here: the send time of the last grant or renewal
    // the backend confirmed, plus the lease, less the drift margin (C19).
    MonoTime valid_until;
    MonoTime next_renewal;
    absl::Status renewal_error;  // the last transient renewal failure
    bool lost = false;           // no longer believed; told, or being told
    absl::Status lost_reason;
    // One per acquisition, innermost last; a release takes its own off.
    std::vector<Acquisition> acquisitions;
    // Acquisitions left to run out with the lease (Hold::KeepUntilLeaseEnd),
    // counted in local_holds; nobody believes them.
    int64_t kept = 0;
  };

  // A release to retry in the background until the backend confirms it or
  // its lease must be over there (C21).
  struct PendingRelease {
    int64_t holds = 0;
    // The backend's record of the hold given up (the first, if several of
    // one key pile up).
    std::shared_ptr<HoldRecord> record;
    MonoTime give_up;
    MonoTime next_try;
    absl::Duration retry_every;
    bool in_flight = false;  // a thread is sending it now
    // Hold::ReleaseAndKeepFor(): the lock is to stay taken until here. Each
    // try asks for what is left from its send, so that a retry neither
    // frees the lock sooner (C21) nor keeps it longer than asked.
    MonoTime keep_until = MonoTime::InfinitePast();
  };

  // An acquisition in flight for a key, and the background releases sent
  // for that key meanwhile: one of them may have removed what it is
  // granted.
  struct Acquiring {
    int count = 0;
    uint64_t releases_sent = 0;
  };

  struct Delivery {
    LockLostEvent event;
    std::vector<LockLostCallback> callbacks;
    std::vector<CancelToken> tokens;
    // For the observer, told when the hold had acquisitions to tell.
    LossCause cause = LossCause::kGone;
    MonoTime granted;
  };

  // Why a deadline ended a hold, in words and as the observer's class.
  struct DeadlineLoss {
    absl::Status reason;
    LossCause cause;
  };

  // What the observer is told of one release (ReleaseEvent).
  struct ReleaseReport {
    bool tell = false;  // an acquisition this client granted ended
    uint64_t fencing_token = 0;
    MonoTime granted;
    bool last = false;
    // The backend's answer; a transient failure of the last release is
    // retried in the background.
    absl::Status result;
    bool given_up = false;  // the last release, unconfirmed
  };

  // Whether what a lost hold may have left on the backend must be let go
  // (the deadline passed, a grant came too late) or is gone already (the
  // backend said so, or a new grant replaces it).
  enum class Leftover { kGone, kRelease };

  // The hold's fencing token while it is believed held; NotFound when the
  // owner has no hold here, FailedPrecondition (IsLost) when it was lost or
  // (generation not 0) is not that hold any more.
  absl::StatusOr<uint64_t> Believed(absl::string_view name,
                                    absl::string_view owner,
                                    uint64_t generation, uint64_t acquisition)
      ABSL_LOCKS_EXCLUDED(mu_);
  static bool HasAcquisition(const HoldEntry& hold, uint64_t id);
  // The acquisition `id` of `hold`, or its acquisitions' end().
  static std::vector<Acquisition>::iterator FindAcquisition(HoldEntry& hold,
                                                            uint64_t id);
  // Whether a release by token ended the hold of `generation` under a Hold
  // of this client; counts that Hold off.
  bool TakeReleasedByToken(uint64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::Status ReleasedByToken(absl::string_view name);
  absl::Status Renew(const HoldKey& key, uint64_t generation,
                     std::optional<absl::Duration> lease);
  absl::StatusOr<std::string> TokenOwnerOf(absl::string_view owner_token) const;
  // The calling thread's default owner: built once per thread and client.
  const std::string& ThreadOwnerRef() const;
  absl::StatusOr<std::string> ResolveOwner(absl::string_view owner_token) const;
  absl::Status CheckOpen() const;
  absl::Status ClosedError() const { return ClientClosedError(endpoint_); }
  MonoTime LocalDeadline(MonoTime sent, absl::Duration lease) const;
  // The earlier of the hold's lease deadline and the backend's bound.
  MonoTime DeadlineOf(const HoldKeyView& key, const HoldEntry& hold)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many holds a release of the whole hold takes off the backend.
  static int64_t AllHoldsOf(absl::string_view owner, const HoldEntry& hold);
  // Marks a hold lost and queues its notice on `out`; deliver it with
  // Deliver() once no lock is held. A hold is marked lost once (C20).
  void MarkLost(const HoldKey& key, HoldEntry& hold, absl::Status reason,
                LossCause cause, Leftover leftover, std::vector<Delivery>& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same, queued for the notifier's thread.
  void MarkLostQueued(const HoldKey& key, HoldEntry& hold, absl::Status reason,
                      LossCause cause, Leftover leftover)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the hold lost if its deadline (less the notice lead) has passed:
  // once past, never believed again (C19, C20). Returns whether it is lost.
  bool LatchDeadline(const HoldKey& key, HoldEntry& hold, MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  DeadlineLoss DeadlineReason(const HoldKey& key, const HoldEntry& hold)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::vector<Delivery>& deliveries);
  // Records the new state of a hold after a grant and returns its entry;
  // `acquisition` gets the acquisition's id.
  HoldEntry& RecordGrant(const HoldKey& key, const Grant& grant,
                         const AcquireOptions& options, absl::Duration lease,
                         CancelToken lost, uint64_t& acquisition, bool& fresh)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReleaseHold(const HoldRef& ref, absl::Duration keep_for,
                           std::vector<Delivery>& deliveries,
                           ReleaseReport& report);
  // The ReleaseCall that sends a pending release at `now`.
  static ReleaseCall PendingCall(const HoldKey& key, const PendingRelease& p,
                                 MonoTime now);
  // Close()'s release of `p`: tried again with backoff while the backend
  // is transiently unavailable (a failover), until `until`.
  absl::StatusOr<int64_t> ReleaseOnClose(const HoldKey& key,
                                         const PendingRelease& p,
                                         MonoTime until);
  // Settles a release of `key` still pending and registers the acquisition
  // (SettleAndRegister; `registered` says whether it got that far), then
  // asks the backend. A waiting acquire rides out transient failures of
  // both until call.deadline (C18); a try makes one attempt of each.
  absl::StatusOr<Grant> SettleAndAcquire(const HoldKey& key,
                                         const AcquireOptions& options,
                                         AcquireCall& call,
                                         uint64_t& releases_before,
                                         std::shared_ptr<HoldRecord>& held,
                                         bool& registered);
  absl::StatusOr<::dlock::Hold> AcquireHold(absl::string_view name,
                                            const AcquireOptions& options,
                                            const std::string& owner,
                                            bool& fresh);
  absl::Status KeepAcquisition(const HoldRef& ref, ReleaseReport& report);
  void TellRelease(const HoldRef& ref, const ReleaseReport& report,
                   bool kept) const;
  void TellReleaseFailure(const HoldKey& key, ReleaseFailureEvent::Stage stage,
                          const absl::Status& error) const;

  // Before a new acquisition of `key`: a release still pending for it must
  // be confirmed first, so that the acquisition is fresh (C21). Then
  // registers the acquisition in acquiring_.
  // `held` gets the record of the hold being re-entered, if one is believed.
  absl::Status SettleAndRegister(const HoldKey& key, uint64_t& releases_sent,
                                 std::shared_ptr<HoldRecord>& held);
  void AddPendingRelease(const HoldKey& key, int64_t holds,
                         absl::Duration lease,
                         std::shared_ptr<HoldRecord> record,
                         MonoTime keep_until = MonoTime::InfinitePast())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A background release of `key` is about to be sent.
  void NoteReleaseSent(const HoldKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the threads if the hold needs them before they planned to wake.
  void WakeFor(const HoldKey& key, const HoldEntry& hold)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void RenewerLoop();
  void RenewDue(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Holder liveness (docs/reliability.md): whether the core keeps a
  // liveness record on the backend, whether it is due a refresh (some hold
  // is believed), the heartbeat itself, and what a confirmed refresh sent at
  // `sent` vouches for.
  bool KeepsLiveness() const {
    return liveness_ttl_ != absl::InfiniteDuration();
  }
  bool LivenessWanted() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefreshLiveness(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LivenessConfirmed(MonoTime sent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetryReleases(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifierLoop();
  // Marks holds whose notice time has come lost; returns the next one.
  MonoTime ExpireOverdue(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientOptions options_;
  const std::shared_ptr<Clock> clock_owner_;  // may be null: Clock::Real()
  const Clock& clock_;
  const std::string lock_namespace_;
  const std::string client_id_;
  const std::string endpoint_;
  const uint64_t instance_;  // random, tells this client object apart
  const ObserverCalls observer_;
  std::unique_ptr<Backend> backend_;
  BackendTraits traits_;  // the backend's, set by Start()
  // The liveness record's TTL, set by Start(): InfiniteDuration when the
  // backend keeps none or options_.liveness_ttl turns it off.
  absl::Duration liveness_ttl_ = absl::InfiniteDuration();
  CancelToken closing_;

  // Held shared by every call into the backend from a caller's thread,
  // exclusively by Close() around Backend::Shutdown(), so that no call runs
  // on a shut-down backend.
  absl::Mutex ops_mu_;
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(ops_mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_acquisition_ ABSL_GUARDED_BY(mu_) = 1;
  HoldMap<HoldEntry> holds_ ABSL_GUARDED_BY(mu_);
  HoldMap<PendingRelease> pending_releases_ ABSL_GUARDED_BY(mu_);
  // Holds ended by a release by token while Holds of this client stood for
  // them: generation -> Holds that have not asked since.
  absl::flat_hash_map<uint64_t, int64_t> released_by_token_
      ABSL_GUARDED_BY(mu_);
  // Final releases in flight on callers' threads, and acquisitions in
  // flight, by HoldKeyHash: no allocation on the fast path; two keys that
  // share a hash only make one wait for, or refuse, the other's.
  absl::flat_hash_map<size_t, int> releasing_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<size_t, Acquiring> acquiring_ ABSL_GUARDED_BY(mu_);
  // Notices for the notifier's thread, oldest first.
  std::deque<Delivery> queued_ ABSL_GUARDED_BY(mu_);
  // Every hold is believed at most until here: the send time of the last
  // confirmed liveness refresh (a heartbeat or a grant) plus the TTL, less
  // the drift margin (C19). InfiniteFuture without liveness.
  MonoTime liveness_until_ ABSL_GUARDED_BY(mu_) = MonoTime::InfiniteFuture();
  MonoTime next_heartbeat_ ABSL_GUARDED_BY(mu_) = MonoTime::InfinitePast();
  absl::Status heartbeat_error_ ABSL_GUARDED_BY(mu_);  // the last failure
  // When each thread plans to wake next: a change that needs it sooner
  // signals it, others do not.
  MonoTime renewer_wakes_at_ ABSL_GUARDED_BY(mu_);
  MonoTime notifier_wakes_at_ ABSL_GUARDED_BY(mu_);
  ClockCondVar renewer_wake_;   // renewals or releases are due sooner
  ClockCondVar notifier_wake_;  // a deadline sooner, or notices to deliver
  ClockCondVar released_;       // a release in flight for a key ended
  std::thread renewer_;
  std::thread notifier_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_CLIENT_CORE_H_
