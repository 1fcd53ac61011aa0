// mode=session: acquisition, release and renewal on each hold's own session
// (session_backend.h). The server-side functions are in pg_schema.cc.
#include "session_backend.h"

#include <poll.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "pg_primitives.h"
#include "pg_rw.h"

namespace dlock::postgres {
namespace {}  // namespace

SessionBackend::SessionBackend(PgOptions options, const BackendConfig& config)
    : PgBackendBase(std::move(options), config),
      grace_(shared().options().session_grace),
      holders_{.session = true, .grace_ms = MillisParam(grace_)},
      sessions_pool_(shared().options(), shared().options().max_sessions,
                     "session"),
      sessions_(shared().clock(), shared().options().endpoint),
      keeper_(sessions_, grace_, shared().sql().ping, shared().listener(),
              [this] { shared().notifications().Wake(); }) {}

SessionBackend::~SessionBackend() {
  keeper_.Stop();
  shared().Stop();
  CloseSessions();
}

absl::Status SessionBackend::Start() {
  if (absl::Status s = shared().Start(this); !s.ok()) return s;
  keeper_.Start();
  return absl::OkStatus();
}

BackendTraits SessionBackend::Traits() const {
  return BackendTraits{.holds_tied_to_session = true,
                       .fencing = FencingStrength::kDurable,
                       .can_list = true,
                       .keeps_after_release = true,
                       .semaphores = true,
                       .read_write_locks = true,
                       .elections = true,
                       .semaphore_order = WaiterOrder::kHeadReserved};
}

absl::StatusOr<Grant> SessionBackend::Acquire(const AcquireCall& call) {
  PgPool::Handle conn;
  if (call.held != nullptr) {
    SessionRecord& held = SessionRecord::Of(call.held);
    const MonoTime sent = shared().clock().Now();
    std::vector<int64_t> slots;
    absl::StatusOr<std::optional<Acquired>> again =
        Reenter(held.session(), call, conn, slots);
    if (!again.ok()) return again.status();
    if (again->has_value()) {
      // The record goes back even though null would keep it: a grant the
      // core counts as a new hold (a new token, a deadline passed) keeps the
      // session too.
      return Grant{.fencing_token = (*again)->fencing_token,
                   .hold_count = (*again)->hold_count,
                   .sent = sent,
                   .record = held.shared_from_this(),
                   .slots = std::move(slots)};
    }
  }
  if (!conn) {
    absl::StatusOr<PgPool::Handle> fresh = sessions_pool_.Get();
    if (!fresh.ok()) return fresh.status();
    conn = *std::move(fresh);
  }
  return AcquireOn(call, std::move(conn));
}

absl::StatusOr<Grant> SessionBackend::AcquireOn(const AcquireCall& call,
                                                PgPool::Handle conn) {
  absl::StatusOr<Grant> acquired;
  if (call.shape.kind == ObjectKind::kSemaphore) {
    acquired = AcquirePermits(
        shared(), call, holders_, /*have=*/false,
        [&](absl::Span<const std::string> params) {
          return conn->Run(shared().sql().primitives.sem_acquire, params);
        });
  } else if (call.shape.mode == HoldMode::kShared) {
    acquired = AcquireRead(
        shared(), call, holders_, [&](absl::Span<const std::string> params) {
          return conn->Run(shared().sql().primitives.read_acquire, params);
        });
  } else {
    // A lock's writer, or an election on its row.
    const std::vector<std::string> params = AcquireParams(call, false);
    acquired = AcquireWithWakeups(
        call, params[1], shared().hub(), shared().fallback_poll(),
        [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<PgResult> r =
              conn->Run(AcquireStatement(call.shape), params);
          if (!r.ok()) return r.status();
          return ToWriterAttempt(call, r->get());
        });
    // A writer that waited in vain leaves no intent behind (C23).
    if (!acquired.ok() && call.shape.IsLockWriter() && params[6] == "true") {
      GiveUpPlace(shared(), params[1], call.owner);
    }
  }
  if (!acquired.ok()) return acquired.status();
  // A new leader: this process's observers learn it at once.
  if (call.shape.kind == ObjectKind::kElection) {
    shared().hub().Notify(ObjectRow(call.shape.kind, call.name));
  }
  std::shared_ptr<Session> s =
      sessions_.Install(call.name, call.owner, call.shape, std::move(conn),
                        acquired->sent, call.lease);
  shared().notifications().Wake();  // watch the new session's socket
  acquired->record = std::make_shared<SessionRecord>(std::move(s), &keeper_);
  return acquired;
}

absl::StatusOr<std::optional<Acquired>> SessionBackend::Reenter(
    Session& s, const AcquireCall& call, PgPool::Handle& reuse,
    std::vector<int64_t>& slots) {
  absl::MutexLock lock(&s.mu);
  if (!s.conn) return std::optional<Acquired>();
  const MonoTime sent = shared().clock().Now();
  const bool permits = call.shape.kind == ObjectKind::kSemaphore;
  const bool read = call.shape.mode == HoldMode::kShared;
  absl::StatusOr<PgResult> r =
      permits ? sessions_.RunOn(s, shared().sql().primitives.sem_acquire,
                                SemAcquireParams(shared(), call, holders_,
                                                 /*wait=*/false, /*have=*/true))
      : read  ? sessions_.RunOn(s, shared().sql().primitives.read_acquire,
                                ReadAcquireParams(shared(), call, holders_,
                                                  /*wait=*/false, /*have=*/true))
              : sessions_.RunOn(s, AcquireStatement(call.shape),
                                AcquireParams(call, /*have=*/true));
  if (!r.ok()) {
    if (!s.conn->broken()) return r.status();
    // The session is gone, and with it the hold: start afresh.
    absl::Status lost = sessions_.Dropped(s, r.status());
    shared().listener()->OnHoldLost(call.name, call.owner, call.shape, lost);
    return std::optional<Acquired>();
  }
  // A mismatch (C22) leaves the hold as it was.
  absl::StatusOr<Attempt> answer = permits
                                       ? ToPermitAttempt(r->get(), call, slots)
                                   : read ? ToModeAttempt(r->get(), call.name)
                                          : ToWriterAttempt(call, r->get());
  if (!answer.ok()) return answer.status();
  Attempt& attempt = *answer;
  if (attempt.acquired.has_value()) {
    s.Extended(sent, call.lease);
    return attempt.acquired;
  }
  reuse = std::move(s.conn);  // holds nothing now; reused for the wait
  sessions_.End(s, Leave::kToPool);
  return std::optional<Acquired>();
}

absl::Status SessionBackend::Proclaim(const ProclaimCall& call) {
  return ProclaimValue(shared(), call);
}

absl::StatusOr<int64_t> SessionBackend::Release(const ReleaseCall& call) {
  if (call.record == nullptr) {
    // A hold taken elsewhere under an explicit owner token (C6).
    absl::StatusOr<PgResult> r =
        shared().RunPooled(ReleaseStatement(call.shape),
                           ReleaseParams(call, /*have=*/false), false);
    return Released(call, r);
  }
  Session& s = SessionRecord::Of(call.record).session();
  absl::MutexLock lock(&s.mu);
  if (!s.conn) return NotOwnerError(call.name);
  absl::StatusOr<PgResult> r = sessions_.RunOn(
      s, ReleaseStatement(call.shape), ReleaseParams(call, /*have=*/true));
  if (!r.ok()) return sessions_.Dropped(s, r.status());
  absl::StatusOr<int64_t> left = Released(call, r);
  // At zero, or not the owner's: the function let go of the shared lock.
  if (!left.ok() || *left == 0) sessions_.End(s, Leave::kToPool);
  if (left.ok()) s.released_leaving_holds = *left > 0;
  return left;
}

absl::Status SessionBackend::Renew(const RenewCall& call) {
  if (call.record == nullptr) {
    absl::StatusOr<PgResult> r = shared().RunPooled(
        RenewStatement(call.shape), RenewParams(call, /*have=*/false), true);
    if (!r.ok()) return r.status();
    return IsRenewed(r->get()) ? absl::OkStatus() : NotOwnerError(call.name);
  }
  Session& s = SessionRecord::Of(call.record).session();
  absl::MutexLock lock(&s.mu);
  if (!s.conn) return NotOwnerError(call.name);
  const MonoTime sent = shared().clock().Now();
  return Renewed(s, call, sent,
                 sessions_.RunOn(s, RenewStatement(call.shape),
                                 RenewParams(call, /*have=*/true)));
}

// With 40 holds, a slow network or a loaded machine would make a watchdog
// round of one renewal after another longer than a lease leaves, and holds
// would be lost that the server kept. A session is only tried, never waited
// for, while others are locked: one a caller or the keeper is using is
// renewed on its own after the batch. And one slow answer holds up neither
// the others' reading (which confirms their sessions) nor their unlocking
// (the keeper pings only sessions it can lock). The analysis cannot follow a
// set of locks, hence the exemptions.
std::vector<absl::Status> SessionBackend::RenewMany(
    absl::Span<const RenewCall> calls) {
  std::vector<absl::Status> results(calls.size());
  std::vector<size_t> one_by_one;
  std::vector<InFlight> in_flight = SendRenewals(calls, results, one_by_one);
  if (!in_flight.empty()) ReadRenewals(calls, std::move(in_flight), results);
  for (size_t i : one_by_one) results[i] = Renew(calls[i]);
  return results;
}

std::vector<SessionBackend::InFlight> SessionBackend::SendRenewals(
    absl::Span<const RenewCall> calls, std::vector<absl::Status>& results,
    std::vector<size_t>& one_by_one) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<InFlight> in_flight;
  for (size_t i = 0; i < calls.size(); ++i) {
    Session* s = calls[i].record == nullptr
                     ? nullptr
                     : &SessionRecord::Of(calls[i].record).session();
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
    const MonoTime sent = shared().clock().Now();
    if (absl::Status st = sessions_.SendOn(*s, RenewStatement(calls[i].shape),
                                           RenewParams(calls[i], true));
        !st.ok()) {
      results[i] = Renewed(*s, calls[i], sent, st);
      s->mu.Unlock();
      continue;
    }
    in_flight.push_back(InFlight{i, s, sent});
  }
  return in_flight;
}

