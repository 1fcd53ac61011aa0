// One Redis master, named by its address or by Sentinels, or a Redis
// Cluster found from its nodes (rediss://, rediss-sentinel:// and
// rediss-cluster:// over TLS, redis_uri.h):
//   redis[s]://[user[:password]@]host[:port][/db][?options]
//   redis[s]-sentinel://[user[:password]@]s1:port,s2:port,.../master[/db][?...]
//   redis[s]-cluster://[user[:password]@]node1:port,node2:port,...[?options]
// Each operation is one Lua script on the master of the lock
// (redis_lock_ops.h, redis_router.h); waiters are woken by its release
// announcements (redis_master.h, redis_shard_subscriber.h).
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/backend/backend.h"
#include "redis_backend.h"
#include "redis_cluster_router.h"
#include "redis_sentinel.h"
#include "redis_uri.h"

namespace dlock::redis {
namespace {

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
    const BackendConfig& config, absl::Duration command_timeout,
    const Keyspace& keys, const MakeRouter& make_router,
    const std::function<absl::Status()>& check_shape) {
  absl::StatusOr<Replication> replication = ParseReplication(config.params);
  if (!replication.ok()) return replication.status();
  if (absl::Status s = config.params.RejectUnknown(config.uri.scheme);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = check_shape(); !s.ok()) return s;
  // WAIT holds the shared connection on the server: one that outlasts
  // operation_timeout would fail every command in flight behind it.
  if (replication->replicas > 0 && replication->timeout >= command_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wait_timeout (", absl::FormatDuration(replication->timeout),
        ") must be shorter than operation_timeout (",
        absl::FormatDuration(command_timeout), ")"));
  }
  return StartRedisBackend(keys, ClientLiveness(config), *replication,
                           config.options.fallback_poll, config.clock,
                           make_router);
}

// The rolling upgrade's check on every new connection (docs/migration.md).
Master::ConnectCheck LayoutCheck(const Keyspace& keys) {
  return [keys](Connection& conn, const Scripts& scripts) {
    return CheckLayout(conn, scripts, keys, conn.endpoint());
  };
}

// One master at `master`; with `sentinels`, the one they name, followed
// across failovers.
absl::StatusOr<std::unique_ptr<Backend>> MakeOneMaster(
    const BackendConfig& config, const ConnectionConfig& master,
    std::shared_ptr<SentinelWatch> sentinels,
    const std::function<absl::Status()>& check_shape) {
  const Keyspace keys(config.lock_namespace, master.db);
  return Make(
      config, master.command_timeout, keys,
      [&](WakeupHub* hub) {
        auto one = std::make_unique<Master>(master, keys.channel(), hub,
                                            Master::Redial::kByCaller,
                                            LayoutCheck(keys));
        if (sentinels == nullptr) {
          return OneMasterRouter(std::move(one), nullptr, nullptr);
        }
        // Told before the first dial, so that no switch after it is
        // missed.
        Master* moving = one.get();
        return OneMasterRouter(
            std::move(one),
            [sentinels, moving] {
              sentinels->Start([moving] { moving->Reconnect(); });
            },
            [sentinels] { sentinels->Stop(); });
      },
      check_shape);
}

absl::StatusOr<std::unique_ptr<Backend>> MakeRedisBackend(
    const BackendConfig& config) {
  constexpr char kForm[] = "redis[s]://[user[:password]@]host[:port][/db]";
  absl::StatusOr<std::vector<ConnectionConfig>> hosts =
      ParseHosts(config, kForm);
  if (!hosts.ok()) return hosts.status();
  return MakeOneMaster(
      config, hosts->empty() ? ConnectionConfig{} : (*hosts)[0], nullptr,
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
    return MakeOneMaster(config, ConnectionConfig{}, nullptr, check_shape);
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
  auto watch = std::make_shared<SentinelWatch>(sentinels, path[0]);
  ConnectionConfig master = (*hosts)[0];
  master.endpoint = watch->Describe();
  master.locate = [watch = watch.get()](int cancel_fd) {
    return watch->Locate(cancel_fd);
  };
  master.must_be_master = true;
  return MakeOneMaster(config, master, std::move(watch), check_shape);
}

constexpr char kClusterForm[] =
    "redis[s]-cluster://[user[:password]@]host1:port,host2:port,...";

// A Redis Cluster, found from any of its nodes (the seeds): every lock on
// the master of its slot (docs/redis.md, Redis Cluster).
absl::StatusOr<std::unique_ptr<Backend>> MakeClusterBackend(
    const BackendConfig& config) {
  absl::StatusOr<std::vector<ConnectionConfig>> seeds =
      ParseHosts(config, kClusterForm);
  if (!seeds.ok()) return seeds.status();
  auto check_shape = [&] {
    return CheckHostCount(config.uri, kClusterForm, 1, 64);
  };
  if (!seeds->empty() && (*seeds)[0].db != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a Redis Cluster has only db 0, so a ", config.uri.scheme,
                     " URI names none: ", kClusterForm));
  }
  const Keyspace keys(config.lock_namespace, 0, /*sharded=*/true);
  return Make(
      config,
      seeds->empty() ? ConnectionConfig{}.command_timeout
                     : (*seeds)[0].command_timeout,
      keys, [&](WakeupHub* hub) { return ClusterRouter(*seeds, keys, hub); },
      check_shape);
}

const bool kRegistered =
    RegisterBackend("redis", &MakeRedisBackend) &&
    RegisterBackend("rediss", &MakeRedisBackend) &&
    RegisterBackend("redis-sentinel", &MakeSentinelBackend) &&
    RegisterBackend("rediss-sentinel", &MakeSentinelBackend) &&
    RegisterBackend("redis-cluster", &MakeClusterBackend) &&
    RegisterBackend("rediss-cluster", &MakeClusterBackend) &&
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
