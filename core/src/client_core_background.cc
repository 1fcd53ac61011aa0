// The client core's background half: lost holds and their notices, the
// renewer's renewals and release retries, the notifier's deadlines, and
// Close(). The calls service code makes are in client_core.cc.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client_core.h"
#include "lease_policy.h"
#include "ride_out.h"

namespace dlock::internal {

void ClientCore::MarkLost(const HoldKey& key, HoldEntry& hold,
                          absl::Status reason, LossCause cause,
                          Leftover leftover, std::vector<Delivery>& out) {
  if (hold.lost) return;
  hold.lost = true;
  hold.lost_reason = reason;
  if (leftover == Leftover::kRelease) {
    // The backend may still count the hold (a renewal got through
    // unanswered, the lease has a moment left): let it go, so that others
    // need not wait it out and the owner's next Acquire starts afresh
    // (C21).
    AddPendingRelease(key, AllHoldsOf(key.second, hold), hold.max_lease,
                      hold.record);
  }
  Delivery d{.event = LockLostEvent{.name = key.first,
                                    .owner = key.second,
                                    .fencing_token = hold.fencing_token,
                                    .reason = WithKind(std::move(reason),
                                                       ErrorKind::kLost)},
             .cause = cause,
             .granted = hold.granted};
  // The acquisitions stay (their Holds still ask after them); what they
  // asked to be told goes.
  for (Acquisition& a : hold.acquisitions) {
    if (a.on_lost) d.callbacks.push_back(std::move(a.on_lost));
    a.on_lost = nullptr;
    d.tokens.push_back(a.lost);
  }
  out.push_back(std::move(d));
}

void ClientCore::MarkLostQueued(const HoldKey& key, HoldEntry& hold,
                                absl::Status reason, LossCause cause,
                                Leftover leftover) {
  std::vector<Delivery> out;
  MarkLost(key, hold, std::move(reason), cause, leftover, out);
  if (out.empty()) return;
  for (Delivery& d : out) queued_.push_back(std::move(d));
  notifier_wake_.Signal();
}

ClientCore::DeadlineLoss ClientCore::DeadlineReason(const HoldKey& key,
                                                    const HoldEntry& hold) {
  if (liveness_until_ < hold.valid_until &&
      liveness_until_ <=
          backend_->HeldUntil(key.first, key.second, hold.record.get())) {
    // Past here a waiter may take the lock over whatever its lease.
    return {absl::UnavailableError(absl::StrCat(
                "this client's liveness record (liveness_ttl ",
                absl::FormatDuration(liveness_ttl_),
                ") was not confirmed in time, so other clients may take its "
                "locks over",
                heartbeat_error_.ok()
                    ? ""
                    : absl::StrCat(": ", heartbeat_error_.message()))),
            LossCause::kUnconfirmed};
  }
  if (backend_->HeldUntil(key.first, key.second, hold.record.get()) <
      hold.valid_until) {
    return {absl::UnavailableError("the backend session that kept the hold "
                                   "can no longer be trusted"),
            LossCause::kUnconfirmed};
  }
  if (!hold.renewed) {
    return {absl::FailedPreconditionError(
                absl::StrCat("the lease of ", absl::FormatDuration(hold.lease),
                             " ran out before release")),
            LossCause::kLeaseEnded};
  }
  if (!hold.renewal_error.ok()) {
    return {absl::UnavailableError(
                absl::StrCat("the lease ran out while renewal kept failing: ",
                             hold.renewal_error.message())),
            LossCause::kUnconfirmed};
  }
  return {absl::UnavailableError(
              "the lease ran out before a renewal was confirmed"),
          LossCause::kUnconfirmed};
}

bool ClientCore::LatchDeadline(const HoldKey& key, HoldEntry& hold,
                               MonoTime now) {
  if (hold.lost) return true;
  if (now < DeadlineOf(key, hold) - NoticeLead(hold.lease)) return false;
  if (hold.kept > 0 && hold.acquisitions.empty()) {
    // Left to run out (Hold::KeepUntilLeaseEnd): an end foreseen, not a
    // loss; nobody to tell, and the backend lets it go by itself.
    hold.lost = true;
    hold.lost_reason = LostError(key.first, "its lease ended as kept");
    return true;
  }
  DeadlineLoss loss = DeadlineReason(key, hold);
  MarkLostQueued(key, hold, std::move(loss.reason), loss.cause,
                 Leftover::kRelease);
  return true;
}

void ClientCore::WakeFor(const HoldKey& key, const HoldEntry& hold) {
  if (hold.lost) return;
  const MonoTime notice_at = DeadlineOf(key, hold) - NoticeLead(hold.lease);
  if (notice_at < notifier_wakes_at_) notifier_wake_.Signal();
  if (hold.renewed && hold.next_renewal < renewer_wakes_at_) {
    renewer_wake_.Signal();
  }
  if (KeepsLiveness() && next_heartbeat_ < renewer_wakes_at_) {
    renewer_wake_.Signal();
  }
}

void ClientCore::Deliver(std::vector<Delivery>& deliveries) {
  for (Delivery& d : deliveries) {
    // Tokens first: work watching them stops before slower callbacks run.
    for (const CancelToken& token : d.tokens) token.Cancel();
    for (const LockLostCallback& callback : d.callbacks) callback(d.event);
    if (options_.on_lost) options_.on_lost(d.event);
    // After the callbacks, as the observer's contract says. A hold whose
    // acquisitions were all left to run out was told as released.
    if (observer_ && !d.tokens.empty()) {
      observer_.Tell(&LockObserver::OnLoss,
                     LossEvent{.lock_namespace = lock_namespace_,
                               .name = d.event.name,
                               .owner = d.event.owner,
                               .fencing_token = d.event.fencing_token,
                               .cause = d.cause,
                               .reason = d.event.reason,
                               .held = clock_.Now() - d.granted});
    }
  }
  deliveries.clear();
}

void ClientCore::OnHoldLost(absl::string_view name, absl::string_view owner,
                            const absl::Status& reason) {
  // Callbacks run on the notifier's thread, not the backend's: a callback
  // that calls into the client must not block the backend thread that
  // Close() waits for.
  absl::MutexLock lock(&mu_);
  auto it = holds_.find(HoldKeyView(name, owner));
  if (it != holds_.end()) {
    MarkLostQueued(it->first, it->second, reason, LossCause::kGone,
                   Leftover::kGone);
  }
}

// --- Releases the backend did not confirm (C21) ----------------------------

void ClientCore::AddPendingRelease(const HoldKey& key, int64_t holds,
                                   absl::Duration lease,
                                   std::shared_ptr<HoldRecord> record,
                                   MonoTime keep_until) {
  const MonoTime now = clock_.Now();
  PendingRelease& p = pending_releases_[key];
  if (p.record == nullptr) p.record = std::move(record);
  p.keep_until = std::max(p.keep_until, keep_until);
  p.holds = std::min(kAllHolds, p.holds + holds);
  // The backend set its expiry no later than now, to at most the longest
  // lease it was asked for: with no renewal it ends within that (C2).
  p.give_up = std::max(p.give_up, now + lease + DriftMargin(lease));
  p.retry_every = RetryEvery(lease);
  p.next_try = now;
  renewer_wake_.Signal();
}

ReleaseCall ClientCore::PendingCall(const HoldKey& key, const PendingRelease& p,
                                    MonoTime now) {
  // What is left of the keep, from this send. Less than the backend's
  // smallest lease is rounded up, never down to a plain release: keeping a
  // few milliseconds long is allowed, freeing early is not.
  absl::Duration keep_for = p.keep_until - now;
  if (keep_for <= absl::ZeroDuration()) {
    keep_for = absl::ZeroDuration();
  } else if (keep_for < kMinLease) {
    keep_for = kMinLease;
  }
  return ReleaseCall{.name = key.first,
                     .owner = key.second,
                     .holds = p.holds,
                     .record = p.record.get(),
                     .keep_for = keep_for};
}

void ClientCore::NoteReleaseSent(const HoldKey& key) {
  if (auto it = acquiring_.find(HoldKeyHash()(key)); it != acquiring_.end()) {
    ++it->second.releases_sent;
  }
}

absl::Status ClientCore::SettleAndRegister(const HoldKey& key,
                                           uint64_t& releases_sent,
                                           std::shared_ptr<HoldRecord>& held) {
  const size_t key_hash = HoldKeyHash()(key);
  while (true) {
    PendingRelease sending;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (closed_) return ClosedError();
        auto it = pending_releases_.find(key);
        const bool releasing = releasing_.contains(key_hash);
        if (it == pending_releases_.end() && !releasing) {
          // The fast path: nothing of this owner is being released.
          Acquiring& a = acquiring_[key_hash];
          ++a.count;
          releases_sent = a.releases_sent;
          if (auto h = holds_.find(key); h != holds_.end() && !h->second.lost) {
            held = h->second.record;
          }
          return absl::OkStatus();
        }
        if (!releasing && !it->second.in_flight) {
          if (clock_.Now() >= it->second.give_up) {
            // The backend's lease is over: nothing is left to release.
            pending_releases_.erase(it);
            continue;
          }
          it->second.in_flight = true;
          sending = it->second;
          NoteReleaseSent(key);
          break;
        }
        // Another thread is sending a release of this key: wait for it.
        released_.WaitUntil(&mu_, MonoTime::InfiniteFuture());
      }
    }
    const MonoTime sent = clock_.Now();
    absl::StatusOr<int64_t> left =
        backend_->Release(PendingCall(key, sending, sent));
    TellReleaseFailure(key, ReleaseFailureEvent::Stage::kBackground,
                       left.status());
    absl::MutexLock lock(&mu_);
    released_.Signal();
    auto it = pending_releases_.find(key);
    if (it == pending_releases_.end()) return ClosedError();  // Close() took it
    it->second.in_flight = false;
    if (left.ok() || IsGone(left.status())) {
      pending_releases_.erase(it);
      continue;  // and register, unless another release came meanwhile
    }
    it->second.next_try = sent + it->second.retry_every;
    renewer_wake_.Signal();
    return absl::Status(
        left.status().code(),
        absl::StrCat("an earlier release of lock '", key.first,
                     "' is not confirmed yet, and the lock cannot be taken "
                     "afresh until it is: ",
                     left.status().message()));
  }
}

