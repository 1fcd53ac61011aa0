// The client core's facade: owners, acquisition, local state and the
// administration calls. Releases and renewals are in client_core_release.cc,
// Close() in client_core_close.cc.
#include "client_core.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "dlock/ride_out.h"
#include "identity.h"
#include "lease_policy.h"
#include "qualified_name.h"

namespace dlock::internal {

ClientCore::ClientCore(ClientOptions options, std::string lock_namespace,
                       std::string client_id, std::string endpoint)
    : client_id_(std::move(client_id)),
      instance_(RandomBits()),
      state_(std::move(options), std::move(lock_namespace),
             std::move(endpoint)),
      renewer_(state_),
      notifier_(state_) {}

ClientCore::~ClientCore() { Close().IgnoreError(); }

void ClientCore::Start(std::unique_ptr<Backend> backend) {
  state_.backend = std::move(backend);
  traits_ = state_.backend->Traits();
  FillPrimitivesNote(traits_, state_.endpoint);
  if (traits_.liveness_record) {
    absl::MutexLock lock(&state_.mu);
    state_.holds.KeepLiveness(state_.options.liveness_ttl);
  }
  // The threads keep the core alive: a lost callback may close the client
  // and drop the last reference while a thread is still unwinding.
  renewer_thread_ =
      std::thread([self = shared_from_this()] { self->renewer_.Run(); });
  notifier_thread_ =
      std::thread([self = shared_from_this()] { self->notifier_.Run(); });
}

const std::string& ClientCore::ThreadOwnerRef() const {
  // State() runs on every guarded step of service code: no allocation.
  struct Cache {
    const ClientCore* core = nullptr;
    uint64_t instance = 0;
    uint64_t process = 0;
    std::string owner;
  };
  thread_local Cache cache;
  const uint64_t process = ProcessNonce();
  if (cache.core != this || cache.instance != instance_ ||
      cache.process != process) {
    cache = Cache{this, instance_, process, ThreadOwner(client_id_, instance_)};
  }
  return cache.owner;
}

absl::StatusOr<std::string> ClientCore::ResolveOwner(
    absl::string_view owner_token) const {
  if (owner_token.empty()) return ThreadOwnerRef();
  if (absl::Status s = ValidateOwnerToken(owner_token); !s.ok()) return s;
  return TokenOwner(owner_token);
}

absl::StatusOr<std::string> ClientCore::TokenOwnerOf(
    absl::string_view owner_token) const {
  if (owner_token.empty()) {
    return absl::InvalidArgumentError(
        "an owner token is required here: release or renew a hold of this "
        "thread through the Hold that Acquire() returned");
  }
  return ResolveOwner(owner_token);
}

absl::Status ClientCore::CheckOpen() const {
  absl::MutexLock lock(&state_.mu);
  return state_.closed ? state_.ClosedError() : absl::OkStatus();
}

absl::StatusOr<::dlock::Hold> ClientCore::Acquire(absl::string_view name,
                                                  const AcquireOptions& options,
                                                  const HoldAsk& ask) {
  absl::StatusOr<std::string> owner = ResolveOwner(options.owner_token);
  bool fresh = false;
  // The core makes owner ids; backends are told their kind, never parse
  // them (backend.h).
  const OwnerKind kind =
      options.owner_token.empty() ? OwnerKind::kThread : OwnerKind::kToken;
  const ObserverCalls& observer = state_.observer;
  if (!observer) {
    if (!owner.ok()) return owner.status();
    return AcquireHold(name, options, *owner, kind, ask, fresh);
  }
  const MonoTime start = state_.clock.Now();
  const bool shared = ask.shape.mode == HoldMode::kShared;
  const absl::string_view owner_id =
      owner.ok() ? absl::string_view(*owner) : absl::string_view();
  observer.Tell(&LockObserver::OnAcquireAttempt,
                AcquireAttemptEvent{.lock_namespace = state_.lock_namespace,
                                    .name = name,
                                    .owner = owner_id,
                                    .wait = options.wait,
                                    .kind = ask.shape.kind,
                                    .shared = shared});
  absl::StatusOr<::dlock::Hold> hold =
      owner.ok() ? AcquireHold(name, options, *owner, kind, ask, fresh)
                 : absl::StatusOr<::dlock::Hold>(owner.status());
  const absl::Duration waited = state_.clock.Now() - start;
  if (hold.ok()) {
    observer.Tell(&LockObserver::OnGrant,
                  GrantEvent{.lock_namespace = state_.lock_namespace,
                             .name = name,
                             .owner = owner_id,
                             .fencing_token = hold->fencing_token(),
                             .hold_count = hold->hold_count(),
                             .fresh = fresh,
                             .waited = waited,
                             .kind = ask.shape.kind,
                             .shared = shared});
  } else {
    observer.Tell(&LockObserver::OnAcquireFailed,
                  AcquireFailedEvent{.lock_namespace = state_.lock_namespace,
                                     .name = name,
                                     .waited = waited,
                                     .error = hold.status(),
                                     .kind = ask.shape.kind,
                                     .shared = shared});
  }
  return hold;
}

absl::StatusOr<absl::Duration> ClientCore::LeaseOf(
    const AcquireOptions& options) const {
  const absl::Duration lease =
      options.lease.value_or(state_.options.watchdog_lease);
  if (absl::Status s = ValidateLease(lease); !s.ok()) return s;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must not be negative");
  }
  return lease;
}

