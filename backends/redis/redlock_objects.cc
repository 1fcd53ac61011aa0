// Elections on Redlock (issue 24; docs/redis.md): an election is the
// one-master holders hash (sem_acquire.lua with N=1 and a value) on every
// master, taken in rounds as a lock is (TryRound): a quorum must grant
// within the lease less drift, the term is agreed from the masters' floors
// as a lock's token, and a split vote gives its round back. What follows
// are the calls that differ from a lock's by their scripts, and the
// election's own: its leader as a quorum sees it, Proclaim, Watch.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
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
  return HolderAcquireScript(m, keys_, liveness_, call, will_wait,
                             absl::ZeroDuration(), proposed);
}

absl::StatusOr<AcquireReply> RedlockBackend::ParseRound(
    const std::optional<absl::StatusOr<Reply>>& reply, size_t master,
    const AcquireCall& call) const {
  const std::string& endpoint = masters_[master]->endpoint();
  if (call.shape.IsLockWriter()) {
    return Parse(
        reply, [&](const redisReply* r) { return ParseAcquire(r, endpoint); });
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
    return ReleaseScript(m, keys_, call.name, call.owner, 1);
  }
  return HolderReleaseScript(m, keys_, call.shape, call.name, call.owner, 1);
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

// The leader a quorum of masters holds, as a lock's holder (QuorumHolder); its
// value the one most of those masters carry (a proclaim that reached a
// quorum is among them on every quorum).
absl::StatusOr<ObjectInfo> RedlockBackend::InspectObject(
    ObjectKind kind, absl::string_view name) {
  if (kind != ObjectKind::kElection) return Backend::InspectObject(kind, name);
  Replies replies = OnEach([&](const Master& m, size_t) {
    return HoldersInspectScript(m, keys_, kind, name);
  });
  size_t answered = 0;
  absl::Status error;
  absl::flat_hash_map<std::string, std::vector<HolderInfo>> by_owner;
  absl::flat_hash_map<std::string, std::vector<std::string>> values;
  for (size_t i = 0; i < replies.size(); ++i) {
    absl::StatusOr<ObjectInfo> info =
        Parse(replies[i], [&](const redisReply* r) {
          return ParseHoldersInspect(r, kind, name, masters_[i]->endpoint());
        });
    if (!info.ok()) {
      if (error.ok()) error = info.status();
      continue;
    }
    ++answered;
    for (HolderInfo& holder : info->holders) {
      values[holder.owner].push_back(info->value);
      by_owner[holder.owner].push_back(std::move(holder));
    }
  }
  if (answered < quorum_) return NoQuorum("inspect", answered, error);
  ObjectInfo out{.kind = kind, .name = std::string(name), .limit = 1};
  for (auto& [owner, copies] : by_owner) {
    std::optional<HolderInfo> leader = QuorumHolder(std::move(copies));
    if (!leader.has_value()) continue;
    std::vector<std::string>& seen = values[owner];
    std::sort(seen.begin(), seen.end());
    size_t best = 0;
    for (size_t i = 0; i < seen.size();) {
      const size_t end =
          std::upper_bound(seen.begin() + i, seen.end(), seen[i]) -
          seen.begin();
      if (end - i > best) {
        best = end - i;
        out.value = seen[i];
      }
      i = end;
    }
    out.holders.push_back(*std::move(leader));
  }
  return out;
}

// A SCAN of every master, then each election read as a quorum sees it.
absl::StatusOr<std::vector<ObjectInfo>> RedlockBackend::ListObjects(
    ObjectKind kind, absl::string_view prefix) {
  if (kind != ObjectKind::kElection) return Backend::ListObjects(kind, prefix);
  const std::string key_prefix = ObjectNamesPrefix(keys_, kind);
  return InspectObjectsHeld(kind, ScanEveryMaster([&](Master& m) {
                              return ScanNames(m, key_prefix, prefix);
                            }));
}

absl::Status RedlockBackend::ForceUnlockObject(
    ObjectKind kind, absl::string_view name,
    std::optional<uint64_t> fencing_token) {
  if (kind != ObjectKind::kElection) {
    return Backend::ForceUnlockObject(kind, name, fencing_token);
  }
  Replies replies = OnEach([&](const Master& m, size_t) {
    return HoldersForceUnlockScript(m, keys_, kind, name, fencing_token);
  });
  return ForceUnlockVerdict(replies, name, fencing_token);
}

}  // namespace dlock::redis
