// Copyright dlock authors. What a client tells an observer about its locks:
// metrics, tracing, audit logs. Install one with ClientOptions::observer; a
// ready Prometheus implementation is dlock/adapters/metrics.h.
//
// The contract:
//
// - Which thread calls. Every method runs on a thread the client already
//   has, never on one of its own: OnAcquireAttempt, OnGrant and
//   OnAcquireFailed on the thread calling Acquire(); OnRelease on the thread
//   releasing (Hold::Release() or its destructor, OwnerTokens().Release(),
//   Hold::KeepUntilLeaseEnd()); OnRenewal on the watchdog's renewer thread,
//   or on the thread calling Hold::Renew()/OwnerTokens().Renew(); OnLoss
//   wherever the loss is delivered to the lost callbacks (the client's notifier
//   thread, the thread whose Release()/Renew() found the hold gone, or the
//   thread calling Close()); OnReleaseFailure on the thread releasing, the
//   renewer thread (background retries, C21) or the thread calling Close();
//   OnBackendCall on whichever thread made the round trip. So the methods
//   may run on several threads at once: an observer synchronizes its own
//   state. One observer may be shared by many clients.
// - Callbacks must be quick and must not block: they run on the hot path
//   of acquisitions and on the threads that keep holds alive (a slow
//   OnRenewal delays the next renewals). Hand slow work to a thread of your
//   own.
// - Callbacks must not call back into the client (its locks, holds,
//   Admin() or Close()): some run while a call of that client is in
//   progress on the same thread. No client lock is held while one runs.
// - Exceptions: a method that throws has that event dropped; the client
//   behaves exactly as without an observer. The first throw of each client
//   is written to stderr as one line; later ones are silent.
// - Exactly once: each hold's loss is one OnLoss, as it is one lost notice
//   (C20). Each Acquire() call is one OnAcquireAttempt followed by one
//   OnGrant or one OnAcquireFailed.
// - Events never carry a password: names, owner ids, fencing tokens,
//   durations, and statuses whose messages name the endpoint redacted (as
//   every error of the client does).
// - Zero cost when unset: without an observer the client makes one null
//   check per event and times no backend call.
//
// The string_views in an event are valid only during the call: copy what
// you keep.
#ifndef DLOCK_OBSERVER_H_
#define DLOCK_OBSERVER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/object_info.h"

