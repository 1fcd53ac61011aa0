// Copyright dlock authors. Read-write locks (C23) on PostgreSQL, lease mode:
// a reader's statements and answers, the writer's second step when readers
// refused it, and the lock's Inspect with its readers. The functions are in
// pg_rw_sql.cc.
#ifndef DLOCK_BACKENDS_POSTGRES_PG_RW_H_
#define DLOCK_BACKENDS_POSTGRES_PG_RW_H_

#include <string>

#include "pg_common.h"
#include "pg_primitives.h"

namespace dlock::postgres {

// Waits for a read hold as AcquireWithWakeups does, each attempt one
// read_acquire on a pooled connection.
absl::StatusOr<Grant> AcquireRead(PgShared& shared, const AcquireCall& call,
                                  const HolderLiveness& liveness);

// A writer's attempt from the acquire statement's answer `r`: refused on a
// read-held or handed-over row, it asks write_acquire (the hand-off, the
// upgrade refusal, the intent that stops new readers); `intent` is set
// once it did, so that a wait that fails gives the intent up
// (GiveUpPlace).
absl::StatusOr<Attempt> WriterAttempt(PgShared& shared, const AcquireCall& call,
                                      const HolderLiveness& liveness,
                                      const PGresult* r, bool& intent);

// A reader's release and renewal; the release of a writer that also reads
// (the usual release statement answered nothing): the holds left, GONE
// when not the owner's.
absl::StatusOr<int64_t> ReleaseRead(PgShared& shared, const ReleaseCall& call);
absl::Status RenewRead(PgShared& shared, const RenewCall& call);
absl::StatusOr<int64_t> ReleaseWriterThatReads(PgShared& shared,
                                               const ReleaseCall& call);

// The lock's writer, readers and waiting writer, read in one statement.
absl::StatusOr<ObjectInfo> InspectLock(PgShared& shared,
                                       absl::string_view name);

}  // namespace dlock::postgres

#endif  // DLOCK_BACKENDS_POSTGRES_PG_RW_H_
