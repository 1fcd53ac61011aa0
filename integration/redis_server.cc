#include "redis_server.h"

#include <fstream>
#include <map>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "tls_certificates.h"

namespace dlock::test {
namespace {

absl::Mutex unix_sockets_mu(absl::kConstInit);
// Port -> unix socket of the servers that take only TLS on their port.
std::map<int, std::string>* unix_sockets ABSL_GUARDED_BY(unix_sockets_mu) =
    nullptr;

// Parses the reply that starts at data[*pos] and moves *pos past it;
// nullopt while `data` ends before the reply does.
std::optional<RespReply> ParseRespReply(absl::string_view data, size_t* pos) {
  const size_t eol = data.find("\r\n", *pos);
  if (*pos >= data.size() || eol == absl::string_view::npos) {
    return std::nullopt;
  }
  RespReply reply;
  reply.type = data[*pos];
  const absl::string_view line = data.substr(*pos + 1, eol - *pos - 1);
  size_t next = eol + 2;
  int64_t length = 0;
  if ((reply.type == '$' || reply.type == '*') &&
      !absl::SimpleAtoi(line, &length)) {
    reply.type = '?';
  }
  switch (reply.type) {
    case '+':
    case '-':
    case ':':
      reply.text = std::string(line);
      break;
    case '$':
      if (length < 0) {
        reply.null = true;
        break;
      }
      if (data.size() < next + length + 2) return std::nullopt;
      reply.text = std::string(data.substr(next, length));
      next += length + 2;
      break;
    case '*':
      reply.null = length < 0;
      for (int64_t i = 0; i < length; ++i) {
        std::optional<RespReply> element = ParseRespReply(data, &next);
        if (!element.has_value()) return std::nullopt;
        reply.elements.push_back(*std::move(element));
      }
      break;
    default:
      reply.type = '-';
      reply.text = absl::StrCat("not a RESP2 reply: ", data.substr(*pos));
  }
  *pos = next;
  return reply;
}

bool HasWholeReply(const std::string& data) {
  size_t pos = 0;
  return ParseRespReply(data, &pos).has_value();
}

}  // namespace

absl::StatusOr<std::string> RedisRawReply(int port,
                                          const std::vector<std::string>& argv,
                                          absl::Duration timeout) {
  absl::StatusOr<std::string> reply =
      RedisExchange(port, EncodeRedisCommand(argv), timeout, HasWholeReply);
  if (!reply.ok()) return reply.status();
  if (!HasWholeReply(*reply)) {
    return absl::UnavailableError(absl::StrCat(
        "no whole reply from port ", port, " to ", argv[0], " within ",
        absl::FormatDuration(timeout), " (got '", *reply, "')"));
  }
  return reply;
}

absl::StatusOr<RespReply> RedisQuery(int port,
                                     const std::vector<std::string>& argv) {
  absl::StatusOr<std::string> raw = RedisRawReply(port, argv, absl::Seconds(2));
  if (!raw.ok()) return raw.status();
  size_t pos = 0;
  RespReply reply = *ParseRespReply(*raw, &pos);
  if (reply.type == '-') {
    return absl::FailedPreconditionError(
        absl::StrCat(absl::StrJoin(argv, " "), " on port ", port,
                     " answered: ", reply.text));
  }
  return reply;
}

std::map<std::string, std::string> InfoFields(const std::string& text) {
  std::map<std::string, std::string> fields;
  for (absl::string_view line : absl::StrSplit(text, "\r\n")) {
    std::pair<std::string, std::string> field =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    if (!field.second.empty()) fields.insert(std::move(field));
  }
  return fields;
}

absl::StatusOr<std::map<std::string, std::string>> RedisInfo(
    int port, const std::string& section) {
  absl::StatusOr<RespReply> reply = RedisQuery(port, {"INFO", section});
  if (!reply.ok()) return reply.status();
  return InfoFields(reply->text);
}

void ReachThroughUnixSocket(int port, const std::string& unix_socket) {
  absl::MutexLock lock(&unix_sockets_mu);
  if (unix_sockets == nullptr) unix_sockets = new std::map<int, std::string>;
  if (unix_socket.empty()) {
    unix_sockets->erase(port);
  } else {
    (*unix_sockets)[port] = unix_socket;
  }
}

absl::StatusOr<std::string> RedisExchange(
    int port, const std::string& request, absl::Duration timeout,
    const std::function<bool(const std::string&)>& complete) {
  std::string path;
  {
    absl::MutexLock lock(&unix_sockets_mu);
    if (unix_sockets != nullptr) {
      auto it = unix_sockets->find(port);
      if (it != unix_sockets->end()) path = it->second;
    }
  }
  if (path.empty()) return TcpExchange(port, request, timeout, complete);
  return UnixExchange(path, request, timeout, complete);
}

absl::StatusOr<std::string> DlockAclRules(const std::string& ns,
                                          const std::string& db,
                                          const std::string& password) {
  const std::string path = absl::StrCat(DLOCK_SOURCE_DIR, "/docs/redis.md");
  std::ifstream in(path);
  constexpr absl::string_view kStart = "ACL SETUSER dlock ";
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, kStart)) continue;
    return absl::StrReplaceAll(
        line.substr(kStart.size()),
        {{"<ns>", ns}, {"<db>", db}, {"PASSWORD", password}});
  }
  return absl::NotFoundError(
      absl::StrCat("no line starting '", kStart, "' in ", path));
}

