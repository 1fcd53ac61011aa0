// Copyright dlock authors. The backend-independent half of every client, as
// a thin facade over its parts:
//   - the hold table (hold_table.h): what this client believes it holds and
//     until when (C19), which losses to tell (C20);
//   - the pending releases (pending_releases.h): releases the backend did
//     not confirm, retried until it does or the lease ends (C21);
//   - the renewer (renewer.h): the watchdog's renewals (C7), the liveness
//     heartbeat and the release retries, on one thread;
//   - the notifier (notifier.h): deadlines and lost notices, on another.
// The facade validates what service code asks, calls the backend on the
// caller's thread, and records the answers in the tables; Close() ends it
// all (C13).
//
// Acquisition and administration are in client_core.cc; releases, keeps and
// renewals in client_core_release.cc; Close() in client_core_close.cc; what
// the primitives of issue 24 need beyond holds in primitives_core.cc.
#ifndef DLOCK_CORE_SRC_CLIENT_CORE_H_
#define DLOCK_CORE_SRC_CLIENT_CORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core_state.h"
#include "dlock/backend/backend.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "hold_site.h"
#include "notifier.h"
#include "observer_calls.h"
#include "renewer.h"

namespace dlock::internal {

// What an acquisition asks beyond a lock's writer (issue 24): the shape of
// the hold, an election's value, and where the permit slots granted go.
struct HoldAsk {
  HoldShape shape;  // default: a lock's exclusive hold
  absl::string_view value;
  std::vector<int64_t>* slots = nullptr;
};

class ClientCore : public BackendListener,
                   public HoldSite,
                   public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(ClientOptions options, std::string lock_namespace,
             std::string client_id, std::string endpoint);
  ~ClientCore() override;

  // Takes the backend and starts the threads; called once.
  void Start(std::unique_ptr<Backend> backend);

  // Tells the observer, if any, around AcquireHold(). `name` is the
  // object's (already validated); `ask` says which hold of it.
  absl::StatusOr<::dlock::Hold> Acquire(absl::string_view name,
                                        const AcquireOptions& options,
                                        const HoldAsk& ask = {});
  // LockClient::OwnerTokens() and the primitives' *ByToken calls (`name` a
  // lock's, or a primitive's hold's key, qualified_name.h): by an explicit
  // owner token (C6), the owner's hold here (its innermost acquisition, for
  // a release), or one taken elsewhere.
  absl::Status ReleaseByToken(absl::string_view name,
                              absl::string_view owner_token);
  absl::Status RenewByToken(absl::string_view name,
                            absl::string_view owner_token,
                            std::optional<absl::Duration> lease);
  LockState StateByToken(absl::string_view name, absl::string_view owner_token);

