#include "redis_cluster_router.h"

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "redis_shard_subscriber.h"
#include "redis_subscriber.h"

namespace dlock::redis {

absl::StatusOr<std::vector<SlotRange>> ParseClusterSlots(
    const redisReply* r, absl::string_view endpoint) {
  if (r->type != REDIS_REPLY_ARRAY) return Malformed("CLUSTER SLOTS", endpoint);
  std::vector<SlotRange> out;
  for (size_t i = 0; i < r->elements; ++i) {
    // [first, last, [host, port, id, ...], replicas...]
    const redisReply* range = r->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER ||
        range->element[2]->type != REDIS_REPLY_ARRAY ||
        range->element[2]->elements < 2 ||
        range->element[2]->element[0]->type != REDIS_REPLY_STRING ||
        range->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
      return Malformed("CLUSTER SLOTS", endpoint);
    }
    SlotRange slots{.first = static_cast<int>(range->element[0]->integer),
                    .last = static_cast<int>(range->element[1]->integer)};
    const redisReply* host = range->element[2]->element[0];
    slots.master.host.assign(host->str, host->len);
    slots.master.port =
        static_cast<int>(range->element[2]->element[1]->integer);
    if (slots.first < 0 || slots.last >= kClusterSlots ||
        slots.first > slots.last || slots.master.host == "?") {
      return Malformed("CLUSTER SLOTS", endpoint);
    }
    out.push_back(std::move(slots));
  }
  return out;
}

namespace {

// Redirects one call may follow: a slot moves once per migration, and
// two hops cover a MOVED to a node that is itself handing the slot on.
constexpr int kMostRedirects = 5;
// The shortest time between two reads of the slot map: a failover or a
// migration makes every client's calls fail or redirect at once, and each
// client asks the cluster at most this often.
constexpr absl::Duration kRefreshGap = absl::Milliseconds(100);

class Cluster : public Router {
 public:
  Cluster(std::vector<ConnectionConfig> seeds, const Keyspace& keys,
          WakeupHub* hub)
      : seeds_(std::move(seeds)), keys_(keys), hub_(hub) {}
  ~Cluster() override { Shutdown(); }

  absl::Status Start() override {
    if (absl::Status s = Refresh(); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    refresher_ = std::thread([this] { RefreshLoop(); });
    return absl::OkStatus();
  }

  void Shutdown() override {
    std::thread refresher;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      wanted_.SignalAll();
      refresher.swap(refresher_);
    }
    if (refresher.joinable()) refresher.join();
    absl::MutexLock create(&create_mu_);
    for (auto& [endpoint, node] : nodes_) {
      node->subscriber->Stop();
      node->master->Shutdown();
    }
  }

  Routed Run(std::vector<LockCall> calls) override {
    Routed out(calls.size());
    std::vector<Target> targets(calls.size());
    std::vector<size_t> todo(calls.size());
    {
      absl::ReaderMutexLock lock(&mu_);
      for (size_t i = 0; i < calls.size(); ++i) {
        const int slot = KeySlot(keys_.LockKey(calls[i].name));
        targets[i] = Target{slots_[slot], slot, false};
        todo[i] = i;
      }
    }
    for (int hop = 0; !todo.empty(); ++hop) {
      todo = Send(calls, targets, todo, out, hop < kMostRedirects);
    }
    return out;
  }

  std::vector<Master*> Masters() override {
    std::vector<Master*> out;
    absl::ReaderMutexLock lock(&mu_);
    for (Node* node : slots_) {
      if (node != nullptr && !absl::c_linear_search(out, node->master.get())) {
        out.push_back(node->master.get());
      }
    }
    return out;
  }

  bool Watch(absl::string_view name) override {
    const int slot = KeySlot(keys_.LockKey(name));
    Node* node = nullptr;
    {
      absl::ReaderMutexLock lock(&mu_);
      node = slots_[slot];
    }
    if (node == nullptr) return false;
    absl::StatusOr<bool> made =
        node->subscriber->Watch(keys_.ShardChannel(slot));
    if (!made.ok() && RedirectIn(made.status()).has_value()) RequestRefresh();
    return made.ok() && *made;
  }

  std::string Describe() const override {
    std::vector<std::string> seeds;
    for (const ConnectionConfig& seed : seeds_) seeds.push_back(seed.endpoint);
    return absl::StrCat("redis cluster via ", absl::StrJoin(seeds, ","));
  }

