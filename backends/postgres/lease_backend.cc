// mode=lease (the default): a row per held lock whose expiry is on the
// server's clock (C2). Each operation is one prepared statement, one round
// trip, atomic under concurrent clients (C3); docs/postgres.md explains each.
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "pg_common.h"
#include "pg_primitives.h"
#include "pg_rw.h"

namespace dlock::postgres {
namespace {

class LeaseBackend : public PgBackendBase {
 public:
  LeaseBackend(PgOptions options, const BackendConfig& config)
      : PgBackendBase(std::move(options), config),
        liveness_id_(config.liveness_id),
        liveness_ttl_ms_(config.options.liveness_ttl == absl::InfiniteDuration()
                             ? "0"
                             : MillisParam(config.options.liveness_ttl)),
        holders_{.live_id = liveness_id_, .ttl_ms = liveness_ttl_ms_} {}

  // Connects and starts listening (PgShared::Start).
  absl::Status Start() { return shared().Start(nullptr); }

  BackendTraits Traits() const override {
    return BackendTraits{.liveness_record = true,
                         .holds_survive_restart = true,
                         .fencing = FencingStrength::kDurable,
                         .can_list = true,
                         .keeps_after_release = true,
                         .semaphores = true,
                         .read_write_locks = true,
                         .elections = true,
                         .semaphore_order = WaiterOrder::kHeadReserved,
                         .multi_lock = MultiLockMode::kAtomic};
  }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    if (call.shape.kind == ObjectKind::kSemaphore) {
      return AcquirePermits(shared(), call, holders_, /*have=*/false,
                            [&](absl::Span<const std::string> params) {
                              return shared().RunPooled(
                                  shared().sql().primitives.sem_acquire, params,
                                  false);
                            });
    }
    if (call.shape.kind == ObjectKind::kElection) return Campaign(call);
    if (call.shape.mode == HoldMode::kShared) {
      return AcquireRead(
          shared(), call, holders_, [&](absl::Span<const std::string> params) {
            return shared().RunPooled(shared().sql().primitives.read_acquire,
                                      params, false);
          });
    }
    const std::string params[] = {shared().ns(),
                                  std::string(call.name),
                                  std::string(call.owner),
                                  MillisParam(call.lease),
                                  liveness_id_,
                                  liveness_ttl_ms_};
    // The writer: one statement, and a second only when readers refused it.
    bool intent = false;
    absl::StatusOr<Grant> grant = AcquireWithWakeups(
        call, shared().hub(), shared().fallback_poll(),
        [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<PgResult> r =
              shared().RunPooled(shared().sql().acquire, params, false);
          if (!r.ok()) return r.status();
          return WriterAttempt(shared(), call, holders_, r->get(), intent);
        });
    if (!grant.ok() && intent) {
      GiveUpPlace(shared(), std::string(call.name), call.owner);
    }
    return grant;
  }

  // One function call per attempt takes every name or none (C25); a
  // refused attempt waits for the release of the name that refused it.
  absl::StatusOr<std::vector<Grant>> AcquireAll(
      absl::Span<const AcquireCall> parts, MonoTime deadline,
      const CancelToken& cancel) override {
    std::vector<std::string> names;
    for (const AcquireCall& part : parts) names.emplace_back(part.name);
    const std::string params[] = {shared().ns(),
                                  ArrayLiteral(names),
                                  std::string(parts[0].owner),
                                  MillisParam(parts[0].lease),
                                  liveness_id_,
                                  liveness_ttl_ms_};
    return AcquireAllWithWakeups(
        parts, deadline, cancel, shared().hub(), shared().fallback_poll(),
        [&]() -> absl::StatusOr<AllAttempt> {
          absl::StatusOr<PgResult> r = shared().RunPooled(
              shared().sql().primitives.acquire_all, params, false);
          if (!r.ok()) return r.status();
          return ToAllAttempt(r->get(), names);
        });
  }

  absl::Status Proclaim(const ProclaimCall& call) override {
    return ProclaimValue(shared(), call);
  }

