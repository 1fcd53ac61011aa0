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
//
// A hold's session is its record (backend.h): the core keeps it with the
// hold and hands it back on every call about it, so no table here maps a
// name and owner to a session. The registry of live sessions serves only
// the keeper, the socket watcher and Shutdown().
// The server-side functions are in pg_schema.cc; docs/postgres.md explains
// the design, and what this mode does not give behind a pooling proxy.
#include <poll.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "pg_common.h"

namespace dlock::postgres {
namespace {

// One hold of this client, with the connection whose session keeps it.
struct Session {
  Session(absl::string_view name, absl::string_view owner, PgPool::Handle held)
      : name(name), owner(owner), fd(held->socket()), conn(std::move(held)) {}

  const std::string name;  // for the keeper's and the watcher's reports
  const std::string owner;
  const int fd;
  absl::Mutex mu;
  // Holds the shared advisory lock; empty once the hold ended here.
  PgPool::Handle conn ABSL_GUARDED_BY(mu);
  // For when the core drops the record (Retire): the end of the latest
  // lease granted or renewed on conn, counted from the statement's send, and
  // whether the last statement answered about the hold was a release that
  // left holds of the owner (this client's last one of a shared token).
  MonoTime lease_end ABSL_GUARDED_BY(mu);
  bool released_leaving_holds ABSL_GUARDED_BY(mu) = false;
  // Whether conn is set: HeldUntil() reads it without taking `mu`.
  std::atomic<bool> live{true};
  std::atomic<bool> busy{false};  // a statement is in flight on conn
  // The core dropped the hold's record: nothing in this client believes in
  // the hold any more, so its loss is nobody's to hear, and the keeper lets
  // go of the session (LetGo).
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

class SessionBackend;

// The record the core keeps for a session-mode hold (backend.h). The
// session outlives it while the keeper or the watcher uses it; the record's
// end is what tells the backend that the core let go of the hold.
class SessionRecord final : public HoldRecord,
                            public std::enable_shared_from_this<SessionRecord> {
 public:
  SessionRecord(std::shared_ptr<Session> session, SessionBackend* backend)
      : session_(std::move(session)), backend_(backend) {}
  ~SessionRecord() override;

  Session& session() const { return *session_; }

 private:
  std::shared_ptr<Session> session_;
  SessionBackend* const backend_;
};

SessionRecord& RecordOf(HoldRecord* record) {
  return *static_cast<SessionRecord*>(record);
}

const char* Bool(bool b) { return b ? "true" : "false"; }

// What becomes of a session's connection when its hold ends here.
enum class Leave {
  kToPool,  // it holds no advisory lock (the server let go of it)
  kClosed,  // broken, or it may still hold one: closing frees it
};

class SessionBackend : public PgBackendBase, public PgListener::Watcher {
 public:
  SessionBackend(PgOptions options, const BackendConfig& config)
      : PgBackendBase(std::move(options), config),
        grace_(options_.session_grace),
        sessions_pool_(options_, options_.max_sessions, "session"),
        keeper_wake_(clock_) {}
  // The listener and the keeper call into this object; they must stop before
  // the members below go (Shutdown() normally stopped them already). Records
  // the core still keeps then find their sessions ended.
  ~SessionBackend() override {
    StopKeeper();
    if (notifications_ != nullptr) notifications_->Stop();
    CloseSessions();
  }

  void StartKeeper() {
    keeper_ = std::thread([this] { KeepLoop(); });
  }

