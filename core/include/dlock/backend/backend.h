// Copyright dlock authors. What a backend implements; service code never
// includes this. The core does validation (C15), owner identity (C6), the
// local hold table, the watchdog (C7) and shutdown (C13) once for every
// backend; a backend supplies the atomic operations on its server.
#ifndef DLOCK_BACKEND_BACKEND_H_
#define DLOCK_BACKEND_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/backend/options.h"
#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "dlock/lock.h"
#include "dlock/uri.h"

namespace dlock {

// One acquisition as the core hands it to a backend: name and owner are
// already validated, the lease is positive.
struct AcquireCall {
  absl::string_view name;
  absl::string_view owner;
  absl::Duration lease;
  // When to stop waiting, on the client's clock (BackendConfig::clock). At
  // or before now: a single attempt (C10).
  MonoTime deadline;
  CancelToken cancel;
};

// A successful acquisition as a backend reports it to the core.
struct Grant {
  uint64_t fencing_token = 0;  // same on re-entry (C8)
  int64_t hold_count = 0;      // the backend's count after this acquisition
  // When the request that the backend granted was sent (after a wait: the
  // attempt that won, not the first one). The backend starts the lease no
  // earlier, so the core, counting the lease from here, stops believing in
  // the hold no later than the backend frees it (C19).
  MonoTime sent;
};

struct RenewCall {
  absl::string_view name;
  absl::string_view owner;
  absl::Duration lease;
};

// How a backend tells the core about holds it learned are gone on its own
// (a session that expired, a connection that dropped).
class BackendListener {
 public:
  virtual ~BackendListener() = default;
  virtual void OnHoldLost(absl::string_view name, absl::string_view owner,
                          const absl::Status& reason) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Acquires or re-enters atomically (C3, C5), waiting until call.deadline
  // (C9). The fencing token of a fresh hold exceeds every earlier one (C8).
  virtual absl::StatusOr<Grant> Acquire(const AcquireCall& call) = 0;

  // Takes `holds` holds of `owner` off `name` and returns how many are left;
  // the lock is freed and waiters are woken at zero. FailedPrecondition when
  // `owner` does not hold it (C4).
  virtual absl::StatusOr<int64_t> Release(absl::string_view name,
                                          absl::string_view owner,
                                          int64_t holds) = 0;

  // Extends the lease to the larger of call.lease and the kept maximum (C5).
  // FailedPrecondition when `owner` does not hold it.
  virtual absl::Status Renew(const RenewCall& call) = 0;

  // The watchdog renews everything due at once; a backend that can batch
  // overrides this. Returns one status per call, in order.
  virtual std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls);

  // Beyond the lease, how long the backend's own liveness lets this client
  // believe that `owner` holds `name`: a session that the server may end on
  // its own (ZooKeeper, a PostgreSQL session) bounds every hold on it. The
  // core believes a hold until the earlier of its lease deadline and this
  // (C19), and wakes then to report it lost (C20). Called on every State(),
  // under the client's own lock: answer from memory, never with a round
  // trip, and take no lock that is held while calling BackendListener.
  // Default: no bound.
  virtual MonoTime HeldUntil(absl::string_view name, absl::string_view owner);

  virtual absl::StatusOr<LockInfo> Inspect(absl::string_view name) = 0;
  virtual absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix);
  virtual absl::Status ForceUnlock(absl::string_view name) = 0;

  // Stops background work and closes connections. Called once, after the
  // core has released what the client held; no call follows it.
  virtual void Shutdown() = 0;
};

// What a backend factory gets. `params` holds the URI's query parameters
// not yet taken by the core (namespace and the common options are); a
// factory takes its own and rejects the rest.
struct BackendConfig {
  const Uri& uri;
  UriParams& params;
  const ClientOptions& options;
  std::string lock_namespace;
  std::string client_id;
  std::string endpoint;       // the redacted URI, for messages
  BackendListener* listener;  // outlives the backend
  const Clock& clock;         // local time for every wait and deadline
  // connect_timeout= and operation_timeout=, for the backend to map onto its
  // client (dlock/backend/options.h).
  CommonBackendOptions common;
};

using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<Backend>>(
    const BackendConfig& config)>;

// Adds a scheme to the registry dlock::Connect() consults. Returns true, so
// that a backend can register from a static initializer:
//   const bool kRegistered = dlock::RegisterBackend("redis", &MakeRedis);
bool RegisterBackend(absl::string_view scheme, BackendFactory factory);
std::vector<std::string> RegisteredSchemes();

}  // namespace dlock

#endif  // DLOCK_BACKEND_BACKEND_H_
