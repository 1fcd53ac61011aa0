// The client core's background half: the renewer's renewals and release
// retries, the notifier's deadlines and notices, and Close(). The calls
// service code makes are in client_core.cc.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client_core.h"
#include "lease_policy.h"

namespace dlock::internal {

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

absl::Status ClientCore::ClosedError() const {
  return absl::FailedPreconditionError(
      absl::StrCat("client of ", endpoint_, " is closed"));
}

}  // namespace dlock::internal
