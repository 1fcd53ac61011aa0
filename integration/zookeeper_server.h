// Copyright dlock authors. Throwaway ZooKeeper servers for tests: one
// standalone server, or an ensemble of several on loopback, each a JVM from
// Debian's `zookeeper` package with its own config and data directory.
#ifndef DLOCK_INTEGRATION_ZOOKEEPER_SERVER_H_
#define DLOCK_INTEGRATION_ZOOKEEPER_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server_process.h"

namespace dlock::test {

class ZooKeeperServer {
 public:
  struct Options {
    int servers = 1;  // 1: standalone; 3: an ensemble that survives one loss
    int tick_ms = 200;
  };

  // Starts the servers on free ports and waits until each serves clients.
  // FailedPrecondition, saying what to install, when java or ZooKeeper's jar
  // is missing.
  static absl::StatusOr<std::unique_ptr<ZooKeeperServer>> Start(
      const Options& options);
  static absl::StatusOr<std::unique_ptr<ZooKeeperServer>> Start() {
    return Start(Options{});
  }
  ~ZooKeeperServer();

  int size() const { return static_cast<int>(members_.size()); }
  int client_port(int i) const { return members_[i]->client_port; }
  // "127.0.0.1:p1,127.0.0.1:p2,..."
  std::string Hosts() const;
  // zk://<hosts>?namespace=ns, plus `&extra` when set (e.g.
  // "session_timeout=2s").
  std::string Uri(const std::string& ns = "",
                  const std::string& extra = "") const;

  // Fault injection on one member, or on all of them. Data survives (the
  // data directory stays), so sessions and nodes survive a restart as they
  // would on a real ensemble.
  void StopMember(int i);
  void KillMember(int i);
  absl::Status StartMember(int i);
  void PauseMember(int i) { members_[i]->process.Pause(); }
  void ResumeMember(int i) { members_[i]->process.Resume(); }
  void StopAll();
  absl::Status StartAll();
  absl::Status Restart();

  // The member that leads the ensemble now (0 for a standalone server).
  absl::StatusOr<int> Leader() const;
  // `mntr`'s zk_znode_count of member i.
  absl::StatusOr<int64_t> ZnodeCount(int i = 0) const;

 private:
  struct Member {
    int id = 0;
    int client_port = 0;
    int quorum_port = 0;
    int election_port = 0;
    std::string dir;
    std::string config_path;
    std::string log_path;
    ChildProcess process;
  };

  ZooKeeperServer() = default;
  absl::Status WriteConfig(const Member& member) const;
  absl::Status WaitServing(int i, absl::Duration timeout);

  Options options_;
  std::string dir_;
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_ZOOKEEPER_SERVER_H_
