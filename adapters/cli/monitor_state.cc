#include "monitor_state.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli_common.h"
#include "lock_table.h"

namespace dlock::cli {

std::vector<HeldTooLongEvent> HeldTooLongTracker::Update(
    const std::vector<LockInfo>& locks, absl::Time now) {
  std::vector<HeldTooLongEvent> events;
  absl::flat_hash_set<std::string> listed;
  for (const LockInfo& info : locks) {
    // A lock kept after its release is nobody's hold: the one it ended is
    // over (reported as released), and no hook is owed for the keep.
    if (!info.locked || info.kept_after_release) continue;
    listed.insert(info.name);
    auto it = reported_.find(info.name);
    if (it != reported_.end() &&
        it->second.lock.fencing_token != info.fencing_token) {
      events.push_back({.kind = HeldTooLongEvent::kHolderChanged,
                        .lock = it->second.lock,
                        .held_for = it->second.held_for,
                        .new_owner = info.owner,
                        .new_fencing_token = info.fencing_token});
      reported_.erase(it);
      it = reported_.end();
    }
    const std::optional<absl::Duration> held = HeldFor(info, now);
    if (!held.has_value() || *held <= threshold_) continue;
    if (it != reported_.end()) {
      it->second.held_for = *held;  // still over: already reported
      continue;
    }
    reported_[info.name] = {info, *held};
    events.push_back(
        {.kind = HeldTooLongEvent::kCrossed, .lock = info, .held_for = *held});
  }
  for (auto it = reported_.begin(); it != reported_.end();) {
    if (listed.contains(it->first)) {
      ++it;
      continue;
    }
    events.push_back({.kind = HeldTooLongEvent::kReleased,
                      .lock = it->second.lock,
                      .held_for = it->second.held_for});
    reported_.erase(it++);
  }
  return events;
}

std::vector<LockInfo> DeadHolders(const std::vector<LockInfo>& locks) {
  std::vector<LockInfo> dead;
  for (const LockInfo& info : locks) {
    if (info.locked && info.holder_live.has_value() && !*info.holder_live) {
      dead.push_back(info);
    }
  }
  return dead;
}

std::string FormatEvent(const HeldTooLongEvent& event, absl::Duration threshold,
                        absl::Time now) {
  const LockInfo& lock = event.lock;
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()), " ");
  switch (event.kind) {
    case HeldTooLongEvent::kCrossed:
      absl::StrAppend(&line, "held-too-long");
      break;
    case HeldTooLongEvent::kReleased:
      absl::StrAppend(&line, "held-too-long-ended reason=released");
      break;
    case HeldTooLongEvent::kHolderChanged:
      absl::StrAppend(&line, "held-too-long-ended reason=holder-changed");
      break;
  }
  absl::StrAppend(&line, " name=", JsonString(lock.name),
                  " owner=", JsonString(lock.owner),
                  " fencing_token=", lock.fencing_token,
                  " held_for=", ShortDuration(event.held_for),
                  " threshold=", absl::FormatDuration(threshold));
  if (event.kind == HeldTooLongEvent::kHolderChanged) {
    absl::StrAppend(&line, " new_owner=", JsonString(event.new_owner),
                    " new_fencing_token=", event.new_fencing_token);
  }
  return line;
}

void MonitorMetrics::ScanSucceeded(size_t locks_held, size_t held_too_long) {
  absl::MutexLock lock(&mu_);
  ++scans_;
  locks_held_ = static_cast<int64_t>(locks_held);
  held_too_long_ = static_cast<int64_t>(held_too_long);
  last_scan_ = absl::Now();
}

void MonitorMetrics::ScanFailed() {
  absl::MutexLock lock(&mu_);
  ++scans_;
  ++scan_errors_;
}

void MonitorMetrics::HookRan(bool succeeded) {
  absl::MutexLock lock(&mu_);
  ++hook_runs_;
  if (!succeeded) ++hook_failures_;
}

void MonitorMetrics::ForceUnlocked() {
  absl::MutexLock lock(&mu_);
  ++force_unlocks_;
}

std::string MonitorMetrics::RenderText() const {
  // Label values escape backslash, quote and newline; a namespace has none
  // of them (C16), so it goes in as it is.
  const std::string label = absl::StrCat("{namespace=\"", namespace_, "\"}");
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help,
                    auto value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n", name, label, " ", value, "\n");
  };
  absl::MutexLock lock(&mu_);
  metric("dlock_monitor_locks_held", "gauge",
         "Locks held at the last successful scan.", locks_held_);
  metric("dlock_monitor_held_too_long", "gauge",
         "Locks held longer than --held-longer-than at the last scan.",
         held_too_long_);
  metric("dlock_monitor_scans_total", "counter", "Scans of the namespace.",
         scans_);
  metric("dlock_monitor_scan_errors_total", "counter",
         "Scans whose listing failed.", scan_errors_);
  metric("dlock_monitor_hook_runs_total", "counter",
         "Runs of the --on-held-too-long command.", hook_runs_);
  metric("dlock_monitor_hook_failures_total", "counter",
         "Runs of the --on-held-too-long command that failed or timed out.",
         hook_failures_);
  metric("dlock_monitor_force_unlocks_total", "counter",
         "Locks of dead holders removed by --unlock-dead.", force_unlocks_);
  metric("dlock_monitor_last_scan_timestamp_seconds", "gauge",
         "When the last successful scan ended (Unix time).",
         absl::ToUnixSeconds(last_scan_));
  return out;
}

}  // namespace dlock::cli
