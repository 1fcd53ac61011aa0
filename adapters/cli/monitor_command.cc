// `dlock monitor`: scans the namespace every --interval, reports what is
// held too long (log line, metric, hook), optionally removes the locks of
// dead holders, and serves its metrics. Signals are read from a signalfd in
// the main thread, so no handler runs and a hook or a sleep ends promptly.
#include "monitor_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "child_process.h"
#include "dlock/adapters/metrics.h"
#include "dlock/adapters/metrics_http.h"
#include "dlock/uri.h"
#include "lock_table.h"
#include "monitor_state.h"
#include "object_text.h"

namespace dlock::cli {
namespace {

// Between checks of a running hook.
constexpr int kHookPollMs = 50;

void Log(absl::string_view line) {
  std::string out(line);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  out.push_back('\n');
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

std::string Stamp() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(),
                          absl::UTCTimeZone());
}

// --metrics-listen: "host:port"; an empty host is every address, port 0 a
// free one (the start line says which).
struct ListenAddress {
  std::string host;
  int port = 0;
};

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  const size_t colon = text.rfind(':');
  ListenAddress address;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(text.substr(colon + 1), &address.port) ||
      address.port < 0 || address.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: '", text,
                     "' is not host:port (e.g. 127.0.0.1:9464, or :9464 for "
                     "every address)"));
  }
  address.host = std::string(text.substr(0, colon));
  if (address.host.empty()) {
    address.host = "0.0.0.0";
  } else if (absl::StartsWith(address.host, "[") &&
             absl::EndsWith(address.host, "]")) {
    address.host = address.host.substr(1, address.host.size() - 2);  // [::1]
  }
  return address;
}

struct ParsedMonitorFlags {
  absl::Duration interval;
  std::optional<absl::Duration> threshold;
  absl::Duration hook_timeout;
  std::optional<ListenAddress> metrics;
};

absl::StatusOr<ParsedMonitorFlags> Parse(const MonitorFlags& flags) {
  ParsedMonitorFlags out;
  absl::StatusOr<absl::Duration> interval =
      DurationFlag("--interval", flags.interval, kIntervalRange);
  if (!interval.ok()) return interval.status();
  out.interval = *interval;
  absl::StatusOr<absl::Duration> hook_timeout =
      DurationFlag("--hook-timeout", flags.hook_timeout, kIntervalRange);
  if (!hook_timeout.ok()) return hook_timeout.status();
  out.hook_timeout = *hook_timeout;
  if (!flags.held_longer_than.empty()) {
    absl::StatusOr<absl::Duration> threshold = DurationFlag(
        "--held-longer-than", flags.held_longer_than, kPositiveDuration);
    if (!threshold.ok()) return threshold.status();
    out.threshold = *threshold;
  } else if (!flags.on_held_too_long.empty()) {
    return absl::InvalidArgumentError(
        "--on-held-too-long runs when a lock is held longer than "
        "--held-longer-than: give that too");
  }
  if (!flags.metrics_listen.empty()) {
    absl::StatusOr<ListenAddress> address =
        ParseListenAddress(flags.metrics_listen);
    if (!address.ok()) return address.status();
    out.metrics = *address;
  }
  return out;
}

// The hook's environment: ours, without the backend's secrets
// (SecretVariables), plus the lock's facts.
std::vector<std::string> HookEnvironment(
    const HeldTooLongEvent& event, const LockClient& client,
    const std::vector<std::string>& withheld) {
  std::vector<std::string> env =
      ChildEnvironment(event.lock.name, event.lock.fencing_token, withheld);
  const LockInfo& lock = event.lock;
  env.push_back(absl::StrCat("DLOCK_LOCK_OWNER=", lock.owner));
  env.push_back(absl::StrCat("DLOCK_HELD_FOR_SECONDS=",
                             absl::ToInt64Seconds(event.held_for)));
  env.push_back(absl::StrCat("DLOCK_HOLDER_LIVE=", !lock.holder_live.has_value()
                                                       ? "unknown"
                                                   : *lock.holder_live ? "yes"
                                                                       : "no"));
  env.push_back(absl::StrCat("DLOCK_NAMESPACE=", client.lock_namespace()));
  env.push_back(absl::StrCat("DLOCK_ENDPOINT=", client.endpoint()));
  return env;
}

class Monitor {
 public:
  // `calls`: what the monitor's own client did (its scans' round trips),
  // served next to the monitor's metrics.
  Monitor(LockClient& client, const PrometheusMetrics& calls,
          const MonitorFlags& flags, const ParsedMonitorFlags& parsed,
          int signal_fd, std::vector<std::string> withheld)
      : client_(client),
        calls_(calls),
        flags_(flags),
        parsed_(parsed),
        signal_fd_(signal_fd),
        withheld_(std::move(withheld)),
        metrics_(client.lock_namespace()),
        tracker_(parsed.threshold.value_or(absl::InfiniteDuration())) {}

