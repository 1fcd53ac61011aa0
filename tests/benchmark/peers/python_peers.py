"""The Python peers of the comparative report (scripts/bench_report.py).

    /usr/bin/python3 python_peers.py --library LIB --target TARGET \
        --scenario uncontended|contention|semaphore|shared|exclusive|election \
        --concurrency N --seconds S [--warmup S] [--permits P] [--handovers K]
    /usr/bin/python3 python_peers.py --serve [LIB]

LIB and TARGET:
  redis-py         host:port   redis-py's Lock (python3-redis), one client
                               with a connection pool shared by the threads
  redis-py-cluster host:port,...  redis-py's Lock on its cluster client
                               (RedisCluster: a pool per node, the slot map
                               read from the seeds), shared by the threads
  kazoo            host:port   kazoo's Lock recipe (python3-kazoo), one
                               KazooClient shared by the threads
  tooz-zookeeper   host:port   a tooz coordinator (python3-tooz), zookeeper://
  tooz-postgresql  URL         a tooz coordinator, postgresql:// (psycopg2)
  python-etcd3     host:port   python3-etcd3's Lock (its gRPC client), one
                               client shared by the threads
  tooz-etcd3gw     host:port   a tooz coordinator, etcd3+http:// (etcd's gRPC
                               gateway through python3-etcd3gw)

Runs ONE slice and prints one JSON record, the shape `dlock bench --json`
prints for dlock, with "library" where dlock's has "backend":

  uncontended: N threads, each with a lock name of its own, acquire+release
    pairs; pairs_per_sec and the percentiles of acquire and release (us).
  contention: N clients (a client object each, as N processes would have;
    but they are threads of this one interpreter, sharing its GIL, not
    processes) on one lock name, each re-acquiring as soon as it released; hand-offs
    per second, the hand-off latency (from the holder's release call to the
    next holder's acquire returning), each client's share of the
    acquisitions, Jain's fairness index and the longest wait in acquire.

  semaphore, shared, exclusive (kazoo) and election (kazoo, tooz-zookeeper): the
    primitives, as python_primitives.py says.

With --serve instead, runs one slice per line of standard input, each line
a JSON list of the arguments above, and prints each slice's record as it
is done, until standard input closes: the report starts a process per
library once instead of one per slice. LIB, if given, is imported at once,
before the first slice comes.

Each library is used as its documentation shows, with its defaults (redis-py
polls a held lock every 0.1 s, kazoo and tooz's ZooKeeper driver wait on a
watch, tooz's PostgreSQL driver blocks in pg_advisory_lock, python-etcd3
waits on a watch of the key, tooz's etcd3gw driver polls with a backoff
growing to 1 s). Leases: redis-py's Lock is taken with timeout=10, a 10 s
expiry that nothing extends, as dlock's pairs ask for an explicit 10 s
lease; python-etcd3's with ttl=10 and tooz's etcd3gw driver with
lock_timeout=10, each a lease of its own per acquisition that nothing
extends (tooz's coordinator heartbeat would; the peers do not run it);
python-etcd3's acquire waits in rounds of acquire(timeout=1) instead of
timeout=None, which can sleep forever after a release it did not see;
kazoo and tooz's other drivers have no lease: a lock lives as long as the
client's ZooKeeper session or PostgreSQL connection. Exits non-zero with a message on stderr
when the library is missing or a call fails: the report treats that as a
failure, never as a skipped peer.

Two of Debian 12's etcd libraries need a shim to run at all; nothing else
of them is changed. tooz 3.1.0 passes api_path= to etcd3gw.client(), which
its python3-etcd3gw 2.0.0 no longer takes (a TypeError at start), and
defaults to the gateway path v3alpha, which etcd 3.4 no longer serves:
tooz_etcd3gw() passes api_path on to the client class (which still takes it)
and asks for api_version=v3. python3-etcd3 0.12.0's Lock waits through
tenacity with a callback of an older signature than python3-tenacity 8.2
calls: tenacity_taking_old_waits() adapts it.
"""
import argparse
import hashlib
import json
import sys
import threading
import time
import uuid

import python_primitives

LEASE_SECONDS = 10  # redis-py's; as dlock's pairs: an explicit 10 s lease


