#include "client_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "identity.h"

namespace dlock::internal {
namespace {

constexpr absl::Duration kMinLease = absl::Milliseconds(10);
// A renewal that failed for a transient reason is tried again this soon,
// or sooner for short leases, until the lease runs out (C7).
constexpr absl::Duration kMaxRenewRetry = absl::Seconds(1);

absl::Status ValidateLease(absl::Duration lease) {
  if (lease < kMinLease || lease == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease must be finite and at least ", absl::FormatDuration(kMinLease),
        ", not ", absl::FormatDuration(lease)));
  }
  return absl::OkStatus();
}

}  // namespace

ClientCore::ClientCore(ClientOptions options, std::string lock_namespace,
                       std::string client_id, std::string endpoint)
    : options_(std::move(options)),
      lock_namespace_(std::move(lock_namespace)),
      client_id_(std::move(client_id)),
      endpoint_(std::move(endpoint)) {}

ClientCore::~ClientCore() { Close().IgnoreError(); }

void ClientCore::Start(std::unique_ptr<Backend> backend) {
  backend_ = std::move(backend);
  // The thread keeps the core alive: a lost callback may close the client
  // and drop the last reference while the thread is still unwinding.
  watchdog_ =
      std::thread([self = shared_from_this()] { self->WatchdogLoop(); });
}

std::string ClientCore::CurrentOwner() const { return ThreadOwner(client_id_); }

absl::StatusOr<std::string> ClientCore::ResolveOwner(
    absl::string_view owner_token) const {
  if (owner_token.empty()) return ThreadOwner(client_id_);
  if (absl::Status s = ValidateOwnerToken(owner_token); !s.ok()) return s;
  return TokenOwner(owner_token);
}

absl::Status ClientCore::CheckOpen() const {
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("client of ", endpoint_, " is closed"));
  }
  return absl::OkStatus();
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

  const bool blocking = options.wait > absl::ZeroDuration();
  const absl::Time sent = absl::Now();
  AcquireCall call{.name = name,
                   .owner = *owner,
                   .lease = lease,
                   .deadline = options.wait == absl::InfiniteDuration()
                                   ? absl::InfiniteFuture()
                                   : sent + options.wait,
                   .cancel = options.cancel};
  absl::StatusOr<Acquired> acquired;
  if (blocking) {
    // A blocking wait ends on the caller's cancel or on Close().
    CancelToken either;
    ScopedCancelCallback by_caller(options.cancel,
                                   [either] { either.Cancel(); });
    ScopedCancelCallback by_close(closing_, [either] { either.Cancel(); });
    call.cancel = either;
    acquired = backend_->Acquire(call);
  } else {
    acquired = backend_->Acquire(call);
  }
  if (!acquired.ok()) {
    if (closing_.IsCancelled() && !options.cancel.IsCancelled()) {
      return CheckOpen();
    }
    return acquired.status();
  }
  // After a wait the grant came at the last attempt, not at `sent`.
  const absl::Time granted = blocking ? absl::Now() : sent;

  absl::MutexLock lock(&mu_);
  if (closed_) {
    // Close() began while we were acquiring; it will not see this hold.
    mu_.Unlock();
    backend_->Release(name, *owner, 1).IgnoreError();
    mu_.Lock();
    return absl::FailedPreconditionError(
        absl::StrCat("client of ", endpoint_, " is closed"));
  }
  Hold& hold = holds_[HoldKey(name, *owner)];
  const bool fresh = acquired->hold_count == 1 || hold.local_holds == 0 ||
                     hold.lost || hold.fencing_token != acquired->fencing_token;
  if (fresh) {
    hold = Hold{};
    hold.generation = next_generation_++;
    hold.fencing_token = acquired->fencing_token;
    hold.lease = lease;
    hold.renewed = !options.lease.has_value();
    hold.expires_locally = granted + lease;
    hold.next_renewal = granted + lease / 3;
    hold.on_lost = options.on_lost;
  } else {
    // Re-entry never shortens the lease (C5); the backend kept the maximum.
    hold.lease = std::max(hold.lease, lease);
    hold.expires_locally = std::max(hold.expires_locally, granted + lease);
    if (!options.lease.has_value() && !hold.renewed) {
      hold.renewed = true;
      hold.next_renewal = granted + hold.lease / 3;
    }
    if (options.on_lost) {
      // Every acquisition that asked to be told is told, outer ones too.
      hold.on_lost =
          hold.on_lost ? LockLostCallback(
                             [outer = std::move(hold.on_lost),
                              inner = options.on_lost](const LockLostEvent& e) {
                               outer(e);
                               inner(e);
                             })
                       : options.on_lost;
    }
  }
  ++hold.local_holds;
  if (hold.renewed) watchdog_wake_.Signal();
  return acquired;
}

