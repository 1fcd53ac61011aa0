#include "redis_sentinel_group.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "tls_certificates.h"

namespace dlock::test {
namespace {

constexpr char kRedisServer[] = "/usr/bin/redis-server";
constexpr int kSentinels = 3;
constexpr int kQuorum = 2;

// A flat array of names and values (how Sentinel describes an instance).
std::map<std::string, std::string> Fields(const RespReply& reply) {
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
    fields[reply.elements[i].text] = reply.elements[i + 1].text;
  }
  return fields;
}

// "" when the server on `port` answers ROLE as master, else what it is.
std::string NotMasterProblem(int port) {
  absl::StatusOr<RespReply> role = RedisQuery(port, {"ROLE"});
  if (!role.ok()) return std::string(role.status().message());
  if (role->elements.empty() || role->elements[0].text != "master") {
    return absl::StrCat("server ", port, " does not answer ROLE as master (",
                        role->elements.empty() ? "?" : role->elements[0].text,
                        ")");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> RedisSentinelGroup::Start(
    const Options& options) {
  if (absl::Status s = RequireExecutable(kRedisServer, "redis-server");
      !s.ok()) {
    return s;
  }
  std::unique_ptr<RedisSentinelGroup> group(new RedisSentinelGroup(options));
  absl::StatusOr<std::unique_ptr<RedisServer>> master =
      RedisServer::Start({.tls = options.tls});
  if (!master.ok()) return master.status();
  const int master_port = (*master)->port();
  group->servers_.push_back(*std::move(master));
  absl::StatusOr<std::unique_ptr<RedisServer>> replica =
      RedisServer::Start({.replicaof_port = master_port, .tls = options.tls});
  if (!replica.ok()) return replica.status();
  const int replica_port = (*replica)->port();
  group->servers_.push_back(*std::move(replica));

  // Sentinels learn of the replica from the master's INFO: started once the
  // replica is connected, they know it from their first look.
  if (absl::Status s = group->Settle(
          "the replica's first sync",
          [replica_port]() -> std::string {
            absl::StatusOr<std::map<std::string, std::string>> info =
                RedisInfo(replica_port, "replication");
            if (!info.ok()) return std::string(info.status().message());
            if ((*info)["master_link_status"] == "up") return "";
            return absl::StrCat(
                "server ", replica_port,
                " has master_link_status:", (*info)["master_link_status"]);
          });
      !s.ok()) {
    return s;
  }

  absl::StatusOr<std::string> dir = MakeTempDir("dlock-sentinel");
  if (!dir.ok()) return dir.status();
  group->dir_ = *dir;
  for (int i = 0; i < kSentinels; ++i) {
    group->sentinels_.push_back(std::make_unique<Sentinel>());
    if (absl::Status s =
            group->StartSentinel(*group->sentinels_.back(), master_port);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = group->WaitUntilSettled(); !s.ok()) return s;
  return group;
}

absl::Status RedisSentinelGroup::StartSentinel(Sentinel& sentinel,
                                               int master_port) {
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  sentinel.port = *port;
  sentinel.config_path = absl::StrCat(dir_, "/sentinel-", *port, ".conf");
  sentinel.log_path = absl::StrCat(dir_, "/sentinel-", *port, ".log");
  const std::string& name = options_.master_name;
  // Each Sentinel rewrites its own file (its id, what it learns).
  std::ofstream conf(sentinel.config_path);
  conf << "bind 127.0.0.1\n";
  if (options_.tls) {
    absl::StatusOr<const TlsCertificates*> certs = SharedTlsCertificates();
    if (!certs.ok()) return certs.status();
    const std::string unix_socket =
        absl::StrCat(dir_, "/sentinel-", *port, ".sock");
    // Clients, the other Sentinels and the servers are all reached over
    // TLS (tls-replication: a Sentinel's links to the servers and to the
    // other Sentinels); the harness goes through the unix socket.
    conf << "port 0\n"
         << "tls-port " << sentinel.port << "\n"
         << "tls-cert-file " << (*certs)->server_cert << "\n"
         << "tls-key-file " << (*certs)->server_key << "\n"
         << "tls-ca-cert-file " << (*certs)->ca << "\n"
         << "tls-auth-clients no\n"
         << "tls-replication yes\n"
         << "unixsocket " << unix_socket << "\n"
         << "unixsocketperm 700\n";
    ReachThroughUnixSocket(sentinel.port, unix_socket);
  } else {
    conf << "port " << sentinel.port << "\n";
  }
  conf << "dir " << dir_ << "\n"
       << "daemonize no\n"
       << "logfile \"\"\n"
       << "sentinel resolve-hostnames no\n"
       << "sentinel monitor " << name << " 127.0.0.1 " << master_port << " "
       << kQuorum << "\n"
       << "sentinel down-after-milliseconds " << name << " "
       << absl::ToInt64Milliseconds(options_.down_after) << "\n"
       << "sentinel failover-timeout " << name << " "
       << absl::ToInt64Milliseconds(options_.failover_timeout) << "\n"
       << "sentinel parallel-syncs " << name << " 1\n";
  conf.close();
  if (!conf) {
    return absl::InternalError(
        absl::StrCat("could not write ", sentinel.config_path));
  }
  if (absl::Status s = sentinel.process.Spawn(
          {kRedisServer, sentinel.config_path, "--sentinel"},
          sentinel.log_path);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WaitUntil(
          [&sentinel] {
            absl::StatusOr<std::string> pong =
                RedisRawReply(sentinel.port, {"PING"}, absl::Milliseconds(200));
            return pong.ok() && *pong == "+PONG\r\n";
          },
          absl::Seconds(10),
          absl::StrCat("Sentinel answering PING on port ", sentinel.port),
          sentinel.log_path);
      !s.ok()) {
    return s;
  }
  // Sentinel's periods suit production, not tests: INFO to a replica every
  // 10 s, hellos (how Sentinels find each other and spread a new master)
  // every 2 s, and a master that reappears as one is turned into a replica
  // only after 4 hello periods. Shorter ones make Start() and Failover()
  // take 1 to 3 s each instead of 10 to 20.
  //
  // The ping period is also how long a Sentinel waits between two attempts
  // to connect, and after a switch the new master's link waits that long
  // after the last attempt on the dead old one, while its down-after clock
  // runs from the switch: with a period as long as down-after (1 s each by
  // default) the new master may be deemed down and failed over at once.
  //
  // A Sentinel whose timer stalled for 2 s (a loaded machine) stops acting
  // for the TILT period, 30 s by default, which would abort a failover under
  // way and outlast every wait here; 2 s is enough for its pings to give it
  // a fresh view.
  const int64_t ping_period_ms = std::clamp<int64_t>(
      absl::ToInt64Milliseconds(options_.down_after) * 3 / 10, 100, 1000);
  absl::StatusOr<RespReply> debug =
      RedisQuery(sentinel.port,
                 {"SENTINEL", "DEBUG", "info-period", "500", "publish-period",
                  "250", "ask-period", "500", "ping-period",
                  absl::StrCat(ping_period_ms), "tilt-period", "2000"});
  if (!debug.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        debug.status().message(),
        "; the Sentinel group needs redis-server 7.0 or later (SENTINEL "
        "DEBUG)"));
  }
  return absl::OkStatus();
}

RedisSentinelGroup::~RedisSentinelGroup() {
  // Sentinels first, so that they do not fail over while the servers stop.
  for (std::unique_ptr<Sentinel>& sentinel : sentinels_) {
    sentinel->process.Stop();
    if (options_.tls) ReachThroughUnixSocket(sentinel->port, "");
  }
  servers_.clear();
  if (!dir_.empty()) RemoveTree(dir_);
}

std::vector<int> RedisSentinelGroup::sentinel_ports() const {
  std::vector<int> ports;
  for (const std::unique_ptr<Sentinel>& sentinel : sentinels_) {
    ports.push_back(sentinel->port);
  }
  return ports;
}

std::vector<std::string> RedisSentinelGroup::sentinel_hosts() const {
  std::vector<std::string> hosts;
  for (int port : sentinel_ports()) {
    hosts.push_back(absl::StrCat("127.0.0.1:", port));
  }
  return hosts;
}

std::string RedisSentinelGroup::SentinelUri() const {
  return absl::StrJoin(sentinel_hosts(), ",");
}

std::vector<int> RedisSentinelGroup::server_ports() const {
  std::vector<int> ports;
  for (const std::unique_ptr<RedisServer>& server : servers_) {
    ports.push_back(server->port());
  }
  return ports;
}

int RedisSentinelGroup::ServerIndex(int port) const {
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->port() == port) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<std::string> RedisSentinelGroup::RawCommand(
    int port, const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("RawCommand: no argv");
  return RedisRawReply(port, argv, absl::Seconds(5));
}

namespace {

absl::StatusOr<int> MasterPortFrom(int sentinel_port,
                                   const std::string& master_name) {
  absl::StatusOr<RespReply> addr = RedisQuery(
      sentinel_port, {"SENTINEL", "get-master-addr-by-name", master_name});
  if (!addr.ok()) return addr.status();
  int port = 0;
  if (addr->elements.size() != 2 ||
      !absl::SimpleAtoi(addr->elements[1].text, &port)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Sentinel ", sentinel_port, " knows no master named ", master_name));
  }
  return port;
}

}  // namespace

absl::StatusOr<int> RedisSentinelGroup::CurrentMasterPort() {
  absl::Status last = absl::FailedPreconditionError("no Sentinel");
  for (const std::unique_ptr<Sentinel>& sentinel : sentinels_) {
    absl::StatusOr<int> port =
        MasterPortFrom(sentinel->port, options_.master_name);
    if (port.ok()) return port;
    last = port.status();
  }
  return last;
}

absl::StatusOr<int> RedisSentinelGroup::AgreedMasterPort() {
  std::vector<std::string> reports;
  std::optional<int> agreed;
  bool disagree = false;
  for (const std::unique_ptr<Sentinel>& sentinel : sentinels_) {
    absl::StatusOr<int> port =
        MasterPortFrom(sentinel->port, options_.master_name);
    if (!port.ok()) return port.status();
    reports.push_back(absl::StrCat(sentinel->port, ": ", *port));
    if (agreed.has_value() && *agreed != *port) disagree = true;
    agreed = *port;
  }
  if (disagree || !agreed.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Sentinels report different masters (",
                     absl::StrJoin(reports, ", "), ")"));
  }
  return *agreed;
}

std::string RedisSentinelGroup::SettledProblem(int* master_port) {
  absl::StatusOr<int> master = AgreedMasterPort();
  if (!master.ok()) return std::string(master.status().message());
  *master_port = *master;
  const int master_index = ServerIndex(*master);
  if (master_index < 0) {
    return absl::StrCat("the Sentinels report master port ", *master,
                        ", none of the servers");
  }
  if (master_index == killed_) {
    return absl::StrCat("the Sentinels still report the killed server ",
                        *master, " as master");
  }
  if (std::string problem = NotMasterProblem(*master); !problem.empty()) {
    return problem;
  }
  if (killed_ >= 0) return "";

  const int replica = servers_[1 - master_index]->port();
  absl::StatusOr<std::map<std::string, std::string>> info =
      RedisInfo(replica, "replication");
  if (!info.ok()) return std::string(info.status().message());
  if ((*info)["role"] != "slave" ||
      (*info)["master_port"] != absl::StrCat(*master) ||
      (*info)["master_link_status"] != "up") {
    return absl::StrCat("server ", replica, " is not yet in sync with ",
                        *master, ": role:", (*info)["role"],
                        " master_port:", (*info)["master_port"],
                        " master_link_status:", (*info)["master_link_status"]);
  }

  const std::string& name = options_.master_name;
  for (const std::unique_ptr<Sentinel>& sentinel : sentinels_) {
    // A failover still under way (flags failover_in_progress) or a master
    // seen as down would make the next SENTINEL FAILOVER fail.
    absl::StatusOr<RespReply> state =
        RedisQuery(sentinel->port, {"SENTINEL", "master", name});
    if (!state.ok()) return std::string(state.status().message());
    if (std::string flags = Fields(*state)["flags"]; flags != "master") {
      return absl::StrCat("Sentinel ", sentinel->port, " sees the master ",
                          *master, " with flags ", flags);
    }
    absl::StatusOr<RespReply> others =
        RedisQuery(sentinel->port, {"SENTINEL", "sentinels", name});
    if (!others.ok()) return std::string(others.status().message());
    if (others->elements.size() != kSentinels - 1) {
      return absl::StrCat("Sentinel ", sentinel->port, " knows ",
                          others->elements.size(), " other Sentinels, not ",
                          kSentinels - 1);
    }
    // What Sentinel requires of a replica it promotes.
    absl::StatusOr<RespReply> replicas =
        RedisQuery(sentinel->port, {"SENTINEL", "replicas", name});
    if (!replicas.ok()) return std::string(replicas.status().message());
    std::map<std::string, std::string> seen;
    for (const RespReply& entry : replicas->elements) {
      std::map<std::string, std::string> fields = Fields(entry);
      if (fields["port"] == absl::StrCat(replica)) seen = std::move(fields);
    }
    if (seen["flags"] != "slave" || seen["master-link-status"] != "ok" ||
        seen["master-port"] != absl::StrCat(*master) ||
        seen["slave-priority"] == "0") {
      return absl::StrCat("Sentinel ", sentinel->port, " does not see server ",
                          replica, " as a sound replica of ", *master,
                          " (flags ", seen["flags"], ", master-link-status ",
                          seen["master-link-status"], ", master-port ",
                          seen["master-port"], ", slave-priority ",
                          seen["slave-priority"], ")");
    }
  }
  return "";
}

absl::Status RedisSentinelGroup::Settle(
    const std::string& what, const std::function<std::string()>& problem) {
  std::string last;
  absl::Status status = WaitUntil(
      [&] {
        last = problem();
        return last.empty();
      },
      options_.settle_timeout, what);
  if (status.ok()) return status;
  return absl::DeadlineExceededError(absl::StrCat(
      status.message(), "; last seen: ", last,
      "\n(an overloaded machine? each log ends with:)\n", LogTails()));
}

std::string RedisSentinelGroup::LogTails() const {
  std::string tails;
  for (const std::unique_ptr<RedisServer>& server : servers_) {
    absl::StrAppend(&tails, "--- redis-server ", server->port(), " (",
                    server->log_path(), "):\n",
                    FileTail(server->log_path(), 800), "\n");
  }
  for (const std::unique_ptr<Sentinel>& sentinel : sentinels_) {
    absl::StrAppend(&tails, "--- Sentinel ", sentinel->port, " (",
                    sentinel->log_path, "):\n",
                    FileTail(sentinel->log_path, 1500), "\n");
  }
  return tails;
}

absl::Status RedisSentinelGroup::WaitUntilSettled() {
  int master = 0;
  return Settle("the Sentinel group settling",
                [&] { return SettledProblem(&master); });
}

absl::Status RedisSentinelGroup::WaitUntilReplicaCaughtUp() {
  absl::StatusOr<int> master = CurrentMasterPort();
  if (!master.ok()) return master.status();
  const int master_index = ServerIndex(*master);
  if (master_index < 0 || killed_ >= 0 || paused_ >= 0) {
    return absl::FailedPreconditionError(
        "WaitUntilReplicaCaughtUp() needs a master and its replica running: "
        "call RestartKilled() or ResumePaused() first");
  }
  absl::StatusOr<std::map<std::string, std::string>> info =
      RedisInfo(*master, "replication");
  if (!info.ok()) return info.status();
  int64_t written = 0;
  if (!absl::SimpleAtoi((*info)["master_repl_offset"], &written)) {
    return absl::InternalError(
        absl::StrCat("no master_repl_offset in INFO of server ", *master));
  }
  const int replica = servers_[1 - master_index]->port();
  return Settle(
      absl::StrCat("server ", replica, " applying the writes of ", *master,
                   " up to offset ", written),
      [&]() -> std::string {
        absl::StatusOr<std::map<std::string, std::string>> info =
            RedisInfo(replica, "replication");
        if (!info.ok()) return std::string(info.status().message());
        int64_t applied = 0;
        if (absl::SimpleAtoi((*info)["slave_repl_offset"], &applied) &&
            applied >= written) {
          return "";
        }
        return absl::StrCat("slave_repl_offset:", (*info)["slave_repl_offset"]);
      });
}

absl::StatusOr<int> RedisSentinelGroup::WaitForFailoverFrom(
    int old_master_port) {
  int new_master = 0;
  absl::Status status =
      Settle(absl::StrCat("a failover from master ", old_master_port),
             [&]() -> std::string {
               absl::StatusOr<int> master = AgreedMasterPort();
               if (!master.ok()) return std::string(master.status().message());
               if (*master == old_master_port) {
                 return absl::StrCat("every Sentinel still reports master ",
                                     old_master_port);
               }
               new_master = *master;
               return NotMasterProblem(*master);
             });
  if (!status.ok()) return status;
  return new_master;
}

absl::Status RedisSentinelGroup::Failover() {
  if (killed_ >= 0 || paused_ >= 0) {
    return absl::FailedPreconditionError(
        "Failover() needs both servers running: call RestartKilled() or "
        "ResumePaused() first");
  }
  if (absl::Status s = WaitUntilSettled(); !s.ok()) return s;
  // Sentinel promotes the replica as it is: without this, a write the
  // master acknowledged a moment ago could be lost.
  if (absl::Status s = WaitUntilReplicaCaughtUp(); !s.ok()) return s;
  absl::StatusOr<int> old_master = AgreedMasterPort();
  if (!old_master.ok()) return old_master.status();
  const int sentinel = sentinels_[0]->port;
  const std::string& name = options_.master_name;
  if (absl::Status s =
          Settle(absl::StrCat("a failover from master ", *old_master,
                              " asked of Sentinel ", sentinel),
                 [&]() -> std::string {
                   absl::StatusOr<int> seen = MasterPortFrom(sentinel, name);
                   if (!seen.ok()) return std::string(seen.status().message());
                   if (*seen != *old_master) {
                     absl::StatusOr<int> agreed = AgreedMasterPort();
                     if (!agreed.ok())
                       return std::string(agreed.status().message());
                     return NotMasterProblem(*agreed);
                   }
                   // Asked again when no failover is under way: the first time,
                   // and after one was aborted (by a TILT after a stall, say).
                   absl::StatusOr<RespReply> state =
                       RedisQuery(sentinel, {"SENTINEL", "master", name});
                   if (!state.ok())
                     return std::string(state.status().message());
                   if (!absl::StrContains(Fields(*state)["flags"],
                                          "failover_in_progress")) {
                     // -NOGOODSLAVE while its view of the replica is stale.
                     absl::StatusOr<RespReply> reply =
                         RedisQuery(sentinel, {"SENTINEL", "FAILOVER", name});
                     if (!reply.ok())
                       return std::string(reply.status().message());
                   }
                   return absl::StrCat("Sentinel ", sentinel,
                                       " still reports master ", *old_master);
                 });
      !s.ok()) {
    return s;
  }
  // The Sentinels turn the old master into a replica only once they see it
  // still acting as master, a moment after the switch.
  return WaitUntilSettled();
}

absl::Status RedisSentinelGroup::KillMaster() {
  if (killed_ >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("server ", servers_[killed_]->port(),
                     " is killed already: call RestartKilled() first"));
  }
  absl::StatusOr<int> master = CurrentMasterPort();
  if (!master.ok()) return master.status();
  const int index = ServerIndex(*master);
  if (index < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the Sentinels report master port ", *master, ", none of the servers"));
  }
  servers_[index]->Kill();
  killed_ = index;
  if (paused_ == index) paused_ = -1;
  return absl::OkStatus();
}

