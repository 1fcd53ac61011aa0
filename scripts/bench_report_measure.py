"""The measuring half of the comparative report (scripts/bench_report.py):
who is measured, the programs and servers it needs, the peers' worker
processes and the slices, in rounds whose order is shuffled (seeded).

Every failure is a Failure that says what is missing or what failed; no
contender is ever skipped.
"""
import json
import os
import queue
import random
import re
import shlex
import shutil
import subprocess
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
    "etcd": ["python-etcd3", "tooz-etcd3gw", "node-etcd3"],
}
CEILINGS = {
    "redis": ["ceiling", "ceiling-pipelined"],
    "zookeeper": ["ceiling"],
    "postgres": ["ceiling"],
    "etcd": ["ceiling"],
}
# dlock itself on another URI of the same backend, measured beside it in the
# same rounds: "dlock-tls" is rediss:// to a redis-server that takes only TLS
# (the TLS cost per pair).
DLOCK_VARIANTS = {"redis": ["dlock-tls"]}
# The server each variant runs against (dlock_bench_servers' keys).
VARIANT_SERVERS = {"dlock-tls": "redis_tls"}
# Redis Cluster (redis-cluster://): 64 threads on clusters of 1 and 3
# masters without replicas (dlock_bench_servers), beside the peers that
# speak to a cluster: how dlock scales with masters, and against them.
CLUSTER_MASTERS = [1, 3]
CLUSTER_THREADS = 64
CLUSTER_PEERS = ["redis-py-cluster", "ioredis-cluster-redlock"]
NODE_PEERS = {"redis-semaphore", "node-redlock", "ioredis-cluster-redlock", "node-etcd3"}
# The commands each Redis contender sends itself in an uncontended pair (an
# acquire and a release): INFO commandstats counts the commands scripts run
# too, and a script's time includes theirs, so only these are summed.
# redis-semaphore and redis-py acquire with SET NX PX and release with a
# script; node-redlock runs a script for each; dlock a function (FCALL) or,
# where functions are not allowed, a script.
TOP_LEVEL = {
    "dlock": ["fcall", "evalsha", "eval"],
    "redis-semaphore": ["set", "evalsha", "eval"],
    "redis-py": ["set", "evalsha", "eval"],
    "node-redlock": ["evalsha", "eval"],
}


def dlocks(backend):
    """dlock and its variants on `backend`."""
    return ["dlock"] + DLOCK_VARIANTS.get(backend, [])


