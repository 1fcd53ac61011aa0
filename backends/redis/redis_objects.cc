#include "redis_objects.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dlock/backend/rules.h"
#include "dlock/errors.h"
#include "redis_holder_ops.h"

namespace dlock::redis {

Routed HolderObjects::RunOne(absl::string_view name,
                             std::function<ScriptCall(const Master&)> build) {
  std::vector<LockCall> calls;
  calls.push_back(LockCall{name, std::move(build)});
  return c_.router.Run(std::move(calls));
}

absl::StatusOr<Grant> HolderObjects::Acquire(const AcquireCall& call) {
  const bool will_wait = call.deadline > c_.clock.Now();
  // Waiters sleep on the object's message (a reader on the lock's name).
  const std::string message = ObjectMessage(call.shape.kind, call.name);
  std::vector<int64_t> slots;
  absl::StatusOr<Grant> grant = AcquireWithWakeups(
      call, message, c_.releases, c_.fallback_poll,
      [&]() -> absl::StatusOr<Attempt> {
        absl::StatusOr<Attempt> attempt = TryOnce(call, will_wait, slots);
        // A cluster's slot may be subscribed only now: look again once.
        if (will_wait && attempt.ok() && !attempt->acquired.has_value() &&
            c_.router.Watch(call.name)) {
          attempt = TryOnce(call, will_wait, slots);
        }
        return attempt;
      });
  if (!grant.ok()) {
    // A waiter that gives up takes its place with it (C9); refused on
    // the spot, it kept none; a reader keeps none.
    if (will_wait && call.shape.kind != ObjectKind::kLock) {
      (void)RunOne(call.name, [&](const Master& m) {
        return HolderAbandonScript(m, c_.keys, call.shape.kind, call.name,
                                   call.owner);
      });
    }
    return grant.status();
  }
  grant->slots = std::move(slots);
  RecordGrant(call, *grant, "", LivenessTtl(), c_.drift, c_.held);
  return grant;
}

absl::Duration HolderObjects::LivenessTtl() const {
  return absl::Milliseconds(c_.liveness.ttl_ms);
}

absl::StatusOr<Attempt> HolderObjects::TryOnce(const AcquireCall& call,
                                               bool will_wait,
                                               std::vector<int64_t>& slots) {
  // The head waiter keeps its place across its retries, which come at
  // least every fallback poll (docs/design/primitives.md, semaphore).
  const absl::Duration place = WaitingPlaceTtl(c_.fallback_poll);
  const bool read = call.shape.kind == ObjectKind::kLock;
  Routed routed = RunOne(call.name, [&](const Master& m) {
    return read ? ReadAcquireScript(m, c_.keys, c_.liveness, call, will_wait)
                : HolderAcquireScript(m, c_.keys, c_.liveness, call, will_wait,
                                      place);
  });
  const Routed::Answer& answer = routed.answers[0];
  if (!answer.reply.ok()) return answer.reply.status();
  absl::StatusOr<HolderAcquireReply> parsed =
      read ? ParseReadAcquire(answer.reply->get(), answer.endpoint())
           : ParseHolderAcquire(answer.reply->get(), call, answer.endpoint());
  if (!parsed.ok()) return parsed.status();
  if (!parsed->attempt.acquired.has_value()) return parsed->attempt;
  if (absl::Status s =
          routed.Replicated({true}, c_.replication, "grant", call.name)[0];
      !s.ok()) {
    // Not on enough replicas: a failover could count it free. Given back
    // (a re-entry's one hold only); the caller may try again.
    (void)RunOne(call.name, [&](const Master& m) {
      return HolderReleaseScript(m, c_.keys, call.shape, call.name, call.owner,
                                 1);
    });
    return s;
  }
  slots = std::move(parsed->slots);
  return parsed->attempt;
}

// Not waited for with wait_replicas, as a lock's release (C21).
absl::StatusOr<int64_t> HolderObjects::Release(const ReleaseCall& call) {
  Routed routed = RunOne(call.name, [&](const Master& m) {
    return HolderReleaseScript(m, c_.keys, call.shape, call.name, call.owner,
                               call.CountToSubtract());
  });
  const Routed::Answer& answer = routed.answers[0];
  if (!answer.reply.ok()) return answer.reply.status();
  return ParseRelease(answer.reply->get(), call.name, answer.endpoint());
}

absl::Status HolderObjects::Proclaim(const ProclaimCall& call) {
  Routed routed = RunOne(call.name, [&](const Master& m) {
    return ElectionProclaimScript(m, c_.keys, call);
  });
  const Routed::Answer& answer = routed.answers[0];
  if (!answer.reply.ok()) return answer.reply.status();
  return ParseRenew(answer.reply->get(), call.name, answer.endpoint());
}

std::unique_ptr<ObjectWatch> HolderObjects::Watch(ObjectKind kind,
                                                  absl::string_view name) {
  // Registered before the caller reads; a cluster's slot subscribed before
  // it reads too.
  auto watch =
      std::make_unique<HubWatch>(c_.releases, ObjectMessage(kind, name));
  c_.router.Watch(name);
  return watch;
}

absl::StatusOr<ObjectInfo> HolderObjects::Inspect(ObjectKind kind,
                                                  absl::string_view name) {
  Routed routed = RunOne(name, [&](const Master& m) {
    return HoldersInspectScript(m, c_.keys, kind, name);
  });
  const Routed::Answer& answer = routed.answers[0];
  if (!answer.reply.ok()) return answer.reply.status();
  return ParseHoldersInspect(answer.reply->get(), kind, name,
                             answer.endpoint());
}

// A SCAN per master, then each object read in one step (C11).
absl::StatusOr<std::vector<ObjectInfo>> HolderObjects::List(
    ObjectKind kind, absl::string_view prefix) {
  absl::StatusOr<std::vector<std::string>> names =
      ScanEveryMaster(c_.router, ObjectNamesPrefix(c_.keys, kind), prefix);
  if (!names.ok()) return names.status();
  std::vector<ObjectInfo> out;
  for (const std::string& name : *names) {
    absl::StatusOr<ObjectInfo> info = Inspect(kind, name);
    if (!info.ok()) return info.status();
    if (!info->holders.empty() || info->waiter.has_value()) {
      out.push_back(*std::move(info));
    }
  }
  return out;
}

absl::Status HolderObjects::ForceUnlock(ObjectKind kind, absl::string_view name,
                                        std::optional<uint64_t> fencing_token) {
  Routed routed = RunOne(name, [&](const Master& m) {
    return HoldersForceUnlockScript(m, c_.keys, kind, name, fencing_token);
  });
  const Routed::Answer& answer = routed.answers[0];
  if (!answer.reply.ok()) return answer.reply.status();
  absl::StatusOr<bool> removed =
      ParseForceUnlockIfToken(answer.reply->get(), answer.endpoint());
  if (!removed.ok()) return removed.status();
  if (*removed || !fencing_token.has_value()) return absl::OkStatus();
  return TokenMismatchError(name, *fencing_token);
}

absl::StatusOr<Attempt> HolderObjects::WriterMeetsReaders(
    const AcquireCall& call, bool will_wait, bool& intent_left) {
  // The intent lives across the writer's retries, which come at least
  // every fallback poll (docs/design/primitives.md).
  const absl::Duration intent = WaitingPlaceTtl(c_.fallback_poll);
  Routed routed = RunOne(call.name, [&](const Master& m) {
    return WriteAcquireScript(m, c_.keys, c_.liveness, call, will_wait, intent);
  });
  const Routed::Answer& answer = routed.answers[0];
  if (!answer.reply.ok()) return answer.reply.status();
  if (IsUpgradeRefusal(answer.reply->get())) {
    return UpgradeRefusedError(call.name);
  }
  absl::StatusOr<AcquireReply> parsed =
      ParseAcquire(answer.reply->get(), answer.endpoint());
  if (!parsed.ok()) return parsed.status();
  // A grant took the readers' hash, and the intent in it, along.
  intent_left = !parsed->acquired.has_value() && will_wait;
  if (!parsed->acquired.has_value()) return parsed->ToAttempt();
  if (absl::Status s =
          routed.Replicated({true}, c_.replication, "grant", call.name)[0];
      !s.ok()) {
    (void)RunOne(call.name, [&](const Master& m) {
      ScriptCall release = ReleaseScript(m, c_.keys, call.name, call.owner, 1);
      AddReadersKey(c_.keys, call.name, release);
      return release;
    });
    return s;
  }
  return parsed->ToAttempt();
}

void HolderObjects::DropIntent(absl::string_view name,
                               absl::string_view owner) {
  (void)RunOne(name, [&](const Master& m) {
    return HolderAbandonScript(m, c_.keys, ObjectKind::kLock, name, owner);
  });
}

absl::StatusOr<ObjectInfo> HolderObjects::InspectLock(absl::string_view name) {
  Routed routed = RunOne(name, [&](const Master& m) {
    ScriptCall inspect = InspectScript(m, c_.keys, name);
    AddReadersKey(c_.keys, name, inspect);
    return inspect;
  });
  const Routed::Answer& answer = routed.answers[0];
  if (!answer.reply.ok()) return answer.reply.status();
  absl::StatusOr<LockWithReaders> lock =
      ParseInspectWithReaders(answer.reply->get(), name, answer.endpoint());
  if (!lock.ok()) return lock.status();
  ObjectInfo info = LockObject(lock->writer);
  for (HolderInfo& reader : lock->readers.holders) {
    info.holders.push_back(std::move(reader));
  }
  info.waiter = std::move(lock->readers.waiter);
  return info;
}

}  // namespace dlock::redis