  // Holds live on their session's connection: a restart ends them.
  BackendTraits Traits() const override {
    return BackendTraits{.holds_tied_to_session = true,
                         .fencing = FencingStrength::kDurable,
                         .can_list = true,
                         .keeps_after_release = true};
  }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    PgPool::Handle conn;
    if (call.held != nullptr) {
      SessionRecord& held = RecordOf(call.held);
      const MonoTime sent = clock_.Now();
      absl::StatusOr<std::optional<Acquired>> again =
          Reenter(held.session(), call, conn);
      if (!again.ok()) return again.status();
      if (again->has_value()) {
        // The record goes back even though null would keep it: a grant the
        // core counts as a new hold (a new token, a deadline passed) keeps
        // the session too.
        return Grant{.fencing_token = (*again)->fencing_token,
                     .hold_count = (*again)->hold_count,
                     .sent = sent,
                     .record = held.shared_from_this()};
      }
    }
    if (!conn) {
      absl::StatusOr<PgPool::Handle> fresh = sessions_pool_.Get();
      if (!fresh.ok()) return fresh.status();
      conn = *std::move(fresh);
    }
    const auto params = AcquireParams(call, /*have=*/false);
    absl::StatusOr<Grant> acquired = AcquireWithWakeups(
        call, hub_, fallback_poll_, [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<PgResult> r = conn->Run(sql_.s_acquire, params);
          if (!r.ok()) return r.status();
          return ToAttempt(r->get());
        });
    if (!acquired.ok()) return acquired.status();
    acquired->record = Install(call, std::move(conn), acquired->sent);
    return acquired;
  }

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    const absl::string_view name = call.name;
    if (call.record == nullptr) {
      // A hold taken elsewhere under an explicit owner token (C6).
      absl::StatusOr<PgResult> r =
          RunPooled(sql_.s_release, ReleaseParams(call, /*have=*/false), false);
      return Released(name, r);
    }
    Session& s = RecordOf(call.record).session();
    absl::MutexLock lock(&s.mu);
    if (!s.conn) return NotOwnerError(name);
    absl::StatusOr<PgResult> r =
        RunOn(s, sql_.s_release, ReleaseParams(call, /*have=*/true));
    if (!r.ok()) return Dropped(s, r.status());
    absl::StatusOr<int64_t> left = Released(name, r);
    // At zero, or not the owner's: the function let go of the shared lock.
    if (!left.ok() || *left == 0) End(s, Leave::kToPool);
    if (left.ok()) s.released_leaving_holds = *left > 0;
    return left;
  }

  absl::Status Renew(const RenewCall& call) override {
    if (call.record == nullptr) {
      absl::StatusOr<PgResult> r =
          RunPooled(sql_.s_renew, RenewParams(call, /*have=*/false), true);
      if (!r.ok()) return r.status();
      return IsRenewed(r->get()) ? absl::OkStatus() : NotOwnerError(call.name);
    }
    Session& s = RecordOf(call.record).session();
    absl::MutexLock lock(&s.mu);
    if (!s.conn) return NotOwnerError(call.name);
    const MonoTime sent = clock_.Now();
    return Renewed(s, call, sent,
                   RunOn(s, sql_.s_renew, RenewParams(call, /*have=*/true)));
  }

  // Every hold has a session of its own, so renewing them one after another
  // would cost a round trip per hold: with 40 holds, a slow network or a
  // loaded machine makes the watchdog's round longer than a lease leaves,
  // and holds are lost that the server kept. The renewals are sent on all
  // sessions first and each answer is read as it arrives: about one round
  // trip. A session is only tried, never waited for, while others are
  // locked: one a caller or the keeper is using is renewed on its own after
  // the batch. And one slow answer holds up neither the others' reading
  // (which confirms their sessions) nor their unlocking (the keeper pings
  // only sessions it can lock). The analysis cannot follow a set of locks,
  // hence the exemption.
  std::vector<absl::Status> RenewMany(absl::Span<const RenewCall> calls)
      override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<absl::Status> results(calls.size());
    struct InFlight {
      size_t call;
      Session* session;
      MonoTime sent;
    };
    std::vector<InFlight> in_flight;
    std::vector<size_t> one_by_one;
    for (size_t i = 0; i < calls.size(); ++i) {
      Session* s = calls[i].record == nullptr
                       ? nullptr
                       : &RecordOf(calls[i].record).session();
      // TryLock also fails on a session this batch already holds.
      if (s == nullptr || !s->mu.TryLock()) {
        one_by_one.push_back(i);
        continue;
      }
      if (!s->conn) {
        results[i] = NotOwnerError(calls[i].name);
        s->mu.Unlock();
        continue;
      }
      const MonoTime sent = clock_.Now();
      if (absl::Status st =
              SendOn(*s, sql_.s_renew, RenewParams(calls[i], /*have=*/true));
          !st.ok()) {
        results[i] = Renewed(*s, calls[i], sent, st);
        s->mu.Unlock();
        continue;
      }
      in_flight.push_back(InFlight{i, s, sent});
    }
    if (!in_flight.empty()) {
      // One deadline for the batch, as one statement would have.
      const Clock& real = Clock::Real();
      const MonoTime deadline =
          real.Now() + in_flight[0].session->conn->answer_timeout();
      auto finish = [&](const InFlight& f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        Session& s = *f.session;
        results[f.call] = Renewed(s, calls[f.call], f.sent,
                                  AwaitOn(s, sql_.s_renew, f.sent, deadline));
        s.mu.Unlock();
      };
      std::vector<pollfd> waiting;
      while (!in_flight.empty()) {
        std::vector<InFlight> pending;
        for (const InFlight& f : in_flight) {
          if (f.session->conn->AnswerReady()) {
            finish(f);
          } else {
            pending.push_back(f);
          }
        }
        in_flight.swap(pending);
        const absl::Duration left = deadline - real.Now();
        if (in_flight.empty() || left <= absl::ZeroDuration()) break;
        waiting.clear();
        for (const InFlight& f : in_flight) {
          waiting.push_back(pollfd{f.session->conn->socket(), POLLIN, 0});
        }
        poll(waiting.data(), waiting.size(),
             static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      }
      for (const InFlight& f : in_flight) finish(f);  // past the deadline
    }
    for (size_t i : one_by_one) results[i] = Renew(calls[i]);
    return results;
  }