void SessionBackend::ReadRenewals(
    absl::Span<const RenewCall> calls, std::vector<InFlight> in_flight,
    std::vector<absl::Status>& results) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // One deadline for the batch, as one statement would have.
  const Clock& real = Clock::Real();
  const MonoTime deadline =
      real.Now() + in_flight[0].session->conn->answer_timeout();
  auto finish = [&](const InFlight& f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Session& s = *f.session;
    results[f.call] =
        Renewed(s, calls[f.call], f.sent,
                sessions_.AwaitOn(s, RenewStatement(calls[f.call].shape),
                                  f.sent, deadline));
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

absl::Status SessionBackend::Renewed(Session& s, const RenewCall& call,
                                     MonoTime sent,
                                     const absl::StatusOr<PgResult>& r) {
  if (!r.ok()) return sessions_.Dropped(s, r.status());
  if (!IsRenewed(r->get())) {
    sessions_.End(s, Leave::kToPool);  // the function let go of the lock
    return NotOwnerError(call.name);
  }
  s.Extended(sent, call.lease);
  return absl::OkStatus();
}

bool SessionBackend::IsRenewed(const PGresult* r) {
  return PQntuples(r) == 1 && GetText(r, 0, 0) == "t";
}

absl::StatusOr<int64_t> SessionBackend::Released(
    const ReleaseCall& call, const absl::StatusOr<PgResult>& r) {
  const absl::string_view name = call.name;
  if (call.shape.kind == ObjectKind::kSemaphore) {
    return SemReleased(shared(), name, r);
  }
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) != 1 || PQgetisnull(r->get(), 0, 0)) {
    return NotOwnerError(name);
  }
  const int64_t left = GetInt(r->get(), 0, 0);
  if (left == 0) shared().hub().Notify(ObjectRow(call.shape.kind, name));
  return left;
}

