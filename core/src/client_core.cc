#include "client_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "identity.h"
#include "lease_policy.h"
#include "ride_out.h"

namespace dlock::internal {

ClientCore::ClientCore(ClientOptions options, std::string lock_namespace,
                       std::string client_id, std::string endpoint)
    : options_(std::move(options)),
      clock_owner_(options_.clock),
      clock_(clock_owner_ != nullptr ? *clock_owner_ : Clock::Real()),
      lock_namespace_(std::move(lock_namespace)),
      client_id_(std::move(client_id)),
      endpoint_(std::move(endpoint)),
      instance_(RandomBits()),
      observer_(options_.observer, lock_namespace_),
      renewer_wakes_at_(MonoTime::InfiniteFuture()),
      notifier_wakes_at_(MonoTime::InfiniteFuture()),
      renewer_wake_(clock_),
      notifier_wake_(clock_),
      released_(clock_) {}

ClientCore::~ClientCore() { Close().IgnoreError(); }

void ClientCore::Start(std::unique_ptr<Backend> backend) {
  backend_ = std::move(backend);
  traits_ = backend_->Traits();
  if (traits_.liveness_record) {
    liveness_ttl_ = options_.liveness_ttl;
    if (KeepsLiveness()) {
      absl::MutexLock lock(&mu_);
      liveness_until_ = MonoTime::InfinitePast();  // nothing confirmed yet
    }
  }
  // The threads keep the core alive: a lost callback may close the client
  // and drop the last reference while a thread is still unwinding.
  renewer_ = std::thread([self = shared_from_this()] { self->RenewerLoop(); });
  notifier_ =
      std::thread([self = shared_from_this()] { self->NotifierLoop(); });
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
  absl::MutexLock lock(&mu_);
  return closed_ ? ClosedError() : absl::OkStatus();
}

MonoTime ClientCore::LocalDeadline(MonoTime sent, absl::Duration lease) const {
  return sent + lease - DriftMargin(lease);
}

MonoTime ClientCore::DeadlineOf(const HoldKeyView& key, const HoldEntry& hold) {
  return std::min(
      {hold.valid_until, liveness_until_,
       backend_->HeldUntil(key.first, key.second, hold.record.get())});
}

int64_t ClientCore::AllHoldsOf(absl::string_view owner, const HoldEntry& hold) {
  // A thread owner is this client's alone: whatever the backend counts for
  // it (acquisitions whose reply was lost included) is this hold's.
  return IsThreadOwner(owner) ? kAllHolds : hold.local_holds + hold.unsynced;
}

absl::StatusOr<::dlock::Hold> ClientCore::AcquireHold(
    absl::string_view name, const AcquireOptions& options,
    const std::string& owner_id, bool& fresh) {
  const std::string* owner = &owner_id;
  const absl::Duration lease = options.lease.value_or(options_.watchdog_lease);
  if (absl::Status s = ValidateLease(lease); !s.ok()) return s;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must not be negative");
  }
  absl::ReaderMutexLock in_flight(&ops_mu_);
  const HoldKey key(name, *owner);
  const MonoTime start = clock_.Now();
  AcquireCall call{.name = name,
                   .owner = *owner,
                   .lease = lease,
                   .deadline = options.wait == absl::InfiniteDuration()
                                   ? MonoTime::InfiniteFuture()
                                   : start + options.wait,
                   .cancel = options.cancel};
  uint64_t releases_before = 0;
  std::shared_ptr<HoldRecord> held;
  bool registered = false;
  absl::StatusOr<Grant> grant =
      SettleAndAcquire(key, options, call, releases_before, held, registered);
  if (!registered) {
    if (closing_.IsCancelled() && !options.cancel.IsCancelled()) {
      return ClosedError();
    }
    return grant.status();
  }

