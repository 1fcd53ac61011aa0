// Copyright dlock authors. What a backend implements: the contract between
// the client core and a lock service. Service code never includes this;
// third-party backends do (it is installed).
//
// The core does, once for every backend: validation of names, owners,
// leases and durations (C15); owner identity (C6); the table of this
// client's holds and each hold's local deadline (C19); the watchdog (C7);
// lost notices, told once (C20); releases the backend did not confirm,
// retried in the background (C21); shutdown (C13); and the wording of the
// contract's errors (dlock/errors.h). A backend supplies the atomic
// operations on its server and says what it learned.
//
// Thread safety: every method may be called from several threads at once
// (callers' threads, the core's renewer and notifier), except Shutdown(),
// which the core calls once, after every other call has returned, and after
// which it calls nothing. A backend owns the threads and connections it
// starts and ends them in Shutdown().
//
// Statuses the core reads (anything else is passed to the caller as is,
// naming the endpoint and never a password):
//   OK                  done.
//   GONE                the owner does not hold the lock, or no longer does:
//                       FailedPrecondition built by NotOwnerError() or
//                       LostError() (dlock/errors.h), which mark it with
//                       their ErrorKind; IsGone() (dlock/backend/rules.h)
//                       tests it. From Release/Renew of a hold the core
//                       believed, the core marks it lost and tells it once
//                       (C20). Any other FailedPrecondition (a translator of
//                       the server's errors may make one) is not GONE.
//   Unavailable         the server could not be reached or did not answer
//                       in time: TRANSIENT. The outcome is unknown (the call
//                       may have run). Renewals are retried until the hold's
//                       local deadline; releases in the background until
//                       the longest lease asked (C21); acquisitions are
//                       returned to the caller.
//   DeadlineExceeded    from Acquire only: the deadline passed with the lock
//                       held by another owner. The core words it
//                       (IsHeldByAnother / IsWaitExpired).
//   Cancelled           from Acquire only: AcquireCall::cancel fired.
//   InvalidArgument     a parameter the backend cannot honour (a lease
//                       longer than the server's limit): the caller's error.
// A backend must never report a hold it cannot vouch for as OK (C19).
#ifndef DLOCK_BACKEND_BACKEND_H_
#define DLOCK_BACKEND_BACKEND_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/backend/options.h"
#include "dlock/backend/rules.h"
#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/clock.h"
#include "dlock/errors.h"
#include "dlock/lock.h"
#include "dlock/object_info.h"
#include "dlock/traits.h"
#include "dlock/uri.h"

namespace dlock {

// What a backend keeps of one hold of its own, opaque to the core: a node
// path and version, the session or connection the hold lives on. A backend
// returns it in Grant::record; the core keeps it with the hold and hands it
// back to every later call about that hold (re-entry, Renew, Release,
// HeldUntil, and background releases after the hold was given up), then
// drops it. So a backend needs no hold table of its own. Calls on one
// record may run on several threads at once: a record guards its own
// mutable state. Backends that need nothing leave it null.
class HoldRecord {
 public:
  virtual ~HoldRecord() = default;
};

// Who an owner id names (C6). A backend compares owner ids as opaque
// strings and never parses them; what it may need to know of an owner is
// here.
enum class OwnerKind {
  // The default owner: one thread of one client object. Nobody else acts as
  // it, so its holds on the backend are this client's alone.
  kThread,
  // An explicit owner token (AcquireOptions::owner_token): other threads,
  // clients and processes may hold and release as the same owner, so the
  // lock may be held by this owner through another client.
  kToken,
};

// What one hold takes (issue 24, docs/design/primitives.md). Everything
// the core does for holds (deadlines, the watchdog, notices, pending
// releases) is keyed by the name qualified with the kind and mode, so a
// lock's writer, a reader of that lock, a semaphore and an election of one
// name are four holds of one owner; a backend sees the plain name and this.
// A backend only ever gets the shapes its traits offer (a lock's exclusive
// hold always).
enum class HoldMode {
  kExclusive,  // a lock's writer (every lock hold), a leadership
  kShared,     // a lock's reader (C23)
  kPermits,    // some of a semaphore's permits (C22)
};
struct HoldShape {
  ObjectKind kind = ObjectKind::kLock;
  HoldMode mode = HoldMode::kExclusive;
  // kPermits, in AcquireCall: how many (1..limit), and the N the caller
  // expects (C22). In RenewCall and ReleaseCall only kind and mode are
  // set: the backend's record of the grant knows the rest.
  int64_t permits = 1;
  int64_t limit = 1;

