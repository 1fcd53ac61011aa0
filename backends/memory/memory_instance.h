// Copyright dlock authors. One memory:// instance: the state a server would
// hold, shared by every client of the process that names it. Locks (their
// writers) are Entries; a semaphore, an election and a lock's readers are
// Holders objects (issue 24, docs/design/primitives.md#memory). Every step
// on them runs under the instance's one mutex, so each is atomic.
#ifndef DLOCK_BACKENDS_MEMORY_MEMORY_INSTANCE_H_
#define DLOCK_BACKENDS_MEMORY_MEMORY_INSTANCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dlock/backend/wakeup.h"
#include "dlock/clock.h"
#include "dlock/object_info.h"

namespace dlock::memory {

// A lock's writer. A lock released with keep_for (ReleaseCall) stays an
// Entry with an empty owner, which no owner id matches, and no holds, until
// it expires.
struct Entry {
  std::string owner;
  int64_t holds = 0;
  uint64_t fencing_token = 0;
  absl::Duration kept_lease;  // the largest lease asked for this hold (C5)
  MonoTime expires;           // on the clients' shared clock
  absl::Time since;           // a date, for introspection only
};

// One holder of a Holders object: a semaphore's grant, a lock's reader, an
// election's leader.
struct Holder {
  uint64_t fencing_token = 0;
  int64_t holds = 0;
  int64_t permits = 1;
  std::vector<int64_t> slots;  // a semaphore's (C22)
  absl::Duration kept_lease;
  MonoTime expires;
  absl::Time since;
};

// An object with several holders, or one that keeps a place for a waiter:
// a semaphore (N permits), an election (one leader and its value), or a
// lock's readers (the place: the waiting writer's intent).
struct Holders {
  // The place kept for the first waiter: no later caller is granted what
  // would leave it short (C22), or no reader comes in before the writer
  // whose intent it is (C23). Renewed by the waiter's retries.
  struct Place {
    std::string owner;
    int64_t permits = 1;
    MonoTime until;
  };

  int64_t limit = 0;  // a semaphore's N in force
  // By owner id (ordered: stable listings; looked up by string_view).
  std::map<std::string, Holder, std::less<>> owners;
  std::optional<Place> place;
  std::string value;  // an election's

  // Drops holders whose lease ended and a place that lapsed.
  void Purge(MonoTime now);
  bool empty() const { return owners.empty() && !place.has_value(); }
  int64_t PermitsUsed() const;
  // The lowest `count` slots in [0, limit) no holder has.
  std::vector<int64_t> FreeSlots(int64_t count) const;
  // How long until a holder's lease or the place may end: when to look
  // again without an announcement.
  absl::Duration SoonestEnd(MonoTime now) const;
  // Whether `owner` may take a place, and takes (or renews) it.
  void KeepPlaceFor(absl::string_view owner, int64_t permits, MonoTime until);
  // Gives up `owner`'s place; whether it had it.
  bool DropPlaceOf(absl::string_view owner);
  // The object's holders and waiter as ObjectInfo, at `now`.
  void Describe(MonoTime now, bool shared, ObjectInfo& info) const;
};

class MemoryInstance {
 public:
  // `clock` null: Clock::Real().
  explicit MemoryInstance(std::shared_ptr<Clock> clock)
      : clock_owner(std::move(clock)),
        clock(clock_owner != nullptr ? *clock_owner : Clock::Real()) {}
  const std::shared_ptr<Clock> clock_owner;
  const Clock& clock;  // the "server's" clock
  absl::Mutex mu;
  // Keyed by namespace + '\0' + name: a namespace has no NUL (C16). The key
  // stays in here: messages name the lock as its caller did.
  absl::flat_hash_map<std::string, Entry> locks ABSL_GUARDED_BY(mu);
  // Keyed by namespace + '\0' + "\x1f" + a kind letter + name: 'r' a lock's
  // readers, 's' a semaphore, 'e' an election. No name holds a control
  // character (C15), so these never meet a lock's key.
  absl::flat_hash_map<std::string, Holders> objects ABSL_GUARDED_BY(mu);
  uint64_t last_fencing_token ABSL_GUARDED_BY(mu) = 0;

  // Waiters for releases in namespace `ns`, by lock name (and by "\x1f" +
  // letter + name for a semaphore's and an election's); kept as long as the
  // instance.
  WakeupHub& ReleasesIn(const std::string& ns);

  // The live entry for `key`, dropping it if its lease ran out (C2).
  Entry* Find(const std::string& key, MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The object for `key` with its ended holders purged; null (and dropped)
  // when nothing is left of it.
  Holders* FindObject(const std::string& key, MonoTime now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

 private:
  absl::Mutex hubs_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<WakeupHub>> hubs_
      ABSL_GUARDED_BY(hubs_mu_);
};

// The instance called `name`, kept for the life of the process as a server
// would keep its state (its fencing counter never goes back, C8). Its
// expiries count on the clock of the client that made it: clients that share
// an instance share a clock (ClientOptions::clock), as clients of one server
// share the server's.
absl::StatusOr<std::shared_ptr<MemoryInstance>> InstanceNamed(
    const std::string& name, const std::shared_ptr<Clock>& clock);

}  // namespace dlock::memory

#endif  // DLOCK_BACKENDS_MEMORY_MEMORY_INSTANCE_H_
