// One Redis master, named by its address or by Sentinels (rediss:// and
// rediss-sentinel:// over TLS, redis_uri.h):
//   redis[s]://[user[:password]@]host[:port][/db][?options]
//   redis[s]-sentinel://[user[:password]@]s1:port,s2:port,.../master[/db][?...]
// Each operation is one Lua script on it (redis_lock_ops.h); waiters are
// woken by its release announcements (redis_master.h).
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_holds.h"
#include "redis_lock_ops.h"
#include "redis_master.h"
#include "redis_sentinel.h"
#include "redis_uri.h"

namespace dlock::redis {
namespace {

// wait_replicas=: a grant or renewal counts once that many replicas have it
// (WAIT), so that a failover to one of them keeps it (docs/redis.md).
struct Replication {
  int64_t replicas = 0;
  absl::Duration timeout = absl::Milliseconds(100);
};

class RedisBackend : public Backend {
 public:
  RedisBackend(const ConnectionConfig& config, Keyspace keys, Liveness liveness,
               Replication replication, absl::Duration fallback_poll,
               const Clock& clock, std::unique_ptr<SentinelWatch> sentinels)
      : clock_(clock),
        keys_(std::move(keys)),
        liveness_(std::move(liveness)),
        replication_(replication),
        fallback_poll_(fallback_poll),
        releases_(clock),
        sentinels_(std::move(sentinels)),
        master_(config, keys_.channel(), &releases_, Master::Redial::kByCaller,
                [this](Connection& conn, const Scripts& scripts) {
                  return CheckLayout(conn, scripts, keys_, master_.endpoint());
                }) {}

  ~RedisBackend() override { Shutdown(); }

  absl::Status Start() {
    // Told before the first dial, so that no switch after it is missed.
    if (sentinels_ != nullptr)
      sentinels_->Start([this] { master_.Reconnect(); });
    return master_.Start();
  }

  // A restart keeps holds only with AOF and appendfsync always, which the
  // client cannot vouch for: declared as not kept (docs/backends.md).
  BackendTraits Traits() const override {
    return BackendTraits{.liveness_record = true,
                         .fencing = FencingStrength::kServerMemory,
                         .can_list = true,
                         .keeps_after_release = true};
  }

  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    const bool will_wait = call.deadline > clock_.Now();
    absl::StatusOr<Grant> grant =
        AcquireWithWakeups(call, releases_, fallback_poll_,
                           [&]() -> absl::StatusOr<::dlock::Attempt> {
                             return TryOnce(call, will_wait);
                           });
    if (grant.ok() && KeepsLiveness()) NoteGrant(call, *grant);
    return grant;
  }

