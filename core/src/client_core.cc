#include "client_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "identity.h"

namespace dlock::internal {
namespace {

constexpr absl::Duration kMinLease = absl::Milliseconds(10);
// A renewal or release that failed for a transient reason is tried again
// this soon, or sooner for short leases (C7, C21).
constexpr absl::Duration kMaxRetry = absl::Seconds(1);
constexpr absl::Duration kMinRetry = absl::Milliseconds(5);

absl::Status ValidateLease(absl::Duration lease) {
  if (lease < kMinLease || lease == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease must be finite and at least ", absl::FormatDuration(kMinLease),
        ", not ", absl::FormatDuration(lease)));
  }
  return absl::OkStatus();
}

absl::Duration RetryEvery(absl::Duration lease) {
  return std::clamp(lease / 10, kMinRetry, kMaxRetry);
}

// How far the local clock may run slow against the backend's while a lease
// runs (C19): 1% of the lease plus 2 ms, as the Redlock algorithm allows.
absl::Duration DriftMargin(absl::Duration lease) {
  return lease / 100 + absl::Milliseconds(2);
}

// The notifier tells a loss this much before the local deadline, so that
// the notice precedes any other owner's grant even when the notifier's
// thread is scheduled late (C20).
absl::Duration NoticeLead(absl::Duration lease) {
  return std::min(lease / 20, absl::Milliseconds(20));
}

// Errors after which the request may still have run on the backend (a
// reply lost or too late). A wait that ran out is not one: its last attempt
// was answered.
bool MayHaveHappened(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsUnknown(status);
}

bool IsGone(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) || absl::IsNotFound(status);
}

}  // namespace

ClientCore::ClientCore(ClientOptions options, std::string lock_namespace,
                       std::string client_id, std::string endpoint)
    : options_(std::move(options)),
      clock_owner_(options_.clock),
      clock_(clock_owner_ != nullptr ? *clock_owner_ : Clock::Real()),
      lock_namespace_(std::move(lock_namespace)),
      client_id_(std::move(client_id)),
      endpoint_(std::move(endpoint)),
      instance_(RandomBits()),
      renewer_wake_(clock_),
      notifier_wake_(clock_),
      released_(clock_) {}

ClientCore::~ClientCore() { Close().IgnoreError(); }

void ClientCore::Start(std::unique_ptr<Backend> backend) {
  backend_ = std::move(backend);
  // The threads keep the core alive: a lost callback may close the client
  // and drop the last reference while a thread is still unwinding.
  renewer_ = std::thread([self = shared_from_this()] { self->RenewerLoop(); });
  notifier_ =
      std::thread([self = shared_from_this()] { self->NotifierLoop(); });
}

std::string ClientCore::CurrentOwner() const {
  return ThreadOwner(client_id_, instance_);
}

absl::StatusOr<std::string> ClientCore::ResolveOwner(
    absl::string_view owner_token) const {
  if (owner_token.empty()) return CurrentOwner();
  if (absl::Status s = ValidateOwnerToken(owner_token); !s.ok()) return s;
  return TokenOwner(owner_token);
}

absl::Status ClientCore::ClosedError() const {
  return absl::FailedPreconditionError(
      absl::StrCat("client of ", endpoint_, " is closed"));
}

absl::Status ClientCore::CheckOpen() const {
  absl::MutexLock lock(&mu_);
  return closed_ ? ClosedError() : absl::OkStatus();
}

MonoTime ClientCore::LocalDeadline(MonoTime sent, absl::Duration lease) const {
  return sent + lease - DriftMargin(lease);
}

MonoTime ClientCore::DeadlineOf(const HoldKey& key, const Hold& hold) {
  return std::min(hold.valid_until, backend_->HeldUntil(key.first, key.second));
}

