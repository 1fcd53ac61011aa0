// redis://[user[:password]@]host[:port][/db][?options]: one Redis master.
// Each operation is one Lua script (redis_scripts.cc); waiters are woken by
// one pub/sub subscription per client (redis_subscriber.cc).
#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/wakeup.h"
#include "redis_connection.h"
#include "redis_mux.h"
#include "redis_scripts.h"
#include "redis_subscriber.h"

namespace dlock::redis {
namespace {

constexpr char kKnownOptions[] =
    "command_timeout (the older name of operation_timeout)";
constexpr absl::Duration kDefaultTimeout = absl::Seconds(2);

int64_t Millis(absl::Duration d) {
  return std::max<int64_t>(1, absl::ToInt64Milliseconds(d));
}

absl::Status Malformed(absl::string_view what, absl::string_view endpoint) {
  return absl::InternalError(absl::StrCat(
      "redis at ", endpoint, " gave an unexpected reply to ", what));
}

class RedisBackend : public Backend {
 public:
  RedisBackend(ConnectionConfig config, std::string prefix, std::string channel,
               absl::Duration fallback_poll, const Clock& clock)
      : config_(config),
        clock_(clock),
        prefix_(std::move(prefix)),
        fence_key_(absl::StrCat(prefix_, "fence")),
        channel_(std::move(channel)),
        fallback_poll_(fallback_poll),
        releases_(clock),
        subscriber_(config, channel_, &releases_) {}

  ~RedisBackend() override { Shutdown(); }

  // Loads the scripts and subscribes: a client that cannot reach its server
  // says so at Connect() instead of at the first lock.
  absl::Status Start() {
    absl::StatusOr<std::unique_ptr<Connection>> conn =
        Connection::Open(config_);
    if (!conn.ok()) return conn.status();
    if (absl::Status s = scripts_.Load(**conn, endpoint()); !s.ok()) return s;
    {
      absl::MutexLock lock(&mux_mu_);
      mux_ = std::make_shared<MuxConnection>(*std::move(conn));
    }
    return subscriber_.Start();
  }

  // A restart keeps holds only with AOF and appendfsync always, which the
  // client cannot vouch for: declared as not kept (docs/backends.md).
  BackendTraits Traits() const override {
    return BackendTraits{.fencing = FencingStrength::kServerMemory,
                         .can_list = true};
  }
  absl::StatusOr<Grant> Acquire(const AcquireCall& call) override {
    const std::vector<std::string> keys = {LockKey(call.name), fence_key_};
    const bool will_wait = call.deadline > clock_.Now();
    const std::vector<std::string> args = {std::string(call.owner),
                                           absl::StrCat(Millis(call.lease)),
                                           will_wait ? "1" : "0"};
    return AcquireWithWakeups(
        call, releases_, fallback_poll_, [&]() -> absl::StatusOr<Attempt> {
          absl::StatusOr<Reply> reply = Run(scripts_.acquire, keys, args);
          if (!reply.ok()) return reply.status();
          const redisReply* r = reply->get();
          if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
              r->element[0]->type != REDIS_REPLY_INTEGER) {
            return Malformed("acquire", endpoint());
          }
          if (r->element[0]->integer == 1 && r->elements == 3) {
            return Attempt{.acquired = Acquired{
                               static_cast<uint64_t>(r->element[1]->integer),
                               r->element[2]->integer}};
          }
          // pttl is -1 for a key without expiry, which we never write, and
          // -2 when it expired between the calls: look again at once.
          int64_t pttl = r->element[1]->integer;
          return Attempt{
              .acquired = std::nullopt,
              .holder_lease_left = absl::Milliseconds(pttl >= 0 ? pttl : 0)};
        });
  }

  absl::StatusOr<int64_t> Release(const ReleaseCall& call) override {
    const absl::string_view name = call.name;
    const absl::string_view owner = call.owner;
    const int64_t holds = call.holds;
    absl::StatusOr<Reply> reply = Run(
        scripts_.release, {LockKey(name)},
        {std::string(owner), absl::StrCat(holds), channel_, std::string(name)});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type != REDIS_REPLY_INTEGER) {
      return Malformed("release", endpoint());
    }
    if ((*reply)->integer < 0) return NotOwnerError(name);
    return (*reply)->integer;
  }

  absl::Status Renew(const RenewCall& call) override {
    absl::StatusOr<Reply> reply =
        Run(scripts_.renew, {LockKey(call.name)}, RenewArgs(call));
    if (!reply.ok()) return reply.status();
    return RenewResult(reply->get(), call.name);
  }

