// Copyright dlock authors. The lock operations on one master as script calls
// and what their replies mean: shared by every Redis topology, which decides
// how many masters to ask and what their answers add up to.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_LOCK_OPS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_LOCK_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_master.h"

namespace dlock::redis {

// Where one lock namespace lives on a master (docs/redis.md, key layout).
class Keyspace {
 public:
  // Pub/sub ignores SELECT, so the channel names the db too.
  Keyspace(absl::string_view lock_namespace, int db);

  std::string LockKey(absl::string_view name) const;
  // A client's liveness record (BackendConfig::liveness_id).
  std::string LivenessKey(absl::string_view liveness_id) const;
  const std::string& prefix() const { return prefix_; }    // "dlock:<ns>:"
  const std::string& fence() const { return fence_; }      // the counter (C8)
  const std::string& channel() const { return channel_; }  // releases

 private:
  std::string prefix_;
  std::string fence_;
  std::string channel_;
};

// Leases go to the server in whole milliseconds, at least one.
int64_t LeaseMillis(absl::Duration lease);

// This client's liveness key, and its TTL in whole ms: 0 when liveness is
// off (ClientOptions::liveness_ttl) or `enabled` is false.
struct Liveness {
  std::string key;
  int64_t ttl_ms = 0;
};
Liveness ClientLiveness(const Keyspace& keys, const BackendConfig& config,
                        bool enabled);

// A fresh hold or a re-entry (the acquire script), which refreshes the
// caller's liveness key and takes over a hold whose holders' liveness keys
// are all gone. `will_wait` marks a refused attempt so that the holder's
// release is announced.
ScriptCall AcquireScript(const Master& master, const Keyspace& keys,
                         const Liveness& liveness, absl::string_view name,
                         absl::string_view owner, absl::Duration lease,
                         bool will_wait);

// The heartbeat (Backend::RenewLiveness); ParseLivenessReply reads it.
ScriptCall LivenessScript(const Master& master, const Liveness& liveness);
absl::Status ParseLivenessReply(const redisReply* reply,
                                absl::string_view endpoint);
// What one master answered to the acquire script.
struct AcquireReply {
  std::optional<Acquired> acquired;
  // When refused: who holds the lock there, and its lease left.
  std::string holder;
  absl::Duration holder_lease_left = absl::ZeroDuration();

  Attempt ToAttempt() const {
    return Attempt{.acquired = acquired,
                   .holder_lease_left = holder_lease_left};
  }
};
absl::StatusOr<AcquireReply> ParseAcquire(const redisReply* reply,
                                          absl::string_view endpoint);

// `keep_for` positive: the last hold's release leaves the lock kept by
// nobody for that long (ReleaseCall::keep_for).
ScriptCall ReleaseScript(const Master& master, const Keyspace& keys,
                         absl::string_view name, absl::string_view owner,
                         int64_t holds,
                         absl::Duration keep_for = absl::ZeroDuration());
// The holds left; NotOwnerError() when the owner does not hold the lock.
absl::StatusOr<int64_t> ParseRelease(const redisReply* reply,
                                     absl::string_view name,
                                     absl::string_view endpoint);

ScriptCall RenewScript(const Master& master, const Keyspace& keys,
                       absl::string_view name, absl::string_view owner,
                       absl::Duration lease);
// OK, or NotOwnerError() when the owner does not hold the lock.
absl::Status ParseRenew(const redisReply* reply, absl::string_view name,
                        absl::string_view endpoint);

ScriptCall InspectScript(const Master& master, const Keyspace& keys,
                         absl::string_view name);
absl::StatusOr<LockInfo> ParseInspect(const redisReply* reply,
                                      absl::string_view name,
                                      absl::string_view endpoint);

// Redlock's token agreement: the hold on this master takes `token`, and the
// master's counter rises to it. ParseRenew() reads the reply.
ScriptCall RaiseTokenScript(const Master& master, const Keyspace& keys,
                            absl::string_view name, absl::string_view owner,
                            uint64_t token);

ScriptCall ForceUnlockScript(const Master& master, const Keyspace& keys,
                             absl::string_view name);
ScriptCall ForceUnlockIfTokenScript(const Master& master, const Keyspace& keys,
                                    absl::string_view name,
                                    uint64_t fencing_token);
// Whether the conditional force unlock removed the lock on that master.
absl::StatusOr<bool> ParseForceUnlockIfToken(const redisReply* reply,
                                             absl::string_view endpoint);

// The names of the locks on the master whose names start with `prefix`
// (SCAN; a lock that expires meanwhile may be among them).
absl::StatusOr<std::vector<std::string>> ScanLockNames(
    Master& master, const Keyspace& keys, absl::string_view prefix);

// One page of SCAN: the next cursor into `cursor`, and the lock names (the
// keys less `key_prefix`) appended to `names`.
absl::Status ParseScanPage(const redisReply* reply,
                           absl::string_view key_prefix, std::string& cursor,
                           std::vector<std::string>& names,
                           absl::string_view endpoint);

// The master's `used_memory` (INFO memory): all its data, in bytes.
absl::StatusOr<int64_t> UsedMemory(Master& master);
absl::StatusOr<int64_t> ParseUsedMemory(const redisReply* reply,
                                        absl::string_view endpoint);

// For a reply that does not have the shape its script returns.
absl::Status Malformed(absl::string_view what, absl::string_view endpoint);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_LOCK_OPS_H_
