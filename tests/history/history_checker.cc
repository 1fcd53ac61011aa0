#include "history_checker.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dlock::test {
namespace {

constexpr size_t kMaxProblems = 8;

// One acquisition as its worker saw it.
struct Hold {
  size_t worker = 0;
  const std::string* owner = nullptr;
  uint64_t token = 0;
  int64_t granted = 0;
  int64_t believed_until = 0;  // the last "held" observation, or `granted`
  int64_t released = -1;       // when Release() was called
  bool released_ok = false;    // and it returned OK
  // Whether the worker's last look before the release said "held": then it
  // gave the hold up, rather than reacting to its loss.
  bool held_at_release = true;
  int64_t told = -1;  // the first lost notice for it
  int told_count = 0;
  // A read-write lock's reader: readers may hold together (C23).
  bool shared = false;
  int64_t asked = 0;  // when the acquire that granted it began
};

// Whether two holds may not be believed at once.
bool Exclude(const Hold& a, const Hold& b) {
  return *a.owner != *b.owner && !(a.shared && b.shared);
}

std::vector<Hold> HoldsOf(const std::vector<WorkerHistory>& workers) {
  std::vector<Hold> holds;
  for (size_t w = 0; w < workers.size(); ++w) {
    size_t first = holds.size();
    int64_t current = -1;  // index into holds of the open hold
    int64_t asked = 0;
    for (const WorkerEvent& e : workers[w].events) {
      if (e.kind == "attempt") asked = e.at_ns;
      if (e.kind == "grant") {
        current = static_cast<int64_t>(holds.size());
        holds.push_back(Hold{.worker = w,
                             .owner = &workers[w].owner,
                             .token = e.token,
                             .granted = e.at_ns,
                             .believed_until = e.at_ns,
                             .shared = absl::EndsWith(e.detail, " read"),
                             .asked = asked});
      } else if (e.kind == "held" && current >= 0 &&
                 holds[current].token == e.token) {
        holds[current].believed_until = e.at_ns;
        holds[current].held_at_release = true;
      } else if (e.kind == "not_held" && current >= 0) {
        holds[current].held_at_release = false;
      } else if ((e.kind == "released" || e.kind == "release_error") &&
                 current >= 0) {
        holds[current].released = e.at_ns;
        holds[current].released_ok = e.kind == "released";
        current = -1;
      } else if (e.kind == "lost") {
        // The notice names the token of the hold it ends.
        for (size_t i = holds.size(); i-- > first;) {
          if (holds[i].token == e.token) {
            if (holds[i].told < 0) holds[i].told = e.at_ns;
            ++holds[i].told_count;
            break;
          }
        }
      }
    }
  }
  std::sort(holds.begin(), holds.end(),
            [](const Hold& a, const Hold& b) { return a.granted < b.granted; });
  return holds;
}

// The most holds believed at one instant (concurrent holds of one owner,
// C6, count apart).
int MaxBelievedAtOnce(const std::vector<Hold>& holds) {
  std::vector<std::pair<int64_t, int>> edges;  // (time, +1 | -1)
  for (const Hold& h : holds) {
    if (h.believed_until <= h.granted) continue;
    edges.push_back({h.granted, 1});
    edges.push_back({h.believed_until, -1});
  }
  std::sort(edges.begin(), edges.end());  // ends before starts at a tie
  int now = 0, most = holds.empty() ? 0 : 1;
  for (const auto& [at, change] : edges) most = std::max(most, now += change);
  return most;
}

std::string Ms(int64_t ns) {
  return absl::StrCat(static_cast<double>(ns) / 1e6, " ms");
}

}  // namespace

absl::StatusOr<std::vector<WorkerEvent>> ReadEvents(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no event file ", path));
  std::vector<WorkerEvent> events;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::MaxSplits(' ', 3));
    WorkerEvent e;
    if (parts.size() < 3 || !absl::SimpleAtoi(parts[0], &e.at_ns) ||
        !absl::SimpleAtoi(parts[2], &e.token)) {
      continue;  // a line cut short by SIGKILL
    }
    e.kind = parts[1];
    if (parts.size() == 4) e.detail = parts[3];
    events.push_back(std::move(e));
  }
  return events;
}

