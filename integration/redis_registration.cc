// Copyright dlock authors. Redis in the test registry (test_servers.h): a
// redis-server without persistence ("redis") and, for the tests that ask for
// it, one with an append-only file fsynced on every write ("redis_aof");
// Redlock quorums and a Sentinel group; and each topology over TLS, every
// server taking only TLS on its port ("redis_tls", which also asks for a
// client certificate and has clients log in as the least-privilege ACL user,
// "redlock3_tls", "redis_sentinel_tls").
#include "absl/strings/match.h"
#include "redis_cluster.h"
#include "redis_sentinel_group.h"
#include "redis_server.h"
#include "test_servers.h"

namespace dlock::test {
namespace {

// Which TLS a client of an entry speaks.
enum class Tls { kNone, kServerChecked, kWithClientCertificate };

// `scheme`://`rest` with the request's query and, with TLS, the options
// that trust the test CA (and show the test client's certificate).
absl::StatusOr<std::string> ClientUri(absl::string_view scheme,
                                      const std::string& rest,
                                      const UriRequest& r, Tls tls) {
  std::string uri = WithQuery(absl::StrCat(scheme, "://", rest), r);
  if (tls == Tls::kNone) return uri;
  absl::StatusOr<std::string> query =
      TestTlsQuery(tls == Tls::kWithClientCertificate);
  if (!query.ok()) return query.status();
  absl::StrAppend(&uri, absl::StrContains(uri, "?") ? "&" : "?", *query);
  return uri;
}

SharedServer<RedisServer> plain("redis-server",
                                [] { return RedisServer::Start(); });
SharedServer<RedisServer> aof("redis-server (append-only file)", [] {
  RedisServer::Options options;
  options.persistence = true;
  return RedisServer::Start(options);
});

// As a managed Redis runs: TLS only, a client certificate asked for, and
// clients log in as the least-privilege user of docs/redis.md (every
// namespace and db allowed: the conformance suite gives each case a
// namespace of its own).
constexpr char kLeastPrivilegePassword[] = "dlock-acl-test-pw";
SharedServer<RedisServer> tls_server(
    "redis-server over TLS (asking for a client certificate, with the "
    "least-privilege ACL user of docs/redis.md)",
    []() -> absl::StatusOr<std::unique_ptr<RedisServer>> {
      absl::StatusOr<std::string> rules =
          DlockAclRules("*", "*", kLeastPrivilegePassword);
      if (!rules.ok()) return rules.status();
      return RedisServer::Start({.acl_user = "dlock",
                                 .acl_rules = *rules,
                                 .tls = true,
                                 .tls_auth_clients = true});
    });

// `userinfo` ("user:password@") logs in as an ACL user; empty: the default
// user.
TestBackend Entry(const std::string& label, bool variant,
                  SharedServer<RedisServer>* shared, Tls tls = Tls::kNone,
                  const std::string& userinfo = "") {
  const char* scheme = tls == Tls::kNone ? "redis" : "rediss";
  return TestBackend{
      .label = label,
      .backend = "redis",
      .variant = variant,
      .shared_across_processes = true,
      .uri = [shared, scheme, tls,
              userinfo](const UriRequest& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<RedisServer*> server = shared->Get();
        if (!server.ok()) return server.status();
        const int port = r.port != 0 ? r.port : (*server)->port();
        return ClientUri(scheme, absl::StrCat(userinfo, "127.0.0.1:", port), r,
                         tls);
      },
      .unreachable_uri =
          [scheme](const std::string& ns) {
            return absl::StrCat(scheme, "://127.0.0.1:1?namespace=", ns);
          },
      .port = shared->PortHook(),
      // Without persistence a restart loses every key, as a master restarted
      // without persistence would; with it, the keys are read back.
      .restart = shared->Hook([](RedisServer& s) { return s.Restart(); }),
      .stop = shared->VoidHook([](RedisServer& s) { s.StopServer(); }),
      .start = shared->Hook([](RedisServer& s) { return s.StartServer(); }),
      .kill = shared->VoidHook([](RedisServer& s) { s.Kill(); }),
      .pause = shared->VoidHook([](RedisServer& s) { s.Pause(); }),
      .resume = shared->VoidHook([](RedisServer& s) { s.Resume(); }),
      .terminate_sessions = nullptr,
      .short_session_param = "",
      .conformance_deviations = {},
  };
}

SharedServer<RedisGroup> three("3 redis-servers for redlock",
                               [] { return RedisGroup::Start(3); });
SharedServer<RedisGroup> five("5 redis-servers for redlock",
                              [] { return RedisGroup::Start(5); });
SharedServer<RedisGroup> three_tls("3 redis-servers over TLS for redlock", [] {
  return RedisGroup::Start(3, {.tls = true});
});

// redlock:// over a group of masters. The hooks act on every master; the
// port is the first master's (a test that needs one master's port, or a
// proxy in front of one, asks RedlockGroup()).
TestBackend RedlockEntry(const std::string& label,
                         SharedServer<RedisGroup>* shared, bool tls = false) {
  const char* scheme = tls ? "redlocks" : "redlock";
  return TestBackend{
      .label = label,
      .backend = "redis",
      .variant = tls,
      .shared_across_processes = true,
      .uri = [shared, scheme,
              tls](const UriRequest& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<RedisGroup*> group = shared->Get();
        if (!group.ok()) return group.status();
        std::vector<int> ports;
        if (r.port != 0) ports.push_back(r.port);
        return ClientUri(scheme, (*group)->Hosts(ports), r,
                         tls ? Tls::kServerChecked : Tls::kNone);
      },
      .unreachable_uri =
          [scheme](const std::string& ns) {
            return absl::StrCat(scheme,
                                "://127.0.0.1:1,127.0.0.1:1,127.0.0.1:1"
                                "?namespace=",
                                ns);
          },
      .port = [shared]() -> absl::StatusOr<int> {
        absl::StatusOr<RedisGroup*> group = shared->Get();
        if (!group.ok()) return group.status();
        return (*group)->server(0).port();
      },
      .restart = shared->Hook([](RedisGroup& g) { return g.Restart(); }),
      .stop = shared->VoidHook([](RedisGroup& g) { g.StopServers(); }),
      .start = shared->Hook([](RedisGroup& g) { return g.StartServers(); }),
      .kill = shared->VoidHook([](RedisGroup& g) { g.Kill(); }),
      .pause = shared->VoidHook([](RedisGroup& g) { g.Pause(); }),
      .resume = shared->VoidHook([](RedisGroup& g) { g.Resume(); }),
      .terminate_sessions = nullptr,
      .short_session_param = "",
      .conformance_deviations = {},
  };
}

SharedServer<RedisSentinelGroup> sentinel_group(
    "a redis-server master, its replica and 3 Sentinels",
    [] { return RedisSentinelGroup::Start(); });
SharedServer<RedisSentinelGroup> sentinel_group_tls(
    "a redis-server master, its replica and 3 Sentinels, over TLS",
    [] { return RedisSentinelGroup::Start({.tls = true}); });

// redis-sentinel:// over a master, its replica and three Sentinels. A
// restart and an outage take both servers down (the Sentinels stay), so
// that, as for "redis", the data is gone; failovers are in
// backends/redis/tests/redis_sentinel_test.cc.
TestBackend SentinelEntry(const std::string& label,
                          SharedServer<RedisSentinelGroup>* shared,
                          bool tls = false) {
  const char* scheme = tls ? "rediss-sentinel" : "redis-sentinel";
  return TestBackend{
      .label = label,
      .backend = "redis",
      .variant = tls,
      .shared_across_processes = true,
      .uri = [shared, scheme,
              tls](const UriRequest& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<RedisSentinelGroup*> group = shared->Get();
        if (!group.ok()) return group.status();
        // A proxy stands in front of one address; a Sentinel URI has no
        // single server to put it before.
        if (r.port != 0) {
          return absl::UnimplementedError(
              "redis_sentinel has no proxy port: its client dials the "
              "master the Sentinels name");
        }
        return ClientUri(
            scheme,
            absl::StrCat((*group)->SentinelUri(), "/", (*group)->master_name()),
            r, tls ? Tls::kServerChecked : Tls::kNone);
      },
      .unreachable_uri =
          [scheme](const std::string& ns) {
            return absl::StrCat(scheme, "://127.0.0.1:1/none?namespace=", ns);
          },
      .port = [shared]() -> absl::StatusOr<int> {
        absl::StatusOr<RedisSentinelGroup*> group = shared->Get();
        if (!group.ok()) return group.status();
        return (*group)->CurrentMasterPort();
      },
      .restart = shared->Hook([](RedisSentinelGroup& g) {
        g.StopServers();
        return g.StartServers();
      }),
      .stop = shared->VoidHook([](RedisSentinelGroup& g) { g.StopServers(); }),
      .start =
          shared->Hook([](RedisSentinelGroup& g) { return g.StartServers(); }),
      .kill = nullptr,
      .pause = nullptr,
      .resume = nullptr,
      .terminate_sessions = nullptr,
      .short_session_param = "",
      .conformance_deviations = {},
  };
}

SharedServer<RedisCluster> cluster(
    "a Redis Cluster of 3 masters with a replica each",
    [] { return RedisCluster::Start(); });

// redis-cluster:// over 3 masters and their replicas, found from every
// node's address (the seeds). A restart and an outage stop every node, as
// for "redis" the data is gone. The failover and migration hooks act on
// the master of the one lock a history holds (RedisCluster::SlotWithKeys);
// more of both are in backends/redis/tests/redis_cluster_test.cc.
TestBackend ClusterEntry(const std::string& label,
                         SharedServer<RedisCluster>* shared) {
  return TestBackend{
      .label = label,
      .backend = "redis",
      .variant = false,
      .shared_across_processes = true,
      .uri = [shared](const UriRequest& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<RedisCluster*> cluster = shared->Get();
        if (!cluster.ok()) return cluster.status();
        // The client dials every master the slot map names, past a proxy
        // before any one address.
        if (r.port != 0) {
          return absl::UnimplementedError(
              "redis_cluster has no proxy port: its client dials the "
              "masters the slot map names");
        }
        return ClientUri("redis-cluster", (*cluster)->Seeds(), r, Tls::kNone);
      },
      .unreachable_uri =
          [](const std::string& ns) {
            return absl::StrCat("redis-cluster://127.0.0.1:1?namespace=", ns);
          },
      .port = [shared]() -> absl::StatusOr<int> {
        absl::StatusOr<RedisCluster*> cluster = shared->Get();
        if (!cluster.ok()) return cluster.status();
        return (*cluster)->ports()[0];
      },
      .restart = shared->Hook([](RedisCluster& c) { return c.RestartAll(); }),
      .stop = shared->VoidHook([](RedisCluster& c) { c.StopAll(); }),
      .start = shared->Hook([](RedisCluster& c) { return c.StartAll(); }),
      .kill = nullptr,
      .pause = nullptr,
      .resume = nullptr,
      .terminate_sessions = nullptr,
      .kill_primary =
          shared->Hook([](RedisCluster& c) { return c.KillMasterWithKeys(); }),
      .promote_standby =
          shared->Hook([](RedisCluster& c) { return c.WaitForPromotion(); }),
      .rebuild_standby =
          shared->Hook([](RedisCluster& c) { return c.RejoinAsReplica(); }),
      .migrate_slot = [shared](absl::Duration half_moved) -> absl::Status {
        absl::StatusOr<RedisCluster*> cluster = shared->Get();
        if (!cluster.ok()) return cluster.status();
        return (*cluster)->MigrateSlotWithKeys(half_moved);
      },
      .short_session_param = "",
      .conformance_deviations = {},
  };
}

const TestBackendRegistration registration({
    Entry("redis", /*variant=*/false, &plain),
    Entry("redis_aof", /*variant=*/true, &aof),
    RedlockEntry("redlock3", &three),
    RedlockEntry("redlock5", &five),
    SentinelEntry("redis_sentinel", &sentinel_group),
    Entry("redis_tls", /*variant=*/false, &tls_server,
          Tls::kWithClientCertificate,
          absl::StrCat("dlock:", kLeastPrivilegePassword, "@")),
    RedlockEntry("redlock3_tls", &three_tls, /*tls=*/true),
    SentinelEntry("redis_sentinel_tls", &sentinel_group_tls, /*tls=*/true),
    ClusterEntry("redis_cluster", &cluster),
});

}  // namespace

absl::StatusOr<RedisGroup*> RedlockGroup(int masters, bool tls) {
  if (masters == 3) return tls ? three_tls.Get() : three.Get();
  if (masters == 5 && !tls) return five.Get();
  return absl::InvalidArgumentError(
      "the registry has redlock groups of 3 and 5, and of 3 over TLS");
}

}  // namespace dlock::test
