#include "redis_cluster.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server_process.h"

namespace dlock::test {
namespace {

constexpr int kSlots = 16384;

// Who serves each slot as one node's CLUSTER SLOTS says: the master's port
// per slot (0: none).
absl::StatusOr<std::vector<int>> SlotMasters(int port) {
  absl::StatusOr<RespReply> slots = RedisQuery(port, {"CLUSTER", "SLOTS"});
  if (!slots.ok()) return slots.status();
  std::vector<int> owners(kSlots, 0);
  for (const RespReply& range : slots->elements) {
    int first = 0, last = 0, owner = 0;
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2 ||
        !absl::SimpleAtoi(range.elements[0].text, &first) ||
        !absl::SimpleAtoi(range.elements[1].text, &last) ||
        !absl::SimpleAtoi(range.elements[2].elements[1].text, &owner) ||
        first < 0 || last >= kSlots || first > last) {
      return absl::InternalError(
          absl::StrCat("node ", port, " gave a malformed CLUSTER SLOTS"));
    }
    for (int s = first; s <= last; ++s) owners[s] = owner;
  }
  return owners;
}

// The "name:value" lines of CLUSTER INFO.
absl::StatusOr<std::map<std::string, std::string>> ClusterInfo(int port) {
  absl::StatusOr<RespReply> info = RedisQuery(port, {"CLUSTER", "INFO"});
  if (!info.ok()) return info.status();
  return InfoFields(info->text);
}

// Each master's config epoch as one node's CLUSTER NODES says ("<id>
// <addr> <flags> <master> <ping> <pong> <epoch> <link> <slots>..."), by id;
// failed masters left out.
absl::StatusOr<std::map<std::string, std::string>> MasterEpochs(int port) {
  absl::StatusOr<RespReply> nodes = RedisQuery(port, {"CLUSTER", "NODES"});
  if (!nodes.ok()) return nodes.status();
  std::map<std::string, std::string> epochs;
  for (absl::string_view line : absl::StrSplit(nodes->text, '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 8 || !absl::StrContains(fields[2], "master") ||
        absl::StrContains(fields[2], "fail")) {
      continue;
    }
    epochs[fields[0]] = fields[6];
  }
  return epochs;
}

// The replicas a master's INFO replication lists, each as its fields
// ("slave0:ip=127.0.0.1,port=7004,state=online,offset=...,lag=0").
std::vector<std::map<std::string, std::string>> Replicas(
    std::map<std::string, std::string>& replication) {
  std::vector<std::map<std::string, std::string>> replicas;
  for (int i = 0; replication.count(absl::StrCat("slave", i)) > 0; ++i) {
    std::map<std::string, std::string>& replica = replicas.emplace_back();
    for (absl::string_view field :
         absl::StrSplit(replication[absl::StrCat("slave", i)], ',')) {
      replica.insert(absl::StrSplit(field, absl::MaxSplits('=', 1)));
    }
  }
  return replicas;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(
    const Options& options) {
  if (options.masters < 1 || options.replicas_per_master < 0) {
    return absl::InvalidArgumentError("a cluster needs a master");
  }
  std::unique_ptr<RedisCluster> cluster(new RedisCluster(options));
  const int nodes = options.masters * (1 + options.replicas_per_master);
  for (int i = 0; i < nodes; ++i) {
    absl::StatusOr<std::unique_ptr<RedisServer>> server =
        RedisServer::Start({.tls = options.tls,
                            .cluster_enabled = true,
                            .cluster_node_timeout = options.node_timeout,
                            .own_session = true});
    if (!server.ok()) return server.status();
    cluster->servers_.push_back(*std::move(server));
  }
  if (absl::Status s = cluster->Form(); !s.ok()) return s;
  return cluster;
}

absl::Status RedisCluster::Form() {
  const int masters = options_.masters;
  for (int i = 0; i < masters; ++i) {
    const int first = kSlots * i / masters;
    const int last = kSlots * (i + 1) / masters - 1;
    absl::StatusOr<RespReply> added = Query(
        servers_[i]->port(),
        {"CLUSTER", "ADDSLOTSRANGE", absl::StrCat(first), absl::StrCat(last)});
    if (!added.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          added.status().message(),
          "; the cluster harness needs redis-server 7.0 or later"));
    }
  }
  if (absl::Status s = Meet(); !s.ok()) return s;
  for (size_t i = masters; i < servers_.size(); ++i) {
    absl::StatusOr<std::string> master = NodeId(servers_[i % masters]->port());
    if (!master.ok()) return master.status();
    // Retried: a node may not have heard the master's flags yet.
    absl::Status replicated = Settle(
        absl::StrCat("node ", servers_[i]->port(), " becoming a replica"),
        [&]() -> std::string {
          absl::StatusOr<RespReply> r =
              Query(servers_[i]->port(), {"CLUSTER", "REPLICATE", *master});
          return r.ok() ? "" : std::string(r.status().message());
        });
    if (!replicated.ok()) return replicated;
  }
  return WaitUntilSettled();
}