  // The hold is believed only while its session may still be alive on the
  // server: until the last confirmed send on it plus the grace, less the
  // margin (C19). From the record's atomics only: the core calls this under
  // its own lock, on every State() and from its notifier. A session that
  // ended here (released, dropped) is not believed, nor a hold with no
  // record, which this client never took.
  MonoTime HeldUntil(absl::string_view, absl::string_view,
                     const HoldRecord* record) override {
    if (record == nullptr) return MonoTime::InfinitePast();
    const Session& s = static_cast<const SessionRecord*>(record)->session();
    if (!s.live) return MonoTime::InfinitePast();
    return s.confirmed() + grace_ - DriftMargin(grace_);
  }

  void Shutdown() override {
    StopKeeper();
    PgBackendBase::Shutdown();
    CloseSessions();
    sessions_pool_.Clear();
  }

  // PgListener::Watcher: the sockets of idle sessions. A readable idle
  // session socket means the server said something unasked, normally that
  // it is closing the connection (shutdown, pg_terminate_backend).
  std::vector<int> Fds() override {
    std::vector<int> fds;
    absl::MutexLock lock(&sessions_mu_);
    for (const auto& [ptr, s] : sessions_) {
      if (!s->busy) fds.push_back(s->fd);
    }
    return fds;
  }

  void OnReadable(int fd) override {
    std::vector<std::shared_ptr<Session>> hit;
    {
      absl::MutexLock lock(&sessions_mu_);
      for (const auto& [ptr, s] : sessions_) {
        if (s->fd == fd) hit.push_back(s);
      }
    }
    for (const std::shared_ptr<Session>& s : hit) {
      if (!s->mu.TryLock()) continue;  // in use: its caller will see it
      const bool alive = s->busy || !s->conn || s->conn->Alive();
      absl::Status lost;
      if (!alive) lost = Dropped(*s, absl::OkStatus());
      const bool tell = !alive && !s->retired;
      s->mu.Unlock();
      if (tell) listener_->OnHoldLost(s->name, s->owner, lost);
    }
  }

  // The core dropped the record of a session that may still hold: the
  // keeper lets go of it (LetGo). Never waits: the core may drop a record
  // under its own lock.
  void Retire(std::shared_ptr<Session> s) {
    s->retired = true;
    {
      absl::MutexLock lock(&keeper_mu_);
      retired_.push_back(std::move(s));
    }
    keeper_wake_.Signal();
  }

