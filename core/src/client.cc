// LockClient's short path: a lock handle made and dropped around one
// acquisition.
#include "dlock/client.h"

namespace dlock {

absl::StatusOr<Hold> LockClient::Acquire(absl::string_view name,
                                         const AcquireOptions& options) {
  absl::StatusOr<std::unique_ptr<DistributedLock>> lock = GetLock(name);
  if (!lock.ok()) return lock.status();
  return (*lock)->Acquire(options);
}

absl::StatusOr<Hold> LockClient::TryAcquire(absl::string_view name,
                                            AcquireOptions options) {
  options.wait = absl::ZeroDuration();
  return Acquire(name, options);
}

}  // namespace dlock