void RedisSentinelGroup::StopServers() {
  for (auto& server : servers_) server->StopServer();
}

absl::Status RedisSentinelGroup::StartServers() {
  // The master first, so that its replica finds it.
  absl::StatusOr<int> master = AgreedMasterPort();
  const int first =
      master.ok() && ServerIndex(*master) >= 0 ? ServerIndex(*master) : 0;
  for (int i : {first, 1 - first}) {
    if (absl::Status s = servers_[i]->StartServer(); !s.ok()) return s;
  }
  killed_ = -1;
  paused_ = -1;
  return WaitUntilSettled();
}

absl::Status RedisSentinelGroup::RestartKilled() {
  if (killed_ < 0) {
    return absl::FailedPreconditionError(
        "no server is killed: call KillMaster() first");
  }
  RedisServer& server = *servers_[killed_];
  const int port = server.port();
  // Unless the Sentinels still take it for the master (no failover yet).
  absl::StatusOr<int> master = AgreedMasterPort();
  if (absl::Status s = server.StartServer(); !s.ok()) return s;
  killed_ = -1;
  if (master.ok() && *master != port) {
    // The Sentinels would make it the master's replica a moment later. Done
    // now, and unpromotable (replica-priority 0) until in sync, so that a
    // failover in between cannot promote it empty and wipe the group.
    for (const std::vector<std::string>& command :
         std::vector<std::vector<std::string>>{
             {"CONFIG", "SET", "replica-priority", "0"},
             {"REPLICAOF", "127.0.0.1", absl::StrCat(*master)}}) {
      if (absl::StatusOr<RespReply> reply = RedisQuery(port, command);
          !reply.ok()) {
        return reply.status();
      }
    }
    if (absl::Status s = Settle(
            absl::StrCat("restarted server ", port, " syncing with ", *master),
            [&]() -> std::string {
              absl::StatusOr<std::map<std::string, std::string>> info =
                  RedisInfo(port, "replication");
              if (!info.ok()) return std::string(info.status().message());
              if ((*info)["master_link_status"] == "up") return "";
              return absl::StrCat("master_link_status:",
                                  (*info)["master_link_status"]);
            });
        !s.ok()) {
      return s;
    }
    if (absl::StatusOr<RespReply> reply =
            RedisQuery(port, {"CONFIG", "SET", "replica-priority", "100"});
        !reply.ok()) {
      return reply.status();
    }
  }
  if (absl::Status s = WaitUntilSettled(); !s.ok()) return s;
  if (!master.ok()) return absl::OkStatus();
  if (absl::StatusOr<int> now = AgreedMasterPort();
      now.ok() && *now != *master) {
    return absl::InternalError(
        absl::StrCat("the Sentinels failed over from ", *master, " to ", *now,
                     " while server ", port,
                     " restarted (a stalled machine?):\n", LogTails()));
  }
  return absl::OkStatus();
}