  absl::MutexLock lock(&mu_);
  const size_t key_hash = HoldKeyHash()(key);
  Acquiring& a = acquiring_[key_hash];
  // A background release of this owner's lost hold, sent while the grant
  // was on its way, may have taken off what was just granted (C1).
  const bool raced =
      a.releases_sent != releases_before || pending_releases_.contains(key);
  if (--a.count == 0) acquiring_.erase(key_hash);
  if (!grant.ok()) {
    if (closing_.IsCancelled() && !options.cancel.IsCancelled()) {
      return ClosedError();
    }
    if (absl::IsDeadlineExceeded(grant.status())) {
      // Backends only say that the lock stayed held; the contract's words
      // are the core's (C10, C14).
      return options.wait > absl::ZeroDuration()
                 ? WaitExpiredError(name, clock_.Now() - start)
                 : HeldByAnotherError(name);
    }
    return grant.status();
  }
  // A re-entry keeps the record of the hold it re-entered (backend.h).
  if (grant->record == nullptr) grant->record = held;
  // The grant refreshed this client's liveness record in the same step.
  if (KeepsLiveness()) LivenessConfirmed(grant->sent);
  if (closed_) {
    // Close() began while we were acquiring; it will not see this hold.
    mu_.Unlock();
    backend_->Release(ReleaseCall{name, *owner, 1, grant->record.get()})
        .IgnoreError();
    mu_.Lock();
    return ClosedError();
  }
  if (raced) {
    AddPendingRelease(key, IsThreadOwner(*owner) ? kAllHolds : 1, lease,
                      grant->record);
    return absl::UnavailableError(absl::StrCat(
        "lock '", name,
        "' was granted while a release of an earlier hold of this owner was "
        "under way, which may have taken the grant off; try again"));
  }
  CancelToken lost_token;
  uint64_t acquisition = 0;
  HoldEntry& hold =
      RecordGrant(key, *grant, options, lease, lost_token, acquisition, fresh);
  if (LatchDeadline(key, hold, clock_.Now())) {
    // The reply came back after the lease it started had run out (or the
    // backend's session bound passed meanwhile): not to be believed (C19).
    // What may be left of it is let go in the background.
    return absl::UnavailableError(absl::StrCat(
        "lock '", name, "' was granted, but the reply took ",
        absl::FormatDuration(clock_.Now() - grant->sent),
        ", past the hold's deadline (lease ", absl::FormatDuration(lease),
        "): the hold may already be another owner's; try again"));
  }
  // A thread owner's count is the caller's own acquisitions; an owner
  // token's is the backend's, shared by every process that uses it.
  const int64_t count =
      IsThreadOwner(*owner)
          ? hold.local_holds
          : std::max<int64_t>(1, grant->hold_count - hold.unsynced);
  return MakeHold(shared_from_this(), std::string(name), *owner,
                  grant->fencing_token, count, hold.generation, acquisition,
                  std::move(lost_token));
}

absl::StatusOr<Grant> ClientCore::SettleAndAcquire(
    const HoldKey& key, const AcquireOptions& options, AcquireCall& call,
    uint64_t& releases_before, std::shared_ptr<HoldRecord>& held,
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
  RideOut ride(clock_, call.name,
               waits ? call.deadline : MonoTime::InfinitePast(), either);
  absl::Status settled;
  do {
    settled = SettleAndRegister(key, releases_before, held);
  } while (!settled.ok() && ride.Again(settled));
  if (!settled.ok()) return ride.Final(settled);
  registered = true;
  call.held = held.get();
  absl::StatusOr<Grant> grant;
  do {
    grant = backend_->Acquire(call);
  } while (!grant.ok() && ride.Again(grant.status()));
  if (!grant.ok()) return ride.Final(grant.status());
  return grant;
}

