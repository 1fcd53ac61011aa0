// Copyright dlock authors. mode=session's keeper: a light statement on each
// held session on which none was answered for a third of the grace, so that
// a live holder's HeldUntil() stays ahead (C19); and, once the core dropped
// a hold's record, letting go of its session. Its own thread, not the
// listener's: a ping waits up to the statement timeout, and wake-ups must
// not wait behind it.
#ifndef DLOCK_BACKENDS_POSTGRES_SESSION_KEEPER_H_
#define DLOCK_BACKENDS_POSTGRES_SESSION_KEEPER_H_

#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/backend.h"
#include "dlock/clock.h"
#include "pg_schema.h"
#include "pg_session.h"

namespace dlock::postgres {

class SessionKeeper {
 public:
  // `ping`: the light statement. `rewatch`: makes the socket watcher look
  // at the idle sessions again (some were busy, some ended).
  SessionKeeper(Sessions& sessions, absl::Duration grace, Statement ping,
                BackendListener* listener, std::function<void()> rewatch)
      : sessions_(sessions),
        clock_(sessions.clock()),
        grace_(grace),
        ping_(std::move(ping)),
        listener_(listener),
        rewatch_(std::move(rewatch)),
        wake_(clock_) {}
  ~SessionKeeper() { Stop(); }

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the thread; idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the sessions it was to let go of (Shutdown() closes them all).
  // After Stop().
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

  // The core dropped the record of a session that may still hold: the
  // keeper lets go of it (LetGo). Never waits: the core may drop a record
  // under its own lock.
  void Retire(std::shared_ptr<Session> s) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // The sessions due a ping now; `next` gets when to look again.
  std::vector<std::shared_ptr<Session>> Due(MonoTime now, MonoTime& next);
  // Returns false when a caller held the session, so no ping was sent.
  bool Ping(Session& s);
  // A retired session: lets go of it, or returns when to look again while
  // it stays (see session_keeper.cc).
  std::optional<MonoTime> LetGo(Session& s, MonoTime now);
  // Lets go of the lingering sessions that may go; `next` gets when to
  // look again. Returns whether any went.
  bool LetGoOfLingering(MonoTime& next);

  Sessions& sessions_;
  const Clock& clock_;
  const absl::Duration grace_;
  const Statement ping_;
  BackendListener* const listener_;
  const std::function<void()> rewatch_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Sessions whose record the core dropped, for the keeper to let go of.
  std::vector<std::shared_ptr<Session>> retired_ ABSL_GUARDED_BY(mu_);
  // The keeper thread's own: those staying until their lease ends.
  std::vector<std::shared_ptr<Session>> lingering_;
  ClockCondVar wake_;
  std::thread thread_;
};

// The record the core keeps for a session-mode hold (backend.h). The
// session outlives it while the keeper or the watcher uses it; the record's
// end is what tells the backend that the core let go of the hold.
class SessionRecord final : public HoldRecord,
                            public std::enable_shared_from_this<SessionRecord> {
 public:
  SessionRecord(std::shared_ptr<Session> session, SessionKeeper* keeper)
      : session_(std::move(session)), keeper_(keeper) {}
  ~SessionRecord() override {
    // A session that ended (released, dropped, or every one at Shutdown(),
    // after which the backend may be gone) needs nothing more.
    if (session_->live) keeper_->Retire(std::move(session_));
  }

  static SessionRecord& Of(HoldRecord* record) {
    return *static_cast<SessionRecord*>(record);
  }
  Session& session() const { return *session_; }

 private:
  std::shared_ptr<Session> session_;
  SessionKeeper* const keeper_;
};

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_SESSION_KEEPER_H_