  // Not waited for with wait_replicas: a release a failover loses frees
  // the lock at its lease end, as an unconfirmed release does (C21).
  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    absl::StatusOr<Reply> reply =
        Run(ReleaseScript(master_, keys_, call.name, call.owner,
                          call.CountToSubtract(), call.keep_for));
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
      scripts.push_back(RenewScript(master_, keys_, liveness_, call.name,
                                    call.owner, call.lease));
    }
    const MonoTime sent = clock_.Now();
    Master::Pending pending = master_.Submit(std::move(scripts));
    std::vector<absl::StatusOr<Reply>> replies = pending.Await();
    std::vector<absl::Status> results;
    results.reserve(calls.size());
    bool renewed = false;
    for (size_t i = 0; i < calls.size(); ++i) {
      results.push_back(
          replies[i].ok()
              ? ParseRenew(replies[i]->get(), calls[i].name, master_.endpoint())
              : replies[i].status());
      renewed = renewed || results.back().ok();
    }
    // A renewal a failover loses would leave the new master's lease shorter
    // than the holder believes: it counts only once replicated.
    if (renewed) {
      if (absl::Status s = Replicated(pending, "renewal", calls[0].name);
          !s.ok()) {
        for (absl::Status& r : results) {
          if (r.ok()) r = s;
        }
      }
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

  // Every held lock's deadline, in one pipeline. Replicated like a grant:
  // a failover that lost the refresh would let a waiter take over holds
  // this client still believes.
  absl::Status RenewLiveness(absl::Duration) override {
    const MonoTime sent = clock_.Now();
    std::vector<std::shared_ptr<RedisHold>> holds;
    std::vector<ScriptCall> scripts;
    for (std::shared_ptr<RedisHold>& hold : held_.Current()) {
      // One refreshed within the last third of the TTL (a renewal, a
      // grant) waits for the next heartbeat.
      if (hold->live_until() > sent + LivenessTtl() * 2 / 3) continue;
      scripts.push_back(RefreshLivenessScript(master_, keys_, liveness_,
                                              hold->name(), hold->owner(),
                                              hold->token()));
      holds.push_back(std::move(hold));
    }
    if (scripts.empty()) return absl::OkStatus();
    Master::Pending pending = master_.Submit(std::move(scripts));
    std::vector<absl::StatusOr<Reply>> replies = pending.Await();
    std::vector<bool> still_held(holds.size());
    for (size_t i = 0; i < holds.size(); ++i) {
      if (!replies[i].ok()) return replies[i].status();
      absl::StatusOr<bool> held =
          ParseRefreshLiveness(replies[i]->get(), master_.endpoint());
      if (!held.ok()) return held.status();
      still_held[i] = *held;  // a hold gone is the core's to find out
    }
    if (absl::Status s = Replicated(pending, "liveness refresh", "held locks");
        !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < holds.size(); ++i) {
      if (still_held[i]) holds[i]->Confirmed(sent, LivenessTtl(), kDrift);
    }
    return absl::OkStatus();
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

  absl::Status ForceUnlockIfToken(absl::string_view name,
                                  uint64_t fencing_token) override {
    absl::StatusOr<Reply> reply =
        Run(ForceUnlockIfTokenScript(master_, keys_, name, fencing_token));
    if (!reply.ok()) return reply.status();
    absl::StatusOr<bool> removed =
        ParseForceUnlockIfToken(reply->get(), master_.endpoint());
    if (!removed.ok()) return removed.status();
    return *removed ? absl::OkStatus()
                    : TokenMismatchError(name, fencing_token);
  }

  absl::StatusOr<ServerMemory> ServerMemoryUse() override {
    absl::StatusOr<int64_t> bytes = UsedMemory(master_);
    if (!bytes.ok()) return bytes.status();
    return ServerMemory{*bytes, "INFO memory used_memory"};
  }

  void Shutdown() override {
    if (sentinels_ != nullptr) sentinels_->Stop();
    master_.Shutdown();
  }

 private:
  // The core's drift margin (docs/reliability.md): 1% + 2 ms.
  static constexpr Drift kDrift{};

  bool KeepsLiveness() const { return liveness_.ttl_ms > 0; }
  absl::Duration LivenessTtl() const {
    return absl::Milliseconds(liveness_.ttl_ms);
  }

  // One attempt: the acquire script, and with wait_replicas the WAIT.
  absl::StatusOr<::dlock::Attempt> TryOnce(const AcquireCall& call,
                                           bool will_wait) {
    std::vector<ScriptCall> script;
    script.push_back(AcquireScript(master_, keys_, liveness_, call.name,
                                   call.owner, call.lease, will_wait));
    Master::Pending pending = master_.Submit(std::move(script));
    absl::StatusOr<Reply> reply = std::move(pending.Await()[0]);
    if (!reply.ok()) return reply.status();
    absl::StatusOr<AcquireReply> parsed =
        ParseAcquire(reply->get(), master_.endpoint());
    if (!parsed.ok()) return parsed.status();
    ::dlock::Attempt attempt = parsed->ToAttempt();
    if (!attempt.acquired.has_value()) return attempt;
    if (absl::Status s = Replicated(pending, "grant", call.name); !s.ok()) {
      // Not on enough replicas: a failover could hand it to another
      // owner. Given back; the caller may try again.
      (void)Run(ReleaseScript(master_, keys_, call.name, call.owner, 1));
      return s;
    }
    return attempt;
  }

  // The grant set the hold's liveness deadline: a re-entry of the same
  // hold confirms its record, a fresh hold gets one.
  void NoteGrant(const AcquireCall& call, Grant& grant) {
    auto* held = static_cast<RedisHold*>(call.held);
    if (held != nullptr && held->token() == grant.fencing_token) {
      held->Confirmed(grant.sent, LivenessTtl(), kDrift);
      return;
    }
    auto hold =
        std::make_shared<RedisHold>(call.name, call.owner, grant.fencing_token);
    hold->Confirmed(grant.sent, LivenessTtl(), kDrift);
    held_.Add(hold);
    grant.record = std::move(hold);
  }

  absl::StatusOr<Reply> Run(ScriptCall call) {
    return master_.Run(*call.script, std::move(call.keys),
                       std::move(call.args));
  }

  // OK once wait_replicas replicas have every write `pending` made (WAIT,
  // on the connection that made them).
  absl::Status Replicated(Master::Pending& pending, absl::string_view what,
                          absl::string_view name) {
    if (replication_.replicas == 0) return absl::OkStatus();
    absl::StatusOr<std::vector<Reply>> reply = pending.FollowUp(
        {FormatCommand({"WAIT", absl::StrCat(replication_.replicas),
                        absl::StrCat(LeaseMillis(replication_.timeout))})});
    if (!reply.ok()) return reply.status();
    const redisReply* r = (*reply)[0].get();
    if (absl::Status s = ReplyError(r, "WAIT", master_.endpoint()); !s.ok()) {
      return s;
    }
    if (r->type != REDIS_REPLY_INTEGER) {
      return Malformed("WAIT", master_.endpoint());
    }
    if (r->integer >= replication_.replicas) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "the ", what, " of ", name, " reached ", r->integer, " of the ",
        replication_.replicas, " replicas wait_replicas asks for within ",
        absl::FormatDuration(replication_.timeout), " (redis at ",
        master_.endpoint(), ")"));
  }

