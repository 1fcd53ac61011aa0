// The PostgreSQL backend, in both modes, against its ceiling and a peer on
// the same server in the same run (issue 4). The ceiling: libpq itself
// running a prepared one-row upsert on a scratch table, one connection per
// thread, with the settings dlock's connections use (TCP to the same
// address, statement_timeout); a pair costs two such round trips. For the
// hand-off, the least a LISTEN/NOTIFY hand-off takes: a write that notifies,
// its delivery to a listening connection, and that connection's upsert. The
// peer: OpenStack tooz's PostgreSQL driver (Debian's python3-tooz), run by
// peers/tooz_lock_bench.py next to this file.
//
//   dlock_postgres_bench [seconds-per-case]      (default 5)
//   dlock_postgres_bench --ceiling CONNINFO THREADS SECONDS
//
// The second form runs one slice of the pair ceiling against a running
// server (CONNINFO in libpq's form, "host=127.0.0.1 port=5432 ...") and
// prints it as one JSON record, for the comparative report
// (scripts/bench_report.py).
//
// Starts its own PostgreSQL. Prints each rate with its ratio to the ceiling
// and to tooz, against the targets of issue 4 (lease mode: at least 0.8 of
// the two-round-trip ceiling and 5 times tooz); exits non-zero only when
// something fails, never for a missed target (the machine is shared).
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "bench_util.h"

namespace {

constexpr double kTargetOfCeiling = 0.8;  // lease mode, of the pair ceiling
constexpr double kTargetOverTooz = 5.0;   // lease mode

// What dlock sets on each of its connections (docs/postgres.md): the same
// server-side statement timeout and connect timeout.
constexpr int kStatementTimeoutMs = 5000;
constexpr char kTable[] = "dlock_bench_ceiling";
constexpr char kUpsert[] =
    "INSERT INTO dlock_bench_ceiling AS c (k, v) VALUES ($1, 1) "
    "ON CONFLICT (k) DO UPDATE SET v = c.v + 1 RETURNING c.v";

struct ConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;
struct ResultClearer {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultClearer>;

std::string Message(PGconn* conn) {
  std::string out = PQerrorMessage(conn);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
    out.pop_back();
  }
  return out;
}

bool Succeeded(const PGresult* result) {
  const ExecStatusType st = PQresultStatus(result);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

absl::Status Exec(PGconn* conn, const std::string& sql) {
  Result r(PQexec(conn, sql.c_str()));
  if (!Succeeded(r.get())) {
    return absl::InternalError(absl::StrCat(sql, ": ", Message(conn)));
  }
  return absl::OkStatus();
}

// A connection as dlock opens one, with the upsert prepared.
absl::StatusOr<Conn> OpenCeilingConn(const std::string& conninfo) {
  Conn conn(PQconnectdb(conninfo.c_str()));
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq: no memory");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return absl::UnavailableError(
        absl::StrCat("libpq cannot connect: ", Message(conn.get())));
  }
  if (absl::Status s = Exec(conn.get(), absl::StrCat("SET statement_timeout = ",
                                                     kStatementTimeoutMs));
      !s.ok()) {
    return s;
  }
  Result r(PQprepare(conn.get(), "upsert", kUpsert, 1, nullptr));
  if (!Succeeded(r.get())) {
    return absl::InternalError(
        absl::StrCat("preparing the upsert: ", Message(conn.get())));
  }
  return conn;
}

absl::Status Upsert(PGconn* conn, const std::string& key) {
  const char* values[] = {key.c_str()};
  Result r(PQexecPrepared(conn, "upsert", 1, values, nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    return absl::InternalError(absl::StrCat("upsert: ", Message(conn)));
  }
  return absl::OkStatus();
}

absl::Status CreateCeilingTable(const std::string& conninfo) {
  Conn conn(PQconnectdb(conninfo.c_str()));
  if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrCat(
        "libpq cannot connect: ", conn ? Message(conn.get()) : "no memory"));
  }
  return Exec(conn.get(), absl::StrCat("CREATE TABLE IF NOT EXISTS ", kTable,
                                       " (k text PRIMARY KEY, v bigint NOT "
                                       "NULL) WITH (fillfactor = 70)"));
}

