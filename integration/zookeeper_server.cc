#include "zookeeper_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace dlock::test {
namespace {

constexpr char kJava[] = "/usr/bin/java";
constexpr char kZooKeeperJar[] = "/usr/share/java/zookeeper.jar";
// Debian's jar lists its dependencies in its manifest; slf4j-simple, when
// present, makes the server log (warnings and up) into the member's log.
constexpr char kSlf4jSimple[] = "/usr/share/java/slf4j-simple.jar";

absl::Status RequireZooKeeper() {
  if (access(kJava, X_OK) != 0 || access(kZooKeeperJar, R_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kJava, " or ", kZooKeeperJar,
        " is missing: install ZooKeeper with `apt-get install -y zookeeper` "
        "(scripts/test.sh does this)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZooKeeperServer>> ZooKeeperServer::Start(
    const Options& options) {
  if (absl::Status s = RequireZooKeeper(); !s.ok()) return s;
  if (options.servers < 1) {
    return absl::InvalidArgumentError("a ZooKeeper ensemble needs a server");
  }
  std::unique_ptr<ZooKeeperServer> server(new ZooKeeperServer);
  server->options_ = options;
  absl::StatusOr<std::string> dir = MakeTempDir("dlock-zk");
  if (!dir.ok()) return dir.status();
  server->dir_ = *dir;
  for (int i = 0; i < options.servers; ++i) {
    auto member = std::make_unique<Member>();
    member->id = i + 1;
    for (int* port :
         {&member->client_port, &member->quorum_port, &member->election_port}) {
      absl::StatusOr<int> free_port = FreeLoopbackPort();
      if (!free_port.ok()) return free_port.status();
      *port = *free_port;
    }
    member->dir = absl::StrCat(server->dir_, "/member", member->id);
    member->config_path = absl::StrCat(member->dir, "/zoo.cfg");
    member->log_path = absl::StrCat(member->dir, "/zookeeper.log");
    if (mkdir(member->dir.c_str(), 0755) != 0) {
      return absl::InternalError(absl::StrCat("cannot create ", member->dir));
    }
    server->members_.push_back(std::move(member));
  }
  for (const auto& member : server->members_) {
    if (absl::Status s = server->WriteConfig(*member); !s.ok()) return s;
  }
  if (absl::Status s = server->StartAll(); !s.ok()) return s;
  return server;
}

ZooKeeperServer::~ZooKeeperServer() {
  StopAll();
  RemoveTree(dir_);
}

absl::Status ZooKeeperServer::WriteConfig(const Member& member) const {
  std::ofstream conf(member.config_path);
  conf << "tickTime=" << options_.tick_ms << "\n"
       << "initLimit=10\nsyncLimit=5\n"
       << "dataDir=" << member.dir << "\n"
       << "clientPort=" << member.client_port << "\n"
       << "clientPortAddress=127.0.0.1\n"
       // Four-letter words tell when a member serves and who leads.
       << "4lw.commands.whitelist=*\n"
       << "admin.enableServer=false\n"
       // Short sessions for fault tests; the default cap is 20 ticks.
       << "minSessionTimeout=" << 2 * options_.tick_ms << "\n"
       << "maxSessionTimeout=60000\n"
       // A throwaway server need not fsync each write (zookeeper.forceSync).
       << "forceSync=no\n";
  if (members_.size() > 1) {
    conf << "standaloneEnabled=false\n";
    for (const auto& m : members_) {
      conf << "server." << m->id << "=127.0.0.1:" << m->quorum_port << ":"
           << m->election_port << "\n";
    }
  }
  conf.close();
  std::ofstream myid(absl::StrCat(member.dir, "/myid"));
  myid << member.id << "\n";
  myid.close();
  if (!conf || !myid) {
    return absl::InternalError(
        absl::StrCat("cannot write the config in ", member.dir));
  }
  return absl::OkStatus();
}

std::string ZooKeeperServer::Hosts() const {
  std::vector<std::string> hosts;
  for (const auto& m : members_) {
    hosts.push_back(absl::StrCat("127.0.0.1:", m->client_port));
  }
  return absl::StrJoin(hosts, ",");
}

std::string ZooKeeperServer::Uri(const std::string& ns,
                                 const std::string& extra) const {
  std::vector<std::string> query;
  if (!ns.empty()) query.push_back(absl::StrCat("namespace=", ns));
  if (!extra.empty()) query.push_back(extra);
  std::string uri = absl::StrCat("zk://", Hosts());
  if (!query.empty()) absl::StrAppend(&uri, "?", absl::StrJoin(query, "&"));
  return uri;
}

absl::Status ZooKeeperServer::StartMember(int i) {
  Member& m = *members_[i];
  std::string classpath = absl::StrCat("/etc/zookeeper/conf:", kZooKeeperJar);
  if (access(kSlf4jSimple, R_OK) == 0) {
    absl::StrAppend(&classpath, ":", kSlf4jSimple);
  }
  // A small heap, the serial collector and the client JIT keep a member to
  // about a second of startup and little memory on a shared 2-core box.
  // Empty containers are swept every second instead of every minute, and
  // without the default rate cap, so that the no-growth test is quick.
  absl::Status s = m.process.Spawn(
      {kJava, "-Xmx256m", "-Xss512k", "-XX:+UseSerialGC",
       "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
       "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
       "-Dznode.container.checkIntervalMs=1000",
       "-Dznode.container.maxPerMinute=1000000",
       "-Dzookeeper.jmx.log4j.disable=true", "-cp", classpath,
       "org.apache.zookeeper.server.quorum.QuorumPeerMain", m.config_path},
      m.log_path);
  if (!s.ok()) return s;
  if (members_.size() > 1) return absl::OkStatus();  // quorum waits in StartAll
  return WaitServing(i, absl::Seconds(30));
}

absl::Status ZooKeeperServer::WaitServing(int i, absl::Duration timeout) {
  Member& m = *members_[i];
  return WaitUntil(
      [&m] {
        // A member that could not bind its port (another test's server
        // took it after FreeLoopbackPort()) has exited; the answer on that
        // port would be the other server's.
        if (!m.process.Running()) return false;
        absl::StatusOr<std::string> ok =
            TcpExchange(m.client_port, "ruok", absl::Milliseconds(300));
        if (!ok.ok() || *ok != "imok") return false;
        // `srvr` names a mode only once the member serves clients.
        absl::StatusOr<std::string> srvr =
            TcpExchange(m.client_port, "srvr", absl::Milliseconds(300));
        return srvr.ok() && absl::StrContains(*srvr, "Mode: ");
      },
      timeout,
      absl::StrCat("ZooKeeper member ", m.id, " serving on port ",
                   m.client_port),
      m.log_path);
}

void ZooKeeperServer::StopMember(int i) {
  members_[i]->process.Stop(absl::Seconds(3));
}

void ZooKeeperServer::KillMember(int i) { members_[i]->process.Kill(); }

void ZooKeeperServer::StopAll() {
  for (int i = 0; i < size(); ++i) StopMember(i);
}

absl::Status ZooKeeperServer::StartAll() {
  for (int i = 0; i < size(); ++i) {
    if (members_[i]->process.Running()) continue;
    if (absl::Status s = StartMember(i); !s.ok()) return s;
  }
  for (int i = 0; i < size(); ++i) {
    if (absl::Status s = WaitServing(i, absl::Seconds(45)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ZooKeeperServer::Restart() {
  StopAll();
  return StartAll();
}

absl::StatusOr<int> ZooKeeperServer::Leader() const {
  for (int i = 0; i < size(); ++i) {
    absl::StatusOr<std::string> srvr =
        TcpExchange(members_[i]->client_port, "srvr", absl::Milliseconds(500));
    if (!srvr.ok()) continue;
    if (absl::StrContains(*srvr, "Mode: leader") ||
        absl::StrContains(*srvr, "Mode: standalone")) {
      return i;
    }
  }
  return absl::UnavailableError("no ZooKeeper member says it leads");
}

absl::StatusOr<int64_t> ZooKeeperServer::ZnodeCount(int i) const {
  absl::StatusOr<std::string> mntr =
      TcpExchange(members_[i]->client_port, "mntr", absl::Seconds(2));
  if (!mntr.ok()) return mntr.status();
  for (absl::string_view line : absl::StrSplit(*mntr, '\n')) {
    absl::string_view value = line;
    if (!absl::ConsumePrefix(&value, "zk_znode_count")) continue;
    int64_t count = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &count)) {
      return count;
    }
  }
  return absl::InternalError("mntr did not report zk_znode_count");
}

}  // namespace dlock::test
