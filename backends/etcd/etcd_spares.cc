// A client's spare leases: demand, the pool's thread, and its shutdown.
#include "etcd_spares.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "etcd_leases.h"

namespace dlock::etcd {

SpareLeases::SpareLeases(Client& client, const Clock& clock, Limits limits)
    : client_(client), clock_(clock), limits_(limits), wake_(clock) {}

SpareLeases::~SpareLeases() { Shutdown(); }

int64_t SpareLeases::KeyOf(absl::Duration lease) {
  return absl::ToInt64Seconds(GrantTtl(lease));
}

std::optional<LeaseState> SpareLeases::Take(absl::Duration lease,
                                            absl::Duration max_age) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || max_age < limits_.min_age) return std::nullopt;
  const MonoTime now = clock_.Now();
  Length& length = lengths_[KeyOf(lease)];
  length.lease = lease;
  length.max_age = max_age;
  const bool again = now - length.last_asked < limits_.demand_window;
  if (!again) length.wanted = 0;
  length.last_asked = now;
  // The freshest; when older than `max_age` (a hold's lease given back and
  // not refreshed yet), the acquisition keeps it alive after its grant
  // (EtcdBackend::HoldCountsFrom): a round trip, but no Raft write.
  if (!length.ready.empty() &&
      (Confirmed(length.ready.back()) + max_age > now ||
       LongAlive(length.ready.back(), now))) {
    const LeaseState spare = length.ready.back();
    length.ready.pop_back();
    // To replace it, if the thread should (not for every acquisition).
    if (static_cast<int>(length.ready.size()) + length.busy < length.wanted) {
      wake_.Signal();
    }
    return spare;
  }
  if (again) {
    // Acquired repeatedly, and no spare was ready: one more is wanted.
    length.wanted = std::min(length.wanted + 1, limits_.per_length);
    StartThread();
    wake_.Signal();
  }
  return std::nullopt;
}

void SpareLeases::Return(absl::Duration lease, const LeaseState& spare) {
  {
    absl::MutexLock lock(&mu_);
    auto it = lengths_.find(KeyOf(lease));
    if (it != lengths_.end() && Keep(it->second, spare, clock_.Now())) return;
  }
  (void)client_.LeaseRevoke(spare.id);  // else it expires by itself
}

int SpareLeases::ReadyCount(absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  auto it = lengths_.find(KeyOf(lease));
  return it == lengths_.end() ? 0 : static_cast<int>(it->second.ready.size());
}

bool SpareLeases::Keep(Length& length, const LeaseState& spare, MonoTime now) {
  // One older than acquisitions accept (a hold's, given back) is kept if
  // the thread (none before a length is acquired again) can refresh it
  // long before etcd could expire it.
  const bool wanted = !stopping_ && thread_.joinable() &&
                      now - length.last_asked < limits_.demand_window &&
                      static_cast<int>(length.ready.size()) + length.busy <
                          limits_.per_length &&
                      Pooled() < limits_.total && LongAlive(spare, now);
  if (!wanted) return false;
  auto later = std::upper_bound(length.ready.begin(), length.ready.end(), spare,
                                [](const LeaseState& a, const LeaseState& b) {
                                  return Confirmed(a) < Confirmed(b);
                                });
  length.ready.insert(later, spare);
  // Refreshed at half the age acquisitions accept (DueJob): sooner than
  // the thread meant to look again, it looks now.
  if (Confirmed(spare) + length.max_age / 2 < wake_at_) wake_.Signal();
  return true;
}

int SpareLeases::Pooled() const {
  int pooled = 0;
  for (const auto& [key, length] : lengths_) {
    pooled += static_cast<int>(length.ready.size()) + length.busy;
  }
  return pooled;
}

void SpareLeases::StartThread() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void SpareLeases::Run() {
  while (std::optional<Job> job = NextJob()) Do(*job);
}

std::optional<SpareLeases::Job> SpareLeases::NextJob() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    MonoTime next = MonoTime::InfiniteFuture();
    if (std::optional<Job> job = DueJob(clock_.Now(), next)) return job;
    wake_at_ = next;
    wake_.WaitUntil(&mu_, next);
    wake_at_ = MonoTime::InfinitePast();
  }
  return std::nullopt;
}