// One-row upserts per second (round trips): `threads` threads, each with a
// connection of its own and a row of its own.
absl::StatusOr<double> CeilingUpsertsPerSecond(const std::string& conninfo,
                                               int threads,
                                               absl::Duration duration) {
  std::vector<Conn> conns;
  for (int t = 0; t < threads; ++t) {
    absl::StatusOr<Conn> conn = OpenCeilingConn(conninfo);
    if (!conn.ok()) return conn.status();
    conns.push_back(*std::move(conn));
  }
  return dlock::bench::LoopRate(threads, duration, [&](int t) {
    return Upsert(conns[t].get(), absl::StrCat("ceiling-", t));
  });
}

// The least a LISTEN/NOTIFY hand-off takes: from sending a write that
// notifies (the release) to a listening connection having received the
// notification and run its own upsert on the row (the acquire).
absl::StatusOr<dlock::bench::Latency> CeilingHandOff(
    const std::string& conninfo, int samples) {
  absl::StatusOr<Conn> waiter = OpenCeilingConn(conninfo);
  if (!waiter.ok()) return waiter.status();
  absl::StatusOr<Conn> holder = OpenCeilingConn(conninfo);
  if (!holder.ok()) return holder.status();
  if (absl::Status s =
          Exec(waiter->get(), absl::StrCat("LISTEN ", kTable, "_released"));
      !s.ok()) {
    return s;
  }
  const std::string release =
      absl::StrCat("WITH u AS (", kUpsert, ") SELECT pg_notify('", kTable,
                   "_released', 'handoff') FROM u");
  const char* key[] = {"handoff"};
  const int fd = PQsocket(waiter->get());
  std::vector<absl::Duration> times;
  for (int i = 0; i < samples; ++i) {
    // As in HandOffLatency: the waiter has been idle for a moment.
    absl::SleepFor(absl::Milliseconds(2));
    const absl::Time released = absl::Now();
    if (PQsendQueryParams(holder->get(), release.c_str(), 1, nullptr, key,
                          nullptr, nullptr, 0) == 0) {
      return absl::InternalError(
          absl::StrCat("sending the release: ", Message(holder->get())));
    }
    bool woken = false;
    while (!woken) {
      if (PQconsumeInput(waiter->get()) == 0) {
        return absl::InternalError(Message(waiter->get()));
      }
      while (PGnotify* n = PQnotifies(waiter->get())) {
        woken = true;
        PQfreemem(n);
      }
      if (woken) break;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5000) == 0) {
        return absl::InternalError("a notification never arrived");
      }
    }
    if (absl::Status s = Upsert(waiter->get(), key[0]); !s.ok()) return s;
    times.push_back(absl::Now() - released);
    bool ok = true;
    while (PGresult* r = PQgetResult(holder->get())) {
      ok = ok && Succeeded(r);
      PQclear(r);
    }
    if (!ok) {
      return absl::InternalError(
          absl::StrCat("the release: ", Message(holder->get())));
    }
  }
  std::sort(times.begin(), times.end());
  return dlock::bench::Latency{
      .median = times[times.size() / 2],
      .p99 = times[std::min(times.size() - 1, times.size() * 99 / 100)],
      .samples = samples};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

