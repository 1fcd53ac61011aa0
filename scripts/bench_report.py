#!/usr/bin/python3
"""Writes docs/benchmarks.md: dlock against its ceilings and its peers.

    /usr/bin/python3 scripts/bench_report.py [--quick] [--out DIR] [--build DIR]

Run through scripts/bench-report.sh, which installs the dependencies and
builds what this needs into build/report first. Starts a redis-server, a
ZooKeeper and a PostgreSQL (dlock_bench_servers) and a process per peer
library that runs slice after slice (its --serve mode), then, round after
round, runs one short slice each of dlock (`dlock bench --json`), of each
backend's ceiling and of each peer, in an order that turns with the round,
so that load that comes and goes on a shared machine hits all of them
alike. The watchdog and memory scenarios run once per backend at the end,
while the charts are drawn. Rates
and latencies are medians over the rounds; a ratio is the median of the
per-round ratios, with their spread. Writes DIR/benchmarks.md (DIR: docs/
unless --out), its charts as SVG in DIR/benchmarks/ (matplotlib) and every
record it measured in DIR/benchmarks/records.json.

Nothing is skipped: a missing server, peer, tool or package stops the run
with a message saying what is missing, and the report is not written.
"""
import argparse
import datetime
import io
import json
import os
import platform
import queue
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_DIR = os.path.join(REPO, "tests", "benchmark", "peers")

THREADS = [1, 16, 64]
CONTENDERS = 8  # clients on one lock in the contention scenario

# Who runs against each backend, besides dlock. Ceilings first, then peers.
PEERS = {
    "redis": ["redis-semaphore", "node-redlock", "redis-py"],
    "zookeeper": ["kazoo", "tooz-zookeeper"],
    "postgres": ["tooz-postgresql"],
}
CEILINGS = {
    "redis": ["ceiling", "ceiling-pipelined"],
    "zookeeper": ["ceiling"],
    "postgres": ["ceiling"],
}
NODE_PEERS = {"redis-semaphore", "node-redlock"}

# The ratios docs/performance.md records for ZooKeeper and PostgreSQL (lease
# mode), the lower end of each recorded range: the report checks that this
# run keeps or beats them. (The ZooKeeper peer figures are kazoo's; the
# PostgreSQL ones tooz's.)
RECORDED = {
    ("zookeeper", 1, "ceiling"): 0.88,
    ("zookeeper", 16, "ceiling"): 0.62,
    ("zookeeper", 1, "kazoo"): 1.44,
    ("zookeeper", 16, "kazoo"): 2.4,
    ("postgres", 1, "ceiling"): 0.74,
    ("postgres", 16, "ceiling"): 0.50,
    ("postgres", 1, "tooz-postgresql"): 8.6,
    ("postgres", 16, "tooz-postgresql"): 22.5,
}


class Failure(Exception):
    """What went wrong, said so that the reader knows what to install or fix."""


def run(cmd, what, timeout):
    """Runs `cmd` and returns its stdout; Failure with its stderr otherwise."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise Failure("%s: %s is not installed" % (what, cmd[0]))
    except subprocess.TimeoutExpired:
        raise Failure("%s did not finish within %d s: %s" % (what, timeout, shlex.join(cmd)))
    if done.returncode != 0:
        raise Failure("%s failed (exit %d): %s\n%s%s" % (
            what, done.returncode, shlex.join(cmd), done.stderr[-3000:], done.stdout[-1000:]))
    return done.stdout


def last_json(output, what):
    """The JSON object a tool printed: its whole output, or its last line
    that is one (the peers and ceilings print one line; `dlock bench` one
    object over several lines)."""
    try:
        return json.loads(output)
    except ValueError:
        pass
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    raise Failure("%s printed no JSON record: %s" % (what, output[-2000:]))


def dlock_results(output):
    """The records of `dlock bench --json`; Failure for a scenario that
    failed (it prints an "error" record for it)."""
    out = last_json(output, "dlock bench")
    results = out.get("results", [])
    for r in results:
        if "error" in r:
            raise Failure("dlock bench failed: %s" % json.dumps(r))
    for r in results:
        r["version"] = out.get("version")
    return results


# Prints the modules named in argv that do not import.
IMPORTS = """import importlib, sys
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
    except Exception:
        print(module)
