#include "bench_command.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench_output.h"
#include "bench_scenarios.h"
#include "dlock/semaphore.h"
#include "dlock/uri.h"

#ifndef DLOCK_VERSION
#define DLOCK_VERSION "unknown"
#endif

namespace dlock::cli {
namespace {

constexpr char kDefaultNamespace[] = "dlock-bench";
const std::set<std::string> kScenarios = {
    "uncontended", "contention", "watchdog",  "memory",
    "semaphore",   "shared",     "exclusive", "election"};

// SIGINT, SIGTERM and SIGHUP stop the run instead of killing the process,
// so that what it holds is released rather than left until its lease ends.
// Blocked in every thread (those started later inherit the mask) and taken
// by a thread of its own, which cancels `stop`.
class InterruptWatch {
 public:
  explicit InterruptWatch(CancelToken stop) : stop_(std::move(stop)) {
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, sig);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] {
      const timespec poll = absl::ToTimespec(absl::Milliseconds(100));
      while (!done_.load()) {
        const int sig = sigtimedwait(&set_, nullptr, &poll);
        if (sig > 0) {
          signal_.store(sig);
          stop_.Cancel();
        }
      }
    });
  }
  ~InterruptWatch() {
    done_.store(true);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  // The signal that stopped the run; 0 if none did.
  int signal() const { return signal_.load(); }

 private:
  CancelToken stop_;
  sigset_t set_;
  sigset_t old_;
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

// The URI without its namespace= parameter.
std::string WithoutNamespace(const std::string& uri) {
  const size_t query = uri.find('?');
  if (query == std::string::npos) return uri;
  std::vector<std::string> kept;
  for (absl::string_view param :
       absl::StrSplit(absl::string_view(uri).substr(query + 1), '&')) {
    if (!absl::StartsWith(param, "namespace=")) kept.emplace_back(param);
  }
  return absl::StrCat(uri.substr(0, query), kept.empty() ? "" : "?",
                      absl::StrJoin(kept, "&"));
}

absl::StatusOr<std::vector<int>> ParseCounts(const std::string& text,
                                             const char* flag, int max) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > max) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " takes whole numbers from 1 to ", max,
                       " separated by commas, e.g. 1,16,64; not '", text, "'"));
    }
    out.push_back(n);
  }
  return out;
}

absl::Status CheckRange(int value, const char* flag, int min, int max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " must be from ", min, " to ", max, ", not ", value));
}

// --quick's settings where the command line gave none.
BenchFlags WithQuickDefaults(BenchFlags flags) {
  auto given = [&](absl::string_view flag) {
    return std::find(flags.given.begin(), flags.given.end(), flag) !=
           flags.given.end();
  };
  if (!given("--threads")) flags.threads = "1,8";
  if (!given("--duration")) flags.duration = "500ms";
  if (!given("--warmup")) flags.warmup = "100ms";
  if (!given("--clients")) flags.clients = 4;
  if (!given("--locks")) flags.locks = 100;
  if (!given("--names")) flags.names = 500;
  if (!given("--lease")) flags.lease = "1s";
  if (!given("--handovers")) flags.handovers = 5;
  if (!given("--lapses")) flags.lapses = 1;
  return flags;
}

