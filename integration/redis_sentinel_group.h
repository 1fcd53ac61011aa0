// Copyright dlock authors. A throwaway Redis Sentinel group for tests: two
// redis-servers without persistence (a master and its replica) and three
// Sentinels watching them (quorum 2), all on free loopback ports, stopped and
// removed when the object is destroyed. For tests of what a client sees when
// the master fails over, including writes the master acknowledged and the
// failover lost.
#ifndef DLOCK_INTEGRATION_REDIS_SENTINEL_GROUP_H_
#define DLOCK_INTEGRATION_REDIS_SENTINEL_GROUP_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redis_server.h"
#include "server_process.h"

namespace dlock::test {

class RedisSentinelGroup {
 public:
  struct Options {
    // The name the Sentinels monitor the master under.
    std::string master_name = "dlockmaster";
    // How long a server may not answer before a Sentinel deems it down: a
    // killed master's failover starts about this long after the kill.
    absl::Duration down_after = absl::Seconds(1);
    // Sentinel's failover-timeout: a failed failover is retried after twice
    // this.
    absl::Duration failover_timeout = absl::Seconds(3);
    // How long Start(), Failover(), RestartKilled() and the waits give the
    // group to settle before they fail.
    absl::Duration settle_timeout = absl::Seconds(20);
    // Every server and Sentinel takes only TLS on its port
    // (RedisServer::Options::tls); a client needs TestTlsQuery(false).
    bool tls = false;
  };

  // Starts the master, its replica and the three Sentinels, and returns once
  // the replica is in sync and every Sentinel knows the master, the replica
  // and the two other Sentinels: a failover right away works. Fails, saying
  // what to install, when redis-server is missing.
  static absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> Start(
      const Options& options);
  static absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> Start() {
    return Start(Options{});
  }
  ~RedisSentinelGroup();
  RedisSentinelGroup(const RedisSentinelGroup&) = delete;
  RedisSentinelGroup& operator=(const RedisSentinelGroup&) = delete;

  const std::string& master_name() const { return options_.master_name; }
  std::vector<int> sentinel_ports() const;
  // "127.0.0.1:<port>" of each Sentinel.
  std::vector<std::string> sentinel_hosts() const;
  // The Sentinels' host list, "127.0.0.1:<p1>,127.0.0.1:<p2>,...", for a
  // client's URI.
  std::string SentinelUri() const;
  bool tls() const { return options_.tls; }
  // Both redis-servers, the first started as master; their roles change with
  // failovers.
  std::vector<int> server_ports() const;

  // The master's port as the first Sentinel that answers reports it (during
  // a failover, Sentinels may disagree for a moment).
  absl::StatusOr<int> CurrentMasterPort();

  // Sends one command to 127.0.0.1:port (a server or a Sentinel) and returns
  // its raw RESP reply, e.g. ":1\r\n" for EXISTS of a key that exists.
  static absl::StatusOr<std::string> RawCommand(
      int port, const std::vector<std::string>& argv);

  // Waits until the replica has every write acknowledged so far, sends
  // SENTINEL FAILOVER (again if that failover is aborted), then waits until
  // every Sentinel reports the replica as master and it answers ROLE as one,
  // and then until the old master is its replica in sync and every Sentinel
  // sees it as one: a second Failover() moves the master back.
  absl::Status Failover();

  // Returns once every Sentinel agrees on a master, it answers ROLE as
  // master and, unless a server is killed, the other server is its replica
  // in sync and every Sentinel sees it as a replica it could promote. For
  // after ResumePaused(), or to check that a test left the group sound.
  absl::Status WaitUntilSettled();

  // Returns once the replica has applied everything the master had written
  // when called: a write acknowledged before then survives a failover.
  absl::Status WaitUntilReplicaCaughtUp();

  // Returns the new master's port once every Sentinel reports a master other
  // than `old_master_port` and it answers ROLE as master. The old master
  // may still be down, or about to be turned into a replica.
  absl::StatusOr<int> WaitForFailoverFrom(int old_master_port);

  // The end of every server's and Sentinel's log, for a failed test's
  // message.
  std::string LogTails() const;

  // Fault injection. The master is whichever server the Sentinels report
  // now. KillMaster() is kill -9: the Sentinels promote the replica about
  // Options::down_after later. RestartKilled() starts the killed server
  // again, empty (no persistence), on its port, makes it the new master's
  // replica (as the Sentinels would a second later) and waits until the
  // group settles. Restarted before the failover happened, it is the master
  // again, empty, and the replica resyncs from it (losing everything, as
  // with such a master).
  absl::Status KillMaster();
  // Both servers stopped cleanly, the Sentinels left running (a whole site
  // down); StartServers() starts them again, empty (no persistence), on
  // their ports and configuration, master first, and waits until the group
  // settles (the Sentinels may have swapped the roles meanwhile). For the
  // conformance suite's server restart and outage.
  void StopServers();
  absl::Status StartServers();
  absl::Status RestartKilled();
  // SIGSTOP of the master: for longer than Options::down_after, the
  // Sentinels fail over, and after ResumePaused() turn it into a replica.
  absl::Status PauseMaster();
  // SIGSTOP of the replica, then the master drops its link to it (CLIENT
  // KILL TYPE replica): the master goes on acknowledging writes, which reach
  // the replica only once it resumes and reconnects. A stopped replica alone
  // is not enough, since its kernel would still take in the stream.
  absl::Status PauseReplica();
  // SIGCONT of the paused server.
  absl::Status ResumePaused();

  // Reproduces a write the master acknowledged and a failover lost:
  // WaitUntilReplicaCaughtUp(), PauseReplica(), `write` (which writes to the
  // master, e.g. through a client under test), KillMaster(), ResumePaused(),
  // and returns the new master's port once the Sentinels promoted the replica
  // that never saw the write. The killed server stays down until
  // RestartKilled().
  absl::StatusOr<int> FailoverLosingWrites(
      const std::function<absl::Status()>& write);

 private:
  struct Sentinel {
    int port = 0;
    std::string config_path;
    std::string log_path;
    ChildProcess process;
  };

  explicit RedisSentinelGroup(const Options& options) : options_(options) {}
  absl::Status StartSentinel(Sentinel& sentinel, int master_port);
  // FailedPrecondition when a server is paused already.
  absl::Status NonePaused() const;
  // Index in servers_ of the server on `port`, or -1.
  int ServerIndex(int port) const;
  // Polls `problem`, which says what is not ready yet ("" once all is),
  // until it is ready or Options::settle_timeout passes; the error names
  // `what`, the last problem and the end of every log.
  absl::Status Settle(const std::string& what,
                      const std::function<std::string()>& problem);
  // What keeps the group from being settled, "" if nothing; sets
  // `*master_port` to the master the Sentinels agree on, if they do.
  std::string SettledProblem(int* master_port);
  // The port every Sentinel reports as master, or what is wrong.
  absl::StatusOr<int> AgreedMasterPort();

  Options options_;
  std::string dir_;  // the Sentinels' configuration files and logs
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<Sentinel>> sentinels_;
  int killed_ = -1;  // index in servers_ of the killed server
  int paused_ = -1;  // index in servers_ of the paused server
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_REDIS_SENTINEL_GROUP_H_
