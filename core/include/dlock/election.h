// Copyright dlock authors. Leader election: campaigners, one leader at a
// time with a value and a term, and observers woken on every change (C24).
// etcd's Election (Campaign, Proclaim, Resign, Leader, Observe) and
// Curator's LeaderLatch are the models; docs/design/primitives.md says what
// their bug histories taught and how each backend keeps this.
#ifndef DLOCK_ELECTION_H_
#define DLOCK_ELECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cancel.h"
#include "dlock/hold.h"
#include "dlock/lock.h"

namespace dlock {

// The largest value a campaigner may announce (any bytes).
inline constexpr size_t kMaxLeaderValueBytes = 16 * 1024;

namespace internal {
class ElectionSite;  // the client's side of an election; core/src
}  // namespace internal

// Who leads, as read from the backend in one step (C11, C24).
struct LeaderInfo {
  std::string name;  // the election's
  bool has_leader = false;
  std::string owner;  // the leader's owner id (C6)
  std::string value;  // what it announced (Campaign, Proclaim)
  // Its fencing token: larger than every earlier leader's term.
  uint64_t term = 0;
  absl::Time since = absl::InfinitePast();  // when it was elected
  absl::Duration remaining_lease = absl::ZeroDuration();
  std::optional<bool> leader_live;  // as LockInfo::holder_live

  // Whether two readings name a different leader or value (what
  // Election::WaitForChange waits for).
  bool SameAs(const LeaderInfo& other) const {
    return has_leader == other.has_leader && term == other.term &&
           owner == other.owner && value == other.value;
  }
};

// This campaigner's leadership: a Hold (lease or watchdog, local deadline,
// owner-checked renewal and release; C19 to C21) whose fencing token is the
// term. Move-only; an empty Leadership is !active(); destroying an active
// one resigns. Thread safety: as Hold.
class [[nodiscard]] Leadership {
 public:
  Leadership() = default;
  Leadership(Leadership&&) noexcept = default;
  Leadership& operator=(Leadership&&) noexcept = default;

  bool active() const { return hold_.active(); }
  explicit operator bool() const { return active(); }

  // The term: pass it with every write the leader makes, so that a
  // resource refuses a deposed leader's (C8).
  uint64_t term() const { return hold_.fencing_token(); }
  // The value last announced by this campaigner (Campaign, Proclaim).
  const std::string& value() const { return value_; }

  // kHeld only while this campaigner is surely the only leader (C19): the
  // leadership's local deadline lies ahead. Once it is not, the loss is
  // told once (AcquireOptions::on_lost, lost_token(); C20), before any other
  // campaigner can be elected: stop acting as leader when lost_token()
  // fires.
  LockState state() const { return hold_.state(); }
  bool lost() const { return hold_.lost(); }
  absl::Status lost_reason() const { return hold_.lost_reason(); }
  const CancelToken& lost_token() const { return hold_.lost_token(); }

  // Announces a new value while this leadership stands (etcd's Proclaim),
  // in one atomic step conditional on the term, so a deposed leader can
  // never overwrite its successor's. Observers are woken. Errors:
  // InvalidArgument (over kMaxLeaderValueBytes); FailedPrecondition IsLost
  // when the leadership is lost (told once, as a loss found by Renew);
  // Unavailable when the backend did not answer (the value may or may not
  // have changed: read Election::Leader()).
  absl::Status Proclaim(absl::string_view value);

  // Steps down (Hold::Release()): the next campaigner may be elected, and
  // observers are woken. Errors as Hold::Release(); a resignation the
  // backend did not confirm is retried in the background (C21), and the
  // leadership is given up at once either way.
  absl::Status Resign() { return hold_.Release(); }

  // Hold::Renew() and the rest; ReleaseAndKeepFor() answers Unimplemented.
  Hold& hold() { return hold_; }
  const Hold& hold() const { return hold_; }

 private:
  friend class internal::ElectionSite;
  Leadership(Hold hold, std::string value,
             std::shared_ptr<internal::ElectionSite> site)
      : hold_(std::move(hold)),
        value_(std::move(value)),
        site_(std::move(site)) {}

  Hold hold_;
  std::string value_;
  std::shared_ptr<internal::ElectionSite> site_;
};

// One election, from LockClient::GetElection(name). Safe to share between
// threads (C17).
//
// - At most one campaigner believes it leads at any instant (C19 applied
//   to leadership); terms strictly increase from leader to leader.
// - A leader stops leading by resigning, by losing its hold (lease end,
//   lapsed liveness, a session the server ended, a force unlock), or by
//   Close(); it is told once, before another campaigner can be elected.
// - Anyone can read the leader (Leader()) and wait for a change
//   (WaitForChange()): woken by the backend's announcements (pub/sub,
//   LISTEN/NOTIFY, watches), never by polling, with the fallback poll of a
//   lock's wait in case an announcement is lost (C9). Each wake-up reads
//   the leader afresh, so a missed or stale event can delay an observer,
//   never make it report a leader that is not the current one.
// - Campaigners are owners (C6): a campaigner that campaigns again while it
//   leads re-enters its leadership (C5) with the same term, announcing the
//   new value if it differs.
class Election {
 public:
  virtual ~Election() = default;

  virtual const std::string& name() const = 0;

  // Campaigns with `value` (an address, an id; any bytes up to
  // kMaxLeaderValueBytes), waiting up to options.wait to be elected.
  // options.lease, owner_token, cancel and on_lost mean what they mean for
  // a lock. Errors as DistributedLock::Acquire() (DeadlineExceeded while
  // another leads; Cancelled; IsClientClosed; Unavailable), InvalidArgument
  // for a value too long, Unimplemented where the backend does not offer
  // elections. A campaigner that gives up leaves nothing behind (C9).
  virtual absl::StatusOr<Leadership> Campaign(
      absl::string_view value, const AcquireOptions& options = {}) = 0;

  // The leader now, in one round trip; has_leader false when none.
  virtual absl::StatusOr<LeaderInfo> Leader() = 0;

  // Waits until the leader differs from `seen` (another term or value, or
  // a leader appearing or leaving) and returns the new reading; returns at
  // once if it differs already. DeadlineExceeded (IsWaitExpired) when
  // nothing changed within `wait`; Cancelled when `cancel` fires;
  // FailedPrecondition IsClientClosed on Close(). To follow an election,
  // loop: info = WaitForChange(info, ...).
  virtual absl::StatusOr<LeaderInfo> WaitForChange(
      const LeaderInfo& seen, absl::Duration wait,
      const CancelToken& cancel = CancelToken()) = 0;

  // Resigns the leadership of `owner_token` (C6), wherever it was won.
  // FailedPrecondition IsNotOwner when that owner does not lead.
  virtual absl::Status ResignByToken(absl::string_view owner_token) = 0;
};

}  // namespace dlock

#endif  // DLOCK_ELECTION_H_
