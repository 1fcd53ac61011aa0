// Copyright dlock authors. Releases the backend did not confirm (C21): each
// is retried until the backend confirms it or the hold's lease must be over
// there, and an acquisition of the same lock and owner waits for it, so that
// the owner never silently inherits a hold it asked to release. Data and the
// clock only: whoever sends a release claims it here under the client core's
// mutex, sends it without, and settles it here again (ClientCore's
// SendRelease, the one way every release of this table is sent).
#ifndef DLOCK_CORE_SRC_PENDING_RELEASES_H_
#define DLOCK_CORE_SRC_PENDING_RELEASES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "alarms.h"
#include "dlock/backend/backend.h"
#include "dlock/backend/hold_key.h"
#include "dlock/clock.h"

namespace dlock::internal {

// How many of an owner's holds a release takes off (ReleaseCall::holds and
// ReleaseCall::all_holds).
struct HoldsToRelease {
  int64_t count = 0;
  bool all = false;
};

// Every method runs under the client core's mutex.
class PendingReleases {
 public:
  struct Release {
    HoldsToRelease holds;
    // The backend's record of the hold given up (the first, if several of
    // one key pile up).
    std::shared_ptr<HoldRecord> record;
    MonoTime give_up;
    MonoTime next_try;
    absl::Duration retry_every;
    bool in_flight = false;  // a thread is sending it now
    // Hold::ReleaseAndKeepFor(): the lock is to stay taken until here. Each
    // try asks for what is left from its send, so that a retry neither
    // frees the lock sooner (C21) nor keeps it longer than asked.
    MonoTime keep_until = MonoTime::InfinitePast();
    // The final releases it retries whose holds are not told yet
    // (HoldTable's unconfirmed ones, by generation): confirmed with it.
    std::vector<uint64_t> generations;
  };

  // A release claimed to be sent now: in flight until settled.
  struct Claim {
    HoldKey key;
    Release release;
  };

  // What an acquisition of a key must do first (BeforeAcquire).
  enum class Turn {
    kGo,    // registered: nothing of this owner is being released
    kSend,  // send the claimed release of the key, settle it, ask again
    kWait,  // another thread sends one: wait on Alarms::released()
  };

  // What settling a sent release found.
  enum class Settled {
    kDone,      // confirmed, or the hold was gone: forgotten
    kRetrying,  // transient failure: tried again later
    kTaken,     // no longer here (Close() took it)
  };

  PendingReleases(const Clock& clock, Alarms& alarms)
      : clock_(clock), alarms_(alarms) {}
  PendingReleases(const PendingReleases&) = delete;
  PendingReleases& operator=(const PendingReleases&) = delete;

  // A release of `holds` to retry until confirmed, or until the backend has
  // surely expired a hold of `lease` (the longest it was asked for).
  // `generation`: the unconfirmed final release it goes on with (0: none).
  // Sent at once, or from `not_before` on.
  void Add(const HoldKey& key, HoldsToRelease holds, absl::Duration lease,
           std::shared_ptr<HoldRecord> record,
           MonoTime keep_until = MonoTime::InfinitePast(),
           uint64_t generation = 0,
           MonoTime not_before = MonoTime::InfinitePast());
  bool Contains(const HoldKeyView& key) const {
    return releases_.contains(key);
  }

  // Before an acquisition of `key` (C21). kGo registers it until
  // AfterAcquire(), with `releases_sent` the count it compares with then;
  // kSend fills `claim`.
  Turn BeforeAcquire(const HoldKey& key, uint64_t& releases_sent,
                     std::optional<Claim>& claim);
  // Ends the registration. Whether a release of the key was sent since, or
  // is pending: it may have taken off what the acquisition was granted.
  bool AfterAcquire(const HoldKey& key, uint64_t releases_sent);

  // A final release on a caller's thread is in flight for `key`:
  // acquisitions of the key wait for it, and no retry of it goes out.
  void BeginFinalRelease(const HoldKey& key);
  void EndFinalRelease(const HoldKey& key);

  // Claims the releases due a retry at `now`, forgetting those whose lease
  // is over on the backend.
  std::vector<Claim> ClaimDue(MonoTime now);
  // Close(): takes every release not in flight whose lease may still hold.
  std::vector<Claim> TakeAll(MonoTime now);
  // The backend answered `result` to the claimed release of `key` sent at
  // `sent`. Wakes those waiting for a release in flight.
  Settled Settle(const HoldKey& key, const absl::Status& result, MonoTime sent);
  // When the next retry not in flight is due; InfiniteFuture for none.
  MonoTime NextTry() const;

  // What to send for `claim` at `now`.
  static ReleaseCall CallFor(const Claim& claim, MonoTime now);

 private:
  // An acquisition in flight for a key, and the background releases sent
  // for that key meanwhile: one of them may have removed what it is
  // granted.
  struct Acquiring {
    int count = 0;
    uint64_t releases_sent = 0;
  };

  Claim ClaimOne(HoldMap<Release>::iterator it);

  const Clock& clock_;
  Alarms& alarms_;
  HoldMap<Release> releases_;
  // Final releases in flight on callers' threads, and acquisitions in
  // flight, by HoldKeyHash: no allocation on the fast path; two keys that
  // share a hash only make one wait for, or refuse, the other's.
  absl::flat_hash_map<size_t, int> releasing_;
  absl::flat_hash_map<size_t, Acquiring> acquiring_;
};

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_PENDING_RELEASES_H_
