// Copyright dlock authors. The handles of issue 24's primitives
// (dlock/semaphore.h, rw_lock.h, election.h, multi_lock.h), bound to the
// client core they act through; made by the client facade (connect.cc)
// after it has checked the name and that the backend offers the primitive.
#ifndef DLOCK_CORE_SRC_PRIMITIVES_H_
#define DLOCK_CORE_SRC_PRIMITIVES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client_core.h"
#include "dlock/election.h"
#include "dlock/multi_lock.h"
#include "dlock/rw_lock.h"
#include "dlock/semaphore.h"

namespace dlock::internal {

// primitives_handles.cc
std::unique_ptr<Semaphore> MakeSemaphore(std::shared_ptr<ClientCore> core,
                                         std::string name, int64_t limit);
std::unique_ptr<ReadWriteLock> MakeReadWriteLock(
    std::shared_ptr<ClientCore> core, std::string name);
// primitives_election.cc
std::unique_ptr<Election> MakeElection(std::shared_ptr<ClientCore> core,
                                       std::string name);
// primitives_multi.cc: LockClient::AcquireAll() once the names are checked.
absl::StatusOr<MultiHold> AcquireAll(ClientCore& core,
                                     absl::Span<const std::string> names,
                                     const AcquireOptions& options);

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_PRIMITIVES_H_