absl::StatusOr<::dlock::Hold> ClientCore::AcquireHold(
    absl::string_view name, const AcquireOptions& options,
    const std::string& owner, OwnerKind kind, const HoldAsk& ask, bool& fresh) {
  absl::StatusOr<absl::Duration> lease = LeaseOf(options);
  if (!lease.ok()) return lease.status();
  absl::ReaderMutexLock in_flight(&ops_mu_);
  const HoldKey key(QualifiedName(name, ask.shape), owner);
  if (ask.shape.mode == HoldMode::kPermits) {
    // A re-entry asking other permits is refused without a round trip.
    absl::MutexLock lock(&state_.mu);
    if (absl::Status s = state_.holds.CheckPermits(key, ask.shape.permits);
        !s.ok()) {
      return s;
    }
  }
  const MonoTime start = state_.clock.Now();
  AcquireCall call{.name = name,
                   .owner = owner,
                   .owner_kind = kind,
                   .lease = *lease,
                   .deadline = options.wait == absl::InfiniteDuration()
                                   ? MonoTime::InfiniteFuture()
                                   : start + options.wait,
                   .cancel = options.cancel,
                   .shape = ask.shape,
                   .value = ask.value};
  uint64_t releases_sent = 0;
  std::shared_ptr<HoldRecord> held;
  bool registered = false;
  absl::StatusOr<Grant> grant =
      SettleAndAcquire(key, options, call, releases_sent, held, registered);
  if (!registered) {
    if (closing_.IsCancelled() && !options.cancel.IsCancelled()) {
      return state_.ClosedError();
    }
    if (absl::IsDeadlineExceeded(grant.status())) {
      // SettleAndRegister's own words, as a wait that ended (C10).
      return WithKind(grant.status(), ErrorKind::kWaitExpired);
    }
    return grant.status();
  }
  absl::MutexLock lock(&state_.mu);
  return FinishAcquire(key, call, options, start, releases_sent,
                       std::move(held), std::move(grant), ask.slots, fresh);
}

absl::Status ClientCore::SettleAndRegister(const HoldKey& key,
                                           const AcquireCall& call, bool waits,
                                           uint64_t& releases_sent,
                                           std::shared_ptr<HoldRecord>& held) {
  // A release in flight can outlive its caller (one answered at its
  // hold's deadline leaves it to a helper thread): a waiting acquisition
  // waits for it no longer than its own wait, and stops on its cancel
  // (registered only once it waits: most acquisitions never do). A try
  // waits for it to end (C21: never inheriting what is being released, and
  // not refused for its own owner's release either); Close() ends that.
  std::optional<ScopedCancelCallback> woken;
  while (true) {
    std::optional<PendingReleases::Claim> claim;
    {
      absl::MutexLock lock(&state_.mu);
      PendingReleases::Turn turn = PendingReleases::Turn::kWait;
      while (true) {
        if (state_.closed) return state_.ClosedError();
        turn = state_.pending.BeforeAcquire(key, releases_sent, claim);
        if (turn != PendingReleases::Turn::kWait) break;
        if (call.cancel.IsCancelled()) {
          return WaitCancelledError(key.first);
        }
        if (waits && state_.clock.Now() >= call.deadline) {
          return absl::DeadlineExceededError(absl::StrCat(
              ObjectPhrase(key.first),
              " not acquired within the wait: it is still being released "
              "by this owner, and the release is not confirmed yet"));
        }
        // Another thread is sending a release of this key: wait for it.
        if (!woken.has_value()) {
          // The condition variable signals under a mutex of its own.
          ClockCondVar& released = state_.alarms.released();
          woken.emplace(call.cancel, [&released] { released.Signal(); });
          continue;  // a cancel before it was registered is seen above
        }
        state_.alarms.released().WaitUntil(
            &state_.mu, waits ? call.deadline : MonoTime::InfiniteFuture());
      }
      if (turn == PendingReleases::Turn::kGo) {
        held = state_.holds.BelievedRecord(key);
        return absl::OkStatus();
      }
    }
    absl::Status left;
    const PendingReleases::Settled settled = state_.SendRelease(
        *claim, ReleaseFailureEvent::Stage::kBackground, &left);
    if (settled == PendingReleases::Settled::kTaken) {
      return state_.ClosedError();  // Close() took it
    }
    if (settled == PendingReleases::Settled::kRetrying) {
      return absl::Status(
          left.code(),
          absl::StrCat("an earlier release of ", ObjectPhrase(key.first),
                       " is not confirmed yet, and it cannot be taken "
                       "afresh until it is: ",
                       left.message()));
    }
    // Confirmed: register, unless another release came meanwhile.
  }
}

