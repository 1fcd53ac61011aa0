"""The rendering half of the comparative report (scripts/bench_report.py):
the figures (medians, per-round ratios), the tables, the targets and their
verdicts, the versions and the markdown of docs/benchmarks.md. The charts
are in bench_report_charts.py.
"""
import json
import os
import platform
import re
import statistics
import subprocess

import bench_report_primitives as primitives
from bench_report_measure import (CEILINGS, CLUSTER_MASTERS, CLUSTER_PEERS, CLUSTER_THREADS,
                                  CONTENDERS, PEERS, REPO, THREADS, dlocks)

# The ratios docs/performance.md records for ZooKeeper and PostgreSQL (lease
# mode), the lower end of each recorded range, with where each comes from:
# the report checks that this run keeps or beats them. (The ZooKeeper peer
# figures are kazoo's; the PostgreSQL ones tooz's.) The PostgreSQL 16-thread
# ones are the default pool's (pool_size=4), the pool this report runs.
ZK_SOURCE = ("docs/performance.md, ZooKeeper section: lower end of the range it quotes "
             "from docs/zookeeper.md's two runs (dlock_zookeeper_bench)")
PG_TABLE = "docs/performance.md, PostgreSQL table (alternating 0.5 s slices, 10 rounds)"
RECORDED = {
    ("zookeeper", 1, "ceiling"): (0.88, ZK_SOURCE),
    ("zookeeper", 16, "ceiling"): (0.62, ZK_SOURCE),
    ("zookeeper", 1, "kazoo"): (1.44, ZK_SOURCE),
    ("zookeeper", 16, "kazoo"): (2.4, ZK_SOURCE),
    ("postgres", 1, "ceiling"): (0.74, PG_TABLE + ", row \"lease, 1 thread\", run A"),
    ("postgres", 16, "ceiling"): (0.56, PG_TABLE + ", row \"lease, 16 threads, pool_size=4\", "
                                  "run A; its ceiling had 16 connections, this run's has 4"),
    ("postgres", 1, "tooz-postgresql"): (8.6, PG_TABLE + ", row \"lease, 1 thread\", run A"),
    ("postgres", 16, "tooz-postgresql"): (24.2, PG_TABLE + ", row \"lease, 16 threads, "
                                          "pool_size=4\", run A"),
}


# --- figures -----------------------------------------------------------------


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def median_of(recs, *path):
    def get(r):
        for p in path:
            r = r.get(p) if isinstance(r, dict) else None
        return r
    return median([get(r) for r in recs])


def ratio(ours, theirs, field="pairs_per_sec", get=None):
    """Median of the per-round ratios, with min and max; `get(record)`
    instead of record[field] when given."""
    get = get or (lambda r: r.get(field))  # None: not measured in that run
    per_round = [get(a) / get(b) for a, b in zip(ours, theirs) if get(a) and get(b)]
    if not per_round:
        return None
    return statistics.median(per_round), min(per_round), max(per_round)


def best_peer_ratio(records, backend, threads):
    """dlock against the best peer of each round."""
    cell = records[backend]["uncontended"][threads]
    per_round = []
    for i, ours in enumerate(cell["dlock"]):
        best = max(cell[p][i]["pairs_per_sec"] for p in PEERS[backend])
        per_round.append(ours["pairs_per_sec"] / best)
    best_name = max(PEERS[backend], key=lambda p: median_of(cell[p], "pairs_per_sec"))
    return (statistics.median(per_round), min(per_round), max(per_round)), best_name


def fmt_rate(v):
    return "%s" % format(int(round(v)), ",") if v is not None else "n/a"


def fmt_us(v):
    if v is None:
        return "n/a"
    if v >= 10000:
        return "%s ms" % format(round(v / 1000, 1), ",")
    return "%s µs" % format(int(round(v)), ",")


def fmt_ratio(r):
    if r is None:
        return "n/a"
    return "%.2f (%.2f..%.2f)" % r


def verdict(value, target):
    return "MET" if value >= target else "MISSED"