def percentiles_us(samples):
    """p50, p99 and p99.9 of durations in seconds, in microseconds."""
    if not samples:
        return {"p50": None, "p99": None, "p999": None}
    ordered = sorted(samples)

    def at(fraction):
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] * 1e6

    return {"p50": at(0.50), "p99": at(0.99), "p999": at(0.999)}


def jain(counts):
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return (total * total) / (len(counts) * squares) if squares else 0.0


# --- the libraries ---------------------------------------------------------
# Each returns (make_lock(client, name), make_client(), close_client(client));
# a lock object has acquire() and release().


def redis_py(target):
    import redis  # python3-redis

    host, port = target.rsplit(":", 1)

    def make_client():
        # redis-py's documented way: a client over a connection pool, which
        # hands each concurrent call a connection of its own.
        pool = redis.ConnectionPool(host=host, port=int(port))
        return redis.Redis(connection_pool=pool)

    def make_lock(client, name):
        lock = client.lock(name, timeout=LEASE_SECONDS)
        return lock.acquire, lock.release

    return make_lock, make_client, lambda client: client.close()


def redis_py_cluster(target):
    from redis.cluster import ClusterNode, RedisCluster  # python3-redis

    seeds = [ClusterNode(h, int(p)) for h, p in
             (seed.rsplit(":", 1) for seed in target.split(","))]

    def make_lock(client, name):
        lock = client.lock(name, timeout=LEASE_SECONDS)
        return lock.acquire, lock.release

    return make_lock, lambda: RedisCluster(startup_nodes=seeds), lambda c: c.close()


def kazoo(target):
    from kazoo.client import KazooClient  # python3-kazoo

    def make_client():
        client = KazooClient(hosts=target)
        client.start(timeout=10)
        return client

    def make_lock(client, name):
        lock = client.Lock("/kazoo-bench/" + name, uuid.uuid4().hex)
        return lock.acquire, lock.release

    def close(client):
        client.stop()
        client.close()

    return make_lock, make_client, close


def tooz(url, distinct_keys):
    from tooz import coordination  # python3-tooz

    def make_client():
        coordinator = coordination.get_coordinator(
            url, ("bench-" + uuid.uuid4().hex).encode())
        coordinator.start()
        return coordinator

    names = {}
    used_keys = set()

    def make_lock(coordinator, name):
        if distinct_keys:
            name = names.setdefault(name, distinct_key_name(len(names), used_keys))
        lock = coordinator.get_lock(name.encode())

        def acquire():
            if not lock.acquire(blocking=True):
                raise RuntimeError("a blocking tooz acquire returned False")

        return acquire, lock.release

    return make_lock, make_client, lambda coordinator: coordinator.stop()


def tenacity_taking_old_waits(module):
    """Gives `module` a tenacity whose retry() also takes a wait function of
    the old signature (previous_attempt_number, delay_since_first_attempt).

    python3-etcd3 0.12.0's Lock.acquire() waits with such a function, which
    Debian 12's python3-tenacity 8.2 calls with one argument (a TypeError as
    soon as a lock is held by another); uncontended acquires never wait."""
    import inspect
    import types

    import tenacity  # python3-tenacity, python3-etcd3's dependency

    def retry(*args, wait=None, **kwargs):
        if wait is not None and len(inspect.signature(wait).parameters) == 2:
            old_wait = wait

            def wait(state):
                return old_wait(state.attempt_number, state.seconds_since_start)

        return tenacity.retry(*args, wait=wait, **kwargs)

    shim = types.SimpleNamespace(**{name: getattr(tenacity, name)
                                    for name in dir(tenacity)
                                    if not name.startswith("__")})
    shim.retry = retry
    module.tenacity = shim


def python_etcd3(target):
    import etcd3  # python3-etcd3
    import etcd3.locks

    tenacity_taking_old_waits(etcd3.locks)
    host, port = target.rsplit(":", 1)

    def make_lock(client, name):
        lock = client.lock(name, ttl=LEASE_SECONDS)

        def acquire():
            # Waits in rounds of a second, not forever: its wait watches the
            # key from the revision it reads after its failed attempt, and a
            # release in between leaves a waiter asleep for good (seen in
            # contention slices that never ended).
            while not lock.acquire(timeout=1):
                pass

        return acquire, lock.release

    return (make_lock, lambda: etcd3.client(host=host, port=int(port)),
            lambda client: client.close())


