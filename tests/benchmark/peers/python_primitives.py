"""The Python peers of the primitives (issue 24) in the comparative report,
used by python_peers.py (its --scenario semaphore, shared, exclusive and election):

  semaphore  kazoo's Semaphore recipe: N threads of one KazooClient, each
             with a Semaphore object of its own on ONE path with
             max_leases=PERMITS, take a lease and give it back
             (acquire+release pairs, as `dlock bench --scenarios semaphore`)
  shared     kazoo's ReadLock recipe: N threads of one KazooClient, each
             with a ReadLock of its own on ONE path
  exclusive  kazoo's WriteLock recipe, as shared: the writers take turns
  election   a resign hand-over: two campaigners (a client each), the leader
             steps down while the other campaigns; from the step-down call
             to the other's election. kazoo's Election recipe (run(func)
             leads while func runs; func returning resigns) and tooz's
             leader election on its ZooKeeper driver (watch_elected_as_leader,
             stand_down_group_leader).

Neither library has a lease to let lapse: a kazoo or tooz leader that dies
is replaced when its ZooKeeper session expires (10 s by default), so only
resign hand-overs are measured.

tooz elects in run_watchers(), which tries its leader lock without waiting
(acquire(blocking=False)): its documentation's loop calls it every second;
here every 10 ms (redis-semaphore's default poll), so that tooz's figure is
its poll, not a second's sleep.
"""
import threading
import time
import uuid

# Before the leader steps down, the time the other campaigner gets to reach
# the server and wait there (as `dlock bench` gives its own).
CAMPAIGN_SETTLE = 0.05
TOOZ_POLL = 0.01


def kazoo_client(target):
    from kazoo.client import KazooClient  # python3-kazoo

    client = KazooClient(hosts=target)
    client.start(timeout=10)
    return client


def kazoo_close(client):
    client.stop()
    client.close()


def pairs_lib(library, scenario, target, permits, prefix):
    """(make_lock, make_client, close), as python_peers.library(), whose
    locks are all on ONE path: a semaphore of `permits`, read locks or
    write locks."""
    if library != "kazoo":
        raise SystemExit("%s has no %s here; kazoo has" % (library, scenario))
    path = "/kazoo-bench/%s-%s" % (prefix, scenario)

    def make_lock(client, _name):
        if scenario == "semaphore":
            lock = client.Semaphore(path, uuid.uuid4().hex, max_leases=permits)
        elif scenario == "shared":
            lock = client.ReadLock(path, uuid.uuid4().hex)
        else:
            lock = client.WriteLock(path, uuid.uuid4().hex)
        return lock.acquire, lock.release

    return make_lock, lambda: kazoo_client(target), kazoo_close


class Campaigner:
    """One campaigner in a thread of its own; elected.wait() until it leads,
    resign() to step down."""

    def __init__(self, library, target, path):
        self.library = library
        self.elected_at = None
        self.elected = threading.Event()
        self.step_down = threading.Event()
        self.error = None
        if library == "kazoo":
            self.client = kazoo_client(target)
            self.election = self.client.Election(path, uuid.uuid4().hex)
        else:
            from tooz import coordination  # python3-tooz

            self.client = coordination.get_coordinator(
                "zookeeper://" + target, ("bench-" + uuid.uuid4().hex).encode())
            self.client.start()
            self.group = path.encode()
            try:
                self.client.create_group(self.group).get()
            except coordination.GroupAlreadyExist:
                pass
            self.client.join_group(self.group).get()
        self.thread = None

    def lead(self, *_):
        self.elected_at = time.perf_counter()
        self.elected.set()

    def campaign(self):
        self.elected.clear()
        self.step_down.clear()
        self.thread = threading.Thread(target=self.guarded)
        self.thread.start()

    def guarded(self):
        try:
            if self.library == "kazoo":
                # Leads while the function runs; its return resigns.
                self.election.run(lambda: (self.lead(), self.step_down.wait()))
            else:
                self.client.watch_elected_as_leader(self.group, self.lead)
                while not self.elected.is_set():
                    self.client.run_watchers()
                    time.sleep(TOOZ_POLL)
                self.step_down.wait()
                self.client.unwatch_elected_as_leader(self.group, self.lead)
                self.client.stand_down_group_leader(self.group)
        except Exception as e:  # reported by the slice
            self.error = "%s: %r" % (type(e).__name__, e)
            self.elected.set()

    def resign(self):
        self.step_down.set()
        self.thread.join()

    def close(self):
        if self.library == "kazoo":
            kazoo_close(self.client)
        else:
            self.client.leave_group(self.group).get()
            self.client.stop()


def handovers(library, target, count, prefix, percentiles_us):
    """The election record: `count` resign hand-overs (a first, not counted,
    warms up), their p50, p99 and p99.9 in microseconds."""
    path = "/kazoo-bench/%s-election" % prefix if library == "kazoo" else (
        "%s-election" % prefix)
    campaigners = [Campaigner(library, target, path) for _ in range(2)]
    samples = []
    try:
        leader = 0
        campaigners[leader].campaign()
        campaigners[leader].elected.wait()
        for i in range(count + 1):
            nxt = campaigners[1 - leader]
            nxt.campaign()
            time.sleep(CAMPAIGN_SETTLE)
            resigned_at = time.perf_counter()
            campaigners[leader].resign()
            if not nxt.elected.wait(timeout=60):
                raise RuntimeError("no campaigner elected within 60 s of a resign")
            for c in campaigners:
                if c.error:
                    raise RuntimeError(c.error)
            if i > 0:
                samples.append(nxt.elected_at - resigned_at)
            leader = 1 - leader
        campaigners[leader].resign()
    finally:
        for c in campaigners:
            c.close()
    return {"scenario": "election", "resigns": count,
            "resign_handover_us": percentiles_us(samples),
            "lapses": 0, "lapse_handover_us": None}