 private:
  struct Node {
    std::unique_ptr<Master> master;
    std::unique_ptr<ShardSubscriber> subscriber;
  };
  // Where a call goes next: the slot's master, or with `asking` the node
  // an ASK named.
  struct Target {
    Node* node = nullptr;
    int slot = 0;
    bool asking = false;
  };

  // Sends the calls `todo`, one pipeline per node, all nodes before any
  // reply is awaited; returns those redirected, with their new targets.
  std::vector<size_t> Send(const std::vector<LockCall>& calls,
                           std::vector<Target>& targets,
                           const std::vector<size_t>& todo, Routed& out,
                           bool follow) {
    std::vector<std::pair<Node*, std::vector<size_t>>> groups;
    for (size_t i : todo) {
      Node* node = targets[i].node;
      if (node == nullptr) {
        out.answers[i].reply = absl::UnavailableError(
            absl::StrCat("the slot map of the ", Describe(),
                         " has no master for slot ", targets[i].slot));
        RequestRefresh();
        continue;
      }
      auto group = absl::c_find_if(
          groups, [node](const auto& g) { return g.first == node; });
      if (group == groups.end()) {
        groups.emplace_back(node, std::vector<size_t>{});
        group = groups.end() - 1;
      }
      group->second.push_back(i);
    }
    std::vector<Master::Pending> pending;
    for (const auto& [node, indices] : groups) {
      std::vector<ScriptCall> scripts;
      for (size_t i : indices) {
        scripts.push_back(calls[i].build(*node->master));
        scripts.back().asking = targets[i].asking;
      }
      pending.push_back(node->master->Submit(std::move(scripts)));
    }
    std::vector<size_t> again;
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& [node, indices] = groups[g];
      out.Take(std::move(pending[g]), indices, node->master.get());
      for (size_t i : indices) {
        const absl::Status& status = out.answers[i].reply.status();
        if (status.ok()) continue;
        if (std::optional<Redirect> redirect = RedirectIn(status)) {
          if (!follow) {
            // Slots moving faster than the client follows: transient.
            out.answers[i].reply = absl::UnavailableError(
                absl::StrCat(status.message(), " (after ", kMostRedirects,
                             " redirects; the cluster is resharding)"));
            RequestRefresh();
            continue;
          }
          targets[i] = Target{Redirected(*redirect, node), targets[i].slot,
                              redirect->ask};
          again.push_back(i);
        } else if (absl::IsUnavailable(status)) {
          // Down, CLUSTERDOWN, TRYAGAIN: the map may have changed.
          RequestRefresh();
        }
      }
    }
    return again;
  }

  // The node a redirect names; MOVED also moves the slot in the map (and
  // asks for the whole map: a MOVED rarely comes alone).
  Node* Redirected(const Redirect& redirect, Node* from) {
    Address to = redirect.to;
    if (to.host.empty())
      to.host = from->master->endpoint().substr(
          0, from->master->endpoint().rfind(':'));
    Node* node = NodeAt(to);
    if (!redirect.ask) {
      {
        absl::MutexLock lock(&mu_);
        slots_[redirect.slot] = node;
      }
      RequestRefresh();
    }
    return node;
  }

  // The node at `address`, created (connected, its scripts loaded) on
  // first use. Nodes stay until Shutdown(): a master that fails over may
  // come back.
  Node* NodeAt(const Address& address) {
    const std::string endpoint = absl::StrCat(address.host, ":", address.port);
    absl::MutexLock create(&create_mu_);
    if (auto it = nodes_.find(endpoint); it != nodes_.end()) {
      return it->second.get();
    }
    ConnectionConfig config = seeds_[0];
    config.host = address.host;
    config.port = address.port;
    config.endpoint = endpoint;
    auto node = std::make_unique<Node>();
    node->master = std::make_unique<Master>(config, "", nullptr);
    // One that is down now is dialed by the first call that needs it,
    // and sends its scripts whole.
    (void)node->master->Start();
    node->subscriber = std::make_unique<ShardSubscriber>(
        config,
        ShardSubscriber::Callbacks{.on_message =
                                       [hub = hub_](absl::string_view message) {
                                         WakeOnAnnouncement(*hub, message);
                                       },
                                   .on_gap = [hub = hub_] { hub->NotifyAll(); },
                                   .on_moved = [this] { RequestRefresh(); }});
    Node* out = node.get();
    nodes_.emplace(endpoint, std::move(node));
    return out;
  }

