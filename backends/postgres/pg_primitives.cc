#include "pg_primitives.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/backend/rules.h"
#include "pg_rw.h"

namespace dlock::postgres {
namespace {

std::vector<int64_t> ParseSlots(absl::string_view text) {
  std::vector<int64_t> slots;
  text = absl::StripPrefix(absl::StripSuffix(text, "}"), "{");
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t slot = 0;
    if (absl::SimpleAtoi(part, &slot)) slots.push_back(slot);
  }
  return slots;
}

// The rows of holders_inspect/holders_list, grouped by object.
std::vector<ObjectInfo> ToObjects(const PGresult* r) {
  std::vector<ObjectInfo> out;
  for (int row = 0; row < PQntuples(r); ++row) {
    const std::string name = GetText(r, row, 0);
    if (out.empty() || out.back().name != name) {
      ObjectInfo info{.kind = ObjectKind::kSemaphore, .name = name};
      if (!PQgetisnull(r, row, 1)) info.limit = GetInt(r, row, 1);
      if (!PQgetisnull(r, row, 2)) {
        info.waiter = WaiterInfo{.owner = GetText(r, row, 2),
                                 .permits = GetInt(r, row, 3)};
      }
      out.push_back(std::move(info));
    }
    if (PQgetisnull(r, row, 4)) continue;  // no holder
    HolderInfo holder{.owner = GetText(r, row, 4),
                      .hold_count = GetInt(r, row, 5),
                      .fencing_token = static_cast<uint64_t>(GetInt(r, row, 6)),
                      .slots = ParseSlots(GetText(r, row, 9)),
                      .remaining_lease = absl::Microseconds(GetInt(r, row, 7)),
                      .since = absl::FromUnixMicros(GetInt(r, row, 8))};
    if (!PQgetisnull(r, row, 10)) holder.holder_live = true;
    out.back().holders.push_back(std::move(holder));
  }
  // N is in force only while something holds or waits.
  for (ObjectInfo& info : out) {
    if (info.holders.empty() && !info.waiter.has_value()) info.limit = 0;
  }
  return out;
}

// The rows of leader_inspect/leader_list: one leader per election.
std::vector<ObjectInfo> ToLeaders(const PGresult* r) {
  std::vector<ObjectInfo> out;
  for (int row = 0; row < PQntuples(r); ++row) {
    ObjectInfo info{
        .kind = ObjectKind::kElection, .name = GetText(r, row, 0), .limit = 1};
    HolderInfo leader{.owner = GetText(r, row, 1),
                      .hold_count = GetInt(r, row, 2),
                      .fencing_token = static_cast<uint64_t>(GetInt(r, row, 3)),
                      .remaining_lease = absl::Microseconds(GetInt(r, row, 4)),
                      .since = absl::FromUnixMicros(GetInt(r, row, 5))};
    if (!PQgetisnull(r, row, 7)) leader.holder_live = true;
    info.holders.push_back(std::move(leader));
    info.value = absl::HexStringToBytes(GetText(r, row, 6));
    out.push_back(std::move(info));
  }
  return out;
}

// The leaders `stmt` reads (leader_inspect or leader_list) of the election
// `name` or of those under the prefix `name`.
absl::StatusOr<std::vector<ObjectInfo>> ReadLeaders(PgShared& shared,
                                                    const Statement& stmt,
                                                    absl::string_view name) {
  const std::string params[] = {shared.ns(),
                                ObjectRow(ObjectKind::kElection, name)};
  absl::StatusOr<PgResult> r = shared.RunPooled(stmt, params, true);
  if (!r.ok()) return r.status();
  return ToLeaders(r->get());
}

}  // namespace

void GiveUpPlace(PgShared& shared, const std::string& row,
                 absl::string_view owner) {
  const std::string params[] = {shared.ns(), row, std::string(owner),
                                shared.sql().channel};
  absl::StatusOr<PgResult> r =
      shared.RunPooled(shared.sql().primitives.give_up_place, params, true);
  if (r.ok() && PQntuples(r->get()) > 0) shared.hub().Notify(row);
}

std::string SemaphoreRow(absl::string_view name) {
  return ObjectRow(ObjectKind::kSemaphore, name);
}

std::string ObjectRow(ObjectKind kind, absl::string_view name) {
  switch (kind) {
    case ObjectKind::kSemaphore:
      return absl::StrCat("\x1f", "s", name);
    case ObjectKind::kElection:
      return absl::StrCat("\x1f", "e", name);
    case ObjectKind::kLock:
      break;
  }
  return std::string(name);
}

