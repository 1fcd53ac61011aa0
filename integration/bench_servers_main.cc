// Copyright dlock authors. Throwaway servers for the comparative benchmark
// report (scripts/bench_report.py): a redis-server, the same over TLS, a
// ZooKeeper, a PostgreSQL and an etcd, each started through the test registry
// (test_servers.h) on a free loopback port in a temporary directory, and
// two Redis Clusters without replicas (redis_cluster.h), of 1 and 3
// masters: the cluster's scaling with masters.
//
//   dlock_bench_servers
//
// Prints one JSON line once every server serves:
//   {"redis": {"uri": "redis://...", "host_port": "127.0.0.1:P"},
//    "zookeeper": {"uri": "zk://...", "host_port": "127.0.0.1:P"},
//    "postgres": {"uri": "postgres://...", "url": "postgresql://...",
//                 "conninfo": "host=... port=...", "host_port": "..."},
//    "redis_tls": {"uri": "rediss://...?tls_ca=...", "host_port": "..."},
//    "etcd": {"uri": "etcd://...", "host_port": "127.0.0.1:P"},
//    "redis_cluster1": {"uri": "redis-cluster://...", "seeds": "h:p,..."},
//    "redis_cluster3": {...}}
// (dlock takes the URIs; the peers and ceilings the rest), then waits until
// its standard input closes or SIGTERM or SIGINT arrives, and stops them.
// When a server cannot start it prints what is missing and exits 1.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "redis_cluster.h"
#include "test_servers.h"

namespace {

// The write end of a pipe the signal handler writes to, so that the main
// thread's poll() wakes for a signal as it does for stdin closing.
int signal_pipe_write = -1;

void OnStopSignal(int) {
  const char byte = 0;
  // Nothing to do if it fails: the pipe already holds a byte.
  [[maybe_unused]] ssize_t n = write(signal_pipe_write, &byte, 1);
}

struct Started {
  explicit Started(std::string l) : label(std::move(l)) {}
  std::string label;
  absl::StatusOr<dlock::test::TestBackend> backend =
      absl::UnknownError("not started");
  absl::StatusOr<int> port = absl::UnknownError("not started");
};

// Starts the registry's server of `label` (its port hook starts it).
void Start(Started& s) {
  s.backend = dlock::test::FindTestBackend(s.label);
  if (!s.backend.ok()) {
    s.port = s.backend.status();
    return;
  }
  if (!s.backend->port) {
    s.port = absl::InvalidArgumentError(
        absl::StrCat(s.label, " has no server in the registry"));
    return;
  }
  s.port = s.backend->port();
}

// JSON string literal; the values here are URIs and paths, but quote what
// needs it anyway.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int main() {
  // The registry's labels for the servers; "postgres_lease" runs the lease
  // mode, the default of a postgres:// URI; "redis_tls" takes only TLS
  // (and a client certificate, which its URI names).
  std::vector<Started> servers;
  for (const char* label :
       {"redis", "zookeeper", "postgres_lease", "redis_tls", "etcd"}) {
    servers.emplace_back(label);
  }
  // One after the other, on this thread: a server dies with the thread that
  // started it (ChildProcess sets PR_SET_PDEATHSIG, which follows the
  // parent thread, not the process).
  for (Started& s : servers) Start(s);
  bool failed = false;
  for (const Started& s : servers) {
    if (!s.port.ok()) {
      std::cerr << "dlock_bench_servers: " << s.label
                << " did not start: " << s.port.status().message() << "\n";
      failed = true;
    }
  }
  // No replicas: what is measured is the masters' throughput, not
  // replication's.
  constexpr int kClusterMasters[] = {1, 3};
  std::vector<std::unique_ptr<dlock::test::RedisCluster>> clusters;
  for (int masters : kClusterMasters) {
    absl::StatusOr<std::unique_ptr<dlock::test::RedisCluster>> cluster =
        dlock::test::RedisCluster::Start(
            {.masters = masters, .replicas_per_master = 0});
    if (!cluster.ok()) {
      std::cerr << "dlock_bench_servers: a Redis Cluster of " << masters
                << " master(s) did not start: " << cluster.status().message()
                << "\n";
      failed = true;
      break;
    }
    clusters.push_back(*std::move(cluster));
  }
  if (failed) return 1;  // the registry's servers stop as the process exits

  auto uri = [&](int i) {
    // The server runs: its URI cannot fail any more.
    return *servers[i].backend->uri({});
  };
  auto host_port = [&](int i) {
    return absl::StrCat("127.0.0.1:", *servers[i].port);
  };
  const int pg_port = *servers[2].port;
  std::cout << "{\"redis\": {\"uri\": " << Quoted(uri(0))
            << ", \"host_port\": " << Quoted(host_port(0)) << "}, "
            << "\"zookeeper\": {\"uri\": " << Quoted(uri(1))
            << ", \"host_port\": " << Quoted(host_port(1)) << "}, "
            << "\"postgres\": {\"uri\": " << Quoted(uri(2)) << ", \"url\": "
            << Quoted(absl::StrCat("postgresql://postgres@127.0.0.1:", pg_port,
                                   "/postgres"))
            << ", \"conninfo\": "
            << Quoted(absl::StrCat("host=127.0.0.1 port=", pg_port,
                                   " dbname=postgres user=postgres"))
            << ", \"host_port\": " << Quoted(host_port(2)) << "}, "
            << "\"redis_tls\": {\"uri\": " << Quoted(uri(3))
            << ", \"host_port\": " << Quoted(host_port(3)) << "}, "
            << "\"etcd\": {\"uri\": " << Quoted(uri(4))
            << ", \"host_port\": " << Quoted(host_port(4)) << "}";
  for (size_t i = 0; i < clusters.size(); ++i) {
    const std::string seeds = clusters[i]->Seeds();
    std::cout << ", \"redis_cluster" << kClusterMasters[i] << "\": {\"uri\": "
              << Quoted(absl::StrCat("redis-cluster://", seeds))
              << ", \"seeds\": " << Quoted(seeds) << "}";
  }
  std::cout << "}" << std::endl;

  int fds[2];
  if (pipe(fds) != 0) {
    std::cerr << "dlock_bench_servers: pipe failed\n";
    return 1;
  }
  signal_pipe_write = fds[1];
  struct sigaction action = {};
  action.sa_handler = &OnStopSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // Until stdin closes (its reader gone) or a signal came; whatever stdin
  // carries is read and ignored.
  pollfd waits[2] = {{STDIN_FILENO, POLLIN, 0}, {fds[0], POLLIN, 0}};
  for (;;) {
    if (poll(waits, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (waits[1].revents != 0) break;
    if (waits[0].revents != 0) {
      char buf[256];
      if (read(STDIN_FILENO, buf, sizeof(buf)) <= 0) break;
    }
  }
  // Returning runs the registry's destructors, which stop every server.
  return 0;
}