# --- the report ----------------------------------------------------------------

TITLES = {"redis": "Redis", "zookeeper": "ZooKeeper", "postgres": "PostgreSQL", "etcd": "etcd"}


def measured(records):
    """The backends these records have, in the report's order."""
    return [b for b in PEERS if b in records]


def uncontended_table(records, backend):
    lines = []
    for threads in THREADS:
        cell = records[backend]["uncontended"][threads]
        ours = cell["dlock"]
        lines.append("\n**%d thread%s** (each on a lock of its own)\n" % (
            threads, "" if threads == 1 else "s"))
        lines.append("| | pairs/s | acquire p50 / p99 / p99.9 | release p50 / p99 / p99.9 "
                     "| this ÷ ceiling | dlock ÷ this (spread) |")
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for who in dlocks(backend) + CEILINGS[backend] + PEERS[backend]:
            if who not in cell:
                continue  # a variant these records predate (dlock-tls)
            recs = cell[who]

            def pct(field):
                if who.startswith("ceiling"):
                    return "—"
                return " / ".join(fmt_us(median_of(recs, field, p)) for p in ["p50", "p99", "p999"])

            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                "**dlock**" if who == "dlock" else who, fmt_rate(median_of(recs, "pairs_per_sec")),
                pct("acquire_us"), pct("release_us"),
                "" if who.startswith("ceiling") else fmt_ratio(ratio(recs, cell["ceiling"])),
                "" if who == "dlock" else fmt_ratio(ratio(ours, recs))))
    return lines


def tls_table(records):
    """rediss:// beside redis://, measured in the same rounds: the cost of
    TLS per acquire + release pair."""
    lines = ["\n| threads | redis:// pairs/s | rediss:// pairs/s | rediss ÷ redis, pairs/s "
             "(spread) | time per pair, redis:// → rediss:// | acquire p50, redis:// → "
             "rediss:// |", "| --- | --- | --- | --- | --- | --- |"]
    for threads in THREADS:
        cell = records["redis"]["uncontended"][threads]
        plain, tls = cell["dlock"], cell["dlock-tls"]
        # What one thread waits for a pair: threads ÷ the pairs all make.
        per_pair = [threads * 1e6 / median_of(recs, "pairs_per_sec") for recs in (plain, tls)]
        p50 = [median_of(recs, "acquire_us", "p50") for recs in (plain, tls)]
        delta = per_pair[1] - per_pair[0]
        lines.append("| %d | %s | %s | %s | %s → %s (%s%s) | %s → %s |" % (
            threads, fmt_rate(median_of(plain, "pairs_per_sec")),
            fmt_rate(median_of(tls, "pairs_per_sec")), fmt_ratio(ratio(tls, plain)),
            fmt_us(per_pair[0]), fmt_us(per_pair[1]), "+" if delta >= 0 else "−",
            fmt_us(abs(delta)), fmt_us(p50[0]), fmt_us(p50[1])))
    return lines


def cluster_best_peer_ratio(records, masters):
    """dlock against the best cluster peer of each round, on `masters`."""
    cell = records["redis_cluster"][masters]
    per_round = [ours["pairs_per_sec"] / max(cell[p][i]["pairs_per_sec"] for p in CLUSTER_PEERS)
                 for i, ours in enumerate(cell["dlock"])]
    best_name = max(CLUSTER_PEERS, key=lambda p: median_of(cell[p], "pairs_per_sec"))
    return (statistics.median(per_round), min(per_round), max(per_round)), best_name