  bool IsLockWriter() const {
    return kind == ObjectKind::kLock && mode == HoldMode::kExclusive;
  }
};

// One acquisition as the core hands it to a backend: name and owner are
// already validated, the lease is positive.
struct AcquireCall {
  absl::string_view name;
  absl::string_view owner;
  OwnerKind owner_kind = OwnerKind::kThread;
  absl::Duration lease;
  // When to stop waiting, on the client's clock (BackendConfig::clock). At
  // or before now: a single attempt, one round trip (C10).
  MonoTime deadline;
  // Fires to abandon the wait (the caller's cancel, or Close()). The backend
  // returns Cancelled promptly and leaves nothing behind on the server (no
  // queue place, no hold).
  CancelToken cancel;
  // The record of this owner's hold in this client, when the core believes
  // one (the acquisition is then a re-entry, C5); null otherwise.
  HoldRecord* held = nullptr;
  // Default: a lock's exclusive hold.
  HoldShape shape;
  // kElection: the campaigner's value (at most kMaxLeaderValueBytes). A
  // re-entry with another value proclaims it.
  absl::string_view value;
};

// One attempt's success, before the core knows when its request was sent
// (see Grant).
struct Acquired {
  uint64_t fencing_token = 0;
  int64_t hold_count = 0;
};

// A successful acquisition as a backend reports it to the core.
struct Grant {
  uint64_t fencing_token = 0;  // same on re-entry (C8)
  int64_t hold_count = 0;      // the backend's count after this acquisition
  // When the request that the backend granted was sent (after a wait: the
  // attempt that won, not the first one). The backend starts the lease no
  // earlier, so the core, counting the lease from here, stops believing in
  // the hold no later than the backend frees it (C19).
  MonoTime sent;
  // The hold's record (see HoldRecord). On a re-entry of AcquireCall::held:
  // null keeps that record. When acquisitions of one owner run at once, the
  // record of the grant the core records last replaces the earlier one: a
  // backend lets go of what a replaced record held (its lease at the
  // latest).
  std::shared_ptr<HoldRecord> record;
  // kPermits: the permit slots granted, ascending, each in [0, N); the same
  // on re-entry (C22).
  std::vector<int64_t> slots;
};

struct RenewCall {
  absl::string_view name;
  absl::string_view owner;
  absl::Duration lease;
  HoldRecord* record = nullptr;  // null: a hold taken elsewhere (C6)
  HoldShape shape;               // which of the owner's holds of `name`
};

struct ReleaseCall {
  absl::string_view name;
  absl::string_view owner;
  // How many holds to take off; more than the owner has takes them all.
  int64_t holds = 1;
  // Takes off every hold the owner has, whatever the count (`holds` is then
  // ignored): the core gives up a thread owner's hold whole, since the
  // backend may count acquisitions of it whose reply was lost (C21).
  bool all_holds = false;
  HoldRecord* record = nullptr;  // null: a hold taken elsewhere (C6)
  // When the release takes the owner's last hold off, the lock stays taken
  // by nobody until keep_for from now on the server's clock (at least,
  // never less): refused to every owner, renewed and released by nobody,
  // expiring by itself, removed by ForceUnlock(), reported by Inspect() and
  // List() with LockInfo::kept_after_release. Its representation must name
  // no owner or client. Zero: the lock is freed (and waiters woken).
  // Otherwise at least kMinLease; the core never asks it for a partial
  // release, nor of a backend whose traits lack keeps_after_release (it
  // answers Unimplemented itself).
  absl::Duration keep_for = absl::ZeroDuration();
  HoldShape shape;  // which of the owner's holds of `name`

