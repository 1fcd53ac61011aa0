// Copyright dlock authors. What the backend says about a named object with
// one holder or many: a lock (its writer and readers), a semaphore (its
// permits), an election (its leader). Returned by the handles' Inspect()
// and Leader(), and by LockAdmin::ListObjects() for operators and the CLI.
// Times are on the backend's clock, as in LockInfo (dlock/lock.h).
#ifndef DLOCK_OBJECT_INFO_H_
#define DLOCK_OBJECT_INFO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

// Each kind of object is a name space of its own in a lock namespace: a
// semaphore "jobs" and a lock "jobs" never meet. A lock's readers and its
// writer are one object (ReadWriteLock's writer is GetLock(name)'s holder).
enum class ObjectKind {
  kLock,       // DistributedLock, ReadWriteLock (C1, C23)
  kSemaphore,  // Semaphore (C22)
  kElection,   // Election (C24)
};

// "lock", "semaphore", "election".
absl::string_view ObjectKindName(ObjectKind kind);

// One holder of an object: a writer or a reader of a lock, the holder of
// some of a semaphore's permits, an election's leader.
struct HolderInfo {
  std::string owner;  // owner id as stored on the backend (C6)
  // A reader of a lock; false for a writer, a semaphore's holder, a leader.
  bool shared = false;
  int64_t hold_count = 0;  // its re-entries (C5)
  uint64_t fencing_token = 0;
  // The permit slots it holds, each in [0, N) (a semaphore's; empty
  // otherwise): no two believed holders share a slot (C22).
  std::vector<int64_t> slots;
  absl::Duration remaining_lease = absl::ZeroDuration();
  absl::Time since = absl::InfinitePast();  // when its hold began
  // As LockInfo::holder_live: whether its client's liveness (record or
  // session) is current; unset where the backend cannot tell.
  std::optional<bool> holder_live;
};

// A waiter the backend keeps a place for: a semaphore's head waiter, whose
// permits no later caller may take, or the waiting writer whose intent
// keeps new readers out of a lock (C22, C23).
struct WaiterInfo {
  std::string owner;
  int64_t permits = 0;  // a semaphore's head waiter; 1 for a writer
  // The place has been handed to it: the last holder left and nobody else
  // may take the object while the place lives (a lock's writer hand-off).
  bool handed_over = false;
};

// A named object as the backend sees it now, read in one step (C11).
struct ObjectInfo {
  ObjectKind kind = ObjectKind::kLock;
  std::string name;
  // A semaphore's N in force (0 when nothing holds or waits); 1 for a lock's
  // writer or an election.
  int64_t limit = 0;
  // Writer (or readers), permit holders, or the leader; empty when free.
  std::vector<HolderInfo> holders;
  std::optional<WaiterInfo> waiter;
  // An election's leader's value (Election::Campaign, Proclaim).
  std::string value;
  // A lock released with Hold::ReleaseAndKeepFor() and held by nobody
  // (LockInfo::kept_after_release); holders is empty then.
  bool kept_after_release = false;
  absl::Duration kept_remaining = absl::ZeroDuration();
};

}  // namespace dlock

#endif  // DLOCK_OBJECT_INFO_H_
