// Copyright dlock authors. Semaphores (C22) on PostgreSQL, what both modes
// share: the statements' parameters and answers, the wait with its kept
// place, and the admin calls. The functions are in pg_primitives_sql.cc;
// a mode supplies where a statement runs (a pooled connection in lease
// mode, the holder's own session in session mode).
#ifndef DLOCK_BACKENDS_POSTGRES_PG_PRIMITIVES_H_
#define DLOCK_BACKENDS_POSTGRES_PG_PRIMITIVES_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "pg_common.h"

namespace dlock::postgres {

// The lock table's row of a semaphore or an election: its name marked
// with its kind, so that it never meets a lock's (names hold no control
// character, C15). Announcements and waiters use it too.
std::string SemaphoreRow(absl::string_view name);
std::string ObjectRow(ObjectKind kind, absl::string_view name);

// How a mode's holders stay alive besides their lease: lease mode's
// liveness record, or session mode's advisory key and grace.
struct HolderLiveness {
  std::string live_id;
  std::string ttl_ms = "0";  // "0": no liveness record
  bool session = false;
  std::string grace_ms = "0";
};

// sem_acquire's parameters; `wait`: a refusal keeps the caller's place.
std::array<std::string, 13> SemAcquireParams(const PgShared& shared,
                                             const AcquireCall& call,
                                             const HolderLiveness& liveness,
                                             bool wait, bool have);
// One sem_acquire's answer: a grant (its slots into `slots`), a refusal
// with its hint, or the mismatch errors (C22).
absl::StatusOr<Attempt> ToPermitAttempt(const PGresult* r,
                                        const AcquireCall& call,
                                        std::vector<int64_t>& slots);

// Waits for the permits of call.shape as AcquireWithWakeups does, each
// attempt one sem_acquire through `run`; `have`: the first attempt runs on
// the session that holds the owner's key (a re-entry). A wait that ends
// without the permits gives up its kept place.
absl::StatusOr<Grant> AcquirePermits(PgShared& shared, const AcquireCall& call,
                                     const HolderLiveness& liveness, bool have,
                                     absl::FunctionRef<absl::StatusOr<PgResult>(
                                         absl::Span<const std::string> params)>
                                         run);

std::array<std::string, 6> SemReleaseParams(const PgShared& shared,
                                            const ReleaseCall& call, bool have);
// sem_release's answer: the holds left, GONE when not the owner's; at zero
// this process's waiters are woken.
absl::StatusOr<int64_t> SemReleased(PgShared& shared, absl::string_view name,
                                    const absl::StatusOr<PgResult>& r);
std::array<std::string, 5> HolderRenewParams(const PgShared& shared,
                                             const RenewCall& call, bool have);
// holder_renew's answer.
absl::Status HolderRenewed(absl::string_view name,
                           const absl::StatusOr<PgResult>& r);

// A waiter that gave up leaves no place behind (a semaphore's head waiter,
// a writer's intent, a lock handed over to it); the place lapses by itself
// if this fails.
void GiveUpPlace(PgShared& shared, const std::string& row,
                 absl::string_view owner);

// The admin calls of a semaphore (both modes), each one statement.
absl::StatusOr<ObjectInfo> InspectSemaphore(PgShared& shared,
                                            absl::string_view name);
absl::StatusOr<std::vector<ObjectInfo>> ListSemaphores(
    PgShared& shared, absl::string_view prefix);
absl::Status ForceSemaphore(PgShared& shared, absl::string_view name,
                            std::optional<uint64_t> fencing_token);

// An election's value as a statement parameter (hex: a value may hold any
// byte).
std::string ValueParam(absl::string_view value);
// The leader's new value (Backend::Proclaim), one statement.
absl::Status ProclaimValue(PgShared& shared, const ProclaimCall& call);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_PRIMITIVES_H_
