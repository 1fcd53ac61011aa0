// Elections and read-write locks on Redlock (issue 24; docs/redis.md): an
// election is the one-master holders hash (sem_acquire.lua with N=1 and a
// value) on every master, a lock's read the one-master read_acquire.lua on
// every master, each taken in rounds as a lock is (TryRound): a quorum
// must grant within the lease less drift, the token is agreed from the
// masters' floors as a lock's, and a split vote gives its round back. What
// follows are the calls that differ from a lock writer's by their scripts,
// what a quorum of holders hashes says, and the election's own calls:
// Proclaim, Watch. The read-write lock's own: redlock_rw.cc.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "dlock/errors.h"
#include "redis_holder_ops.h"
#include "redlock_backend.h"

namespace dlock::redis {

ScriptCall RedlockBackend::RoundScript(const Master& m, const AcquireCall& call,
                                       bool will_wait,
                                       uint64_t proposed) const {
  if (call.shape.IsLockWriter()) {
    return AcquireScript(m, keys_, liveness_, call.name, call.owner, call.lease,
                         will_wait, proposed);
  }
  if (call.shape.kind == ObjectKind::kLock) {
    return ReadAcquireScript(m, keys_, liveness_, call, will_wait, proposed);
  }
  return HolderAcquireScript(m, keys_, liveness_, call, will_wait,
                             absl::ZeroDuration(), proposed);
}

absl::StatusOr<AcquireReply> RedlockBackend::ParseRound(
    const std::optional<absl::StatusOr<Reply>>& reply, size_t master,
    const AcquireCall& call) const {
  const std::string& endpoint = masters_[master]->endpoint();
  // A lock's writer (acquire.lua, or write_acquire.lua's answer: C23) or
  // reader (read_acquire.lua).
  if (call.shape.kind == ObjectKind::kLock) {
    return Parse(reply,
                 [&](const redisReply* r) -> absl::StatusOr<AcquireReply> {
                   if (IsUpgradeRefusal(r))
                     return UpgradeRefusedError(call.name);
                   return ParseAcquire(r, endpoint);
                 });
  }
  absl::StatusOr<HolderAcquireReply> holder =
      Parse(reply, [&](const redisReply* r) {
        return ParseHolderAcquire(r, call, endpoint);
      });
  if (!holder.ok()) return holder.status();
  return AcquireReply{.acquired = holder->attempt.acquired,
                      .holder = std::move(holder->leader),
                      .holder_lease_left = holder->attempt.holder_lease_left};
}

ScriptCall RedlockBackend::GiveBackScript(const Master& m,
                                          const AcquireCall& call) const {
  if (call.shape.IsLockWriter()) {
    return WriterReleaseScript(m, call.name, call.owner, 1,
                               absl::ZeroDuration());
  }
  return HolderReleaseScript(m, keys_, call.shape, call.name, call.owner, 1);
}

ScriptCall RedlockBackend::WriterReleaseScript(const Master& m,
                                               absl::string_view name,
                                               absl::string_view owner,
                                               int64_t holds,
                                               absl::Duration keep_for) const {
  ScriptCall release = ReleaseScript(m, keys_, name, owner, holds, keep_for);
  AddReadersKey(keys_, name, release);
  return release;
}

ScriptCall RedlockBackend::RaiseScript(const Master& m, const AcquireCall& call,
                                       uint64_t token) const {
  if (call.shape.IsLockWriter()) {
    return RaiseTokenScript(m, keys_, call.name, call.owner, token);
  }
  return HolderRaiseTokenScript(m, keys_, call.shape.kind, call.name,
                                call.owner, token);
}

void RedlockBackend::Tally::Add(const absl::Status& s) {
  if (s.ok()) {
    ++done;
  } else if (IsGone(s)) {
    ++gone;
  } else if (error.ok()) {
    error = s;
  }
}

// Accepted by a quorum, the value is the one every later reading sees (a
// reading's quorum shares a master with it). Refused by so many that no
// quorum holds the leadership: deposed (GONE). A master that accepted while
// too few did keeps the value until the leadership ends or a later
// proclaim reaches it.
absl::Status RedlockBackend::Proclaim(const ProclaimCall& call) {
  Replies replies = OnEach([&](const Master& m, size_t) {
    return ElectionProclaimScript(m, keys_, call);
  });
  Tally tally;
  for (size_t i = 0; i < replies.size(); ++i) {
    tally.Add(Parse(replies[i], [&](const redisReply* r) {
      return ParseRenew(r, call.name, masters_[i]->endpoint());
    }));
  }
  if (tally.done >= quorum_) return absl::OkStatus();
  if (tally.gone > masters_.size() - quorum_) return NotOwnerError(call.name);
  return NoQuorum("proclaim", tally.done, tally.error);
}

// Every master announces on the channel the hub listens to: registered
// before the caller reads.
std::unique_ptr<ObjectWatch> RedlockBackend::WatchObject(
    ObjectKind kind, absl::string_view name) {
  if (kind != ObjectKind::kElection) return Backend::WatchObject(kind, name);
  return std::make_unique<HubWatch>(releases_, ObjectMessage(kind, name));
}

namespace {

// The value most of the copies that hold `owner` carry (a proclaim that
// reached a quorum is among them on every quorum).
std::string MostCommonValue(const std::vector<ObjectInfo>& copies,
                            absl::string_view owner) {
  absl::flat_hash_map<std::string, size_t> seen;
  std::string best;
  size_t most = 0;
  for (const ObjectInfo& copy : copies) {
    for (const HolderInfo& holder : copy.holders) {
      if (holder.owner != owner) continue;
      const size_t n = ++seen[copy.value];
      if (n > most || (n == most && copy.value < best)) {
        most = n;
        best = copy.value;
      }
    }
  }
  return best;
}

}  // namespace

ObjectInfo RedlockBackend::AgreedHolders(
    ObjectKind kind, absl::string_view name,
    const std::vector<ObjectInfo>& copies) const {
  absl::flat_hash_map<std::string, std::vector<HolderInfo>> by_owner;
  absl::flat_hash_map<std::string, std::vector<WaiterInfo>> waiters;
  for (const ObjectInfo& copy : copies) {
    for (const HolderInfo& holder : copy.holders) {
      by_owner[holder.owner].push_back(holder);
    }
    if (copy.waiter.has_value()) {
      waiters[copy.waiter->owner].push_back(*copy.waiter);
    }
  }
  ObjectInfo out{.kind = kind, .name = std::string(name), .limit = 1};
  for (auto& [owner, held] : by_owner) {
    if (std::optional<HolderInfo> agreed = QuorumHolder(std::move(held))) {
      out.holders.push_back(*std::move(agreed));
    }
  }
  // Oldest first, as the other backends list them.
  std::sort(out.holders.begin(), out.holders.end(),
            [](const HolderInfo& a, const HolderInfo& b) {
              return a.fencing_token < b.fencing_token;
            });
  for (auto& [owner, places] : waiters) {
    if (places.size() >= quorum_) out.waiter = places.front();
  }
  return out;
}

// The leader a quorum of masters holds, as a lock's holder (QuorumHolder);
// its value the one most of those masters carry.
absl::StatusOr<ObjectInfo> RedlockBackend::InspectObject(
    ObjectKind kind, absl::string_view name) {
  if (kind == ObjectKind::kLock) return InspectLockObject(name);
  if (kind != ObjectKind::kElection) return Backend::InspectObject(kind, name);
  Replies replies = OnEach([&](const Master& m, size_t) {
    return HoldersInspectScript(m, keys_, kind, name);
  });
  absl::StatusOr<std::vector<ObjectInfo>> copies = QuorumAnswers<ObjectInfo>(
      replies, "inspect", [&](const redisReply* r, absl::string_view endpoint) {
        return ParseHoldersInspect(r, kind, name, endpoint);
      });
  if (!copies.ok()) return copies.status();
  ObjectInfo out = AgreedHolders(kind, name, *copies);
  for (const HolderInfo& leader : out.holders) {
    out.value = MostCommonValue(*copies, leader.owner);
  }
  return out;
}

// A SCAN of every master, then each object read as a quorum sees it: the
// elections led, the locks held (by a writer or readers) or kept.
absl::StatusOr<std::vector<ObjectInfo>> RedlockBackend::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  if (kind == ObjectKind::kSemaphore) return Backend::ListObjects(kind, prefix);
  const std::string key_prefix = kind == ObjectKind::kLock
                                     ? keys_.lock_prefix()
                                     : ObjectNamesPrefix(keys_, kind);
  return InspectObjectsHeld(kind, ScanEveryMaster([&](Master& m) {
                              return ScanNames(m, key_prefix, prefix);
                            }));
}

// A lock's writer as a lock's force unlock does (its readers with it); a
// token that is not its writer's may be a reader's.
absl::Status RedlockBackend::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (kind == ObjectKind::kSemaphore) {
    return Backend::ForceUnlockObject(kind, name, fencing_token);
  }
  if (kind == ObjectKind::kLock) {
    absl::Status writer = Backend::ForceUnlockObject(kind, name, fencing_token);
    if (!fencing_token.has_value() || !IsTokenMismatch(writer)) return writer;
  }
  Replies replies = OnEach([&](const Master& m, size_t) {
    return HoldersForceUnlockScript(m, keys_, kind, name, fencing_token);
  });
  return ForceUnlockVerdict(replies, name, fencing_token);
}

}  // namespace dlock::redis