  // For a server that computes "holds left = count - n" (a script, a
  // statement): the n that takes off what this call asks, every hold
  // included.
  int64_t CountToSubtract() const {
    return all_holds ? std::numeric_limits<int64_t>::max() : holds;
  }
};

// The holder of a held (not kept) lock as ObjectInfo shows it: for a
// backend whose other objects' holds are described as locks are.
HolderInfo HolderOf(const LockInfo& lock);

// How a backend tells the core about holds it learned are gone on its own
// (a session that expired, a connection that dropped).
class BackendListener {
 public:
  virtual ~BackendListener() = default;
  // Marks the owner's hold lost; the core tells it once (C20). May be
  // called from any thread, with no lock of the backend held that
  // HeldUntil() takes.
  virtual void OnHoldLost(absl::string_view name, absl::string_view owner,
                          const HoldShape& shape,
                          const absl::Status& reason) = 0;
  // A lock's exclusive hold.
  void OnHoldLost(absl::string_view name, absl::string_view owner,
                  const absl::Status& reason) {
    OnHoldLost(name, owner, HoldShape{}, reason);
  }
};

// An election's leader announcing a new value (Backend::Proclaim).
struct ProclaimCall {
  absl::string_view name;
  absl::string_view owner;
  HoldRecord* record = nullptr;  // the leadership's
  uint64_t term = 0;             // its fencing token
  absl::string_view value;
};

// A registration for changes of one object (Backend::WatchObject).
class ObjectWatch {
 public:
  virtual ~ObjectWatch() = default;
  // Returns when a change may have happened since the registration or the
  // last Wait() (true), at `until` on the client's clock, or on `cancel`
  // (false).
  virtual bool Wait(MonoTime until, const CancelToken& cancel) = 0;
};

// A lock as ObjectInfo: its writer, or its keep (a backend adds its readers,
// if it has any).
ObjectInfo LockObject(const LockInfo& lock);

// Whether ListObjects lists the object: held (a lock by readers alone too),
// kept after its release, or waited for with a kept place.
bool ListsAsHeld(const ObjectInfo& info);

class Backend {
 public:
  virtual ~Backend() = default;

  // What this backend guarantees (dlock/traits.h), constant for its life.
  virtual BackendTraits Traits() const = 0;

  // Acquires or re-enters atomically (C3, C5): one hold more for the owner,
  // the lease at least call.lease (never shortened on re-entry). Waits
  // until call.deadline without polling (C9): woken by releases, with at
  // most BackendConfig::options.fallback_poll between attempts. The fencing
  // token of a fresh hold exceeds every earlier one (C8). Errors: see the
  // codes above; DeadlineExceeded and Cancelled leave nothing behind.
  virtual absl::StatusOr<Grant> Acquire(const AcquireCall& call) = 0;

  // Takes call.holds holds of call.owner off call.name and returns how many
  // are left; at zero the lock is free and waiters are woken (C5, C9).
  // GONE (NotOwnerError) when the owner does not hold it (C4), leaving the
  // lock as it was. Idempotent across a lost reply as far as the server
  // allows: the core retries an Unavailable release (C21).
  virtual absl::StatusOr<int64_t> Release(const ReleaseCall& call) = 0;

  // Extends the lease to the larger of call.lease and the kept maximum (C5),
  // on the server's clock. GONE (NotOwnerError) when the owner does not
  // hold it: never brings back a hold that was gone.
  virtual absl::Status Renew(const RenewCall& call) = 0;

  // The watchdog renews everything due at once; a backend that can batch
  // overrides this. Returns one status per call, in order.
  virtual std::vector<absl::Status> RenewMany(
      absl::Span<const RenewCall> calls);

