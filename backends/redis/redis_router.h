// Copyright dlock authors. Where the lock operations of a Redis topology go:
// to its one master (redis://, redis-sentinel://), or to the master that
// serves the lock's hash slot (redis-cluster://). The backend above
// (redis_backend.cc) is the same for both; only the routing differs.
#ifndef DLOCK_BACKENDS_REDIS_REDIS_ROUTER_H_
#define DLOCK_BACKENDS_REDIS_REDIS_ROUTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redis_master.h"

namespace dlock::redis {

// wait_replicas=: a grant or renewal counts once that many replicas have it
// (WAIT), so that a failover to one of them keeps it (docs/redis.md).
struct Replication {
  int64_t replicas = 0;
  absl::Duration timeout = absl::Milliseconds(100);
};

// One lock's script call, built for whichever master serves the lock (each
// master has its own Scripts: how it sends them depends on what it
// allows).
struct LockCall {
  absl::string_view name;
  std::function<ScriptCall(const Master&)> build;
};

// What the masters answered to a batch of lock calls, and the connections
// that carried them, for the WAIT that must follow on each.
class Routed {
 public:
  struct Answer {
    absl::StatusOr<Reply> reply = absl::UnknownError("not sent");
    // The master that gave the reply, for messages; null if none was
    // reached.
    const Master* master = nullptr;
    std::string endpoint() const;
  };

  explicit Routed(size_t calls) : answers(calls), carried_by_(calls, -1) {}
  Routed(Routed&&) = default;

  // One per call, in order. A lock operation's one call, its master's one
  // pending batch: no allocation for either.
  absl::InlinedVector<Answer, 1> answers;

  // Per call: OK once `replication.replicas` replicas have its write (a
  // WAIT on each connection that carried a call i with wrote[i], whose
  // answer counts for each of its calls); OK for a call that wrote nothing;
  // Unavailable naming `what` and `name` when fewer replicas had it in time.
  std::vector<absl::Status> Replicated(const std::vector<bool>& wrote,
                                       const Replication& replication,
                                       absl::string_view what,
                                       absl::string_view name);

  // For routers: awaits `pending`, which carried the calls `indices` (in
  // its order) to `master`, and sets their answers; a call sent again
  // (after a redirect) is answered by its last Take().
  void Take(Master::Pending pending, const std::vector<size_t>& indices,
            const Master* master);

 private:
  absl::Status WaitFor(int pending, const Replication& replication,
                       absl::string_view what, absl::string_view name,
                       const std::string& endpoint);

  absl::InlinedVector<std::unique_ptr<Master::Pending>, 1> pendings_;
  // Per call: index into pendings_, or -1.
  absl::InlinedVector<int, 1> carried_by_;
};

class Router {
 public:
  virtual ~Router() = default;

  // Connects (and loads the scripts) before the first lock: a client that
  // cannot reach its servers says so at Connect().
  virtual absl::Status Start() = 0;
  virtual void Shutdown() = 0;

  // Runs each call on the master that serves its lock: one pipeline per
  // master, every master at once, each reply waited for. A cluster's
  // redirects are followed.
  virtual Routed Run(std::vector<LockCall> calls) = 0;

  // Every master, for what spans them all (List's SCAN, memory use).
  virtual std::vector<Master*> Masters() = 0;

  // Before a wait on `name`: makes sure its releases wake this client's
  // waiters. True when that took a subscription only now, so that a
  // release just before was not heard: the caller looks again once.
  virtual bool Watch(absl::string_view name) = 0;

  // "redis at host:port", for messages that name no one master.
  virtual std::string Describe() const = 0;
};

// The names under `key_prefix` whose names start with `prefix` on every
// master (ScanNames; List's and ListObjects' SCAN), each once: a slot that
// migrates meanwhile may show its keys on two masters.
absl::StatusOr<std::vector<std::string>> ScanEveryMaster(
    Router& router, absl::string_view key_prefix, absl::string_view prefix);

// redis:// and redis-sentinel://: one master, whose subscription to the
// namespace's channel wakes the waiters from the start.
std::unique_ptr<Router> OneMasterRouter(std::unique_ptr<Master> master,
                                        std::function<void()> on_start,
                                        std::function<void()> on_shutdown);

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_ROUTER_H_
