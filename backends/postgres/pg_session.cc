#include "pg_session.h"

#include "absl/strings/str_cat.h"
#include "dlock/errors.h"

namespace dlock::postgres {

std::shared_ptr<Session> Sessions::Install(absl::string_view name,
                                           absl::string_view owner,
                                           const HoldShape& shape,
                                           PgPool::Handle conn, MonoTime sent,
                                           absl::Duration lease) {
  auto s = std::make_shared<Session>(name, owner, shape, std::move(conn));
  s->Confirm(sent);
  {
    absl::MutexLock lock(&s->mu);
    s->Extended(sent, lease);
  }
  absl::MutexLock lock(&mu_);
  sessions_.emplace(s.get(), s);
  return s;
}

std::vector<std::shared_ptr<Session>> Sessions::Live() {
  std::vector<std::shared_ptr<Session>> live;
  absl::MutexLock lock(&mu_);
  live.reserve(sessions_.size());
  for (const auto& [ptr, s] : sessions_) live.push_back(s);
  return live;
}

void Sessions::End(Session& s, Leave how) {
  if (how == Leave::kClosed) s.conn.Discard();
  s.conn = PgPool::Handle();  // back to the pool, holding nothing
  s.live = false;
  absl::MutexLock lock(&mu_);
  sessions_.erase(&s);
}

absl::Status Sessions::Dropped(Session& s, absl::Status error) {
  if (!error.ok() && s.conn && !s.conn->broken()) return error;
  End(s, Leave::kClosed);
  return LostError(
      s.name,
      absl::StrCat("the session that held it at ", endpoint_, " ended",
                   error.ok() ? "" : absl::StrCat(" (", error.message(), ")")));
}

absl::StatusOr<PgResult> Sessions::RunOn(Session& s, const Statement& stmt,
                                         absl::Span<const std::string> params) {
  const MonoTime sent = clock_.Now();
  if (absl::Status st = SendOn(s, stmt, params); !st.ok()) return st;
  return AwaitOn(s, stmt, sent);
}

absl::Status Sessions::SendOn(Session& s, const Statement& stmt,
                              absl::Span<const std::string> params) {
  s.busy = true;
  absl::Status st = s.conn->Send(stmt, params);
  if (!st.ok()) s.busy = false;
  return st;
}

absl::StatusOr<PgResult> Sessions::AwaitOn(Session& s, const Statement& stmt,
                                           MonoTime sent,
                                           std::optional<MonoTime> deadline) {
  absl::StatusOr<PgResult> r = deadline.has_value()
                                   ? s.conn->Await(stmt.name, *deadline)
                                   : s.conn->Await(stmt.name);
  if (r.ok()) s.Confirm(sent);
  s.busy = false;
  return r;
}

}  // namespace dlock::postgres
