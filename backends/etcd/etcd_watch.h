// Copyright dlock authors. A watch of a key or a range of keys, on a stream
// of its own that moves to another member when its member fails and
// resumes from the next revision it has not delivered, so that no event is
// lost unless etcd compacted it away first: then the watch says so
// (kCompacted) and goes on from the oldest revision etcd still has.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_WATCH_H_
#define DLOCK_BACKENDS_ETCD_ETCD_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd_kv.pb.h"
#include "etcd_rpc.pb.h"

namespace grpc {
class ClientContext;
}

namespace dlock::etcd {

class Endpoints;

struct WatchSpec {
  std::string key;
  // [key, range_end); empty: `key` alone; PrefixEnd(key): every key it
  // starts.
  std::string range_end;
  // The first revision whose events are wanted; 0: from now on. A recipe
  // reads its keys at revision R and watches from R + 1, so that nothing
  // between the read and the watch is missed.
  int64_t start_revision = 0;
  // Deletes carry the key's last value (Event::prev_kv).
  bool prev_kv = false;
  // Only deletions are told (etcd filters out puts).
  bool deletes_only = false;
};

struct WatchUpdate {
  enum class Kind {
    // The watch is in place (told once): every event after `revision` will
    // be told.
    kStarted,
    // `events`, in revision order; every event up to `revision` has been
    // told.
    kEvents,
    // Events before `revision` were compacted away before the watch could
    // see them: some may have been missed. The watch goes on from
    // `revision`; re-read what it watches.
    kCompacted,
    // The watch ended for good with `status` (etcd refused it: permission
    // denied, an invalid range; the token could not be renewed). Not told
    // after Cancel().
    kEnded,
  };
  Kind kind = Kind::kEvents;
  std::vector<mvccpb::Event> events;
  int64_t revision = 0;
  absl::Status status;
};

class Watch {
 public:
  // Runs on the watch's thread, one update at a time. It may call Cancel()
  // but must not destroy the Watch.
  using Callback = std::function<void(const WatchUpdate&)>;

  ~Watch();  // Cancel()
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // Ends the watch: once it returns (called from another thread than the
  // callback's), no callback runs.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

  // The revision the watch would resume from: every event before it has
  // been told. 0 before the watch started from "now".
  int64_t next_revision() const ABSL_LOCKS_EXCLUDED(mu_);
  // How many streams the watch opened (1 unless it moved between members).
  int streams_opened() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Client;
  // What ended one stream.
  enum class StreamEnd { kContinue, kRetry, kResumeHere, kFinal };

  Watch(std::shared_ptr<Endpoints> endpoints, WatchSpec spec,
        Callback on_update);
  void Run();
  StreamEnd RunStream(size_t endpoint, absl::Status& final_status);
  StreamEnd Handle(const etcdserverpb::WatchResponse& response, size_t endpoint,
                   absl::Status& final_status);
  void Tell(WatchUpdate update) ABSL_LOCKS_EXCLUDED(mu_);
  // Sleeps `pause` unless cancelled first; false once cancelled.
  bool PauseUnlessCancelled(absl::Duration pause) ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<Endpoints> endpoints_;
  const WatchSpec spec_;
  const Callback on_update_;
  // The watch thread's own.
  bool started_told_ = false;
  bool stream_worked_ = false;  // the last stream was created
  bool token_refused_ = false;  // etcd refused the last stream's token

  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t next_revision_ ABSL_GUARDED_BY(mu_) = 0;
  int streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_WATCH_H_