std::optional<SpareLeases::Job> SpareLeases::DueJob(MonoTime now,
                                                    MonoTime& next) {
  for (auto it = lengths_.begin(); it != lengths_.end();) {
    const int64_t key = it->first;
    Length& length = it->second;
    if (now - length.last_asked >= limits_.demand_window) {
      // No longer acquired: its spares go.
      length.wanted = 0;
      if (!length.ready.empty()) {
        Job job{Job::Kind::kRevoke, key, length.lease, length.ready.front()};
        length.ready.erase(length.ready.begin());
        return job;
      }
      it = length.busy == 0 ? lengths_.erase(it) : std::next(it);
      continue;
    }
    next = std::min(next, length.last_asked + limits_.demand_window);
    if (!length.ready.empty()) {
      // Kept alive at half the age acquisitions accept, so that one finds
      // it fresh.
      const MonoTime due = Confirmed(length.ready.front()) + length.max_age / 2;
      if (due <= now) {
        // It stays ready meanwhile: an acquisition that comes during the
        // keepalive takes it (Refreshed() then files nothing) rather than
        // finding none and granting a lease of its own.
        return Job{Job::Kind::kRefresh, key, length.lease,
                   length.ready.front()};
      }
      next = std::min(next, due);
    }
    if (static_cast<int>(length.ready.size()) + length.busy < length.wanted &&
        Pooled() < limits_.total) {
      ++length.busy;
      return Job{Job::Kind::kGrant, key, length.lease, LeaseState{}};
    }
    ++it;
  }
  return std::nullopt;
}

void SpareLeases::Do(const Job& job) {
  switch (job.kind) {
    case Job::Kind::kRevoke:
      (void)client_.LeaseRevoke(job.spare.id);  // else it expires by itself
      return;
    case Job::Kind::kRefresh:
      Refreshed(
          job, KeepLeaseAlive(client_, clock_, job.spare.id,
                              MonotonicNow() + client_.options().call_timeout));
      return;
    case Job::Kind::kGrant:
      Granted(job, GrantLease(client_, clock_, job.lease));
      return;
  }
}

void SpareLeases::Granted(const Job& job,
                          const absl::StatusOr<LeaseState>& spare) {
  {
    absl::MutexLock lock(&mu_);
    auto it = lengths_.find(job.length_key);
    if (it != lengths_.end()) {
      --it->second.busy;
      // A failed grant leaves no spare, and wants none until acquisitions
      // find none again.
      if (!spare.ok()) it->second.wanted = 0;
      if (spare.ok() && Keep(it->second, *spare, clock_.Now())) return;
    }
  }
  if (spare.ok()) (void)client_.LeaseRevoke(spare->id);
}

void SpareLeases::Refreshed(const Job& job,
                            const absl::StatusOr<LeaseState>& fresh) {
  {
    absl::MutexLock lock(&mu_);
    auto length = lengths_.find(job.length_key);
    if (length == lengths_.end()) return;
    std::vector<LeaseState>& ready = length->second.ready;
    auto spare = absl::c_find_if(
        ready, [&](const LeaseState& s) { return s.id == job.spare.id; });
    // Taken meanwhile: a hold's lease now, neither filed nor revoked here.
    if (spare == ready.end()) return;
    ready.erase(spare);
    if (fresh.ok() && Keep(length->second, *fresh, clock_.Now())) return;
    // Gone already (NotFound): nothing to revoke.
    if (!fresh.ok() && absl::IsNotFound(fresh.status())) return;
  }
  // Not wanted any more, or not known to be fresh.
  (void)client_.LeaseRevoke(job.spare.id);
}

void SpareLeases::Shutdown() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  wake_.Signal();
  if (thread.joinable()) thread.join();
  std::vector<int64_t> spares;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, length] : lengths_) {
      for (const LeaseState& spare : length.ready) spares.push_back(spare.id);
    }
    lengths_.clear();
  }
  // One deadline for all: a cluster that is down does not stall the close
  // once per spare.
  const CallOptions call{.deadline =
                             MonotonicNow() + client_.options().call_timeout};
  for (int64_t spare : spares) (void)client_.LeaseRevoke(spare, call);
}

}  // namespace dlock::etcd