std::string ValueParam(absl::string_view value) {
  return absl::BytesToHexString(value);
}

absl::Status ProclaimValue(PgShared& shared, const ProclaimCall& call) {
  const std::string row = ObjectRow(ObjectKind::kElection, call.name);
  const std::string params[] = {shared.ns(),
                                row,
                                std::string(call.owner),
                                ValueParam(call.value),
                                absl::StrCat(call.term),
                                shared.sql().channel};
  absl::StatusOr<PgResult> r =
      shared.RunPooled(shared.sql().primitives.proclaim, params, true);
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 0) return NotOwnerError(call.name);
  shared.hub().Notify(row);
  return absl::OkStatus();
}

absl::StatusOr<Attempt> ToPermitAttempt(const PGresult* r,
                                        const AcquireCall& call,
                                        std::vector<int64_t>& slots) {
  Attempt attempt;  // holder_lease_left: unknown
  if (PQntuples(r) != 1) return attempt;
  switch (GetInt(r, 0, 0)) {
    case 1:
      attempt.acquired =
          Acquired{.fencing_token = static_cast<uint64_t>(GetInt(r, 0, 1)),
                   .hold_count = GetInt(r, 0, 2)};
      slots = ParseSlots(GetText(r, 0, 4));
      return attempt;
    case -2:
      return LimitMismatchError(call.name, GetInt(r, 0, 1), call.shape.limit);
    case -3:
      return PermitsMismatchError(call.name, GetInt(r, 0, 1),
                                  call.shape.permits);
    default:
      if (!PQgetisnull(r, 0, 3)) {
        attempt.holder_lease_left = absl::Milliseconds(GetInt(r, 0, 3));
      }
      return attempt;
  }
}

std::array<std::string, 13> SemAcquireParams(const PgShared& shared,
                                             const AcquireCall& call,
                                             const HolderLiveness& liveness,
                                             bool wait, bool have) {
  return {shared.ns(),
          SemaphoreRow(call.name),
          std::string(call.owner),
          MillisParam(call.lease),
          Bool(wait),
          liveness.live_id,
          liveness.ttl_ms,
          absl::StrCat(call.shape.limit),
          absl::StrCat(call.shape.permits),
          MillisParam(WaitingPlaceTtl(shared.fallback_poll())),
          Bool(liveness.session),
          Bool(have),
          liveness.grace_ms};
}

absl::StatusOr<Grant> AcquirePermits(PgShared& shared, const AcquireCall& call,
                                     const HolderLiveness& liveness, bool have,
                                     absl::FunctionRef<absl::StatusOr<PgResult>(
                                         absl::Span<const std::string> params)>
                                         run) {
  const std::string row = SemaphoreRow(call.name);
  const bool wait = call.deadline > shared.clock().Now();
  std::array<std::string, 13> params =
      SemAcquireParams(shared, call, liveness, wait, have);
  // Waiters wait on the row's name: its announcements carry it.
  std::vector<int64_t> slots;
  absl::StatusOr<Grant> grant = AcquireWithWakeups(
      call, row, shared.hub(), shared.fallback_poll(),
      [&]() -> absl::StatusOr<Attempt> {
        absl::StatusOr<PgResult> r = run(params);
        params[11] = Bool(false);  // only the first attempt re-enters
        if (!r.ok()) return r.status();
        return ToPermitAttempt(r->get(), call, slots);
      });
  if (!grant.ok()) {
    if (wait) GiveUpPlace(shared, row, call.owner);
    return grant.status();
  }
  grant->slots = std::move(slots);
  return grant;
}

std::array<std::string, 6> SemReleaseParams(const PgShared& shared,
                                            const ReleaseCall& call,
                                            bool have) {
  return {shared.ns(),
          SemaphoreRow(call.name),
          std::string(call.owner),
          absl::StrCat(call.CountToSubtract()),
          shared.sql().channel,
          Bool(have)};
}

absl::StatusOr<int64_t> SemReleased(PgShared& shared, absl::string_view name,
                                    const absl::StatusOr<PgResult>& r) {
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) != 1 || PQgetisnull(r->get(), 0, 0)) {
    return NotOwnerError(name);
  }
  const int64_t left = GetInt(r->get(), 0, 0);
  if (left == 0) shared.hub().Notify(SemaphoreRow(name));
  return left;
}

std::array<std::string, 5> HolderRenewParams(const PgShared& shared,
                                             const RenewCall& call, bool have) {
  return {shared.ns(), SemaphoreRow(call.name), std::string(call.owner),
          MillisParam(call.lease), Bool(have)};
}

