// Read-write locks on Redlock (C23; docs/redis.md): the one-master scripts
// on every master, in a lock's rounds (TryRound). A reader holds when a
// quorum of masters granted its read (read_acquire.lua), a writer when a
// quorum granted the write (acquire.lua, and write_acquire.lua where a
// master's lock is read-held or handed over): any two quorums share a
// master, which never grants a write beside another owner's read, so a
// reader and a writer never both hold. Tokens, readers' and writers'
// alike, come from the masters' floors, so that a writer's exceeds every
// earlier hold's. What follows is what the lock's writer and the elections
// do not share: the writer's second step, its intent, and the lock read
// with its readers.
#include <optional>
#include <string>
#include <vector>

#include "dlock/backend/rules.h"
#include "redis_holder_ops.h"
#include "redlock_backend.h"

namespace dlock::redis {

void RedlockBackend::MeetReaders(const AcquireCall& call, bool will_wait,
                                 uint64_t proposed, Replies& replies,
                                 std::vector<MonoTime>& replied,
                                 Rounds* rounds) {
  // The intent lives across the writer's rounds, which come at least every
  // fallback poll (docs/design/primitives.md), as on one master.
  const absl::Duration intent = WaitingPlaceTtl(fallback_poll_);
  std::vector<MonoTime> again;
  Replies second = OnEach(
      [&](const Master& m, size_t i) -> std::optional<ScriptCall> {
        absl::StatusOr<AcquireReply> first = Parse(
            replies[i],
            [&](const redisReply* r) { return ParseAcquire(r, m.endpoint()); });
        // Refused by a writer (named), or not answered: that answer stands.
        if (!first.ok() || first->acquired.has_value() ||
            !first->holder.empty()) {
          return std::nullopt;
        }
        return WriteAcquireScript(m, keys_, liveness_, call, will_wait, intent,
                                  proposed);
      },
      &again);
  for (size_t i = 0; i < second.size(); ++i) {
    if (!second[i].has_value()) continue;
    // A waiting writer not granted there may have left its intent (a grant
    // takes the readers' hash, and the intent in it, along).
    absl::StatusOr<AcquireReply> answer =
        Parse(second[i], [&](const redisReply* r) {
          return ParseAcquire(r, masters_[i]->endpoint());
        });
    if (will_wait && !(answer.ok() && answer->acquired.has_value())) {
      rounds->intent_left = true;
    }
    replies[i] = std::move(second[i]);
    replied[i] = again[i];
  }
}

void RedlockBackend::DropIntent(const AcquireCall& call) {
  (void)OnEach([&](const Master& m, size_t) {
    return HolderAbandonScript(m, keys_, ObjectKind::kLock, call.name,
                               call.owner);
  });
}

// Every master's lock and readers, read in one step there (C11); the
// writer and each reader as a quorum holds them, the waiting writer whose
// intent a quorum carries.
absl::StatusOr<ObjectInfo> RedlockBackend::InspectLockObject(
    absl::string_view name) {
  Replies replies = OnEach([&](const Master& m, size_t) {
    ScriptCall inspect = InspectScript(m, keys_, name);
    AddReadersKey(keys_, name, inspect);
    return inspect;
  });
  absl::StatusOr<std::vector<LockWithReaders>> copies =
      QuorumAnswers<LockWithReaders>(
          replies, "inspect",
          [&](const redisReply* r, absl::string_view endpoint) {
            return ParseInspectWithReaders(r, name, endpoint);
          });
  if (!copies.ok()) return copies.status();
  std::vector<LockInfo> writers;
  std::vector<ObjectInfo> readers;
  for (LockWithReaders& copy : *copies) {
    writers.push_back(std::move(copy.writer));
    readers.push_back(std::move(copy.readers));
  }
  ObjectInfo info = LockObject(AgreedLock(name, std::move(writers)));
  ObjectInfo agreed = AgreedHolders(ObjectKind::kLock, name, readers);
  for (HolderInfo& reader : agreed.holders) {
    info.holders.push_back(std::move(reader));
  }
  info.waiter = std::move(agreed.waiter);
  return info;
}

}  // namespace dlock::redis
