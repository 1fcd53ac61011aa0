// Copyright dlock authors. A multi-lock's names all or nothing in one
// script (scripts/multi_acquire.lua; C25) on a topology of one master,
// where a script may touch keys of any slot.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_MULTI_H_
#define DLOCK_BACKENDS_REDIS_REDIS_MULTI_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dlock/backend/backend.h"
#include "redis_objects.h"

namespace dlock::redis {

// Backend::AcquireAll on the one master the router serves: each attempt is
// one script over every name, nothing held between attempts, a refused
// attempt woken by the release of the name that refused it. The grants'
// records join `c.held` for the heartbeat, as single grants do.
absl::StatusOr<std::vector<Grant>> AcquireAllOnOneMaster(
    const ObjectsContext& c, absl::Span<const AcquireCall> parts,
    MonoTime deadline, const CancelToken& cancel);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_MULTI_H_
