// Copyright dlock authors. How long the holds of a ZooKeeper session can be
// believed (C19). ZooKeeper expires a session, and deletes its ephemeral lock
// nodes, no earlier than the session timeout after it last heard from the
// client; a request that got a reply was heard no earlier than it was sent.
// So the holds of a session are safe until the send time of its latest
// answered request, plus the negotiated timeout, less a margin for the rate
// of the two clocks. Lock-free: the core asks on every State(), under its own
// mutex, and from its notifier thread.
#ifndef DLOCK_BACKENDS_ZOOKEEPER_ZK_LIVENESS_H_
#define DLOCK_BACKENDS_ZOOKEEPER_ZK_LIVENESS_H_

#include <atomic>
#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "dlock/backend/rules.h"
#include "dlock/clock.h"

namespace dlock::zk {

class Liveness {
 public:
  explicit Liveness(absl::Duration timeout)
      : timeout_ns_(absl::ToInt64Nanoseconds(timeout)) {}

  // A reply from the server to a request of session `generation` sent at
  // `sent`: the session lived when the server read it.
  void NoteReply(uint64_t generation, MonoTime sent) {
    if (generation != generation_.load()) return;
    const int64_t ns = absl::ToInt64Nanoseconds(sent.since_origin());
    int64_t seen = replied_ns_.load();
    while (seen < ns && !replied_ns_.compare_exchange_weak(seen, ns)) {
    }
    // A reply of an older session that lands here after the switch to a new
    // one (the check above raced with NewSession) is older than every
    // request of the new session, so it can only make the bound earlier.
  }

  // The session ended, or may have (expired on the server): nothing of it
  // is believed any more.
  void Distrust() { replied_ns_.store(kNone); }

  // From now on, replies count for `generation`, which has none yet.
  void NewSession(uint64_t generation) {
    // In this order: a reader that sees the new session's replies also sees
    // its generation (and tells the old session's holds from it).
    replied_ns_.store(kNone);
    generation_.store(generation);
  }

  void SetTimeout(absl::Duration timeout) {
    timeout_ns_.store(absl::ToInt64Nanoseconds(timeout));
  }
  absl::Duration timeout() const {
    return absl::Nanoseconds(timeout_ns_.load());
  }

  // Until when the holds of session `generation` can be believed; the
  // infinite past for an older session, or one that never got a reply.
  MonoTime BelievableUntil(uint64_t generation) const {
    // The replies first, then the session: see NewSession().
    const int64_t replied = replied_ns_.load();
    if (generation != generation_.load() || replied == kNone) {
      return MonoTime::InfinitePast();
    }
    const absl::Duration timeout = this->timeout();
    return MonoTime::FromSinceOrigin(absl::Nanoseconds(replied)) + timeout -
           DriftMargin(timeout);
  }

  // The latest answered request's send time; the infinite past for none.
  MonoTime LastReplied() const {
    const int64_t replied = replied_ns_.load();
    return replied == kNone
               ? MonoTime::InfinitePast()
               : MonoTime::FromSinceOrigin(absl::Nanoseconds(replied));
  }

  uint64_t generation() const { return generation_.load(); }

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  std::atomic<uint64_t> generation_{1};
  std::atomic<int64_t> replied_ns_{kNone};
  std::atomic<int64_t> timeout_ns_;
};

}  // namespace dlock::zk

#endif  // DLOCK_BACKENDS_ZOOKEEPER_ZK_LIVENESS_H_
