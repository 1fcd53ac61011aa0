// Copyright dlock authors. Reads what the history workers logged and what the
// register saw, and measures the contract under faults: whether two owners
// ever believed they held the lock at once (C19), whether the fence let a
// superseded holder write, how many unfenced updates were lost, whether
// every loss was told before the next owner's grant (C20), and whether every
// worker got the lock again once the faults healed. All times are
// CLOCK_MONOTONIC nanoseconds of this machine, shared by every process.
#ifndef DLOCK_TESTS_HISTORY_HISTORY_CHECKER_H_
#define DLOCK_TESTS_HISTORY_HISTORY_CHECKER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "history_register.h"

namespace dlock::test {

struct WorkerEvent {
  int64_t at_ns = 0;
  std::string kind;  // attempt, grant, held, not_held, lost, released, ...
  uint64_t token = 0;
  // A grant's: "<holds>" for a lock's writer or a leadership, "<holds> read"
  // for a reader, "<holds> slot <s>" for a semaphore's permit or a
  // multi-lock's name (one grant event per name).
  std::string detail;
};

struct WorkerHistory {
  int id = 0;
  // Workers that share an explicit owner token are one owner (C6): their
  // holds may overlap.
  std::string owner;
  std::vector<WorkerEvent> events;
  int64_t killed_at_ns = -1;  // SIGKILLed by the scenario: nobody to tell
  // SIGSTOP to SIGCONT: a stopped process can tell nothing until it runs.
  std::vector<std::pair<int64_t, int64_t>> paused;
};

// Parses one worker's event file.
absl::StatusOr<std::vector<WorkerEvent>> ReadEvents(const std::string& path);

struct HistoryReport {
  int grants = 0;
  // The most holds believed at one instant: 1 for a lock, at most N for a
  // semaphore of N (C22).
  int max_believed_at_once = 0;
  // Pairs of readers of a read-write lock believed at once (C23 lets them):
  // a workload of readers that never overlapped proves nothing.
  int shared_overlaps = 0;
  // Pairs of holds of different owners believed at once, and the longest
  // such stretch: from the later grant to the earlier holder's last
  // "held" observation.
  // Readers together are not overlaps; a writer beside anyone is.
  int overlaps = 0;
  int64_t max_overlap_ns = 0;
  // Writes the register accepted from a holder after a grant of a larger
  // token had been made. `stale_writes_accepted`: the register had already
  // accepted a larger token, so its fence failed. `unfenced_writes_accepted`:
  // it had not yet seen the larger token (the new holder had not written
  // yet), so no fence could refuse them; only two believers at once (or a
  // holder paused between its check and its write) make them.
  int stale_writes_accepted = 0;
  int unfenced_writes_accepted = 0;
  int stale_writes_refused = 0;
  // Grants whose token is below an earlier grant's (a backend that lost
  // its counter).
  int token_regressions = 0;
  int64_t increments = 0;    // counter writes the register applied
  int64_t lost_updates = 0;  // increments minus the counter's value
  // Holds that ended without a release while another owner was granted the
  // lock next: how many were told only after that grant (or never), and by
  // how much the latest was late; how early the earliest notice came.
  int holds_superseded = 0;
  int notices_late = 0;
  int64_t max_notice_lateness_ns = 0;
  int64_t min_notice_lead_ns = INT64_MAX;
  // Superseded while their process was stopped: told once it ran again.
  int notices_after_pause = 0;
  // Holds told lost more than once (C20: exactly once).
  int notices_repeated = 0;
  // From a worker's SIGKILL to the next grant to another owner (C2), the
  // longest of them; -1 without a kill.
  int64_t max_recovery_ns = -1;
  // Per worker (by index), grants after `healed_at_ns`; -1 for a worker
  // the scenario killed.
  std::vector<int> grants_after_heal;
  // How long after the heal the last of the workers got the lock again: a
  // lock stuck with a dead hold shows here.
  int64_t all_granted_after_heal_ns = 0;
  std::vector<std::string> problems;  // first examples, for messages
  // Workers that crashed, hung, or did not exit when asked.
  std::vector<std::string> exit_problems;

  // Every worker the scenario did not kill was granted the lock after the
  // heal.
  bool AllBackAfterHeal() const;
  std::string Summary() const;
};

// How a release counts for the notice rule (C20).
enum class ReleaseRule {
  // A release started while the hold was believed gives it up, whatever
  // its answer: the backend may have confirmed it in the background.
  kStartedWhileHeld,
  // Only a release that returned OK gives the hold up: one that did not
  // must have been told lost before the next owner's grant. For scenarios
  // where nothing can confirm a release in the background before the
  // hold's lease ends (a partition longer than the lease).
  kConfirmed,
};

// `counter` and `counter_sets`: the register's counter and how many writes
// to it were applied. `healed_at_ns`: when the scenario ended its last fault.
HistoryReport CheckHistory(
    const std::vector<WorkerHistory>& workers,
    const std::vector<RegisterWrite>& writes, int64_t counter,
    int64_t counter_sets, int64_t healed_at_ns,
    ReleaseRule release_rule = ReleaseRule::kStartedWhileHeld);

// A history whose grants each name a cell ("<holds> slot <s>"): a
// semaphore's (C22), a grant per permit, its slot the cell; or multi-locks'
// (C25), a grant per name taken, the name's index the cell. Each cell is
// checked as a lock of its own, against its cell of the register (key = s;
// `counters[s]` is that cell's counter and sets), and the findings are
// added up. Grants, holders at once and the heal are judged over the whole;
// tokens increase per cell, and for a semaphore (whose tokens increase per
// grant) over the whole too (a multi-lock's tokens are per name): a grant's
// token must exceed every token granted before its acquire began
// (concurrent grants are logged in any order). Recovery after a kill: for
// a semaphore, the dead holder's slot granted again; for a multi-lock, the
// next grant to another owner (an ordered taker logs the names it took only
// once it has them all, so a name's next grant also counts the live holds
// the taker queued behind for its other names).
enum class KeyedObject { kSemaphore, kMultiLock };
HistoryReport CheckKeyedHistory(
    const std::vector<WorkerHistory>& workers,
    const std::vector<RegisterWrite>& writes,
    const std::vector<std::pair<int64_t, int64_t>>& counters,
    int64_t healed_at_ns, KeyedObject object,
    ReleaseRule release_rule = ReleaseRule::kStartedWhileHeld);

}  // namespace dlock::test

#endif  // DLOCK_TESTS_HISTORY_HISTORY_CHECKER_H_