  const Clock& clock_;
  const Keyspace keys_;
  const Liveness liveness_;
  HeldLocks<RedisHold> held_;  // with liveness: for the heartbeat
  const Replication replication_;
  const absl::Duration fallback_poll_;
  WakeupHub releases_;
  std::unique_ptr<SentinelWatch> sentinels_;  // redis-sentinel:// only
  Master master_;
};

absl::StatusOr<Replication> ParseReplication(UriParams& params) {
  Replication out;
  absl::StatusOr<std::optional<int64_t>> replicas =
      params.TakeInt("wait_replicas", 0, 100);
  if (!replicas.ok()) return replicas.status();
  out.replicas = replicas->value_or(0);
  absl::StatusOr<std::optional<absl::Duration>> timeout =
      params.TakeDuration("wait_timeout");
  if (!timeout.ok()) return timeout.status();
  if (timeout->has_value()) out.timeout = **timeout;
  return out;
}

// `check_shape` runs once every option is taken and known, so that a
// misspelt option is reported as such whatever else is wrong.
absl::StatusOr<std::unique_ptr<Backend>> Make(
    const BackendConfig& config, absl::string_view scheme,
    const ConnectionConfig& master, std::unique_ptr<SentinelWatch> sentinels,
    const std::function<absl::Status()>& check_shape) {
  absl::StatusOr<Replication> replication = ParseReplication(config.params);
  if (!replication.ok()) return replication.status();
  if (absl::Status s = config.params.RejectUnknown(scheme); !s.ok()) {
    return s;
  }
  if (absl::Status s = check_shape(); !s.ok()) return s;
  // WAIT holds the shared connection on the server: one that outlasts
  // operation_timeout would fail every command in flight behind it.
  if (replication->replicas > 0 &&
      replication->timeout >= master.command_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wait_timeout (", absl::FormatDuration(replication->timeout),
        ") must be shorter than operation_timeout (",
        absl::FormatDuration(master.command_timeout), ")"));
  }
  Keyspace keys(config.lock_namespace, master.db);
  Liveness liveness = ClientLiveness(config);
  auto backend = std::make_unique<RedisBackend>(
      master, std::move(keys), std::move(liveness), *replication,
      config.options.fallback_poll, config.clock, std::move(sentinels));
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeRedisBackend(
    const BackendConfig& config) {
  constexpr char kForm[] = "redis[s]://[user[:password]@]host[:port][/db]";
  absl::StatusOr<std::vector<ConnectionConfig>> hosts =
      ParseHosts(config, kForm);
  if (!hosts.ok()) return hosts.status();
  return Make(config, config.uri.scheme,
              hosts->empty() ? ConnectionConfig{} : (*hosts)[0], nullptr,
              [&] { return CheckHostCount(config.uri, kForm, 1, 1); });
}