 private:
  // The parameters of the session-mode functions (pg_schema.cc). `have`:
  // the statement runs on the hold's own session, which holds the shared
  // lock; without it (a pooled connection) the holder's session must be
  // alive.
  std::array<std::string, 6> AcquireParams(const AcquireCall& call,
                                           bool have) const {
    return {ns_,
            std::string(call.name),
            std::string(call.owner),
            MillisParam(call.lease),
            Bool(have),
            MillisParam(grace_)};
  }
  // p_keep is `have`: the session keeps its shared lock while the row counts
  // holds of the owner. When this client's last hold goes and others remain
  // (an owner token held from elsewhere too), the session lets go once the
  // core drops the record (Retire).
  std::array<std::string, 8> ReleaseParams(const ReleaseCall& call,
                                           bool have) const {
    return {ns_,
            std::string(call.name),
            std::string(call.owner),
            absl::StrCat(call.CountToSubtract()),
            Bool(have),
            Bool(have),
            sql_.channel,
            absl::StrCat(KeepMillis(call.keep_for))};
  }
  std::array<std::string, 5> RenewParams(const RenewCall& call,
                                         bool have) const {
    return {ns_, std::string(call.name), std::string(call.owner),
            MillisParam(call.lease), Bool(have)};
  }

  // Re-entry on the session that already holds. Returns nullopt when the
  // hold turned out to be lost; the function then let go of the session's
  // advisory lock, and `reuse` gets the connection for a fresh attempt.
  absl::StatusOr<std::optional<Acquired>> Reenter(Session& s,
                                                  const AcquireCall& call,
                                                  PgPool::Handle& reuse) {
    absl::MutexLock lock(&s.mu);
    if (!s.conn) return std::optional<Acquired>();
    const MonoTime sent = clock_.Now();
    absl::StatusOr<PgResult> r =
        RunOn(s, sql_.s_acquire, AcquireParams(call, /*have=*/true));
    if (!r.ok()) {
      if (!s.conn->broken()) return r.status();
      // The session is gone, and with it the hold: start afresh.
      absl::Status lost = Dropped(s, r.status());
      listener_->OnHoldLost(call.name, call.owner, lost);
      return std::optional<Acquired>();
    }
    Attempt attempt = ToAttempt(r->get());
    if (attempt.acquired.has_value()) {
      s.Extended(sent, call.lease);
      return attempt.acquired;
    }
    reuse = std::move(s.conn);  // holds nothing now; reused for the wait
    End(s, Leave::kToPool);
    return std::optional<Acquired>();
  }

  // `sent`: when the winning attempt was sent, on conn's session.
  std::shared_ptr<SessionRecord> Install(const AcquireCall& call,
                                         PgPool::Handle conn, MonoTime sent) {
    auto s = std::make_shared<Session>(call.name, call.owner, std::move(conn));
    s->Confirm(sent);
    {
      absl::MutexLock lock(&s->mu);
      s->Extended(sent, call.lease);
    }
    {
      absl::MutexLock lock(&sessions_mu_);
      sessions_.emplace(s.get(), s);
    }
    notifications_->Wake();  // watch the new session's socket
    return std::make_shared<SessionRecord>(std::move(s), this);
  }

  // The hold ended here: the session leaves the registry and its connection
  // goes back to the pool or is closed. Its record, if the core still keeps
  // it, then answers not held (HeldUntil) and not the owner (Release, Renew).
  void End(Session& s, Leave how) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if (how == Leave::kClosed) s.conn.Discard();
    s.conn = PgPool::Handle();  // back to the pool, holding nothing
    s.live = false;
    // Lock order everywhere: a session's mu, then sessions_mu_.
    absl::MutexLock lock(&sessions_mu_);
    sessions_.erase(&s);
  }

  // A session statement failed. A broken connection means the hold is gone
  // (the server freed the advisory lock with the session): FailedPrecondition,
  // so that the core reports it lost (C7). Returns the status for the caller.
  absl::Status Dropped(Session& s, absl::Status error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if (!error.ok() && s.conn && !s.conn->broken()) return error;
    End(s, Leave::kClosed);
    return LostError(
        s.name,
        absl::StrCat(
            "the session that held it at ", options_.endpoint, " ended",
            error.ok() ? "" : absl::StrCat(" (", error.message(), ")")));
  }

