// Copyright dlock authors. A client's lease keepalives, on one
// LeaseKeepAlive stream that moves to another member when its member fails
// or stops answering: leases kept alive on a schedule (Keep) and single
// keepalives whose answer the caller waits for (KeepAliveOnce).
//
// etcd answers the requests of one stream in order, one answer each, so the
// n-th answer is the n-th request's: an answer is never taken for a later
// request than the one it renewed, and the TTL it gives is counted from
// that request's sending.
#ifndef DLOCK_BACKENDS_ETCD_ETCD_LEASE_KEEPER_H_
#define DLOCK_BACKENDS_ETCD_ETCD_LEASE_KEEPER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace grpc {
class ClientContext;
}

namespace dlock::etcd {

class Endpoints;

class LeaseKeeper {
 public:
  // Ends the stream; leases still kept are left to expire on the server.
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Keeps `lease` alive with a keepalive every `interval` (a third of its
  // TTL leaves two chances to fail) until Forget(lease). When etcd says the
  // lease is gone (expired, revoked), `on_gone` runs once, on the keeper's
  // thread, and the lease is forgotten. Keeping a lease kept already
  // replaces its schedule and callback.
  void Keep(int64_t lease, absl::Duration interval,
            std::function<void()> on_gone) ABSL_LOCKS_EXCLUDED(mu_);
  void Forget(int64_t lease) ABSL_LOCKS_EXCLUDED(mu_);

  // One keepalive of `lease`, answered: the TTL etcd gave it, counted from
  // no earlier than this call's start. NotFound when etcd says the lease is
  // gone; Unavailable when no member answered by `deadline` (from
  // MonotonicNow(), as every time here).
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease,
                                               absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // KeepAliveOnce() of every lease at once: all are sent before any answer
  // is awaited, and the caller wakes once, when the last is answered (a
  // watchdog round of many holds costs one wait, not one per hold). One
  // result per lease, in order.
  std::vector<absl::StatusOr<absl::Duration>> KeepAliveEach(
      absl::Span<const int64_t> leases, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Until when a kept lease is known to live: the sending of its last
  // answered keepalive plus the TTL it got. nullopt before any answer.
  std::optional<absl::Time> KnownAliveUntil(int64_t lease) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // How many streams the keeper opened (1 unless it moved between members).
  int streams_opened() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Client;
  struct Kept {
    absl::Duration interval;
    absl::Time next_due;
    std::function<void()> on_gone;
    std::optional<absl::Time> alive_until;
  };
  // A KeepAliveEach() waiting for one lease's answer.
  struct Waiter {
    bool done = false;
    absl::StatusOr<absl::Duration> result = absl::UnknownError("unanswered");
    // The caller's count of answers still due, taken off when this one is
    // done; cleared (under mu_) when the caller stops waiting.
    size_t* unanswered = nullptr;
  };
  // A keepalive to send, or sent and not yet answered.
  struct Request {
    int64_t lease = 0;
    absl::Time sent;
    std::vector<std::shared_ptr<Waiter>> waiters;
  };
  struct Stream;

  explicit LeaseKeeper(Endpoints& endpoints);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Opens a stream on the preferred member; false when it could not.
  bool Open() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the stream (after its reader) and requeues its unanswered
  // keepalives.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  // Close(), then Open(), pausing after every member failed in turn.
  void Reconnect() ABSL_LOCKS_EXCLUDED(mu_);
  void Read(Stream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  void Answered(Stream* stream, int64_t lease, int64_t ttl)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the keepalives due now to the send queue; the time of the next.
  absl::Time Schedule(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Stalled(absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool HasWork() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  Endpoints& endpoints_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The stream's reader thread saw it end, or the keeper found it stalled.
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<Stream> stream_ ABSL_GUARDED_BY(mu_);
  int streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Kept> kept_ ABSL_GUARDED_BY(mu_);
  std::deque<Request> to_send_ ABSL_GUARDED_BY(mu_);
  std::deque<Request> in_flight_ ABSL_GUARDED_BY(mu_);  // in sending order
  // Streams in a row that could not be opened or answered nothing.
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dlock::etcd

#endif  // DLOCK_BACKENDS_ETCD_ETCD_LEASE_KEEPER_H_
