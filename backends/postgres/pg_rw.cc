#include "pg_rw.h"

#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"

namespace dlock::postgres {
namespace {}  // namespace

absl::StatusOr<Attempt> ToModeAttempt(const PGresult* r,
                                      absl::string_view name) {
  Attempt attempt;  // holder_lease_left: unknown
  if (PQntuples(r) != 1) return attempt;
  switch (GetInt(r, 0, 0)) {
    case 1:
      attempt.acquired =
          Acquired{.fencing_token = static_cast<uint64_t>(GetInt(r, 0, 1)),
                   .hold_count = GetInt(r, 0, 2)};
      return attempt;
    case -4:
      return UpgradeRefusedError(name);
    default:
      if (!PQgetisnull(r, 0, 3)) {
        attempt.holder_lease_left = absl::Milliseconds(GetInt(r, 0, 3));
      }
      return attempt;
  }
}

namespace {

// A function's single value: the holds left, GONE when NULL (not the
// owner's); at zero this process's waiters are woken.
absl::StatusOr<int64_t> HoldsLeft(PgShared& shared, absl::string_view name,
                                  const absl::StatusOr<PgResult>& r) {
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) != 1 || PQgetisnull(r->get(), 0, 0)) {
    return NotOwnerError(name);
  }
  const int64_t left = GetInt(r->get(), 0, 0);
  if (left == 0) shared.hub().Notify(name);
  return left;
}

}  // namespace

std::array<std::string, 10> ReadAcquireParams(const PgShared& shared,
                                              const AcquireCall& call,
                                              const HolderLiveness& liveness,
                                              bool wait, bool have) {
  return {shared.ns(),
          std::string(call.name),
          std::string(call.owner),
          MillisParam(call.lease),
          Bool(wait),
          liveness.live_id,
          liveness.ttl_ms,
          Bool(liveness.session),
          Bool(have),
          liveness.grace_ms};
}

absl::StatusOr<Grant> AcquireRead(PgShared& shared, const AcquireCall& call,
                                  const HolderLiveness& liveness,
                                  absl::FunctionRef<absl::StatusOr<PgResult>(
                                      absl::Span<const std::string> params)>
                                      run) {
  const bool wait = call.deadline > shared.clock().Now();
  const std::array<std::string, 10> params =
      ReadAcquireParams(shared, call, liveness, wait, /*have=*/false);
  return AcquireWithWakeups(call, shared.hub(), shared.fallback_poll(),
                            [&]() -> absl::StatusOr<Attempt> {
                              absl::StatusOr<PgResult> r = run(params);
                              if (!r.ok()) return r.status();
                              return ToModeAttempt(r->get(), call.name);
                            });
}

absl::StatusOr<Attempt> WriterAttempt(PgShared& shared, const AcquireCall& call,
                                      const HolderLiveness& liveness,
                                      const PGresult* r, bool& intent) {
  Attempt attempt = ToAttempt(r);
  // The mode (the fifth column): 'r' read-held, 'v' handed to a writer.
  if (attempt.acquired.has_value() || PQntuples(r) != 1 ||
      PQgetisnull(r, 0, 4)) {
    return attempt;
  }
  const std::string mode = GetText(r, 0, 4);
  if (mode != "r" && mode != "v") return attempt;
  const bool wait = call.deadline > shared.clock().Now();
  // The intent outlives a fallback poll or two, so that it lives while the
  // writer waits, and lapses soon once it stopped asking.
  const std::string intent_ttl =
      MillisParam(WaitingPlaceTtl(shared.fallback_poll()));
  const std::string params[] = {shared.ns(),
                                std::string(call.name),
                                std::string(call.owner),
                                MillisParam(call.lease),
                                Bool(wait),
                                liveness.live_id,
                                liveness.ttl_ms,
                                intent_ttl};
  absl::StatusOr<PgResult> w =
      shared.RunPooled(shared.sql().primitives.write_acquire, params, false);
  if (!w.ok()) return w.status();
  intent = intent || wait;
  return ToModeAttempt(w->get(), call.name);
}

std::array<std::string, 6> ReadReleaseParams(const PgShared& shared,
                                             const ReleaseCall& call,
                                             bool have) {
  return {shared.ns(),
          std::string(call.name),
          std::string(call.owner),
          absl::StrCat(call.CountToSubtract()),
          shared.sql().channel,
          Bool(have)};
}