constexpr char kSentinelForm[] =
    "redis[s]-sentinel://[user[:password]@]sentinel1:port,sentinel2:port,"
    "sentinel3:port/master_name[/db]";

absl::StatusOr<std::unique_ptr<Backend>> MakeSentinelBackend(
    const BackendConfig& config) {
  // The path is master_name[/db]; ParseHosts reads the db from a path.
  std::vector<std::string> path = absl::StrSplit(config.uri.path, '/');
  auto check_shape = [&] {
    if (path[0].empty() || path.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a redis-sentinel URI names the master after the Sentinels: ",
          kSentinelForm));
    }
    return CheckHostCount(config.uri, kSentinelForm, 1, 15);
  };
  Uri uri = config.uri;
  uri.path = path.size() == 2 ? path[1] : "";
  BackendConfig rest{uri,
                     config.params,
                     config.options,
                     config.lock_namespace,
                     config.client_id,
                     config.endpoint,
                     config.listener,
                     config.clock,
                     config.common};
  absl::StatusOr<std::vector<ConnectionConfig>> hosts =
      ParseHosts(rest, kSentinelForm);
  if (!hosts.ok()) return hosts.status();
  if (hosts->empty() || path[0].empty() || path.size() > 2) {
    return Make(config, config.uri.scheme, ConnectionConfig{}, nullptr,
                check_shape);
  }
  std::vector<ConnectionConfig> sentinels = *hosts;
  for (size_t i = 0; i < sentinels.size(); ++i) {
    ConnectionConfig& s = sentinels[i];
    // Sentinels listen on 26379 unless told, and take no credentials here.
    if (!uri.hosts[i].port.has_value()) {
      s.port = 26379;
      s.endpoint = absl::StrCat(s.host, ":", s.port);
    }
    s.user.clear();
    s.password.clear();
    s.db = 0;
  }
  auto watch = std::make_unique<SentinelWatch>(sentinels, path[0]);
  ConnectionConfig master = (*hosts)[0];
  master.endpoint = watch->Describe();
  master.locate = [watch = watch.get()](int cancel_fd) {
    return watch->Locate(cancel_fd);
  };
  master.must_be_master = true;
  return Make(config, config.uri.scheme, master, std::move(watch), check_shape);
}

const bool kRegistered =
    RegisterBackend("redis", &MakeRedisBackend) &&
    RegisterBackend("rediss", &MakeRedisBackend) &&
    RegisterBackend("redis-sentinel", &MakeSentinelBackend) &&
    RegisterBackend("rediss-sentinel", &MakeSentinelBackend) &&
    RegisterClientLibrary(
        "hiredis",
        absl::StrCat(HIREDIS_MAJOR, ".", HIREDIS_MINOR, ".", HIREDIS_PATCH)) &&
    // The TLS under rediss:// (redis_tls.h), as loaded: what an operator
    // checks against a security advisory.
    RegisterClientLibrary("OpenSSL", absl::StrCat(OPENSSL_version_major(), ".",
                                                  OPENSSL_version_minor(), ".",
                                                  OPENSSL_version_patch()));

}  // namespace
}  // namespace dlock::redis
