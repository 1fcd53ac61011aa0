#include "election_commands.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "child_supervisor.h"
#include "dlock/election.h"
#include "dlock/errors.h"
#include "lock_table.h"
#include "nlohmann/json.hpp"

namespace dlock::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string DefaultValue() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host, ":", getpid());
}

std::string FormatSince(absl::Time since) {
  if (since == absl::InfinitePast()) return "?";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", since, absl::UTCTimeZone());
}

// One line for people, or one JSON object (docs/cli.md, "dlock leader").
std::string LeaderLine(const LeaderInfo& info, bool json) {
  if (json) {
    Json out = {{"name", info.name}, {"leader", nullptr}};
    if (info.has_leader) {
      out["leader"] = {
          {"owner", info.owner},
          {"value", info.value},
          {"term", info.term},
          {"since", FormatSince(info.since)},
          {"remaining_lease_ms",
           absl::ToInt64Milliseconds(info.remaining_lease)},
          {"live", info.leader_live.has_value() ? Json(*info.leader_live)
                                                : Json(nullptr)}};
    }
    return DumpJson(out) + "\n";
  }
  if (!info.has_leader) return "no leader\n";
  return absl::StrCat("leader ", info.owner, " term ", info.term, " since ",
                      FormatSince(info.since), " lease ",
                      ShortDuration(info.remaining_lease), " value ",
                      info.value, "\n");
}

void Print(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// Prints each change on a helper thread (WaitForChange wakes on the
// backend's announcements) while the main thread waits for SIGINT or
// SIGTERM, which ends the watch with 0.
int Watch(Election& election, LeaderInfo seen, bool json) {
  CancelToken stop;
  absl::Status failed;
  std::thread watcher([&] {
    while (!stop.IsCancelled()) {
      absl::StatusOr<LeaderInfo> next =
          election.WaitForChange(seen, absl::InfiniteDuration(), stop);
      if (next.ok()) {
        seen = *std::move(next);
        Print(LeaderLine(seen, json));
      } else if (!IsWaitExpired(next.status())) {
        if (!stop.IsCancelled()) failed = next.status();
        break;
      }
    }
    kill(getpid(), kWakeSignal);
  });
  for (;;) {
    const int sig = WaitForSignal(absl::Hours(1));
    if (IsForwarded(sig) || sig == kWakeSignal) break;
  }
  stop.Cancel();
  watcher.join();
  return failed.ok() ? kOk : Fail(failed);
}

}  // namespace

int ElectCommand(const BackendFlags& flags, const RunFlags& run,
                 const std::string& value) {
  if (run.names.size() > 1) {
    return Fail(kUsage,
                "dlock elect takes one election name; put -- before the "
                "command");
  }
  return RunUnder(flags, run,
                  LeaderMode(run.name, value.empty() ? DefaultValue() : value));
}

int LeaderCommand(const BackendFlags& flags, const std::string& name,
                  bool watch) {
  // Before the client starts its threads, so that only the main thread
  // takes the signals.
  if (watch) BlockHandledSignals();
  int code = kOk;
  std::unique_ptr<LockClient> client = ConnectOrFail(flags, code);
  if (client == nullptr) return code;
  absl::StatusOr<std::unique_ptr<Election>> election =
      client->GetElection(name);
  if (!election.ok()) return Fail(election.status());
  absl::StatusOr<LeaderInfo> leader = (*election)->Leader();
  if (!leader.ok()) return Fail(leader.status());
  if (leader->name.empty()) leader->name = name;
  Print(LeaderLine(*leader, flags.json));
  if (!watch) return kOk;
  return Watch(**election, *leader, flags.json);
}

}  // namespace dlock::cli