absl::Status RedisCluster::Meet() {
  const absl::Duration stall = options_.first_node_stalled_while_met;
  if (stall > absl::ZeroDuration()) servers_[0]->Pause();
  absl::Status met = MeetFirstNode();
  if (stall > absl::ZeroDuration()) {
    absl::SleepFor(stall);
    servers_[0]->Resume();
  }
  if (!met.ok()) return met;
  // A node forgets a handshake that did not finish within the node timeout
  // (1 s at least), and the node it met never tells it again: a first node
  // stalled past it (a loaded machine) knows the others, but they never
  // learn of it, nor of each other from its gossip. So they meet it again,
  // each time a handshake could have timed out, until every node knows
  // every other (meeting a known node changes nothing).
  const absl::Duration handshake_timeout =
      std::max(options_.node_timeout, absl::Seconds(1));
  absl::Time last_met = absl::Now();
  return Settle("every node meeting every other", [&]() -> std::string {
    std::string problem = UnmetProblem();
    if (!problem.empty() && absl::Now() - last_met > handshake_timeout) {
      if (absl::Status s = MeetFirstNode(); !s.ok()) {
        return std::string(s.message());
      }
      last_met = absl::Now();
    }
    return problem;
  });
}

absl::Status RedisCluster::MeetFirstNode() {
  const std::string first_port = absl::StrCat(servers_[0]->port());
  const std::string first_bus = absl::StrCat(servers_[0]->cluster_bus_port());
  for (size_t i = 1; i < servers_.size(); ++i) {
    absl::StatusOr<RespReply> met =
        Query(servers_[i]->port(),
              {"CLUSTER", "MEET", "127.0.0.1", first_port, first_bus});
    if (!met.ok()) return met.status();
  }
  return absl::OkStatus();
}

std::string RedisCluster::UnmetProblem() {
  const std::string count = absl::StrCat(servers_.size());
  for (const auto& server : servers_) {
    auto info = ClusterInfo(server->port());
    if (!info.ok()) return std::string(info.status().message());
    if ((*info)["cluster_known_nodes"] != count) {
      return absl::StrCat("node ", server->port(), " knows ",
                          (*info)["cluster_known_nodes"], " nodes of ", count);
    }
  }
  return "";
}

RedisCluster::~RedisCluster() { servers_.clear(); }

std::vector<int> RedisCluster::ports() const {
  std::vector<int> out;
  for (const auto& server : servers_) out.push_back(server->port());
  return out;
}

std::string RedisCluster::Seeds() const {
  std::vector<std::string> hosts;
  for (int port : ports()) hosts.push_back(absl::StrCat("127.0.0.1:", port));
  return absl::StrJoin(hosts, ",");
}

RedisServer* RedisCluster::Server(int port) {
  for (const auto& server : servers_) {
    if (server->port() == port) return server.get();
  }
  return nullptr;
}

absl::StatusOr<RespReply> RedisCluster::Query(
    int port, const std::vector<std::string>& argv) {
  return RedisQuery(port, argv);
}