absl::StatusOr<Grant> ClientCore::SettleAndAcquire(
    const HoldKey& key, const AcquireOptions& options, AcquireCall& call,
    uint64_t& releases_sent, std::shared_ptr<HoldRecord>& held,
    bool& registered) {
  const bool waits = options.wait > absl::ZeroDuration();
  // A blocking wait ends on the caller's cancel or on Close(). (A try
  // registers nothing: it is the hot path.)
  CancelToken either;
  std::optional<ScopedCancelCallback> by_caller, by_close;
  if (waits) {
    by_caller.emplace(options.cancel, [either] { either.Cancel(); });
    by_close.emplace(closing_, [either] { either.Cancel(); });
    call.cancel = either;
  }
  // A waiting acquire rides out a failover's few seconds of Unavailable,
  // whether a release still pending or the acquisition meets it; a try
  // stays fail-fast (C18).
  RideOut ride(state_.clock, key.first,
               waits ? call.deadline : MonoTime::InfinitePast(), either);
  absl::Status settled;
  do {
    settled = SettleAndRegister(key, call, waits, releases_sent, held);
  } while (!settled.ok() && ride.Again(settled));
  if (!settled.ok()) return ride.Final(settled);
  registered = true;
  call.held = held.get();
  absl::StatusOr<Grant> grant;
  do {
    grant = state_.backend->Acquire(call);
  } while (!grant.ok() && ride.Again(grant.status()));
  if (!grant.ok()) return ride.Final(grant.status());
  return grant;
}

absl::StatusOr<::dlock::Hold> ClientCore::FinishAcquire(
    const HoldKey& key, const AcquireCall& call, const AcquireOptions& options,
    MonoTime start, uint64_t releases_sent, std::shared_ptr<HoldRecord> held,
    absl::StatusOr<Grant> grant, std::vector<int64_t>* slots, bool& fresh) {
  // A background release of this owner's lost hold, sent while the grant
  // was on its way, may have taken off what was just granted (C1).
  const bool raced = state_.pending.AfterAcquire(key, releases_sent);
  if (!grant.ok()) {
    return AcquireError(grant.status(), key.first, options, start);
  }
  // A re-entry keeps the record of the hold it re-entered (backend.h).
  if (grant->record == nullptr) grant->record = std::move(held);
  // The grant refreshed this client's liveness record in the same step.
  if (state_.holds.keeps_liveness()) {
    state_.holds.LivenessConfirmed(grant->sent);
  }
  if (state_.closed) {
    // Close() began while we were acquiring; it will not see this hold.
    state_.mu.Unlock();
    state_.backend
        ->Release(ReleaseCall{.name = call.name,
                              .owner = call.owner,
                              .record = grant->record.get(),
                              .shape = call.shape})
        .IgnoreError();
    state_.mu.Lock();
    return state_.ClosedError();
  }
  if (raced) {
    state_.pending.Add(key,
                       call.owner_kind == OwnerKind::kThread
                           ? HoldsToRelease{.all = true}
                           : HoldsToRelease{.count = 1},
                       call.lease, grant->record);
    return absl::UnavailableError(absl::StrCat(
        ObjectPhrase(key.first),
        " was granted while a release of an earlier hold of this owner was "
        "under way, which may have taken the grant off; try again"));
  }
  std::shared_ptr<AcquisitionShare> acquisition;
  HoldEntry& hold =
      state_.holds.RecordGrant(key, call, *grant, options, acquisition, fresh);
  if (state_.holds.LatchDeadline(key, hold, state_.clock.Now())) {
    // The reply came back after the lease it started had run out (or the
    // backend's session bound passed meanwhile): not to be believed (C19).
    // What may be left of it is let go in the background.
    return absl::UnavailableError(absl::StrCat(
        ObjectPhrase(key.first), " was granted, but the reply took ",
        absl::FormatDuration(state_.clock.Now() - grant->sent),
        ", past the hold's deadline (lease ", absl::FormatDuration(call.lease),
        "): the hold may already be another owner's; try again"));
  }
  // A thread owner's count is the caller's own acquisitions; an owner
  // token's is the backend's, shared by every process that uses it.
  const int64_t count =
      call.owner_kind == OwnerKind::kThread
          ? hold.local_holds
          : std::max<int64_t>(1, grant->hold_count - hold.unsynced);
  if (slots != nullptr) *slots = hold.slots;
  return MakeHold(shared_from_this(), key.first, key.second,
                  grant->fencing_token, count, hold.generation,
                  std::move(acquisition));
}