absl::StatusOr<int64_t> ReleaseRead(PgShared& shared, const ReleaseCall& call) {
  const std::array<std::string, 6> params =
      ReadReleaseParams(shared, call, /*have=*/false);
  return HoldsLeft(
      shared, call.name,
      shared.RunPooled(shared.sql().primitives.read_release, params, false));
}

absl::StatusOr<int64_t> ReleaseWriterThatReads(PgShared& shared,
                                               const ReleaseCall& call) {
  const std::string params[] = {
      shared.ns(), std::string(call.name), std::string(call.owner),
      absl::StrCat(call.CountToSubtract()), shared.sql().channel};
  return HoldsLeft(
      shared, call.name,
      shared.RunPooled(shared.sql().primitives.write_release, params, false));
}

absl::Status RenewRead(PgShared& shared, const RenewCall& call) {
  const std::string params[] = {shared.ns(), std::string(call.name),
                                std::string(call.owner),
                                MillisParam(call.lease), Bool(false)};
  absl::StatusOr<PgResult> r =
      shared.RunPooled(shared.sql().primitives.read_renew, params, true);
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 1 && GetText(r->get(), 0, 0) == "t") {
    return absl::OkStatus();
  }
  return NotOwnerError(call.name);
}

namespace {

// One lock's rows [begin, end) of readers_inspect's or readers_list's
// answer: its writer's columns on each, a reader per row.
ObjectInfo ToLock(const PGresult* res, int begin, int end, std::string name) {
  ObjectInfo info{
      .kind = ObjectKind::kLock, .name = std::move(name), .limit = 1};
  if (begin == end || GetText(res, begin, 15) != "t") return info;
  const std::string owner = GetText(res, begin, 0);
  const std::string mode = GetText(res, begin, 6);
  if (!owner.empty()) {
    HolderInfo writer{
        .owner = owner,
        .hold_count = GetInt(res, begin, 1),
        .fencing_token = static_cast<uint64_t>(GetInt(res, begin, 2)),
        .remaining_lease = absl::Microseconds(GetInt(res, begin, 3)),
        .since = absl::FromUnixMicros(GetInt(res, begin, 4))};
    if (!PQgetisnull(res, begin, 5)) {
      writer.holder_live = GetText(res, begin, 5) == "t";
    }
    info.holders.push_back(std::move(writer));
  } else if (mode.empty()) {
    info.kept_after_release = true;
    info.kept_remaining = absl::Microseconds(GetInt(res, begin, 3));
    return info;
  }
  if (!PQgetisnull(res, begin, 7) && (mode == "r" || mode == "v")) {
    info.waiter = WaiterInfo{.owner = GetText(res, begin, 7),
                             .permits = 1,
                             .handed_over = mode == "v"};
  }
  for (int row = begin; row < end; ++row) {
    if (PQgetisnull(res, row, 9)) continue;  // no reader
    HolderInfo reader{
        .owner = GetText(res, row, 9),
        .shared = true,
        .hold_count = GetInt(res, row, 10),
        .fencing_token = static_cast<uint64_t>(GetInt(res, row, 11)),
        .remaining_lease = absl::Microseconds(GetInt(res, row, 12)),
        .since = absl::FromUnixMicros(GetInt(res, row, 13))};
    if (!PQgetisnull(res, row, 14)) reader.holder_live = true;
    info.holders.push_back(std::move(reader));
  }
  return info;
}

}  // namespace

absl::StatusOr<ObjectInfo> InspectLock(PgShared& shared,
                                       absl::string_view name) {
  const std::string params[] = {shared.ns(), std::string(name)};
  absl::StatusOr<PgResult> r =
      shared.RunPooled(shared.sql().primitives.readers_inspect, params, true);
  if (!r.ok()) return r.status();
  return ToLock(r->get(), 0, PQntuples(r->get()), std::string(name));
}

absl::StatusOr<std::vector<ObjectInfo>> ListLocks(PgShared& shared,
                                                  absl::string_view prefix) {
  const std::string params[] = {shared.ns(), std::string(prefix)};
  absl::StatusOr<PgResult> r =
      shared.RunPooled(shared.sql().primitives.readers_list, params, true);
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  std::vector<ObjectInfo> out;
  const int rows = PQntuples(res);
  for (int begin = 0, end = 0; begin < rows; begin = end) {
    const std::string name = GetText(res, begin, 16);
    while (end < rows && GetText(res, end, 16) == name) ++end;
    ObjectInfo lock = ToLock(res, begin, end, name);
    if (ListsAsHeld(lock)) out.push_back(std::move(lock));
  }
  return out;
}

}  // namespace dlock::postgres
