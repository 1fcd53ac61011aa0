// The ceiling of the etcd backend (issue 25): what a lock pair cannot do
// with less, through dlock's etcd client without any lock logic. Each pair
// is a create-if-absent txn of the thread's key on the client's lease and a
// delete guarded by the key's create revision, both idempotent (etcd_client.h),
// as the backend's acquire and release will be. One client, its threads on
// keys of their own (uncontended), a lease kept alive meanwhile.
//
//   dlock_etcd_bench [seconds-per-case] [--peers]     (default 5)
//   dlock_etcd_bench --ceiling HOSTS THREADS SECONDS
//
// The first form starts its own etcd (one member) and prints the ceiling
// at 1 and 16 threads; with --peers also the peers that run here, on the
// same server, uncontended slices of the report's peer drivers:
// python3-etcd3's Lock and tooz's etcd3gw driver (Debian;
// peers/python_peers.py) and the etcd3 npm package's Lock (installed into
// the build tree by scripts/install-deps.sh BUILD_DIR;
// peers/node_peer/node_peers.js), each at 1 and 16 threads. The second
// form runs one slice of the ceiling against a running etcd (HOSTS
// "127.0.0.1:2379,...") and prints it as one JSON record, the shape of the
// other ceilings of the comparative report (scripts/bench_report.py).
// Exits non-zero only when something fails.
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench_util.h"
#include "etcd_client.h"
#include "etcd_lease_keeper.h"
#include "etcd_server.h"

namespace {

constexpr char kNodePeerDir[] = DLOCK_NODE_PEER_DIR;
constexpr absl::Duration kLease = absl::Seconds(10);  // as dlock's pairs

// Create-if-absent plus guarded delete pairs per second, `threads` threads
// of one client.
absl::StatusOr<double> CeilingPairsPerSecond(
    const std::vector<std::string>& endpoints, int threads,
    absl::Duration duration) {
  absl::StatusOr<std::unique_ptr<dlock::etcd::Client>> client =
      dlock::etcd::Client::Create({.endpoints = endpoints});
  if (!client.ok()) return client.status();
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> lease =
      (*client)->LeaseGrant(kLease);
  if (!lease.ok()) return lease.status();
  (*client)->leases().Keep(lease->id(), kLease / 3, [] {});
  std::atomic<int64_t> nonce{0};
  auto pair = [&](int t) -> absl::Status {
    const std::string key = absl::StrCat("/dlock-ceiling/", t);
    // A value no other attempt writes: an owner and a nonce.
    const std::string value = absl::StrCat("owner-", t, "-", ++nonce);
    absl::StatusOr<etcdserverpb::TxnResponse> created =
        (*client)->Txn(dlock::etcd::CreateIfAbsent(key, value, lease->id()),
                       {.idempotent = true});
    if (!created.ok()) return created.status();
    if (!created->succeeded()) {
      return absl::InternalError(
          absl::StrCat("the ceiling's ", key, " exists"));
    }
    return (*client)
        ->Txn(dlock::etcd::DeleteIfCreatedAt(key, created->header().revision()),
              {.idempotent = true})
        .status();
  };
  for (int t = 0; t < threads; ++t) {  // untimed: connection and stubs
    if (absl::Status s = pair(t); !s.ok()) return s;
  }
  absl::StatusOr<double> rate = dlock::bench::LoopRate(threads, duration, pair);
  (*client)->leases().Forget(lease->id());
  (void)(*client)->LeaseRevoke(lease->id());
  return rate;
}

// The "pairs_per_sec" of the JSON record a peer driver printed.
std::optional<double> PairsPerSecond(const std::string& record) {
  const std::string kField = "\"pairs_per_sec\":";
  const size_t at = record.find(kField);
  if (at == std::string::npos) return std::nullopt;
  const size_t from = record.find_first_not_of(' ', at + kField.size());
  const size_t to = record.find_first_of(",}", from);
  double rate = 0;
  if (!absl::SimpleAtod(record.substr(from, to - from), &rate)) {
    return std::nullopt;
  }
  return rate;
}

// One uncontended slice of a peer: `library` of peers/python_peers.py, or
// node-etcd3 of peers/node_peer/node_peers.js, with `threads` threads (node:
// concurrent loops) for `seconds`.
absl::StatusOr<double> PeerRate(const std::string& library,
                                const std::string& host, int threads,
                                int seconds) {
  const std::string slice =
      absl::StrCat(" --library ", library, " --target ", host,
                   " --scenario uncontended --concurrency ", threads,
                   " --seconds ", seconds);
  const bool node = library == "node-etcd3";
  const std::string output = dlock::bench::CommandOutput(
      node ? absl::StrCat("node ", dlock::bench::BenchSourceDir(),
                          "peers/node_peer/node_peers.js ", kNodePeerDir, slice)
           : absl::StrCat("/usr/bin/python3 ", dlock::bench::BenchSourceDir(),
                          "peers/python_peers.py", slice));
  const std::optional<double> rate = PairsPerSecond(output);
  if (!rate.has_value() || *rate <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        library,
        " printed no rate (scripts/install-deps.sh BUILD_DIR installs ",
        node ? "the etcd3 npm package" : "python3-etcd3 and python3-etcd3gw",
        "): ", output));
  }
  return *rate;
}