"""


class Tools:
    """The programs the run needs, checked before anything starts."""

    def __init__(self, build, dlock=None):
        self.build = build
        self.dlock = dlock or os.path.join(build, "adapters", "cli", "dlock")
        self.servers = os.path.join(build, "integration", "dlock_bench_servers")
        self.zk_bench = os.path.join(build, "tests", "benchmark", "dlock_zookeeper_bench")
        self.pg_bench = os.path.join(build, "tests", "benchmark", "dlock_postgres_bench")
        self.node_modules = os.path.join(build, "node_peer")

    def check(self):
        missing = []
        for path, target in [(self.dlock, "dlock_cli"), (self.servers, "dlock_bench_servers"),
                             (self.zk_bench, "dlock_zookeeper_bench"),
                             (self.pg_bench, "dlock_postgres_bench")]:
            if not os.access(path, os.X_OK):
                missing.append("%s (cmake --build %s --target %s)" % (path, self.build, target))
        if not missing:
            help_text = subprocess.run([self.dlock, "bench", "--help"], capture_output=True,
                                       text=True).stdout
            if "--scenarios" not in help_text:
                missing.append("the `dlock bench` subcommand (%s has none: it comes with "
                               "the bench-cli branch)" % self.dlock)
        for tool in ["node", "redis-benchmark", "redis-cli"]:
            if not shutil.which(tool):
                missing.append("%s (scripts/install-deps.sh)" % tool)
        for package in ["redlock", "redis-semaphore", "ioredis"]:
            if not os.path.isdir(os.path.join(self.node_modules, "node_modules", package)):
                missing.append("the npm package %s in %s (scripts/install-deps.sh %s)" % (
                    package, self.node_modules, self.build))
        packages = {"redis": "python3-redis", "kazoo": "python3-kazoo", "tooz": "python3-tooz",
                    "psycopg2": "python3-psycopg2", "matplotlib": "python3-matplotlib"}
        # One interpreter tries every import and names those that fail.
        failed = subprocess.run(["/usr/bin/python3", "-c", IMPORTS] + list(packages),
                                capture_output=True, text=True).stdout.split()
        for module in failed:
            missing.append("%s for /usr/bin/python3 (apt-get install %s)" % (
                module, packages[module]))
        if missing:
            raise Failure("cannot run the report; missing:\n  " + "\n  ".join(missing))


def close(process):
    """Closes a child's stdin: the servers and the workers finish when it
    closes, in the background while the report is written."""
    try:
        process.stdin.close()
    except OSError:
        pass


def reap(process):
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Servers:
    """dlock_bench_servers as a child: its servers live while it does."""

    def __init__(self, tools):
        # Its messages go to a file, not a pipe nobody reads during the run.
        self.errors = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen([tools.servers], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.errors, text=True)
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            self.errors.seek(0)
            raise Failure("the servers did not start:\n" + self.errors.read())
        self.info = json.loads(line)



class Worker:
    """A peer's process that runs slice after slice (its --serve mode): one
    start-up and one import of its library instead of one per slice."""

    def __init__(self, cmd, what):
        self.what = what
        self.errors = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(cmd + ["--serve", what], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.errors, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the process ended

    def slice(self, args, timeout):
        """The record of one slice; Failure with the peer's stderr if it
        exits or takes longer than `timeout` seconds."""
        try:
            self.process.stdin.write(json.dumps(args) + "\n")
            self.process.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except BrokenPipeError:
            line = None
        except queue.Empty:
            self.process.kill()
            raise Failure("%s did not finish a slice within %d s: %s" % (
                self.what, timeout, shlex.join(args)))
        if line is None:
            self.process.wait()
            self.errors.seek(0)
            raise Failure("%s failed (exit %s): %s\n%s" % (
                self.what, self.process.returncode, shlex.join(args), self.errors.read()[-3000:]))
        return last_json(line, self.what)



class Measurer:
    """One slice of any contender, as a record in dlock's JSON shape."""

    def __init__(self, tools, servers, slice_s, warmup_s, workers):
        self.tools = tools
        self.servers = servers.info
        self.workers = workers
        self.slice_s = slice_s
        self.warmup_s = warmup_s
        self.redis_requests = {}  # (clients, pipeline) -> requests per slice
        self.sha = run(["redis-cli", "-p", self.port("redis"), "SCRIPT", "LOAD", "return 1"],
                       "loading the no-op script", 30).strip()

    def port(self, backend):
        return self.servers[backend]["host_port"].rsplit(":", 1)[1]

    def timeout(self):
        return 120 + 10 * (self.slice_s + self.warmup_s)

    def seconds(self, scenario):
        """A slice's length. Contention runs at least a second: redlock
        polls a held lock every 200 ms or more, and a shorter slice can end
        before its first hand-off."""
        return max(self.slice_s, 1.0) if scenario == "contention" else self.slice_s

    def dlock(self, backend, scenario, concurrency):
        cmd = [self.tools.dlock, "bench", "--backend", self.servers[backend]["uri"],
               "--scenarios", scenario, "--duration", "%dms" % (self.seconds(scenario) * 1000),
               "--warmup", "%dms" % (self.warmup_s * 1000), "--json"]
        cmd += ["--clients", str(concurrency)] if scenario == "contention" else [
            "--threads", str(concurrency)]
        return self.dlock_record(cmd, scenario)

    def dlock_record(self, cmd, scenario):
        results = dlock_results(run(cmd, "dlock bench", self.timeout()))
        matching = [r for r in results if r.get("scenario") == scenario]
        if not matching:
            raise Failure("dlock bench printed no %s record: %s" % (scenario, json.dumps(results)))
        return matching[0]

    def dlock_once(self, backend, quick):
        """The watchdog and memory scenarios, once per backend."""
        cmd = [self.tools.dlock, "bench", "--backend", self.servers[backend]["uri"],
               "--scenarios", "watchdog,memory", "--duration", "%dms" % (self.slice_s * 1000),
               "--warmup", "%dms" % (self.warmup_s * 1000), "--json",
               "--locks", "100" if quick else "1000", "--names", "300" if quick else "10000"]
        results = dlock_results(run(cmd, "dlock bench", self.timeout() + 300))
        records = {r.get("scenario"): r for r in results}
        for scenario in ["watchdog", "memory"]:
            if scenario not in records:
                raise Failure("dlock bench printed no %s record for %s: %s" % (
                    scenario, backend, json.dumps(results)))
        return records

    def ceiling(self, backend, name, concurrency):
        if backend == "redis":
            return self.redis_ceiling(concurrency, 16 if name == "ceiling-pipelined" else 1)
        if backend == "zookeeper":
            cmd = [self.tools.zk_bench, "--ceiling", self.servers["zookeeper"]["host_port"]]
            what = "the ZooKeeper ceiling"
        else:
            cmd = [self.tools.pg_bench, "--ceiling", self.servers["postgres"]["conninfo"]]
            what = "the PostgreSQL ceiling"
        cmd += [str(concurrency), "%g" % self.slice_s]
        return last_json(run(cmd, what, self.timeout()), what)

    def redis_ceiling(self, clients, pipeline):
        """redis-benchmark of the no-op EVALSHA, halved: a pair is two calls.

        redis-benchmark runs a number of requests, not a time: the count is
        the slice's length at the rate the previous slice measured."""
        key = (clients, pipeline)
        # A first guess at the rate (calls/s) this machine reaches.
        first_guess = 400000 if pipeline > 1 else 50000
        requests = self.redis_requests.get(key, max(1000, int(first_guess * self.slice_s)))
        cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", self.port("redis"), "-c", str(clients),
               "-P", str(pipeline), "-n", str(requests), "-q", "EVALSHA", self.sha, "0"]
        output = run(cmd, "redis-benchmark", self.timeout())
        rates = re.findall(r"([0-9.]+) requests per second", output.replace("\r", "\n"))
        if not rates:
            raise Failure("redis-benchmark printed no rate: " + output[-1000:])
        rate = float(rates[-1])
        self.redis_requests[key] = max(1000, int(rate * self.slice_s))
        return {"ceiling": "redis-benchmark EVALSHA of `return 1`, %d clients%s, halved" % (
                    clients, ", pipelined -P %d" % pipeline if pipeline > 1 else ""),
                "scenario": "uncontended", "concurrency": clients, "requests": requests,
                "calls_per_sec": rate, "pairs_per_sec": rate / 2}

    def peer(self, backend, library, scenario, concurrency):
        target = (self.servers["postgres"]["url"] if backend == "postgres"
                  else self.servers[backend]["host_port"])
        return self.workers[library].slice(
            ["--library", library, "--target", target, "--scenario", scenario,
             "--concurrency", str(concurrency), "--seconds", "%g" % self.seconds(scenario),
             "--warmup", "%g" % self.warmup_s], self.timeout())