// An upsert after the same idle time as a hand-off's: the round trip a
// latency meets, which an idle VM's wake-ups make longer than the round trip
// of a back-to-back stream.
absl::StatusOr<dlock::bench::Latency> LoneRoundTrip(const std::string& conninfo,
                                                    int samples) {
  absl::StatusOr<Conn> conn = OpenCeilingConn(conninfo);
  if (!conn.ok()) return conn.status();
  std::vector<absl::Duration> times;
  for (int i = 0; i < samples; ++i) {
    absl::SleepFor(absl::Milliseconds(2));
    const absl::Time start = absl::Now();
    if (absl::Status s = Upsert(conn->get(), "lone"); !s.ok()) return s;
    times.push_back(absl::Now() - start);
  }
  std::sort(times.begin(), times.end());
  return dlock::bench::Latency{
      .median = times[times.size() / 2],
      .p99 = times[std::min(times.size() - 1, times.size() * 99 / 100)],
      .samples = samples};
}

absl::StatusOr<double> ToozPairsPerSecond(const std::string& url, int threads,
                                          int seconds) {
  return dlock::bench::PeerScriptRate(
      "peers/tooz_lock_bench.py", absl::StrCat(url, " ", seconds, " ", threads),
      "python3-tooz python3-psycopg2");
}