  absl::Status RenewLiveness(absl::Duration ttl) override {
    const std::string params[] = {liveness_id_, MillisParam(ttl)};
    return shared().RunPooled(shared().sql().liveness, params, true).status();
  }

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    if (call.shape.kind == ObjectKind::kSemaphore) {
      return SemReleased(
          shared(), call.name,
          shared().RunPooled(shared().sql().primitives.sem_release,
                             SemReleaseParams(shared(), call, false), false));
    }
    if (call.shape.mode == HoldMode::kShared) {
      return ReleaseRead(shared(), call);
    }
    // A lock's, or an election's on its row.
    const std::string name = ObjectRow(call.shape.kind, call.name);
    const absl::string_view owner = call.owner;
    const std::string params[] = {
        shared().ns(),          name,
        std::string(owner),     absl::StrCat(call.CountToSubtract()),
        shared().sql().channel, absl::StrCat(KeepMillis(call.keep_for))};
    absl::StatusOr<PgResult> r =
        shared().RunPooled(shared().sql().release, params, false);
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) {
      // Not the owner's, or a writer that also reads (a downgrade).
      if (call.shape.IsLockWriter()) {
        return ReleaseWriterThatReads(shared(), call);
      }
      return NotOwnerError(call.name);
    }
    const int64_t left = GetInt(r->get(), 0, 0);
    // Local waiters need not wait for NOTIFY (of a kept lock too: they look
    // again and sleep until it expires).
    if (left == 0) shared().hub().Notify(name);
    return left;
  }

  // One statement for every due renewal of each kind: a client with many
  // locks and permits costs the server at most two round trips per
  // watchdog round, not one per hold. A reader renews on its own: its
  // statement locks the lock's row before its holder row.
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    std::vector<absl::Status> out(calls.size());
    std::vector<size_t> locks, holders;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].shape.mode == HoldMode::kShared) {
        out[i] = RenewRead(shared(), calls[i]);
        continue;
      }
      (calls[i].shape.kind == ObjectKind::kSemaphore ? holders : locks)
          .push_back(i);
    }
    RenewBatch(shared().sql().renew_many, calls, locks, out);
    RenewBatch(shared().sql().primitives.holder_renew_many, calls, holders,
               out);
    return out;
  }

  absl::Status Renew(const RenewCall& call) override {
    if (call.shape.kind == ObjectKind::kSemaphore) {
      return HolderRenewed(
          call.name,
          shared().RunPooled(shared().sql().primitives.holder_renew,
                             HolderRenewParams(shared(), call, false), true));
    }
    if (call.shape.mode == HoldMode::kShared) return RenewRead(shared(), call);
    const std::string params[] = {
        shared().ns(), ObjectRow(call.shape.kind, call.name),
        std::string(call.owner), MillisParam(call.lease)};
    absl::StatusOr<PgResult> r =
        shared().RunPooled(shared().sql().renew, params, true);
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) return NotOwnerError(call.name);
    return absl::OkStatus();
  }

 private:
  const std::string liveness_id_;
  const std::string liveness_ttl_ms_;  // "0": liveness off
  const HolderLiveness holders_;

  // acquire_all's answer: a hold per name in the order of `names`, or the
  // name that refused and its holder's hint. An answer that is neither
  // says nothing (look again after the fallback poll).
  static AllAttempt ToAllAttempt(const PGresult* r,
                                 const std::vector<std::string>& names) {
    AllAttempt attempt;
    if (PQntuples(r) == 1 && GetInt(r, 0, 0) == 0) {
      const int64_t index = GetInt(r, 0, 1);
      if (index >= 1 && index <= static_cast<int64_t>(names.size())) {
        attempt.refused = static_cast<size_t>(index - 1);
      }
      attempt.refusal.holder_lease_left = absl::Milliseconds(GetInt(r, 0, 2));
      return attempt;
    }
    absl::flat_hash_map<std::string, Acquired> taken;
    for (int row = 0; row < PQntuples(r); ++row) {
      taken[GetText(r, row, 3)] =
          Acquired{.fencing_token = static_cast<uint64_t>(GetInt(r, row, 4)),
                   .hold_count = GetInt(r, row, 5)};
    }
    if (taken.size() != names.size()) return attempt;
    for (const std::string& name : names) {
      attempt.acquired.push_back(taken[name]);
    }
    return attempt;
  }

  // Campaigns as a lock's acquisition on the election's row (C24); a new
  // leader is announced to this process's observers at once.
  absl::StatusOr<Grant> Campaign(const AcquireCall& call) {
    const std::string row = ObjectRow(ObjectKind::kElection, call.name);
    const std::string params[] = {shared().ns(),
                                  row,
                                  std::string(call.owner),
                                  MillisParam(call.lease),
                                  liveness_id_,
                                  liveness_ttl_ms_,
                                  ValueParam(call.value),
                                  shared().sql().channel};
    absl::StatusOr<Grant> grant = AcquireWithWakeups(
        call, row, shared().hub(), shared().fallback_poll(),
        [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<PgResult> r = shared().RunPooled(
              shared().sql().primitives.campaign, params, false);
          if (!r.ok()) return r.status();
          return ToAttempt(r->get());
        });
    if (grant.ok()) shared().hub().Notify(row);
    return grant;
  }

  // The calls at `picked` renewed with `batch` (renew_many's parameters;
  // a semaphore's rows by their marked names), their statuses into `out`.
  void RenewBatch(const Statement& batch, absl::Span<const RenewCall> calls,
                  const std::vector<size_t>& picked,
                  std::vector<absl::Status>& out) {
    if (picked.size() == 1) out[picked[0]] = Renew(calls[picked[0]]);
    if (picked.size() <= 1) return;
    std::vector<std::string> names, owners, leases;
    for (size_t i : picked) {
      const RenewCall& call = calls[i];
      names.push_back(ObjectRow(call.shape.kind, call.name));
      owners.emplace_back(call.owner);
      leases.push_back(MillisParam(call.lease));
    }
    const std::string params[] = {shared().ns(), ArrayLiteral(names),
                                  ArrayLiteral(owners), ArrayLiteral(leases)};
    absl::StatusOr<PgResult> r = shared().RunPooled(batch, params, true);
    absl::flat_hash_set<int64_t> renewed;
    for (int row = 0; r.ok() && row < PQntuples(r->get()); ++row) {
      renewed.insert(GetInt(r->get(), row, 0));
    }
    for (size_t k = 0; k < picked.size(); ++k) {
      out[picked[k]] = !r.ok() ? r.status()
                       : renewed.contains(static_cast<int64_t>(k) + 1)
                           ? absl::OkStatus()
                           : NotOwnerError(calls[picked[k]].name);
    }
  }

  // A PostgreSQL array literal: each element double-quoted, with '"' and
  // '\\' escaped. It is a parameter's value, parsed as data by array_in.
  static std::string ArrayLiteral(const std::vector<std::string>& items) {
    std::string out = "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ',';
      out += '"';
      for (char c : items[i]) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      out += '"';
    }
    out += '}';
    return out;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewLeaseBackend(
    PgOptions options, const BackendConfig& config) {
  auto backend = std::make_unique<LeaseBackend>(std::move(options), config);
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

}  // namespace dlock::postgres