absl::StatusOr<BenchPlan> Plan(const BenchFlags& flags) {
  BenchPlan plan;
  for (const std::string& s :
       std::vector<std::string>(absl::StrSplit(flags.scenarios, ','))) {
    if (!kScenarios.contains(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown scenario '", s, "'; --scenarios takes ",
                       absl::StrJoin(kScenarios, ", ")));
    }
    plan.scenarios.push_back(s);
  }
  absl::StatusOr<std::vector<int>> threads =
      ParseCounts(flags.threads, "--threads", 1024);
  if (!threads.ok()) return threads.status();
  plan.threads = *threads;
  for (auto [value, flag, min, max] :
       {std::tuple{flags.clients, "--clients", 2, 256},
        std::tuple{flags.locks, "--locks", 1, 1000000},
        std::tuple{flags.names, "--names", 1, 10000000},
        std::tuple{flags.permits, "--permits", 0,
                   static_cast<int>(kMaxSemaphorePermits)},
        std::tuple{flags.handovers, "--handovers", 1, 10000},
        std::tuple{flags.lapses, "--lapses", 0, 1000}}) {
    if (absl::Status s = CheckRange(value, flag, min, max); !s.ok()) return s;
  }
  absl::StatusOr<absl::Duration> duration =
      DurationFlag("--duration", flags.duration,
                   {.min = absl::Milliseconds(1), .max = absl::Hours(1)});
  if (!duration.ok()) return duration.status();
  absl::StatusOr<absl::Duration> warmup =
      DurationFlag("--warmup", flags.warmup,
                   {.min = absl::Milliseconds(1), .max = absl::Minutes(10)});
  if (!warmup.ok()) return warmup.status();
  absl::StatusOr<absl::Duration> lease =
      DurationFlag("--lease", flags.lease,
                   {.min = kMinWatchdogLease, .max = absl::Hours(1)});
  if (!lease.ok()) return lease.status();
  plan.settings.duration = *duration;
  plan.settings.warmup = *warmup;
  plan.lease = *lease;

  // A fresh prefix per run: runs in the same namespace never share a name.
  std::random_device random;
  plan.settings.name_prefix =
      absl::StrFormat("run-%08x/", static_cast<uint32_t>(random()));
  // The benchmark's own namespace, never a service's. A --backend URI may
  // name one (it was asked for); a profile's or the environment's namespace,
  // in its URI or beside it, is replaced.
  const std::string ns =
      flags.lock_namespace.empty() ? kDefaultNamespace : flags.lock_namespace;
  for (const std::string& uri : flags.backends) {
    absl::StatusOr<Profile> p = ResolveBackend({.uri = uri});
    if (!p.ok()) return p.status();
    if (WithoutNamespace(p->backend) == p->backend) {
      p->lock_namespace = ns;
    } else if (!flags.lock_namespace.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--namespace and the namespace= of --backend ", p->DisplayBackend(),
          " both name one; give one of them"));
    }
    plan.profiles.push_back(*std::move(p));
  }
  for (const std::string& name : flags.profiles) {
    absl::StatusOr<Profile> p =
        ResolveBackend({.profile = name, .config_path = flags.config});
    if (!p.ok()) return p.status();
    plan.profiles.push_back(*std::move(p));
  }
  if (plan.profiles.empty()) {  // the environment's
    absl::StatusOr<Profile> p = ResolveBackend({.config_path = flags.config});
    if (!p.ok()) return p.status();
    plan.profiles.push_back(*std::move(p));
  }
  for (size_t i = flags.backends.size(); i < plan.profiles.size(); ++i) {
    plan.profiles[i].backend = WithoutNamespace(plan.profiles[i].backend);
    plan.profiles[i].lock_namespace = ns;
  }
  for (const Profile& p : plan.profiles) {
    WarnIfTlsUnchecked(p);
    // A bad option or scheme is a usage error before anything runs; an
    // unreachable server is reported when its turn comes, and the others
    // still run.
    absl::StatusOr<std::unique_ptr<LockClient>> client = ConnectProfile(p);
    if (client.ok()) {
      (*client)->Close().IgnoreError();
    } else if (ExitCodeFor(client.status()) == kUsage) {
      return client.status();
    }
  }
  return plan;
}

}  // namespace

void AddBenchFlags(CLI::App& command, BenchFlags& flags) {
  command.add_option("--backend", flags.backends,
                     "Backend URI; repeat to compare (default: "
                     "$DLOCK_BACKEND)");
  command.add_option("--profile", flags.profiles,
                     "Profile from the config file; repeat to compare");
  command.add_option("--config", flags.config,
                     "TOML config file with profiles (default: $DLOCK_CONFIG)");
  command.add_option("--namespace", flags.lock_namespace,
                     "Namespace the benchmark's locks live in (default "
                     "dlock-bench; never a profile's)");
  command.add_flag("--json", flags.json, "Print JSON instead of a table");
  command.add_flag("--quiet", flags.quiet, "No progress lines on stderr");
  command.add_flag("--quick", flags.quick,
                   "A first look in a few seconds per backend: --threads 1,8 "
                   "--duration 500ms --warmup 100ms --clients 4 --locks 100 "
                   "--names 500 --lease 1s --handovers 5 --lapses 1, unless "
                   "given");
  // The measurement's settings show their defaults in --help.
  auto setting = [&](const char* flag, auto& value, const char* help) {
    command.add_option(flag, value, help)
        ->capture_default_str()
        ->each([&flags, flag](const std::string&) {
          flags.given.push_back(flag);
        });
  };
  setting("--scenarios", flags.scenarios,
          "Comma-separated: uncontended, contention, watchdog, memory; and "
          "the primitives: semaphore, shared (read locks), exclusive (write "
          "locks), election");
  setting("--threads", flags.threads,
          "Uncontended: threads of one client, each on its own lock");
  setting("--duration", flags.duration, "How long each measurement runs");
  setting("--warmup", flags.warmup, "Run before each measurement, not counted");
  setting("--clients", flags.clients,
          "Contention: clients (a connection each) on one lock");
  setting("--locks", flags.locks, "Watchdog and memory: locks held at once");
  setting("--names", flags.names,
          "Memory: distinct names taken and released one by one");
  setting("--lease", flags.lease,
          "Watchdog: the lease renewed at a third of it; election: the "
          "lapsing leader's lease");
  setting("--permits", flags.permits,
          "Semaphore: its N, the threads (--threads) sharing it; 0: as many "
          "as the threads");
  setting("--handovers", flags.handovers,
          "Election: hand-overs after the leader resigns");
  setting("--lapses", flags.lapses,
          "Election: hand-overs after the leader's lease lapses (each takes "
          "the lease)");
}

