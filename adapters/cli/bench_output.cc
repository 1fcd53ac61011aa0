#include "bench_output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_primitives.h"
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

// Adds a record and a line saying that the backend does not offer what
// `scenario` measures, and why (BackendTraits::primitives_note).
void NotOffered(const std::string& scenario, const std::string& note,
                Report& report) {
  Add(report, {{"scenario", scenario}, {"offered", false}, {"note", note}},
      absl::StrFormat("  %-11s not offered by this backend: %s", scenario,
                      note));
}

// The permits per second of a semaphore (permits 0: as many as threads),
// of a read-write lock's readers or of its writers, at each of --threads.
absl::Status RunPermits(const std::string& scenario, const BenchPlan& plan,
                        const BenchFlags& flags,
                        const bench::Settings& settings, Report& report,
                        const Progress& progress) {
  absl::StatusOr<bench::Offered> offered = bench::PrimitivesOffered(settings);
  if (!offered.ok()) return offered.status();
  const bool semaphore = scenario == "semaphore";
  const bool exclusive = scenario == "exclusive";
  if (!(semaphore ? offered->semaphores : offered->read_write_locks)) {
    NotOffered(scenario, offered->note, report);
    return absl::OkStatus();
  }
  for (int threads : plan.threads) {
    const int64_t permits = flags.permits > 0 ? flags.permits : threads;
    const std::string who =
        semaphore   ? absl::StrCat("N=", permits, ", ", threads, " thr")
        : exclusive ? Plural(threads, "writer", "writers")
                    : Plural(threads, "reader", "readers");
    progress(absl::StrCat(scenario, ", ", who),
             settings.warmup + settings.duration);
    absl::StatusOr<bench::Uncontended> r =
        semaphore ? bench::RunSemaphore(settings, threads, permits)
                  : bench::RunReadWrite(settings, threads, exclusive);
    if (!r.ok()) return r.status();
    Json fields = {{"scenario", scenario},
                   {"concurrency", threads},
                   {"seconds", r->seconds},
                   {"pairs_per_sec", r->pairs_per_sec},
                   {"acquire_us", PercentilesJson(r->acquire_us)},
                   {"release_us", PercentilesJson(r->release_us)}};
    if (semaphore) fields["permits"] = permits;
    Add(report, fields,
        absl::StrFormat("  %-11s %12s %10.0f %s/s  acquire us "
                        "p50/p99/p99.9 %s   release %s",
                        scenario, who, r->pairs_per_sec,
                        semaphore ? "permits" : "holds", Us(r->acquire_us),
                        Us(r->release_us)));
  }
  return absl::OkStatus();
}

std::string Ms(const bench::Percentiles& p) {
  return absl::StrFormat("%.1f / %.1f ms", p.p50 / 1e3, p.p99 / 1e3);
}

absl::Status RunElection(const BenchPlan& plan, const BenchFlags& flags,
                         const bench::Settings& settings, Report& report,
                         const Progress& progress) {
  absl::StatusOr<bench::Offered> offered = bench::PrimitivesOffered(settings);
  if (!offered.ok()) return offered.status();
  if (!offered->elections) {
    NotOffered("election", offered->note, report);
    return absl::OkStatus();
  }
  progress(
      absl::StrCat("election, ", Plural(flags.handovers, "resign", "resigns"),
                   ", ", Plural(flags.lapses, "lapse", "lapses"), " of a ",
                   FormatDurationForPeople(plan.lease), " lease"),
      (flags.handovers + 1) * absl::Milliseconds(100) +
          flags.lapses * (plan.lease + absl::Seconds(2)));
  absl::StatusOr<bench::Handover> r =
      bench::RunElection(settings, flags.handovers, flags.lapses, plan.lease);
  if (!r.ok()) return r.status();
  Json fields = {
      {"scenario", "election"},
      {"resigns", r->resigns},
      {"resign_handover_us", PercentilesJson(r->resign_us)},
      {"lapses", r->lapses},
      {"lease_ms", absl::ToInt64Milliseconds(r->lease)},
      {"lapse_handover_us",
       r->lapses > 0 ? PercentilesJson(r->lapse_us) : Json(nullptr)}};
  std::string line =
      absl::StrFormat("  election    hand-over p50/p99 after a resign %s (%d)",
                      Ms(r->resign_us), r->resigns);
  if (r->lapses > 0) {
    absl::StrAppend(&line, absl::StrFormat(", after a %s lease lapsed %s (%d)",
                                           FormatDurationForPeople(r->lease),
                                           Ms(r->lapse_us), r->lapses));
  }
  Add(report, fields, line);
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
  if (scenario == "semaphore" || scenario == "shared" ||
      scenario == "exclusive") {
    return RunPermits(scenario, plan, flags, settings, report, progress);
  }
  if (scenario == "election") {
    return RunElection(plan, flags, settings, report, progress);
  }
  if (scenario == "watchdog") {
    return RunWatchdog(plan, flags, settings, report, progress);
  }
  return RunMemory(flags, settings, report, progress);
}

}  // namespace dlock::cli