def cluster_table(records):
    """Each contender on the clusters of 1 and 3 masters, and its scaling."""
    cells = records["redis_cluster"]
    one, most = CLUSTER_MASTERS[0], CLUSTER_MASTERS[-1]
    lines = ["\n| %d threads | %s | %d ÷ %d masters, pairs/s (spread) | dlock ÷ this, "
             "%d masters (spread) |" % (
                 CLUSTER_THREADS, " | ".join("%d master%s, pairs/s" % (m, "" if m == 1 else "s")
                                         for m in CLUSTER_MASTERS), most, one, most),
             "| --- |%s --- | --- |" % (" --- |" * len(CLUSTER_MASTERS))]
    for who in ["dlock"] + CLUSTER_PEERS:
        lines.append("| %s | %s | %s | %s |" % (
            "**dlock**" if who == "dlock" else who,
            " | ".join(fmt_rate(median_of(cells[m][who], "pairs_per_sec"))
                       for m in CLUSTER_MASTERS),
            fmt_ratio(ratio(cells[most][who], cells[one][who])),
            "" if who == "dlock" else fmt_ratio(ratio(cells[most]["dlock"], cells[most][who]))))
    return lines


def server_cost(records, threads):
    """Per Redis contender: the median server µs per pair over the rounds
    (INFO commandstats), and the per-round ratio dlock ÷ contender."""
    cell = records["redis"]["uncontended"][threads]
    out = {}
    for who in ["dlock"] + PEERS["redis"]:
        us = median_of(cell[who], "server_us_per_pair")
        r = None if who == "dlock" else ratio(cell["dlock"], cell[who], field="server_us_per_pair")
        out[who] = (us, r, sum(rec.get("noscript_fallbacks", 0) for rec in cell[who]))
    return out


def server_cost_table(records):
    lines = ["", "### Server cost per pair (INFO commandstats)", "",
             "What an uncontended acquire + release costs the redis-server, summed over the "
             "commands each contender sends itself (a script's time includes the commands it "
             "runs): µs per pair, the median over the rounds, and dlock's cost over the row's "
             "(below 1: dlock costs the server less). NOSCRIPT counts the calls the server "
             "answered NOSCRIPT in those slices (each costs its client a fallback round trip).",
             "", "| threads | " + " | ".join(["dlock"] + PEERS["redis"]) + " |",
             "| --- |" + " --- |" * (1 + len(PEERS["redis"]))]
    for threads in THREADS:
        cost = server_cost(records, threads)
        cells = []
        for who in ["dlock"] + PEERS["redis"]:
            us, r, noscript = cost[who]
            text = "%.1f µs" % us if us is not None else "n/a"
            if r is not None:
                text += ", dlock ÷ this %.2f" % r[0]
            if noscript:
                text += ", %d NOSCRIPT" % noscript
            cells.append(text)
        lines.append("| %d | %s |" % (threads, " | ".join(cells)))
    return lines


def handoffs_timed(record):
    """How many hand-offs a contention slice timed."""
    return int(round(record["handoffs_per_sec"] * record["seconds"]))


