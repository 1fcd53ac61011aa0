// The lock operations of redis://, redis-sentinel:// and redis-cluster://
// as scripts on the master of each lock, which the Router finds (the URIs
// are read in redis_schemes.cc).
#include "redis_backend.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "redis_holder_ops.h"
#include "redis_holds.h"
#include "redis_master.h"
#include "redis_multi.h"
#include "redis_objects.h"

namespace dlock::redis {
namespace {

// Every Redis topology but Redlock: the lock operations as scripts on the
// master that serves each lock, which its Router finds (one master, or a
// cluster's slot map).
class RedisBackend : public Backend {
 public:
  RedisBackend(Keyspace keys, Liveness liveness, Replication replication,
               absl::Duration fallback_poll, const Clock& clock,
               const MakeRouter& make_router)
      : clock_(clock),
        keys_(std::move(keys)),
        liveness_(std::move(liveness)),
        replication_(replication),
        fallback_poll_(fallback_poll),
        releases_(clock),
        router_(make_router(&releases_)),
        objects_(ObjectsContext{.clock = clock_,
                                .keys = keys_,
                                .liveness = liveness_,
                                .replication = replication_,
                                .fallback_poll = fallback_poll_,
                                .drift = kDrift,
                                .releases = releases_,
                                .router = *router_,
                                .held = held_}) {}

  ~RedisBackend() override { Shutdown(); }

  absl::Status Start() { return router_->Start(); }

  // A restart keeps holds only with AOF and appendfsync always, which the
  // client cannot vouch for: declared as not kept (docs/backends.md).
  BackendTraits Traits() const override {
    return BackendTraits{.liveness_record = true,
                         .fencing = FencingStrength::kServerMemory,
                         .can_list = true,
                         .keeps_after_release = true,
                         .semaphores = true,
                         .read_write_locks = true,
                         .elections = true,
                         .semaphore_order = WaiterOrder::kHeadReserved,
                         // One master runs a script over keys of any slot; a
                         // cluster's names are taken in order by the core.
                         .multi_lock = keys_.sharded()
                                           ? MultiLockMode::kOrdered
                                           : MultiLockMode::kAtomic};
  }

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    if (!call.shape.IsLockWriter()) return objects_.Acquire(call);
    const bool will_wait = call.deadline > clock_.Now();
    std::string fresh_prefix;  // of the attempt that took the lock free
    bool intent_left = false;  // this writer's, among the readers (C23)
    absl::StatusOr<Grant> grant = AcquireWithWakeups(
        call, releases_, fallback_poll_,
        [&]() -> absl::StatusOr<::dlock::Attempt> {
          absl::StatusOr<::dlock::Attempt> attempt =
              TryOnce(call, will_wait, fresh_prefix, intent_left);
          // The first wait on this lock may subscribe only now (a
          // cluster's slot): a release just before it was not heard.
          if (will_wait && attempt.ok() && !attempt->acquired.has_value() &&
              router_->Watch(call.name)) {
            attempt = TryOnce(call, will_wait, fresh_prefix, intent_left);
          }
          return attempt;
        });
    // Readers wait behind an intent until it ends: it goes with the wait.
    if (intent_left) objects_.DropIntent(call.name, call.owner);
    if (grant.ok()) NoteGrant(call, *grant, std::move(fresh_prefix));
    return grant;
  }

  // Not waited for with wait_replicas: a release a failover loses frees
  // the lock at its lease end, as an unconfirmed release does (C21).
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    if (!call.shape.IsLockWriter()) return objects_.Release(call);
    const auto* hold = static_cast<const RedisHold*>(call.record);
    Routed routed = RunOne(call.name, [&](const Master& m) {
      ScriptCall release = ReleaseScript(
          m, keys_, call.name, call.owner, call.CountToSubtract(),
          call.keep_for, hold != nullptr ? hold->fresh_prefix() : "");
      AddReadersKey(keys_, call.name, release);  // a downgrade (C23)
      return release;
    });
    const Routed::Answer& answer = routed.answers[0];
    if (!answer.reply.ok()) return answer.reply.status();
    return ParseRelease(answer.reply->get(), call.name, answer.endpoint());
  }