def start_workers(tools):
    """A worker per peer library, started before the servers so that their
    start-ups overlap."""
    workers = {}
    for library in [p for peers in PEERS.values() for p in peers]:
        if library in NODE_PEERS:
            cmd = ["node", os.path.join(PEERS_DIR, "node_peer", "node_peers.js"),
                   tools.node_modules]
        else:
            cmd = ["/usr/bin/python3", os.path.join(PEERS_DIR, "python_peers.py")]
        workers[library] = Worker(cmd, library)
    return workers


def rotated(items, by):
    by %= len(items)
    return items[by:] + items[:by]


def measure(measurer, rounds, quick, log):
    """records[backend][scenario][concurrency][contender] = [record per round]."""
    records = {b: {"uncontended": {}, "contention": {}} for b in PEERS}
    slot = 0
    for r in range(rounds):
        for backend in PEERS:
            for threads in THREADS:
                contenders = ["dlock"] + CEILINGS[backend] + PEERS[backend]
                for who in rotated(contenders, r + slot):
                    start = time.monotonic()
                    if who == "dlock":
                        rec = measurer.dlock(backend, "uncontended", threads)
                    elif who.startswith("ceiling"):
                        rec = measurer.ceiling(backend, who, threads)
                    else:
                        rec = measurer.peer(backend, who, "uncontended", threads)
                    if not rec.get("pairs_per_sec"):
                        raise Failure("%s on %s, %d threads, measured no rate: %s" % (
                            who, backend, threads, json.dumps(rec)))
                    records[backend]["uncontended"].setdefault(threads, {}).setdefault(
                        who, []).append(rec)
                    log("round %d/%d %-9s %2d threads %-18s %10.0f pairs/s (%.1f s)" % (
                        r + 1, rounds, backend, threads, who, rec["pairs_per_sec"],
                        time.monotonic() - start))
                slot += 1
            for who in rotated(["dlock"] + PEERS[backend], r):
                if who == "dlock":
                    rec = measurer.dlock(backend, "contention", CONTENDERS)
                else:
                    rec = measurer.peer(backend, who, "contention", CONTENDERS)
                # No hand-off, no hand-off latency: a missing figure (dlock
                # prints 0 for its percentiles then, the peers null).
                if not rec.get("handoffs_per_sec") or not rec.get("shares"):
                    raise Failure("%s on %s measured no hand-off: %s" % (
                        who, backend, json.dumps(rec)))
                records[backend]["contention"].setdefault(CONTENDERS, {}).setdefault(
                    who, []).append(rec)
                log("round %d/%d %-9s contention %-18s %8.0f hand-offs/s" % (
                    r + 1, rounds, backend, who, rec["handoffs_per_sec"]))
    return records


