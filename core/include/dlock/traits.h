// Copyright dlock authors. What a backend guarantees beyond the contract,
// declared by each backend and readable from the client
// (LockClient::traits()), so that code and operators can choose on
// evidence. docs/backends.md shows them per backend; the conformance suite
// checks each declaration against what the backend does.
#ifndef DLOCK_TRAITS_H_
#define DLOCK_TRAITS_H_

#include <string>

namespace dlock {

// How far fencing tokens keep increasing across holders (C8).
enum class FencingStrength {
  // Within one process (memory://).
  kProcess,
  // While the server keeps its data: a restart without persistence, or a
  // failover to a replica that lacked the latest writes, can give a token
  // again (Redis).
  kServerMemory,
  // Across restarts and failovers of the service (a quorum or a database
  // that keeps its writes).
  kDurable,
};

// Who gets a freed permit among a semaphore's waiters (C22).
enum class WaiterOrder {
  kNone,          // waiters race for it
  kHeadReserved,  // the first waiter's place is kept; the others race
  kFifo,          // in the order they began to wait (a queue)
};

// How LockClient::AcquireAll() takes its names (C25).
enum class MultiLockMode {
  // The core takes them one by one in one global order (by their bytes),
  // giving back what it took when it cannot finish: every backend.
  kOrdered,
  // Atomic in one step when the names share a Redis Cluster slot, else
  // ordered.
  kAtomicWithinSlot,
  // Atomic in one step (Backend::AcquireAll).
  kAtomic,
};

struct BackendTraits {
  // Waiters are granted the lock in the order they began to wait.
  bool fifo_waiting = false;
  // Holds live on the client's session (or connection) besides their lease:
  // when the server ends the session, the holds end with it.
  bool holds_tied_to_session = false;
  // The backend keeps a liveness record per client (a key, a row), refreshed
  // by the client while it holds locks (ClientOptions::liveness_ttl): a hold
  // whose client's record lapsed may be taken over whatever its lease.
  bool liveness_record = false;
  // A server restart keeps the holds (and the fencing counter).
  bool holds_survive_restart = false;
  FencingStrength fencing = FencingStrength::kServerMemory;
  // LockAdmin::List() works (not Unimplemented).
  bool can_list = false;
  // Clients in different processes (and machines) share locks.
  bool shared_across_processes = true;
  // Hold::ReleaseAndKeepFor() works: the backend can leave a lock taken by
  // nobody after its release (ReleaseCall::keep_for). Without it the core
  // answers Unimplemented and leaves the hold as it was.
  bool keeps_after_release = false;

  // Beyond the mutex (issue 24, C22 to C25). A primitive not offered
  // answers every call Unimplemented with `primitives_note`, which says why:
  // never a weaker primitive in silence (docs/backends.md).
  bool semaphores = false;        // LockClient::GetSemaphore() (C22)
  bool read_write_locks = false;  // LockClient::GetReadWriteLock() (C23)
  bool elections = false;         // LockClient::GetElection() (C24)
  // Why a primitive above is not offered; empty when all are (the client
  // fills in a generic reason for a backend that leaves it empty).
  std::string primitives_note;
  WaiterOrder semaphore_order = WaiterOrder::kNone;
  // Every backend offers multi-locks: ordered by the core, or atomic.
  MultiLockMode multi_lock = MultiLockMode::kOrdered;
};

// "process", "server-memory", "durable".
const char* FencingStrengthName(FencingStrength strength);
// "none", "head-reserved", "fifo".
const char* WaiterOrderName(WaiterOrder order);
// "ordered", "atomic-within-slot", "atomic".
const char* MultiLockModeName(MultiLockMode mode);

}  // namespace dlock

#endif  // DLOCK_TRAITS_H_
