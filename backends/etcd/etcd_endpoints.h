// Copyright dlock authors. The members an etcd client talks to: a gRPC
// channel each (with its own connection), which one calls go to first, the
// auth token every call carries, and the loop that runs one call across
// them (RunCall).
#ifndef DLOCK_BACKENDS_ETCD_ETCD_ENDPOINTS_H_
#define DLOCK_BACKENDS_ETCD_ETCD_ENDPOINTS_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd_options.h"
#include "etcd_rpc.grpc.pb.h"

namespace dlock::etcd {

class Endpoints {
 public:
  // InvalidArgument when no endpoint is given or a TLS file cannot be read
  // (naming the option and the file).
  static absl::StatusOr<std::unique_ptr<Endpoints>> Create(
      const ClientOptions& options);

  const ClientOptions& options() const { return options_; }
  size_t size() const { return members_.size(); }
  const std::string& name(size_t i) const { return members_[i].name; }
  // "127.0.0.1:2379,127.0.0.1:2380", for messages about all of them.
  std::string Names() const;

  // One member's channel and the stubs on it. Replaced when the channel
  // stays unconnected (Connect): hold the pointer for the call, or until a
  // stream is created (its ClientContext then keeps the channel).
  struct Connection {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
    std::unique_ptr<etcdserverpb::Auth::Stub> auth;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  };
  std::shared_ptr<Connection> connection(size_t i) const
      ABSL_LOCKS_EXCLUDED(connections_mu_);

  // The endpoint to try first: the last one that did not fail.
  size_t preferred() const { return preferred_.load(); }
  // Endpoint i failed: calls try the one after it first from now on.
  void MoveOff(size_t i);

  // Waits until endpoint i is connected, or `deadline`: then Unavailable
  // naming it and gRPC's reason (refused, a TLS handshake that failed...).
  // A request is sent only on a connected endpoint, so one that did not
  // connect never got it.
  absl::Status Connect(size_t i, absl::Time deadline);

  // Readies `context` for a call on endpoint i: its deadline, the metadata
  // that makes a member without a leader refuse at once ("no leader")
  // instead of stalling, and the auth token, authenticating first if the
  // client has none. Returns the token used (empty without auth), for
  // DropToken(). Unavailable when authentication could not reach etcd;
  // Unauthenticated when it refused the user or password.
  absl::StatusOr<std::string> Prepare(size_t i, absl::Time deadline,
                                      grpc::ClientContext& context);
  // etcd refused `token`: the next Prepare() authenticates again.
  void DropToken(const std::string& token);

 private:
  struct Member {
    std::string name;
    // Since when the member's channel has not connected; InfiniteFuture()
    // while it is connected.
    absl::Time failing_since = absl::InfiniteFuture();
    std::shared_ptr<Connection> connection;
  };

  std::shared_ptr<Connection> NewConnection(const std::string& name) const;
  // Endpoint i did not connect: a channel that has not connected for a while
  // is replaced, since gRPC may not try again for up to 20 s (a connection
  // attempt that met a member starting up waits for its SETTINGS that long)
  // where a new channel connects at once.
  void NotConnected(size_t i, const std::shared_ptr<Connection>& tried)
      ABSL_LOCKS_EXCLUDED(connections_mu_);

  explicit Endpoints(const ClientOptions& options) : options_(options) {}
  absl::StatusOr<std::string> Token(size_t i, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_, auth_mu_);
  absl::StatusOr<std::string> Authenticate(size_t i, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(auth_mu_);

  const ClientOptions options_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  grpc::ChannelArguments args_;
  mutable absl::Mutex connections_mu_;
  std::vector<Member> members_;  // the connections guarded by connections_mu_
  std::atomic<size_t> preferred_{0};
  // Held while authenticating, so that threads that all found the token
  // stale authenticate once.
  absl::Mutex auth_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
};

// One call, for RunCall().
struct CallSpec {
  absl::string_view method;  // "Txn", for messages
  absl::Time deadline;
  // Whether an attempt that may have been applied may be tried again: for
  // reads, and for writes the caller made idempotent (etcd_client.h). When
  // false, the first such failure ends the call (IsOutcomeUnknown), and the
  // attempt gets the whole budget.
  bool retry_maybe_applied = false;
  // A read: nothing to apply, so its failure is never IsOutcomeUnknown().
  bool read_only = false;
};

// Runs `attempt` (one gRPC call on the endpoint it is given, with the
// context prepared for it) on the preferred endpoint, then on the others in
// turn after failures that allow it, until one answers, etcd gives an
// answer, or the deadline passes: then Unavailable naming every endpoint
// tried and why each failed, marked IsOutcomeUnknown() if any attempt may
// have been applied.
absl::Status RunCall(
    Endpoints& endpoints, const CallSpec& spec,
    absl::FunctionRef<grpc::Status(size_t, grpc::ClientContext&)> attempt);

// gRPC's (wall clock) time for a deadline from MonotonicNow(): now plus
// what remains of it, taken when the call is made.
std::chrono::system_clock::time_point GrpcDeadline(absl::Time deadline);

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_ENDPOINTS_H_