absl::StatusOr<Acquired> ClientCore::Acquire(absl::string_view name,
                                             const AcquireOptions& options) {
  absl::StatusOr<std::string> owner = ResolveOwner(options.owner_token);
  if (!owner.ok()) return owner.status();
  const absl::Duration lease = options.lease.value_or(options_.watchdog_lease);
  if (absl::Status s = ValidateLease(lease); !s.ok()) return s;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must not be negative");
  }
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  const HoldKey key(name, *owner);
  if (absl::Status s = SettlePendingRelease(key); !s.ok()) return s;

  const MonoTime start = clock_.Now();
  AcquireCall call{.name = name,
                   .owner = *owner,
                   .lease = lease,
                   .deadline = options.wait == absl::InfiniteDuration()
                                   ? MonoTime::InfiniteFuture()
                                   : start + options.wait,
                   .cancel = options.cancel};
  absl::StatusOr<Grant> grant;
  if (options.wait > absl::ZeroDuration()) {
    // A blocking wait ends on the caller's cancel or on Close().
    CancelToken either;
    ScopedCancelCallback by_caller(options.cancel,
                                   [either] { either.Cancel(); });
    ScopedCancelCallback by_close(closing_, [either] { either.Cancel(); });
    call.cancel = either;
    grant = backend_->Acquire(call);
  } else {
    grant = backend_->Acquire(call);
  }
  if (!grant.ok()) {
    if (closing_.IsCancelled() && !options.cancel.IsCancelled()) {
      return ClosedError();
    }
    if (MayHaveHappened(grant.status())) {
      absl::MutexLock lock(&mu_);
      NoteUncertainAcquire(key, lease);
    }
    return grant.status();
  }

  absl::MutexLock lock(&mu_);
  if (closed_) {
    // Close() began while we were acquiring; it will not see this hold.
    mu_.Unlock();
    backend_->Release(name, *owner, 1).IgnoreError();
    mu_.Lock();
    return ClosedError();
  }
  if (clock_.Now() >= LocalDeadline(grant->sent, lease)) {
    auto it = holds_.find(key);
    const bool live_reentry =
        it != holds_.end() && !it->second.lost && it->second.local_holds > 0 &&
        it->second.fencing_token == grant->fencing_token &&
        clock_.Now() < DeadlineOf(key, it->second);
    if (!live_reentry) {
      // The reply came back after the lease it started had run out: the
      // hold cannot be believed (C19). Let go of what may be left of it.
      AddPendingRelease(key, 1, lease);
      return absl::UnavailableError(absl::StrCat(
          "lock '", name, "' was granted, but the reply took ",
          absl::FormatDuration(clock_.Now() - grant->sent),
          ", longer than the lease of ", absl::FormatDuration(lease),
          ": the hold may already be another owner's; try again"));
    }
  }
  const int64_t unsynced = RecordGrant(key, *grant, options, lease);
  // The count the caller expects: holds the backend still counts only
  // because a release or a reply was lost are not the caller's.
  return Acquired{.fencing_token = grant->fencing_token,
                  .hold_count = grant->hold_count - unsynced};
}

int64_t ClientCore::RecordGrant(const HoldKey& key, const Grant& grant,
                                const AcquireOptions& options,
                                absl::Duration lease) {
  Hold& hold = holds_[key];
  const bool reentry = hold.local_holds > 0 && !hold.lost &&
                       hold.fencing_token == grant.fencing_token &&
                       clock_.Now() < DeadlineOf(key, hold);
  const MonoTime valid_until = LocalDeadline(grant.sent, lease);
  if (!reentry) {
    // A hold this client no longer believed in, which the backend kept
    // (the same token): its holds are still counted there.
    const int64_t kept =
        hold.local_holds > 0 && hold.fencing_token == grant.fencing_token
            ? std::min(hold.local_holds + hold.unsynced, grant.hold_count - 1)
            : 0;
    hold = Hold{};
    hold.unsynced = kept;
    hold.generation = next_generation_++;
    hold.fencing_token = grant.fencing_token;
    hold.lease = lease;
    hold.renewed = !options.lease.has_value();
    hold.valid_until = valid_until;
    hold.next_renewal = grant.sent + lease / 3;
  } else {
    // Re-entry never shortens the lease (C5); the backend kept the maximum.
    hold.lease = std::max(hold.lease, lease);
    hold.valid_until = std::max(hold.valid_until, valid_until);
    if (!options.lease.has_value() && !hold.renewed) {
      hold.renewed = true;
      hold.next_renewal = grant.sent + hold.lease / 3;
    }
  }
  if (options.on_lost) hold.on_lost.push_back(options.on_lost);
  ++hold.local_holds;
  // Holds the backend counts beyond ours come from acquisitions whose reply
  // was lost: the final release takes them off as well (C21).
  const int64_t expected = hold.local_holds + hold.unsynced;
  if (auto it = uncertain_.find(key);
      it != uncertain_.end() && grant.hold_count > expected) {
    if (clock_.Now() < it->second.until) {
      const int64_t orphans =
          std::min(it->second.count, grant.hold_count - expected);
      hold.unsynced += orphans;
      it->second.count -= orphans;
    }
    if (it->second.count <= 0 || clock_.Now() >= it->second.until) {
      uncertain_.erase(it);
    }
  }
  notifier_wake_.Signal();
  if (hold.renewed) renewer_wake_.Signal();
  return hold.unsynced;
}