// `--ceiling CONNINFO THREADS SECONDS`: one ceiling slice as a JSON record,
// with the settings of the ceiling above (connect timeout, application
// name) added to CONNINFO.
int CeilingSlice(int argc, char** argv) {
  int threads = 0;
  double seconds = 0;
  if (argc != 5 || !absl::SimpleAtoi(argv[3], &threads) || threads < 1 ||
      !absl::SimpleAtod(argv[4], &seconds) || seconds <= 0) {
    std::cerr << "usage: " << argv[0]
              << " --ceiling CONNINFO THREADS SECONDS\n";
    return 2;
  }
  const std::string conninfo = absl::StrCat(
      argv[2], " connect_timeout=5 application_name=dlock-bench-ceiling");
  if (absl::Status s = CreateCeilingTable(conninfo); !s.ok()) {
    return dlock::bench::Fail(s);
  }
  absl::StatusOr<double> upserts =
      CeilingUpsertsPerSecond(conninfo, threads, absl::Seconds(seconds));
  if (!upserts.ok()) return dlock::bench::Fail(upserts.status());
  // A pair costs two upserts' round trips.
  std::cout << absl::StrFormat(
      "{\"ceiling\": \"libpq: prepared one-row upsert, a connection per "
      "thread, two per pair\", \"scenario\": \"uncontended\", "
      "\"concurrency\": %d, \"seconds\": %g, \"pairs_per_sec\": %.1f, "
      "\"round_trips_per_sec\": %.1f}\n",
      threads, seconds, *upserts / 2, *upserts);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dlock::bench::RunAsTheCliDoes();
  if (argc > 1 && std::string(argv[1]) == "--ceiling") {
    return CeilingSlice(argc, argv);
  }
  const int seconds = dlock::bench::SecondsPerCase(argc, argv);
  if (seconds < 1) return 2;
  const absl::Duration duration = absl::Seconds(seconds);
  // Both modes run on one server.
  absl::StatusOr<dlock::bench::BenchServer> lease =
      dlock::bench::StartServer("postgres_lease");
  if (!lease.ok()) return dlock::bench::Fail(lease.status());
  absl::StatusOr<dlock::bench::BenchServer> session =
      dlock::bench::StartServer("postgres_session");
  if (!session.ok()) return dlock::bench::Fail(session.status());
  const std::string conninfo =
      absl::StrCat("host=127.0.0.1 port=", lease->port,
                   " dbname=postgres user=postgres connect_timeout=5 "
                   "application_name=dlock-bench-ceiling");
  const std::string tooz_url = absl::StrCat(
      "postgresql://postgres@127.0.0.1:", lease->port, "/postgres");
  // One thread needs one connection; 16 threads get 16 pooled connections,
  // as the ceiling has (the default pool_size, 4, is printed as well).
  const std::string lease_1 = lease->Uri("bench-lease");
  const std::string lease_16 = lease->Uri("bench-lease", "pool_size=16");
  const std::string session_1 = session->Uri("bench-session");
  const std::string session_16 = session->Uri("bench-session", "pool_size=16");

  // Creates the scratch table and dlock's schema, and warms the server's
  // caches up before anything is measured.
  if (absl::Status s = CreateCeilingTable(conninfo); !s.ok())
    return dlock::bench::Fail(s);
  const absl::Duration warm_up = std::min(duration, absl::Seconds(2));
  if (absl::Status s = CeilingUpsertsPerSecond(conninfo, 4, warm_up).status();
      !s.ok()) {
    return dlock::bench::Fail(s);
  }
  for (const std::string& uri : {lease_16, session_16}) {
    if (absl::Status s =
            dlock::bench::UncontendedPairsPerSecond(uri, 4, warm_up).status();
        !s.ok()) {
      return dlock::bench::Fail(s);
    }
  }

  // The machine is shared and its load drifts by a factor of two within
  // seconds, so each rate is measured next to its ceiling: half-second
  // slices of the ceiling and of each dlock case in turn, 2 x `seconds`
  // rounds (as bench_util's MeasurePaired, with one ceiling slice per round
  // for all the cases of a thread count). Rates and ratios are medians over
  // the rounds; a ratio is printed with the spread of its per-round values.
  using Run = std::function<absl::StatusOr<double>(absl::Duration)>;
  const int rounds = 2 * seconds;
  auto interleaved = [&](const std::vector<Run>& runs)
      -> absl::StatusOr<std::vector<std::vector<double>>> {
    std::vector<std::vector<double>> rates(runs.size());
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < runs.size(); ++i) {
        absl::StatusOr<double> rate = runs[i](absl::Milliseconds(500));
        if (!rate.ok()) return rate.status();
        rates[i].push_back(*rate);
      }
    }
    return rates;
  };
  auto ceiling_run = [&](int threads) -> Run {
    return [&, threads](absl::Duration d) {
      return CeilingUpsertsPerSecond(conninfo, threads, d);
    };
  };
  auto dlock_run = [](const std::string& uri, int threads) -> Run {
    return [uri, threads](absl::Duration d) {
      return dlock::bench::UncontendedPairsPerSecond(uri, threads, d);
    };
  };
  absl::StatusOr<std::vector<std::vector<double>>> one = interleaved(
      {ceiling_run(1), dlock_run(lease_1, 1), dlock_run(session_1, 1)});
  if (!one.ok()) return dlock::bench::Fail(one.status());
  absl::StatusOr<std::vector<std::vector<double>>> sixteen =
      interleaved({ceiling_run(16), dlock_run(lease_16, 16),
                   dlock_run(lease_1, 16), dlock_run(session_16, 16)});
  if (!sixteen.ok()) return dlock::bench::Fail(sixteen.status());

  absl::StatusOr<double> tooz_1 = ToozPairsPerSecond(tooz_url, 1, seconds);
  if (!tooz_1.ok()) return dlock::bench::Fail(tooz_1.status());
  absl::StatusOr<double> tooz_16 = ToozPairsPerSecond(tooz_url, 16, seconds);
  if (!tooz_16.ok()) return dlock::bench::Fail(tooz_16.status());

  const int samples = 200 * seconds;
  absl::StatusOr<dlock::bench::Latency> lone = LoneRoundTrip(conninfo, samples);
  if (!lone.ok()) return dlock::bench::Fail(lone.status());
  absl::StatusOr<dlock::bench::Latency> ceiling_handoff =
      CeilingHandOff(conninfo, samples);
  if (!ceiling_handoff.ok())
    return dlock::bench::Fail(ceiling_handoff.status());
  absl::StatusOr<dlock::bench::Latency> lease_handoff =
      dlock::bench::HandOffLatency(lease_1, samples);
  if (!lease_handoff.ok()) return dlock::bench::Fail(lease_handoff.status());
  absl::StatusOr<dlock::bench::Latency> session_handoff =
      dlock::bench::HandOffLatency(session_1, samples);
  if (!session_handoff.ok())
    return dlock::bench::Fail(session_handoff.status());

  const std::vector<double>& ceiling_1 = (*one)[0];
  const std::vector<double>& ceiling_16 = (*sixteen)[0];
  const double tooz[] = {*tooz_1, *tooz_16};
  // "  1 thread:   4828 pairs/s   0.81 of ceiling (target 0.80): ok
  //  (rounds 0.70..0.93); 23.6x tooz (target 5.0x): ok"; no verdicts for a
  // case without a target.
  auto line = [&](absl::string_view label, const std::vector<double>& ours,
                  const std::vector<double>& ceiling, int peer, bool target) {
    std::vector<double> ratios;
    for (size_t i = 0; i < ours.size(); ++i) {
      ratios.push_back(ours[i] / (ceiling[i] / 2));
    }
    std::sort(ratios.begin(), ratios.end());
    const double median = Median(ratios);
    const double over_tooz = Median(ours) / tooz[peer];
    return absl::StrFormat(
        "  %-33s %7.0f pairs/s   %s (rounds %.2f..%.2f); %s\n", label,
        Median(ours),
        target ? dlock::bench::Verdict(median, kTargetOfCeiling)
               : absl::StrFormat("%.2f of ceiling", median),
        ratios.front(), ratios.back(),
        target ? absl::StrFormat("%.1fx tooz (target %.1fx): %s", over_tooz,
                                 kTargetOverTooz,
                                 over_tooz >= kTargetOverTooz ? "ok" : "MISSED")
               : absl::StrFormat("%.1fx tooz", over_tooz));
  };
  auto handoff = [&](absl::string_view label, const dlock::bench::Latency& l) {
    return absl::StrFormat(
        "  %-8s median %s = %.1f lone round trips (%+.1f over the ceiling), "
        "p99 %s\n",
        label, absl::FormatDuration(l.median),
        absl::FDivDuration(l.median, lone->median),
        absl::FDivDuration(l.median - ceiling_handoff->median, lone->median),
        absl::FormatDuration(l.p99));
  };
  std::cout << absl::StrFormat(
                   "postgres backend, %ds per case (%d rounds of 0.5 s "
                   "slices), server %s\n"
                   "ceiling (libpq: prepared one-row upsert, a connection per "
                   "thread; a pair costs two):\n"
                   "  1 connection:   %8.0f upserts/s = %7.0f pairs/s\n"
                   "  16 connections: %8.0f upserts/s = %7.0f pairs/s\n"
                   "  lone round trip (after 2 ms idle): median %s, p99 %s\n"
                   "peer (tooz postgresql driver, python3-tooz):\n"
                   "  1 thread:   %7.0f pairs/s\n"
                   "  16 threads: %7.0f pairs/s\n"
                   "uncontended acquire+release, lease mode:\n",
                   seconds, rounds, lease->Uri(""), Median(ceiling_1),
                   Median(ceiling_1) / 2, Median(ceiling_16),
                   Median(ceiling_16) / 2, absl::FormatDuration(lone->median),
                   absl::FormatDuration(lone->p99), *tooz_1, *tooz_16)
            << line("1 thread:", (*one)[1], ceiling_1, 0, true)
            << line("16 threads:", (*sixteen)[1], ceiling_16, 1, true)
            << line("16 threads, default pool_size=4:", (*sixteen)[2],
                    ceiling_16, 1, false)
            << "session mode (no target):\n"
            << line("1 thread:", (*one)[2], ceiling_1, 0, false)
            << line("16 threads:", (*sixteen)[3], ceiling_16, 1, false)
            << absl::StrFormat(
                   "hand-off (release to waiter holding), %d samples (no "
                   "target):\n"
                   "  ceiling  median %s (notifying upsert, LISTEN, upsert), "
                   "p99 %s\n",
                   samples, absl::FormatDuration(ceiling_handoff->median),
                   absl::FormatDuration(ceiling_handoff->p99))
            << handoff("lease:", *lease_handoff)
            << handoff("session:", *session_handoff);
  return 0;
}