absl::Status ClientCore::Release(absl::string_view name,
                                 absl::string_view owner_token) {
  absl::StatusOr<std::string> owner = ResolveOwner(owner_token);
  if (!owner.ok()) return owner.status();
  absl::ReaderMutexLock in_flight(&ops_mu_);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  {
    // A hold known to be lost is not asked about again: the backend may be
    // reconnecting and answer Unavailable, while the answer is already known.
    absl::MutexLock lock(&mu_);
    auto it = holds_.find(HoldKey(name, *owner));
    if (it != holds_.end() && it->second.lost) {
      absl::Status why = it->second.lost_reason;
      holds_.erase(it);
      return absl::FailedPreconditionError(absl::StrCat(
          "lock '", name, "' was lost before release: ", why.message()));
    }
  }
  absl::StatusOr<int64_t> left = backend_->Release(name, *owner, 1);

  absl::MutexLock lock(&mu_);
  auto it = holds_.find(HoldKey(name, *owner));
  if (!left.ok()) {
    if (left.status().code() != absl::StatusCode::kFailedPrecondition ||
        it == holds_.end()) {
      return left.status();
    }
    absl::Status why = it->second.lost
                           ? it->second.lost_reason
                           : absl::FailedPreconditionError("lease expired");
    holds_.erase(it);
    return absl::FailedPreconditionError(absl::StrCat(
        "lock '", name, "' was lost before release: ", why.message()));
  }
  if (it != holds_.end() && (*left == 0 || --it->second.local_holds <= 0)) {
    holds_.erase(it);
  }
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
    if (absl::Status s = CheckOpen(); !s.ok()) return s;
    const HoldKey key(name, *owner);
    absl::Duration effective = options_.watchdog_lease;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = holds_.find(key); it != holds_.end()) {
        effective = it->second.lease;
      }
    }
    if (lease.has_value()) effective = *lease;
    if (absl::Status s = ValidateLease(effective); !s.ok()) return s;
    const absl::Time sent = absl::Now();
    renewed = backend_->Renew(
        RenewCall{.name = name, .owner = *owner, .lease = effective});

    {
      absl::MutexLock lock(&mu_);
      auto it = holds_.find(key);
      if (it != holds_.end()) {
        if (renewed.ok()) {
          it->second.expires_locally =
              std::max(it->second.expires_locally, sent + effective);
        } else if (renewed.code() == absl::StatusCode::kFailedPrecondition &&
                   !it->second.lost) {
          MarkLost(key, it->second, renewed, deliveries);
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
  auto it = holds_.find(HoldKey(name, *owner));
  if (it == holds_.end()) return LockState::kNotHeld;
  const Hold& hold = it->second;
  if (hold.lost) return LockState::kLost;
  if (!hold.renewed && absl::Now() >= hold.expires_locally) {
    return LockState::kLost;
  }
  return LockState::kHeld;
}

absl::StatusOr<uint64_t> ClientCore::FencingToken(
    absl::string_view name, absl::string_view owner_token) {
  if (State(name, owner_token) != LockState::kHeld) {
    return absl::FailedPreconditionError(
        absl::StrCat("lock '", name, "' is not held by this owner"));
  }
  absl::StatusOr<std::string> owner = ResolveOwner(owner_token);
  absl::MutexLock lock(&mu_);
  auto it = holds_.find(HoldKey(name, *owner));
  if (it == holds_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("lock '", name, "' is not held by this owner"));
  }
  return it->second.fencing_token;
}

void ClientCore::OnHoldLost(absl::string_view name, absl::string_view owner,
                            const absl::Status& reason) {
  // Callbacks run on the watchdog's thread, not the backend's: a callback
  // that calls into the client must not block the backend thread that
  // Close() waits for.
  absl::MutexLock lock(&mu_);
  const HoldKey key(name, owner);
  auto it = holds_.find(key);
  if (it != holds_.end() && !it->second.lost) {
    MarkLost(key, it->second, reason, queued_deliveries_);
    watchdog_wake_.Signal();
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
               .hold_callback = hold.on_lost});
}

void ClientCore::Deliver(std::vector<Delivery>& deliveries) {
  for (Delivery& d : deliveries) {
    if (d.hold_callback) d.hold_callback(d.event);
    if (options_.on_lost) options_.on_lost(d.event);
  }
}

