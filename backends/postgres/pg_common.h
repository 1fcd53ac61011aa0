// Copyright dlock authors. What both PostgreSQL modes share: options, the
// statements, the connection pool, the wake-up hub and its listener, and the
// operations that do not depend on the mode (C11, C12). Each mode's backend
// composes one PgShared; PgBackendBase answers the calls both modes answer
// alike through it.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_COMMON_H_
#define DLOCK_BACKENDS_POSTGRES_PG_COMMON_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "pg_listener.h"
#include "pg_options.h"
#include "pg_pool.h"
#include "pg_schema.h"

namespace dlock::postgres {

class PgShared {
 public:
  PgShared(PgOptions options, const BackendConfig& config);
  PgShared(const PgShared&) = delete;
  PgShared& operator=(const PgShared&) = delete;

  // Connects once, creating the schema on first use, and starts listening:
  // LISTEN is in place when it returns, or it fails with Unavailable.
  absl::Status Start(PgListener::Watcher* watcher);
  // Stops listening and closes the pooled connections.
  void Stop();

  // Runs `stmt` on a pooled connection. A statement that failed because the
  // pooled connection had just died is tried once more on a fresh one when
  // `idempotent`.
  absl::StatusOr<PgResult> RunPooled(const Statement& stmt,
                                     absl::Span<const std::string> params,
                                     bool idempotent);

  // The Backend calls whose statements do not depend on the mode.
  absl::StatusOr<LockInfo> Inspect(absl::string_view name);
  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix);
  absl::Status ForceUnlock(absl::string_view name);
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token);
  absl::StatusOr<ServerMemory> ServerMemoryUse();

  const PgOptions& options() const { return options_; }
  const Sql& sql() const { return sql_; }
  const std::string& ns() const { return ns_; }
  absl::Duration fallback_poll() const { return fallback_poll_; }
  BackendListener* listener() const { return listener_; }
  const Clock& clock() const { return clock_; }
  WakeupHub& hub() { return hub_; }
  // The LISTEN connection's thread; set by Start().
  PgListener& notifications() { return *notifications_; }

 private:
  const PgOptions options_;
  const Sql sql_;
  const std::string ns_;
  const absl::Duration fallback_poll_;
  BackendListener* const listener_;
  const Clock& clock_;
  PgPool pool_;
  WakeupHub hub_;
  std::unique_ptr<PgListener> notifications_;
};

// The Backend calls both modes answer alike, through the PgShared each
// composes.
class PgBackendBase : public Backend {
 public:
  PgBackendBase(PgOptions options, const BackendConfig& config)
      : shared_(std::move(options), config) {}

  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    return shared_.Inspect(name);
  }
  absl::StatusOr<std::vector<LockInfo>> List(
      absl::string_view prefix) override {
    return shared_.List(prefix);
  }
  absl::Status ForceUnlock(absl::string_view name) override {
    return shared_.ForceUnlock(name);
  }
  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override {
    return shared_.ForceUnlockIfToken(name, fencing_token);
  }
  absl::StatusOr<ServerMemory> ServerMemoryUse() override {
    return shared_.ServerMemoryUse();
  }
  void Shutdown() override { shared_.Stop(); }
  // A semaphore's and an election's in both modes (pg_primitives.cc); a
  // lock's as Backend's.
  absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                           absl::string_view name) override;
  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix) override;
  absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token) override;
  // A hub waiter on the object's row name (pg_primitives.cc).
  std::unique_ptr<ObjectWatch> WatchObject(ObjectKind kind,
                                           absl::string_view name) override;

 protected:
  PgShared& shared() { return shared_; }
  const PgShared& shared() const { return shared_; }

 private:
  PgShared shared_;
};

// The lease-mode and session-mode backends, both started.
absl::StatusOr<std::unique_ptr<Backend>> NewLeaseBackend(
    PgOptions options, const BackendConfig& config);
absl::StatusOr<std::unique_ptr<Backend>> NewSessionBackend(
    PgOptions options, const BackendConfig& config);

// A lease, keep, TTL or grace as a statement parameter: LeaseMillis()
// (dlock/backend/rules.h), the rule every backend rounds by.
inline std::string MillisParam(absl::Duration d) {
  return absl::StrCat(LeaseMillis(d));
}

// A boolean as a statement parameter.
inline const char* Bool(bool b) { return b ? "true" : "false"; }

// What one acquire statement answered (both modes' functions return the
// same columns: granted, holds, fencing token, the holder's lease left in
// ms). No row says nothing of a holder: the attempt then waits for a
// wake-up or the fallback poll, as for a holder whose lease end is unknown;
// never "look again at once", which a server that kept answering no row
// would turn into polling every millisecond (C9), nor a lease taken as over
// that no row said was (C19).
Attempt ToAttempt(const PGresult* r);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_COMMON_H_