absl::Status ClientCore::AcquireError(const absl::Status& error,
                                      absl::string_view key,
                                      const AcquireOptions& options,
                                      MonoTime start) const {
  if (closing_.IsCancelled() && !options.cancel.IsCancelled()) {
    return state_.ClosedError();
  }
  if (absl::IsDeadlineExceeded(error)) {
    // Backends only say that the lock stayed held; the contract's words are
    // the core's (C10, C14).
    return options.wait > absl::ZeroDuration()
               ? WaitExpiredError(key, state_.clock.Now() - start)
               : HeldByAnotherError(key);
  }
  return error;
}

LockState ClientCore::StateOf(const HoldRef& ref, absl::Status* reason) {
  absl::StatusOr<uint64_t> token;
  {
    absl::MutexLock lock(&state_.mu);
    // Close() released every hold (C13): none is held, none lost.
    token =
        state_.closed ? NotOwnerError(ref.name) : state_.holds.Believed(ref);
  }
  if (token.ok()) return LockState::kHeld;
  if (IsNotOwner(token.status())) return LockState::kNotHeld;
  if (reason != nullptr) *reason = token.status();
  return LockState::kLost;
}

LockState ClientCore::StateByToken(absl::string_view name,
                                   absl::string_view owner_token) {
  if (owner_token.empty() || !ValidateOwnerToken(owner_token).ok()) {
    return LockState::kNotHeld;
  }
  const std::string owner = TokenOwner(owner_token);
  absl::MutexLock lock(&state_.mu);
  if (state_.closed) return LockState::kNotHeld;  // Close() released it
  absl::StatusOr<uint64_t> token =
      state_.holds.BelievedByOwner(HoldKeyView(name, owner));
  if (token.ok()) return LockState::kHeld;
  return IsNotOwner(token.status()) ? LockState::kNotHeld : LockState::kLost;
}

void ClientCore::OnHoldLost(absl::string_view name, absl::string_view owner,
                            const HoldShape& shape,
                            const absl::Status& reason) {
  // Callbacks run on the notifier's thread, not the backend's: a callback
  // that calls into the client must not block the backend thread that
  // Close() waits for.
  absl::MutexLock lock(&state_.mu);
  if (shape.IsLockWriter()) {
    state_.holds.MarkLostByBackend(HoldKeyView(name, owner), reason);
  } else {
    const std::string key = QualifiedName(name, shape);
    state_.holds.MarkLostByBackend(HoldKeyView(key, owner), reason);
  }
}

absl::StatusOr<LockInfo> ClientCore::Inspect(absl::string_view name) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return state_.backend->Inspect(name);
}

absl::StatusOr<bool> ClientCore::IsHeldOnBackend(const HoldRef& ref) {
  if (IsQualified(ref.name)) {
    const HoldShape shape = ShapeOf(ref.name);
    absl::StatusOr<ObjectInfo> object =
        InspectObject(shape.kind, ObjectNameOf(ref.name));
    if (!object.ok()) return object.status();
    const bool shared = shape.mode == HoldMode::kShared;
    return std::any_of(object->holders.begin(), object->holders.end(),
                       [&](const HolderInfo& h) {
                         return h.owner == ref.owner && h.shared == shared;
                       });
  }
  absl::StatusOr<LockInfo> info = Inspect(ref.name);  // takes ops_mu_
  if (!info.ok()) return info.status();
  return info->locked && info->owner == ref.owner;
}

void ClientCore::ReportReleaseError(absl::string_view name,
                                    const absl::Status& error) {
  ::dlock::ReportReleaseError(state_.options.on_release_error, name, error);
}

absl::Status ClientCore::ForceUnlock(absl::string_view name) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return state_.backend->ForceUnlock(name);
}

absl::Status ClientCore::ForceUnlock(absl::string_view name,
                                     uint64_t fencing_token) {
  // Zero is no hold's token (C8): asking for it is a caller's mistake, not a
  // lock that happens to be held with another token.
  if (fencing_token == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "force unlock of lock '", name,
        "' on fencing token 0: no hold has token 0; pass the token that "
        "Inspect() or List() reported"));
  }
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return state_.backend->ForceUnlockIfToken(name, fencing_token);
}

absl::StatusOr<std::vector<LockInfo>> ClientCore::List(
    absl::string_view prefix) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return state_.backend->List(prefix);
}

absl::StatusOr<ServerMemory> ClientCore::ServerMemoryUse() {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return state_.backend->ServerMemoryUse();
}

}  // namespace dlock::internal
