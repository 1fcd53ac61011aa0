#include "bench_output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/duration.h"

namespace dlock::cli {
namespace {

Json PercentilesJson(const bench::Percentiles& p) {
  return {{"p50", p.p50}, {"p99", p.p99}, {"p999", p.p999}};
}

std::string Us(const bench::Percentiles& p) {
  return absl::StrFormat("%.0f / %.0f / %.0f", p.p50, p.p99, p.p999);
}

std::string Plural(int n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

void Add(Report& report, const Json& fields, std::string line) {
  Json record = report.head;
  record.update(fields);
  report.records.push_back(std::move(record));
  report.lines.push_back(std::move(line));
}

absl::Status RunUncontended(const BenchPlan& plan,
                            const bench::Settings& settings, Report& report,
                            const Progress& progress) {
  for (int threads : plan.threads) {
    progress(
        absl::StrCat("uncontended, ", Plural(threads, "thread", "threads")),
        settings.warmup + settings.duration);
    absl::StatusOr<bench::Uncontended> r =
        bench::RunUncontended(settings, threads);
    if (!r.ok()) return r.status();
    Add(report,
        {{"scenario", "uncontended"},
         {"concurrency", threads},
         {"seconds", r->seconds},
         {"pairs_per_sec", r->pairs_per_sec},
         {"acquire_us", PercentilesJson(r->acquire_us)},
         {"release_us", PercentilesJson(r->release_us)}},
        absl::StrFormat("  uncontended %12s %10.0f pairs/s   "
                        "acquire us p50/p99/p99.9 %s   release %s",
                        Plural(threads, "thread", "threads"), r->pairs_per_sec,
                        Us(r->acquire_us), Us(r->release_us)));
  }
  return absl::OkStatus();
}

absl::Status RunContention(const BenchFlags& flags,
                           const bench::Settings& settings, Report& report,
                           const Progress& progress) {
  progress(
      absl::StrCat("contention, ", Plural(flags.clients, "client", "clients")),
      settings.warmup + settings.duration);
  absl::StatusOr<bench::Contention> r =
      bench::RunContention(settings, flags.clients);
  if (!r.ok()) return r.status();
  Add(report,
      {{"scenario", "contention"},
       {"concurrency", r->clients},
       {"seconds", r->seconds},
       {"acquisitions_per_sec", r->acquisitions_per_sec},
       {"handoffs_per_sec", r->handoffs_per_sec},
       {"handoff_us", PercentilesJson(r->handoff_us)},
       {"shares", r->shares},
       {"jain", r->jain},
       {"longest_wait_ms", r->longest_wait_ms}},
      absl::StrFormat("  contention  %12s %10.0f acquisitions/s, %.0f "
                      "hand-offs/s   hand-off us p50/p99/p99.9 %s   "
                      "Jain %.3f   longest wait %.0f ms",
                      Plural(r->clients, "client", "clients"),
                      r->acquisitions_per_sec, r->handoffs_per_sec,
                      Us(r->handoff_us), r->jain, r->longest_wait_ms));
  report.contention = true;
  return absl::OkStatus();
}

absl::Status RunWatchdog(const BenchPlan& plan, const BenchFlags& flags,
                         const bench::Settings& settings, Report& report,
                         const Progress& progress) {
  progress(absl::StrCat("watchdog, ", Plural(flags.locks, "lock", "locks"),
                        ", lease ", FormatDurationForPeople(plan.lease)),
           std::max(settings.duration, plan.lease));
  absl::StatusOr<bench::Watchdog> r =
      bench::RunWatchdog(settings, flags.locks, plan.lease);
  if (!r.ok()) return r.status();
  Add(report,
      {{"scenario", "watchdog"},
       {"locks", r->locks},
       {"lease_ms", absl::ToInt64Milliseconds(r->lease)},
       {"seconds", r->seconds},
       {"renew_calls_per_sec", r->renew_calls_per_sec},
       {"renewals_per_sec", r->renewals_per_sec},
       {"client_cpu_fraction", r->client_cpu_fraction}},
      absl::StrFormat("  watchdog    %12s, lease %s: %.1f renewals/s in %.3f "
                      "backend calls/s (a batch is one), client CPU %.2f%% of "
                      "a core",
                      Plural(r->locks, "lock", "locks"),
                      FormatDurationForPeople(r->lease), r->renewals_per_sec,
                      r->renew_calls_per_sec, 100 * r->client_cpu_fraction));
  return absl::OkStatus();
}

absl::Status RunMemory(const BenchFlags& flags, const bench::Settings& settings,
                       Report& report, const Progress& progress) {
  progress(absl::StrCat("memory, ", Plural(flags.locks, "lock", "locks"),
                        " held, ", Plural(flags.names, "name", "names")),
           bench::MemoryNamesBudget(settings));
  absl::StatusOr<bench::Memory> r =
      bench::RunMemory(settings, flags.locks, flags.names);
  if (!r.ok()) return r.status();
  const std::string server =
      r->server_bytes_per_held_lock.has_value()
          ? absl::StrFormat("%.0f B/lock", *r->server_bytes_per_held_lock)
          : "not measured";
  Add(report,
      {{"scenario", "memory"},
       {"locks", r->locks},
       {"client_bytes_per_held_lock", r->client_bytes_per_held_lock},
       {"server_bytes_per_held_lock", r->server_bytes_per_held_lock.has_value()
                                          ? Json(*r->server_bytes_per_held_lock)
                                          : Json(nullptr)},
       {"server_note", r->server_note},
       {"names_asked", r->names_asked},
       {"names", r->names},
       {"client_bytes_retained_after_names",
        r->client_bytes_retained_after_names}},
      absl::StrFormat("  memory      %12s held: client %.0f B/lock, server %s "
                      "(%s); after %d names (of %d asked) %d B kept",
                      Plural(r->locks, "lock", "locks"),
                      r->client_bytes_per_held_lock, server, r->server_note,
                      r->names, r->names_asked,
                      r->client_bytes_retained_after_names));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunScenario(const std::string& scenario, const BenchPlan& plan,
                         const BenchFlags& flags,
                         const bench::Settings& settings, Report& report,
                         const Progress& progress) {
  if (scenario == "uncontended") {
    return RunUncontended(plan, settings, report, progress);
  }
  if (scenario == "contention") {
    return RunContention(flags, settings, report, progress);
  }
  if (scenario == "watchdog") {
    return RunWatchdog(plan, flags, settings, report, progress);
  }
  return RunMemory(flags, settings, report, progress);
}

}  // namespace dlock::cli