ClientCore::HoldEntry& ClientCore::RecordGrant(
    const HoldKey& key, const Grant& grant, const AcquireOptions& options,
    absl::Duration lease, CancelToken lost, uint64_t& acquisition,
    bool& fresh) {
  HoldEntry& hold = holds_[key];
  const MonoTime now = clock_.Now();
  const bool same_hold = hold.local_holds > 0 && !hold.lost &&
                         hold.fencing_token == grant.fencing_token;
  if (same_hold && now < DeadlineOf(key, hold) - NoticeLead(hold.lease)) {
    // Re-entry never shortens the lease (C5); the backend kept the maximum.
    hold.lease = std::max(hold.lease, lease);
    hold.max_lease = std::max(hold.max_lease, lease);
    hold.valid_until =
        std::max(hold.valid_until, LocalDeadline(grant.sent, lease));
    if (grant.record != nullptr) hold.record = grant.record;
    if (!options.lease.has_value() && !hold.renewed) {
      hold.renewed = true;
      hold.next_renewal = grant.sent + hold.lease / 3;
    }
  } else {
    const bool continues =
        hold.local_holds > 0 && hold.fencing_token == grant.fencing_token;
    if (hold.local_holds > 0 && !hold.lost) {
      // Still believed, yet not re-entered: its deadline passed, or the
      // backend granted a new hold because the old one was gone (forced
      // away, expired). Its acquisitions are told (C20). The new grant
      // replaces what the backend had of it.
      DeadlineLoss loss =
          continues ? DeadlineReason(key, hold)
                    : DeadlineLoss{
                          absl::FailedPreconditionError(absl::StrCat(
                              "the backend granted a new hold (token ",
                              grant.fencing_token, "), so this one was gone")),
                          LossCause::kGone};
      MarkLostQueued(key, hold, std::move(loss.reason), loss.cause,
                     Leftover::kGone);
    }
    // An owner token's holds the backend still counts for the hold the new
    // grant continues.
    const int64_t kept =
        continues && !IsThreadOwner(key.second)
            ? std::min(hold.local_holds + hold.unsynced, grant.hold_count - 1)
            : 0;
    const absl::Duration kept_lease = continues ? hold.max_lease : lease;
    hold = HoldEntry{};
    hold.generation = next_generation_++;
    hold.fencing_token = grant.fencing_token;
    hold.granted = now;
    hold.unsynced = std::max<int64_t>(0, kept);
    hold.lease = lease;
    hold.max_lease = std::max(lease, kept_lease);
    hold.renewed = !options.lease.has_value();
    hold.record = grant.record;
    hold.valid_until = LocalDeadline(grant.sent, lease);
    hold.next_renewal = grant.sent + lease / 3;
  }
  acquisition = next_acquisition_++;
  // Fresh to the observer: no acquisition of it was live (the others, if
  // any, were left to run out and told as released).
  fresh = hold.acquisitions.empty();
  hold.acquisitions.push_back(Acquisition{.id = acquisition,
                                          .granted = now,
                                          .on_lost = options.on_lost,
                                          .lost = std::move(lost)});
  ++hold.local_holds;
  WakeFor(key, hold);
  return hold;
}

absl::Status ClientCore::KeepAcquisition(const HoldRef& ref,
                                         ReleaseReport& report) {
  absl::MutexLock lock(&mu_);
  if (closed_) return ClosedError();
  const HoldKeyView key(ref.name, ref.owner);
  auto it = holds_.find(key);
  if (it == holds_.end() || it->second.generation != ref.generation) {
    return LostError(ref.name, "the hold ended before it was kept");
  }
  HoldEntry& hold = it->second;
  if (LatchDeadline(it->first, hold, clock_.Now())) {
    return LostError(ref.name, hold.lost_reason.message());
  }
  if (hold.renewed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lock '", ref.name,
        "' is renewed by the watchdog and would never end if kept: only a "
        "hold with an explicit lease can be kept until its lease ends"));
  }
  auto own = FindAcquisition(hold, ref.acquisition);
  if (own == hold.acquisitions.end()) return ReleasedByToken(ref.name);
  report = ReleaseReport{.tell = true,
                         .fencing_token = hold.fencing_token,
                         .granted = own->granted};
  hold.acquisitions.erase(own);
  report.last = hold.acquisitions.empty();
  ++hold.kept;
  return absl::OkStatus();
}

absl::Status ClientCore::ReleaseByToken(absl::string_view name,
                                        absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = TokenOwnerOf(owner_token);
  if (!owner.ok()) return owner.status();
  return ReleaseAcquisition(HoldRef{.name = name, .owner = *owner},
                            absl::ZeroDuration());
}

absl::Status ClientCore::ReleaseAcquisition(const HoldRef& ref,
                                            absl::Duration keep_for) {
  std::vector<Delivery> deliveries;
  ReleaseReport report;
  absl::Status released;
  {
    absl::ReaderMutexLock in_flight(&ops_mu_);
    released = ReleaseHold(ref, keep_for, deliveries, report);
  }
  if (observer_ && report.tell) {
    TellRelease(ref, report, /*kept=*/false);
    if (report.given_up) {
      TellReleaseFailure(HoldKey(ref.name, ref.owner),
                         ReleaseFailureEvent::Stage::kCaller, report.result);
    }
  }
  // Without ops_mu_: a callback may call the client, even Close().
  Deliver(deliveries);
  return released;
}