  // One pipeline for everything the watchdog has due (C7).
  std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls) override {
    std::vector<std::string> commands;
    commands.reserve(calls.size());
    for (const RenewCall& call : calls) {
      commands.push_back(FormatCommand(EvalShaCommand(
          scripts_.renew, {LockKey(call.name)}, RenewArgs(call))));
    }
    absl::StatusOr<std::vector<Reply>> replies = Send(std::move(commands));
    std::vector<absl::Status> results(calls.size(), replies.status());
    if (!replies.ok()) return results;
    for (size_t i = 0; i < calls.size(); ++i) {
      const redisReply* r = (*replies)[i].get();
      if (IsNoScript(r)) {
        results[i] = Renew(calls[i]);  // sends the body, which reloads it
      } else if (absl::Status s = ReplyError(r, "renew", endpoint()); !s.ok()) {
        results[i] = s;
      } else {
        results[i] = RenewResult(r, calls[i].name);
      }
    }
    return results;
  }

  absl::StatusOr<LockInfo> Inspect(absl::string_view name) override {
    absl::StatusOr<Reply> reply = Run(scripts_.inspect, {LockKey(name)}, {});
    if (!reply.ok()) return reply.status();
    const redisReply* r = reply->get();
    LockInfo info;
    info.name = std::string(name);
    if (r->type != REDIS_REPLY_ARRAY) return Malformed("inspect", endpoint());
    if (r->elements == 0) return info;
    if (r->elements != 5) return Malformed("inspect", endpoint());
    info.locked = true;
    info.owner.assign(r->element[0]->str, r->element[0]->len);
    info.hold_count = r->element[1]->integer;
    info.fencing_token = static_cast<uint64_t>(r->element[2]->integer);
    info.since = absl::FromUnixMillis(r->element[3]->integer);
    info.remaining_lease =
        absl::Milliseconds(std::max<int64_t>(0, r->element[4]->integer));
    return info;
  }

  absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix) override;

  absl::Status ForceUnlock(absl::string_view name) override {
    absl::StatusOr<Reply> reply = Run(scripts_.force_unlock, {LockKey(name)},
                                      {channel_, std::string(name)});
    return reply.status();
  }

  void Shutdown() override {
    subscriber_.Stop();
    absl::MutexLock lock(&mux_mu_);
    shut_down_ = true;
    mux_.reset();
  }

 private:
  const std::string& endpoint() const { return config_.endpoint; }
  std::string LockKey(absl::string_view name) const {
    return absl::StrCat(prefix_, "l:", name);
  }
  static std::vector<std::string> RenewArgs(const RenewCall& call) {
    return {std::string(call.owner), absl::StrCat(Millis(call.lease))};
  }
  absl::Status RenewResult(const redisReply* r, absl::string_view name) const {
    if (r->type != REDIS_REPLY_INTEGER) return Malformed("renew", endpoint());
    return r->integer == 1 ? absl::OkStatus() : NotOwnerError(name);
  }
  // The shared connection, reconnected when it broke (C18). One caller
  // dials, outside every lock; callers that find a dial in flight fail at
  // once instead of queueing behind it, so that against an address that
  // swallows SYNs nobody (the watchdog included) waits more than one
  // connect_timeout, and at most one dial is open at a time (C17, C18).
  absl::StatusOr<std::shared_ptr<MuxConnection>> Mux() {
    bool resubscribe = false;
    {
      absl::MutexLock lock(&mux_mu_);
      if (mux_ != nullptr && !mux_->broken()) return mux_;
      // A server that answered READONLY (or LOADING, MASTERDOWN) likely
      // holds the subscription too, and a demoted master hears no releases:
      // each time the command connection is dialed again after such an
      // answer, so is the subscription, which thus follows the address to
      // wherever it leads now.
      resubscribe = mux_ != nullptr && mux_->wrong_server();
      if (dialing_) {
        return absl::UnavailableError(
            absl::StrCat("no connection to redis at ", endpoint(),
                         ": another call is reconnecting", last_failure_));
      }
      dialing_ = true;
    }
    absl::StatusOr<std::unique_ptr<Connection>> conn =
        Connection::Open(config_);
    absl::MutexLock lock(&mux_mu_);
    dialing_ = false;
    if (!conn.ok()) {
      last_failure_ =
          absl::StrCat(" (last attempt: ", conn.status().message(), ")");
      return conn.status();
    }
    last_failure_.clear();
    if (shut_down_) {
      return ClientClosedError(endpoint());
    }
    mux_ = std::make_shared<MuxConnection>(*std::move(conn));
    if (resubscribe) subscriber_.Resubscribe();
    return mux_;
  }

  absl::StatusOr<std::vector<Reply>> Send(std::vector<std::string> commands) {
    absl::StatusOr<std::shared_ptr<MuxConnection>> mux = Mux();
    if (!mux.ok()) return mux.status();
    return (*mux)->Call(std::move(commands));
  }

  // One script: EVALSHA, or EVAL of the body after NOSCRIPT.
  absl::StatusOr<Reply> Run(const Script& script,
                            const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) {
    absl::StatusOr<std::vector<Reply>> replies =
        Send({FormatCommand(EvalShaCommand(script, keys, args))});
    if (replies.ok() && IsNoScript((*replies)[0].get())) {
      replies = Send({FormatCommand(EvalCommand(script, keys, args))});
    }
    if (!replies.ok()) return replies.status();
    Reply reply = std::move((*replies)[0]);
    if (absl::Status s = ReplyError(reply.get(), script.name, endpoint());
        !s.ok()) {
      return s;
    }
    return reply;
  }

  const ConnectionConfig config_;
  const Clock& clock_;
  absl::Mutex mux_mu_;
  std::shared_ptr<MuxConnection> mux_ ABSL_GUARDED_BY(mux_mu_);
  bool dialing_ ABSL_GUARDED_BY(mux_mu_) = false;
  // Why the last dial failed, for the callers that fail fast meanwhile.
  std::string last_failure_ ABSL_GUARDED_BY(mux_mu_);
  bool shut_down_ ABSL_GUARDED_BY(mux_mu_) = false;
  Scripts scripts_;
  const std::string prefix_;     // "dlock:<namespace>:"
  const std::string fence_key_;  // one counter per namespace (C8)
  const std::string channel_;
  const absl::Duration fallback_poll_;
  WakeupHub releases_;
  Subscriber subscriber_;
};

