#include "etcd_server.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace dlock::test {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";
constexpr char kEtcdctl[] = "/usr/bin/etcdctl";

std::string RandomPassword() {
  std::random_device random;
  std::string password;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&password, absl::Hex(random(), absl::kZeroPad8));
  }
  return password;
}

// etcd 3.4 runs on arm64 only when told that it may (it is not among the
// architectures that release supports).
void AllowThisArchitecture() {
  utsname name{};
  if (uname(&name) == 0 && std::string(name.machine) == "aarch64") {
    setenv("ETCD_UNSUPPORTED_ARCH", "arm64", /*overwrite=*/0);
  }
}

// tmpfs when there is one (see the header), else $TMPDIR.
std::string DataParent() {
  return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Start(
    const Options& options) {
  for (const auto& [path, package] :
       {std::pair{kEtcd, "etcd-server"}, std::pair{kEtcdctl, "etcd-client"}}) {
    if (absl::Status s = RequireExecutable(path, package); !s.ok()) return s;
  }
  if (options.members < 1) {
    return absl::InvalidArgumentError("an etcd cluster needs a member");
  }
  AllowThisArchitecture();
  std::unique_ptr<EtcdServer> server(new EtcdServer);
  server->options_ = options;
  absl::StatusOr<std::string> dir = MakeTempDir("dlock-etcd", DataParent());
  if (!dir.ok()) return dir.status();
  server->dir_ = *dir;
  server->cluster_token_ = server->dir_.substr(server->dir_.rfind('/') + 1);
  if (options.tls) {
    const std::string tls_dir = server->dir_ + "/tls";
    mkdir(tls_dir.c_str(), 0700);
    absl::StatusOr<TlsCertificates> certificates = MakeTlsCertificates(tls_dir);
    if (!certificates.ok()) return certificates.status();
    server->certificates_ = *std::move(certificates);
  }
  for (int i = 0; i < options.members; ++i) {
    auto member = std::make_unique<Member>();
    member->name = absl::StrCat("m", i);
    for (int* port :
         {&member->client_port, &member->peer_port, &member->metrics_port}) {
      absl::StatusOr<int> free_port = FreeLoopbackPort();
      if (!free_port.ok()) return free_port.status();
      *port = *free_port;
    }
    member->dir = absl::StrCat(server->dir_, "/", member->name);
    member->log_path = member->dir + "/etcd.log";
    if (mkdir(member->dir.c_str(), 0700) != 0) {
      return absl::InternalError(absl::StrCat("cannot create ", member->dir));
    }
    server->members_.push_back(std::move(member));
  }
  if (absl::Status s = server->StartAll(); !s.ok()) return s;
  if (options.auth) {
    if (absl::Status s = server->SetUpAuth(); !s.ok()) return s;
  }
  return server;
}

EtcdServer::~EtcdServer() {
  StopAll();
  RemoveTree(dir_);
}

std::vector<std::string> EtcdServer::Argv(const Member& member) const {
  const std::string scheme = options_.tls ? "https" : "http";
  const std::string client_url =
      absl::StrCat(scheme, "://127.0.0.1:", member.client_port);
  const std::string peer_url =
      absl::StrCat("http://127.0.0.1:", member.peer_port);
  std::vector<std::string> cluster;
  for (const auto& m : members_) {
    cluster.push_back(
        absl::StrCat(m->name, "=http://127.0.0.1:", m->peer_port));
  }
  std::vector<std::string> argv = {
      kEtcd, "--name", member.name, "--data-dir", member.dir + "/data",
      "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
      "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
      "--initial-cluster", absl::StrJoin(cluster, ","),
      "--initial-cluster-state", "new", "--initial-cluster-token",
      cluster_token_,
      // /health and /metrics in plain HTTP, whatever the client URLs are.
      "--listen-metrics-urls",
      absl::StrCat("http://127.0.0.1:", member.metrics_port),
      "--heartbeat-interval", absl::StrCat(options_.heartbeat_ms),
      "--election-timeout", absl::StrCat(options_.election_ms),
      "--auth-token-ttl", absl::StrCat(options_.auth_token_ttl_seconds),
      "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"};
  if (options_.tls) {
    argv.insert(argv.end(), {"--cert-file", certificates_.server_cert,
                             "--key-file", certificates_.server_key});
    if (options_.client_cert_auth) {
      argv.insert(argv.end(), {"--client-cert-auth", "--trusted-ca-file",
                               certificates_.ca});
    }
  }
  return argv;
}

std::vector<std::string> EtcdServer::Endpoints() const {
  std::vector<std::string> endpoints;
  for (const auto& m : members_) {
    endpoints.push_back(absl::StrCat("127.0.0.1:", m->client_port));
  }
  return endpoints;
}

std::string EtcdServer::Hosts() const {
  return absl::StrJoin(Endpoints(), ",");
}

std::string EtcdServer::Uri(const std::string& ns,
                            const std::string& extra) const {
  std::vector<std::string> query;
  if (!ns.empty()) query.push_back(absl::StrCat("namespace=", ns));
  if (options_.tls) {
    query.push_back(absl::StrCat("tls_ca=", certificates_.ca));
    if (options_.client_cert_auth) {
      query.push_back(absl::StrCat("tls_cert=", certificates_.client_cert));
      query.push_back(absl::StrCat("tls_key=", certificates_.client_key));
    }
  }
  if (!extra.empty()) query.push_back(extra);
  std::string uri = absl::StrCat("etcd://", Hosts());
  if (!query.empty()) absl::StrAppend(&uri, "?", absl::StrJoin(query, "&"));
  return uri;
}

std::string EtcdServer::password(const std::string& user) const {
  auto it = passwords_.find(user);
  return it == passwords_.end() ? "" : it->second;
}

absl::Status EtcdServer::StartMember(int i) {
  Member& m = *members_[i];
  if (!m.process.Running()) {
    if (absl::Status s = m.process.Spawn(Argv(m), m.log_path); !s.ok()) {
      return s;
    }
  }
  return WaitServing(i, absl::Seconds(30));
}

absl::StatusOr<std::string> EtcdServer::Metrics(int i,
                                                const std::string& path) const {
  absl::StatusOr<std::string> reply = TcpExchange(
      members_[i]->metrics_port,
      absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n"), absl::Seconds(2));
  if (!reply.ok()) return reply.status();
  const size_t body = reply->find("\r\n\r\n");
  if (body == std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat("etcd member ", i, " sent no HTTP answer to GET ", path));
  }
  return reply->substr(body + 4);
}

absl::Status EtcdServer::WaitServing(int i, absl::Duration timeout) const {
  const Member& m = *members_[i];
  // /health is true once the member has a leader and serves requests.
  return WaitUntil(
      [&] {
        absl::StatusOr<std::string> health = Metrics(i, "/health");
        return health.ok() && absl::StrContains(*health, "\"health\":\"true\"");
      },
      timeout,
      absl::StrCat("etcd member ", m.name, " serving on port ", m.client_port),
      m.log_path);
}

void EtcdServer::StopMember(int i) {
  members_[i]->process.Stop(absl::Seconds(3));
}

void EtcdServer::KillMember(int i) { members_[i]->process.Kill(); }

void EtcdServer::StopAll() {
  for (int i = 0; i < size(); ++i) StopMember(i);
}

absl::Status EtcdServer::StartAll() {
  // All first: a member of a cluster serves only once a quorum is up.
  for (auto& m : members_) {
    if (m->process.Running()) continue;
    if (absl::Status s = m->process.Spawn(Argv(*m), m->log_path); !s.ok()) {
      return s;
    }
  }
  for (int i = 0; i < size(); ++i) {
    if (absl::Status s = WaitServing(i, absl::Seconds(30)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status EtcdServer::Restart() {
  StopAll();
  return StartAll();
}

absl::StatusOr<int> EtcdServer::Leader() const {
  for (int i = 0; i < size(); ++i) {
    if (!members_[i]->process.Running()) continue;
    absl::StatusOr<std::string> metrics = Metrics(i, "/metrics");
    if (metrics.ok() &&
        absl::StrContains(*metrics, "\netcd_server_is_leader 1\n")) {
      return i;
    }
  }
  return absl::UnavailableError("no etcd member says it leads");
}

absl::StatusOr<int64_t> EtcdServer::CallsHandled(
    const std::string& method) const {
  return CallsCounted("grpc_server_handled_total", method);
}

absl::StatusOr<int64_t> EtcdServer::CallsStarted(
    const std::string& method) const {
  return CallsCounted("grpc_server_started_total", method);
}

absl::StatusOr<int64_t> EtcdServer::CallsCounted(
    absl::string_view counter, const std::string& method) const {
  const std::string series = absl::StrCat(counter, "{");
  const std::string label = absl::StrCat("grpc_method=\"", method, "\"");
  double calls = 0;
  for (int i = 0; i < size(); ++i) {
    if (!members_[i]->process.Running()) continue;
    absl::StatusOr<std::string> metrics = Metrics(i, "/metrics");
    if (!metrics.ok()) return metrics.status();
    // One line per code: `series{...grpc_method="M"...} 12`.
    for (absl::string_view line : absl::StrSplit(*metrics, '\n')) {
      if (!absl::StartsWith(line, series) || !absl::StrContains(line, label)) {
        continue;
      }
      double value = 0;
      if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) {
        return absl::InternalError(absl::StrCat(
            "etcd member ", i, " has an unreadable metric: ", line));
      }
      calls += value;
    }
  }
  return static_cast<int64_t>(calls);
}

absl::Status EtcdServer::WaitForLeader(absl::Duration timeout) const {
  return WaitUntil(
      [&] {
        if (!Leader().ok()) return false;
        for (int i = 0; i < size(); ++i) {
          if (!members_[i]->process.Running()) continue;
          absl::StatusOr<std::string> health = Metrics(i, "/health");
          if (!health.ok() ||
              !absl::StrContains(*health, "\"health\":\"true\"")) {
            return false;
          }
        }
        return true;
      },
      timeout, "an etcd leader every running member follows");
}

absl::StatusOr<std::string> EtcdServer::Etcdctl(
    const std::vector<std::string>& args, const std::string& input) const {
  std::vector<std::string> argv = {
      kEtcdctl, "--endpoints",       Hosts(), "--dial-timeout",
      "3s",     "--command-timeout", "10s"};
  if (options_.tls) {
    argv.insert(argv.end(), {"--cacert", certificates_.ca});
    if (options_.client_cert_auth) {
      argv.insert(argv.end(), {"--cert", certificates_.client_cert, "--key",
                               certificates_.client_key});
    }
  }
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  if (auth_enabled_) {
    env.push_back(
        absl::StrCat("ETCDCTL_USER=", kRootUser, ":", password(kRootUser)));
  }
  return RunCommand(argv, input, env);
}

absl::Status EtcdServer::Compact(int64_t revision) const {
  return Etcdctl({"compact", absl::StrCat(revision), "--physical"}).status();
}

absl::Status EtcdServer::SetUpAuth() {
  for (const char* user : {kRootUser, kUser, kOutsider}) {
    passwords_[user] = RandomPassword();
  }
  // Users get their passwords on etcdctl's standard input, never in argv.
  const std::vector<std::pair<std::vector<std::string>, std::string>> steps = {
      {{"user", "add", kRootUser, "--interactive=false"},
       password(kRootUser) + "\n"},
      {{"user", "grant-role", kRootUser, "root"}, ""},
      {{"role", "add", kUser}, ""},
      {{"role", "grant-permission", kUser, "readwrite", kUserPrefix,
        "--prefix=true"},
       ""},
      {{"user", "add", kUser, "--interactive=false"}, password(kUser) + "\n"},
      {{"user", "grant-role", kUser, kUser}, ""},
      {{"user", "add", kOutsider, "--interactive=false"},
       password(kOutsider) + "\n"},
      {{"auth", "enable"}, ""},
  };
  for (const auto& [args, input] : steps) {
    absl::StatusOr<std::string> out = Etcdctl(args, input);
    if (!out.ok()) return out.status();
  }
  auth_enabled_ = true;
  return absl::OkStatus();
}

}  // namespace dlock::test
