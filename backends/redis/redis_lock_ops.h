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
  // Pub/sub ignores SELECT, so the channel names the db too. `sharded`: a
  // Redis Cluster's, whose releases are announced per slot (SPUBLISH).
  Keyspace(absl::string_view lock_namespace, int db, bool sharded = false);

  // "dlock:{<ns>:<name>}": the lock's one key. Its hash tag is everything
  // from the first '{' to the first '}' after it, so whatever the name holds
  // (braces too) the key has one slot, and any key a later layout adds with
  // this prefix shares it (Redis Cluster).
  std::string LockKey(absl::string_view name) const;
  // "dlock:<letter>{<ns>:<name>}": the hash of the name's semaphore ('s')
  // or election ('e'), in the lock's slot (docs/redis.md, keys).
  std::string ObjectKey(char letter, absl::string_view name) const;
  // The lock keys of the namespace start so ("dlock:{<ns>:").
  const std::string& lock_prefix() const { return lock_prefix_; }
  // The namespace's one release channel (PUBLISH, SUBSCRIBE).
  const std::string& channel() const { return channel_; }
  // Where the releases of `name` are announced: channel(), or when sharded
  // ShardChannel() of the lock's slot.
  std::string ReleaseChannel(absl::string_view name) const;
  // The shard channel (SPUBLISH, SSUBSCRIBE) of the namespace's releases in
  // one slot: "{<tag>}dlock:<ns>:released", the tag one that hashes to
  // `slot`, so that a release script announces in the slot of the key it
  // was given, as a cluster requires.
  std::string ShardChannel(int slot) const;
  bool sharded() const { return sharded_; }
  // Redlock's per-master token floor ("dlock:<ns>:floor"): every token a
  // master grants exceeds it, and the token a quorum agreed on raises it.
  const std::string& floor() const { return floor_; }

  // The 0.2 layout (docs/migration.md): its fencing counter, where this
  // layout leaves its mark, and the prefix of its lock keys.
  const std::string& old_fence() const { return old_fence_; }
  const std::string& old_lock_prefix() const { return old_lock_prefix_; }

 private:
  std::string lock_prefix_;
  std::string channel_;
  std::string floor_;
  std::string old_fence_;
  std::string old_lock_prefix_;
  std::string shard_suffix_;  // "dlock:<ns>:released"
  bool sharded_ = false;
};

// The hash slot of a key as Redis Cluster computes it (CRC16 of its hash
// tag, mod 16384).
inline constexpr int kClusterSlots = 16384;
int KeySlot(absl::string_view key);
// A short hash tag of `slot`: KeySlot("{" + SlotTag(slot) + "}...") == slot.
const std::string& SlotTag(int slot);

// The rolling upgrade's check on a new connection (Master::ConnectCheck;
// docs/migration.md): marks the namespace so that 0.2 clients can no longer
// take a lock in it, and fails with FailedPrecondition while 0.2 locks are
// held there.
absl::Status CheckLayout(Connection& conn, const Scripts& scripts,
                         const Keyspace& keys, absl::string_view endpoint);

// This client's liveness TTL in whole ms: 0 when liveness is off
// (ClientOptions::liveness_ttl). Each hold carries its holders' deadline
// (docs/redis.md, holder liveness).
struct Liveness {
  int64_t ttl_ms = 0;
};
Liveness ClientLiveness(const BackendConfig& config);

// A fresh hold or a re-entry (the acquire script), which sets the hold's
// liveness deadline and takes over a hold whose deadline passed.
// `will_wait` marks a refused attempt so that the holder's release is
// announced. With `proposed_token` (Redlock), the token is the larger of it
// and one more than the master's floor (Keyspace::floor()), so that masters
// given the same proposal agree on the token in one round.
ScriptCall AcquireScript(const Master& master, const Keyspace& keys,
                         const Liveness& liveness, absl::string_view name,
                         absl::string_view owner, absl::Duration lease,
                         bool will_wait,
                         std::optional<uint64_t> proposed_token = std::nullopt);

// Redlock: the master's floor (Keyspace::floor()) as the script's last key
// and the round's proposed token as its last argument, for the scripts
// that take them (acquire, sem_acquire, read_acquire, write_acquire).
void AddFloorAndProposal(const Keyspace& keys,
                         std::optional<uint64_t> proposed_token,
                         ScriptCall& call);

// The heartbeat of one hold: refreshes its liveness deadline while it is
// still the hold with `token`. ParseRefreshLiveness reads the reply: true
// while the hold is this one.
ScriptCall RefreshLivenessScript(const Master& master, const Keyspace& keys,
                                 const Liveness& liveness,
                                 absl::string_view name,
                                 absl::string_view owner, uint64_t token);
absl::StatusOr<bool> ParseRefreshLiveness(const redisReply* reply,
                                          absl::string_view endpoint);
// What one master answered to the acquire script.
struct AcquireReply {
  std::optional<Acquired> acquired;
  // A free lock taken: the value the script wrote up to its owner, which
  // the release sends back (with the owner) so that a lock still holding
  // it is released with a string compare.
  std::string fresh_prefix;
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
// nobody for that long (ReleaseCall::keep_for). `fresh_prefix`: what the
// owner's fresh grant wrote before the owner (AcquireReply::fresh_prefix),
// if known; the script releases a lock that still holds that value with no
// more than a compare.
ScriptCall ReleaseScript(const Master& master, const Keyspace& keys,
                         absl::string_view name, absl::string_view owner,
                         int64_t holds,
                         absl::Duration keep_for = absl::ZeroDuration(),
                         absl::string_view fresh_prefix = {});
// The holds left; NotOwnerError() when the owner does not hold the lock.
absl::StatusOr<int64_t> ParseRelease(const redisReply* reply,
                                     absl::string_view name,
                                     absl::string_view endpoint);

// Also refreshes the hold's liveness deadline (a renewal is a heartbeat).
ScriptCall RenewScript(const Master& master, const Keyspace& keys,
                       const Liveness& liveness, absl::string_view name,
                       absl::string_view owner, absl::Duration lease);
// OK, or NotOwnerError() when the owner does not hold the lock.
absl::Status ParseRenew(const redisReply* reply, absl::string_view name,
                        absl::string_view endpoint);

ScriptCall InspectScript(const Master& master, const Keyspace& keys,
                         absl::string_view name);
absl::StatusOr<LockInfo> ParseInspect(const redisReply* reply,
                                      absl::string_view name,
                                      absl::string_view endpoint);

// Redlock's token agreement: the hold on this master takes `token`, and the
// master's floor rises to it. ParseRenew() reads the reply.
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
// The same for keys "<key_prefix><name>}" (Keyspace::ObjectKey's).
absl::StatusOr<std::vector<std::string>> ScanNames(Master& master,
                                                   absl::string_view key_prefix,
                                                   absl::string_view prefix);

// One page of SCAN: the next cursor into `cursor`, and the lock names (the
// keys less `key_prefix` and the closing '}') appended to `names`.
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
