// mode=lease (the default): a row per held lock whose expiry is on the
// server's clock (C2). Each operation is one prepared statement, one round
// trip, atomic under concurrent clients (C3); docs/postgres.md explains each.
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "pg_common.h"

namespace dlock::postgres {
namespace {

class LeaseBackend : public PgBackendBase {
 public:
  LeaseBackend(PgOptions options, const BackendConfig& config)
      : PgBackendBase(std::move(options), config),
        liveness_id_(config.liveness_id),
        liveness_ttl_ms_(config.options.liveness_ttl == absl::InfiniteDuration()
                             ? "0"
                             : MillisParam(config.options.liveness_ttl)) {}

  // Connects and starts listening (PgShared::Start).
  absl::Status Start() { return shared().Start(nullptr); }

  BackendTraits Traits() const override {
    return BackendTraits{.liveness_record = true,
                         .holds_survive_restart = true,
                         .fencing = FencingStrength::kDurable,
                         .can_list = true,
                         .keeps_after_release = true};
  }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    const std::string params[] = {shared().ns(),
                                  std::string(call.name),
                                  std::string(call.owner),
                                  MillisParam(call.lease),
                                  liveness_id_,
                                  liveness_ttl_ms_};
    return AcquireWithWakeups(call, shared().hub(), shared().fallback_poll(),
                              [&]() -> absl::StatusOr<Attempt> {
                                absl::StatusOr<PgResult> r = shared().RunPooled(
                                    shared().sql().acquire, params, false);
                                if (!r.ok()) return r.status();
                                return ToAttempt(r->get());
                              });
  }

  absl::Status RenewLiveness(absl::Duration ttl) override {
    const std::string params[] = {liveness_id_, MillisParam(ttl)};
    return shared().RunPooled(shared().sql().liveness, params, true).status();
  }

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    const absl::string_view name = call.name;
    const absl::string_view owner = call.owner;
    const std::string params[] = {
        shared().ns(),          std::string(name),
        std::string(owner),     absl::StrCat(call.CountToSubtract()),
        shared().sql().channel, absl::StrCat(KeepMillis(call.keep_for))};
    absl::StatusOr<PgResult> r =
        shared().RunPooled(shared().sql().release, params, false);
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) return NotOwnerError(name);
    const int64_t left = GetInt(r->get(), 0, 0);
    // Local waiters need not wait for NOTIFY (of a kept lock too: they look
    // again and sleep until it expires).
    if (left == 0) shared().hub().Notify(name);
    return left;
  }

  // One statement for every due renewal: a client with many locks costs the
  // server one round trip per watchdog round, not one per lock.
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    if (calls.size() <= 1) return Backend::RenewMany(calls);
    std::vector<std::string> names, owners, leases;
    for (const RenewCall& call : calls) {
      names.emplace_back(call.name);
      owners.emplace_back(call.owner);
      leases.push_back(MillisParam(call.lease));
    }
    const std::string params[] = {shared().ns(), ArrayLiteral(names),
                                  ArrayLiteral(owners), ArrayLiteral(leases)};
    absl::StatusOr<PgResult> r =
        shared().RunPooled(shared().sql().renew_many, params, true);
    if (!r.ok()) return std::vector<absl::Status>(calls.size(), r.status());
    absl::flat_hash_set<int64_t> renewed;
    for (int row = 0; row < PQntuples(r->get()); ++row) {
      renewed.insert(GetInt(r->get(), row, 0));
    }
    std::vector<absl::Status> out;
    for (size_t i = 0; i < calls.size(); ++i) {
      out.push_back(renewed.contains(static_cast<int64_t>(i) + 1)
                        ? absl::OkStatus()
                        : NotOwnerError(calls[i].name));
    }
    return out;
  }

  absl::Status Renew(const RenewCall& call) override {
    const std::string params[] = {shared().ns(), std::string(call.name),
                                  std::string(call.owner),
                                  MillisParam(call.lease)};
    absl::StatusOr<PgResult> r =
        shared().RunPooled(shared().sql().renew, params, true);
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) return NotOwnerError(call.name);
    return absl::OkStatus();
  }

 private:
  const std::string liveness_id_;
  const std::string liveness_ttl_ms_;  // "0": liveness off

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