def measure_once(measurer, quick, log, meanwhile):
    """The watchdog and memory scenarios of every backend, while
    `meanwhile()` runs (the charts are drawn). Quick mode runs the three
    backends at once: each has a server of its own, and what they measure
    (renewals, bytes per lock, the client's own CPU time) is not a rate
    that the others' load would lower."""
    with ThreadPoolExecutor(max_workers=len(PEERS) if quick else 1) as pool:
        futures = {b: pool.submit(measurer.dlock_once, b, quick) for b in PEERS}
        result = meanwhile()
        once = {}
        for backend, future in futures.items():
            once[backend] = future.result()
            log("%s: watchdog and memory measured" % backend)
    return once, result


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


def ratio(ours, theirs, field="pairs_per_sec"):
    """Median of the per-round ratios, with min and max."""
    per_round = [a[field] / b[field] for a, b in zip(ours, theirs) if a[field] and b[field]]
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

TITLES = {"redis": "Redis", "zookeeper": "ZooKeeper", "postgres": "PostgreSQL"}


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
        for who in ["dlock"] + CEILINGS[backend] + PEERS[backend]:
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


def contention_table(records, backend):
    cell = records[backend]["contention"][CONTENDERS]
    lines = ["\n| %d clients on one lock | hand-offs/s | hand-off p50 / p99 / p99.9 | "
             "Jain's index | shares min..max | longest wait |" % CONTENDERS,
             "| --- | --- | --- | --- | --- | --- |"]
    for who in ["dlock"] + PEERS[backend]:
        recs = cell[who]
        shares = [s for r in recs for s in r["shares"]]
        lines.append("| %s | %s | %s | %.3f | %.3f..%.3f | %s ms |" % (
            "**dlock**" if who == "dlock" else who, fmt_rate(median_of(recs, "handoffs_per_sec")),
            " / ".join(fmt_us(median_of(recs, "handoff_us", p)) for p in ["p50", "p99", "p999"]),
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


def targets(records):
    rows = []
    cell = records["redis"]["uncontended"]
    best, best_name = best_peer_ratio(records, "redis", 64)
    pipelined = ratio(cell[64]["dlock"], cell[64]["ceiling-pipelined"])
    rows.append(("Redis, 64 threads: at least 2× the best peer measured in the same run "
                 "(best: %s)" % best_name, "%.2f× (%.2f..%.2f)" % best, verdict(best[0], 2.0)))
    rows.append(("Redis, 64 threads: fraction of the pipelined ceiling (-P 16)",
                 fmt_ratio(pipelined), "(no target)"))
    for threads, target in [(1, 0.85), (16, 0.9)]:
        r = ratio(cell[threads]["dlock"], cell[threads]["ceiling"])
        rows.append(("Redis, %d thread%s: at least %.2f of the ceiling" % (
            threads, "" if threads == 1 else "s", target), fmt_ratio(r), verdict(r[0], target)))
    for (backend, threads, against), recorded in RECORDED.items():
        c = records[backend]["uncontended"][threads]
        r = ratio(c["dlock"], c[against])
        what = "of the ceiling" if against == "ceiling" else "× %s" % against
        rows.append(("%s, %d thread%s: keep or beat %.2f %s (docs/performance.md)" % (
            TITLES[backend], threads, "" if threads == 1 else "s", recorded, what),
            fmt_ratio(r), verdict(r[0], recorded)))
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


def write_report(path, charts_rel, records, once, meta, args):
    L = []
    L.append("# Benchmarks: dlock against its ceilings and its peers")
    L.append("")
    L.append("<!-- Generated by scripts/bench-report.sh; do not edit by hand: "
             "run the command again. -->")
    L.append("")
    L.append("**Generated by `scripts/bench-report.sh` on %s; do not edit by hand, "
             "run it again.** It starts throwaway servers for every backend (a "
             "redis-server, a ZooKeeper, a PostgreSQL on loopback), builds dlock into "
             "`build/report`, and runs dlock (`dlock bench`), each backend's ceiling and "
             "the peers in the same run, in short slices whose order turns with every "
             "round, so that load that comes and goes on a shared machine hits all of "
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
    L.append("| run | %d round%s of %g s slices (warm-up %g s each), %s; took %d s |" % (
        args.rounds, "" if args.rounds == 1 else "s", args.slice, args.warmup,
        "quick mode" if args.quick else "full mode", meta["took"]))
    L.append("")
    L.append("How to read it: rates and latencies are medians over the rounds; `dlock ÷ this` "
             "is the median of the per-round ratios of dlock's rate to the row's, with their "
             "range. A pair is one acquire and one release (10 s lease), each thread on a lock "
             "name of its own. Ceilings: Redis, `redis-benchmark` running `EVALSHA` of a "
             "script that does nothing, with as many clients as threads, halved (a pair is "
             "two round trips), and the same pipelined 16 deep (`-P 16`); ZooKeeper, the C "
             "client creating and deleting an ephemeral node on one session "
             "(`dlock_zookeeper_bench --ceiling`); PostgreSQL, libpq running a prepared "
             "one-row upsert on a connection per thread, halved "
             "(`dlock_postgres_bench --ceiling`). Peers (`tests/benchmark/peers/`) are used "
             "as their documentation shows, with their defaults: node's redis-semaphore "
             "(a Mutex per lock on one ioredis connection) and redlock (a Redlock over one "
             "ioredis client: the single-master comparison), N async loops in one node "
             "process; redis-py's `Lock` over a connection pool, kazoo's `Lock` on one "
             "KazooClient and a tooz coordinator, N threads in one Python process. "
             "Contention: %d clients (a client object, connection and session each) take "
             "one lock in turn, re-acquiring as soon as they released; a hand-off is the "
             "lock passing to another client, timed from the holder's release call to the "
             "next holder's acquire returning; shares are each client's fraction of the "
             "acquisitions, and Jain's index is 1 when they are equal. dlock's PostgreSQL "
             "URI is lease mode with the default pool (4 connections)." % CONTENDERS)
    L.append("")
    L.append("## Targets")
    L.append("")
    L += targets(records)
    for backend in PEERS:
        L += ["", "## %s" % TITLES[backend]]
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
    L.append("")
    L.append("## Watchdog and memory (dlock, once per backend)")
    L += once_table(once)
    L.append("")
    L.append("Every record this run measured: [%s/records.json](%s/records.json)." % (
        charts_rel, charts_rel))
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def plotted(value):
    """A figure for matplotlib: a missing one (no hand-off happened in a
    slice, so no percentile) is NaN, which it leaves out."""
    return float("nan") if value is None else value


def charts(records):
    """{file name: SVG text} of every chart; written by the caller once the
    whole run has succeeded."""
    import matplotlib
    matplotlib.use("Agg")
    # The same figures give the same SVG: no date in it, and ids from a fixed
    # salt rather than a random one, so a regenerated chart diffs only where
    # a figure moved.
    matplotlib.rcParams["svg.hashsalt"] = "dlock-bench-report"
    import matplotlib.pyplot as plt

    written = {}

    def save(fig, name):
        svg = io.StringIO()
        fig.tight_layout()
        fig.savefig(svg, format="svg", metadata={"Date": None})
        plt.close(fig)
        written[name] = svg.getvalue()

    for backend in PEERS:
        title = TITLES[backend]
        unc = records[backend]["uncontended"]
        contenders = ["dlock"] + CEILINGS[backend] + PEERS[backend]

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for who in contenders:
            ys = [plotted(median_of(unc[t][who], "pairs_per_sec")) for t in THREADS]
            ax.plot(THREADS, ys, marker="o", label=who,
                    linewidth=2.5 if who == "dlock" else 1.2,
                    linestyle="--" if who.startswith("ceiling") else "-")
        ax.set_xscale("log", base=2)
        ax.set_xticks(THREADS)
        ax.set_xticklabels([str(t) for t in THREADS])
        ax.set_yscale("log")
        ax.set_xlabel("threads (concurrent loops)")
        ax.set_ylabel("acquire + release pairs/s")
        ax.set_title("%s: throughput by concurrency" % title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "throughput_%s.svg" % backend)

        measured = ["dlock"] + PEERS[backend]  # ceilings have no latencies
        fig, axes = plt.subplots(1, len(THREADS), figsize=(11, 4), sharey=True)
        width = 0.8 / len(measured)
        for ax, threads in zip(axes, THREADS):
            for i, who in enumerate(measured):
                ys = [plotted(median_of(unc[threads][who], "acquire_us", p))
                      for p in ["p50", "p99", "p999"]]
                ax.bar([x + i * width for x in range(3)], ys, width, label=who)
            ax.set_xticks([x + width * (len(measured) - 1) / 2 for x in range(3)])
            ax.set_xticklabels(["p50", "p99", "p99.9"])
            ax.set_yscale("log")
            ax.set_title("%d thread%s" % (threads, "" if threads == 1 else "s"))
            ax.grid(True, axis="y", which="both", alpha=0.3)
        axes[0].set_ylabel("acquire latency, µs")
        axes[0].legend(fontsize=8)
        fig.suptitle("%s: acquire latency percentiles" % title)
        save(fig, "latency_%s.svg" % backend)

        con = records[backend]["contention"][CONTENDERS]
        fig, ax = plt.subplots(figsize=(7, 4))
        width = 0.8 / len(measured)
        for i, who in enumerate(measured):
            ys = [plotted(median_of(con[who], "handoff_us", p)) for p in ["p50", "p99", "p999"]]
            ax.bar([x + i * width for x in range(3)], ys, width, label=who)
        ax.set_xticks([x + width * (len(measured) - 1) / 2 for x in range(3)])
        ax.set_xticklabels(["p50", "p99", "p99.9"])
        ax.set_yscale("log")
        ax.set_ylabel("hand-off latency, µs")
        ax.set_title("%s: hand-off latency, %d clients on one lock" % (title, CONTENDERS))
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "handoff_%s.svg" % backend)

        fig, ax = plt.subplots(figsize=(7, 4))
        for i, who in enumerate(measured):
            # Shares of the median round by Jain's index, sorted: the shape of
            # the distribution, not which client got what.
            recs = sorted(con[who], key=lambda r: r["jain"])
            shares = sorted(recs[len(recs) // 2]["shares"], reverse=True)
            ax.bar([x + i * width for x in range(len(shares))], shares, width,
                   label="%s (Jain %.3f)" % (who, median_of(con[who], "jain")))
        ax.axhline(1.0 / CONTENDERS, color="black", linewidth=0.8, linestyle=":")
        ax.set_xticks([x + width * (len(measured) - 1) / 2 for x in range(CONTENDERS)])
        ax.set_xticklabels([str(x + 1) for x in range(CONTENDERS)])
        ax.set_xlabel("clients, most acquisitions first (dotted: an equal share)")
        ax.set_ylabel("share of acquisitions")
        ax.set_title("%s: fairness, %d clients on one lock" % (title, CONTENDERS))
        ax.legend(fontsize=8)
        save(fig, "fairness_%s.svg" % backend)
    return written


def load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one round of short slices (about half a minute), for a smoke test")
    parser.add_argument("--out", default=os.path.join(REPO, "docs"),
                        help="where benchmarks.md and benchmarks/ go (default docs/)")
    parser.add_argument("--build", default=os.path.join(REPO, "build", "report"),
                        help="the build with dlock and the benchmarks (default build/report)")
    parser.add_argument("--dlock", help="the dlock binary (default BUILD/adapters/cli/dlock)")
    parser.add_argument("--rounds", type=int, help="rounds (default 5; --quick: 1)")
    parser.add_argument("--slice", type=float, help="seconds per slice (default 1; --quick: 0.2)")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per slice (default 0.2; "
                        "--quick: 0.05)")
    args = parser.parse_args()
    if args.rounds is None:
        args.rounds = 1 if args.quick else 5
    if args.slice is None:
        args.slice = 0.2 if args.quick else 1.0
    if args.warmup is None:
        args.warmup = 0.05 if args.quick else 0.2

    children = []  # stopped in the background; waited for at the end
    try:
        return report(args, children)
    finally:
        for child in children:
            reap(child)


def log(message):
    print(message, file=sys.stderr, flush=True)


def report(args, children):
    """Measures and writes the report: 0, or 1 when something failed."""
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = load_average()
    tools = Tools(os.path.abspath(args.build), args.dlock and os.path.abspath(args.dlock))
    try:
        tools.check()
        log("starting the peers, redis-server, ZooKeeper and PostgreSQL")
        workers = start_workers(tools)
        children += [w.process for w in workers.values()]
        servers = Servers(tools)
        children.append(servers.process)
        measurer = Measurer(tools, servers, args.slice, args.warmup, workers)
        records = measure(measurer, args.rounds, args.quick, log)
        for worker in workers.values():
            close(worker.process)
        dlock_version = records["redis"]["uncontended"][1]["dlock"][0].get("version")
        once, (svgs, versions_run) = measure_once(
            measurer, args.quick, log,
            lambda: (charts(records), versions(tools, dlock_version)))
    except Failure as e:
        log("bench_report: %s" % e)
        return 1
    finally:
        for child in children:
            close(child)
    meta = {
        "date": date,
        "machine": machine(),
        "load_start": load_start,
        "load_end": load_average(),
        "versions": versions_run,
        "took": time.monotonic() - started,
    }
    out_dir = os.path.abspath(args.out)
    charts_dir = os.path.join(out_dir, "benchmarks")
    os.makedirs(charts_dir, exist_ok=True)
    for name, svg in svgs.items():
        with open(os.path.join(charts_dir, name), "w") as f:
            f.write(svg)
    with open(os.path.join(charts_dir, "records.json"), "w") as f:
        json.dump({"meta": meta, "uncontended_and_contention": records, "once": once}, f,
                  indent=1, default=str)
    path = os.path.join(out_dir, "benchmarks.md")
    write_report(path, "benchmarks", records, once, meta, args)
    log("wrote %s and %d charts in %s (%.0f s)" % (path, len(svgs), charts_dir,
                                                   time.monotonic() - started))
    print("\n".join(targets(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