void ClientCore::RetryReleases(MonoTime now) {
  struct Due {
    HoldKey key;
    PendingRelease p;
  };
  std::vector<Due> due;
  for (auto it = pending_releases_.begin(); it != pending_releases_.end();) {
    PendingRelease& p = it->second;
    if (!p.in_flight && now >= p.give_up) {
      pending_releases_.erase(it++);  // the lease is over on the backend
      continue;
    }
    if (!p.in_flight && p.next_try <= now &&
        !releasing_.contains(HoldKeyHash()(it->first))) {
      p.in_flight = true;
      NoteReleaseSent(it->first);
      due.push_back(Due{it->first, p});
    }
    ++it;
  }
  for (const auto& [key, p] : due) {
    mu_.Unlock();
    absl::StatusOr<int64_t> left =
        backend_->Release(PendingCall(key, p, clock_.Now()));
    TellReleaseFailure(key, ReleaseFailureEvent::Stage::kBackground,
                       left.status());
    mu_.Lock();
    released_.Signal();
    auto it = pending_releases_.find(key);
    if (it == pending_releases_.end()) continue;
    it->second.in_flight = false;
    if (left.ok() || IsGone(left.status())) {
      pending_releases_.erase(it);
    } else {
      // Counted from the attempt's start: one try per period, however
      // long each takes.
      it->second.next_try = now + it->second.retry_every;
    }
  }
}

