// Copyright dlock authors. mode=session's sessions: each hold of this client
// keeps a dedicated connection whose session holds a shared advisory lock on
// the lock's key (pg_schema.cc says why that is safe, C19). A Session is one
// such hold; Sessions is the registry of the live ones and what is done on
// one: a statement (whose answer confirms the session, HeldUntil), the end
// of the hold here, the loss of the connection.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_SESSION_H_
#define DLOCK_BACKENDS_POSTGRES_PG_SESSION_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "dlock/backend/backend.h"
#include "dlock/clock.h"
#include "pg_pool.h"

namespace dlock::postgres {

// One hold of this client, with the connection whose session keeps it.
struct Session {
  Session(absl::string_view name, absl::string_view owner,
          const HoldShape& shape, PgPool::Handle held)
      : name(name),
        owner(owner),
        shape(shape),
        fd(held->socket()),
        conn(std::move(held)) {}

  const std::string name;  // for the keeper's and the watcher's reports
  const std::string owner;
  const HoldShape shape;  // a lock's writer, or a semaphore's holder
  const int fd;
  absl::Mutex mu;
  // Holds the shared advisory lock; empty once the hold ended here.
  PgPool::Handle conn ABSL_GUARDED_BY(mu);
  // For when the core drops the record (SessionKeeper::Retire): the end of
  // the latest lease granted or renewed on conn, counted from the
  // statement's send, and whether the last statement answered about the
  // hold was a release that left holds of the owner (this client's last one
  // of a shared token).
  MonoTime lease_end ABSL_GUARDED_BY(mu);
  bool released_leaving_holds ABSL_GUARDED_BY(mu) = false;
  // Whether conn is set: HeldUntil() reads it without taking `mu`.
  std::atomic<bool> live{true};
  std::atomic<bool> busy{false};  // a statement is in flight on conn
  // The core dropped the hold's record: nothing in this client believes in
  // the hold any more, so its loss is nobody's to hear, and the keeper lets
  // go of the session.
  std::atomic<bool> retired{false};
  // The send time (on the client's clock, since its origin) of the last
  // statement the server answered on conn. Atomic: HeldUntil() reads it
  // without taking `mu`, which a statement in flight may hold for seconds.
  std::atomic<int64_t> confirmed_ns{0};

  // A grant or renewal of `lease` sent at `sent` was answered.
  void Extended(MonoTime sent, absl::Duration lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    lease_end = std::max(lease_end, sent + lease);
    released_leaving_holds = false;
  }

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

// What becomes of a session's connection when its hold ends here.
enum class Leave {
  kToPool,  // it holds no advisory lock (the server let go of it)
  kClosed,  // broken, or it may still hold one: closing frees it
};

class Sessions {
 public:
  // `endpoint`: the redacted one, for the loss's message.
  Sessions(const Clock& clock, std::string endpoint)
      : clock_(clock), endpoint_(std::move(endpoint)) {}

  // The session of a hold granted on `conn` by a statement sent at `sent`,
  // with `lease`: registered live.
  std::shared_ptr<Session> Install(absl::string_view name,
                                   absl::string_view owner,
                                   const HoldShape& shape, PgPool::Handle conn,
                                   MonoTime sent, absl::Duration lease)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The live sessions now (for the keeper, the watcher and Shutdown()).
  std::vector<std::shared_ptr<Session>> Live() ABSL_LOCKS_EXCLUDED(mu_);

  // The hold ended here: the session leaves the registry and its connection
  // goes back to the pool or is closed. Its record, if the core still keeps
  // it, then answers not held (HeldUntil) and not the owner (Release,
  // Renew).
  void End(Session& s, Leave how) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A session statement failed with `error` (OK: the connection was found
  // closed). A broken connection means the hold is gone (the server freed
  // the advisory lock with the session): LostError, so that the core
  // reports it lost (C7). Returns the status for the caller.
  absl::Status Dropped(Session& s, absl::Status error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) ABSL_LOCKS_EXCLUDED(mu_);

  // Every statement on a session goes through here: an answer confirms the
  // session was alive after its send, which moves HeldUntil() on.
  absl::StatusOr<PgResult> RunOn(Session& s, const Statement& stmt,
                                 absl::Span<const std::string> params)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // RunOn() in halves (a batch of renewals): the session is busy from the
  // send until its answer is read.
  absl::Status SendOn(Session& s, const Statement& stmt,
                      absl::Span<const std::string> params)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  absl::StatusOr<PgResult> AwaitOn(
      Session& s, const Statement& stmt, MonoTime sent,
      std::optional<MonoTime> deadline = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  const Clock& clock() const { return clock_; }

 private:
  const Clock& clock_;
  const std::string endpoint_;
  // Held only for lookups and updates, never across a statement or a call
  // into the core. Lock order everywhere: a session's mu, then this.
  absl::Mutex mu_;
  absl::flat_hash_map<Session*, std::shared_ptr<Session>> sessions_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_SESSION_H_