absl::StatusOr<std::string> RedisCluster::NodeId(int port) {
  absl::StatusOr<RespReply> id = Query(port, {"CLUSTER", "MYID"});
  if (!id.ok()) return id.status();
  return id->text;
}

absl::StatusOr<std::vector<int>> RedisCluster::CurrentSlotMasters() {
  absl::Status last = absl::UnavailableError("no node of the cluster runs");
  for (const auto& server : servers_) {
    absl::StatusOr<std::vector<int>> owners = SlotMasters(server->port());
    if (owners.ok()) return owners;
    last = owners.status();
  }
  return last;
}

absl::StatusOr<int> RedisCluster::MasterOfSlot(int slot) {
  absl::StatusOr<std::vector<int>> owners = CurrentSlotMasters();
  if (!owners.ok()) return owners.status();
  if ((*owners)[slot] == 0) {
    return absl::UnavailableError(
        absl::StrCat("the cluster knows no master of slot ", slot));
  }
  return (*owners)[slot];
}

absl::StatusOr<std::vector<int>> RedisCluster::MasterPorts() {
  absl::StatusOr<std::vector<int>> owners = CurrentSlotMasters();
  if (!owners.ok()) return owners.status();
  std::vector<int> masters;
  for (int owner : *owners) {
    if (owner != 0 && !absl::c_linear_search(masters, owner)) {
      masters.push_back(owner);
    }
  }
  return masters;
}

std::string RedisCluster::SettledProblem() {
  std::optional<std::vector<int>> agreed;
  std::optional<std::map<std::string, std::string>> agreed_epochs;
  for (const auto& server : servers_) {
    const int port = server->port();
    absl::StatusOr<std::map<std::string, std::string>> info = ClusterInfo(port);
    if (!info.ok()) {
      // A node killed or stopped is left out, but one that runs and did not
      // answer in time (on a loaded machine) has not been seen settled.
      if (!server->Running()) continue;
      return std::string(info.status().message());
    }
    if ((*info)["cluster_state"] != "ok") {
      return absl::StrCat("node ", port,
                          " has cluster_state:", (*info)["cluster_state"]);
    }
    absl::StatusOr<std::vector<int>> owners = SlotMasters(port);
    if (!owners.ok()) return std::string(owners.status().message());
    for (int s = 0; s < kSlots; ++s) {
      if ((*owners)[s] == 0) {
        return absl::StrCat("node ", port, " knows no master of slot ", s);
      }
    }
    if (agreed.has_value() && *agreed != *owners) {
      return absl::StrCat("node ", port, " sees other slot masters");
    }
    agreed = *std::move(owners);
    // A new cluster's masters settle their config epochs after the slots
    // (colliding epochs are bumped): a replica that takes over with an
    // epoch other nodes have seen bumped since is refused their votes.
    absl::StatusOr<std::map<std::string, std::string>> epochs =
        MasterEpochs(port);
    if (!epochs.ok()) return std::string(epochs.status().message());
    std::set<std::string> distinct;
    for (const auto& [id, epoch] : *epochs) distinct.insert(epoch);
    if (distinct.size() != epochs->size()) {
      return absl::StrCat("node ", port, " sees masters share an epoch");
    }
    if (agreed_epochs.has_value() && *agreed_epochs != *epochs) {
      return absl::StrCat("node ", port, " sees other master epochs");
    }
    agreed_epochs = *std::move(epochs);
    absl::StatusOr<std::map<std::string, std::string>> replication =
        RedisInfo(port, "replication");
    if (!replication.ok()) return std::string(replication.status().message());
    if ((*replication)["role"] == "slave" &&
        (*replication)["master_link_status"] != "up") {
      return absl::StrCat("replica ", port, " has master_link_status:",
                          (*replication)["master_link_status"]);
    }
  }
  if (!agreed.has_value()) return "no node of the cluster answers";
  return "";
}

absl::Status RedisCluster::WaitUntilSettled() {
  return Settle("the cluster settling", [this] { return SettledProblem(); });
}

