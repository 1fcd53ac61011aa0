// mode=session: the lease-mode row, bound as well to the holder's session.
// Each lock this client holds keeps a dedicated connection whose session
// holds a shared advisory lock on a 64-bit key of namespace and name; a row
// whose key no session holds is dead, and is taken over once it has been
// seen dead for the holder's grace G (session_grace). So a holder whose
// process dies or whose connection drops frees the lock within about G, not
// after its lease; the lease still bounds a holder that hangs (C2).
//
// The holder, for its part, believes in a hold only until the send time of
// the last statement the server answered on the hold's session plus G, less
// a margin (HeldUntil): a holder cut off from the server (a partition that
// swallowed the server's FIN) stops believing before anyone can take over
// (C19; the argument is in pg_schema.cc). A keeper thread keeps that fresh
// with a light statement on each held session none ran on for G/3.
// The server-side functions are in pg_schema.cc; docs/postgres.md explains
// the design, and what this mode does not give behind a pooling proxy.
#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/hold_key.h"
#include "pg_common.h"

namespace dlock::postgres {
namespace {

// One hold of this client, with the connection whose session keeps it.
struct Session {
  absl::Mutex mu;
  PgPool::Handle conn ABSL_GUARDED_BY(mu);  // empty once dropped
  int64_t local_holds ABSL_GUARDED_BY(mu) = 0;
  std::atomic<bool> busy{false};  // a statement is in flight on conn
  // The send time (on the client's clock, since its origin) of the last
  // statement the server answered on conn. Atomic: HeldUntil() reads it
  // without taking `mu`, which a statement in flight may hold for seconds.
  std::atomic<int64_t> confirmed_ns{0};
  int fd = -1;

  void Confirm(MonoTime sent) {
    const int64_t ns = absl::ToInt64Nanoseconds(sent.since_origin());
    int64_t seen = confirmed_ns.load();
    while (seen < ns && !confirmed_ns.compare_exchange_weak(seen, ns)) {
    }
  }
  MonoTime confirmed() const {
    return MonoTime::FromSinceOrigin(absl::Nanoseconds(confirmed_ns.load()));
  }
};

// How far the client's clock may run fast against the server's over a
// grace: 1% of it plus 2 ms, as for leases (client_core.cc, DriftMargin).
absl::Duration GraceMargin(absl::Duration grace) {
  return grace / 100 + absl::Milliseconds(2);
}

using Key = HoldKey;  // name, owner

const char* Bool(bool b) { return b ? "true" : "false"; }

class SessionBackend : public PgBackendBase, public PgListener::Watcher {
 public:
  SessionBackend(PgOptions options, const BackendConfig& config)
      : PgBackendBase(std::move(options), config),
        grace_(options_.session_grace),
        sessions_pool_(options_, options_.max_sessions, "session"),
        keeper_wake_(clock_) {}
  // The listener and the keeper call into this object; they must stop before
  // the members below go (Shutdown() normally stopped them already).
  ~SessionBackend() override {
    StopKeeper();
    if (notifications_ != nullptr) notifications_->Stop();
  }

  void StartKeeper() {
    keeper_ = std::thread([this] { KeepLoop(); });
  }