def contention_table(records, backend):
    cell = records[backend]["contention"][CONTENDERS]
    ours = cell["dlock"]
    lines = ["\n| %d clients on one lock | hand-offs/s | dlock ÷ this, hand-offs/s | "
             "hand-off p50 / p99 / p99.9 | dlock ÷ this, hand-off p50 (below 1: dlock's "
             "is shorter) | hand-offs timed per slice | Jain's index | shares min..max | "
             "longest wait |" % CONTENDERS,
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for who in ["dlock"] + PEERS[backend]:
        recs = cell[who]
        shares = [s for r in recs for s in r["shares"]]
        timed = [handoffs_timed(r) for r in recs]
        # A p99.9 needs 1000 samples: only the slices that timed as many count.
        enough = [r for r, n in zip(recs, timed) if n >= 1000]
        p999 = (fmt_us(median_of(enough, "handoff_us", "p999")) if enough
                else "n/a (%s samples)" % format(int(median(timed)), ","))
        lines.append("| %s | %s | %s | %s | %s | %s | %.3f | %.3f..%.3f | %s ms |" % (
            "**dlock**" if who == "dlock" else who, fmt_rate(median_of(recs, "handoffs_per_sec")),
            "" if who == "dlock" else fmt_ratio(ratio(ours, recs, "handoffs_per_sec")),
            " / ".join([fmt_us(median_of(recs, "handoff_us", p)) for p in ["p50", "p99"]] + [p999]),
            "" if who == "dlock" else fmt_ratio(
                ratio(ours, recs, get=lambda r: r["handoff_us"]["p50"])),
            " / ".join(format(n, ",") for n in timed),
            median_of(recs, "jain"), min(shares), max(shares),
            format(round(median_of(recs, "longest_wait_ms"), 1), ",")))
    return lines


def once_table(once):
    lines = ["\n| backend | watchdog: locks, lease | renewal calls/s | renewals/s | client CPU "
             "| memory: locks held | client bytes/held lock | server bytes/held lock "
             "| names taken, client bytes kept after |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes = []
    for backend, recs in once.items():
        w, m = recs["watchdog"], recs["memory"]
        server = m.get("server_bytes_per_held_lock")
        # The interface names the batch rate renew_batches_per_sec; the CLI
        # may call it renew_calls_per_sec.
        batches = w.get("renew_batches_per_sec", w.get("renew_calls_per_sec"))
        kept = m.get("client_bytes_retained_after_names")
        lines.append("| %s | %s, %s ms | %s | %s | %s | %s | %s | %s | %s |" % (
            TITLES[backend], w.get("locks"), w.get("lease_ms"),
            "%.2f" % batches if batches is not None else "n/a",
            fmt_rate(w.get("renewals_per_sec")),
            "%.2f%% of a core" % (100 * w["client_cpu_fraction"])
            if w.get("client_cpu_fraction") is not None else "n/a",
            m.get("locks", "n/a"), fmt_rate(m.get("client_bytes_per_held_lock")),
            fmt_rate(server) if server is not None else "not measured",
            "%s, %s" % (m.get("names"), fmt_rate(kept) if kept is not None else "n/a")))
        if m.get("server_note"):
            notes.append("- %s server bytes: %s" % (TITLES[backend], m["server_note"]))
    return lines + ([""] + notes if notes else [])


def summary(records, once):
    """The numbers that matter, one column per backend: what a reader takes
    in within a minute, before the method and the detail."""
    backends = measured(records)

    def dlock(backend, scenario, key):
        return records[backend][scenario][key]["dlock"]

    def row(label, value):
        return "| %s | %s |" % (label, " | ".join(value(b) for b in backends))

    def best_peer(backend):
        r, name = best_peer_ratio(records, backend, 16)
        return "%.2f× %s" % (r[0], name)

    def rate(backend, threads):
        return median_of(dlock(backend, "uncontended", threads), "pairs_per_sec")

    def handoffs(backend):
        return median_of(dlock(backend, "contention", CONTENDERS), "handoffs_per_sec")

    lines = ["| dlock on | %s |" % " | ".join(TITLES[b] for b in backends),
             "| --- |%s" % (" --- |" * len(backends))]
    lines.append(row("acquire + release, 1 thread (pairs/s)",
                     lambda b: fmt_rate(rate(b, 1))))
    lines.append(row("acquire + release, 16 threads, each on its own lock (pairs/s)",
                     lambda b: fmt_rate(rate(b, 16))))
    lines.append(row("acquire latency p50 / p99, 1 thread", lambda b: " / ".join(
        fmt_us(median_of(dlock(b, "uncontended", 1), "acquire_us", p)) for p in ["p50", "p99"])))
    lines.append(row("hand-offs/s, %d clients on one lock" % CONTENDERS,
                     lambda b: fmt_rate(handoffs(b))))
    lines.append(row("hand-off p50", lambda b: fmt_us(
        median_of(dlock(b, "contention", CONTENDERS), "handoff_us", "p50"))))
    lines.append(row("fairness under contention, Jain's index (1: equal shares)",
                     lambda b: "%.3f" % median_of(dlock(b, "contention", CONTENDERS), "jain")))
    lines.append(row("16 threads: dlock ÷ the best peer library", best_peer))
    lines.append(row("16 threads: fraction of the backend's own ceiling", lambda b: "%.2f" % ratio(
        dlock(b, "uncontended", 16), records[b]["uncontended"][16]["ceiling"])[0]))
    lines.append(row("watchdog: client CPU for %s held locks" % once[backends[0]]["watchdog"].get(
        "locks"), lambda b: "%.2f%% of a core" % (100 * once[b]["watchdog"]["client_cpu_fraction"])))
    lines.append(row("client memory per held lock (bytes)", lambda b: fmt_rate(
        once[b]["memory"]["client_bytes_per_held_lock"])))
    fastest = max(backends, key=lambda b: rate(b, 16))
    handing = max(backends, key=handoffs)
    return [
        "On the machine below, %s is the fastest backend both uncontended (%s pairs/s on 16 "
        "threads) and when clients queue for one lock (%s hand-offs/s)." % (
            TITLES[fastest], fmt_rate(rate(fastest, 16)), fmt_rate(handoffs(fastest)))
        if fastest == handing else
        "On the machine below, %s is the fastest backend uncontended (%s pairs/s on 16 "
        "threads), %s when clients queue for one lock (%s hand-offs/s)." % (
            TITLES[fastest], fmt_rate(rate(fastest, 16)), TITLES[handing],
            fmt_rate(handoffs(handing))),
        "Every figure is a median over the rounds of this run; the sections below have "
        "the spreads, the peers and the ceilings. What each backend promises under "
        "faults is in [reliability.md](reliability.md); which one to choose, in "
        "[choosing.md](choosing.md).",
        ""] + lines


def targets(records):
    rows = []
    cell = records["redis"]["uncontended"]
    best, best_name = best_peer_ratio(records, "redis", 64)
    pipelined = ratio(cell[64]["dlock"], cell[64]["ceiling-pipelined"])
    rows.append(("Redis, 64 threads: at least 2× the best peer measured in the same run "
                 "(best: %s)" % best_name, "%.2f× (%.2f..%.2f)" % best, verdict(best[0], 2.0)))
    rows.append(("Redis, 64 threads: fraction of the pipelined ceiling (-P 16)",
                 fmt_ratio(pipelined), "(no target)"))
    for threads in [64]:
        cost = server_cost(records, threads)
        cheapest = min(PEERS["redis"], key=lambda p: cost[p][0] or float("inf"))
        ours, theirs = cost["dlock"][0], cost[cheapest][0]
        what = ("Redis, %d threads: server µs per pair (INFO commandstats) at most the "
                "cheapest peer's (%s); NOSCRIPT fallbacks: %d" % (
                    threads, cheapest, cost["dlock"][2]))
        if ours is None or theirs is None:  # a report measured before the field
            rows.append((what, "not measured in this run", "NOT MEASURED"))
        else:
            rows.append((what, "%.1f µs vs %.1f µs: %.2f×" % (ours, theirs, ours / theirs),
                         "MET" if ours <= theirs else "MISSED"))
    for threads, target in [(1, 0.85), (16, 0.9)]:
        r = ratio(cell[threads]["dlock"], cell[threads]["ceiling"])
        rows.append(("Redis, %d thread%s: at least %.2f of the ceiling" % (
            threads, "" if threads == 1 else "s", target), fmt_ratio(r), verdict(r[0], target)))
    # Issue 25's goals for etcd (not in records measured before it was).
    for threads in [1, 16] if "etcd" in records else []:
        best, best_name = best_peer_ratio(records, "etcd", threads)
        rows.append(("etcd, %d thread%s: at least 2× the best peer measured in the same run "
                     "(best: %s)" % (threads, "" if threads == 1 else "s", best_name),
                     "%.2f× (%.2f..%.2f)" % best, verdict(best[0], 2.0)))
        r = ratio(records["etcd"]["uncontended"][threads]["dlock"],
                  records["etcd"]["uncontended"][threads]["ceiling"])
        rows.append(("etcd, %d thread%s: at least 0.80 of the ceiling" % (
            threads, "" if threads == 1 else "s"), fmt_ratio(r), verdict(r[0], 0.8)))
    for (backend, threads, against), (recorded, source) in RECORDED.items():
        c = records[backend]["uncontended"][threads]
        r = ratio(c["dlock"], c[against])
        what = "of the ceiling" if against == "ceiling" else "× %s" % against
        rows.append(("%s, %d thread%s: keep or beat %.2f %s (recorded: %s)" % (
            TITLES[backend], threads, "" if threads == 1 else "s", recorded, what, source),
            fmt_ratio(r), verdict(r[0], recorded)))
    if "redis_cluster" in records:  # not in records measured before it was
        most = CLUSTER_MASTERS[-1]
        best, best_name = cluster_best_peer_ratio(records, most)
        rows.append(("Redis Cluster of %d masters, %d threads: at least 2× the best cluster "
                     "peer (best: %s)" % (most, CLUSTER_THREADS, best_name),
                     "%.2f× (%.2f..%.2f)" % best, verdict(best[0], 2.0)))
        cells = records["redis_cluster"]
        rows.append(("Redis Cluster, dlock, %d threads: %d masters ÷ %d master (scaling with "
                     "masters)" % (CLUSTER_THREADS, most, CLUSTER_MASTERS[0]),
                     fmt_ratio(ratio(cells[most]["dlock"], cells[CLUSTER_MASTERS[0]]["dlock"])),
                     "(no target: the masters and the client share this machine's cores)"))
    lines = ["| target | this run: median (spread) | verdict |", "| --- | --- | --- |"]
    lines += ["| %s | %s | %s |" % row for row in rows]
    return lines


def versions(tools, dlock_version):
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"

    def deb(package):
        return out(["dpkg-query", "-W", "-f=${Version}", package]) or "not installed"

    def npm(package):
        try:
            with open(os.path.join(tools.node_modules, "node_modules", package, "package.json")) as f:
                return json.load(f)["version"]
        except (OSError, ValueError, KeyError):
            return "not installed"

    commit = out(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"])
    if out(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"]):
        commit += " (with uncommitted changes)"
    redis = re.search(r"v=(\S+)", out(["redis-server", "--version"]))
    # The server's binaries, not psql's: PostgresServer runs Debian's.
    pg = ""
    for major in sorted(os.listdir("/usr/lib/postgresql"), reverse=True) \
            if os.path.isdir("/usr/lib/postgresql") else []:
        pg = out([os.path.join("/usr/lib/postgresql", major, "bin", "postgres"), "--version"])
        if pg:
            break
    return [
        ("dlock", "%s, commit %s" % (dlock_version or "unknown", commit)),
        ("redis-server", redis.group(1) if redis else "unknown"),
        ("ZooKeeper", "Debian zookeeper %s" % deb("zookeeper")),
        ("PostgreSQL", "%s (Debian postgresql %s)" % (pg.split(") ", 1)[-1] if pg else "unknown",
                                                      deb("postgresql"))),
        ("node", out(["node", "--version"])),
        ("npm packages", "redis-semaphore %s, redlock %s, ioredis %s" % (
            npm("redis-semaphore"), npm("redlock"), npm("ioredis"))),
        ("python", platform.python_version() + " (/usr/bin/python3)"),
        ("python packages (Debian)", ", ".join("%s %s" % (p, deb(p)) for p in [
            "python3-redis", "python3-kazoo", "python3-tooz", "python3-psycopg2",
            "python3-matplotlib"])),
    ]


def machine():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return model, os.cpu_count(), platform.release()


def write_report(path, charts_rel, records, once, meta, args, prims=None):
    L = []
    L.append("# Benchmarks: dlock against its ceilings and its peers")
    L.append("")
    L.append("<!-- Generated by scripts/bench-report.sh; do not edit by hand: "
             "run the command again. -->")
    L.append("")
    L.append("## Summary")
    L.append("")
    L += summary(records, once)
    L.append("")
    L.append("## How it was measured")
    L.append("")
    L.append("**Generated by `scripts/bench-report.sh` on %s; do not edit by hand, "
             "run it again.** It starts throwaway servers for every backend (a "
             "redis-server, a ZooKeeper, a PostgreSQL, an etcd and two Redis Clusters on "
             "loopback), builds dlock into "
             "`build/report`, and runs dlock (`dlock bench`), each backend's ceiling and "
             "the peers in the same run, in short slices whose order is shuffled afresh for "
             "every round (seeded; the seed is on the run line), so that load that comes and goes on a shared machine hits all of "
             "them alike. `scripts/bench-report.sh --quick --out DIR` is a half-minute "
             "smoke run into DIR (the `bench_report_quick` test)." % meta["date"])
    L.append("")
    L.append("| | |")
    L.append("| --- | --- |")
    model, cores, kernel = meta["machine"]
    L.append("| machine | %s, %d cores, Linux %s; load average %s at the start, %s at the end |" % (
        model, cores, kernel, meta["load_start"], meta["load_end"]))
    for name, version in meta["versions"]:
        L.append("| %s | %s |" % (name, version))
    L.append("| date | %s |" % meta["date"])
    L.append("| run | %d round%s of %g s slices (warm-up %g s each), %s, order seed %d "
             "(`--seed`); took %d s |" % (
                 args.rounds, "" if args.rounds == 1 else "s", args.slice, args.warmup,
                 "quick mode" if args.quick else "full mode", meta["seed"], meta["took"]))
    L.append("")
    L.append("How to read it: rates and latencies are medians over the rounds; `dlock ÷ this` "
             "is the median of the per-round ratios of dlock's rate to the row's, with their "
             "range. A pair is one acquire and one release (10 s lease), each thread on a lock "
             "name of its own; dlock's acquires, uncontended and in contention, ask for an "
             "explicit 10 s lease (no watchdog). Ceilings: Redis, `redis-benchmark` running `EVALSHA` of a "
             "script that does nothing, with as many clients as threads, halved (a pair is "
             "two round trips), and the same pipelined 16 deep (`-P 16`); ZooKeeper, the C "
             "client creating and deleting an ephemeral node on one session "
             "(`dlock_zookeeper_bench --ceiling`); PostgreSQL, libpq running a prepared "
             "one-row upsert on a connection per thread, at most 4 "
             "connections (the pool dlock uses: more backends than that are slower on a "
             "small machine, so 16 or 64 of them would flatter dlock), halved "
             "(`dlock_postgres_bench --ceiling`); etcd, dlock's own etcd client putting the "
             "thread's key on a lease if absent and deleting it guarded by its create "
             "revision, the two calls of a pair without the lock logic "
             "(`dlock_etcd_bench --ceiling`). Peers (`tests/benchmark/peers/`) are used "
             "as their documentation shows, with their defaults unless said here: node's "
             "redis-semaphore (a Mutex per lock on one ioredis connection; `lockTimeout` "
             "10 s, which it refreshes on its own every 8 s while held, so a hold does not "
             "expire; `acquireTimeout` 600 s in contention, so that waiting for seven others "
             "does not fail, 10 s otherwise; polls a held lock every 10 ms) and redlock (a "
             "Redlock over one ioredis client: the single-master comparison; a 10 s lock, "
             "not extended; `retryCount: -1` in contention, so that an acquire waits as long "
             "as it takes instead of failing after 10 tries; polls every 200 ms ± 100 ms), "
             "N async loops in one node process, every ioredis client with "
             "`maxRetriesPerRequest: 1`; redis-py's `Lock` (`timeout=10`: a 10 s expiry, "
             "not extended; polls every 0.1 s) over a connection pool, kazoo's `Lock` on one "
             "KazooClient and a tooz coordinator (ZooKeeper: kazoo underneath; PostgreSQL: "
             "`pg_advisory_lock` on a connection of its own), which have no lease: a lock "
             "lives as long as the client's session or connection, and waiters wait on a "
             "watch (kazoo, tooz-zookeeper) or block in the server (tooz-postgresql); N "
             "threads in one Python process; on etcd, python3-etcd3's `Lock` (ttl 10 s; it "
             "waits in rounds of `acquire(timeout=1)`, since its unbounded wait can miss a "
             "release and sleep forever) on one client, tooz's etcd3gw driver (etcd's gRPC gateway; lock_timeout 10 s) and "
             "the etcd3 npm package's `Lock` (ttl 10 s; it does not wait: contention "
             "retries it every 10 ms). The polling intervals explain much of the "
             "hand-off table. "
             "Contention: %d clients (a client object, connection and session each) take "
             "one lock in turn, re-acquiring as soon as they released; the Python peers' "
             "clients are threads of one interpreter (they share its GIL), not processes, "
             "and the node peers' clients async loops of one process. A hand-off is the "
             "lock passing to another client, timed from the holder's release call to the "
             "next holder's acquire returning (its p99.9 counts the slices that timed at "
             "least 1000 hand-offs; n/a otherwise, with the median number per slice; "
             "`dlock ÷ this` of the hand-off p50 is dlock's p50 over the row's); an "
             "acquisition counts when it was obtained in the measured window (for dlock and "
             "the peers alike); shares are each client's fraction of the "
             "acquisitions, and Jain's index is 1 when they are equal. dlock's PostgreSQL "
             "URI is lease mode with the default pool (4 connections)." % CONTENDERS)
    for backend in PEERS:
        L += ["", "## %s" % TITLES[backend]]
        if backend not in records:
            L += ["", "Not in these records (measured before %s was): "
                  "`scripts/bench-report.sh` measures it." % TITLES[backend]]
            continue
        for heading, table, chart_names in [
                ("Uncontended acquire + release", uncontended_table,
                 [("throughput by concurrency", "throughput"),
                  ("acquire latency percentiles", "latency")]),
                ("Hand-off and fairness", contention_table,
                 [("hand-off latency", "handoff"), ("fairness", "fairness")])]:
            L += ["", "### " + heading]
            L += table(records, backend)
            L.append("")
            L += ["![%s](%s/%s_%s.svg)" % (alt, charts_rel, name, backend) for alt, name in chart_names]
            if backend == "redis" and table is uncontended_table:
                L += server_cost_table(records)
    L.append("")
    L.append("## Targets")
    L.append("")
    L += targets(records)
    L.append("")
    has_tls = all("dlock-tls" in records["redis"]["uncontended"][t] for t in THREADS)
    L.append("## TLS: rediss:// beside redis://")
    L.append("")
    L.append("dlock on the same machine against a second redis-server that takes only TLS "
             "(`--tls-port`, `port 0`, `tls-auth-clients yes`: the URI shows a client "
             "certificate), in the same rounds as the Redis table above (its `dlock-tls` "
             "row). TLS 1.3, the server's default ciphers; one connection per client, "
             "set up once, so what is measured is the cost of each pair's records, not "
             "of handshakes.")
    if has_tls:
        L += tls_table(records)
    else:
        L += ["", "Not in these records (measured before `dlock-tls` was): "
              "`scripts/bench-report.sh` measures it."]
    L.append("")
    L.append("## Redis Cluster: redis-cluster:// on 1 and 3 masters")
    L.append("")
    L.append("dlock (`redis-cluster://`, the seeds of every master) and the peers that "
             "speak to a cluster, on two Redis Clusters of this machine without replicas, "
             "of 1 and 3 masters (the slots shared equally), in the same rounds as the "
             "tables above: %d threads, each on a lock of its own, uncontended. Peers: "
             "redis-py's `Lock` on its cluster client (`RedisCluster`, a connection pool "
             "per node, shared by the threads) and node-redlock over ioredis's `Cluster` "
             "(one client, %d async loops), each as in the Redis section." % (
                 CLUSTER_THREADS, CLUSTER_THREADS))
    if "redis_cluster" in records:
        L += cluster_table(records)
    else:
        L += ["", "Not in these records (measured before the cluster was): "
              "`scripts/bench-report.sh` measures it."]
    L += primitives.section(prims)
    L.append("")
    L.append("## Watchdog and memory (dlock, once per backend)")
    L += once_table(once)
    L.append("")
    L.append("Every record this run measured: [%s/records.json](%s/records.json)." % (
        charts_rel, charts_rel))
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))