// Names may hold glob characters; SCAN's MATCH needs them escaped.
std::string GlobEscape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<std::vector<LockInfo>> RedisBackend::List(
    absl::string_view prefix) {
  const std::string key_prefix = LockKey("");
  const std::string pattern =
      absl::StrCat(GlobEscape(key_prefix), GlobEscape(prefix), "*");
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    absl::StatusOr<std::vector<Reply>> replies = Send(
        {FormatCommand({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"})});
    if (!replies.ok()) return replies.status();
    const redisReply* r = (*replies)[0].get();
    if (absl::Status s = ReplyError(r, "SCAN", endpoint()); !s.ok()) return s;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      return Malformed("SCAN", endpoint());
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
    for (size_t i = 0; i < r->element[1]->elements; ++i) {
      const redisReply* key = r->element[1]->element[i];
      names.emplace_back(key->str + key_prefix.size(),
                         key->len - key_prefix.size());
    }
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<LockInfo> out;
  for (const std::string& name : names) {
    absl::StatusOr<LockInfo> info = Inspect(name);
    if (!info.ok()) return info.status();
    if (info->locked) out.push_back(*std::move(info));
  }
  return out;
}

absl::StatusOr<ConnectionConfig> ParseConfig(const BackendConfig& config) {
  const Uri& uri = config.uri;
  ConnectionConfig out;
  if (uri.hosts.size() != 1) {
    return absl::InvalidArgumentError(
        "a redis URI names one host: redis://[user[:password]@]host[:port]"
        "[/db]");
  }
  out.host = uri.hosts[0].host.empty() ? "127.0.0.1" : uri.hosts[0].host;
  out.port = uri.hosts[0].port.value_or(6379);
  out.endpoint = absl::StrCat(out.host, ":", out.port);
  out.user = uri.user;
  out.password = uri.password.value_or("");
  if (!out.user.empty() && out.password.empty()) {
    return absl::InvalidArgumentError(
        "a redis URI with a user needs a password: redis://user:password@host");
  }
  if (!uri.path.empty() &&
      (!absl::SimpleAtoi(uri.path, &out.db) || out.db < 0 || out.db > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the redis db in the URI path must be a number, not '", uri.path, "'"));
  }
  // The common options: the dial, and every read or write of a command.
  out.connect_timeout = config.common.connect_timeout.value_or(kDefaultTimeout);
  absl::StatusOr<std::optional<absl::Duration>> command_timeout =
      TakeAlias(config.params, "command_timeout", kOperationTimeoutOption,
                config.common.operation_timeout);
  if (!command_timeout.ok()) return command_timeout.status();
  out.command_timeout = command_timeout->value_or(kDefaultTimeout);
  return out;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeRedisBackend(
    const BackendConfig& config) {
  absl::StatusOr<ConnectionConfig> conn = ParseConfig(config);
  if (!conn.ok()) return conn.status();
  if (absl::Status s = config.params.RejectUnknown("redis", kKnownOptions);
      !s.ok()) {
    return s;
  }
  // Pub/sub ignores SELECT, so the channel names the db too.
  std::string channel =
      absl::StrCat("dlock:", conn->db, ":", config.lock_namespace, ":released");
  auto backend = std::make_unique<RedisBackend>(
      *conn, absl::StrCat("dlock:", config.lock_namespace, ":"),
      std::move(channel), config.options.fallback_poll, config.clock);
  if (absl::Status s = backend->Start(); !s.ok()) return s;
  return backend;
}

const bool kRegistered = RegisterBackend("redis", &MakeRedisBackend);

}  // namespace
}  // namespace dlock::redis