  // Holds live on their session's connection: a restart ends them.
  BackendTraits Traits() const override {
    return BackendTraits{.holds_tied_to_session = true,
                         .fencing = FencingStrength::kDurable,
                         .can_list = true};
  }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    const Key key(call.name, call.owner);
    PgPool::Handle conn;
    if (std::shared_ptr<Session> s = Find(key)) {
      const MonoTime sent = clock_.Now();
      absl::StatusOr<std::optional<Acquired>> again =
          Reenter(key, *s, call, conn);
      if (!again.ok()) return again.status();
      if (again->has_value()) {
        return Grant{.fencing_token = (*again)->fencing_token,
                     .hold_count = (*again)->hold_count,
                     .sent = sent};
      }
    }
    if (!conn) {
      absl::StatusOr<PgPool::Handle> fresh = sessions_pool_.Get();
      if (!fresh.ok()) return fresh.status();
      conn = *std::move(fresh);
    }
    const std::string params[] = {ns_,         key.first,
                                  key.second,  Millis(call.lease),
                                  Bool(false), Millis(grace_)};
    absl::StatusOr<Grant> acquired = AcquireWithWakeups(
        call, hub_, fallback_poll_, [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<PgResult> r = conn->Run(sql_.s_acquire, params);
          if (!r.ok()) return r.status();
          return ToAttempt(r->get());
        });
    if (!acquired.ok()) return acquired.status();
    Install(key, std::move(conn), acquired->sent);
    return acquired;
  }

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    const absl::string_view name = call.name;
    const absl::string_view owner = call.owner;
    const int64_t holds = call.holds;
    const Key key(name, owner);
    std::shared_ptr<Session> s = Find(key);
    if (s == nullptr) {
      // A hold taken elsewhere under an explicit owner token (C6).
      const std::string params[] = {
          ns_,         key.first,   key.second,  absl::StrCat(holds),
          Bool(false), Bool(false), sql_.channel};
      absl::StatusOr<PgResult> r = RunPooled(sql_.s_release, params, false);
      return Released(name, r);
    }
    absl::MutexLock lock(&s->mu);
    if (!s->conn) return NotOwnerError(name);
    const bool keep = s->local_holds > holds;
    const std::string params[] = {
        ns_,        key.first,  key.second,  absl::StrCat(holds),
        Bool(true), Bool(keep), sql_.channel};
    absl::StatusOr<PgResult> r = RunOn(*s, sql_.s_release, params);
    if (!r.ok()) return Dropped(key, *s, r.status());
    absl::StatusOr<int64_t> left = Released(name, r);
    s->local_holds -= holds;
    if (!left.ok() || *left == 0 || !keep) Remove(key, *s);
    return left;
  }

  absl::Status Renew(const RenewCall& call) override {
    const Key key(call.name, call.owner);
    std::shared_ptr<Session> s = Find(key);
    absl::StatusOr<PgResult> r;
    if (s == nullptr) {
      const std::string params[] = {ns_, key.first, key.second,
                                    Millis(call.lease), Bool(false)};
      r = RunPooled(sql_.s_renew, params, true);
      if (!r.ok()) return r.status();
    } else {
      absl::MutexLock lock(&s->mu);
      if (!s->conn) return NotOwnerError(call.name);
      const std::string params[] = {ns_, key.first, key.second,
                                    Millis(call.lease), Bool(true)};
      r = RunOn(*s, sql_.s_renew, params);
      if (!r.ok()) return Dropped(key, *s, r.status());
      if (GetText(r->get(), 0, 0) != "t") Remove(key, *s);
    }
    if (PQntuples(r->get()) != 1 || GetText(r->get(), 0, 0) != "t") {
      return NotOwnerError(call.name);
    }
    return absl::OkStatus();
  }

  // The hold is believed only while its session may still be alive on the
  // server: until the last confirmed send on it plus the grace, less the
  // margin (C19). From memory and atomics only: the core calls this under
  // its own lock, on every State() and from its notifier. A hold with no
  // session here was released or dropped: not believed.
  MonoTime HeldUntil(absl::string_view name, absl::string_view owner,
                     const HoldRecord*) override {
    std::shared_ptr<Session> s = Find(HoldKeyView(name, owner));
    if (s == nullptr) return MonoTime::InfinitePast();
    return s->confirmed() + grace_ - GraceMargin(grace_);
  }

  void Shutdown() override {
    StopKeeper();
    PgBackendBase::Shutdown();
    HoldMap<std::shared_ptr<Session>> sessions;
    {
      absl::MutexLock lock(&sessions_mu_);
      sessions.swap(sessions_);
    }
    // Closing a session frees its advisory lock on the server.
    for (auto& [key, s] : sessions) {
      absl::MutexLock lock(&s->mu);
      s->conn.Discard();
    }
    sessions_pool_.Clear();
  }

  // PgListener::Watcher: the sockets of idle sessions. A readable idle
  // session socket means the server said something unasked, normally that
  // it is closing the connection (shutdown, pg_terminate_backend).
  std::vector<int> Fds() override {
    std::vector<int> fds;
    absl::MutexLock lock(&sessions_mu_);
    for (const auto& [key, s] : sessions_) {
      if (!s->busy) fds.push_back(s->fd);
    }
    return fds;
  }

  void OnReadable(int fd) override {
    std::vector<std::pair<Key, std::shared_ptr<Session>>> hit;
    {
      absl::MutexLock lock(&sessions_mu_);
      for (const auto& [key, s] : sessions_) {
        if (s->fd == fd) hit.emplace_back(key, s);
      }
    }
    for (auto& [key, s] : hit) {
      if (!s->mu.TryLock()) continue;  // in use: its caller will see it
      const bool alive = s->busy || !s->conn || s->conn->Alive();
      absl::Status lost;
      if (!alive) lost = Dropped(key, *s, absl::OkStatus());
      s->mu.Unlock();
      if (!alive) listener_->OnHoldLost(key.first, key.second, lost);
    }
  }

