// Copyright dlock authors. One Redis master, as every Redis topology of dlock
// talks to it: redis:// (one master), redlock:// (a quorum of independent
// masters) and Sentinel (the master the Sentinels name).
#ifndef DLOCK_BACKENDS_REDIS_REDIS_MASTER_H_
#define DLOCK_BACKENDS_REDIS_REDIS_MASTER_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dlock/backend/wakeup.h"
#include "redis_connection.h"
#include "redis_mux.h"
#include "redis_scripts.h"
#include "redis_subscriber.h"

namespace dlock::redis {

// The commands a script's body calls, upper case ("DEL", "HSET"): an ACL
// refusal inside a script, which Redis does not say the command of, names
// them; docs/redis.md's ACL line is checked against them.
std::set<std::string> CommandsCalledBy(absl::string_view script_body);

// One script run: which script, its keys and its arguments.
struct ScriptCall {
  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
  // Sent right after ASKING: a Redis Cluster's ASK redirect to the node a
  // slot is migrating to, which serves the call this once.
  bool asking = false;
};

// The command connection (pipelined across threads, reconnected when it
// breaks), the lock scripts with their NOSCRIPT fallback, and the
// subscription that turns this master's release announcements into wake-ups.
// Thread-safe.
class Master {
 public:
  class Pending;

  // Who dials again after the connection broke.
  enum class Redial {
    // The call that finds it broken, within connect_timeout: one master is
    // all there is, so its callers wait for it.
    kByCaller,
    // A thread of the master's own, while calls fail at once (Unavailable):
    // a quorum goes on without a master that is down, and an attempt never
    // waits for a dial (Redlock).
    kInBackground,
  };

  // Runs on every new connection before it carries a call (the rolling
  // upgrade's check, docs/migration.md); an error makes the dial fail.
  using ConnectCheck =
      std::function<absl::Status(Connection& conn, const Scripts& scripts)>;

  // `channel` is the release channel to subscribe to, announcing to `hub`;
  // a null hub subscribes to nothing.
  Master(ConnectionConfig config, std::string channel, WakeupHub* hub,
         Redial redial = Redial::kByCaller, ConnectCheck check = nullptr);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Dials, loads the scripts and subscribes: a client that cannot reach its
  // server says so at Connect() instead of at the first lock. With
  // Redial::kInBackground, a master that is down goes on being tried (its
  // scripts are then sent whole) and the error is only reported.
  absl::Status Start();
  // Closes the connections; every later call fails with ClientClosed.
  void Shutdown();
  // The master moved: the next call dials again (and so does the
  // subscription); calls in flight finish on the old connection.
  void Reconnect();

  const std::string& endpoint() const { return config_.endpoint; }
  const Scripts& scripts() const { return scripts_; }

  // Starts the script calls, pipelined, without waiting for their replies;
  // Pending::Await() waits. A caller that talks to several masters submits
  // to each before it awaits any, and so waits for the slowest only.
  Pending Submit(std::vector<ScriptCall> calls);
  // One script call, waited for. An error reply is returned as a Status
  // (ReplyError()).
  absl::StatusOr<Reply> Run(const Script& script, std::vector<std::string> keys,
                            std::vector<std::string> args);
  // Raw commands (RESP-encoded), pipelined; replies as the server gave them.
  absl::StatusOr<std::vector<Reply>> Send(std::vector<std::string> commands);

 private:
  // The shared connection, dialed again when it broke (C18).
  absl::StatusOr<std::shared_ptr<MuxConnection>> Mux();
  // Dials and installs the connection.
  absl::Status Dial(bool resubscribe);
  absl::Status Check(Connection& conn);

  const ConnectionConfig config_;
  const Redial redial_;
  const ConnectCheck check_;
  Scripts scripts_;
  absl::Mutex mu_;
  std::shared_ptr<MuxConnection> mux_ ABSL_GUARDED_BY(mu_);
  bool dialing_ ABSL_GUARDED_BY(mu_) = false;
  // Why the last dial failed, for the callers that fail fast meanwhile.
  std::string last_failure_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Counts Reconnect(): a dial that began before the master moved may have
  // located the old one, so it installs nothing.
  uint64_t moves_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Subscriber> subscriber_;   // null without a hub
  std::thread dialer_ ABSL_GUARDED_BY(mu_);  // Redial::kInBackground
};

// Script calls in flight on one master.
class Master::Pending {
 public:
  Pending(Pending&&) = default;
  // A ticket not awaited must go before its connection: no assignment.
  Pending& operator=(Pending&&) = delete;

  // The replies, one per call in order; an error reply as a Status. A
  // script the server no longer knows (NOSCRIPT: restarted, or its cache
  // flushed) is sent again with its body, on the same connection. Call
  // once.
  std::vector<absl::StatusOr<Reply>> Await();

  // Raw commands on the connection the calls went to, after Await(): WAIT
  // counts the replicas that have this connection's writes, so it must
  // follow them on it. Unavailable when that connection failed meanwhile.
  absl::StatusOr<std::vector<Reply>> FollowUp(
      std::vector<std::string> commands);

 private:
  friend class Master;
  Pending() = default;

  Master* master_ = nullptr;
  std::vector<ScriptCall> calls_;
  absl::Status failed_;  // no connection: every call fails so
  std::shared_ptr<MuxConnection> mux_;
  std::unique_ptr<MuxConnection::Ticket> ticket_;
};

}  // namespace dlock::redis

#endif  // DLOCK_BACKENDS_REDIS_REDIS_MASTER_H_