  // Every statement on a session goes through here: an answer confirms the
  // session was alive after `sent`, which moves HeldUntil() on.
  absl::StatusOr<PgResult> RunOn(Session& s, const Statement& stmt,
                                 absl::Span<const std::string> params)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    const MonoTime sent = clock_.Now();
    if (absl::Status st = SendOn(s, stmt, params); !st.ok()) return st;
    return AwaitOn(s, stmt, sent);
  }
  // RunOn() in halves (RenewMany): the session is busy from the send until
  // its answer is read.
  absl::Status SendOn(Session& s, const Statement& stmt,
                      absl::Span<const std::string> params)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    s.busy = true;
    absl::Status st = s.conn->Send(stmt, params);
    if (!st.ok()) s.busy = false;
    return st;
  }
  absl::StatusOr<PgResult> AwaitOn(
      Session& s, const Statement& stmt, MonoTime sent,
      std::optional<MonoTime> deadline = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    absl::StatusOr<PgResult> r = deadline.has_value()
                                     ? s.conn->Await(stmt.name, *deadline)
                                     : s.conn->Await(stmt.name);
    if (r.ok()) s.Confirm(sent);
    s.busy = false;
    return r;
  }

  // The answer to a renewal sent at `sent` on the session's connection.
  absl::Status Renewed(Session& s, const RenewCall& call, MonoTime sent,
                       const absl::StatusOr<PgResult>& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if (!r.ok()) return Dropped(s, r.status());
    if (!IsRenewed(r->get())) {
      End(s, Leave::kToPool);  // the function let go of the shared lock
      return NotOwnerError(call.name);
    }
    s.Extended(sent, call.lease);
    return absl::OkStatus();
  }
  static bool IsRenewed(const PGresult* r) {
    return PQntuples(r) == 1 && GetText(r, 0, 0) == "t";
  }

  // The keeper: a light statement on each held session on which none was
  // answered for a third of the grace, so that a live holder's HeldUntil()
  // stays ahead; after those, it lets go of retired sessions. Its own
  // thread, not the listener's: a ping waits up to the statement timeout,
  // and wake-ups must not wait behind it.
  void KeepLoop() {
    absl::MutexLock lock(&keeper_mu_);
    while (!keeper_stop_) {
      for (std::shared_ptr<Session>& s : retired_) {
        lingering_.push_back(std::move(s));
      }
      retired_.clear();
      const MonoTime now = clock_.Now();
      // Wake at the next session due, and no later than a third of the
      // grace: a session installed meanwhile is due no sooner than that.
      MonoTime next = now + grace_ / 3;
      // A session busy with a caller's statement is looked at again soon
      // rather than at once: that statement's answer may confirm it.
      const MonoTime soon = now + grace_ / 10;
      std::vector<std::shared_ptr<Session>> due;
      {
        absl::MutexLock sessions_lock(&sessions_mu_);
        for (const auto& [ptr, s] : sessions_) {
          if (s->retired) continue;  // nobody believes in it: not kept
          const MonoTime at = s->confirmed() + grace_ / 3;
          if (at > now) {
            next = std::min(next, at);
          } else if (s->busy) {
            next = std::min(next, soon);
          } else {
            due.push_back(s);
          }
        }
      }
      keeper_mu_.Unlock();
      bool skipped = false;
      for (const std::shared_ptr<Session>& s : due) {
        skipped = !Ping(*s) || skipped;
      }
      std::vector<std::shared_ptr<Session>> staying;
      for (std::shared_ptr<Session>& s : lingering_) {
        if (std::optional<MonoTime> at = LetGo(*s, clock_.Now())) {
          next = std::min(next, *at);
          staying.push_back(std::move(s));
        }
      }
      const bool ended = staying.size() < lingering_.size();
      lingering_.swap(staying);
      // Watch the sockets that were busy again; forget those that ended.
      if (!due.empty() || ended) notifications_->Wake();
      keeper_mu_.Lock();
      if (skipped) next = std::min(next, soon);
      // Sessions retired while this round ran are looked at at once.
      if (!keeper_stop_ && retired_.empty()) {
        keeper_wake_.WaitUntil(&keeper_mu_, next);
      }
    }
  }

  // Returns false when a caller held the session, so no ping was sent.
  bool Ping(Session& s) {
    // A caller's statement in flight holds mu: its answer confirms the
    // session just as well, and its failure reports the loss. Never wait
    // behind it, so that one stuck session does not hold up the others.
    if (!s.mu.TryLock()) return false;
    absl::Status lost;
    if (s.conn && !s.retired && clock_.Now() >= s.confirmed() + grace_ / 3) {
      absl::StatusOr<PgResult> r = RunOn(s, sql_.ping, {});
      // A broken connection ends the session: the hold is gone. Another
      // error (a statement timeout) leaves the session as it was.
      if (!r.ok()) lost = Dropped(s, r.status());
      if (s.conn) lost = absl::OkStatus();
    }
    const bool tell = !lost.ok() && !s.retired;
    s.mu.Unlock();
    if (tell) listener_->OnHoldLost(s.name, s.owner, lost);
    return true;
  }

  // A retired session: nothing in this client believes in its hold any
  // more. When its last answered statement was a release that left holds
  // of the owner (this client's last hold of an owner token held elsewhere
  // too), it lets go at once. Otherwise the core may never have known the
  // hold (an acquisition whose reply was lost, C21), or replaced its record
  // with a later grant's of the same owner: it stays until the lease last
  // granted or renewed on it is over, as the row would in lease mode, so
  // that the owner's retry re-enters the hold rather than finding its own
  // session dead and waiting out the grace. Letting go releases the shared
  // lock and returns the connection to the pool, or closes it if that
  // fails. Returns when to look again while the session stays.
  std::optional<MonoTime> LetGo(Session& s, MonoTime now) {
    absl::MutexLock lock(&s.mu);
    if (!s.conn) return std::nullopt;  // ended already
    if (!s.released_leaving_holds && now < s.lease_end) return s.lease_end;
    s.busy = true;
    const bool clean = !s.conn->broken() &&
                       s.conn->Exec("SELECT pg_advisory_unlock_all()").ok();
    s.busy = false;
    End(s, clean ? Leave::kToPool : Leave::kClosed);
    return std::nullopt;
  }

  // Closing a session frees its advisory lock on the server. Called with
  // the keeper and the listener stopped.
  void CloseSessions() {
    std::vector<std::shared_ptr<Session>> live;
    {
      absl::MutexLock lock(&sessions_mu_);
      for (const auto& [ptr, s] : sessions_) live.push_back(s);
    }
    {
      absl::MutexLock lock(&keeper_mu_);
      retired_.clear();
    }
    lingering_.clear();
    for (const std::shared_ptr<Session>& s : live) {
      absl::MutexLock lock(&s->mu);
      End(*s, Leave::kClosed);
    }
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

  const absl::Duration grace_;
  PgPool sessions_pool_;
  // The live sessions, for the keeper, the watcher and Shutdown(); a hold's
  // session is found through its record, never here. Held only for lookups
  // and updates, never across a statement or a call into the core.
  absl::Mutex sessions_mu_;
  absl::flat_hash_map<Session*, std::shared_ptr<Session>> sessions_
      ABSL_GUARDED_BY(sessions_mu_);
  absl::Mutex keeper_mu_;
  bool keeper_stop_ ABSL_GUARDED_BY(keeper_mu_) = false;
  // Sessions whose record the core dropped, for the keeper to let go of:
  // new ones, then (the keeper's own) those staying until their lease ends.
  std::vector<std::shared_ptr<Session>> retired_ ABSL_GUARDED_BY(keeper_mu_);
  std::vector<std::shared_ptr<Session>> lingering_;
  ClockCondVar keeper_wake_;
  std::thread keeper_;
};

SessionRecord::~SessionRecord() {
  // A session that ended (released, dropped, or every one at Shutdown(),
  // after which the backend may be gone) needs nothing more.
  if (session_->live) backend_->Retire(std::move(session_));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewSessionBackend(
    PgOptions options, const BackendConfig& config) {
  auto backend = std::make_unique<SessionBackend>(std::move(options), config);
  if (absl::Status s = backend->Start(backend.get()); !s.ok()) return s;
  backend->StartKeeper();
  return backend;
}

}  // namespace dlock::postgres