// --- The renewer -------------------------------------------------------------

void ClientCore::RenewerLoop() {
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    renewer_wakes_at_ = MonoTime::InfinitePast();  // busy: signal freely
    RefreshLiveness(clock_.Now());
    if (closed_) break;
    RenewDue(clock_.Now());
    if (closed_) break;
    RetryReleases(clock_.Now());
    if (closed_) break;
    MonoTime next = MonoTime::InfiniteFuture();
    if (LivenessWanted()) next = next_heartbeat_;
    for (const auto& [key, hold] : holds_) {
      if (hold.renewed && !hold.lost) next = std::min(next, hold.next_renewal);
    }
    for (const auto& [key, p] : pending_releases_) {
      if (!p.in_flight) next = std::min(next, p.next_try);
    }
    if (next > clock_.Now()) {
      renewer_wakes_at_ = next;
      renewer_wake_.WaitUntil(&mu_, next);
    }
  }
}

void ClientCore::RenewDue(MonoTime now) {
  struct Due {
    HoldKey key;
    uint64_t generation;
    uint64_t fencing_token;
    absl::Duration lease;
    std::shared_ptr<HoldRecord> record;
  };
  // Holds due a little later ride along: holds taken moments apart then
  // share one batch instead of queueing one round trip after another.
  bool any_due = false;
  for (const auto& [key, hold] : holds_) {
    any_due =
        any_due || (hold.renewed && !hold.lost && hold.next_renewal <= now);
  }
  if (!any_due) return;
  std::vector<Due> due;
  for (const auto& [key, hold] : holds_) {
    if (hold.renewed && !hold.lost &&
        hold.next_renewal <= now + hold.lease / 10) {
      due.push_back(Due{key, hold.generation, hold.fencing_token, hold.lease,
                        hold.record});
    }
  }
  std::vector<RenewCall> calls;
  calls.reserve(due.size());
  for (const Due& d : due) {
    calls.push_back(RenewCall{.name = d.key.first,
                              .owner = d.key.second,
                              .lease = d.lease,
                              .record = d.record.get()});
  }

  // Renew without the lock, so that acquires and releases go on meanwhile.
  mu_.Unlock();
  const MonoTime sent = clock_.Now();
  std::vector<absl::Status> results = backend_->RenewMany(calls);
  if (observer_) {
    for (size_t i = 0; i < due.size() && i < results.size(); ++i) {
      observer_.Tell(&LockObserver::OnRenewal,
                     RenewalEvent{.lock_namespace = lock_namespace_,
                                  .name = due[i].key.first,
                                  .owner = due[i].key.second,
                                  .fencing_token = due[i].fencing_token,
                                  .by_watchdog = true,
                                  .result = results[i]});
    }
  }
  mu_.Lock();

  const MonoTime after = clock_.Now();
  for (size_t i = 0; i < due.size(); ++i) {
    auto it = holds_.find(due[i].key);
    // Released, or released and taken again, or lost meanwhile.
    if (it == holds_.end() || it->second.generation != due[i].generation) {
      continue;
    }
    HoldEntry& hold = it->second;
    // A confirmation after the deadline does not bring the hold back: it
    // may have been seen lost meanwhile (C19, C20).
    if (LatchDeadline(it->first, hold, after)) continue;
    const absl::Status& result =
        i < results.size() ? results[i]
                           : absl::InternalError("backend lost a renewal");
    if (result.ok()) {
      hold.valid_until =
          std::max(hold.valid_until, LocalDeadline(sent, due[i].lease));
      hold.next_renewal = sent + due[i].lease / 3;
      hold.renewal_error = absl::OkStatus();
    } else if (IsGone(result)) {
      MarkLostQueued(it->first, hold, result, LossCause::kGone,
                     Leftover::kGone);
    } else {
      // Transient: try again soon; the notifier ends the hold at its
      // deadline if no renewal gets through by then.
      hold.renewal_error = result;
      hold.next_renewal = after + RetryEvery(hold.lease);
    }
  }
  notifier_wake_.Signal();  // deadlines moved
}