# dlock's PostgreSQL pool (the URI's default pool_size): the PostgreSQL
# ceiling runs at most this many connections.
PG_POOL = 4


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
        self.etcd_bench = os.path.join(build, "tests", "benchmark", "dlock_etcd_bench")
        self.node_modules = os.path.join(build, "node_peer")

    def check(self):
        missing = []
        for path, target in [(self.dlock, "dlock_cli"), (self.servers, "dlock_bench_servers"),
                             (self.zk_bench, "dlock_zookeeper_bench"),
                             (self.pg_bench, "dlock_postgres_bench"),
                             (self.etcd_bench, "dlock_etcd_bench")]:
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
        for package in ["redlock", "redis-semaphore", "ioredis", "etcd3"]:
            if not os.path.isdir(os.path.join(self.node_modules, "node_modules", package)):
                missing.append("the npm package %s in %s (scripts/install-deps.sh %s)" % (
                    package, self.node_modules, self.build))
        packages = {"redis": "python3-redis", "kazoo": "python3-kazoo", "tooz": "python3-tooz",
                    "psycopg2": "python3-psycopg2", "matplotlib": "python3-matplotlib",
                    "etcd3": "python3-etcd3", "etcd3gw": "python3-etcd3gw"}
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
        # Servers in sessions of their own, as daemons run: in ours they
        # would share one CPU share with every client thread measured.
        env = dict(os.environ, DLOCK_SERVERS_OWN_SESSION="1")
        self.process = subprocess.Popen([tools.servers], stdin=subprocess.PIPE, env=env,
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

    def redis_cli(self, *args):
        return run(["redis-cli", "-p", self.port("redis")] + list(args), "redis-cli", 30)

    def reset_server_stats(self):
        self.redis_cli("CONFIG", "RESETSTAT")

    def server_cost(self, who):
        """What the slice since reset_server_stats() cost the server, from
        INFO commandstats: µs per acquire+release pair (two top-level calls
        of TOP_LEVEL[who]) and the scripts the server no longer knew
        (NOSCRIPT, or a function not found: each cost a fallback)."""
        info = self.redis_cli("INFO", "commandstats") + self.redis_cli("INFO", "errorstats")
        usec = calls = 0
        for command in TOP_LEVEL[who]:
            m = re.search(r"^cmdstat_%s:calls=(\d+),usec=(\d+)," % command, info, re.M)
            if m:
                calls += int(m.group(1))
                usec += int(m.group(2))
        noscript = re.search(r"^errorstat_NOSCRIPT:count=(\d+)", info, re.M)
        return {"server_us_per_pair": 2.0 * usec / calls if calls else None,
                "server_calls": calls,
                "noscript_fallbacks": int(noscript.group(1)) if noscript else 0}

    def port(self, backend):
        return self.servers[backend]["host_port"].rsplit(":", 1)[1]

    def timeout(self):
        return 120 + 10 * (self.slice_s + self.warmup_s)

    def seconds(self, scenario):
        """A slice's length. Contention runs at least a second: redlock
        polls a held lock every 200 ms ± 100 ms, and a shorter slice can end
        before its first hand-off."""
        return max(self.slice_s, 1.0) if scenario == "contention" else self.slice_s

    def dlock(self, backend, scenario, concurrency):
        return self.dlock_on(self.servers[backend]["uri"], scenario, concurrency)

    def dlock_on(self, uri, scenario, concurrency):
        cmd = [self.tools.dlock, "bench", "--backend", uri,
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
        elif backend == "etcd":
            cmd = [self.tools.etcd_bench, "--ceiling", self.servers["etcd"]["host_port"]]
            what = "the etcd ceiling"
        else:
            # One connection per thread, at most dlock's pool (4, the URI's
            # default): more backends than that are slower on a small
            # machine, and would make dlock ÷ ceiling look better than it is.
            concurrency = min(concurrency, PG_POOL)
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


    def cluster(self, who, masters):
        """An uncontended slice at CLUSTER_THREADS on the cluster of
        `masters` masters."""
        server = self.servers["redis_cluster%d" % masters]
        if who == "dlock":
            return self.dlock_on(server["uri"], "uncontended", CLUSTER_THREADS)
        return self.workers[who].slice(
            ["--library", who, "--target", server["seeds"], "--scenario", "uncontended",
             "--concurrency", str(CLUSTER_THREADS), "--seconds", "%g" % self.slice_s,
             "--warmup", "%g" % self.warmup_s], self.timeout())


def start_workers(tools, libraries=None):
    """A worker per peer library (default: every one the report runs),
    started before the servers so that their start-ups overlap."""
    workers = {}
    if libraries is None:
        libraries = [p for peers in PEERS.values() for p in peers] + CLUSTER_PEERS
    for library in libraries:
        if library in NODE_PEERS:
            cmd = ["node", os.path.join(PEERS_DIR, "node_peer", "node_peers.js"),
                   tools.node_modules]
        else:
            cmd = ["/usr/bin/python3", os.path.join(PEERS_DIR, "python_peers.py")]
        workers[library] = Worker(cmd, library)
    return workers


def measure(measurer, rounds, quick, log, seed):
    """records[backend][scenario][concurrency][contender] = [record per round].

    Each round runs each set of contenders in an order of its own, shuffled
    by a generator seeded with `seed` (the report records it, so a run's
    orders can be replayed): no contender always follows the same one."""
    records = {b: {"uncontended": {}, "contention": {}} for b in PEERS}
    rng = random.Random(seed)

    def shuffled(items):
        items = list(items)
        rng.shuffle(items)
        return items

    for r in range(rounds):
        for backend in PEERS:
            for threads in THREADS:
                contenders = dlocks(backend) + CEILINGS[backend] + PEERS[backend]
                for who in shuffled(contenders):
                    start = time.monotonic()
                    costed = backend == "redis" and who in TOP_LEVEL
                    if costed:
                        measurer.reset_server_stats()
                    if who == "dlock":
                        rec = measurer.dlock(backend, "uncontended", threads)
                    elif who in VARIANT_SERVERS:
                        rec = measurer.dlock(VARIANT_SERVERS[who], "uncontended", threads)
                    elif who.startswith("ceiling"):
                        rec = measurer.ceiling(backend, who, threads)
                    else:
                        rec = measurer.peer(backend, who, "uncontended", threads)
                    if not rec.get("pairs_per_sec"):
                        raise Failure("%s on %s, %d threads, measured no rate: %s" % (
                            who, backend, threads, json.dumps(rec)))
                    if costed:
                        rec.update(measurer.server_cost(who))
                        if not rec["server_us_per_pair"]:
                            raise Failure("%s on redis: INFO commandstats counted none of %s" % (
                                who, ", ".join(TOP_LEVEL[who])))
                    records[backend]["uncontended"].setdefault(threads, {}).setdefault(
                        who, []).append(rec)
                    log("round %d/%d %-9s %2d threads %-18s %10.0f pairs/s (%.1f s)" % (
                        r + 1, rounds, backend, threads, who, rec["pairs_per_sec"],
                        time.monotonic() - start))
            for who in shuffled(["dlock"] + PEERS[backend]):
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
        measure_cluster(measurer, records, r, rounds, shuffled, log)
    return records


def measure_cluster(measurer, records, r, rounds, shuffled, log):
    """records["redis_cluster"][masters][contender] = [record per round]."""
    cells = records.setdefault("redis_cluster", {})
    for masters in shuffled(CLUSTER_MASTERS):
        for who in shuffled(["dlock"] + CLUSTER_PEERS):
            rec = measurer.cluster(who, masters)
            if not rec.get("pairs_per_sec"):
                raise Failure("%s on a Redis Cluster of %d masters measured no rate: %s" % (
                    who, masters, json.dumps(rec)))
            cells.setdefault(masters, {}).setdefault(who, []).append(rec)
            log("round %d/%d cluster %d master%s, %d threads %-23s %10.0f pairs/s" % (
                r + 1, rounds, masters, "" if masters == 1 else "s", CLUSTER_THREADS, who,
                rec["pairs_per_sec"]))


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
