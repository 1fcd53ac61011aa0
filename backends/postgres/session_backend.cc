// mode=session: the lease-mode row, bound as well to the holder's session.
// Each lock this client holds keeps a dedicated connection whose session
// holds a shared advisory lock on a 64-bit key of namespace and name; a row
// whose key no session holds is dead and is taken over at once. So a holder
// whose process dies or whose connection drops frees the lock immediately,
// not after its lease; the lease still bounds a holder that hangs (C2).
// The server-side functions are in pg_schema.cc; docs/postgres.md explains
// the design, and what this mode does not give behind a pooling proxy.
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "pg_common.h"

namespace dlock::postgres {
namespace {

// One hold of this client, with the connection whose session keeps it.
struct Session {
  absl::Mutex mu;
  PgPool::Handle conn ABSL_GUARDED_BY(mu);  // empty once dropped
  int64_t local_holds ABSL_GUARDED_BY(mu) = 0;
  std::atomic<bool> busy{false};  // a statement is in flight on conn
  int fd = -1;
};

using Key = std::pair<std::string, std::string>;  // name, owner

const char* Bool(bool b) { return b ? "true" : "false"; }

class SessionBackend : public PgBackendBase, public PgListener::Watcher {
 public:
  SessionBackend(PgOptions options, const BackendConfig& config)
      : PgBackendBase(std::move(options), config),
        sessions_pool_(options_, options_.max_sessions, "session") {}
  // The listener calls into this object; it must stop before the members
  // below go (Shutdown() normally stopped it already).
  ~SessionBackend() override {
    if (notifications_ != nullptr) notifications_->Stop();
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
    const std::string params[] = {ns_, key.first, key.second,
                                  Millis(call.lease), Bool(false)};
    absl::StatusOr<Grant> acquired = AcquireWithWakeups(
        call, hub_, fallback_poll_, [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<PgResult> r = conn->Run(sql_.s_acquire, params);
          if (!r.ok()) return r.status();
          return ToAttempt(r->get());
        });
    if (!acquired.ok()) return acquired.status();
    Install(key, std::move(conn));
    return acquired;
  }

  absl::StatusOr<int64_t> Release(absl::string_view name,
                                  absl::string_view owner,
                                  int64_t holds) override {
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
    if (!s->conn) return NotOwner(name);
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
      if (!s->conn) return NotOwner(call.name);
      const std::string params[] = {ns_, key.first, key.second,
                                    Millis(call.lease), Bool(true)};
      r = RunOn(*s, sql_.s_renew, params);
      if (!r.ok()) return Dropped(key, *s, r.status());
      if (GetText(r->get(), 0, 0) != "t") Remove(key, *s);
    }
    if (PQntuples(r->get()) != 1 || GetText(r->get(), 0, 0) != "t") {
      return NotOwner(call.name);
    }
    return absl::OkStatus();
  }

  void Shutdown() override {
    PgBackendBase::Shutdown();
    absl::flat_hash_map<Key, std::shared_ptr<Session>> sessions;
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
  std::shared_ptr<Session> Find(const Key& key) {
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
    const std::string params[] = {ns_, key.first, key.second,
                                  Millis(call.lease), Bool(true)};
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

  void Install(const Key& key, PgPool::Handle conn) {
    auto fresh = std::make_shared<Session>();
    fresh->fd = conn->socket();
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
    return absl::FailedPreconditionError(absl::StrCat(
        "lock '", key.first, "' was lost: the session that held it at ",
        options_.endpoint, " ended",
        error.ok() ? "" : absl::StrCat(" (", error.message(), ")")));
  }

  absl::StatusOr<PgResult> RunOn(Session& s, const Statement& stmt,
                                 absl::Span<const std::string> params)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    s.busy = true;
    absl::StatusOr<PgResult> r = s.conn->Run(stmt, params);
    s.busy = false;
    return r;
  }

  absl::StatusOr<int64_t> Released(absl::string_view name,
                                   const absl::StatusOr<PgResult>& r) {
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) != 1 || PQgetisnull(r->get(), 0, 0)) {
      return NotOwner(name);
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

  PgPool sessions_pool_;
  absl::Mutex sessions_mu_;
  absl::flat_hash_map<Key, std::shared_ptr<Session>> sessions_
      ABSL_GUARDED_BY(sessions_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewSessionBackend(
    PgOptions options, const BackendConfig& config) {
  auto backend = std::make_unique<SessionBackend>(std::move(options), config);
  if (absl::Status s = backend->Start(backend.get()); !s.ok()) return s;
  return backend;
}

}  // namespace dlock::postgres