  // HoldSite: what a Hold asks about its own acquisition.
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
                  const HoldShape& shape, const absl::Status& reason) override;

  // client_core_multi.cc: a multi-lock's names (sorted, checked) taken in
  // one step by a backend whose traits say MultiLockMode::kAtomic
  // (Backend::AcquireAll); one Hold per name, in order, or none (C25).
  absl::StatusOr<std::vector<::dlock::Hold>> AcquireTogether(
      absl::Span<const std::string> names, const AcquireOptions& options);

  // ---- Beyond the mutex (issue 24; primitives_core.cc) ------------------
  // Unimplemented, with the traits' note, when the backend does not offer
  // `kind` (a lock's readers for kLock with `shared`).
  absl::Status CheckOffered(ObjectKind kind, bool shared) const;
  // The owner id `owner_token` names (the calling thread's when empty).
  absl::StatusOr<std::string> OwnerOf(absl::string_view owner_token) const;
  // Whether `owner` has a believed hold of `key` here, with no round trip.
  bool Believes(absl::string_view key, absl::string_view owner);
  absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                           absl::string_view name);
  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(ObjectKind kind,
                                                      absl::string_view prefix);
  absl::Status ForceUnlockObject(ObjectKind kind, absl::string_view name,
                                 std::optional<uint64_t> fencing_token);
  // Leadership::Proclaim(): the leadership `hold` (an election's) announces
  // `value`; a GONE answer marks it lost, as a renewal's would.
  absl::Status Proclaim(const ::dlock::Hold& hold, absl::string_view value);
  // Election::WaitForChange()'s wait: registers a watch of the object
  // (Backend::WatchObject), then reads it until `changed` says a reading
  // differs, which it returns; woken by the watch, with the fallback poll
  // in case an announcement is lost (C9). DeadlineExceeded (IsWaitExpired)
  // at `until`, Cancelled on `cancel`, IsClientClosed on Close().
  absl::StatusOr<ObjectInfo> WaitForObject(
      ObjectKind kind, absl::string_view name, MonoTime until,
      const CancelToken& cancel,
      absl::FunctionRef<bool(const ObjectInfo&)> changed);

  const std::string& client_id() const { return client_id_; }
  const std::string& lock_namespace() const { return state_.lock_namespace; }
  const std::string& endpoint() const { return state_.endpoint; }
  // Unique to this client object in this process, even when two clients (or
  // two processes, or a parent and its forked child) share a client id.
  std::string CurrentOwner() const { return ThreadOwnerRef(); }
  const Clock& clock() const { return state_.clock; }
  const BackendTraits& traits() const { return traits_; }
  const ObserverCalls& observer() const { return state_.observer; }

 private:
  // The calling thread's default owner: built once per thread and client.
  const std::string& ThreadOwnerRef() const;
  absl::StatusOr<std::string> ResolveOwner(absl::string_view owner_token) const;
  absl::StatusOr<std::string> TokenOwnerOf(absl::string_view owner_token) const;
  absl::Status CheckOpen() const ABSL_LOCKS_EXCLUDED(state_.mu);

  // client_core.cc: acquisition.
  // The lease an acquisition asks (its own, or the watchdog's), once its
  // lease and wait are checked (InvalidArgument).
  absl::StatusOr<absl::Duration> LeaseOf(const AcquireOptions& options) const;
  absl::StatusOr<::dlock::Hold> AcquireHold(absl::string_view name,
                                            const AcquireOptions& options,
                                            const std::string& owner,
                                            OwnerKind kind, const HoldAsk& ask,
                                            bool& fresh);
  // Before a new acquisition of `key`: a release still pending for it must
  // be confirmed first, so that the acquisition is fresh (C21). Then
  // registers the acquisition (PendingReleases::BeforeAcquire).
  // `held` gets the record of the hold being re-entered, if one is believed.
  // Waits for another thread's release of `key`: when `waits`, until
  // call.deadline or call.cancel.
  absl::Status SettleAndRegister(const HoldKey& key, const AcquireCall& call,
                                 bool waits, uint64_t& releases_sent,
                                 std::shared_ptr<HoldRecord>& held)
      ABSL_LOCKS_EXCLUDED(state_.mu);
  // Settles a release of `key` still pending and registers the acquisition
  // (SettleAndRegister; `registered` says whether it got that far), then
  // asks the backend. A blocking wait ends on the caller's cancel or on
  // Close(), and rides out transient failures of both steps until
  // call.deadline (C18); a try makes one attempt of each.
  absl::StatusOr<Grant> SettleAndAcquire(
      const HoldKey& key, const AcquireOptions& options, AcquireCall& call,
      uint64_t& releases_sent, std::shared_ptr<HoldRecord>& held,
      bool& registered) ABSL_LOCKS_EXCLUDED(state_.mu);
  // client_core_multi.cc: one name of AcquireTogether().
  struct MultiPart {
    HoldKey key;
    AcquireCall call;
    uint64_t releases_sent = 0;
    std::shared_ptr<HoldRecord> held;
  };
  // Records what the backend answered for the first `registered` parts
  // (every one was registered): their Holds, or none and the error.
  absl::StatusOr<std::vector<::dlock::Hold>> RecordTogether(
      std::vector<MultiPart>& parts, size_t registered,
      absl::StatusOr<std::vector<Grant>> grants,
      absl::Span<const std::string> names, const AcquireOptions& options,
      MonoTime start) ABSL_LOCKS_EXCLUDED(state_.mu);
  absl::Status MultiAcquireError(const absl::Status& error,
                                 absl::Span<const std::string> names,
                                 const AcquireOptions& options,
                                 MonoTime start) const;
  void TellTogether(const std::vector<::dlock::Hold>& holds,
                    const std::vector<bool>& fresh,
                    absl::Span<const std::string> names,
                    const absl::Status& failed, MonoTime start) const;
  // What the caller gets for an acquisition that failed with `error`.
  absl::Status AcquireError(const absl::Status& error, absl::string_view key,
                            const AcquireOptions& options,
                            MonoTime start) const;
  // Records what the backend answered to `call` (sent at `start`) and makes
  // the caller's Hold.
  absl::StatusOr<::dlock::Hold> FinishAcquire(
      const HoldKey& key, const AcquireCall& call,
      const AcquireOptions& options, MonoTime start, uint64_t releases_sent,
      std::shared_ptr<HoldRecord> held, absl::StatusOr<Grant> grant,
      std::vector<int64_t>* slots, bool& fresh)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);

  // client_core_release.cc: releases, keeps, renewals.
  // What a release takes off: a Hold's acquisition, or one hold of the
  // owner by owner token.
  enum class ReleaseOf { kAcquisition, kOwner };
  absl::Status Release(const HoldRef& ref, ReleaseOf which,
                       absl::Duration keep_for);
  // Hold::ReleaseAndKeepFor() is a lock writer's, with no read of its owner
  // standing here (nothing changes when refused).
  absl::Status CheckKeepable(const HoldRef& ref);
  absl::Status ReleaseHold(const HoldRef& ref, ReleaseOf which,
                           absl::Duration keep_for,
                           std::vector<LossNotice>& notices,
                           ReleaseReport& report);
  // What a release of `plan` sends.
  static ReleaseCall CallOf(const HoldKey& key, const ReleasePlan& plan,
                            absl::Duration keep_for);
  // Final releases, bounded by the hold's local deadline (C20, C21): sends
  // the release and answers the caller when the backend confirms, or, if it
  // has not by then, when the hold's notice time comes, telling it lost.
  absl::Status SendFinalRelease(const HoldKey& key, const ReleasePlan& plan,
                                absl::Duration keep_for,
                                std::vector<LossNotice>& notices,
                                ReleaseReport& report)
      ABSL_LOCKS_EXCLUDED(state_.mu);
  // The answer to a final release sent on a helper thread, and whether its
  // caller still waits for it (guarded by state_.mu).
  struct HelperOutcome {
    bool done = false;
    bool abandoned = false;  // the caller was answered at the deadline
    MonoTime sent;
    absl::Status left = absl::UnknownError("not answered");
  };
  // On the helper thread: sends the release, then settles it unless the
  // caller still waits for the answer.
  void SendFinalReleaseOnHelper(const HoldKey& key, const ReleasePlan& plan,
                                absl::Duration keep_for,
                                std::shared_ptr<HelperOutcome> outcome)
      ABSL_LOCKS_EXCLUDED(state_.mu);
  // What the backend answered (sent at `sent`), once, whoever got it.
  absl::Status SettleFinalRelease(const HoldKey& key, const ReleasePlan& plan,
                                  absl::Duration keep_for, MonoTime sent,
                                  const absl::Status& left,
                                  std::vector<LossNotice>& notices,
                                  ReleaseReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // The hold of `generation`, or by owner token (nullopt) the owner's.
  absl::Status Renew(const HoldKey& key, std::optional<uint64_t> generation,
                     std::optional<absl::Duration> lease);
  void TellRelease(const HoldRef& ref, const ReleaseReport& report,
                   bool kept) const;

  // client_core_close.cc: what Close() releases, without the lock, in two
  // passes (what was pending, then what calls in flight left pending), by
  // `give_up`.
  struct CloseReleases {
    int sent = 0;
    int failed = 0;
    absl::Status first_error;
    absl::Status Status(absl::string_view endpoint) const;
  };
  void ReleaseAtClose(const std::vector<PendingReleases::Claim>& to_release,
                      MonoTime give_up, CloseReleases& outcome);

  // A backend that leaves out a primitive without saying why gets a generic
  // reason (primitives_core.cc).
  static void FillPrimitivesNote(BackendTraits& traits,
                                 absl::string_view endpoint);

  const std::string client_id_;
  const uint64_t instance_;  // random, tells this client object apart
  CoreState state_;
  Renewer renewer_;
  Notifier notifier_;
  BackendTraits traits_;  // the backend's, set by Start()
  // Fires on Close(): ends blocking waits.
  CancelToken closing_;

  // Held shared by every call into the backend from a caller's thread,
  // exclusively by Close() around Backend::Shutdown(), so that no call runs
  // on a shut-down backend.
  absl::Mutex ops_mu_ ABSL_ACQUIRED_BEFORE(state_.mu);
  std::thread renewer_thread_;
  std::thread notifier_thread_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_CLIENT_CORE_H_