// The peers at 1 and 16 threads (node: concurrent loops), printed.
int Peers(const std::string& host, int seconds) {
  for (const char* library : {"python-etcd3", "tooz-etcd3gw", "node-etcd3"}) {
    std::cout << absl::StrFormat("peer %s:\n", library);
    for (int threads : {1, 16}) {
      absl::StatusOr<double> rate = PeerRate(library, host, threads, seconds);
      if (!rate.ok()) return dlock::bench::Fail(rate.status());
      std::cout << absl::StrFormat("  %2d thread(s): %8.0f pairs/s\n", threads,
                                   *rate);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dlock::bench::RunAsTheCliDoes();
  if (argc > 1 && std::string(argv[1]) == "--ceiling") {
    return dlock::bench::CeilingSlice(
        argc, argv,
        "dlock's etcd client: create-if-absent txn + guarded delete txn",
        [](const std::string& hosts, int threads, absl::Duration duration) {
          return CeilingPairsPerSecond(absl::StrSplit(hosts, ','), threads,
                                       duration);
        });
  }
  const bool peers = argc > 1 && std::string(argv[argc - 1]) == "--peers";
  const int seconds =
      dlock::bench::SecondsPerCase(peers ? argc - 1 : argc, argv);
  if (seconds < 1) return 2;
  // A server in a session of its own, as the other benchmarks' (see
  // ChildProcess::Spawn).
  setenv("DLOCK_SERVERS_OWN_SESSION", "1", /*overwrite=*/0);
  absl::StatusOr<std::unique_ptr<dlock::test::EtcdServer>> server =
      dlock::test::EtcdServer::Start();
  if (!server.ok()) return dlock::bench::Fail(server.status());
  const std::vector<std::string> endpoints = (*server)->Endpoints();
  const absl::Duration duration = absl::Seconds(seconds);

  std::cout << absl::StrFormat(
      "etcd %s, %ds per case\n"
      "ceiling (dlock's etcd client: create-if-absent txn + guarded delete "
      "txn, one client):\n",
      endpoints[0], seconds);
  for (int threads : {1, 16}) {
    absl::StatusOr<double> rate =
        CeilingPairsPerSecond(endpoints, threads, duration);
    if (!rate.ok()) return dlock::bench::Fail(rate.status());
    std::cout << absl::StrFormat("  %2d thread(s): %8.0f pairs/s\n", threads,
                                 *rate);
  }
  return peers ? Peers(endpoints[0], seconds) : 0;
}