HistoryReport CheckHistory(const std::vector<WorkerHistory>& workers,
                           const std::vector<RegisterWrite>& writes,
                           int64_t counter, int64_t counter_sets,
                           int64_t healed_at_ns, ReleaseRule release_rule) {
  HistoryReport report;
  auto problem = [&](std::string text) {
    if (report.problems.size() < kMaxProblems) {
      report.problems.push_back(std::move(text));
    }
  };
  const std::vector<Hold> holds = HoldsOf(workers);
  report.grants = static_cast<int>(holds.size());

  // C19: two owners believing at once.
  for (size_t i = 0; i < holds.size(); ++i) {
    for (size_t j = i + 1; j < holds.size(); ++j) {
      const Hold& a = holds[i];
      const Hold& b = holds[j];  // granted no earlier than a
      // Holds are sorted by grant: none later can overlap `a` either.
      if (b.granted >= a.believed_until) break;
      const int64_t overlap =
          std::min(a.believed_until, b.believed_until) - b.granted;
      if (overlap <= 0 || *a.owner == *b.owner) continue;
      if (!Exclude(a, b)) {
        ++report.shared_overlaps;
        continue;
      }
      ++report.overlaps;
      report.max_overlap_ns = std::max(report.max_overlap_ns, overlap);
      problem(absl::StrCat("worker ", workers[a.worker].id, " (token ", a.token,
                           ") still believed it held the lock ", Ms(overlap),
                           " after worker ", workers[b.worker].id,
                           " was granted token ", b.token));
    }
  }

  // Token order across grants, and writes made after a larger grant. A
  // writer's token exceeds every earlier grant's (C23); readers are granted
  // side by side and log their grants in any order, so a reader's token is
  // not judged against another's.
  uint64_t largest = 0;
  for (const Hold& h : holds) {
    if (h.token < largest && !h.shared) ++report.token_regressions;
    largest = std::max(largest, h.token);
  }
  // `writes` come in the register's own order: the fence's view.
  uint64_t largest_accepted = 0;
  for (const RegisterWrite& w : writes) {
    const uint64_t seen = largest_accepted;
    if (w.accepted) largest_accepted = std::max(largest_accepted, w.token);
    uint64_t granted_before = 0;  // to a holder that writes
    for (const Hold& h : holds) {
      if (h.granted >= w.at_ns) break;
      if (!h.shared) granted_before = std::max(granted_before, h.token);
    }
    if (w.token >= granted_before) continue;
    if (!w.accepted) {
      ++report.stale_writes_refused;
    } else if (w.token < seen) {
      ++report.stale_writes_accepted;
      problem(absl::StrCat("the register accepted token ", w.token,
                           " from worker ", w.worker, " after it had accepted ",
                           seen));
    } else {
      ++report.unfenced_writes_accepted;
      problem(absl::StrCat("the register accepted token ", w.token,
                           " from worker ", w.worker, " after token ",
                           granted_before,
                           " was granted, before its holder wrote"));
    }
  }

  report.increments = counter_sets;
  report.lost_updates = report.increments - counter;

  // C20: every hold is told at most once; one that another owner was
  // granted next, without a release before that grant, must have been told
  // before it.
  for (const Hold& h : holds) {
    if (h.told_count <= 1) continue;
    ++report.notices_repeated;
    problem(absl::StrCat("worker ", workers[h.worker].id, " (token ", h.token,
                         ") was told of its loss ", h.told_count, " times"));
  }
  const bool any_release = release_rule == ReleaseRule::kStartedWhileHeld;
  for (size_t i = 0; i < holds.size(); ++i) {
    const Hold& h = holds[i];
    const Hold* next = nullptr;
    for (size_t j = i + 1; j < holds.size() && next == nullptr; ++j) {
      if (Exclude(holds[j], h)) next = &holds[j];
    }
    if (next == nullptr) continue;
    // Given up before the next grant: a release the backend confirmed, or
    // one started while the hold was still believed, whatever its answer
    // (an unconfirmed release gives the hold up all the same; one that
    // found the lock expired on arrival tells so, after the fact). A
    // release that reacted to a loss is judged by that loss's notice.
    if (h.released >= 0 && h.released <= next->granted &&
        (h.released_ok || (any_release && (h.held_at_release || h.told < 0)))) {
      continue;
    }
    const int64_t killed = workers[h.worker].killed_at_ns;
    if (killed >= 0 && killed <= next->granted) continue;  // nobody to tell
    ++report.holds_superseded;
    bool paused = false;
    for (const auto& [from, until] : workers[h.worker].paused) {
      paused = paused || (from <= next->granted && next->granted <= until);
    }
    if (paused && h.told >= 0) {
      ++report.notices_after_pause;
      continue;
    }
    if (h.told >= 0 && h.told < next->granted) {
      report.min_notice_lead_ns =
          std::min(report.min_notice_lead_ns, next->granted - h.told);
      continue;
    }
    ++report.notices_late;
    const int64_t late = h.told < 0 ? INT64_MAX : h.told - next->granted;
    report.max_notice_lateness_ns =
        std::max(report.max_notice_lateness_ns, late);
    problem(absl::StrCat(
        "worker ", workers[h.worker].id, " (token ", h.token, ") was ",
        h.told < 0 ? "never told of its loss"
                   : absl::StrCat("told of its loss ", Ms(late), " late"),
        "; worker ", workers[next->worker].id, " was granted token ",
        next->token));
  }

  report.max_believed_at_once = MaxBelievedAtOnce(holds);
  for (const WorkerHistory& w : workers) {
    if (w.killed_at_ns < 0) continue;
    for (const Hold& h : holds) {
      if (h.granted > w.killed_at_ns && *h.owner != w.owner) {
        report.max_recovery_ns =
            std::max(report.max_recovery_ns, h.granted - w.killed_at_ns);
        break;
      }
    }
  }

  report.grants_after_heal.assign(workers.size(), 0);
  for (const Hold& h : holds) {
    if (h.granted > healed_at_ns) ++report.grants_after_heal[h.worker];
  }
  for (size_t w = 0; w < workers.size(); ++w) {
    if (workers[w].killed_at_ns >= 0) {
      report.grants_after_heal[w] = -1;
      continue;
    }
    for (const Hold& h : holds) {
      if (h.worker == w && h.granted > healed_at_ns) {
        report.all_granted_after_heal_ns = std::max(
            report.all_granted_after_heal_ns, h.granted - healed_at_ns);
        break;
      }
    }
  }
  return report;
}

