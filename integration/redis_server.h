// Copyright dlock authors. A throwaway redis-server for tests.
#ifndef DLOCK_INTEGRATION_REDIS_SERVER_H_
#define DLOCK_INTEGRATION_REDIS_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server_process.h"

namespace dlock::test {

// One command in the Redis protocol (RESP): an array of bulk strings.
std::string EncodeRedisCommand(const std::vector<std::string>& argv);

// TcpExchange() with the Redis server (or Sentinel) on 127.0.0.1:port, or,
// for one that takes only TLS there, with its unix socket (the harness
// speaks plaintext to the servers it starts).
absl::StatusOr<std::string> RedisExchange(
    int port, const std::string& request, absl::Duration timeout,
    const std::function<bool(const std::string&)>& complete = nullptr);
// Makes RedisExchange() reach the server on `port` through `unix_socket`
// (empty: through the port again).
void ReachThroughUnixSocket(int port, const std::string& unix_socket);

// One RESP2 reply: a status (+), an error (-), an integer (:), a bulk
// string ($) or an array (*); a null bulk string or array has `null` set.
struct RespReply {
  char type = 0;
  bool null = false;
  std::string text;
  std::vector<RespReply> elements;
};

// The whole raw reply to one command sent to 127.0.0.1:port (RedisExchange),
// Unavailable when none came within `timeout`.
absl::StatusOr<std::string> RedisRawReply(int port,
                                          const std::vector<std::string>& argv,
                                          absl::Duration timeout);
// The parsed reply to one command, FailedPrecondition for an error reply. A
// short timeout: a stopped server must not stall a harness's polls for long.
absl::StatusOr<RespReply> RedisQuery(int port,
                                     const std::vector<std::string>& argv);
// The "name:value" lines of INFO's (or CLUSTER INFO's) text.
std::map<std::string, std::string> InfoFields(const std::string& text);
// The "name:value" lines of an INFO section.
absl::StatusOr<std::map<std::string, std::string>> RedisInfo(
    int port, const std::string& section);

// The rules of docs/redis.md's least-privilege ACL line (what follows
// "ACL SETUSER dlock "), with `ns`, `db` and `password` put in ("*" for
// every namespace or db).
absl::StatusOr<std::string> DlockAclRules(const std::string& ns,
                                          const std::string& db,
                                          const std::string& password);

// The query options that make a client trust the test CA
// (SharedTlsCertificates()) and, with `client_certificate`, show the test
// client's certificate: "tls_ca=...[&tls_cert=...&tls_key=...]".
absl::StatusOr<std::string> TestTlsQuery(bool client_certificate);

class RedisServer {
 public:
  struct Options {
    std::string requirepass;   // the default user's password
    std::string acl_user;      // an extra ACL user with full rights
    std::string acl_password;  // its password
    // When set, acl_user gets these rules (ACL SETUSER's, its password
    // included) instead of full rights and acl_password.
    std::string acl_rules;
    // Append-only file with an fsync per write (appendfsync always) in the
    // server's directory: every acknowledged write survives Kill() (kill -9)
    // and the restart after it, as on a master run for durable locks and
    // fencing tokens. Off: nothing is persisted.
    bool persistence = false;
    // When set, the server starts as a replica of 127.0.0.1:<replicaof_port>
    // (Redis Sentinel groups, redis_sentinel_group.h); 0: a master.
    int replicaof_port = 0;
    // TLS only: the port takes TLS (tls-port) and no plaintext TCP port is
    // open (port 0), with the certificates of SharedTlsCertificates();
    // replication goes over TLS too. The harness's own commands
    // (RawCommand(), the readiness check) go through a unix socket.
    bool tls = false;
    // tls-auth-clients yes: a client without a certificate the test CA
    // signed is refused. Off: none is asked for.
    bool tls_auth_clients = false;
    // The server shows TlsCertificates::expired_cert.
    bool tls_expired_certificate = false;
    // A Redis Cluster node (cluster-enabled yes), in a cluster of its own
    // until a test assigns it slots (CLUSTER ADDSLOTSRANGE).
    bool cluster_enabled = false;
    // Its cluster-node-timeout: how long a node may not answer before the
    // others deem it failed (and its replica takes over).
    absl::Duration cluster_node_timeout = absl::Seconds(15);
    // In a session of its own (ChildProcess::Spawn).
    bool own_session = false;
  };

  // Starts redis-server on a free port, in a fresh directory, with no
  // persistence unless Options::persistence. Fails, saying what to install,
  // when redis-server is missing.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(
      const Options& options);
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start() {
    return Start(Options{});
  }
  ~RedisServer();

  int port() const { return port_; }
  // A cluster node's bus port (cluster-port), for CLUSTER MEET.
  int cluster_bus_port() const { return cluster_bus_port_; }
  bool tls() const { return options_.tls; }
  const std::string& log_path() const { return log_path_; }
  // redis://127.0.0.1:<port>, plus `?namespace=ns` when ns is set; with
  // TLS, rediss:// with TestTlsQuery() (a client certificate when the server
  // asks for one).
  std::string Uri(const std::string& ns = "") const;

  // Sends one command on a fresh connection (authenticating as the default
  // user when requirepass is set) and returns the raw RESP reply, e.g.
  // ":1\r\n" for DBSIZE. For tests that look at the server directly.
  absl::StatusOr<std::string> RawCommand(const std::vector<std::string>& argv);

  // Fault injection. Every restart uses the same port, directory and
  // configuration. Restart() (SIGTERM, then start) loses every key without
  // persistence, as a master restarted without persistence would; with it,
  // the keys are read back from the append-only file before the server
  // answers. Kill() is kill -9: with persistence, StartServer() afterwards
  // finds every write the server acknowledged.
  absl::Status Restart();
  void StopServer() { process_.Stop(); }
  absl::Status StartServer();
  void Kill() { process_.Kill(); }
  // Neither killed nor stopped (a paused server runs).
  bool Running() { return process_.Running(); }
  void Pause() { process_.Pause(); }
  void Resume() { process_.Resume(); }

 private:
  RedisServer() = default;
  absl::Status WaitReady();
  // The TLS lines of the configuration file.
  absl::Status WriteTlsConfig(std::ostream& conf);

  Options options_;
  std::string dir_;
  std::string log_path_;
  std::string config_path_;
  int port_ = 0;
  int cluster_bus_port_ = 0;
  ChildProcess process_;
};

// N independent masters, for redlock://: each a RedisServer of its own.
class RedisGroup {
 public:
  static absl::StatusOr<std::unique_ptr<RedisGroup>> Start(
      int masters, const RedisServer::Options& options = {});

  int size() const { return static_cast<int>(servers_.size()); }
  RedisServer& server(int i) { return *servers_[i]; }
  // Every master takes only TLS (RedisServer::Options::tls).
  bool tls() const { return !servers_.empty() && servers_[0]->tls(); }
  // "127.0.0.1:p1,127.0.0.1:p2,...", with `ports[i]` instead of master i's
  // own port where given and not 0 (a FaultProxy in front of it).
  std::string Hosts(const std::vector<int>& ports = {}) const;

  // The fault on every master, in turn.
  absl::Status Restart();
  absl::Status StartServers();
  void StopServers();
  void Kill();
  void Pause();
  void Resume();

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

// The test registry's shared group behind "redlock3" or "redlock5", or
// with `tls` "redlock3_tls" (redis_registration.cc), started on first use:
// for tests that fault one master of it.
absl::StatusOr<RedisGroup*> RedlockGroup(int masters, bool tls = false);

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_REDIS_SERVER_H_