void ClientCore::NoteUncertainAcquire(const HoldKey& key,
                                      absl::Duration lease) {
  const MonoTime now = clock_.Now();
  for (auto it = uncertain_.begin(); it != uncertain_.end();) {
    if (it->second.until <= now) {
      uncertain_.erase(it++);
    } else {
      ++it;
    }
  }
  UncertainAcquires& u = uncertain_[key];
  ++u.count;
  u.until = std::max(u.until, now + lease + DriftMargin(lease));
}

absl::Status ClientCore::SettlePendingRelease(const HoldKey& key) {
  int64_t holds = 0;
  {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto it = pending_releases_.find(key);
      if (it == pending_releases_.end()) return absl::OkStatus();
      if (!it->second.in_flight && clock_.Now() >= it->second.give_up) {
        // The backend's lease is over: nothing is left to release.
        pending_releases_.erase(it);
        return absl::OkStatus();
      }
      if (!it->second.in_flight) {
        it->second.in_flight = true;
        holds = it->second.holds;
        break;
      }
      released_.WaitUntil(&mu_, it->second.give_up);
    }
  }
  absl::StatusOr<int64_t> left =
      backend_->Release(key.first, key.second, holds);
  absl::MutexLock lock(&mu_);
  auto it = pending_releases_.find(key);
  if (it == pending_releases_.end()) return absl::OkStatus();  // Close()
  it->second.in_flight = false;
  released_.Signal();
  if (left.ok() || IsGone(left.status())) {
    pending_releases_.erase(it);
    return absl::OkStatus();
  }
  return absl::Status(
      left.status().code(),
      absl::StrCat("an earlier release of lock '", key.first,
                   "' is not confirmed yet, and the lock cannot be taken "
                   "afresh until it is: ",
                   left.status().message()));
}

void ClientCore::AddPendingRelease(const HoldKey& key, int64_t holds,
                                   absl::Duration lease) {
  const MonoTime now = clock_.Now();
  PendingRelease& p = pending_releases_[key];
  p.holds += holds;
  // The backend set its expiry no later than now; with no renewal it ends
  // within one lease (C2).
  p.give_up = std::max(p.give_up, now + lease + DriftMargin(lease));
  p.retry_every = RetryEvery(lease);
  p.next_try = now;
  renewer_wake_.Signal();
}

absl::Status ClientCore::Release(absl::string_view name,
                                 absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = ResolveOwner(owner_token);
  if (!owner.ok()) return owner.status();
  std::vector<Delivery> deliveries;
  absl::Status released;
  {
    absl::ReaderMutexLock in_flight(&ops_mu_);
    released = ReleaseHold(HoldKey(name, *owner), deliveries);
  }
  // Without ops_mu_: a callback may call the client, even Close().
  Deliver(deliveries);
  return released;
}