absl::Status ClientCore::ReleaseHold(const HoldRef& ref,
                                     absl::Duration keep_for,
                                     std::vector<Delivery>& deliveries,
                                     ReleaseReport& report) {
  const HoldKey key(ref.name, ref.owner);
  const absl::string_view name = ref.name;
  auto lost_before = [&](const absl::Status& why) {
    return LostError(name, absl::StrCat(why.message(), " (before release)"));
  };
  HoldEntry given_up;  // the hold a final release gives up
  bool final_release = false;
  uint64_t generation = 0;  // 0: no hold of ours (one taken elsewhere, C6)
  int64_t holds = 1;
  std::shared_ptr<HoldRecord> record;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return ClosedError();
    auto it = holds_.find(key);
    if (ref.generation != 0 &&
        (it == holds_.end() || it->second.generation != ref.generation)) {
      if (TakeReleasedByToken(ref.generation)) return ReleasedByToken(name);
      // The Hold's hold ended (lost, and forgotten or replaced by a later
      // grant): what the owner holds now is not this Hold's to release.
      return LostError(name, "the hold ended before this release");
    }
    if (it != holds_.end()) {
      HoldEntry& hold = it->second;
      LatchDeadline(key, hold, clock_.Now());
      if (hold.lost) {
        // Known without asking the backend, which may be unreachable now;
        // what may remain of the hold there is being let go already.
        absl::Status why = hold.lost_reason;
        holds_.erase(it);
        return lost_before(why);
      }
      if (ref.acquisition != 0 && !HasAcquisition(hold, ref.acquisition)) {
        TakeReleasedByToken(ref.generation);
        return ReleasedByToken(name);
      }
      if (keep_for > absl::ZeroDuration() && hold.local_holds > 1) {
        // Keeping the lock is for the owner's last hold: the others would
        // be left holding nothing. No ErrorKind: nothing changed (Hold).
        return absl::FailedPreconditionError(absl::StrCat(
            "lock '", name, "' has ", hold.local_holds - 1,
            " other acquisition(s) of this owner standing (re-entry or "
            "KeepUntilLeaseEnd): release those first, then release this one "
            "keeping the lock; nothing was changed"));
      }
      generation = hold.generation;
      record = hold.record;
      report.fencing_token = hold.fencing_token;
      if (hold.local_holds > 1) {
        --hold.local_holds;
        // The acquisition's callback goes with it; by token, the
        // innermost's (releases of one owner are taken as nested).
        auto& acquisitions = hold.acquisitions;
        auto own = FindAcquisition(hold, ref.acquisition);
        if (own != acquisitions.end()) {
          report.tell = true;
          report.granted = own->granted;
          acquisitions.erase(own);
        } else if (!acquisitions.empty()) {
          report.tell = true;
          report.granted = acquisitions.back().granted;
          acquisitions.pop_back();
          ++released_by_token_[hold.generation];  // its Hold will ask
        }
        report.last = acquisitions.empty();
      } else {
        // Renewal stops now, whatever the backend answers (C21), and an
        // acquisition of the same key waits for the answer.
        final_release = true;
        report.tell = !hold.acquisitions.empty();
        report.last = true;
        if (report.tell) {
          auto own = FindAcquisition(hold, ref.acquisition);
          report.granted = own != hold.acquisitions.end()
                               ? own->granted
                               : hold.acquisitions.back().granted;
        }
        if (ref.acquisition == 0 && !hold.acquisitions.empty()) {
          // A Hold of this client stands for what a release by token
          // takes: it must learn that it was released, not lost.
          ++released_by_token_[hold.generation];
        }
        holds = AllHoldsOf(key.second, hold);
        given_up = std::move(hold);
        holds_.erase(it);
        ++releasing_[HoldKeyHash()(key)];
      }
    }
  }
  const MonoTime sent = clock_.Now();
  absl::StatusOr<int64_t> left = backend_->Release(
      ReleaseCall{.name = name,
                  .owner = ref.owner,
                  .holds = holds,
                  .record = record.get(),
                  .keep_for = final_release ? keep_for : absl::ZeroDuration()});
  report.result = left.status();
  // A release that finds the hold gone is told as its loss instead.
  if (IsGone(report.result)) report.tell = false;

  absl::MutexLock lock(&mu_);
  if (final_release) {
    const size_t key_hash = HoldKeyHash()(key);
    if (--releasing_[key_hash] == 0) releasing_.erase(key_hash);
    released_.Signal();
    if (left.ok()) return absl::OkStatus();
    if (IsGone(left.status())) {
      // The release is what found the loss: it is told now (C20).
      MarkLost(key, given_up, left.status(), LossCause::kGone, Leftover::kGone,
               deliveries);
      return lost_before(left.status());
    }
    report.given_up = true;
    // The backend, if it took the release, keeps the lock from no earlier
    // than `sent`: a retry keeps it until the same moment (C21).
    if (!closed_) {
      AddPendingRelease(key, holds, given_up.max_lease, record,
                        keep_for > absl::ZeroDuration()
                            ? sent + keep_for
                            : MonoTime::InfinitePast());
    }
    return WithContext(left.status(),
                       "the hold is given up, and its release is retried in "
                       "the background until the backend confirms it or the "
                       "lease ends");
  }
  if (generation == 0) return left.status();
  auto it = holds_.find(key);
  if (left.ok() || it == holds_.end() || it->second.generation != generation) {
    return absl::OkStatus();
  }
  if (IsGone(left.status())) {
    if (!it->second.lost) {
      MarkLost(key, it->second, left.status(), LossCause::kGone,
               Leftover::kGone, deliveries);
    }
    holds_.erase(it);
    return lost_before(left.status());
  }
  // Taken off here; the final release takes it off the backend too (or the
  // lease, if the client goes away first).
  ++it->second.unsynced;
  return absl::OkStatus();
}