// --- Holder liveness ---------------------------------------------------------

bool ClientCore::LivenessWanted() const {
  if (!KeepsLiveness()) return false;
  // A hold left to run out with its lease (Hold::KeepUntilLeaseEnd) has no
  // acquisition left, but the backend still ends it when this client's
  // record lapses: keep it up until the hold's lease ends.
  for (const auto& [key, hold] : holds_) {
    if (!hold.lost && (!hold.acquisitions.empty() || hold.kept > 0)) {
      return true;
    }
  }
  return false;
}

void ClientCore::LivenessConfirmed(MonoTime sent) {
  const MonoTime until = LocalDeadline(sent, liveness_ttl_);
  if (until <= liveness_until_) return;
  // Holds whose notice time came under the old bound stay lost (C20), even
  // if the notifier has not looked yet: latched before the bound moves.
  const MonoTime now = clock_.Now();
  if (now >= liveness_until_ - NoticeLead(absl::InfiniteDuration())) {
    ExpireOverdue(now);
  }
  liveness_until_ = until;
  next_heartbeat_ = std::max(next_heartbeat_, sent + liveness_ttl_ / 3);
  heartbeat_error_ = absl::OkStatus();
  notifier_wake_.Signal();  // deadlines moved
}

void ClientCore::RefreshLiveness(MonoTime now) {
  if (now < next_heartbeat_ || !LivenessWanted()) return;
  // Sent without the lock, as renewals are; a heartbeat confirmed after the
  // deadline it would have extended changes nothing for holds already told
  // lost (LatchDeadline keeps them lost).
  mu_.Unlock();
  const MonoTime sent = clock_.Now();
  const absl::Status refreshed = backend_->RenewLiveness(liveness_ttl_);
  mu_.Lock();
  if (refreshed.ok()) {
    LivenessConfirmed(sent);
    next_heartbeat_ = sent + liveness_ttl_ / 3;
  } else {
    // Tried again soon; the notifier ends every hold at liveness_until_ if
    // no refresh gets through by then.
    heartbeat_error_ = refreshed;
    next_heartbeat_ = clock_.Now() + RetryEvery(liveness_ttl_);
  }
}