absl::Status RedisSentinelGroup::NonePaused() const {
  if (paused_ < 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("server ", servers_[paused_]->port(),
                   " is paused already: call ResumePaused() first"));
}

absl::Status RedisSentinelGroup::PauseMaster() {
  if (absl::Status s = NonePaused(); !s.ok()) return s;
  absl::StatusOr<int> master = CurrentMasterPort();
  if (!master.ok()) return master.status();
  const int index = ServerIndex(*master);
  if (index < 0 || index == killed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Sentinels report master port ", *master,
                     ", which is no running server"));
  }
  servers_[index]->Pause();
  paused_ = index;
  return absl::OkStatus();
}

absl::Status RedisSentinelGroup::PauseReplica() {
  if (absl::Status s = NonePaused(); !s.ok()) return s;
  absl::StatusOr<int> master = CurrentMasterPort();
  if (!master.ok()) return master.status();
  const int master_index = ServerIndex(*master);
  if (master_index < 0 || killed_ >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PauseReplica() needs a master and its replica running (master ",
        *master, ", killed: ", killed_ >= 0 ? "one" : "none", ")"));
  }
  const int index = 1 - master_index;
  servers_[index]->Pause();
  paused_ = index;
  // The replica cannot reconnect while stopped; until it does, writes stay
  // in the master's backlog.
  if (absl::StatusOr<RespReply> killed =
          RedisQuery(*master, {"CLIENT", "KILL", "TYPE", "replica"});
      !killed.ok()) {
    servers_[index]->Resume();
    paused_ = -1;
    return killed.status();
  }
  return absl::OkStatus();
}

