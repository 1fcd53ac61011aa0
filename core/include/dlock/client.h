// Copyright dlock authors. A client: one connection set to one backend.
#ifndef DLOCK_CLIENT_H_
#define DLOCK_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/clock.h"
#include "dlock/duration.h"
#include "dlock/election.h"
#include "dlock/lock.h"
#include "dlock/multi_lock.h"
#include "dlock/object_info.h"
#include "dlock/observer.h"
#include "dlock/rw_lock.h"
#include "dlock/semaphore.h"
#include "dlock/traits.h"

namespace dlock {

class Backend;  // dlock/backend/backend.h

// The shortest ClientOptions::watchdog_lease: renewed at a third of it, a
// shorter one would leave no time for a round trip.
inline constexpr absl::Duration kMinWatchdogLease = absl::Milliseconds(30);

struct ClientOptions {
  // Locks in different namespaces never interact (C16). Letters, digits,
  // '.', '_' and '-', at most 64 bytes. Empty: the URI's `namespace=`
  // parameter, else "default". A URI parameter and a different value here
  // is InvalidArgument.
  std::string lock_namespace;
  // The lease of holds renewed by the watchdog (C7), renewed at a third.
  // From kMinWatchdogLease to kLongestLease (dlock/duration.h).
  absl::Duration watchdog_lease = absl::Seconds(30);
  // Holder liveness (docs/reliability.md): while this client holds a lock it
  // refreshes a liveness record on the backend every third of this, and a
  // hold of a client whose record lapsed may be taken over by a waiter,
  // whatever its lease. The client tells its own holds lost once the record
  // is not confirmed for this long (less the drift margin), before anyone
  // can take them over (C19). Backends whose holds live on a session
  // (ZooKeeper, PostgreSQL mode=session) keep no record: the session is the
  // liveness. InfiniteDuration: no liveness record, holds end with their
  // lease only. Finite values must be at least 10ms. The URI option
  // liveness_ttl= overrides it.
  absl::Duration liveness_ttl = absl::Seconds(10);
  // How often a waiter re-checks when no wake-up arrives (C9).
  absl::Duration fallback_poll = absl::Seconds(1);
  // Upper bound for Close() to release what the client holds (C13).
  absl::Duration close_timeout = absl::Seconds(5);
  // The 128-bit client id as 32 hex digits. Empty: random.
  std::string client_id;
  // Called for every lost hold of this client, after the hold's own callback.
  LockLostCallback on_lost;
  // Where a Hold's destructor reports a release that failed. Empty: the
  // process-wide default (SetDefaultReleaseErrorHook, dlock/hold.h).
  ReleaseErrorHook on_release_error;
  // Local time for leases, renewals and waits. Null: Clock::Real(), the
  // monotonic clock. Tests pass a ManualClock; clients that share a
  // memory:// instance must share its clock too.
  std::shared_ptr<Clock> clock;
  // Wraps the backend the URI names before the client uses it: metrics,
  // tracing, or a fault-injecting backend in tests
  // (dlock/backend/forwarding_backend.h is the base for such decorators). Null:
  // none.
  std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)>
      backend_decorator;
  // Told of every lock event and timed backend round trip of this client
  // (dlock/observer.h says on which threads, and what it must not do). May
  // be shared by many clients. Null: none, at the cost of one null check
  // per event.
  std::shared_ptr<LockObserver> observer;
};

// What operators and tools do to locks whoever holds them. Apart from the
// handles service code uses, so that a force unlock is never one typo away.
// Safe to share between threads.
class LockAdmin {
 public:
  virtual ~LockAdmin() = default;

  // The lock as the backend sees it now (C11): its writer. A lock held by
  // readers alone is not locked here; ReadWriteLock::Inspect() and
  // ListObjects(ObjectKind::kLock) show its readers (C23). InvalidArgument
  // for a bad name.
  virtual absl::StatusOr<LockInfo> Inspect(absl::string_view name) = 0;

  // Locks currently held by a writer (or kept) in this namespace whose names
  // start with `prefix`, as Inspect() shows them. Unimplemented where the
  // backend cannot list.
  virtual absl::StatusOr<std::vector<LockInfo>> List(
      absl::string_view prefix = {}) = 0;

  // Removes the lock whoever holds it, its writer and every reader (C12,
  // C23); waiters wake, and each former holder is told once that it lost
  // its hold.
  virtual absl::Status ForceUnlock(absl::string_view name) = 0;