namespace {

// The cell a grant names in its detail ("<holds> slot <s>").
int SlotOf(const WorkerEvent& grant) {
  const size_t at = grant.detail.find(" slot ");
  int slot = -1;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(grant.detail.substr(at + 6), &slot)) {
    return -1;
  }
  return slot;
}

// The worker's events about holds of `slot`. A multi-lock's names may share
// a token: a grant belongs to the slot it names, the rest to its token.
WorkerHistory SlotView(const WorkerHistory& worker, int slot) {
  WorkerHistory view = worker;
  view.events.clear();
  std::vector<uint64_t> tokens;
  for (const WorkerEvent& e : worker.events) {
    if (e.kind == "grant") {
      if (SlotOf(e) != slot) continue;
      tokens.push_back(e.token);
    }
    if (e.token != 0 &&
        std::find(tokens.begin(), tokens.end(), e.token) != tokens.end()) {
      view.events.push_back(e);
    }
  }
  return view;
}

// Grants whose token is below one granted before their acquire began: a
// regression whatever the order in which concurrent grants were logged
// (a semaphore's holders are granted side by side).
int ProvableTokenRegressions(const std::vector<WorkerHistory>& workers) {
  const std::vector<Hold> holds = HoldsOf(workers);  // by grant time
  int regressions = 0;
  for (const Hold& g : holds) {
    uint64_t before = 0;
    for (const Hold& h : holds) {
      if (h.granted >= g.asked) break;
      before = std::max(before, h.token);
    }
    if (g.token < before) ++regressions;
  }
  return regressions;
}