MonoTime SessionBackend::HeldUntil(absl::string_view, absl::string_view,
                                   const HoldRecord* record) {
  if (record == nullptr) return MonoTime::InfinitePast();
  const Session& s = static_cast<const SessionRecord*>(record)->session();
  if (!s.live) return MonoTime::InfinitePast();
  return s.confirmed() + grace_ - DriftMargin(grace_);
}

void SessionBackend::Shutdown() {
  keeper_.Stop();
  PgBackendBase::Shutdown();
  CloseSessions();
  sessions_pool_.Clear();
}

std::vector<int> SessionBackend::Fds() {
  std::vector<int> fds;
  for (const std::shared_ptr<Session>& s : sessions_.Live()) {
    if (!s->busy) fds.push_back(s->fd);
  }
  return fds;
}

void SessionBackend::OnReadable(int fd) {
  for (const std::shared_ptr<Session>& s : sessions_.Live()) {
    if (s->fd != fd || !s->mu.TryLock()) continue;  // in use: its caller sees
    const bool alive = s->busy || !s->conn || s->conn->Alive();
    absl::Status lost;
    if (!alive) lost = sessions_.Dropped(*s, absl::OkStatus());
    const bool tell = !alive && !s->retired;
    s->mu.Unlock();
    if (tell) {
      shared().listener()->OnHoldLost(s->name, s->owner, s->shape, lost);
    }
  }
}