  // Reads the map from the masters known, then the seeds; the first
  // answer wins.
  absl::Status Refresh() {
    std::vector<ConnectionConfig> ask;
    for (Master* master : Masters()) {
      ConnectionConfig config = seeds_[0];
      const std::string& endpoint = master->endpoint();
      config.host = endpoint.substr(0, endpoint.rfind(':'));
      config.port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
      config.endpoint = endpoint;
      ask.push_back(std::move(config));
    }
    ask.insert(ask.end(), seeds_.begin(), seeds_.end());
    std::vector<std::string> failures;
    absl::StatusCode code = absl::StatusCode::kUnavailable;
    for (const ConnectionConfig& node : ask) {
      absl::StatusOr<std::vector<SlotRange>> map = ReadSlots(node);
      if (map.ok()) {
        Apply(*map, node.host);
        return absl::OkStatus();
      }
      if (!absl::IsUnavailable(map.status())) code = map.status().code();
      failures.push_back(std::string(map.status().message()));
    }
    return absl::Status(code, absl::StrCat("no node of the ", Describe(),
                                           " gave its slot map: ",
                                           absl::StrJoin(failures, "; ")));
  }

  static absl::StatusOr<std::vector<SlotRange>> ReadSlots(
      const ConnectionConfig& node) {
    absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::Open(node);
    if (!conn.ok()) return conn.status();
    absl::StatusOr<Reply> reply = (*conn)->Command({"CLUSTER", "SLOTS"});
    if (!reply.ok()) return reply.status();
    const redisReply* r = reply->get();
    if (r->type == REDIS_REPLY_ERROR &&
        absl::StrContains(absl::string_view(r->str, r->len),
                          "cluster support disabled")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "redis at ", node.endpoint,
          " is not a Redis Cluster node (cluster support disabled): use "
          "redis:// for one server"));
    }
    if (absl::Status s = ReplyError(r, "CLUSTER SLOTS", node.endpoint);
        !s.ok()) {
      return s;
    }
    return ParseClusterSlots(r, node.endpoint);
  }

  void Apply(const std::vector<SlotRange>& map, const std::string& asked) {
    std::vector<Node*> fresh(kClusterSlots, nullptr);
    for (const SlotRange& range : map) {
      Address master = range.master;
      if (master.host.empty()) master.host = asked;
      Node* node = NodeAt(master);
      for (int s = range.first; s <= range.last; ++s) fresh[s] = node;
    }
    absl::MutexLock lock(&mu_);
    slots_ = std::move(fresh);
  }

  void RequestRefresh() {
    absl::MutexLock lock(&mu_);
    refresh_wanted_ = true;
    wanted_.Signal();
  }

  void RefreshLoop() {
    while (AwaitRefreshRequest()) {
      (void)Refresh();
      // However many ask meanwhile, the next read waits out the gap.
      absl::MutexLock lock(&mu_);
      const absl::Time until = absl::Now() + kRefreshGap;
      while (!stopping_ && !wanted_.WaitWithDeadline(&mu_, until)) {
      }
    }
  }

  bool AwaitRefreshRequest() {
    absl::MutexLock lock(&mu_);
    while (!refresh_wanted_ && !stopping_) wanted_.Wait(&mu_);
    refresh_wanted_ = false;
    return !stopping_;
  }

  const std::vector<ConnectionConfig> seeds_;
  const Keyspace keys_;
  WakeupHub* const hub_;
  // Held while a node is made, so that each address gets one.
  absl::Mutex create_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::map<std::string, std::unique_ptr<Node>> nodes_
      ABSL_GUARDED_BY(create_mu_);
  absl::Mutex mu_;
  absl::CondVar wanted_;
  std::vector<Node*> slots_ ABSL_GUARDED_BY(mu_) =
      std::vector<Node*>(kClusterSlots, nullptr);
  bool refresh_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread refresher_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Router> ClusterRouter(std::vector<ConnectionConfig> seeds,
                                      const Keyspace& keys, WakeupHub* hub) {
  return std::make_unique<Cluster>(std::move(seeds), keys, hub);
}

}  // namespace dlock::redis
