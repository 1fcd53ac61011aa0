// Copyright dlock authors. Read-write locks (C23) on PostgreSQL, lease mode:
// a reader's statements and answers, the writer's second step when readers
// refused it, and the lock's Inspect with its readers. The functions are in
// pg_rw_sql.cc.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_RW_H_
#define DLOCK_BACKENDS_POSTGRES_PG_RW_H_

#include <string>
#include <vector>

#include "pg_common.h"
#include "pg_primitives.h"

namespace dlock::postgres {

// read_acquire's parameters ($9 `have`: the statement runs on the session
// that holds the reader's key, a re-entry).
std::array<std::string, 10> ReadAcquireParams(const PgShared& shared,
                                              const AcquireCall& call,
                                              const HolderLiveness& liveness,
                                              bool wait, bool have);
// Waits for a read hold as AcquireWithWakeups does, each attempt one
// read_acquire through `run` (a pooled connection in lease mode, the
// reader's own session in session mode).
absl::StatusOr<Grant> AcquireRead(PgShared& shared, const AcquireCall& call,
                                  const HolderLiveness& liveness,
                                  absl::FunctionRef<absl::StatusOr<PgResult>(
                                      absl::Span<const std::string> params)>
                                      run);
// read_acquire's, write_acquire's and s_write_acquire's answer (code,
// token, holds, left ms): a grant, a refusal with its hint, or
// UpgradeRefused (-4).
absl::StatusOr<Attempt> ToModeAttempt(const PGresult* r,
                                      absl::string_view name);

// A writer's attempt from the acquire statement's answer `r`: refused on a
// read-held or handed-over row, it asks write_acquire (the hand-off, the
// upgrade refusal, the intent that stops new readers); `intent` is set
// once it did, so that a wait that fails gives the intent up
// (GiveUpPlace).
absl::StatusOr<Attempt> WriterAttempt(PgShared& shared, const AcquireCall& call,
                                      const HolderLiveness& liveness,
                                      const PGresult* r, bool& intent);

// read_release's parameters (session mode: `have`, on the reader's
// session).
std::array<std::string, 6> ReadReleaseParams(const PgShared& shared,
                                             const ReleaseCall& call,
                                             bool have);

// Lease mode: a reader's release and renewal; the release of a writer that
// also reads
// (the usual release statement answered nothing): the holds left, GONE
// when not the owner's.
absl::StatusOr<int64_t> ReleaseRead(PgShared& shared, const ReleaseCall& call);
absl::Status RenewRead(PgShared& shared, const RenewCall& call);
absl::StatusOr<int64_t> ReleaseWriterThatReads(PgShared& shared,
                                               const ReleaseCall& call);

// The lock's writer, readers and waiting writer, read in one statement.
absl::StatusOr<ObjectInfo> InspectLock(PgShared& shared,
                                       absl::string_view name);
// The locks held by a writer, kept, or read (readers alone included) whose
// names start with `prefix`, read in one statement.
absl::StatusOr<std::vector<ObjectInfo>> ListLocks(PgShared& shared,
                                                  absl::string_view prefix);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_RW_H_