  // Removes the lock only if it is still held with exactly `fencing_token`,
  // in one atomic step, so that a monitor acting on a listing never removes
  // the hold of an owner that took the lock over since. Waiters wake and the
  // former holder is told it lost the lock, as with ForceUnlock(name).
  // FailedPrecondition (naming the token) when the lock is free or held with
  // another token; Unimplemented where the backend cannot do it atomically.
  virtual absl::Status ForceUnlock(absl::string_view name,
                                   uint64_t fencing_token) = 0;

  // What the server says it uses for all its data now (ServerMemory in
  // dlock/lock.h): for benchmarks and monitors, which compare two readings.
  // Unimplemented where the server cannot tell; Unavailable when it does
  // not answer.
  virtual absl::StatusOr<ServerMemory> ServerMemoryUse() = 0;

  // ---- Beyond the mutex (issue 24; docs/design/primitives.md) ----------
  // Connect()'s clients implement these; the defaults answer Unimplemented
  // for other implementations (test doubles, wrappers written before them).

  // Objects of `kind` held (or waited for with a kept place) in this
  // namespace whose names start with `prefix`, each read in one step (C11):
  // a lock's writer or readers, a semaphore's holders and N, an election's
  // leader and value. Unimplemented where the backend cannot list, or does
  // not offer that kind.
  virtual absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix = {}) {
    (void)kind;
    (void)prefix;
    return absl::UnimplementedError(
        "this LockAdmin does not implement ListObjects");
  }
  // Removes every hold of the object, whoever holds it (C12): a lock's
  // writer and readers, all of a semaphore's permits, the leader. Waiters
  // and observers wake; former holders are told they lost their holds.
  // With `fencing_token`, only the hold that carries it, in one atomic
  // step (one reader, one permit grant, the leader of that term), as
  // ForceUnlock(name, token); FailedPrecondition (TokenMismatchError) when
  // no hold carries it.
  virtual absl::Status ForceUnlockObject(
      ObjectKind kind, absl::string_view name,
      std::optional<uint64_t> fencing_token = std::nullopt) {
    (void)kind;
    (void)name;
    (void)fencing_token;
    return absl::UnimplementedError(
        "this LockAdmin does not implement ForceUnlockObject");
  }
};

// The calls that name a hold by an explicit owner token (C6) instead of
// through its Hold: for a token shared with other threads or processes,
// whose holds this process may not have a Hold for (an RPC carrying a job
// id releases the job's lock). Apart from the handles service code uses,
// as administration is. Safe to share between threads.
//
// Each call takes a lock name (InvalidArgument for one C15 rejects) and a
// non-empty owner token (InvalidArgument otherwise: the calling thread's own
// holds go through their Hold).
class OwnerTokenCalls {
 public:
  virtual ~OwnerTokenCalls() = default;

  // Takes one hold of `owner_token` off `name`; the lock is free at zero.
  // FailedPrecondition when that owner does not hold it (IsNotOwner) or
  // lost it (IsLost). Where this client holds it with Holds, the innermost
  // acquisition goes: its Hold reads kNotHeld from then on, and its
  // Release() answers IsNotOwner.
  virtual absl::Status Release(absl::string_view name,
                               absl::string_view owner_token) = 0;
  // Extends the lease of `owner_token`'s hold on `name`, as Hold::Renew()
  // does; without `lease`, that hold's lease here, or the client's
  // watchdog lease for a hold taken elsewhere.
  virtual absl::Status Renew(absl::string_view name,
                             absl::string_view owner_token,
                             std::optional<absl::Duration> lease = {}) = 0;
  // This client's local view of `owner_token`'s hold on `name` (no round
  // trip); kNotHeld for a name or token the calls above refuse.
  virtual LockState State(absl::string_view name,
                          absl::string_view owner_token) = 0;
};

// Hands out locks by name. Safe to share between threads (C17). Service code
// depends on this interface and DistributedLock only; the backend comes from
// the URI given to dlock::Connect().
class LockClient {
 public:
  virtual ~LockClient() = default;

  // A handle for `name`. InvalidArgument for a name C15 rejects; nothing is
  // sent to the backend.
  virtual absl::StatusOr<std::unique_ptr<DistributedLock>> GetLock(
      absl::string_view name) = 0;

