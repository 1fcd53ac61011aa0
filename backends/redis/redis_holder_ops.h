// Copyright dlock authors. The operations on a holders hash (a semaphore's
// permits, an election's leadership; issue 24) as script calls on one
// master, and what their replies mean (docs/redis.md, keys and scripts).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_HOLDER_OPS_H_
#define DLOCK_BACKENDS_REDIS_REDIS_HOLDER_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_lock_ops.h"

namespace dlock::redis {

// Where the changes of a semaphore or an election are announced: the
// lock's release channel, with "\x1f" + letter + name ("\x1fs", "\x1fe"),
// which is also the name its waiters and watchers wait on in the hub. No
// lock name holds a control character (C15): never a lock's message. A
// lock's readers and writers share the lock's own message, its name.
std::string ObjectMessage(ObjectKind kind, absl::string_view name);

// A semaphore's permits or a leadership (sem_acquire.lua). `will_wait`
// marks the object so that releases are announced, and keeps the first
// waiter's place for `place` (the semaphore's head waiter). Redlock
// `proposes` a fresh grant's token, which the master's floor may raise
// (AcquireScript's `proposed`).
ScriptCall HolderAcquireScript(const Master& master, const Keyspace& keys,
                               const Liveness& liveness,
                               const AcquireCall& call, bool will_wait,
                               absl::Duration place,
                               std::optional<uint64_t> proposed = {});
struct HolderAcquireReply {
  Attempt attempt;
  std::vector<int64_t> slots;  // of a grant
  std::string leader;          // an election's, when refused
};
// LimitMismatchError or PermitsMismatchError for the script's refusals.
absl::StatusOr<HolderAcquireReply> ParseHolderAcquire(
    const redisReply* reply, const AcquireCall& call,
    absl::string_view endpoint);

// A lock's read: ReadAcquireScript's reply.
absl::StatusOr<HolderAcquireReply> ParseReadAcquire(const redisReply* reply,
                                                    absl::string_view endpoint);

// Returns the holds left; ParseRelease() reads it. `shape`: a semaphore's
// permits, a leadership or a lock's read (its readers hash and the lock).
ScriptCall HolderReleaseScript(const Master& master, const Keyspace& keys,
                               const HoldShape& shape, absl::string_view name,
                               absl::string_view owner, int64_t holds);
// ParseRenew() reads the reply.
ScriptCall HolderRenewScript(const Master& master, const Keyspace& keys,
                             const Liveness& liveness, const HoldShape& shape,
                             absl::string_view name, absl::string_view owner,
                             absl::Duration lease);
// ParseRefreshLiveness() reads the reply.
ScriptCall HolderRefreshLivenessScript(const Master& master,
                                       const Keyspace& keys,
                                       const Liveness& liveness,
                                       const HoldShape& shape,
                                       absl::string_view name,
                                       absl::string_view owner, uint64_t token);
// A lock's read (C23; read_acquire.lua): ParseAcquire() reads the reply.
// Redlock `proposes` a fresh read's token (HolderAcquireScript's).
ScriptCall ReadAcquireScript(const Master& master, const Keyspace& keys,
                             const Liveness& liveness, const AcquireCall& call,
                             bool will_wait,
                             std::optional<uint64_t> proposed = {});
// A lock's writer once acquire.lua refused it a lock held by nobody (kept,
// or read-held): ParseAcquire() reads the reply, unless IsUpgradeRefusal.
// A waiting writer's intent lives `intent` past each of its attempts.
// Redlock `proposes` the grant's token (HolderAcquireScript's).
ScriptCall WriteAcquireScript(const Master& master, const Keyspace& keys,
                              const Liveness& liveness, const AcquireCall& call,
                              bool will_wait, absl::Duration intent,
                              std::optional<uint64_t> proposed = {});
// The writer's owner reads the lock (UpgradeRefusedError).
bool IsUpgradeRefusal(const redisReply* reply);
// The lock's release and force unlocks take its readers' hash along
// (release.lua's downgrade, force_unlock*.lua).
void AddReadersKey(const Keyspace& keys, absl::string_view name,
                   ScriptCall& call);
// A waiter that gives up takes its place with it (C9): a semaphore's head
// place, or (kind kLock) a writer's intent.
ScriptCall HolderAbandonScript(const Master& master, const Keyspace& keys,
                               ObjectKind kind, absl::string_view name,
                               absl::string_view owner);

// A lock's inspect given its readers' key (AddReadersKey): its writer's
// fields and its readers', read in one step (C11).
struct LockWithReaders {
  LockInfo writer;
  ObjectInfo readers;
};
absl::StatusOr<LockWithReaders> ParseInspectWithReaders(
    const redisReply* reply, absl::string_view name,
    absl::string_view endpoint);

ScriptCall HoldersInspectScript(const Master& master, const Keyspace& keys,
                                ObjectKind kind, absl::string_view name);
absl::StatusOr<ObjectInfo> ParseHoldersInspect(const redisReply* reply,
                                               ObjectKind kind,
                                               absl::string_view name,
                                               absl::string_view endpoint);

// Every holder, or only the one with `fencing_token`;
// ParseForceUnlockIfToken() reads whether one was removed.
ScriptCall HoldersForceUnlockScript(const Master& master, const Keyspace& keys,
                                    ObjectKind kind, absl::string_view name,
                                    std::optional<uint64_t> fencing_token);

// Redlock: writes the term a quorum agreed on into the leader's entry and
// raises the floor to it (RaiseTokenScript's); ParseRenew() reads the reply.
ScriptCall HolderRaiseTokenScript(const Master& master, const Keyspace& keys,
                                  ObjectKind kind, absl::string_view name,
                                  absl::string_view owner, uint64_t token);

// What the keys of the objects of `kind` start with, the name following
// (ScanNames' `key_prefix`).
std::string ObjectNamesPrefix(const Keyspace& keys, ObjectKind kind);

// The leader's new value, while it leads with `term`; ParseRenew() reads
// the reply (GONE when it no longer leads).
ScriptCall ElectionProclaimScript(const Master& master, const Keyspace& keys,
                                  const ProclaimCall& call);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_HOLDER_OPS_H_
