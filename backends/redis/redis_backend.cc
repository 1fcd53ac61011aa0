// redis://[user[:password]@]host[:port][/db][?options]: one Redis master.
// Each operation is one Lua script on it (redis_lock_ops.h); waiters are
// woken by its release announcements (redis_master.h).
#include <memory>

#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_lock_ops.h"
#include "redis_master.h"
#include "redis_uri.h"

namespace dlock::redis {
namespace {

class RedisBackend : public Backend {
 public:
  RedisBackend(const ConnectionConfig& config, Keyspace keys,
               absl::Duration fallback_poll, const Clock& clock)
      : clock_(clock),
        keys_(std::move(keys)),
        fallback_poll_(fallback_poll),
        releases_(clock),
        master_(config, keys_.channel(), &releases_) {}

  ~RedisBackend() override { Shutdown(); }

  absl::Status Start() { return master_.Start(); }

  // A restart keeps holds only with AOF and appendfsync always, which the
  // client cannot vouch for: declared as not kept (docs/backends.md).
  BackendTraits Traits() const override {
    return BackendTraits{.fencing = FencingStrength::kServerMemory,
                         .can_list = true};
  }

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    const bool will_wait = call.deadline > clock_.Now();
    return AcquireWithWakeups(
        call, releases_, fallback_poll_, [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<Reply> reply = Run(AcquireScript(
              master_, keys_, call.name, call.owner, call.lease, will_wait));
          if (!reply.ok()) return reply.status();
          return ParseAcquire(reply->get(), master_.endpoint());
        });
  }

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    absl::StatusOr<Reply> reply =
        Run(ReleaseScript(master_, keys_, call.name, call.owner, call.holds));
    if (!reply.ok()) return reply.status();
    return ParseRelease(reply->get(), call.name, master_.endpoint());
  }

  absl::Status Renew(const RenewCall& call) override {
    return RenewMany({&call, 1})[0];
  }

  // One pipeline for everything the watchdog has due (C7).
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    std::vector<ScriptCall> scripts;
    scripts.reserve(calls.size());
    for (const RenewCall& call : calls) {
      scripts.push_back(
          RenewScript(master_, keys_, call.name, call.owner, call.lease));
    }
    std::vector<absl::StatusOr<Reply>> replies =
        master_.Submit(std::move(scripts)).Await();
    std::vector<absl::Status> results;
    results.reserve(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      results.push_back(
          replies[i].ok()
              ? ParseRenew(replies[i]->get(), calls[i].name, master_.endpoint())
              : replies[i].status());
    }
    return results;
  }

  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    absl::StatusOr<Reply> reply = Run(InspectScript(master_, keys_, name));
    if (!reply.ok()) return reply.status();
    return ParseInspect(reply->get(), name, master_.endpoint());
  }

  absl::StatusOr<std::vector<LockInfo>> List(
      absl::string_view prefix) override {
    absl::StatusOr<std::vector<std::string>> names =
        ScanLockNames(master_, keys_, prefix);
    if (!names.ok()) return names.status();
    std::vector<LockInfo> out;
    for (const std::string& name : *names) {
      absl::StatusOr<LockInfo> info = Inspect(name);
      if (!info.ok()) return info.status();
      if (info->locked) out.push_back(*std::move(info));
    }
    return out;
  }

  absl::Status ForceUnlock(absl::string_view name) override {
    return Run(ForceUnlockScript(master_, keys_, name)).status();
  }

  void Shutdown() override { master_.Shutdown(); }

 private:
  absl::StatusOr<Reply> Run(ScriptCall call) {
    return master_.Run(*call.script, std::move(call.keys),
                       std::move(call.args));
  }

  const Clock& clock_;
  const Keyspace keys_;
  const absl::Duration fallback_poll_;
  WakeupHub releases_;
  Master master_;
};

absl::StatusOr<std::unique_ptr<Backend>> MakeRedisBackend(
    const BackendConfig& config) {
  absl::StatusOr<std::vector<ConnectionConfig>> hosts =
      ParseHosts(config, "redis://[user[:password]@]host[:port][/db]", 1, 1);
  if (!hosts.ok()) return hosts.status();
  if (absl::Status s = config.params.RejectUnknown("redis", kHostOptions);
      !s.ok()) {
    return s;
  }
  auto backend = std::make_unique<RedisBackend>(
      (*hosts)[0], Keyspace(config.lock_namespace, (*hosts)[0].db),
      config.options.fallback_poll, config.clock);
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

const bool kRegistered = RegisterBackend("redis", &MakeRedisBackend);

}  // namespace
}  // namespace dlock::redis