  // The short path, for a caller that keeps no lock handle: GetLock(name),
  // then Acquire(options) on it. The Hold needs no handle to stay valid.
  // Errors as GetLock() (a bad name) and DistributedLock::Acquire().
  //
  //   absl::StatusOr<dlock::Hold> hold =
  //       client->Acquire("reports/nightly", {.wait = absl::Seconds(10)});
  absl::StatusOr<Hold> Acquire(absl::string_view name,
                               const AcquireOptions& options = {});
  // One attempt, one round trip, as DistributedLock::TryAcquire().
  absl::StatusOr<Hold> TryAcquire(absl::string_view name,
                                  AcquireOptions options = {});

  // Inspection, listing and force unlock; lives as long as the client.
  virtual LockAdmin& Admin() = 0;

  // Release, renewal and state by owner token (C6); lives as long as the
  // client.
  virtual OwnerTokenCalls& OwnerTokens() = 0;

  // Releases every hold of this client and stops renewal, within
  // ClientOptions::close_timeout (C13). Later calls on handles and holds
  // fail with FailedPrecondition (IsClientClosed). Idempotent; the destructor
  // calls it.
  virtual absl::Status Close() = 0;

  virtual const std::string& client_id() const = 0;
  virtual const std::string& lock_namespace() const = 0;
  // What the backend behind this client guarantees (dlock/traits.h).
  virtual const BackendTraits& traits() const = 0;
  // Where the client connects, safe to print: never a password.
  virtual const std::string& endpoint() const = 0;
  // The owner id that the calling thread acts as by default (C6).
  virtual std::string CurrentOwner() const = 0;

  // ---- Beyond the mutex (issue 24; docs/design/primitives.md) ----------
  // Connect()'s clients implement these; the defaults answer Unimplemented
  // for other implementations (test doubles, wrappers written before them).
  // Names are checked as GetLock()'s (C15: InvalidArgument, nothing sent);
  // each kind of object is a name space of its own (dlock/object_info.h),
  // except that a read-write lock is the lock of the same name.

  // A semaphore of `permits` permits (N, from 1 to kMaxSemaphorePermits,
  // else InvalidArgument) under `name` (C22; dlock/semaphore.h). Nothing is
  // sent: a different N in force is found by the first Acquire().
  virtual absl::StatusOr<std::unique_ptr<Semaphore>> GetSemaphore(
      absl::string_view name, int64_t permits) {
    (void)name;
    (void)permits;
    return absl::UnimplementedError(
        "this LockClient does not implement GetSemaphore");
  }

  // The readers and writer of lock `name` (C23; dlock/rw_lock.h).
  virtual absl::StatusOr<std::unique_ptr<ReadWriteLock>> GetReadWriteLock(
      absl::string_view name) {
    (void)name;
    return absl::UnimplementedError(
        "this LockClient does not implement GetReadWriteLock");
  }

  // Election `name` (C24; dlock/election.h).
  virtual absl::StatusOr<std::unique_ptr<Election>> GetElection(
      absl::string_view name) {
    (void)name;
    return absl::UnimplementedError(
        "this LockClient does not implement GetElection");
  }

  // Takes the locks `names` all or nothing within options.wait, and hands
  // them back as one MultiHold (C25; dlock/multi_lock.h). No deadlock with
  // other AcquireAll() calls naming the same locks in any order, nor with
  // single acquisitions. options apply to every name (one lease, one
  // owner, one wait for the whole). Errors: InvalidArgument for no names,
  // more than kMaxMultiLockNames, a name twice or a bad name (nothing
  // sent); otherwise DistributedLock::Acquire()'s, and whatever the error,
  // none of the names is left held by this call: what it took is released
  // before it returns (in the background if the backend cannot be reached,
  // C21). A name the owner holds already is re-entered (C5).
  virtual absl::StatusOr<MultiHold> AcquireAll(
      absl::Span<const std::string> names, const AcquireOptions& options = {}) {
    (void)names;
    (void)options;
    return absl::UnimplementedError(
        "this LockClient does not implement AcquireAll");
  }
};

// Connects to the backend the URI names: `memory://[name]`,
// `redis://[user[:password]@]host[:port][/db][?options]`, and every other
// registered scheme. InvalidArgument for an unknown scheme, a malformed URI
// or a bad option; Unavailable when the backend cannot be reached.
absl::StatusOr<std::unique_ptr<LockClient>> Connect(
    absl::string_view uri, const ClientOptions& options = {});

}  // namespace dlock

#endif  // DLOCK_CLIENT_H_