// Adds one slot's findings to the semaphore's report.
void AddSlot(const HistoryReport& slot, HistoryReport& total) {
  total.overlaps += slot.overlaps;
  total.max_overlap_ns = std::max(total.max_overlap_ns, slot.max_overlap_ns);
  total.stale_writes_accepted += slot.stale_writes_accepted;
  total.unfenced_writes_accepted += slot.unfenced_writes_accepted;
  total.stale_writes_refused += slot.stale_writes_refused;
  total.increments += slot.increments;
  total.lost_updates += slot.lost_updates;
  total.holds_superseded += slot.holds_superseded;
  total.notices_late += slot.notices_late;
  total.max_notice_lateness_ns =
      std::max(total.max_notice_lateness_ns, slot.max_notice_lateness_ns);
  total.min_notice_lead_ns =
      std::min(total.min_notice_lead_ns, slot.min_notice_lead_ns);
  total.notices_after_pause += slot.notices_after_pause;
  total.notices_repeated += slot.notices_repeated;
  total.token_regressions += slot.token_regressions;
  // A killed holder's permit: the next grant of its slot to another.
  total.max_recovery_ns = std::max(total.max_recovery_ns, slot.max_recovery_ns);
  for (const std::string& p : slot.problems) {
    if (total.problems.size() < kMaxProblems) total.problems.push_back(p);
  }
}

}  // namespace

HistoryReport CheckKeyedHistory(
    const std::vector<WorkerHistory>& workers,
    const std::vector<RegisterWrite>& writes,
    const std::vector<std::pair<int64_t, int64_t>>& counters,
    int64_t healed_at_ns, KeyedObject object, ReleaseRule release_rule) {
  // The object as a whole: its grants, tokens, holders at once, and who got
  // it after the heal. Its mutex findings are not the object's: holders of
  // different slots overlap by design.
  const HistoryReport whole =
      CheckHistory(workers, {}, 0, 0, healed_at_ns, release_rule);
  HistoryReport total;
  total.grants = whole.grants;
  if (object == KeyedObject::kSemaphore) {
    total.token_regressions = ProvableTokenRegressions(workers);
  }
  total.max_believed_at_once = whole.max_believed_at_once;
  total.grants_after_heal = whole.grants_after_heal;
  total.all_granted_after_heal_ns = whole.all_granted_after_heal_ns;
  for (size_t slot = 0; slot < counters.size(); ++slot) {
    std::vector<WorkerHistory> views;
    for (const WorkerHistory& w : workers) {
      views.push_back(SlotView(w, static_cast<int>(slot)));
    }
    std::vector<RegisterWrite> slot_writes;
    for (const RegisterWrite& w : writes) {
      if (w.key == static_cast<int>(slot)) slot_writes.push_back(w);
    }
    AddSlot(CheckHistory(views, slot_writes, counters[slot].first,
                         counters[slot].second, healed_at_ns, release_rule),
            total);
  }
  if (object == KeyedObject::kMultiLock) {
    total.max_recovery_ns = whole.max_recovery_ns;
  }
  return total;
}

bool HistoryReport::AllBackAfterHeal() const {
  return std::find(grants_after_heal.begin(), grants_after_heal.end(), 0) ==
         grants_after_heal.end();
}

std::string HistoryReport::Summary() const {
  std::string out = absl::StrCat(
      "grants ", grants, ", believed at once at most ", max_believed_at_once,
      ", overlaps ", overlaps, " (max ", Ms(max_overlap_ns),
      "), stale writes accepted ", stale_writes_accepted, " / unfenced ",
      unfenced_writes_accepted, " / refused ", stale_writes_refused,
      ", token regressions ", token_regressions, ", lost updates ",
      lost_updates, " of ", increments, ", superseded holds ", holds_superseded,
      ", late notices ", notices_late, ", repeated notices ", notices_repeated);
  if (shared_overlaps > 0) {
    absl::StrAppend(&out, ", readers together ", shared_overlaps);
  }
  if (notices_after_pause > 0) {
    absl::StrAppend(&out, ", told on resume ", notices_after_pause);
  }
  if (max_recovery_ns >= 0) {
    absl::StrAppend(&out, ", recovery after kill ", Ms(max_recovery_ns));
  }
  if (min_notice_lead_ns != INT64_MAX) {
    absl::StrAppend(&out, ", earliest notice lead ", Ms(min_notice_lead_ns));
  }
  absl::StrAppend(&out, ", all granted ", Ms(all_granted_after_heal_ns),
                  " after the heal; grants after heal per worker [");
  for (size_t i = 0; i < grants_after_heal.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : " ", grants_after_heal[i]);
  }
  absl::StrAppend(&out, "]");
  for (const std::string& p : problems) absl::StrAppend(&out, "\n  ", p);
  for (const std::string& p : exit_problems) absl::StrAppend(&out, "\n  ", p);
  return out;
}

}  // namespace dlock::test
