// Copyright dlock authors. A throwaway Redis Cluster for tests: masters
// (3 by default) with a replica each, redis-servers without persistence on
// free loopback ports, each in a session of its own as a daemon would be,
// with a short cluster-node-timeout so that a killed master's replica takes
// over within seconds. Stopped and removed when the object is destroyed.
#ifndef DLOCK_INTEGRATION_REDIS_CLUSTER_H_
#define DLOCK_INTEGRATION_REDIS_CLUSTER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redis_server.h"

namespace dlock::test {

class RedisCluster {
 public:
  struct Options {
    int masters = 3;
    int replicas_per_master = 1;
    // cluster-node-timeout: a killed master's replica is promoted about
    // this long (and a second or so more) after the kill.
    absl::Duration node_timeout = absl::Milliseconds(1000);
    // How long Start() and the waits give the cluster to settle.
    absl::Duration settle_timeout = absl::Seconds(30);
    // Every node takes only TLS on its port, the cluster bus and
    // replication included (RedisServer::Options::tls); a client needs
    // TestTlsQuery(false).
    bool tls = false;
    // A fault for the harness's own test: the first node stopped (SIGSTOP)
    // this long while the others meet it, as a loaded machine may stall it.
    absl::Duration first_node_stalled_while_met = absl::ZeroDuration();
  };

  // Starts every node, gives each master an equal share of the 16384
  // slots, joins them (CLUSTER MEET), makes the replicas, and returns once
  // every node sees the cluster whole (cluster_state:ok, every slot served)
  // and every replica is in sync. Fails, saying what to install, when
  // redis-server is missing, and naming what did not settle otherwise.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(
      const Options& options);
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start() {
    return Start(Options{});
  }
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Every node's port, masters first as started (roles change with
  // failovers).
  std::vector<int> ports() const;
  // "127.0.0.1:p1,127.0.0.1:p2,...": every node, for a client's seeds.
  std::string Seeds() const;

  // The port of the master that serves `slot` now, as the first node that
  // answers CLUSTER SLOTS says.
  absl::StatusOr<int> MasterOfSlot(int slot);
  // The ports of the masters, as CLUSTER SLOTS says now.
  absl::StatusOr<std::vector<int>> MasterPorts();
  // A node's id (CLUSTER MYID).
  absl::StatusOr<std::string> NodeId(int port);

  // Returns once every running node reports cluster_state:ok and every
  // slot is served by a master they agree on.
  absl::Status WaitUntilSettled();

  // Moves `slot` with its keys to the master on `to_port`: IMPORTING on the
  // target, MIGRATING on the source, MIGRATE of its keys, then NODE on
  // every master. Begin and finish may be called apart, to hold a slot
  // half-moved (a client then meets ASK) while a test acts.
  absl::Status BeginSlotMigration(int slot, int to_port);
  absl::Status FinishSlotMigration(int slot, int to_port);
  absl::Status MigrateSlot(int slot, int to_port);

  // kill -9 of the node on `port`; its replica is promoted about
  // Options::node_timeout later. WaitForFailover() returns the new master's
  // port once every other node agrees it serves `slot`.
  absl::Status Kill(int port);
  absl::StatusOr<int> WaitForFailover(int slot, int old_port);
  // Starts a killed or stopped node again, empty (it rejoins from its
  // nodes.conf as a replica, or as the master if nobody took over).
  absl::Status Restart(int port);
  // The port of the replica of the master on `master_port`.
  absl::StatusOr<int> ReplicaOf(int master_port);
  // Returns once every replica of the master on `master_port` (one at
  // least) is online and has acknowledged every write the master took
  // before the call. Not WAIT, which counts the replicas that have the
  // writes of its own connection: Query()'s are fresh ones, with none.
  absl::Status WaitForReplicasInSync(int master_port);

  // Reproduces a write the master of `slot` acknowledged and a failover
  // lost: waits until the replica has every earlier write, stops it
  // (SIGSTOP) and drops its link, runs `write` (through a client under
  // test), kills the master, resumes the replica and returns its port once
  // the cluster promoted it, without the write.
  absl::StatusOr<int> FailoverLosingWrites(
      int slot, const std::function<absl::Status()>& write);

  // Every node stopped cleanly and started again, empty: a whole cluster
  // restarted without persistence (the conformance suite's restart).
  absl::Status RestartAll();
  void StopAll();
  absl::Status StartAll();

  // The one-command reply of the node on `port` (RedisQuery()).
  absl::StatusOr<RespReply> Query(int port,
                                  const std::vector<std::string>& argv);
  // The end of every node's log, for a failed test's message.
  std::string LogTails() const;

  // The history checker's faults (redis_cluster_faults.cc), aimed at the
  // one lock a history contends for, found as the slot of the keys the
  // masters hold: a lock is one key, and only while held.
  //
  // The slot of the masters' keys, waited for up to `timeout`;
  // FailedPrecondition if they lie in more than one slot.
  absl::StatusOr<int> SlotWithKeys(absl::Duration timeout);
  // kill -9 of the master of that slot, remembered for the next two.
  absl::Status KillMasterWithKeys();
  // Returns once a replica serves the killed master's slot.
  absl::Status WaitForPromotion();
  // The killed master started again, empty, and back as the promoted
  // one's replica in sync (WaitForReplicasInSync()), so that it can fail over
  // again and a client's wait_replicas=1 is met.
  absl::Status RejoinAsReplica();
  // Starts the killed node on `killed` again and returns once it is the
  // replica of the master on `promoted`, in sync (WaitForReplicasInSync()).
  absl::Status RejoinAsReplicaOf(int killed, int promoted);
  // Moves the slot with keys to another master: begun, `half_moved` of
  // clients meeting ASK, then finished.
  absl::Status MigrateSlotWithKeys(absl::Duration half_moved);

 private:
  explicit RedisCluster(const Options& options) : options_(options) {}
  absl::Status Form();
  // Returns once every node knows every other (Form()'s first step).
  absl::Status Meet();
  // Every node but the first meets the first (CLUSTER MEET), whose gossip
  // then introduces them to each other.
  absl::Status MeetFirstNode();
  // "" once every node knows all the nodes, else which does not.
  std::string UnmetProblem();
  // Who serves each slot (its master's port, 0 for none), as the first
  // node that answers says.
  absl::StatusOr<std::vector<int>> CurrentSlotMasters();
  RedisServer* Server(int port);
  // Polls `problem` ("" once ready) until Options::settle_timeout; the
  // error names `what`, the last problem and the logs' ends.
  absl::Status Settle(const std::string& what,
                      const std::function<std::string()>& problem);
  std::string SettledProblem();

  Options options_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  // KillMasterWithKeys()'s victim, for WaitForPromotion() and
  // RejoinAsReplica() (the test thread's alone, as every fault is).
  struct Failover {
    int slot = -1;
    int killed = 0;    // the old master's port
    int promoted = 0;  // its replica's, once it took over
  };
  std::optional<Failover> failover_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_REDIS_CLUSTER_H_
