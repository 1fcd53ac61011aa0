// Copyright dlock authors. The one list of backends tests run against.
//
// Each backend this build has registers its entries from
// <backend>_registration.cc (compiled only when dlock::<backend> exists, and
// linked whole through dlock_test_servers so that the registration is kept):
// a label, a throwaway server started on first use and shared by the whole
// process, how to make a URI for it, and which faults its harness can inject.
// Conformance, the adapters' tests, the history checker and the benchmarks
// take their backends from here; no test source lists backends itself.
#ifndef DLOCK_INTEGRATION_TEST_SERVERS_H_
#define DLOCK_INTEGRATION_TEST_SERVERS_H_

#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace dlock::test {

// What a URI is for.
struct UriRequest {
  std::string ns;     // the lock namespace; empty: none
  std::string extra;  // more query parameters ("pool_size=2&...")
  int port = 0;       // 0: the server's own; else a FaultProxy's in front of it
};

// One configuration of a backend a test can run against. Hooks that the
// harness cannot provide are null (memory:// has no server at all).
struct TestBackend {
  std::string label;    // "redis", "zookeeper", "postgres_lease", ...
  std::string backend;  // the dlock::<backend> it runs: "redis", "postgres"
  // A second server configuration of a backend (Redis with an append-only
  // file), for the tests that ask for variants (TestBackendFilter) or name
  // it; the others leave it out.
  bool variant = false;
  // Whether clients in separate processes share locks (not memory://).
  bool shared_across_processes = true;

  // A URI for a new client. Starts the shared server on first use; if it
  // does not start, FailedPrecondition saying what is missing (what to
  // install), on this and every later call.
  std::function<absl::StatusOr<std::string>(const UriRequest&)> uri;
  // A URI of this scheme that refuses connections (port 1), for a test
  // whose server did not start: it fails at Connect too. (memory:// cannot
  // fail to start; its URI is the usual one.)
  std::function<std::string(const std::string& ns)> unreachable_uri;
  // The server's port on 127.0.0.1, stable across restarts.
  std::function<absl::StatusOr<int>()> port;

  // Faults of the shared server. Every start uses the same port and data
  // directory; what survives is the backend's business.
  std::function<absl::Status()> restart;  // clean stop, then start
  std::function<absl::Status()> stop;     // clean stop
  std::function<absl::Status()> start;    // after stop or kill
  std::function<absl::Status()> kill;     // SIGKILL, as a crash would
  std::function<absl::Status()> pause;    // SIGSTOP
  std::function<absl::Status()> resume;   // SIGCONT
  // Ends, on the server, every session whose application_name (a URI
  // parameter of this backend) is the argument; returns how many there were
  // (PostgreSQL).
  std::function<absl::StatusOr<int>(const std::string&)> terminate_sessions;
  // A primary with a streaming standby (PostgreSQL's replicated entries,
  // whose URI lists both, so that clients follow the primary): SIGKILL to
  // the primary and each of its backends; the standby's promotion,
  // returning once it accepts writes; and a fresh standby of the new
  // primary on the dead one's port, so that the pair can fail over again.
  // Redis Cluster: the master of the lock a history holds, its replica's
  // takeover, and the old master back as the new one's replica in sync.
  std::function<absl::Status()> kill_primary;
  std::function<absl::Status()> promote_standby;
  std::function<absl::Status()> rebuild_standby;
  // Redis Cluster: the slot of the lock the masters hold a key of is moved
  // to another master, held half-moved (MIGRATING and IMPORTING: clients
  // meet ASK) for the argument, then the move completed.
  std::function<absl::Status(absl::Duration)> migrate_slot;
  // A URI parameter that makes a client's session expire 2 s after the
  // server last heard from it ("session_timeout=2s" for ZooKeeper), or
  // others take over 2 s after the server saw it gone ("session_grace=2s"
  // for PostgreSQL session mode); empty where holds do not live on a
  // session.
  std::string short_session_param;
  // How long after its end a lock kept after release may still look kept to
  // a client that first reads it after the end: etcd ends a keep when it
  // expires the keep's lease, whose TTL is whole seconds rounded up and which
  // it checks every 500 ms (docs/etcd.md); zero where a keep ends on the
  // server's clock to the millisecond.
  absl::Duration keep_seen_late = absl::ZeroDuration();

  // Conformance cases (names without the suite prefix) that are documented
  // deviations of this configuration, listed in docs/backends.md.
  std::set<std::string> conformance_deviations;
};

inline std::ostream& operator<<(std::ostream& os, const TestBackend& b) {
  return os << b.label;
}

// Which entries a test wants. The default: every entry but the variants.
struct TestBackendFilter {
  std::string backend;  // only those running dlock::<backend>; empty: all
  bool across_processes = false;  // only those shared across processes
  bool one_per_backend = false;   // the first entry of each backend only
  bool with_variants = false;     // also the variants
};

// The registered entries the filter selects, by backend name, then in the
// order their registration file lists them.
std::vector<TestBackend> TestBackends(const TestBackendFilter& filter = {});
// The entry with this label, variants included; NotFound saying which
// labels this build has otherwise.
absl::StatusOr<TestBackend> FindTestBackend(const std::string& label);

// For <backend>_registration.cc: registers its entries from a static
// initializer. Labels must be unique.
class TestBackendRegistration {
 public:
  explicit TestBackendRegistration(std::vector<TestBackend> entries);
};

// For <backend>_registration.cc: `base` ("redis://127.0.0.1:6379") with the
// request's namespace and extra parameters as its query.
std::string WithQuery(std::string base, const UriRequest& request);

// For <backend>_registration.cc: the process's one server of a harness,
// started on first use (by any thread) and stopped when the process exits.
template <typename Server>
class SharedServer {
 public:
  using Starter = std::function<absl::StatusOr<std::unique_ptr<Server>>()>;
  // `what` names the server in the error ("redis-server").
  SharedServer(std::string what, Starter start)
      : what_(std::move(what)), start_(std::move(start)) {}

  absl::StatusOr<Server*> Get() {
    std::call_once(once_, [this] {
      absl::StatusOr<std::unique_ptr<Server>> server = start_();
      if (server.ok()) {
        server_ = *std::move(server);
      } else {
        error_ = absl::Status(server.status().code(),
                              absl::StrCat("cannot start ", what_, ": ",
                                           server.status().message()));
      }
    });
    if (server_ == nullptr) return error_;
    return server_.get();
  }

  // The server's port (a TestBackend::port hook).
  std::function<absl::StatusOr<int>()> PortHook() {
    return [this]() -> absl::StatusOr<int> {
      absl::StatusOr<Server*> server = Get();
      if (!server.ok()) return server.status();
      return (*server)->port();
    };
  }

  // A hook that starts the server if needed, then runs `f` on it.
  std::function<absl::Status()> Hook(std::function<absl::Status(Server&)> f) {
    return [this, f = std::move(f)]() -> absl::Status {
      absl::StatusOr<Server*> server = Get();
      if (!server.ok()) return server.status();
      return f(**server);
    };
  }
  // The same for a fault that cannot fail once the server runs.
  std::function<absl::Status()> VoidHook(std::function<void(Server&)> f) {
    return Hook([f = std::move(f)](Server& s) {
      f(s);
      return absl::OkStatus();
    });
  }

 private:
  const std::string what_;
  const Starter start_;
  std::once_flag once_;
  std::unique_ptr<Server> server_;
  absl::Status error_;
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_TEST_SERVERS_H_
