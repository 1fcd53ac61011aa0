#include "bench_command.h"

#include <pthread.h>
#include <signal.h>

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
#include "bench_scenarios.h"
#include "dlock/uri.h"

#ifndef DLOCK_VERSION
#define DLOCK_VERSION "unknown"
#endif

namespace dlock::cli {
namespace {

constexpr char kDefaultNamespace[] = "dlock-bench";
const std::set<std::string> kScenarios = {"uncontended", "contention",
                                          "watchdog", "memory"};

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

// The flags, checked and parsed.
struct BenchPlan {
  std::vector<Profile> profiles;
  std::vector<std::string> scenarios;  // in the order given
  std::vector<int> threads;
  bench::Settings settings;  // without its connector
  absl::Duration lease;
};

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

absl::StatusOr<absl::Duration> DurationFlag(const std::string& text,
                                            const char* flag,
                                            absl::Duration max) {
  absl::StatusOr<absl::Duration> d = ParsePositiveDuration(text);
  if (!d.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", d.status().message()));
  }
  if (*d > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " is at most ", absl::FormatDuration(max), ", not ", text));
  }
  return *d;
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
        std::tuple{flags.names, "--names", 1, 10000000}}) {
    if (absl::Status s = CheckRange(value, flag, min, max); !s.ok()) return s;
  }
  absl::StatusOr<absl::Duration> duration =
      DurationFlag(flags.duration, "--duration", absl::Hours(1));
  if (!duration.ok()) return duration.status();
  absl::StatusOr<absl::Duration> warmup =
      DurationFlag(flags.warmup, "--warmup", absl::Minutes(10));
  if (!warmup.ok()) return warmup.status();
  absl::StatusOr<absl::Duration> lease =
      DurationFlag(flags.lease, "--lease", absl::Hours(1));
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

std::string Json(const bench::Percentiles& p) {
  return absl::StrFormat(R"({"p50":%.1f,"p99":%.1f,"p999":%.1f})", p.p50, p.p99,
                         p.p999);
}

std::string Us(const bench::Percentiles& p) {
  return absl::StrFormat("%.0f / %.0f / %.0f", p.p50, p.p99, p.p999);
}

// One backend's results: JSON records and lines of the table.
struct Report {
  std::vector<std::string> records;
  std::vector<std::string> lines;
};

void Add(Report& report, const std::string& head, const std::string& fields,
         std::string line) {
  report.records.push_back(absl::StrCat("{", head, ",", fields, "}"));
  report.lines.push_back(std::move(line));
}

absl::Status RunScenario(
    const std::string& scenario, const BenchPlan& plan, const BenchFlags& flags,
    const bench::Settings& settings, const std::string& head, Report& report,
    const std::function<void(const std::string&, absl::Duration)>& progress) {
  if (scenario == "uncontended") {
    for (int threads : plan.threads) {
      progress(absl::StrCat("uncontended, ", threads,
                            threads == 1 ? " thread" : " threads"),
               settings.warmup + settings.duration);
      absl::StatusOr<bench::Uncontended> r =
          bench::RunUncontended(settings, threads);
      if (!r.ok()) return r.status();
      Add(report, head,
          absl::StrFormat(
              R"("scenario":"uncontended","concurrency":%d,"seconds":%.3f,)"
              R"("pairs_per_sec":%.1f,"acquire_us":%s,"release_us":%s)",
              threads, r->seconds, r->pairs_per_sec, Json(r->acquire_us),
              Json(r->release_us)),
          absl::StrFormat("  uncontended %4d threads %10.0f pairs/s   "
                          "acquire us p50/p99/p99.9 %s   release %s",
                          threads, r->pairs_per_sec, Us(r->acquire_us),
                          Us(r->release_us)));
    }
  } else if (scenario == "contention") {
    progress(absl::StrCat("contention, ", flags.clients, " clients"),
             settings.warmup + settings.duration);
    absl::StatusOr<bench::Contention> r =
        bench::RunContention(settings, flags.clients);
    if (!r.ok()) return r.status();
    std::vector<std::string> shares;
    for (double s : r->shares) shares.push_back(absl::StrFormat("%.4f", s));
    Add(report, head,
        absl::StrFormat(
            R"("scenario":"contention","concurrency":%d,"seconds":%.3f,)"
            R"("acquisitions_per_sec":%.1f,"handoffs_per_sec":%.1f,)"
            R"("handoff_us":%s,"shares":[%s],"jain":%.4f,)"
            R"("longest_wait_ms":%.1f)",
            r->clients, r->seconds, r->acquisitions_per_sec,
            r->handoffs_per_sec, Json(r->handoff_us),
            absl::StrJoin(shares, ","), r->jain, r->longest_wait_ms),
        absl::StrFormat("  contention  %4d clients %10.0f hand-offs/s "
                        "hand-off us p50/p99/p99.9 %s   Jain %.3f   "
                        "longest wait %.0f ms",
                        r->clients, r->handoffs_per_sec, Us(r->handoff_us),
                        r->jain, r->longest_wait_ms));
  } else if (scenario == "watchdog") {
    progress(absl::StrCat("watchdog, ", flags.locks, " locks, lease ",
                          absl::FormatDuration(plan.lease)),
             std::max(settings.duration, plan.lease));
    absl::StatusOr<bench::Watchdog> r =
        bench::RunWatchdog(settings, flags.locks, plan.lease);
    if (!r.ok()) return r.status();
    Add(report, head,
        absl::StrFormat(R"("scenario":"watchdog","locks":%d,"lease_ms":%d,)"
                        R"("seconds":%.3f,"renew_calls_per_sec":%.4f,)"
                        R"("renewals_per_sec":%.1f,"client_cpu_fraction":%.5f)",
                        r->locks, absl::ToInt64Milliseconds(r->lease),
                        r->seconds, r->renew_calls_per_sec, r->renewals_per_sec,
                        r->client_cpu_fraction),
        absl::StrFormat("  watchdog    %4d locks, lease %s: %.1f renewals/s "
                        "in %.3f backend calls/s (a batch is one), client CPU "
                        "%.2f%% of a core",
                        r->locks, absl::FormatDuration(r->lease),
                        r->renewals_per_sec, r->renew_calls_per_sec,
                        100 * r->client_cpu_fraction));
  } else if (scenario == "memory") {
    progress(absl::StrCat("memory, ", flags.locks, " locks held, ", flags.names,
                          " names"),
             bench::MemoryNamesBudget(settings));
    absl::StatusOr<bench::Memory> r =
        bench::RunMemory(settings, flags.locks, flags.names);
    if (!r.ok()) return r.status();
    const std::string server =
        r->server_bytes_per_held_lock.has_value()
            ? absl::StrFormat("%.0f", *r->server_bytes_per_held_lock)
            : "null";
    Add(report, head,
        absl::StrFormat(R"("scenario":"memory","locks":%d,)"
                        R"("client_bytes_per_held_lock":%.0f,)"
                        R"("server_bytes_per_held_lock":%s,"server_note":%s,)"
                        R"("names_asked":%d,"names":%d,)"
                        R"("client_bytes_retained_after_names":%d)",
                        r->locks, r->client_bytes_per_held_lock, server,
                        JsonString(r->server_note), r->names_asked, r->names,
                        r->client_bytes_retained_after_names),
        absl::StrFormat("  memory      %4d held: client %.0f B/lock, server "
                        "%s B/lock (%s); after %d names (of %d asked) %d B "
                        "kept",
                        r->locks, r->client_bytes_per_held_lock, server,
                        r->server_note, r->names, r->names_asked,
                        r->client_bytes_retained_after_names));
  }
  return absl::OkStatus();
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
  // The measurement's settings show their defaults in --help.
  auto setting = [&](const char* flag, auto& value, const char* help) {
    command.add_option(flag, value, help)->capture_default_str();
  };
  setting("--scenarios", flags.scenarios,
          "Comma-separated: uncontended, contention, watchdog, memory");
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
          "Watchdog: the lease renewed at a third of it");
}