absl::Status HolderRenewed(absl::string_view name,
                           const absl::StatusOr<PgResult>& r) {
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 1 && GetText(r->get(), 0, 0) == "t") {
    return absl::OkStatus();
  }
  return NotOwnerError(name);
}

absl::StatusOr<ObjectInfo> InspectSemaphore(PgShared& shared,
                                            absl::string_view name) {
  const std::string params[] = {shared.ns(), SemaphoreRow(name)};
  absl::StatusOr<PgResult> r =
      shared.RunPooled(shared.sql().primitives.holders_inspect, params, true);
  if (!r.ok()) return r.status();
  std::vector<ObjectInfo> found = ToObjects(r->get());
  if (found.empty()) {
    return ObjectInfo{.kind = ObjectKind::kSemaphore,
                      .name = std::string(name)};
  }
  return std::move(found.front());
}

absl::StatusOr<std::vector<ObjectInfo>> ListSemaphores(
    PgShared& shared, absl::string_view prefix) {
  const std::string params[] = {shared.ns(), SemaphoreRow(prefix)};
  absl::StatusOr<PgResult> r =
      shared.RunPooled(shared.sql().primitives.holders_list, params, true);
  if (!r.ok()) return r.status();
  std::vector<ObjectInfo> out;
  for (ObjectInfo& info : ToObjects(r->get())) {
    if (ListsAsHeld(info)) out.push_back(std::move(info));
  }
  return out;
}

absl::Status ForceSemaphore(PgShared& shared, absl::string_view name,
                            std::optional<uint64_t> fencing_token) {
  const std::string row = SemaphoreRow(name);
  // '': every holder.
  const std::string params[] = {
      shared.ns(), row,
      fencing_token.has_value() ? absl::StrCat(*fencing_token) : "",
      shared.sql().channel};
  // Retried only when it never ran: a retry after a lost reply would find
  // the holder gone and report a mismatch.
  absl::StatusOr<PgResult> r = shared.RunPooled(
      shared.sql().primitives.holders_force, params, !fencing_token);
  if (!r.ok()) return r.status();
  shared.hub().Notify(row);
  if (fencing_token.has_value() &&
      !(PQntuples(r->get()) == 1 && GetText(r->get(), 0, 0) == "t")) {
    return TokenMismatchError(name, *fencing_token);
  }
  return absl::OkStatus();
}

absl::StatusOr<ObjectInfo> PgBackendBase::InspectObject(
    ObjectKind kind, absl::string_view name) {
  if (kind == ObjectKind::kSemaphore) return InspectSemaphore(shared_, name);
  if (kind == ObjectKind::kLock) return InspectLock(shared_, name);
  absl::StatusOr<std::vector<ObjectInfo>> found =
      ReadLeaders(shared_, shared_.sql().primitives.leader_inspect, name);
  if (!found.ok()) return found.status();
  if (found->empty()) {
    return ObjectInfo{.kind = kind, .name = std::string(name), .limit = 1};
  }
  return std::move(found->front());
}

absl::StatusOr<std::vector<ObjectInfo>> PgBackendBase::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  if (kind == ObjectKind::kSemaphore) return ListSemaphores(shared_, prefix);
  if (kind == ObjectKind::kLock) {
    // Its writer, its keep, or readers alone (C23).
    return ListLocks(shared_, prefix);
  }
  if (kind != ObjectKind::kElection) return Backend::ListObjects(kind, prefix);
  return ReadLeaders(shared_, shared_.sql().primitives.leader_list, prefix);
}

absl::Status PgBackendBase::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (kind == ObjectKind::kSemaphore) {
    return ForceSemaphore(shared_, name, fencing_token);
  }
  if (kind != ObjectKind::kElection) {
    return Backend::ForceUnlockObject(kind, name, fencing_token);
  }
  // The leader's row, as a lock's: the release announces it (wanted).
  const std::string row = ObjectRow(kind, name);
  if (!fencing_token.has_value()) return shared_.ForceUnlock(row);
  absl::Status s = shared_.ForceUnlockIfToken(row, *fencing_token);
  if (IsTokenMismatch(s)) return TokenMismatchError(name, *fencing_token);
  return s;
}

std::unique_ptr<ObjectWatch> PgBackendBase::WatchObject(
    ObjectKind kind, absl::string_view name) {
  return std::make_unique<HubWatch>(shared_.hub(), ObjectRow(kind, name));
}

}  // namespace dlock::postgres