void ClientCore::WatchdogLoop() {
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    if (!queued_deliveries_.empty()) {
      std::vector<Delivery> deliveries;
      deliveries.swap(queued_deliveries_);
      mu_.Unlock();
      Deliver(deliveries);
      mu_.Lock();
      continue;
    }
    absl::Time earliest = absl::InfiniteFuture();
    for (const auto& [key, hold] : holds_) {
      if (hold.lost) continue;
      // A hold with an explicit lease is not renewed; it is lost when the
      // lease runs out, and its owner is told then (C2, C7).
      earliest = std::min(
          earliest, hold.renewed ? hold.next_renewal : hold.expires_locally);
    }
    const absl::Time now = absl::Now();
    if (earliest > now) {
      watchdog_wake_.WaitWithDeadline(&mu_, earliest);
      continue;
    }
    ExpireUnrenewed(now);
    RenewDue(now);
  }
}

void ClientCore::ExpireUnrenewed(absl::Time now) {
  for (auto& [key, hold] : holds_) {
    if (!hold.renewed && !hold.lost && hold.expires_locally <= now) {
      MarkLost(key, hold,
               absl::FailedPreconditionError(absl::StrCat(
                   "the lease of ", absl::FormatDuration(hold.lease),
                   " ran out before release")),
               queued_deliveries_);
    }
  }
}

void ClientCore::RenewDue(absl::Time now) {
  struct Due {
    HoldKey key;
    uint64_t generation;
    absl::Duration lease;
  };
  std::vector<Due> due;
  for (const auto& [key, hold] : holds_) {
    if (hold.renewed && !hold.lost && hold.next_renewal <= now) {
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
  const absl::Time sent = absl::Now();
  std::vector<absl::Status> results = backend_->RenewMany(calls);
  mu_.Lock();

  std::vector<Delivery> deliveries;
  const absl::Time after = absl::Now();
  for (size_t i = 0; i < due.size(); ++i) {
    auto it = holds_.find(due[i].key);
    // Released, or released and taken again, while we were renewing.
    if (it == holds_.end() || it->second.generation != due[i].generation ||
        it->second.lost) {
      continue;
    }
    Hold& hold = it->second;
    const absl::Status& result =
        i < results.size() ? results[i]
                           : absl::InternalError("backend lost a renewal");
    if (result.ok()) {
      hold.expires_locally = sent + hold.lease;
      hold.next_renewal = sent + hold.lease / 3;
    } else if (result.code() == absl::StatusCode::kFailedPrecondition ||
               result.code() == absl::StatusCode::kNotFound) {
      MarkLost(due[i].key, hold, result, deliveries);
    } else if (after >= hold.expires_locally) {
      MarkLost(
          due[i].key, hold,
          absl::UnavailableError(absl::StrCat(
              "lease ran out while renewal kept failing: ", result.message())),
          deliveries);
    } else {
      hold.next_renewal =
          std::min(hold.expires_locally,
                   after + std::min(kMaxRenewRetry, hold.lease / 10));
    }
  }
  if (!deliveries.empty()) {
    mu_.Unlock();
    Deliver(deliveries);
    mu_.Lock();
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
    watchdog_wake_.SignalAll();
  }
  closing_.Cancel();
  if (watchdog_.joinable()) {
    // A lost callback runs on the watchdog's thread and may close its own
    // client: that thread cannot join itself; it ends once the callback
    // returns.
    if (watchdog_.get_id() == std::this_thread::get_id()) {
      watchdog_.detach();
    } else {
      watchdog_.join();
    }
  }
  std::vector<Delivery> undelivered;
  {
    absl::MutexLock lock(&mu_);
    undelivered.swap(queued_deliveries_);
  }
  Deliver(undelivered);

  std::vector<std::pair<HoldKey, int64_t>> held;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, hold] : holds_) {
      if (!hold.lost) held.emplace_back(key, hold.local_holds);
    }
    holds_.clear();
  }
  const absl::Time give_up = absl::Now() + options_.close_timeout;
  int failed = 0;
  absl::Status first_error;
  for (const auto& [key, holds] : held) {
    if (absl::Now() >= give_up) {
      ++failed;
      continue;
    }
    absl::StatusOr<int64_t> left =
        backend_->Release(key.first, key.second, holds);
    if (!left.ok() &&
        left.status().code() != absl::StatusCode::kFailedPrecondition) {
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
        "closing the client of ", endpoint_, ": ", failed, " of ", held.size(),
        " locks were not released and will expire with their lease",
        first_error.ok() ? ""
                         : absl::StrCat(" (", first_error.message(), ")")));
  }
  return absl::OkStatus();
}

}  // namespace dlock::internal