void SessionBackend::CloseSessions() {
  keeper_.Clear();
  for (const std::shared_ptr<Session>& s : sessions_.Live()) {
    absl::MutexLock lock(&s->mu);
    sessions_.End(*s, Leave::kClosed);
  }
}

std::vector<std::string> SessionBackend::AcquireParams(const AcquireCall& call,
                                                       bool have) const {
  std::vector<std::string> params = {shared().ns(),
                                     ObjectRow(call.shape.kind, call.name),
                                     std::string(call.owner),
                                     MillisParam(call.lease),
                                     Bool(have),
                                     MillisParam(grace_)};
  if (call.shape.kind == ObjectKind::kElection) {
    params.push_back(ValueParam(call.value));
    params.push_back(shared().sql().channel);
  } else {
    // A writer's wait and the intent that stops new readers meanwhile
    // (s_write_acquire); it outlives a fallback poll or two.
    params.push_back(Bool(!have && call.deadline > shared().clock().Now()));
    params.push_back(MillisParam(WaitingPlaceTtl(shared().fallback_poll())));
  }
  return params;
}

const Statement& SessionBackend::AcquireStatement(
    const HoldShape& shape) const {
  return shape.kind == ObjectKind::kElection
             ? shared().sql().primitives.s_campaign
             : shared().sql().primitives.s_write_acquire;
}

absl::StatusOr<Attempt> SessionBackend::ToWriterAttempt(const AcquireCall& call,
                                                        const PGresult* r) {
  return call.shape.kind == ObjectKind::kElection
             ? absl::StatusOr<Attempt>(ToAttempt(r))
             : ToModeAttempt(r, call.name);
}

std::vector<std::string> SessionBackend::ReleaseParams(const ReleaseCall& call,
                                                       bool have) const {
  if (call.shape.kind == ObjectKind::kSemaphore) {
    const auto params = SemReleaseParams(shared(), call, have);
    return {params.begin(), params.end()};
  }
  if (call.shape.mode == HoldMode::kShared) {
    const auto params = ReadReleaseParams(shared(), call, have);
    return {params.begin(), params.end()};
  }
  return {shared().ns(),
          ObjectRow(call.shape.kind, call.name),
          std::string(call.owner),
          absl::StrCat(call.CountToSubtract()),
          Bool(have),
          Bool(have),
          shared().sql().channel,
          absl::StrCat(KeepMillis(call.keep_for))};
}

std::vector<std::string> SessionBackend::RenewParams(const RenewCall& call,
                                                     bool have) const {
  if (call.shape.kind == ObjectKind::kSemaphore) {
    const auto params = HolderRenewParams(shared(), call, have);
    return {params.begin(), params.end()};
  }
  return {shared().ns(), ObjectRow(call.shape.kind, call.name),
          std::string(call.owner), MillisParam(call.lease), Bool(have)};
}

const Statement& SessionBackend::ReleaseStatement(
    const HoldShape& shape) const {
  const PrimitiveSql& primitives = shared().sql().primitives;
  if (shape.kind == ObjectKind::kSemaphore) return primitives.sem_release;
  if (shape.mode == HoldMode::kShared) return primitives.read_release;
  // A writer that also reads keeps its read (s_write_release).
  return shape.IsLockWriter() ? primitives.s_write_release
                              : shared().sql().s_release;
}

// A reader's renewal takes s_renew's parameters.
const Statement& SessionBackend::RenewStatement(const HoldShape& shape) const {
  const PrimitiveSql& primitives = shared().sql().primitives;
  if (shape.kind == ObjectKind::kSemaphore) return primitives.holder_renew;
  return shape.mode == HoldMode::kShared ? primitives.read_renew
                                         : shared().sql().s_renew;
}

absl::StatusOr<std::unique_ptr<Backend>> NewSessionBackend(
    PgOptions options, const BackendConfig& config) {
  auto backend = std::make_unique<SessionBackend>(std::move(options), config);
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

}  // namespace dlock::postgres