absl::Status RedisCluster::Settle(const std::string& what,
                                  const std::function<std::string()>& problem) {
  std::string last;
  const absl::Time deadline = absl::Now() + options_.settle_timeout;
  while (true) {
    last = problem();
    if (last.empty()) return absl::OkStatus();
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(what, " did not happen within ",
                   absl::FormatDuration(options_.settle_timeout), ": ", last,
                   "\nend of the nodes' logs:\n", LogTails()));
}

absl::Status RedisCluster::BeginSlotMigration(int slot, int to_port) {
  absl::StatusOr<int> from = MasterOfSlot(slot);
  if (!from.ok()) return from.status();
  absl::StatusOr<std::string> from_id = NodeId(*from);
  if (!from_id.ok()) return from_id.status();
  absl::StatusOr<std::string> to_id = NodeId(to_port);
  if (!to_id.ok()) return to_id.status();
  const std::string s = absl::StrCat(slot);
  if (auto r = Query(to_port, {"CLUSTER", "SETSLOT", s, "IMPORTING", *from_id});
      !r.ok()) {
    return r.status();
  }
  return Query(*from, {"CLUSTER", "SETSLOT", s, "MIGRATING", *to_id}).status();
}

absl::Status RedisCluster::FinishSlotMigration(int slot, int to_port) {
  absl::StatusOr<int> from = MasterOfSlot(slot);
  if (!from.ok()) return from.status();
  const std::string s = absl::StrCat(slot);
  while (true) {
    absl::StatusOr<RespReply> keys =
        Query(*from, {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (!keys.ok()) return keys.status();
    if (keys->elements.empty()) break;
    std::vector<std::string> migrate = {
        "MIGRATE", "127.0.0.1", absl::StrCat(to_port), "", "0", "5000", "KEYS"};
    for (const RespReply& key : keys->elements) migrate.push_back(key.text);
    if (auto r = Query(*from, migrate); !r.ok()) return r.status();
  }
  absl::StatusOr<std::string> to_id = NodeId(to_port);
  if (!to_id.ok()) return to_id.status();
  // The target first, then the source, then the rest (the order the Redis
  // documentation gives), so that no moment has two owners.
  absl::StatusOr<std::vector<int>> masters = MasterPorts();
  if (!masters.ok()) return masters.status();
  std::vector<int> order = {to_port, *from};
  for (int port : *masters) {
    if (port != to_port && port != *from) order.push_back(port);
  }
  for (int port : order) {
    if (auto r = Query(port, {"CLUSTER", "SETSLOT", s, "NODE", *to_id});
        !r.ok()) {
      return r.status();
    }
  }
  return Settle(absl::StrCat("slot ", slot, " moving to ", to_port),
                [&]() -> std::string {
                  absl::StatusOr<int> owner = MasterOfSlot(slot);
                  if (!owner.ok()) return std::string(owner.status().message());
                  return *owner == to_port ? "" : "not yet";
                });
}

absl::Status RedisCluster::MigrateSlot(int slot, int to_port) {
  if (absl::Status s = BeginSlotMigration(slot, to_port); !s.ok()) return s;
  return FinishSlotMigration(slot, to_port);
}

absl::Status RedisCluster::Kill(int port) {
  RedisServer* server = Server(port);
  if (server == nullptr) {
    return absl::NotFoundError(absl::StrCat("no node on port ", port));
  }
  server->Kill();
  return absl::OkStatus();
}

absl::StatusOr<int> RedisCluster::WaitForFailover(int slot, int old_port) {
  int promoted = 0;
  absl::Status s = Settle(
      absl::StrCat("a replica taking over slot ", slot, " from ", old_port),
      [&]() -> std::string {
        for (const auto& server : servers_) {
          if (server->port() == old_port) continue;
          absl::StatusOr<std::vector<int>> owners = SlotMasters(server->port());
          if (!owners.ok()) return std::string(owners.status().message());
          if ((*owners)[slot] == old_port || (*owners)[slot] == 0) {
            return absl::StrCat("node ", server->port(),
                                " still sees the old master");
          }
          promoted = (*owners)[slot];
        }
        return "";
      });
  if (!s.ok()) return s;
  return promoted;
}

absl::Status RedisCluster::Restart(int port) {
  RedisServer* server = Server(port);
  if (server == nullptr) {
    return absl::NotFoundError(absl::StrCat("no node on port ", port));
  }
  return server->StartServer();
}

absl::StatusOr<int> RedisCluster::ReplicaOf(int master_port) {
  absl::StatusOr<std::map<std::string, std::string>> info =
      RedisInfo(master_port, "replication");
  if (!info.ok()) return info.status();
  for (auto& replica : Replicas(*info)) {
    int port = 0;
    if (absl::SimpleAtoi(replica["port"], &port)) return port;
  }
  return absl::NotFoundError(
      absl::StrCat("the master on port ", master_port, " has no replica"));
}

absl::Status RedisCluster::WaitForReplicasInSync(int master_port) {
  absl::StatusOr<std::map<std::string, std::string>> info =
      RedisInfo(master_port, "replication");
  if (!info.ok()) return info.status();
  const std::string written = (*info)["master_repl_offset"];
  int64_t offset = 0;
  if (!absl::SimpleAtoi(written, &offset)) {
    return absl::InternalError(absl::StrCat(
        "node ", master_port, " gave no master_repl_offset: is it a master?"));
  }
  return Settle(absl::StrCat("the replicas of ", master_port,
                             " reaching offset ", written),
                [&]() -> std::string {
                  info = RedisInfo(master_port, "replication");
                  if (!info.ok()) return std::string(info.status().message());
                  std::vector<std::map<std::string, std::string>> replicas =
                      Replicas(*info);
                  if (replicas.empty()) return "no replica";
                  for (auto& replica : replicas) {
                    int64_t acknowledged = 0;
                    if (replica["state"] != "online" ||
                        !absl::SimpleAtoi(replica["offset"], &acknowledged) ||
                        acknowledged < offset) {
                      return absl::StrCat("replica ", replica["port"], " is ",
                                          replica["state"], " at offset ",
                                          replica["offset"]);
                    }
                  }
                  return "";
                });
}

absl::StatusOr<int> RedisCluster::FailoverLosingWrites(
    int slot, const std::function<absl::Status()>& write) {
  absl::StatusOr<int> master = MasterOfSlot(slot);
  if (!master.ok()) return master.status();
  absl::StatusOr<int> replica = ReplicaOf(*master);
  if (!replica.ok()) return replica.status();
  RedisServer* replica_server = Server(*replica);
  if (replica_server == nullptr) {
    return absl::NotFoundError(absl::StrCat("no node on port ", *replica));
  }
  if (absl::Status s = WaitForReplicasInSync(*master); !s.ok()) return s;
  replica_server->Pause();
  // A stopped replica's kernel would still take the stream in.
  absl::StatusOr<RespReply> dropped =
      Query(*master, {"CLIENT", "KILL", "TYPE", "replica"});
  absl::Status wrote = dropped.ok() ? write() : dropped.status();
  if (absl::Status s = Kill(*master); !s.ok() && wrote.ok()) wrote = s;
  replica_server->Resume();
  if (!wrote.ok()) return wrote;
  return WaitForFailover(slot, *master);
}

void RedisCluster::StopAll() {
  for (const auto& server : servers_) server->StopServer();
}

absl::Status RedisCluster::StartAll() {
  for (const auto& server : servers_) {
    if (absl::Status s = server->StartServer(); !s.ok()) return s;
  }
  return WaitUntilSettled();
}

absl::Status RedisCluster::RestartAll() {
  StopAll();
  return StartAll();
}

std::string RedisCluster::LogTails() const {
  std::string out;
  for (const auto& server : servers_) {
    absl::StrAppend(&out, "--- node ", server->port(), " (", server->log_path(),
                    "):\n", FileTail(server->log_path()), "\n");
  }
  return out;
}

}  // namespace dlock::test