def tooz_etcd3gw(target):
    import etcd3gw  # python3-etcd3gw

    if not getattr(etcd3gw.client, "takes_api_path", False):
        make_client = etcd3gw.client

        def client(api_path="/v3/", **kwargs):
            made = make_client(**kwargs)
            made.api_path = api_path
            return made

        client.takes_api_path = True
        etcd3gw.client = client
    return tooz("etcd3+http://%s?api_version=v3&lock_timeout=%d"
                % (target, LEASE_SECONDS), distinct_keys=False)


def distinct_key_name(index, used_keys):
    """A name whose advisory-lock key differs from every one in `used_keys`
    (the slice's earlier names'), which it joins.

    tooz's PostgreSQL driver keys its advisory lock by the first two bytes of
    the name's md5, so two names can share a key and wait for each other;
    the uncontended case must not."""
    i = index
    while True:
        name = "tooz-bench-%d-%d" % (index, i)
        key = hashlib.md5(name.encode()).digest()[0:2]
        if key not in used_keys:
            used_keys.add(key)
            return name
        i += 1


def library(name, target):
    if name == "redis-py":
        return redis_py(target)
    if name == "redis-py-cluster":
        return redis_py_cluster(target)
    if name == "kazoo":
        return kazoo(target)
    if name == "tooz-zookeeper":
        return tooz("zookeeper://" + target, distinct_keys=False)
    if name == "tooz-postgresql":
        return tooz(target, distinct_keys=True)
    if name == "python-etcd3":
        return python_etcd3(target)
    if name == "tooz-etcd3gw":
        return tooz_etcd3gw(target)
    raise SystemExit("unknown library %r" % name)


# --- the scenarios ---------------------------------------------------------


class Workers:
    """Threads running a loop until a deadline; the first error stops all."""

    def __init__(self):
        self.errors = []

    def run(self, count, body):
        def guarded(index):
            try:
                body(index)
            except threading.BrokenBarrierError:
                pass  # another thread failed: its error is the one to report
            except Exception as e:  # reported; the figures would be wrong
                self.errors.append("%s: %r" % (type(e).__name__, e))

        threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.errors:
            raise RuntimeError(self.errors[0])


def uncontended(lib, args, prefix):
    make_lock, make_client, close = lib
    client = make_client()
    locks = [make_lock(client, "%s-uncontended-%d" % (prefix, i))
             for i in range(args.concurrency)]
    acquires = [[] for _ in locks]
    releases = [[] for _ in locks]
    counts = [0] * len(locks)
    clock = time.perf_counter
    warm_until = time.monotonic() + args.warmup
    phase = {}

    def start_measuring():
        phase["start"] = time.monotonic()
        phase["stop"] = phase["start"] + args.seconds

    # The measured phase starts once every thread has finished its warm-up.
    warmed_up = threading.Barrier(len(locks), action=start_measuring)

    def body(i):
        acquire, release = locks[i]
        try:
            while time.monotonic() < warm_until:
                acquire()
                release()
        except Exception:
            warmed_up.abort()  # the others must not wait for this thread
            raise
        warmed_up.wait()
        stop = phase["stop"]
        while time.monotonic() < stop:
            t0 = clock()
            acquire()
            t1 = clock()
            release()
            t2 = clock()
            acquires[i].append(t1 - t0)
            releases[i].append(t2 - t1)
            counts[i] += 1

    Workers().run(len(locks), body)
    elapsed = time.monotonic() - phase["start"]
    close(client)
    return {
        "scenario": "uncontended",
        "concurrency": args.concurrency,
        "seconds": elapsed,
        "pairs_per_sec": sum(counts) / elapsed,
        "acquire_us": percentiles_us([x for l in acquires for x in l]),
        "release_us": percentiles_us([x for l in releases for x in l]),
    }