absl::StatusOr<std::string> TestTlsQuery(bool client_certificate) {
  absl::StatusOr<const TlsCertificates*> certs = SharedTlsCertificates();
  if (!certs.ok()) return certs.status();
  std::string query = absl::StrCat("tls_ca=", (*certs)->ca);
  if (client_certificate) {
    absl::StrAppend(&query, "&tls_cert=", (*certs)->client_cert,
                    "&tls_key=", (*certs)->client_key);
  }
  return query;
}

constexpr char kRedisServer[] = "/usr/bin/redis-server";

std::string EncodeRedisCommand(const std::vector<std::string>& argv) {
  std::string out = absl::StrCat("*", argv.size(), "\r\n");
  for (const std::string& a : argv) {
    absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(
    const Options& options) {
  if (absl::Status s = RequireExecutable(kRedisServer, "redis-server");
      !s.ok()) {
    return s;
  }
  std::unique_ptr<RedisServer> server(new RedisServer);
  server->options_ = options;
  absl::StatusOr<std::string> dir = MakeTempDir("dlock-redis");
  if (!dir.ok()) return dir.status();
  server->dir_ = *dir;
  server->log_path_ = *dir + "/redis.log";
  server->config_path_ = *dir + "/redis.conf";
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  server->port_ = *port;

  std::ofstream conf(server->config_path_);
  conf << "bind 127.0.0.1\n";
  if (options.tls) {
    if (absl::Status s = server->WriteTlsConfig(conf); !s.ok()) return s;
  } else {
    conf << "port " << server->port_ << "\n";
  }
  conf << "dir " << server->dir_ << "\n"
       << "save \"\"\n"
       << "daemonize no\n"
       << "loglevel warning\n"
       << "logfile \"\"\n"
       // A replica's full sync starts at once, not after 5 s of waiting
       // for more replicas to share it.
       << "repl-diskless-sync-delay 0\n";
  if (options.cluster_enabled) {
    // The bus port claimed too: the default (port + 10000) may be another
    // test's, or in the kernel's ephemeral range.
    absl::StatusOr<int> bus = FreeLoopbackPort();
    if (!bus.ok()) return bus.status();
    server->cluster_bus_port_ = *bus;
    // A node that never met another (a cluster of one master) knows no
    // address of its own and names itself "" in CLUSTER SLOTS, which some
    // clients (ioredis) cannot dial; as a deployment behind NAT would, it
    // announces the address clients reach.
    conf << "cluster-enabled yes\ncluster-config-file nodes.conf\n"
         << "cluster-port " << *bus << "\n"
         << "cluster-announce-ip 127.0.0.1\n"
         << "cluster-node-timeout "
         << absl::ToInt64Milliseconds(options.cluster_node_timeout) << "\n";
  }
  if (options.replicaof_port != 0) {
    conf << "replicaof 127.0.0.1 " << options.replicaof_port << "\n";
  }
  if (options.persistence) {
    // Redis 7 keeps the append-only files in <dir>/<appenddirname>.
    conf << "appendonly yes\n"
         << "appendfsync always\n"
         << "appenddirname appendonlydir\n";
  } else {
    conf << "appendonly no\n";
  }
  if (!options.requirepass.empty()) {
    conf << "requirepass " << options.requirepass << "\n";
  }
  if (!options.acl_rules.empty()) {
    conf << "user " << options.acl_user << " " << options.acl_rules << "\n";
  } else if (!options.acl_user.empty()) {
    conf << "user " << options.acl_user << " on >" << options.acl_password
         << " ~* &* +@all\n";
  }
  conf.close();
  if (absl::Status s = server->StartServer(); !s.ok()) return s;
  return server;
}

absl::Status RedisServer::WriteTlsConfig(std::ostream& conf) {
  absl::StatusOr<const TlsCertificates*> certs = SharedTlsCertificates();
  if (!certs.ok()) return certs.status();
  const std::string unix_socket = dir_ + "/redis.sock";
  conf << "port 0\n"
       << "tls-port " << port_ << "\n"
       << "tls-cert-file "
       << (options_.tls_expired_certificate ? (*certs)->expired_cert
                                            : (*certs)->server_cert)
       << "\n"
       << "tls-key-file " << (*certs)->server_key << "\n"
       << "tls-ca-cert-file " << (*certs)->ca << "\n"
       << "tls-auth-clients " << (options_.tls_auth_clients ? "yes" : "no")
       << "\n"
       // A replica dials its master over TLS, showing the server's
       // certificate as its own (the CA signed it).
       << "tls-replication yes\n"
       << "unixsocket " << unix_socket << "\n"
       << "unixsocketperm 700\n";
  // A cluster's nodes talk over TLS too, and name their TLS ports.
  if (options_.cluster_enabled) conf << "tls-cluster yes\n";
  ReachThroughUnixSocket(port_, unix_socket);
  return absl::OkStatus();
}

RedisServer::~RedisServer() {
  process_.Stop();
  // Another server may get the port next.
  if (options_.tls) ReachThroughUnixSocket(port_, "");
  RemoveTree(dir_);
}

std::string RedisServer::Uri(const std::string& ns) const {
  std::string uri = absl::StrCat("redis://127.0.0.1:", port_);
  const char* separator = "?";
  if (options_.tls) {
    // The server started, so the certificates exist.
    uri = absl::StrCat("rediss://127.0.0.1:", port_, "?",
                       TestTlsQuery(options_.tls_auth_clients).value_or(""));
    separator = "&";
  }
  if (!ns.empty()) absl::StrAppend(&uri, separator, "namespace=", ns);
  return uri;
}

absl::Status RedisServer::StartServer() {
  if (absl::Status s = process_.Spawn({kRedisServer, config_path_}, log_path_,
                                      "", options_.own_session);
      !s.ok()) {
    return s;
  }
  return WaitReady();
}

absl::Status RedisServer::Restart() {
  process_.Stop();
  return StartServer();
}

absl::StatusOr<std::string> RedisServer::RawCommand(
    const std::vector<std::string>& argv) {
  std::string request;
  if (!options_.requirepass.empty()) {
    request = EncodeRedisCommand({"AUTH", options_.requirepass});
  }
  // QUIT makes the server close the connection, which ends the read.
  absl::StrAppend(&request, EncodeRedisCommand(argv),
                  EncodeRedisCommand({"QUIT"}));
  absl::StatusOr<std::string> reply =
      RedisExchange(port_, request, absl::Seconds(5));
  if (!reply.ok()) return reply.status();
  std::string out = *std::move(reply);
  if (!options_.requirepass.empty() && absl::StartsWith(out, "+OK\r\n")) {
    out = out.substr(5);
  }
  if (absl::EndsWith(out, "+OK\r\n")) out.resize(out.size() - 5);  // QUIT
  return out;
}

absl::Status RedisServer::WaitReady() {
  return WaitUntil(
      [this] {
        // Another test's server may have taken the port between
        // FreeLoopbackPort() and this start: then ours has exited, and the
        // PONG would come from theirs.
        if (!process_.Running()) return false;
        absl::StatusOr<std::string> reply =
            RedisExchange(port_, "PING\r\n", absl::Milliseconds(200));
        return reply.ok() && (absl::StartsWith(*reply, "+PONG") ||
                              absl::StartsWith(*reply, "-NOAUTH"));
      },
      absl::Seconds(10),
      absl::StrCat("redis-server answering PING on port ", port_), log_path_);
}

absl::StatusOr<std::unique_ptr<RedisGroup>> RedisGroup::Start(
    int masters, const RedisServer::Options& options) {
  auto group = std::make_unique<RedisGroup>();
  for (int i = 0; i < masters; ++i) {
    absl::StatusOr<std::unique_ptr<RedisServer>> server =
        RedisServer::Start(options);
    if (!server.ok()) return server.status();
    group->servers_.push_back(*std::move(server));
  }
  return group;
}

std::string RedisGroup::Hosts(const std::vector<int>& ports) const {
  std::string out;
  for (size_t i = 0; i < servers_.size(); ++i) {
    const int port =
        i < ports.size() && ports[i] != 0 ? ports[i] : servers_[i]->port();
    absl::StrAppend(&out, i == 0 ? "" : ",", "127.0.0.1:", port);
  }
  return out;
}

absl::Status RedisGroup::Restart() {
  for (auto& s : servers_) {
    if (absl::Status r = s->Restart(); !r.ok()) return r;
  }
  return absl::OkStatus();
}

absl::Status RedisGroup::StartServers() {
  for (auto& s : servers_) {
    if (absl::Status r = s->StartServer(); !r.ok()) return r;
  }
  return absl::OkStatus();
}

void RedisGroup::StopServers() {
  for (auto& s : servers_) s->StopServer();
}
void RedisGroup::Kill() {
  for (auto& s : servers_) s->Kill();
}
void RedisGroup::Pause() {
  for (auto& s : servers_) s->Pause();
}
void RedisGroup::Resume() {
  for (auto& s : servers_) s->Resume();
}

}  // namespace dlock::test
