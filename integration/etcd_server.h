// Copyright dlock authors. Throwaway etcd servers for tests: one member, or a
// cluster of several on loopback, each an `etcd` from Debian's etcd-server
// (3.4) with its own data directory, optionally serving clients over TLS
// and with users and authentication on.
//
// Data directories are on /dev/shm when it exists: etcd 3.4 has no switch
// to skip fsync, and the other harnesses run their servers without it too
// (ZooKeeper's forceSync=no, PostgreSQL's fsync=off).
#ifndef DLOCK_INTEGRATION_ETCD_SERVER_H_
#define DLOCK_INTEGRATION_ETCD_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server_process.h"
#include "tls_certificates.h"

namespace dlock::test {

class EtcdServer {
 public:
  struct Options {
    int members = 1;  // 3: a cluster that survives the loss of one
    // Clients over TLS, with certificates() made by the harness.
    bool tls = false;
    // With tls: clients must show a certificate the test CA signed.
    bool client_cert_auth = false;
    // Users (below) and etcd's authentication on.
    bool auth = false;
    int auth_token_ttl_seconds = 300;
    // Raft timing: short, so that a cluster elects a new leader in well
    // under a second after losing one.
    int heartbeat_ms = 50;
    int election_ms = 500;
  };

  // The users of a server started with Options::auth. Each has a random
  // password (password()).
  static constexpr char kRootUser[] = "root";
  // May read and write the keys under kUserPrefix, nothing else.
  static constexpr char kUser[] = "dlock";
  static constexpr char kUserPrefix[] = "/dlock/";
  // Has no role: may touch no key.
  static constexpr char kOutsider[] = "outsider";

  // Starts the members on free ports and waits until each serves clients.
  // FailedPrecondition, saying what to install, when etcd, etcdctl or
  // openssl (for TLS) is missing.
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start(
      const Options& options);
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start() {
    return Start(Options{});
  }
  ~EtcdServer();

  int size() const { return static_cast<int>(members_.size()); }
  int client_port(int i) const { return members_[i]->client_port; }
  int port() const { return client_port(0); }
  // "127.0.0.1:p1", one per member.
  std::vector<std::string> Endpoints() const;
  // "127.0.0.1:p1,127.0.0.1:p2,..."
  std::string Hosts() const;
  // etcd://<hosts>?namespace=ns, with the TLS options of a TLS server
  // (tls_ca, and tls_cert and tls_key when it checks clients), plus
  // `&extra` when set.
  std::string Uri(const std::string& ns = "",
                  const std::string& extra = "") const;
  // Of a server started with Options::tls.
  const TlsCertificates& certificates() const { return certificates_; }
  // The password of a user of a server started with Options::auth; empty
  // for another. For the test's client options only: never print it.
  std::string password(const std::string& user) const;

  // Fault injection on one member, or on all of them. Data survives (the
  // data directory stays), as on a real cluster.
  void StopMember(int i);
  void KillMember(int i);
  absl::Status StartMember(int i);
  void PauseMember(int i) { members_[i]->process.Pause(); }
  void ResumeMember(int i) { members_[i]->process.Resume(); }
  void StopAll();
  absl::Status StartAll();
  absl::Status Restart();

  // The member that leads now, by its metrics (etcd_server_is_leader).
  absl::StatusOr<int> Leader() const;
  // Waits until some member leads and every running member has a leader.
  absl::Status WaitForLeader(absl::Duration timeout) const;
  // How many calls of the gRPC method `method` ("LeaseGrant") the running
  // members have answered, by their metrics (grpc_server_handled_total).
  absl::StatusOr<int64_t> CallsHandled(const std::string& method) const;
  // How many calls (streams: Watch) of `method` they have begun
  // (grpc_server_started_total).
  absl::StatusOr<int64_t> CallsStarted(const std::string& method) const;

  // `etcdctl` against the running members, as root when auth is on (the
  // password goes in the environment, not argv), with `input` on its
  // standard input; what it printed.
  absl::StatusOr<std::string> Etcdctl(const std::vector<std::string>& args,
                                      const std::string& input = "") const;
  // Compacts the history before `revision`.
  absl::Status Compact(int64_t revision) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    int metrics_port = 0;
    std::string dir;
    std::string log_path;
    ChildProcess process;
  };

  EtcdServer() = default;
  std::vector<std::string> Argv(const Member& member) const;
  absl::Status WaitServing(int i, absl::Duration timeout) const;
  absl::Status SetUpAuth();
  absl::StatusOr<std::string> Metrics(int i, const std::string& path) const;
  // The sum over running members of `counter` for `method`.
  absl::StatusOr<int64_t> CallsCounted(absl::string_view counter,
                                       const std::string& method) const;

  Options options_;
  std::string dir_;
  std::string cluster_token_;
  TlsCertificates certificates_;
  std::map<std::string, std::string> passwords_;
  bool auth_enabled_ = false;
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_ETCD_SERVER_H_
