#include "pg_common.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "pg_pooler.h"
#include "pg_privileges.h"

namespace dlock::postgres {
namespace {

LockInfo ToInfo(const PGresult* r, int row, int first_col,
                absl::string_view name) {
  LockInfo info;
  info.name = std::string(name);
  info.locked = true;
  info.owner = GetText(r, row, first_col);
  info.hold_count = GetInt(r, row, first_col + 1);
  info.fencing_token = static_cast<uint64_t>(GetInt(r, row, first_col + 2));
  info.remaining_lease = absl::Microseconds(GetInt(r, row, first_col + 3));
  info.since = absl::FromUnixMicros(GetInt(r, row, first_col + 4));
  // A live row without an owner is a lock kept after its release (schema).
  info.kept_after_release = info.owner.empty();
  if (!PQgetisnull(r, row, first_col + 5)) {
    info.holder_live = GetText(r, row, first_col + 5) == "t";
  }
  return info;
}

}  // namespace

Attempt ToAttempt(const PGresult* r) {
  Attempt attempt;  // holder_lease_left: unknown (InfiniteDuration)
  if (PQntuples(r) != 1) return attempt;
  if (GetText(r, 0, 0) == "t") {
    attempt.acquired =
        Acquired{.fencing_token = static_cast<uint64_t>(GetInt(r, 0, 2)),
                 .hold_count = GetInt(r, 0, 1)};
  } else {
    attempt.holder_lease_left = absl::Milliseconds(GetInt(r, 0, 3));
  }
  return attempt;
}

PgShared::PgShared(PgOptions options, const BackendConfig& config)
    : options_(std::move(options)),
      sql_(options_.table),
      ns_(config.lock_namespace),
      fallback_poll_(config.options.fallback_poll),
      listener_(config.listener),
      clock_(config.clock),
      pool_(options_, options_.pool_size, "pooled"),
      hub_(config.clock) {}

absl::Status PgShared::Start(PgListener::Watcher* watcher) {
  Pooling pooling = Pooling::kDirect;
  {
    absl::StatusOr<PgPool::Handle> conn = pool_.Get();
    if (!conn.ok()) return conn.status();
    if (absl::Status s = EnsureSchema(**conn, sql_); !s.ok()) return s;
    if (!options_.grant_to.empty()) {
      absl::Status s = GrantTo(**conn, options_.table, options_.grant_to);
      if (!s.ok()) return s;
    }
    absl::StatusOr<Pooling> checked = CheckPooling(options_, **conn);
    if (!checked.ok()) return checked.status();
    pooling = *checked;
  }
  notifications_ =
      std::make_unique<PgListener>(options_, sql_, ns_, hub_, watcher);
  // Before Connect() returns: a waiter's first release must be heard (C9).
  // Through transaction pooling a LISTEN is heard only on a database alias
  // pooled by session (listen_dbname; docs/postgres.md, "PgBouncer").
  return notifications_->Start(pooling != Pooling::kTransactions ||
                               !options_.listen_dbname.empty());
}

void PgShared::Stop() {
  if (notifications_ != nullptr) notifications_->Stop();
  pool_.Clear();
}

absl::StatusOr<PgResult> PgShared::RunPooled(
    const Statement& stmt, absl::Span<const std::string> params,
    bool idempotent) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<PgPool::Handle> conn = pool_.Get();
    if (!conn.ok()) return conn.status();
    absl::StatusOr<PgResult> result = (*conn)->Run(stmt, params);
    // Serialization failures cannot happen at READ COMMITTED with these
    // statements, but if one does it must not reach the caller.
    const bool aborted =
        !result.ok() && result.status().code() == absl::StatusCode::kAborted;
    const bool retry_broken = !result.ok() && attempt == 0 &&
                              (*conn)->broken() &&
                              (idempotent || !(*conn)->executed());
    if ((aborted && attempt < 5) || retry_broken) continue;
    if (aborted) return absl::UnavailableError(result.status().message());
    return result;
  }
}

absl::StatusOr<LockInfo> PgShared::Inspect(absl::string_view name) {
  const std::string params[] = {ns_, std::string(name)};
  absl::StatusOr<PgResult> r = RunPooled(sql_.inspect, params, true);
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 0) {
    LockInfo info;
    info.name = std::string(name);
    return info;
  }
  return ToInfo(r->get(), 0, 0, name);
}

absl::StatusOr<std::vector<LockInfo>> PgShared::List(absl::string_view prefix) {
  const std::string params[] = {ns_, std::string(prefix)};
  absl::StatusOr<PgResult> r = RunPooled(sql_.list, params, true);
  if (!r.ok()) return r.status();
  std::vector<LockInfo> out;
  for (int row = 0; row < PQntuples(r->get()); ++row) {
    out.push_back(ToInfo(r->get(), row, 1, GetText(r->get(), row, 0)));
  }
  return out;
}

absl::Status PgShared::ForceUnlock(absl::string_view name) {
  const std::string params[] = {ns_, std::string(name), sql_.channel};
  absl::StatusOr<PgResult> r = RunPooled(sql_.force, params, true);
  if (!r.ok()) return r.status();
  // Waiters in this process wake at once, without the round trip of NOTIFY.
  hub_.Notify(name);
  return absl::OkStatus();
}

absl::Status PgShared::ForceUnlockIfToken(absl::string_view name,
                                          uint64_t fencing_token) {
  const std::string params[] = {ns_, std::string(name), sql_.channel,
                                absl::StrCat(fencing_token)};
  // Retried only when it never ran: a retry after a lost reply would find
  // the hold gone and report a mismatch although the first attempt removed
  // it.
  absl::StatusOr<PgResult> r = RunPooled(sql_.force_if_token, params, false);
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 0) return TokenMismatchError(name, fencing_token);
  hub_.Notify(name);
  return absl::OkStatus();
}

absl::StatusOr<ServerMemory> PgShared::ServerMemoryUse() {
  absl::StatusOr<PgResult> r = RunPooled(sql_.memory, {}, true);
  if (!r.ok()) return r.status();
  int64_t bytes = 0;
  if (PQntuples(r->get()) != 1 ||
      !absl::SimpleAtoi(GetText(r->get(), 0, 0), &bytes)) {
    return absl::InternalError(
        "PostgreSQL answered pg_total_relation_size with no number");
  }
  // Pages, not rows: the table grows 8 kB at a time.
  return ServerMemory{bytes,
                      "pg_total_relation_size of the lock table (8 kB pages)"};
}

}  // namespace dlock::postgres