def contention(lib, args, prefix):
    make_lock, make_client, close = lib
    clients = [make_client() for _ in range(args.concurrency)]
    name = "%s-contended" % prefix
    locks = [make_lock(c, name) for c in clients]
    counts = [0] * len(locks)
    handoffs = []
    longest_wait = [0.0]
    # The last release: who made it and when its call started.
    state = {"released_at": None, "released_by": None}
    guard = threading.Lock()
    clock = time.perf_counter
    measure_from = clock() + args.warmup
    stop = measure_from + args.seconds

    # As `dlock bench` counts: an acquisition counts by when it was
    # obtained (t1 in or after the measured window: a wait begun while
    # warming up counts), with its hand-off and its wait; a client starts
    # no acquisition after the window.
    def body(i):
        acquire, release = locks[i]
        while True:
            t0 = clock()
            if t0 >= stop:
                return
            acquire()
            t1 = clock()
            with guard:
                if t1 >= measure_from:
                    # A hand-off passes the lock to another client; a
                    # client re-taking its own lock is no hand-off.
                    if state["released_by"] not in (None, i):
                        handoffs.append(t1 - state["released_at"])
                    longest_wait[0] = max(longest_wait[0], t1 - t0)
                    counts[i] += 1
                state["released_by"] = i
                state["released_at"] = clock()
            release()

    Workers().run(len(locks), body)
    elapsed = max(stop, clock()) - measure_from
    for c in clients:
        close(c)
    total = sum(counts)
    return {
        "scenario": "contention",
        "concurrency": args.concurrency,
        "seconds": elapsed,
        "handoffs_per_sec": len(handoffs) / elapsed,
        "handoff_us": percentiles_us(handoffs),
        "shares": [c / total if total else 0.0 for c in counts],
        "jain": jain(counts),
        "longest_wait_ms": longest_wait[0] * 1e3,
    }


def loaded(name, target):
    """library(name, target); SystemExit saying what to install if it is
    not installed."""
    try:
        return library(name, target)
    except ImportError as e:
        sys.exit("%s is not installed for %s (scripts/install-deps.sh installs "
                 "Debian's python3-redis, python3-kazoo, python3-tooz, "
                 "python3-psycopg2, python3-etcd3, python3-etcd3gw): %s"
                 % (name, sys.executable, e))


def slice_record(argv):
    """Runs the slice `argv` asks for and returns its record; SystemExit
    with a message when the library is missing or the slice fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", required=True,
                        choices=["redis-py", "redis-py-cluster", "kazoo", "tooz-zookeeper",
                                 "tooz-postgresql", "python-etcd3", "tooz-etcd3gw"])
    parser.add_argument("--target", required=True)
    parser.add_argument("--scenario", required=True,
                        choices=["uncontended", "contention", "semaphore", "shared", "exclusive",
                                 "election"])
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1)
    parser.add_argument("--warmup", type=float, default=0.2)
    parser.add_argument("--permits", type=int, help="semaphore: N (default: --concurrency)")
    parser.add_argument("--handovers", type=int, default=20, help="election: resigns measured")
    args = parser.parse_args(argv)
    lib = loaded(args.library, args.target)
    # A prefix of its own per slice: slices never meet another's names.
    prefix = "peer-" + uuid.uuid4().hex[:8]
    try:
        if args.scenario == "uncontended":
            record = uncontended(lib, args, prefix)
        elif args.scenario == "contention":
            record = contention(lib, args, prefix)
        elif args.scenario == "election":
            record = python_primitives.handovers(args.library, args.target, args.handovers,
                                                 prefix, percentiles_us)
        else:
            permits = args.permits or args.concurrency
            record = uncontended(python_primitives.pairs_lib(
                args.library, args.scenario, args.target, permits, prefix), args, prefix)
            record.update(scenario=args.scenario)
            if args.scenario == "semaphore":
                record["permits"] = permits
    except Exception as e:
        sys.exit("%s %s failed: %s: %s" % (args.library, args.scenario, type(e).__name__, e))
    return dict({"library": args.library, "target": args.target}, **record)


def main():
    if sys.argv[1:2] == ["--serve"]:
        for name in sys.argv[2:]:
            loaded(name, "127.0.0.1:0")  # imported before the first slice
        # A failed slice exits as a single run does: the reader sees the
        # output end and the message on stderr.
        for line in sys.stdin:
            print(json.dumps(slice_record(json.loads(line))), flush=True)
    else:
        print(json.dumps(slice_record(sys.argv[1:])))


if __name__ == "__main__":
    main()
