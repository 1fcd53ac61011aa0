#include "session_keeper.h"

#include <algorithm>

namespace dlock::postgres {

void SessionKeeper::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void SessionKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.Signal();
  if (thread_.joinable()) thread_.join();
}

void SessionKeeper::Clear() {
  {
    absl::MutexLock lock(&mu_);
    retired_.clear();
  }
  lingering_.clear();
}

void SessionKeeper::Retire(std::shared_ptr<Session> s) {
  s->retired = true;
  {
    absl::MutexLock lock(&mu_);
    retired_.push_back(std::move(s));
  }
  wake_.Signal();
}

void SessionKeeper::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    for (std::shared_ptr<Session>& s : retired_) {
      lingering_.push_back(std::move(s));
    }
    retired_.clear();
    const MonoTime now = clock_.Now();
    // Wake at the next session due, and no later than a third of the
    // grace: a session installed meanwhile is due no sooner than that.
    MonoTime next = now + grace_ / 3;
    mu_.Unlock();
    const std::vector<std::shared_ptr<Session>> due = Due(now, next);
    bool skipped = false;
    for (const std::shared_ptr<Session>& s : due) {
      skipped = !Ping(*s) || skipped;
    }
    const bool ended = LetGoOfLingering(next);
    // Watch the sockets that were busy again; forget those that ended.
    if (!due.empty() || ended) rewatch_();
    mu_.Lock();
    // A session busy with a caller's statement is looked at again soon
    // rather than at once: that statement's answer may confirm it.
    if (skipped) next = std::min(next, now + grace_ / 10);
    // Sessions retired while this round ran are looked at at once.
    if (!stop_ && retired_.empty()) wake_.WaitUntil(&mu_, next);
  }
}

std::vector<std::shared_ptr<Session>> SessionKeeper::Due(MonoTime now,
                                                         MonoTime& next) {
  const MonoTime soon = now + grace_ / 10;
  std::vector<std::shared_ptr<Session>> due;
  for (std::shared_ptr<Session>& s : sessions_.Live()) {
    if (s->retired) continue;  // nobody believes in it: not kept
    const MonoTime at = s->confirmed() + grace_ / 3;
    if (at > now) {
      next = std::min(next, at);
    } else if (s->busy) {
      next = std::min(next, soon);
    } else {
      due.push_back(std::move(s));
    }
  }
  return due;
}

bool SessionKeeper::Ping(Session& s) {
  // A caller's statement in flight holds mu: its answer confirms the
  // session just as well, and its failure reports the loss. Never wait
  // behind it, so that one stuck session does not hold up the others.
  if (!s.mu.TryLock()) return false;
  absl::Status lost;
  if (s.conn && !s.retired && clock_.Now() >= s.confirmed() + grace_ / 3) {
    absl::StatusOr<PgResult> r = sessions_.RunOn(s, ping_, {});
    // A broken connection ends the session: the hold is gone. Another
    // error (a statement timeout) leaves the session as it was.
    if (!r.ok()) lost = sessions_.Dropped(s, r.status());
    if (s.conn) lost = absl::OkStatus();
  }
  const bool tell = !lost.ok() && !s.retired;
  s.mu.Unlock();
  if (tell) listener_->OnHoldLost(s.name, s.owner, s.shape, lost);
  return true;
}

bool SessionKeeper::LetGoOfLingering(MonoTime& next) {
  std::vector<std::shared_ptr<Session>> staying;
  for (std::shared_ptr<Session>& s : lingering_) {
    if (std::optional<MonoTime> at = LetGo(*s, clock_.Now())) {
      next = std::min(next, *at);
      staying.push_back(std::move(s));
    }
  }
  const bool ended = staying.size() < lingering_.size();
  lingering_.swap(staying);
  return ended;
}

// A retired session: nothing in this client believes in its hold any more.
// When its last answered statement was a release that left holds of the
// owner (this client's last hold of an owner token held elsewhere too), it
// lets go at once. Otherwise the core may never have known the hold (an
// acquisition whose reply was lost, C21), or replaced its record with a
// later grant's of the same owner: it stays until the lease last granted or
// renewed on it is over, as the row would in lease mode, so that the owner's
// retry re-enters the hold rather than finding its own session dead and
// waiting out the grace. Letting go releases the shared lock and returns
// the connection to the pool, or closes it if that fails.
std::optional<MonoTime> SessionKeeper::LetGo(Session& s, MonoTime now) {
  absl::MutexLock lock(&s.mu);
  if (!s.conn) return std::nullopt;  // ended already
  if (!s.released_leaving_holds && now < s.lease_end) return s.lease_end;
  s.busy = true;
  const bool clean =
      !s.conn->broken() && s.conn->Exec("SELECT pg_advisory_unlock_all()").ok();
  s.busy = false;
  sessions_.End(s, clean ? Leave::kToPool : Leave::kClosed);
  return std::nullopt;
}

}  // namespace dlock::postgres