  // Beyond the lease, how long the backend's own liveness lets this client
  // believe that `owner` holds `name`: a session that the server may end on
  // its own (ZooKeeper, a PostgreSQL session) bounds every hold on it. The
  // core believes a hold until the earlier of its lease deadline and this
  // (C19), and wakes then to report it lost (C20). Called on every State(),
  // under the client's own lock: answer from memory, never with a round
  // trip, and take no lock that is held while calling BackendListener.
  // Default: no bound.
  virtual MonoTime HeldUntil(absl::string_view name, absl::string_view owner,
                             const HoldRecord* record);

  // Holder liveness (docs/reliability.md). A backend whose Traits() say
  // liveness_record keeps one record per client (BackendConfig::liveness_id)
  // that expires `ttl` after its last refresh on the server's clock
  // (ttl = BackendConfig::options.liveness_ttl, finite), and lets a waiter
  // take over a hold whose client's record is gone, whatever its lease.
  // Every grant (fresh or re-entry) refreshes the record in the same atomic
  // step, so the core counts Grant::sent as a confirmed refresh. While this
  // client holds locks the core calls RenewLiveness every ttl/3 and believes
  // every hold until the send time of the last confirmed refresh plus ttl,
  // less the drift margin, so that its holder is told lost before a waiter
  // can take it over (C19). OK once the record was refreshed; Unavailable
  // when that is not known. A backend over several servers that keep a
  // record each (Redlock) may answer OK when enough of them confirmed, and
  // bound each hold through HeldUntil by the servers that keep it. Default:
  // Unimplemented (no record).
  virtual absl::Status RenewLiveness(absl::Duration ttl);

  // The lock as the server sees it now (C11): never from a local cache. Its
  // writer (or its keep): a lock held by readers alone is not locked here
  // (InspectObject shows them, C23).
  virtual absl::StatusOr<LockInfo> Inspect(absl::string_view name) = 0;
  // Locks held by a writer or kept, whose names start with `prefix` (as
  // Inspect shows them). Default: Unimplemented (BackendTraits::can_list
  // false).
  virtual absl::StatusOr<std::vector<LockInfo>> List(absl::string_view prefix);
  // Removes the lock whoever holds it, its writer and every reader, and
  // wakes its waiters (C12, C23). Holders
  // in other clients learn it at their next renewal or release (their
  // backend answers FailedPrecondition).
  virtual absl::Status ForceUnlock(absl::string_view name) = 0;
  // LockAdmin::ForceUnlock(name, fencing_token): removes the lock only if it
  // is held with exactly `fencing_token`, atomically, with the wake-ups of
  // ForceUnlock(name). FailedPrecondition otherwise (build it with
  // TokenMismatchError()). Default: Unimplemented.
  virtual absl::Status ForceUnlockIfToken(absl::string_view name,
                                          uint64_t fencing_token);

  // LockAdmin::ServerMemoryUse(). Default: Unimplemented.
  virtual absl::StatusOr<ServerMemory> ServerMemoryUse();

  // ---- Beyond the mutex (issue 24; docs/design/primitives.md) ----------
  // Semaphores, readers and elections go through Acquire, Renew, RenewMany,
  // Release and HeldUntil with AcquireCall::shape, for the shapes that
  // Traits() offer (HeldUntil gets the object's plain name: tell holds
  // apart by their record). Refusals: LimitMismatchError,
  // PermitsMismatchError, UpgradeRefusedError (dlock/errors.h).

  // Several locks' exclusive holds all or nothing in one atomic step, then
  // waiting for all of them without holding a name another waiter needs in
  // a cycle (C25); one Grant per part, in order. Called only when Traits()
  // say kAtomic; otherwise the core takes the names one by one in its
  // global order. Default: Unimplemented.
  virtual absl::StatusOr<std::vector<Grant>> AcquireAll(
      absl::Span<const AcquireCall> parts, MonoTime deadline,
      const CancelToken& cancel);