namespace {

// Runs the plan's scenarios on one backend; a failure ends this backend's
// run with a FAILED record and line, and the caller goes on to the next.
Report BenchBackend(const Profile& profile, const BenchPlan& plan,
                    const BenchFlags& flags, const Progress& progress,
                    absl::Status& failed) {
  bench::Settings settings = plan.settings;
  settings.connect = [&profile](ClientOptions options) {
    // The profile's lease would replace the watchdog scenario's.
    Profile p = profile;
    p.default_lease = options.watchdog_lease;
    return ConnectProfile(p, std::move(options));
  };
  const std::string shown = profile.DisplayBackend();
  Report report;
  report.head = {
      {"backend", shown.substr(0, shown.find(':'))},
      {"uri", shown},
      {"namespace", profile.lock_namespace.empty() ? "(the URI's)"
                                                   : profile.lock_namespace}};
  for (const std::string& scenario : plan.scenarios) {
    failed = RunScenario(scenario, plan, flags, settings, report, progress);
    if (!failed.ok()) break;
  }
  if (!failed.ok()) {
    Json record = report.head;
    record["code"] = absl::StatusCodeToString(failed.code());
    record["error"] = failed.message();
    report.records.push_back(std::move(record));
    report.lines.push_back(absl::StrCat("  FAILED: ", failed.message()));
    Fail(failed);
  }
  return report;
}

}  // namespace

int BenchCommand(const BenchFlags& given) {
  const BenchFlags flags = given.quick ? WithQuickDefaults(given) : given;
  // Before any client starts a thread: they inherit the blocked signals.
  CancelToken stop;
  InterruptWatch interrupts(stop);
  absl::StatusOr<BenchPlan> plan = Plan(flags);
  if (!plan.ok()) return Fail(plan.status());
  plan->settings.stop = stop;
  int per_backend = 0;
  for (const std::string& s : plan->scenarios) {
    const bool per_threads = s == "uncontended" || s == "semaphore" ||
                             s == "shared" || s == "exclusive";
    per_backend += per_threads ? static_cast<int>(plan->threads.size()) : 1;
  }
  const int steps = static_cast<int>(plan->profiles.size()) * per_backend;
  int step = 0;
  absl::Status first_error;
  std::vector<std::string> records;  // one line each
  std::string table;
  bool contention = false;
  for (size_t b = 0; b < plan->profiles.size() && !stop.IsCancelled(); ++b) {
    const Profile& profile = plan->profiles[b];
    const std::string shown = profile.DisplayBackend();
    auto progress = [&](const std::string& what, absl::Duration expected) {
      ++step;
      if (flags.quiet) return;
      std::fputs(
          absl::StrFormat("dlock bench: [%d/%d] %s: %s (up to %s)\n", step,
                          steps, shown, what, FormatDurationForPeople(expected))
              .c_str(),
          stderr);
    };
    absl::Status failed;
    Report report = BenchBackend(profile, *plan, flags, progress, failed);
    if (first_error.ok()) first_error = failed;
    step = static_cast<int>(b + 1) * per_backend;  // the skipped ones too
    for (const Json& record : report.records) {
      records.push_back(DumpJson(record));
    }
    contention = contention || report.contention;
    absl::StrAppend(&table, shown, " (namespace ",
                    profile.lock_namespace.empty() ? "from the URI"
                                                   : profile.lock_namespace,
                    ")\n", absl::StrJoin(report.lines, "\n"), "\n");
  }
  if (flags.json) {
    // A record per line, so that a log or a diff reads one measurement at a
    // time; each line is nlohmann's.
    const Json header = {{"tool", "dlock"}, {"version", DLOCK_VERSION}};
    std::string head = DumpJson(header);
    head.pop_back();  // the closing brace: "results" follows
    std::fputs(absl::StrCat(head, ",\"results\":[",
                            absl::StrJoin(records, ",\n"), "]}\n")
                   .c_str(),
               stdout);
  } else {
    std::fputs(absl::StrCat(table, contention ? kJainLegend : "").c_str(),
               stdout);
  }
  // Interrupted: as a shell reports a process its signal ended.
  if (interrupts.signal() != 0) return 128 + interrupts.signal();
  return first_error.ok() ? kOk : ExitCodeFor(first_error);
}

}  // namespace dlock::cli