// --- The notifier ------------------------------------------------------------

void ClientCore::NotifierLoop() {
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    notifier_wakes_at_ = MonoTime::InfinitePast();  // busy: signal freely
    const MonoTime next = ExpireOverdue(clock_.Now());
    if (!queued_.empty()) {
      // One notice at a time, with deadlines checked again in between, so
      // that a slow callback delays the others as little as it can.
      std::vector<Delivery> one;
      one.push_back(std::move(queued_.front()));
      queued_.pop_front();
      mu_.Unlock();
      Deliver(one);
      mu_.Lock();
      continue;
    }
    notifier_wakes_at_ = next;
    notifier_wake_.WaitUntil(&mu_, next);
  }
}

MonoTime ClientCore::ExpireOverdue(MonoTime now) {
  MonoTime next = MonoTime::InfiniteFuture();
  for (auto it = holds_.begin(); it != holds_.end();) {
    HoldEntry& hold = it->second;
    if (hold.kept > 0 && hold.acquisitions.empty()) {
      // Only kept acquisitions: nobody to tell, nothing to release. The
      // record goes once the backend has surely expired the hold.
      const MonoTime gone = hold.valid_until + 2 * DriftMargin(hold.lease);
      if (now >= gone) {
        holds_.erase(it++);
        continue;
      }
      next = std::min(next, gone);
      ++it;
      continue;
    }
    if (!hold.lost && !LatchDeadline(it->first, hold, now)) {
      next =
          std::min(next, DeadlineOf(it->first, hold) - NoticeLead(hold.lease));
    }
    ++it;
  }
  return next;
}

// --- Close -------------------------------------------------------------------

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
  // A hold still believed, or a release still pending (with what is left
  // of its keep, C21).
  struct ToRelease {
    HoldKey key;
    PendingRelease p;
  };
  std::vector<ToRelease> to_release;
  {
    absl::MutexLock lock(&mu_);
    for (Delivery& d : queued_) deliveries.push_back(std::move(d));
    queued_.clear();
    for (auto& [key, hold] : holds_) {
      if (hold.lost) continue;
      // Renewal stops here: the backend frees it within its longest lease.
      const MonoTime lease_end =
          clock_.Now() + hold.max_lease + DriftMargin(hold.max_lease);
      to_release.push_back(
          ToRelease{key, PendingRelease{.holds = AllHoldsOf(key.second, hold),
                                        .record = hold.record,
                                        .give_up = lease_end}});
      MarkLost(key, hold, ClosedError(), LossCause::kClientClosed,
               Leftover::kGone, deliveries);
    }
    holds_.clear();
    for (auto& [key, p] : pending_releases_) {
      // One in flight belongs to the thread that sends it.
      if (!p.in_flight && clock_.Now() < p.give_up) {
        to_release.push_back(ToRelease{key, p});
      }
    }
    pending_releases_.clear();
    released_.Signal();
  }
  Deliver(deliveries);

  const MonoTime give_up = clock_.Now() + options_.close_timeout;
  int failed = 0;
  absl::Status first_error;
  for (const auto& [key, p] : to_release) {
    if (clock_.Now() >= give_up) {
      ++failed;
      continue;
    }
    absl::StatusOr<int64_t> left =
        ReleaseOnClose(key, p, std::min(give_up, p.give_up));
    TellReleaseFailure(key, ReleaseFailureEvent::Stage::kClose, left.status());
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

absl::StatusOr<int64_t> ClientCore::ReleaseOnClose(const HoldKey& key,
                                                   const PendingRelease& p,
                                                   MonoTime until) {
  // A release that meets a failover can still free the lock before its
  // lease would; after `until` (the close deadline, or the lease's end, when
  // nothing is left to release) it is given up. Paced in real time: Close()
  // comes at the end, when nothing moves an injected clock any more.
  const Clock& real = Clock::Real();
  const MonoTime real_until = real.Now() + (until - clock_.Now());
  RetryBackoff backoff;
  while (true) {
    absl::StatusOr<int64_t> left =
        backend_->Release(PendingCall(key, p, clock_.Now()));
    const MonoTime now = real.Now();
    if (left.ok() || !IsTransient(left.status()) || now >= real_until) {
      return left;
    }
    real.SleepUntil(std::min(real_until, now + backoff.Next()));
  }
}

}  // namespace dlock::internal