absl::Status ClientCore::ReleaseHold(const HoldKey& key,
                                     std::vector<Delivery>& deliveries) {
  const std::string& name = key.first;
  auto lost_before = [&](const absl::Status& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lock '", name, "' was lost before release: ", why.message()));
  };
  Hold given_up;  // the hold a final release gives up
  bool final_release = false;
  uint64_t generation = 0;  // 0: no hold of ours (one taken elsewhere, C6)
  int64_t holds = 1;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return ClosedError();
    auto it = holds_.find(key);
    if (it != holds_.end()) {
      Hold& hold = it->second;
      if (!hold.lost && clock_.Now() >= DeadlineOf(key, hold)) {
        MarkLost(key, hold,
                 absl::FailedPreconditionError("its local deadline passed"),
                 deliveries);
      }
      if (hold.lost) {
        // Known without asking the backend, which may be unreachable now.
        absl::Status why = hold.lost_reason;
        holds_.erase(it);
        return lost_before(why);
      }
      generation = hold.generation;
      if (hold.local_holds > 1) {
        --hold.local_holds;
      } else {
        // Renewal stops now, whatever the backend answers (C21), and an
        // acquisition of the same key waits for the answer.
        final_release = true;
        holds = 1 + hold.unsynced;
        given_up = std::move(hold);
        holds_.erase(it);
        PendingRelease& marker = pending_releases_[key];
        marker.in_flight = true;
        marker.give_up = MonoTime::InfiniteFuture();
      }
    }
  }
  absl::StatusOr<int64_t> left = backend_->Release(name, key.second, holds);

  absl::MutexLock lock(&mu_);
  if (final_release) {
    pending_releases_.erase(key);
    released_.Signal();
    if (left.ok()) return absl::OkStatus();
    if (IsGone(left.status())) {
      // The release is what found the loss: it is told now (C20).
      MarkLost(key, given_up, left.status(), deliveries);
      return lost_before(left.status());
    }
    if (!closed_) AddPendingRelease(key, holds, given_up.lease);
    return absl::Status(
        left.status().code(),
        absl::StrCat(left.status().message(),
                     "; the hold is given up, and its release is retried in "
                     "the background until the backend confirms it or the "
                     "lease ends"));
  }
  if (generation == 0) return left.status();
  auto it = holds_.find(key);
  if (left.ok() || it == holds_.end() || it->second.generation != generation) {
    return absl::OkStatus();
  }
  if (IsGone(left.status())) {
    if (!it->second.lost) MarkLost(key, it->second, left.status(), deliveries);
    holds_.erase(it);
    return lost_before(left.status());
  }
  // Taken off here; the backend's count is corrected by the final release,
  // or by the lease if the client goes away first.
  ++it->second.unsynced;
  return absl::OkStatus();
}