  // Until SIGINT or SIGTERM.
  int Run() {
    std::unique_ptr<MetricsHttpServer> server;
    if (parsed_.metrics.has_value()) {
      absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
          MetricsHttpServer::Start(
              parsed_.metrics->host, parsed_.metrics->port, [this] {
                return absl::StrCat(metrics_.RenderText(), calls_.RenderText());
              });
      if (!started.ok()) {
        // Not the backend's fault (Unavailable would say 69): the port.
        return Fail(
            absl::IsInvalidArgument(started.status()) ? kUsage : kInternal,
            started.status().message());
      }
      server = *std::move(started);
    }
    Log(absl::StrCat(
        Stamp(), " monitor-started endpoint=", client_.endpoint(),
        " namespace=", client_.lock_namespace(),
        " prefix=", JsonString(flags_.prefix), " interval=",
        absl::FormatDuration(parsed_.interval), " held_longer_than=",
        parsed_.threshold.has_value() ? absl::FormatDuration(*parsed_.threshold)
                                      : "off",
        " unlock_dead=", flags_.unlock_dead ? "on" : "off", " metrics=",
        server != nullptr ? absl::StrCat(parsed_.metrics->host, ":",
                                         server->port(), "/metrics")
                          : "off"));
    while (!stopping_) {
      const absl::Time next = absl::Now() + parsed_.interval;
      Scan();
      WaitForSignal(next - absl::Now());
    }
    Log(absl::StrCat(Stamp(), " monitor-stopped"));
    return kOk;
  }

 private:
  void Scan() {
    absl::StatusOr<std::vector<LockInfo>> locks =
        client_.Admin().List(flags_.prefix);
    if (!locks.ok()) {
      metrics_.ScanFailed();
      // Once per outage, not once per scan.
      if (!failing_) {
        Log(absl::StrCat(Stamp(), " scan-failed error=",
                         JsonString(locks.status().message())));
      }
      failing_ = true;
      return;
    }
    if (failing_) Log(absl::StrCat(Stamp(), " scan-recovered"));
    failing_ = false;
    const absl::Time now = absl::Now();
    if (parsed_.threshold.has_value()) {
      for (const HeldTooLongEvent& event : tracker_.Update(*locks, now)) {
        Log(FormatEvent(event, *parsed_.threshold, now));
        if (event.kind == HeldTooLongEvent::kCrossed &&
            !flags_.on_held_too_long.empty() && !stopping_) {
          RunHook(event);
        }
      }
    }
    metrics_.ScanSucceeded(locks->size(), tracker_.over_threshold());
    if (flags_.unlock_dead) {
      UnlockDead(*locks);
      UnlockDeadObjectHolders();
    }
  }

  // The dead readers, permit holders and leaders, where the backend lists
  // them: each hold by its token (ForceUnlockObject), never the object.
  void UnlockDeadObjectHolders() {
    absl::StatusOr<std::vector<ObjectInfo>> objects =
        ListObjectsBeyondWriters(client_, flags_.prefix, std::nullopt);
    if (!objects.ok()) return;  // the lock scan reports the backend's state
    for (const DeadObjectHolder& dead : DeadObjectHolders(*objects)) {
      const std::string facts = absl::StrCat(
          " kind=", ObjectKindName(dead.kind), " name=", JsonString(dead.name),
          " owner=", JsonString(dead.owner),
          " fencing_token=", dead.fencing_token);
      LogUnlockDead(client_.Admin().ForceUnlockObject(dead.kind, dead.name,
                                                      dead.fencing_token),
                    facts);
    }
  }

  void UnlockDead(const std::vector<LockInfo>& locks) {
    for (const LockInfo& dead : DeadHolders(locks)) {
      const std::string facts = absl::StrCat(
          " name=", JsonString(dead.name), " owner=", JsonString(dead.owner),
          " fencing_token=", dead.fencing_token);
      LogUnlockDead(client_.Admin().ForceUnlock(dead.name, dead.fencing_token),
                    facts);
    }
  }

  void LogUnlockDead(const absl::Status& s, const std::string& facts) {
    if (s.ok()) {
      metrics_.ForceUnlocked();
      Log(absl::StrCat(Stamp(), " unlocked-dead-holder", facts));
    } else if (absl::IsFailedPrecondition(s)) {
      // Released or taken over since the listing: nothing to do.
      Log(absl::StrCat(Stamp(), " unlock-dead-skipped", facts,
                       " reason=\"no longer held with that token\""));
    } else {
      Log(absl::StrCat(Stamp(), " unlock-dead-failed", facts,
                       " error=", JsonString(s.message())));
    }
  }