  absl::Status Renew(const RenewCall& call) override {
    return RenewMany({&call, 1})[0];
  }

  // One pipeline per master for everything the watchdog has due (C7).
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    std::vector<LockCall> scripts;
    scripts.reserve(calls.size());
    for (const RenewCall& call : calls) {
      scripts.push_back(LockCall{
          call.name, [&](const Master& m) {
            if (!call.shape.IsLockWriter()) {
              return HolderRenewScript(m, keys_, liveness_, call.shape,
                                       call.name, call.owner, call.lease);
            }
            return RenewScript(m, keys_, liveness_, call.name, call.owner,
                               call.lease);
          }});
    }
    const MonoTime sent = clock_.Now();
    Routed routed = router_->Run(std::move(scripts));
    std::vector<absl::Status> results;
    std::vector<bool> renewed(calls.size(), false);
    results.reserve(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      const Routed::Answer& answer = routed.answers[i];
      results.push_back(answer.reply.ok()
                            ? ParseRenew(answer.reply->get(), calls[i].name,
                                         answer.endpoint())
                            : answer.reply.status());
      renewed[i] = results.back().ok();
    }
    // A renewal a failover loses would leave the new master's lease shorter
    // than the holder believes: it counts only once replicated on its own
    // master.
    const std::vector<absl::Status> replicated = routed.Replicated(
        renewed, replication_, "renewal",
        calls.size() == 1 ? std::string(calls[0].name)
                          : absl::StrCat(calls.size(), " held locks"));
    for (size_t i = 0; i < calls.size(); ++i) {
      if (results[i].ok()) results[i] = replicated[i];
    }
    // A renewal refreshed the hold's liveness deadline too.
    for (size_t i = 0; i < calls.size(); ++i) {
      if (results[i].ok() && calls[i].record != nullptr && KeepsLiveness()) {
        static_cast<RedisHold*>(calls[i].record)
            ->Confirmed(sent, LivenessTtl(), kDrift);
      }
    }
    return results;
  }

  // A hold is believed only while its own deadline was confirmed: a grant
  // or heartbeat of another lock says nothing of this one's.
  MonoTime HeldUntil(absl::string_view, absl::string_view,
                     const HoldRecord* record) override {
    if (record == nullptr || !KeepsLiveness()) {
      return MonoTime::InfiniteFuture();
    }
    return static_cast<const RedisHold*>(record)->live_until();
  }

  // Every held lock's deadline, in one pipeline per master. Replicated
  // like a grant: a failover that lost the refresh would let a waiter take
  // over holds this client still believes. Each hold is believed only
  // until its own deadline was confirmed (HeldUntil), so a master that did
  // not answer bounds its own holds only: the call fails only when no
  // hold's deadline could be confirmed (one master: when it failed).
  absl::Status RenewLiveness(absl::Duration) override {
    const MonoTime sent = clock_.Now();
    std::vector<std::shared_ptr<RedisHold>> holds;
    std::vector<LockCall> scripts;
    for (std::shared_ptr<RedisHold>& hold : held_.Current()) {
      // One refreshed within the last third of the TTL (a renewal, a
      // grant) waits for the next heartbeat.
      if (hold->live_until() > sent + LivenessTtl() * 2 / 3) continue;
      holds.push_back(std::move(hold));
    }
    if (holds.empty()) return absl::OkStatus();
    for (const std::shared_ptr<RedisHold>& hold : holds) {
      scripts.push_back(LockCall{
          hold->name(), [&](const Master& m) {
            if (!hold->shape().IsLockWriter()) {
              return HolderRefreshLivenessScript(m, keys_, liveness_,
                                                 hold->shape(), hold->name(),
                                                 hold->owner(), hold->token());
            }
            return RefreshLivenessScript(m, keys_, liveness_, hold->name(),
                                         hold->owner(), hold->token());
          }});
    }
    Routed routed = router_->Run(std::move(scripts));
    absl::Status failed;
    std::vector<bool> still_held(holds.size(), false);
    for (size_t i = 0; i < holds.size(); ++i) {
      const Routed::Answer& answer = routed.answers[i];
      absl::StatusOr<bool> held =
          answer.reply.ok()
              ? ParseRefreshLiveness(answer.reply->get(), answer.endpoint())
              : absl::StatusOr<bool>(answer.reply.status());
      if (!held.ok()) {
        failed.Update(held.status());
        continue;
      }
      still_held[i] = *held;  // a hold gone is the core's to find out
    }
    const std::vector<absl::Status> replicated = routed.Replicated(
        still_held, replication_, "liveness refresh", "held locks");
    bool confirmed = false;
    for (size_t i = 0; i < holds.size(); ++i) {
      if (!still_held[i]) continue;
      if (!replicated[i].ok()) {
        failed.Update(replicated[i]);
        continue;
      }
      holds[i]->Confirmed(sent, LivenessTtl(), kDrift);
      confirmed = true;
    }
    return confirmed ? absl::OkStatus() : failed;
  }

  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    Routed routed = RunOne(
        name, [&](const Master& m) { return InspectScript(m, keys_, name); });
    const Routed::Answer& answer = routed.answers[0];
    if (!answer.reply.ok()) return answer.reply.status();
    return ParseInspect(answer.reply->get(), name, answer.endpoint());
  }

  // A SCAN per master (a cluster's locks are spread over them).
  absl::StatusOr<std::vector<LockInfo>> List(
      absl::string_view prefix) override {
    return InspectHeld(ScanEveryMaster(*router_, keys_.lock_prefix(), prefix));
  }

  absl::Status ForceUnlock(absl::string_view name) override {
    return RunOne(name,
                  [&](const Master& m) {
                    ScriptCall force = ForceUnlockScript(m, keys_, name);
                    AddReadersKey(keys_, name, force);
                    return force;
                  })
        .answers[0]
        .reply.status();
  }

  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override {
    Routed routed = RunOne(name, [&](const Master& m) {
      ScriptCall force =
          ForceUnlockIfTokenScript(m, keys_, name, fencing_token);
      AddReadersKey(keys_, name, force);
      return force;
    });
    const Routed::Answer& answer = routed.answers[0];
    if (!answer.reply.ok()) return answer.reply.status();
    absl::StatusOr<bool> removed =
        ParseForceUnlockIfToken(answer.reply->get(), answer.endpoint());
    if (!removed.ok()) return removed.status();
    return *removed ? absl::OkStatus()
                    : TokenMismatchError(name, fencing_token);
  }

  // Every master's, summed: each keeps its share of the locks.
  absl::StatusOr<ServerMemory> ServerMemoryUse() override {
    const std::vector<Master*> masters = router_->Masters();
    int64_t total = 0;
    for (Master* master : masters) {
      absl::StatusOr<int64_t> bytes = UsedMemory(*master);
      if (!bytes.ok()) return bytes.status();
      total += *bytes;
    }
    return ServerMemory{total, masters.size() == 1
                                   ? "INFO memory used_memory"
                                   : "INFO memory used_memory, every master"};
  }

  absl::StatusOr<std::vector<Grant>> AcquireAll(
      absl::Span<const AcquireCall> parts, MonoTime deadline,
      const CancelToken& cancel) override {
    if (keys_.sharded()) return Backend::AcquireAll(parts, deadline, cancel);
    return AcquireAllOnOneMaster(objects_.context(), parts, deadline, cancel);
  }

  // Semaphores and elections (redis_objects.cc); a lock's as before.
  absl::Status Proclaim(const ProclaimCall& call) override {
    return objects_.Proclaim(call);
  }

  std::unique_ptr<ObjectWatch> WatchObject(ObjectKind kind,
                                           absl::string_view name) override {
    if (kind == ObjectKind::kLock) return Backend::WatchObject(kind, name);
    return objects_.Watch(kind, name);
  }

  absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                           absl::string_view name) override {
    if (kind != ObjectKind::kLock) return objects_.Inspect(kind, name);
    return objects_.InspectLock(name);
  }

  absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix) override {
    if (kind != ObjectKind::kLock) return objects_.List(kind, prefix);
    // Every lock with readers has its key (their marker).
    return InspectObjectsHeld(
        kind, ScanEveryMaster(*router_, keys_.lock_prefix(), prefix));
  }

  absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token) override {
    if (kind != ObjectKind::kLock) {
      return objects_.ForceUnlock(kind, name, fencing_token);
    }
    absl::Status writer = Backend::ForceUnlockObject(kind, name, fencing_token);
    // Not the writer's token: perhaps a reader's.
    if (fencing_token.has_value() && IsTokenMismatch(writer)) {
      return objects_.ForceUnlock(kind, name, fencing_token);
    }
    return writer;
  }

  void Shutdown() override { router_->Shutdown(); }

 private:
  // The core's drift margin (docs/reliability.md): 1% + 2 ms.
  static constexpr Drift kDrift{};

  bool KeepsLiveness() const { return liveness_.ttl_ms > 0; }
  absl::Duration LivenessTtl() const {
    return absl::Milliseconds(liveness_.ttl_ms);
  }

  Routed RunOne(absl::string_view name,
                std::function<ScriptCall(const Master&)> build) {
    std::vector<LockCall> calls;
    calls.push_back(LockCall{name, std::move(build)});
    return router_->Run(std::move(calls));
  }

  // One attempt: the acquire script, and with wait_replicas the WAIT. A
  // free lock taken leaves what it wrote before the owner in `fresh_prefix`.
  absl::StatusOr<::dlock::Attempt> TryOnce(const AcquireCall& call,
                                           bool will_wait,
                                           std::string& fresh_prefix,
                                           bool& intent_left) {
    Routed routed = RunOne(call.name, [&](const Master& m) {
      return AcquireScript(m, keys_, liveness_, call.name, call.owner,
                           call.lease, will_wait);
    });
    const Routed::Answer& answer = routed.answers[0];
    if (!answer.reply.ok()) return answer.reply.status();
    absl::StatusOr<AcquireReply> parsed =
        ParseAcquire(answer.reply->get(), answer.endpoint());
    if (!parsed.ok()) return parsed.status();
    ::dlock::Attempt attempt = parsed->ToAttempt();
    if (!attempt.acquired.has_value()) {
      // Held by nobody: kept, or by readers, whom the writer's side of a
      // read-write lock looks at (C23); the usual refusal otherwise.
      if (!parsed->holder.empty()) return attempt;
      return objects_.WriterMeetsReaders(call, will_wait, intent_left);
    }
    if (absl::Status s =
            routed.Replicated({true}, replication_, "grant", call.name)[0];
        !s.ok()) {
      // Not on enough replicas: a failover could hand it to another
      // owner. Given back; the caller may try again.
      (void)RunOne(call.name, [&](const Master& m) {
        return ReleaseScript(m, keys_, call.name, call.owner, 1,
                             absl::ZeroDuration(), parsed->fresh_prefix);
      });
      return s;
    }
    fresh_prefix = std::move(parsed->fresh_prefix);
    return attempt;
  }

  void NoteGrant(const AcquireCall& call, Grant& grant,
                 std::string fresh_prefix) {
    RecordGrant(call, grant, std::move(fresh_prefix),
                KeepsLiveness() ? LivenessTtl() : absl::ZeroDuration(), kDrift,
                held_);
  }

  const Clock& clock_;
  const Keyspace keys_;
  const Liveness liveness_;
  HeldLocks<RedisHold> held_;  // with liveness: for the heartbeat
  const Replication replication_;
  const absl::Duration fallback_poll_;
  WakeupHub releases_;
  const std::unique_ptr<Router> router_;
  HolderObjects objects_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> StartRedisBackend(
    Keyspace keys, Liveness liveness, Replication replication,
    absl::Duration fallback_poll, const Clock& clock,
    const MakeRouter& make_router) {
  auto backend = std::make_unique<RedisBackend>(
      std::move(keys), std::move(liveness), replication, fallback_poll, clock,
      make_router);
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

}  // namespace dlock::redis
