#include "client_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "identity.h"
#include "lease_policy.h"

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