namespace dlock {

// An Acquire() call is starting.
struct AcquireAttemptEvent {
  absl::string_view lock_namespace;
  absl::string_view name;
  absl::string_view owner;  // the owner id as stored on the backend (C6)
  absl::Duration wait;      // AcquireOptions::wait (zero: one attempt)
  // Which hold (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's grant, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};

// Acquire() returned a Hold.
struct GrantEvent {
  absl::string_view lock_namespace;
  absl::string_view name;
  absl::string_view owner;
  uint64_t fencing_token = 0;
  // The owner's hold count after this acquisition: 1 for a fresh hold, more
  // for a re-entry (C5).
  int64_t hold_count = 0;
  // Whether this acquisition started a hold of the owner in this client
  // (false for a re-entry of a hold believed held). Fresh holds end with
  // one OnRelease whose `last` is true, or with one OnLoss.
  bool fresh = false;
  // From the start of the Acquire() call to the grant, waiting included.
  absl::Duration waited;
  // Which hold (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's grant, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};

// Acquire() returned an error (held by another, wait expired, cancelled,
// unreachable, closed, a bad argument).
struct AcquireFailedEvent {
  absl::string_view lock_namespace;
  absl::string_view name;
  absl::Duration waited;
  const absl::Status& error;
  // Which hold (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's grant, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};

// An acquisition this client granted was released, or left to run out with
// its lease (Hold::KeepUntilLeaseEnd()). Not told for a release the hold's
// loss came before (that is its OnLoss), nor for a release by token of a
// hold this client did not grant.
struct ReleaseEvent {
  absl::string_view lock_namespace;
  absl::string_view name;
  absl::string_view owner;
  uint64_t fencing_token = 0;
  // Since this acquisition's grant (on the client's clock).
  absl::Duration held;
  // The owner's hold in this client ended with it (its last acquisition).
  bool last = false;
  // OK when the backend confirmed it; otherwise (Unavailable) the hold is
  // given up all the same and, for the last, its release retried in the
  // background (C21; failures of those retries are OnReleaseFailure).
  const absl::Status& result;
  bool kept_until_lease_end = false;
  // Which hold (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's grant, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};

// One renewal's answer: a watchdog renewal (C7) or an explicit Renew().
struct RenewalEvent {
  absl::string_view lock_namespace;
  absl::string_view name;
  absl::string_view owner;
  uint64_t fencing_token = 0;  // 0 for a renewal by token of a hold taken
                               // elsewhere
  bool by_watchdog = false;
  // OK; Unavailable (transient: retried until the hold's deadline); or
  // FailedPrecondition/NotFound: the hold is gone (an OnLoss follows).
  const absl::Status& result;
  // Which hold (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's grant, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};

// Why a hold was lost, as a small closed set (for metrics labels).
enum class LossCause {
  // The backend said the hold is gone: force-unlocked, expired there, or
  // its session ended.
  kGone,
  // The local deadline passed without a confirmed renewal, or the backend
  // session could no longer be trusted (C19): unreachable, most likely.
  kUnconfirmed,
  // An explicit lease ran out before release.
  kLeaseEnded,
  // The client closed while the hold was believed held (C13).
  kClientClosed,
};
// "gone", "unconfirmed", "lease_ended", "client_closed".
absl::string_view LossCauseName(LossCause cause);

// A hold believed held is lost: told once per hold (C20), to the observer
// as to the lost callbacks, and after them.
struct LossEvent {
  absl::string_view lock_namespace;
  absl::string_view name;
  absl::string_view owner;
  uint64_t fencing_token = 0;
  LossCause cause = LossCause::kGone;
  const absl::Status& reason;  // IsLost(reason), as in LockLostEvent
  absl::Duration held;         // since the hold's grant
  // Which hold (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's grant, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};

// A release the backend did not confirm, where nobody is returned the
// error: a background retry (C21), a release at Close(), or a Hold's
// release given up to the background (also told as OnRelease).
struct ReleaseFailureEvent {
  enum class Stage { kCaller, kBackground, kClose };
  absl::string_view lock_namespace;
  absl::string_view name;
  absl::string_view owner;
  Stage stage = Stage::kCaller;
  const absl::Status& error;
  // Which hold (issue 24): a lock's writer (kLock, !shared), a lock's
  // reader (kLock, shared), a semaphore's grant, a leadership.
  ObjectKind kind = ObjectKind::kLock;
  bool shared = false;
};
// "caller", "background", "close".
absl::string_view ReleaseFailureStageName(ReleaseFailureEvent::Stage stage);

// The Backend calls a client makes (dlock/backend/backend.h), as timed.
enum class BackendOperation {
  kAcquire,  // includes the wait for the lock
  kRelease,
  kRenew,  // one Renew, or one RenewMany batch of the watchdog
  kInspect,
  kList,
  kForceUnlock,
  kServerMemory,
  kRenewLiveness,  // the heartbeat of this client's liveness record
};
inline constexpr int kBackendOperationCount = 8;
// "acquire", "release", "renew", "inspect", "list", "force_unlock",
// "server_memory", "renew_liveness".
absl::string_view BackendOperationName(BackendOperation operation);

// One round trip to the backend (one Backend call), timed on the client's
// clock.
struct BackendCallEvent {
  absl::string_view lock_namespace;
  BackendOperation operation = BackendOperation::kAcquire;
  absl::string_view name;  // empty for List, ServerMemory and renewal batches
  int calls = 1;           // holds in a renewal batch; 1 otherwise
  absl::Duration latency;
  // The call's status; for a batch, the first failure's (OK if none).
  absl::StatusCode code = absl::StatusCode::kOk;
};

// Every method does nothing by default: override what you need.
class LockObserver {
 public:
  virtual ~LockObserver() = default;

  virtual void OnAcquireAttempt(const AcquireAttemptEvent&) {}
  virtual void OnGrant(const GrantEvent&) {}
  virtual void OnAcquireFailed(const AcquireFailedEvent&) {}
  virtual void OnRelease(const ReleaseEvent&) {}
  virtual void OnRenewal(const RenewalEvent&) {}
  virtual void OnLoss(const LossEvent&) {}
  virtual void OnReleaseFailure(const ReleaseFailureEvent&) {}
  virtual void OnBackendCall(const BackendCallEvent&) {}
};

}  // namespace dlock

#endif  // DLOCK_OBSERVER_H_