int BenchCommand(const BenchFlags& flags) {
  // Before any client starts a thread: they inherit the blocked signals.
  CancelToken stop;
  InterruptWatch interrupts(stop);
  absl::StatusOr<BenchPlan> plan = Plan(flags);
  if (!plan.ok()) return Fail(plan.status());
  plan->settings.stop = stop;
  int per_backend = 0;
  for (const std::string& s : plan->scenarios) {
    per_backend +=
        s == "uncontended" ? static_cast<int>(plan->threads.size()) : 1;
  }
  const int steps = static_cast<int>(plan->profiles.size()) * per_backend;
  int step = 0;
  absl::Status first_error;
  std::vector<std::string> records;
  std::string table;
  for (size_t b = 0; b < plan->profiles.size() && !stop.IsCancelled(); ++b) {
    const Profile& profile = plan->profiles[b];
    bench::Settings settings = plan->settings;
    settings.connect = [&profile](ClientOptions options) {
      // The profile's lease would replace the watchdog scenario's.
      Profile p = profile;
      p.default_lease = options.watchdog_lease;
      return ConnectProfile(p, std::move(options));
    };
    const std::string shown = profile.DisplayBackend();
    const std::string head = absl::StrFormat(
        R"("backend":%s,"uri":%s,"namespace":%s)",
        JsonString(shown.substr(0, shown.find(':'))), JsonString(shown),
        JsonString(profile.lock_namespace.empty() ? "(the URI's)"
                                                  : profile.lock_namespace));
    auto progress = [&](const std::string& what, absl::Duration expected) {
      ++step;
      if (flags.quiet) return;
      std::fputs(
          absl::StrFormat("dlock bench: [%d/%d] %s: %s (up to %s)\n", step,
                          steps, shown, what, absl::FormatDuration(expected))
              .c_str(),
          stderr);
    };
    Report report;
    absl::Status failed;
    for (const std::string& scenario : plan->scenarios) {
      failed =
          RunScenario(scenario, *plan, flags, settings, head, report, progress);
      if (!failed.ok()) break;
    }
    if (!failed.ok()) {
      // The other backends still run; this one reports what it measured.
      report.records.push_back(absl::StrCat(
          "{", head,
          ",\"code\":", JsonString(absl::StatusCodeToString(failed.code())),
          ",\"error\":", JsonString(failed.message()), "}"));
      report.lines.push_back(absl::StrCat("  FAILED: ", failed.message()));
      Fail(failed);
      if (first_error.ok()) first_error = failed;
    }
    step = static_cast<int>(b + 1) * per_backend;  // the skipped ones too
    records.insert(records.end(), report.records.begin(), report.records.end());
    absl::StrAppend(&table, shown, " (namespace ",
                    profile.lock_namespace.empty() ? "from the URI"
                                                   : profile.lock_namespace,
                    ")\n", absl::StrJoin(report.lines, "\n"), "\n");
  }
  if (flags.json) {
    std::fputs(
        absl::StrCat(R"({"tool":"dlock","version":)", JsonString(DLOCK_VERSION),
                     R"(,"results":[)", absl::StrJoin(records, ",\n"), "]}\n")
            .c_str(),
        stdout);
  } else {
    std::fputs(table.c_str(), stdout);
  }
  // Interrupted: as a shell reports a process its signal ended.
  if (interrupts.signal() != 0) return 128 + interrupts.signal();
  return first_error.ok() ? kOk : ExitCodeFor(first_error);
}

}  // namespace dlock::cli