absl::Status ClientCore::RenewAcquisition(const HoldRef& ref,
                                          std::optional<absl::Duration> lease) {
  return Renew(HoldKey(ref.name, ref.owner), ref.generation, lease);
}

absl::Status ClientCore::RenewByToken(absl::string_view name,
                                      absl::string_view owner_token,
                                      std::optional<absl::Duration> lease) {
  absl::StatusOr<std::string> owner = TokenOwnerOf(owner_token);
  if (!owner.ok()) return owner.status();
  return Renew(HoldKey(name, *owner), 0, lease);
}

absl::Status ClientCore::Renew(const HoldKey& key, uint64_t hold_generation,
                               std::optional<absl::Duration> lease) {
  const std::string& name = key.first;
  std::vector<Delivery> deliveries;
  absl::Status renewed;
  {
    absl::ReaderMutexLock in_flight(&ops_mu_);
    absl::Duration effective = options_.watchdog_lease;
    uint64_t generation = 0;
    uint64_t fencing_token = 0;
    std::shared_ptr<HoldRecord> record;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return ClosedError();
      auto it = holds_.find(key);
      if (hold_generation != 0 &&
          (it == holds_.end() || it->second.generation != hold_generation)) {
        return LostError(name, "the hold ended before this renewal");
      }
      if (it != holds_.end()) {
        LatchDeadline(key, it->second, clock_.Now());
        if (it->second.lost) {
          // Never renewed back to life, here or on the backend.
          return LostError(name, it->second.lost_reason.message());
        }
        effective = it->second.lease;
        generation = it->second.generation;
        fencing_token = it->second.fencing_token;
        record = it->second.record;
      }
    }
    if (lease.has_value()) effective = *lease;
    if (absl::Status s = ValidateLease(effective); !s.ok()) return s;
    const MonoTime sent = clock_.Now();
    renewed = backend_->Renew(RenewCall{.name = name,
                                        .owner = key.second,
                                        .lease = effective,
                                        .record = record.get()});
    if (observer_) {
      observer_.Tell(&LockObserver::OnRenewal,
                     RenewalEvent{.lock_namespace = lock_namespace_,
                                  .name = name,
                                  .owner = key.second,
                                  .fencing_token = fencing_token,
                                  .by_watchdog = false,
                                  .result = renewed});
    }

    absl::MutexLock lock(&mu_);
    auto it = holds_.find(key);
    if (it != holds_.end() && it->second.generation == generation &&
        !it->second.lost) {
      HoldEntry& hold = it->second;
      hold.max_lease = std::max(hold.max_lease, effective);
      // A confirmation that comes after the deadline does not bring the
      // hold back: it may have been seen lost meanwhile.
      if (!LatchDeadline(key, hold, clock_.Now())) {
        if (renewed.ok()) {
          hold.valid_until =
              std::max(hold.valid_until, LocalDeadline(sent, effective));
          WakeFor(key, hold);
        } else if (IsGone(renewed)) {
          MarkLost(key, hold, renewed, LossCause::kGone, Leftover::kGone,
                   deliveries);
        }
      }
    }
  }
  // Without ops_mu_: a callback may call the client, even Close().
  Deliver(deliveries);
  return renewed;
}