  // The leader announces a new value, conditional on still leading with
  // call.term, in one atomic step; observers are woken. GONE when it does
  // not lead with that term. Default: Unimplemented.
  virtual absl::Status Proclaim(const ProclaimCall& call);

  // A registration for changes of one object (grants, releases, proclaimed
  // values), made BEFORE the caller reads the object, so that a change in
  // between is not missed. The backend's own announcements wake it, never a
  // poll of the server. Default: null (the core then reads again every
  // fallback poll).
  virtual std::unique_ptr<ObjectWatch> WatchObject(ObjectKind kind,
                                                   absl::string_view name);

  // The admin calls for every kind, each read or done in one step (C11,
  // C12). For a lock, InspectObject also shows its readers, and
  // ListObjects lists a lock held by readers alone. Defaults: a
  // lock's from Inspect/List/ForceUnlock(IfToken); Unimplemented for the
  // other kinds.
  virtual absl::StatusOr<ObjectInfo> InspectObject(ObjectKind kind,
                                                   absl::string_view name);
  virtual absl::StatusOr<std::vector<ObjectInfo>> ListObjects(
      ObjectKind kind, absl::string_view prefix);
  // Removes every hold of the object, or with `fencing_token` only the hold
  // that carries it (TokenMismatchError when none does), waking waiters and
  // observers.
  virtual absl::Status ForceUnlockObject(ObjectKind kind,
                                         absl::string_view name,
                                         std::optional<uint64_t> fencing_token);

  // Stops background work and closes connections. Called once, after the
  // core has released what the client held; no call follows it.
  virtual void Shutdown() = 0;

 protected:
  // List() for a backend that finds lock names by scanning: each name
  // inspected, the held ones kept; the scan's or an inspection's error is
  // the answer.
  absl::StatusOr<std::vector<LockInfo>> InspectHeld(
      const absl::StatusOr<std::vector<std::string>>& names);
  // ListObjects() for a backend that finds objects' names by scanning:
  // each name inspected (InspectObject), those held, kept after release or
  // waited for with a kept place kept (a lock held by readers alone
  // included); the scan's or an inspection's error is the answer.
  absl::StatusOr<std::vector<ObjectInfo>> InspectObjectsHeld(
      ObjectKind kind, const absl::StatusOr<std::vector<std::string>>& names);
};

// What a backend factory gets. `params` holds the URI's query parameters
// not yet taken by the core (namespace and the common options are); a
// factory takes its own and rejects the rest.
struct BackendConfig {
  const Uri& uri;
  UriParams& params;
  const ClientOptions& options;
  std::string lock_namespace;
  std::string client_id;
  std::string endpoint;       // the redacted URI, for messages
  BackendListener* listener;  // outlives the backend
  const Clock& clock;         // local time for every wait and deadline
  // connect_timeout= and operation_timeout=, for the backend to map onto its
  // client (dlock/backend/options.h).
  CommonBackendOptions common;
  // Names this client object's liveness record (Backend::RenewLiveness):
  // the client id and a random part, so that two clients (or a process and
  // its forked child) that share a client id keep records of their own.
  std::string liveness_id;
};

using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<Backend>>(
    const BackendConfig& config)>;

// Adds a scheme to the registry dlock::Connect() consults. Returns true, so
// that a backend can register from a static initializer:
//   const bool kRegistered = dlock::RegisterBackend("redis", &MakeRedis);
bool RegisterBackend(absl::string_view scheme, BackendFactory factory);
std::vector<std::string> RegisteredSchemes();

// Names the client library a backend talks to its server with, and its
// version, for `dlock version` and bug reports. Registered beside the scheme:
//   const bool kLibrary = dlock::RegisterClientLibrary("hiredis", "0.14.1");
bool RegisterClientLibrary(absl::string_view name, absl::string_view version);
// "hiredis 0.14.1", one per library, sorted.
std::vector<std::string> ClientLibraryVersions();

}  // namespace dlock

#endif  // DLOCK_BACKEND_BACKEND_H_