  // Runs the hook to its end or --hook-timeout (then SIGKILL to its process
  // group); a stop signal ends it with SIGTERM.
  void RunHook(const HeldTooLongEvent& event) {
    const std::string facts =
        absl::StrCat(" name=", JsonString(event.lock.name),
                     " fencing_token=", event.lock.fencing_token);
    Spawned child = Spawn("/bin/sh", {"sh", "-c", flags_.on_held_too_long},
                          HookEnvironment(event, client_, withheld_), SIGTERM);
    if (child.pid < 0) {
      metrics_.HookRan(false);
      Log(absl::StrCat(Stamp(), " hook-failed", facts,
                       " exit_code=", child.exit_code));
      return;
    }
    const absl::Time deadline = absl::Now() + parsed_.hook_timeout;
    int status = 0;
    while (waitpid(child.pid, &status, WNOHANG) == 0) {
      if (stopping_ || absl::Now() >= deadline) {
        kill(-child.pid, stopping_ ? SIGTERM : SIGKILL);
        waitpid(child.pid, &status, 0);
        metrics_.HookRan(false);
        const std::string why =
            stopping_
                ? "monitor stopping"
                : absl::StrCat("timed out after ",
                               absl::FormatDuration(parsed_.hook_timeout));
        Log(absl::StrCat(Stamp(), " hook-failed", facts,
                         " reason=", JsonString(why)));
        return;
      }
      WaitForSignal(absl::Milliseconds(kHookPollMs));
    }
    const int code = ExitCodeOfChild(status);
    metrics_.HookRan(code == 0);
    Log(absl::StrCat(Stamp(), code == 0 ? " hook-ran" : " hook-failed", facts,
                     " exit_code=", code));
  }

  // Sleeps up to `timeout`, or until SIGINT or SIGTERM (which sets
  // stopping_).
  void WaitForSignal(absl::Duration timeout) {
    if (stopping_ || timeout <= absl::ZeroDuration()) return;
    pollfd p{signal_fd_, POLLIN, 0};
    const int64_t ms =
        absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
    if (poll(&p, 1, static_cast<int>(ms)) > 0) {
      while (int sig = ReadSignal(signal_fd_)) {
        if (sig == SIGINT || sig == SIGTERM) stopping_ = true;
      }
    }
  }

  LockClient& client_;
  const PrometheusMetrics& calls_;
  const MonitorFlags& flags_;
  const ParsedMonitorFlags& parsed_;
  const int signal_fd_;
  const std::vector<std::string> withheld_;  // from the hook's environment
  MonitorMetrics metrics_;
  HeldTooLongTracker tracker_;
  bool stopping_ = false;
  bool failing_ = false;
};

}  // namespace

void AddMonitorFlags(CLI::App& command, MonitorFlags& flags) {
  command.add_option("--prefix", flags.prefix,
                     "Only locks whose names start with this");
  command.add_option("--interval", flags.interval, "Time between scans")
      ->capture_default_str();
  command.add_option("--held-longer-than", flags.held_longer_than,
                     "Report locks held longer than this (log line, metric, "
                     "--on-held-too-long)");
  command.add_option("--on-held-too-long", flags.on_held_too_long,
                     "Shell command run once per hold that crosses the "
                     "threshold; sees DLOCK_LOCK_NAME, DLOCK_LOCK_OWNER, "
                     "DLOCK_FENCING_TOKEN, DLOCK_HELD_FOR_SECONDS");
  command
      .add_option("--hook-timeout", flags.hook_timeout,
                  "SIGKILL the command after this long")
      ->capture_default_str();
  command.add_flag("--unlock-dead", flags.unlock_dead,
                   "Force-unlock locks whose holder's liveness record is "
                   "gone (only while still held with the listed token)");
  command.add_option("--metrics-listen", flags.metrics_listen,
                     "Serve Prometheus metrics on host:port at /metrics");
}

int MonitorCommand(const BackendFlags& backend, const MonitorFlags& flags) {
  absl::StatusOr<ParsedMonitorFlags> parsed = Parse(flags);
  if (!parsed.ok()) return Fail(parsed.status());
  // Before connecting: the client's threads inherit the blocked mask, so
  // the signals reach only the signalfd.
  const int signal_fd = BlockedSignalFd({SIGINT, SIGTERM});
  if (signal_fd < 0) {
    return Fail(kInternal, absl::StrCat("signalfd: ", strerror(errno)));
  }
  int code = kOk;
  auto calls = std::make_shared<PrometheusMetrics>();
  ClientOptions options;
  options.observer = calls;
  std::unique_ptr<LockClient> client = ConnectForListingOrFail(
      backend, "dlock monitor", code, std::move(options));
  if (client == nullptr) return code;
  // Resolved again (it just connected) for the variables the hook must not
  // see.
  absl::StatusOr<Profile> profile = ResolveProfile(backend);
  Monitor monitor(*client, *calls, flags, *parsed, signal_fd,
                  SecretVariables(profile.ok() ? *profile : Profile()));
  code = monitor.Run();
  client->Close().IgnoreError();  // it holds nothing
  close(signal_fd);
  return code;
}

}  // namespace dlock::cli