absl::Status ClientCore::Renew(absl::string_view name,
                               std::optional<absl::Duration> lease,
                               absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = ResolveOwner(owner_token);
  if (!owner.ok()) return owner.status();
  std::vector<Delivery> deliveries;
  absl::Status renewed;
  {
    absl::ReaderMutexLock in_flight(&ops_mu_);
    const HoldKey key(name, *owner);
    absl::Duration effective = options_.watchdog_lease;
    uint64_t generation = 0;
    absl::Status lost;  // a hold known lost is never renewed back to life
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return ClosedError();
      if (auto it = holds_.find(key); it != holds_.end()) {
        if (it->second.lost) {
          lost = absl::FailedPreconditionError(
              absl::StrCat("lock '", name,
                           "' was lost: ", it->second.lost_reason.message()));
        }
        effective = it->second.lease;
        generation = it->second.generation;
      }
    }
    if (lease.has_value()) effective = *lease;
    if (absl::Status s = ValidateLease(effective); !s.ok()) return s;
    const MonoTime sent = clock_.Now();
    renewed = backend_->Renew(
        RenewCall{.name = name, .owner = *owner, .lease = effective});
    if (!lost.ok() && (renewed.ok() || IsGone(renewed))) return lost;

    absl::MutexLock lock(&mu_);
    auto it = holds_.find(key);
    if (it != holds_.end() && it->second.generation == generation &&
        !it->second.lost) {
      if (renewed.ok()) {
        it->second.valid_until =
            std::max(it->second.valid_until, LocalDeadline(sent, effective));
        notifier_wake_.Signal();
      } else if (IsGone(renewed)) {
        MarkLost(key, it->second, renewed, deliveries);
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

absl::StatusOr<bool> ClientCore::IsHeldByMe(absl::string_view name,
                                            absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = ResolveOwner(owner_token);
  if (!owner.ok()) return owner.status();
  absl::StatusOr<LockInfo> info = Inspect(name);  // takes ops_mu_
  if (!info.ok()) return info.status();
  return info->locked && info->owner == *owner;
}

absl::Status ClientCore::ForceUnlock(absl::string_view name) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return backend_->ForceUnlock(name);
}

absl::StatusOr<std::vector<LockInfo>> ClientCore::List(
    absl::string_view prefix) {
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return backend_->List(prefix);
}

LockState ClientCore::State(absl::string_view name,
                            absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = ResolveOwner(owner_token);
  if (!owner.ok()) return LockState::kNotHeld;
  absl::MutexLock lock(&mu_);
  if (closed_) return LockState::kNotHeld;
  const HoldKey key(name, *owner);
  auto it = holds_.find(key);
  if (it == holds_.end()) return LockState::kNotHeld;
  Hold& hold = it->second;
  if (hold.lost) return LockState::kLost;
  // A local clock read, never a round trip (C19); the notifier tells the
  // loss at the same deadline, so none is queued from here.
  if (clock_.Now() >= DeadlineOf(key, hold)) return LockState::kLost;
  return LockState::kHeld;
}

absl::StatusOr<uint64_t> ClientCore::FencingToken(
    absl::string_view name, absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = ResolveOwner(owner_token);
  if (owner.ok()) {
    absl::MutexLock lock(&mu_);
    const HoldKey key(name, *owner);
    auto it = holds_.find(key);
    if (!closed_ && it != holds_.end() && !it->second.lost &&
        clock_.Now() < DeadlineOf(key, it->second)) {
      return it->second.fencing_token;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("lock '", name, "' is not held by this owner"));
}

void ClientCore::OnHoldLost(absl::string_view name, absl::string_view owner,
                            const absl::Status& reason) {
  // Callbacks run on the notifier's thread, not the backend's: a callback
  // that calls into the client must not block the backend thread that
  // Close() waits for.
  absl::MutexLock lock(&mu_);
  const HoldKey key(name, owner);
  auto it = holds_.find(key);
  if (it != holds_.end() && !it->second.lost) {
    MarkLost(key, it->second, reason, queued_);
    notifier_wake_.Signal();
  }
}

void ClientCore::MarkLost(const HoldKey& key, Hold& hold, absl::Status reason,
                          std::vector<Delivery>& out) {
  hold.lost = true;
  hold.lost_reason = reason;
  out.push_back(
      Delivery{.event = LockLostEvent{.name = key.first,
                                      .owner = key.second,
                                      .fencing_token = hold.fencing_token,
                                      .reason = std::move(reason)},
               .callbacks = std::move(hold.on_lost)});
  hold.on_lost.clear();
}

void ClientCore::Deliver(std::vector<Delivery>& deliveries) {
  for (Delivery& d : deliveries) {
    for (const LockLostCallback& callback : d.callbacks) callback(d.event);
    if (options_.on_lost) options_.on_lost(d.event);
  }
  deliveries.clear();
}

void ClientCore::NotifierLoop() {
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    if (!queued_.empty()) {
      std::vector<Delivery> deliveries;
      deliveries.swap(queued_);
      mu_.Unlock();
      Deliver(deliveries);
      mu_.Lock();
      continue;
    }
    const MonoTime now = clock_.Now();
    const MonoTime next = ExpireOverdue(now);
    if (!queued_.empty()) continue;
    notifier_wake_.WaitUntil(&mu_, next);
  }
}

MonoTime ClientCore::ExpireOverdue(MonoTime now) {
  MonoTime next = MonoTime::InfiniteFuture();
  for (auto& [key, hold] : holds_) {
    if (hold.lost) continue;
    const MonoTime notice_at = DeadlineOf(key, hold) - NoticeLead(hold.lease);
    if (now < notice_at) {
      next = std::min(next, notice_at);
      continue;
    }
    absl::Status why;
    if (backend_->HeldUntil(key.first, key.second) < hold.valid_until) {
      why = absl::UnavailableError(
          "the backend session that kept the hold can no longer be trusted");
    } else if (!hold.renewed) {
      why = absl::FailedPreconditionError(
          absl::StrCat("the lease of ", absl::FormatDuration(hold.lease),
                       " ran out before release"));
    } else if (!hold.renewal_error.ok()) {
      why = absl::UnavailableError(
          absl::StrCat("the lease ran out while renewal kept failing: ",
                       hold.renewal_error.message()));
    } else {
      why = absl::UnavailableError(
          "the lease ran out before a renewal was confirmed");
    }
    if (hold.renewed) {
      // A renewal may have reached the backend after all: release it in the
      // background, so that others need not wait out a lease (C21).
      AddPendingRelease(key, hold.local_holds + hold.unsynced, hold.lease);
    }
    MarkLost(key, hold, std::move(why), queued_);
  }
  return next;
}

void ClientCore::RenewerLoop() {
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    MonoTime now = clock_.Now();
    RenewDue(now);
    if (closed_) break;
    now = clock_.Now();
    RetryReleases(now);
    if (closed_) break;
    MonoTime next = MonoTime::InfiniteFuture();
    for (const auto& [key, hold] : holds_) {
      if (hold.renewed && !hold.lost) next = std::min(next, hold.next_renewal);
    }
    for (const auto& [key, p] : pending_releases_) {
      if (!p.in_flight) next = std::min(next, p.next_try);
    }
    now = clock_.Now();
    if (next > now) renewer_wake_.WaitUntil(&mu_, next);
  }
}

void ClientCore::RenewDue(MonoTime now) {
  struct Due {
    HoldKey key;
    uint64_t generation;
    absl::Duration lease;
  };
  // Holds due a little later ride along: holds taken moments apart then
  // share one batch instead of queueing one round trip after another.
  std::vector<Due> due;
  bool any_due = false;
  for (const auto& [key, hold] : holds_) {
    if (hold.renewed && !hold.lost && hold.next_renewal <= now) any_due = true;
  }
  if (!any_due) return;
  for (const auto& [key, hold] : holds_) {
    if (hold.renewed && !hold.lost &&
        hold.next_renewal <= now + hold.lease / 10) {
      due.push_back(Due{key, hold.generation, hold.lease});
    }
  }
  if (due.empty()) return;
  std::vector<RenewCall> calls;
  calls.reserve(due.size());
  for (const Due& d : due) {
    calls.push_back(RenewCall{
        .name = d.key.first, .owner = d.key.second, .lease = d.lease});
  }

  // Renew without the lock, so that acquires and releases go on meanwhile.
  mu_.Unlock();
  const MonoTime sent = clock_.Now();
  std::vector<absl::Status> results = backend_->RenewMany(calls);
  mu_.Lock();

  const MonoTime after = clock_.Now();
  for (size_t i = 0; i < due.size(); ++i) {
    auto it = holds_.find(due[i].key);
    // Released, or released and taken again, or lost meanwhile.
    if (it == holds_.end() || it->second.generation != due[i].generation ||
        it->second.lost) {
      continue;
    }
    Hold& hold = it->second;
    const absl::Status& result =
        i < results.size() ? results[i]
                           : absl::InternalError("backend lost a renewal");
    if (result.ok()) {
      hold.valid_until =
          std::max(hold.valid_until, LocalDeadline(sent, due[i].lease));
      hold.next_renewal = sent + due[i].lease / 3;
      hold.renewal_error = absl::OkStatus();
    } else if (IsGone(result)) {
      MarkLost(due[i].key, hold, result, queued_);
    } else {
      // Transient: try again soon; the notifier ends the hold at its
      // deadline if no renewal gets through by then.
      hold.renewal_error = result;
      hold.next_renewal = after + RetryEvery(hold.lease);
    }
  }
  notifier_wake_.Signal();  // deadlines moved, or notices are queued
}

void ClientCore::RetryReleases(MonoTime now) {
  std::vector<std::pair<HoldKey, int64_t>> due;
  for (auto it = pending_releases_.begin(); it != pending_releases_.end();) {
    PendingRelease& p = it->second;
    if (!p.in_flight && now >= p.give_up) {
      pending_releases_.erase(it++);  // the lease is over on the backend
      continue;
    }
    if (!p.in_flight && p.next_try <= now) {
      p.in_flight = true;
      due.emplace_back(it->first, p.holds);
    }
    ++it;
  }
  for (const auto& [key, holds] : due) {
    mu_.Unlock();
    absl::StatusOr<int64_t> left =
        backend_->Release(key.first, key.second, holds);
    mu_.Lock();
    auto it = pending_releases_.find(key);
    if (it == pending_releases_.end()) continue;
    it->second.in_flight = false;
    if (left.ok() || IsGone(left.status())) {
      pending_releases_.erase(it);
    } else {
      it->second.next_try = clock_.Now() + it->second.retry_every;
    }
    released_.Signal();
  }
}

absl::Status ClientCore::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_ || backend_ == nullptr) {
      closed_ = true;
      return absl::OkStatus();
    }
    closed_ = true;
  }
  renewer_wake_.Signal();
  notifier_wake_.Signal();
  released_.Signal();
  closing_.Cancel();
  // A lost callback runs on the notifier's thread and may close its own
  // client: that thread cannot join itself; it ends once the callback
  // returns.
  for (std::thread* t : {&renewer_, &notifier_}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id()) {
      t->detach();
    } else {
      t->join();
    }
  }

  // Every hold still believed held ends here: its owner is told (C20)
  // before the lock is let go, so that the work it guards can stop first.
  std::vector<Delivery> deliveries;
  std::vector<std::pair<HoldKey, int64_t>> to_release;
  {
    absl::MutexLock lock(&mu_);
    deliveries.swap(queued_);
    for (auto& [key, hold] : holds_) {
      if (hold.lost) continue;
      to_release.emplace_back(key, hold.local_holds + hold.unsynced);
      MarkLost(key, hold,
               absl::FailedPreconditionError(
                   absl::StrCat("the client of ", endpoint_, " was closed")),
               deliveries);
    }
    holds_.clear();
    for (auto& [key, p] : pending_releases_) {
      // An in-flight release belongs to the thread that sends it.
      if (!p.in_flight && clock_.Now() < p.give_up) {
        to_release.emplace_back(key, p.holds);
      }
    }
    pending_releases_.clear();
    uncertain_.clear();
  }
  Deliver(deliveries);

  const MonoTime give_up = clock_.Now() + options_.close_timeout;
  int failed = 0;
  absl::Status first_error;
  for (const auto& [key, holds] : to_release) {
    if (clock_.Now() >= give_up) {
      ++failed;
      continue;
    }
    absl::StatusOr<int64_t> left =
        backend_->Release(key.first, key.second, holds);
    if (!left.ok() && !IsGone(left.status())) {
      if (failed++ == 0) first_error = left.status();
    }
  }
  {
    // Waits for calls still in flight on other threads; they end within
    // their timeouts, and blocking waits were cancelled above.
    absl::WriterMutexLock no_calls(&ops_mu_);
    backend_->Shutdown();
  }
  if (failed > 0) {
    return absl::UnavailableError(absl::StrCat(
        "closing the client of ", endpoint_, ": ", failed, " of ",
        to_release.size(),
        " locks were not released and will expire with their lease",
        first_error.ok() ? ""
                         : absl::StrCat(" (", first_error.message(), ")")));
  }
  return absl::OkStatus();
}

}  // namespace dlock::internal