absl::StatusOr<LockInfo> ClientCore::Inspect(absl::string_view name) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return backend_->Inspect(name);
}

absl::StatusOr<bool> ClientCore::IsHeldOnBackend(const HoldRef& ref) {
  absl::StatusOr<LockInfo> info = Inspect(ref.name);  // takes ops_mu_
  if (!info.ok()) return info.status();
  return info->locked && info->owner == ref.owner;
}

void ClientCore::ReportReleaseError(absl::string_view name,
                                    const absl::Status& error) {
  ::dlock::ReportReleaseError(options_.on_release_error, name, error);
}

absl::Status ClientCore::ForceUnlock(absl::string_view name) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return backend_->ForceUnlock(name);
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
  return backend_->ForceUnlockIfToken(name, fencing_token);
}

absl::StatusOr<std::vector<LockInfo>> ClientCore::List(
    absl::string_view prefix) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return backend_->List(prefix);
}

absl::StatusOr<ServerMemory> ClientCore::ServerMemoryUse() {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return backend_->ServerMemoryUse();
}

LockState ClientCore::StateOf(const HoldRef& ref, absl::Status* reason) {
  absl::StatusOr<uint64_t> token =
      Believed(ref.name, ref.owner, ref.generation, ref.acquisition);
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
  return StateOf(HoldRef{.name = name, .owner = owner}, nullptr);
}

std::vector<ClientCore::Acquisition>::iterator ClientCore::FindAcquisition(
    HoldEntry& hold, uint64_t id) {
  return std::find_if(hold.acquisitions.begin(), hold.acquisitions.end(),
                      [id](const Acquisition& a) { return a.id == id; });
}

bool ClientCore::HasAcquisition(const HoldEntry& hold, uint64_t id) {
  return std::any_of(hold.acquisitions.begin(), hold.acquisitions.end(),
                     [id](const Acquisition& a) { return a.id == id; });
}

bool ClientCore::TakeReleasedByToken(uint64_t generation) {
  auto it = released_by_token_.find(generation);
  if (it == released_by_token_.end()) return false;
  if (--it->second == 0) released_by_token_.erase(it);
  return true;
}

absl::Status ClientCore::ReleasedByToken(absl::string_view name) {
  return WithContext(NotOwnerError(name),
                     "this acquisition was released by ReleaseByToken");
}

absl::StatusOr<uint64_t> ClientCore::Believed(absl::string_view name,
                                              absl::string_view owner,
                                              uint64_t generation,
                                              uint64_t acquisition) {
  absl::MutexLock lock(&mu_);
  // Close() released every hold (C13): none is held, none lost.
  if (closed_) return NotOwnerError(name);
  auto it = holds_.find(HoldKeyView(name, owner));
  if (generation != 0 && it == holds_.end() &&
      released_by_token_.contains(generation)) {
    return NotOwnerError(name);
  }
  if (generation != 0 &&
      (it == holds_.end() || it->second.generation != generation)) {
    // This Hold's hold is over, and was not released through it.
    return LostError(name,
                     "the hold ended, and a later one of the same owner is "
                     "not this one");
  }
  if (it == holds_.end()) return NotOwnerError(name);
  // A local clock read, never a round trip (C19); once past, for good.
  if (LatchDeadline(it->first, it->second, clock_.Now())) {
    return LostError(name, it->second.lost_reason.message());
  }
  if (acquisition != 0 && !HasAcquisition(it->second, acquisition)) {
    return NotOwnerError(name);  // released by token
  }
  return it->second.fencing_token;
}

}  // namespace dlock::internal