absl::Status RedisSentinelGroup::ResumePaused() {
  if (paused_ < 0) {
    return absl::FailedPreconditionError(
        "no server is paused: call PauseMaster() or PauseReplica() first");
  }
  servers_[paused_]->Resume();
  paused_ = -1;
  return absl::OkStatus();
}

absl::StatusOr<int> RedisSentinelGroup::FailoverLosingWrites(
    const std::function<absl::Status()>& write) {
  // Only `write` may be missing from the replica.
  if (absl::Status s = WaitUntilSettled(); !s.ok()) return s;
  if (absl::Status s = WaitUntilReplicaCaughtUp(); !s.ok()) return s;
  absl::StatusOr<int> old_master = AgreedMasterPort();
  if (!old_master.ok()) return old_master.status();
  if (absl::Status s = PauseReplica(); !s.ok()) return s;
  if (absl::Status s = write(); !s.ok()) {
    (void)ResumePaused();
    return absl::FailedPreconditionError(absl::StrCat(
        "the write to lose failed, nothing was killed: ", s.message()));
  }
  if (absl::Status s = KillMaster(); !s.ok()) {
    (void)ResumePaused();
    return s;
  }
  if (absl::Status s = ResumePaused(); !s.ok()) return s;
  return WaitForFailoverFrom(*old_master);
}

}  // namespace dlock::test