 private:
  std::shared_ptr<Session> Find(const HoldKeyView& key) {
    absl::MutexLock lock(&sessions_mu_);
    auto it = sessions_.find(key);
    return it == sessions_.end() ? nullptr : it->second;
  }

  // Re-entry on the session that already holds. Returns nullopt when the
  // hold turned out to be lost; the function then let go of the session's
  // advisory lock, and `reuse` gets the connection for a fresh attempt.
  absl::StatusOr<std::optional<Acquired>> Reenter(const Key& key, Session& s,
                                                  const AcquireCall& call,
                                                  PgPool::Handle& reuse) {
    absl::MutexLock lock(&s.mu);
    if (!s.conn) return std::optional<Acquired>();
    const std::string params[] = {ns_,        key.first,
                                  key.second, Millis(call.lease),
                                  Bool(true), Millis(grace_)};
    absl::StatusOr<PgResult> r = RunOn(s, sql_.s_acquire, params);
    if (!r.ok()) {
      if (!s.conn->broken()) return r.status();
      // The session is gone, and with it the hold: start afresh.
      absl::Status lost = Dropped(key, s, r.status());
      listener_->OnHoldLost(key.first, key.second, lost);
      return std::optional<Acquired>();
    }
    Attempt attempt = ToAttempt(r->get());
    if (attempt.acquired.has_value()) {
      ++s.local_holds;
      return attempt.acquired;
    }
    reuse = std::move(s.conn);  // holds nothing now; reused for the wait
    Remove(key, s);
    return std::optional<Acquired>();
  }

  // `sent`: when the winning attempt was sent, on conn's session.
  void Install(const Key& key, PgPool::Handle conn, MonoTime sent) {
    auto fresh = std::make_shared<Session>();
    fresh->fd = conn->socket();
    fresh->Confirm(sent);
    std::shared_ptr<Session> existing;
    {
      // Lock order everywhere: a session's mu, then sessions_mu_.
      absl::MutexLock session_lock(&fresh->mu);
      absl::MutexLock lock(&sessions_mu_);
      auto [it, inserted] = sessions_.try_emplace(key, fresh);
      if (inserted) {
        fresh->conn = std::move(conn);
        fresh->local_holds = 1;
      } else {
        existing = it->second;
      }
    }
    if (existing != nullptr) {
      // Another thread of the same owner won the same lock meanwhile: this
      // was a re-entry, and one session per hold is enough.
      if (conn->Exec("SELECT pg_advisory_unlock_all()").ok()) {
        absl::MutexLock lock(&existing->mu);
        ++existing->local_holds;
      } else {
        conn.Discard();
      }
      return;
    }
    notifications_->Wake();  // watch the new session's socket
  }

  void Remove(const Key& key, Session& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    {
      absl::MutexLock lock(&sessions_mu_);
      auto it = sessions_.find(key);
      if (it != sessions_.end() && it->second.get() == &s) sessions_.erase(it);
    }
    s.conn = PgPool::Handle();  // back to the pool, holding nothing
  }

  // A session statement failed. A broken connection means the hold is gone
  // (the server freed the advisory lock with the session): FailedPrecondition,
  // so that the core reports it lost (C7). Returns the status for the caller.
  absl::Status Dropped(const Key& key, Session& s, absl::Status error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if (!error.ok() && s.conn && !s.conn->broken()) return error;
    if (s.conn) s.conn.Discard();
    Remove(key, s);
    return LostError(
        key.first,
        absl::StrCat(
            "the session that held it at ", options_.endpoint, " ended",
            error.ok() ? "" : absl::StrCat(" (", error.message(), ")")));
  }

