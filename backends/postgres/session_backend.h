// Copyright dlock authors. mode=session: the lease-mode row, bound as well to
// the holder's session. Each lock this client holds keeps a dedicated
// connection whose session holds a shared advisory lock on a 64-bit key of
// namespace and name (pg_session.h); a row whose key no session holds is
// dead, and is taken over once it has been seen dead for the holder's grace
// G (session_grace). So a holder whose process dies or whose connection
// drops frees the lock within about G, not after its lease; the lease still
// bounds a holder that hangs (C2).
//
// The holder, for its part, believes in a hold only until the send time of
// the last statement the server answered on the hold's session plus G, less
// the drift margin (HeldUntil): a holder cut off from the server (a
// partition that swallowed the server's FIN) stops believing before anyone
// can take over (C19; the argument is in pg_schema.cc). The keeper
// (session_keeper.h) keeps that fresh.
//
// A hold's session is its record (backend.h): the core keeps it with the
// hold and hands it back on every call about it, so no table here maps a
// name and owner to a session. The registry of live sessions serves only
// the keeper, the socket watcher and Shutdown(). docs/postgres.md explains
// the design, and what this mode does not give behind a pooling proxy.
#ifndef DLOCK_BACKENDS_POSTGRES_SESSION_BACKEND_H_
#define DLOCK_BACKENDS_POSTGRES_SESSION_BACKEND_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "pg_common.h"
#include "pg_primitives.h"
#include "pg_session.h"
#include "session_keeper.h"

namespace dlock::postgres {

class SessionBackend : public PgBackendBase, public PgListener::Watcher {
 public:
  SessionBackend(PgOptions options, const BackendConfig& config);
  // The listener and the keeper call into this object; they must stop before
  // the members below go (Shutdown() normally stopped them already). Records
  // the core still keeps then find their sessions ended.
  ~SessionBackend() override;

  // Connects, starts listening (with this object watching the sessions'
  // sockets) and starts the keeper.
  absl::Status Start();

  // Holds live on their session's connection: a restart ends them.
  BackendTraits Traits() const override;
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override;
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override;
  absl::Status Renew(const RenewCall& call) override;
  // The leader's new value (C24), on a pooled connection.
  absl::Status Proclaim(const ProclaimCall& call) override;
  // Every hold has a session of its own, so renewing them one after another
  // would cost a round trip per hold: the renewals are sent on all sessions
  // first and each answer is read as it arrives (session_backend.cc).
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override;
  // The hold is believed only while its session may still be alive on the
  // server: until the last confirmed send on it plus the grace, less the
  // drift margin (C19). From the record's atomics only: the core calls this
  // under its own lock, on every State() and from its notifier. A session
  // that ended here (released, dropped) is not believed, nor a hold with no
  // record, which this client never took.
  MonoTime HeldUntil(absl::string_view name, absl::string_view owner,
                     const HoldRecord* record) override;
  void Shutdown() override;

  // PgListener::Watcher: the sockets of idle sessions. A readable idle
  // session socket means the server said something unasked, normally that
  // it is closing the connection (shutdown, pg_terminate_backend).
  std::vector<int> Fds() override;
  void OnReadable(int fd) override;

 private:
  // A renewal sent on a session whose answer is awaited (RenewMany).
  struct InFlight {
    size_t call;
    Session* session;
    MonoTime sent;
  };

  // The parameters of the session-mode functions (pg_schema.cc). `have`:
  // the statement runs on the hold's own session, which holds the shared
  // lock; without it (a pooled connection) the holder's session must be
  // alive.
  // A lock's, or an election's on its row (with its value).
  std::vector<std::string> AcquireParams(const AcquireCall& call,
                                         bool have) const;
  const Statement& AcquireStatement(const HoldShape& shape) const;
  // The answer of AcquireStatement: an election's as a lock's acquire, a
  // writer's as write_acquire's (UpgradeRefused included).
  static absl::StatusOr<Attempt> ToWriterAttempt(const AcquireCall& call,
                                                 const PGresult* r);
  // p_keep is `have`: the session keeps its shared lock while the row counts
  // holds of the owner. When this client's last hold goes and others remain
  // (an owner token held from elsewhere too), the session lets go once the
  // core drops the record (SessionKeeper::Retire).
  // A semaphore's holder's (pg_primitives.h) or a lock's, by call.shape.
  std::vector<std::string> ReleaseParams(const ReleaseCall& call,
                                         bool have) const;
  std::vector<std::string> RenewParams(const RenewCall& call, bool have) const;
  const Statement& ReleaseStatement(const HoldShape& shape) const;
  const Statement& RenewStatement(const HoldShape& shape) const;

  // Re-entry on the session that already holds. Returns nothing when the
  // hold turned out to be lost; the function then let go of the session's
  // advisory lock, and `reuse` gets the connection for a fresh attempt.
  // A semaphore's re-entry puts its slots into `slots`.
  absl::StatusOr<std::optional<Acquired>> Reenter(Session& s,
                                                  const AcquireCall& call,
                                                  PgPool::Handle& reuse,
                                                  std::vector<int64_t>& slots);
  // A fresh acquisition on `conn` (a session connection), waiting.
  absl::StatusOr<Grant> AcquireOn(const AcquireCall& call, PgPool::Handle conn);
  // The answer to a renewal sent at `sent` on the session's connection.
  absl::Status Renewed(Session& s, const RenewCall& call, MonoTime sent,
                       const absl::StatusOr<PgResult>& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  static bool IsRenewed(const PGresult* r);
  absl::StatusOr<int64_t> Released(const ReleaseCall& call,
                                   const absl::StatusOr<PgResult>& r);
  // RenewMany's halves: the sends, each session tried and locked (the
  // others go `one_by_one`), then every answer as it arrives.
  std::vector<InFlight> SendRenewals(absl::Span<const RenewCall> calls,
                                     std::vector<absl::Status>& results,
                                     std::vector<size_t>& one_by_one);
  void ReadRenewals(absl::Span<const RenewCall> calls,
                    std::vector<InFlight> in_flight,
                    std::vector<absl::Status>& results);
  // Closing a session frees its advisory lock on the server. Called with
  // the keeper and the listener stopped.
  void CloseSessions();

  const absl::Duration grace_;
  const HolderLiveness holders_;  // a semaphore's holders: key and grace
  PgPool sessions_pool_;
  Sessions sessions_;
  SessionKeeper keeper_;
};

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_SESSION_BACKEND_H_
