#include "pending_releases.h"

#include <algorithm>

#include "lease_policy.h"
#include "qualified_name.h"

namespace dlock::internal {

void PendingReleases::Add(const HoldKey& key, HoldsToRelease holds,
                          absl::Duration lease,
                          std::shared_ptr<HoldRecord> record,
                          MonoTime keep_until, uint64_t generation,
                          MonoTime not_before) {
  const MonoTime now = clock_.Now();
  const bool added = !releases_.contains(key);
  Release& p = releases_[key];
  if (generation != 0) p.generations.push_back(generation);
  if (p.record == nullptr) p.record = std::move(record);
  p.keep_until = std::max(p.keep_until, keep_until);
  p.holds.count += holds.count;
  p.holds.all = p.holds.all || holds.all;
  // The backend set its expiry no later than now, to at most the longest
  // lease it was asked for: with no renewal it ends within that (C2).
  p.give_up = std::max(p.give_up, now + lease + DriftMargin(lease));
  p.retry_every = RetryEvery(lease);
  const MonoTime first_try = std::max(now, not_before);
  p.next_try = added ? first_try : std::min(p.next_try, first_try);
  alarms_.RenewerDue(p.next_try);
}

PendingReleases::Claim PendingReleases::ClaimOne(
    HoldMap<Release>::iterator it) {
  it->second.in_flight = true;
  // An acquisition of the key in flight may be granted what this release
  // takes off: it finds out in AfterAcquire().
  if (auto a = acquiring_.find(HoldKeyHash()(it->first));
      a != acquiring_.end()) {
    ++a->second.releases_sent;
  }
  return Claim{it->first, it->second};
}

PendingReleases::Turn PendingReleases::BeforeAcquire(
    const HoldKey& key, uint64_t& releases_sent, std::optional<Claim>& claim) {
  const size_t key_hash = HoldKeyHash()(key);
  const bool releasing = releasing_.contains(key_hash);
  auto it = releases_.find(key);
  if (it != releases_.end() && !releasing && !it->second.in_flight &&
      clock_.Now() >= it->second.give_up) {
    // The backend's lease is over: nothing is left to release.
    releases_.erase(it);
    it = releases_.end();
  }
  if (it == releases_.end() && !releasing) {
    // The fast path: nothing of this owner is being released.
    Acquiring& a = acquiring_[key_hash];
    ++a.count;
    releases_sent = a.releases_sent;
    return Turn::kGo;
  }
  if (releasing || it->second.in_flight) return Turn::kWait;
  claim = ClaimOne(it);
  return Turn::kSend;
}

bool PendingReleases::AfterAcquire(const HoldKey& key, uint64_t releases_sent) {
  const size_t key_hash = HoldKeyHash()(key);
  Acquiring& a = acquiring_[key_hash];
  const bool raced =
      a.releases_sent != releases_sent || releases_.contains(key);
  if (--a.count == 0) acquiring_.erase(key_hash);
  return raced;
}

void PendingReleases::BeginFinalRelease(const HoldKey& key) {
  ++releasing_[HoldKeyHash()(key)];
}

void PendingReleases::EndFinalRelease(const HoldKey& key) {
  const size_t key_hash = HoldKeyHash()(key);
  if (--releasing_[key_hash] == 0) releasing_.erase(key_hash);
  alarms_.released().Signal();
}

std::vector<PendingReleases::Claim> PendingReleases::ClaimDue(MonoTime now) {
  std::vector<Claim> due;
  for (auto it = releases_.begin(); it != releases_.end();) {
    Release& p = it->second;
    if (!p.in_flight && now >= p.give_up) {
      releases_.erase(it++);  // the lease is over on the backend
      continue;
    }
    if (!p.in_flight && p.next_try <= now &&
        !releasing_.contains(HoldKeyHash()(it->first))) {
      due.push_back(ClaimOne(it));
    }
    ++it;
  }
  return due;
}

std::vector<PendingReleases::Claim> PendingReleases::TakeAll(MonoTime now) {
  std::vector<Claim> all;
  for (auto& [key, p] : releases_) {
    // One in flight belongs to the thread that sends it.
    if (!p.in_flight && now < p.give_up) all.push_back(Claim{key, p});
  }
  releases_.clear();
  alarms_.released().Signal();
  return all;
}

PendingReleases::Settled PendingReleases::Settle(const HoldKey& key,
                                                 const absl::Status& result,
                                                 MonoTime sent) {
  alarms_.released().Signal();
  auto it = releases_.find(key);
  if (it == releases_.end()) return Settled::kTaken;
  it->second.in_flight = false;
  if (result.ok() || IsGone(result)) {
    releases_.erase(it);
    return Settled::kDone;
  }
  // Counted from the attempt's start: one try per period, however long
  // each takes.
  it->second.next_try = sent + it->second.retry_every;
  alarms_.RenewerDue(it->second.next_try);
  return Settled::kRetrying;
}

MonoTime PendingReleases::NextTry() const {
  MonoTime next = MonoTime::InfiniteFuture();
  for (const auto& [key, p] : releases_) {
    if (!p.in_flight) next = std::min(next, p.next_try);
  }
  return next;
}

ReleaseCall PendingReleases::CallFor(const Claim& claim, MonoTime now) {
  const Release& p = claim.release;
  // What is left of the keep, from this send. Less than the backend's
  // smallest lease is rounded up, never down to a plain release: keeping a
  // few milliseconds long is allowed, freeing early is not.
  absl::Duration keep_for = p.keep_until - now;
  if (keep_for <= absl::ZeroDuration()) {
    keep_for = absl::ZeroDuration();
  } else if (keep_for < kMinLease) {
    keep_for = kMinLease;
  }
  return ReleaseCall{.name = ObjectNameOf(claim.key.first),
                     .owner = claim.key.second,
                     .holds = p.holds.count,
                     .all_holds = p.holds.all,
                     .record = p.record.get(),
                     .keep_for = keep_for,
                     .shape = ShapeOf(claim.key.first)};
}

}  // namespace dlock::internal