  // Every statement on a session goes through here: an answer confirms the
  // session was alive after `sent`, which moves HeldUntil() on.
  absl::StatusOr<PgResult> RunOn(Session& s, const Statement& stmt,
                                 absl::Span<const std::string> params)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    s.busy = true;
    const MonoTime sent = clock_.Now();
    absl::StatusOr<PgResult> r = s.conn->Run(stmt, params);
    if (r.ok()) s.Confirm(sent);
    s.busy = false;
    return r;
  }

  // The keeper: a light statement on each held session on which none was
  // answered for a third of the grace, so that a live holder's HeldUntil()
  // stays ahead. Its own thread, not the listener's: a ping waits up to the
  // statement timeout, and wake-ups must not wait behind it.
  void KeepLoop() {
    absl::MutexLock lock(&keeper_mu_);
    while (!keeper_stop_) {
      const MonoTime now = clock_.Now();
      // Wake at the next session due, and no later than a third of the
      // grace: a session installed meanwhile is due no sooner than that.
      MonoTime next = now + grace_ / 3;
      // A session busy with a caller's statement is looked at again soon
      // rather than at once: that statement's answer may confirm it.
      const MonoTime soon = now + grace_ / 10;
      std::vector<std::pair<Key, std::shared_ptr<Session>>> due;
      {
        absl::MutexLock sessions_lock(&sessions_mu_);
        for (const auto& [key, s] : sessions_) {
          const MonoTime at = s->confirmed() + grace_ / 3;
          if (at > now) {
            next = std::min(next, at);
          } else if (s->busy) {
            next = std::min(next, soon);
          } else {
            due.emplace_back(key, s);
          }
        }
      }
      if (!due.empty()) {
        keeper_mu_.Unlock();
        bool skipped = false;
        for (auto& [key, s] : due) skipped = !Ping(key, *s) || skipped;
        notifications_->Wake();  // watch the sockets that were busy again
        keeper_mu_.Lock();
        if (skipped) next = std::min(next, soon);
      }
      if (!keeper_stop_) keeper_wake_.WaitUntil(&keeper_mu_, next);
    }
  }

  // Returns false when a caller held the session, so no ping was sent.
  bool Ping(const Key& key, Session& s) {
    // A caller's statement in flight holds mu: its answer confirms the
    // session just as well, and its failure reports the loss. Never wait
    // behind it, so that one stuck session does not hold up the others.
    if (!s.mu.TryLock()) return false;
    absl::Status lost;
    if (s.conn && clock_.Now() >= s.confirmed() + grace_ / 3) {
      absl::StatusOr<PgResult> r = RunOn(s, sql_.ping, {});
      // A broken connection ends the session: the hold is gone. Another
      // error (a statement timeout) leaves the session as it was.
      if (!r.ok()) lost = Dropped(key, s, r.status());
      if (s.conn) lost = absl::OkStatus();
    }
    s.mu.Unlock();
    if (!lost.ok()) listener_->OnHoldLost(key.first, key.second, lost);
    return true;
  }

  void StopKeeper() {
    {
      absl::MutexLock lock(&keeper_mu_);
      keeper_stop_ = true;
    }
    keeper_wake_.Signal();
    if (keeper_.joinable()) keeper_.join();
  }

  absl::StatusOr<int64_t> Released(absl::string_view name,
                                   const absl::StatusOr<PgResult>& r) {
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) != 1 || PQgetisnull(r->get(), 0, 0)) {
      return NotOwnerError(name);
    }
    const int64_t left = GetInt(r->get(), 0, 0);
    if (left == 0) hub_.Notify(name);
    return left;
  }

  static Attempt ToAttempt(const PGresult* r) {
    Attempt attempt;
    if (PQntuples(r) == 1 && GetText(r, 0, 0) == "t") {
      attempt.acquired =
          Acquired{.fencing_token = static_cast<uint64_t>(GetInt(r, 0, 2)),
                   .hold_count = GetInt(r, 0, 1)};
    } else if (PQntuples(r) == 1) {
      attempt.holder_lease_left = absl::Milliseconds(GetInt(r, 0, 3));
    }
    return attempt;
  }

  const absl::Duration grace_;
  PgPool sessions_pool_;
  // Held only for lookups and updates of the map, never across a statement
  // or a call into the core: HeldUntil() takes it under the core's lock.
  absl::Mutex sessions_mu_;
  HoldMap<std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(sessions_mu_);
  absl::Mutex keeper_mu_;
  bool keeper_stop_ ABSL_GUARDED_BY(keeper_mu_) = false;
  ClockCondVar keeper_wake_;
  std::thread keeper_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewSessionBackend(
    PgOptions options, const BackendConfig& config) {
  auto backend = std::make_unique<SessionBackend>(std::move(options), config);
  if (absl::Status s = backend->Start(backend.get()); !s.ok()) return s;
  backend->StartKeeper();
  return backend;
}

}  // namespace dlock::postgres
