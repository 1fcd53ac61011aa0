// Copyright dlock authors. One ZooKeeper session for the zk:// backend: the C
// client handle, asynchronous calls that can be pipelined and waited for with
// a deadline, watches routed to a WakeupHub, and the session's life (expiry,
// replacement, the point where a disconnected client must assume its
// ephemeral nodes are gone).
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_SESSION_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_SESSION_H_

#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/backend/wakeup.h"
#include "dlock/clock.h"
#include "zk_liveness.h"

namespace dlock::zk {

// What a reply carries; which fields are set depends on the call.
struct Reply {
  int rc = ZOK;
  uint64_t generation = 0;  // the session the call went out on
  std::string path;         // Create: the created path
  std::string data;         // Get
  Stat stat{};              // Create, Get, Set, Exists; parent for Children
  std::vector<std::string> children;  // Children
};

// A call in flight. Wait() returns its reply, or rc ZOPERATIONTIMEOUT when no
// reply came before the deadline (the call may still take effect).
class Call {
 public:
  struct Slot;
  Call(std::shared_ptr<Slot> slot, const Clock& clock)
      : slot_(std::move(slot)), clock_(&clock) {}
  Reply Wait(MonoTime deadline) const;
  // When the call was handed to the client library: the server acted on it
  // no earlier.
  MonoTime sent() const;

 private:
  std::shared_ptr<Slot> slot_;
  const Clock* clock_;
};

class Session {
 public:
  struct Options {
    std::string hosts;  // "host:port,host:port" as the C client wants it
    absl::Duration session_timeout;
    absl::Duration connect_timeout;
    // How long a call waits for its reply (call_timeout()).
    absl::Duration operation_timeout;
    std::string digest;    // "user:password" for digest auth, or empty
    std::string endpoint;  // redacted, for messages
  };
  // Called from the session's own thread, never with its lock held.
  struct Events {
    // The holds of session `generation` are over: it expired on the server,
    // or it got no reply for so long that it may have (BelievableUntil()
    // passed).
    std::function<void(uint64_t generation, const absl::Status& why)> lost;
    // Every tick while connected (background retries).
    std::function<void()> tick;
  };

  // Connects and waits up to connect_timeout for the session. Unavailable,
  // naming the endpoint, when no server answers.
  static absl::StatusOr<std::unique_ptr<Session>> Open(Options options,
                                                       WakeupHub* hub);
  const Clock& clock() const { return hub_->clock(); }
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts the session thread, which calls `events`; Stop() ends it (and the
  // destructor does). Idempotent.
  void Start(Events events);
  void Stop();

  // Asynchronous calls; a watch (watch=true) wakes hub waiters on `path`.
  // With the session not connected they fail at once with ZCONNECTIONLOSS,
  // so that callers fail fast (C18) instead of queueing behind a reconnect.
  // `open_acl`: readable and writable by anyone (shared parents such as
  // /dlock); otherwise, with digest auth, only this identity may change or
  // delete the node, or create and delete its children.
  Call Create(const std::string& path, absl::string_view data, int mode,
              bool open_acl = false);
  Call Get(const std::string& path, bool watch);
  Call Exists(const std::string& path, bool watch);
  Call Set(const std::string& path, absl::string_view data, int version);
  Call Delete(const std::string& path, int version);
  // With `watch`, ZooKeeper tells the watcher (the hub, by this path) once
  // a child is created or deleted.
  Call Children(const std::string& path, bool watch = false);
  // One multi: creates `create_path` (restricted like Create's default) and
  // deletes `delete_path` at `version`, both or neither. The reply's rc is
  // the first failing operation's.
  Call CreateAndDelete(const std::string& create_path, absl::string_view data,
                       int mode, const std::string& delete_path, int version);

  // One multi of versioned writes, all or none. The reply's rc is the first
  // failing write's; its stat, on success, the last write's.
  struct VersionedWrite {
    std::string path;
    std::string data;
    int version = -1;
  };
  Call SetAll(const std::vector<VersionedWrite>& writes);

  // Blocks until the session is connected or `until` passes.
  bool WaitConnected(MonoTime until);
  uint64_t generation() const;
  // Until when the holds of session `generation` can be believed (C19), from
  // the latest request of that session the server answered: never blocks.
  MonoTime BelievableUntil(uint64_t generation) const {
    return liveness_->BelievableUntil(generation);
  }
  // generation() without a lock.
  uint64_t current_generation() const { return liveness_->generation(); }
  // How long to wait for a reply before giving up on a call.
  absl::Duration call_timeout() const { return options_.operation_timeout; }
  const std::string& endpoint() const { return options_.endpoint; }
  // The ensemble as given: "host:port,host:port".
  const std::string& hosts() const { return options_.hosts; }

  // ZooKeeper's clock, estimated from the mtime of our own writes: the
  // offset of the leader's clock to ours, applied to now (milliseconds since
  // the Unix epoch). Only for hints and introspection; lease decisions
  // compare two ZooKeeper timestamps.
  int64_t EstimatedServerNowMs() const;
  void NoteServerTime(int64_t server_ms, MonoTime local_reply);

  // The status for a failed call, naming the endpoint and what was done.
  absl::Status ErrorStatus(int rc, absl::string_view what) const;

 private:
  Session(Options options, WakeupHub* hub);
  static void Watcher(zhandle_t* zh, int type, int state, const char* path,
                      void* context);
  zhandle_t* NewHandle();
  void Loop();
  // Sends a light request when none was answered for a third of the
  // timeout, so that an idle session's holds stay believable.
  void Heartbeat(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports the holds of the current session lost once BelievableUntil()
  // has passed; they are no longer believed by then.
  void ReportUnbelievable(MonoTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Submits a call on the current handle; `submit` returns the C client's rc.
  Call Submit(const std::function<int(zhandle_t*, void*)>& submit);

  const Options options_;
  WakeupHub* const hub_;
  ACL_vector acl_{};  // for restricted nodes when digest auth is configured
  ACL acl_entries_[2];
  Events events_;

  // Held shared while submitting on handle_, exclusively to replace it.
  mutable absl::Mutex handle_mu_;
  zhandle_t* handle_ ABSL_GUARDED_BY(handle_mu_) = nullptr;

  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 1;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool expired_ ABSL_GUARDED_BY(mu_) = false;
  bool was_connected_ ABSL_GUARDED_BY(mu_) = false;
  // Shared with every call in flight, whose reply tells it the session
  // lived.
  const std::shared_ptr<Liveness> liveness_;
  // The bound at which the holds of this session were last reported lost.
  MonoTime lost_at_bound_ ABSL_GUARDED_BY(mu_) = MonoTime::InfinitePast();
  // When the session thread last sent a heartbeat of its own.
  MonoTime heartbeat_sent_ ABSL_GUARDED_BY(mu_) = MonoTime::InfinitePast();
  // ZooKeeper's clock (ms since the epoch) less our monotonic clock (ms).
  int64_t clock_offset_ms_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ClockCondVar changed_;
  std::thread thread_;
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_SESSION_H_
