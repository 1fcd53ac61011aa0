#!/usr/bin/python3
"""Runs the proposed Redis scripts of issue 24 against a real redis-server.

    /usr/bin/python3 docs/design/validation/redis_primitives.py

Starts its own redis-server on a free loopback port (killed at exit: only
that pid), loads prelude.lua + holders.lua + shared_mode.lua before each
script as the wired library will, applies redis_rw_writer.patch to copies of
acquire.lua, release.lua, renew.lua and force_unlock.lua, and plays the scenarios of
docs/design/primitives.md ("Validated"), asserting every reply. Not part of
CI: it is the evidence the design rests on, and the cases implementers turn
into backend tests. Exits non-zero on the first failed expectation.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import redis  # python3-redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validation_common import expect, finish, free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SCRIPTS = os.path.join(ROOT, "backends", "redis", "scripts")
CHANNEL = "dlock:0:v:released"


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-prim-redis-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.r = redis.Redis(port=self.port, decode_responses=True)
        for _ in range(100):
            try:
                self.r.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise SystemExit("redis-server did not start (apt-get install -y "
                         "redis-server)")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def patched_writer_scripts():
    """acquire/release/renew/force_unlock with redis_rw_writer.patch."""
    tmp = tempfile.mkdtemp(prefix="dlock-prim-patch-")
    dst = os.path.join(tmp, "backends", "redis", "scripts")
    os.makedirs(dst)
    for f in ("acquire.lua", "release.lua", "renew.lua", "force_unlock.lua"):
        shutil.copy(os.path.join(SCRIPTS, f), dst)
    with open(os.path.join(HERE, "redis_rw_writer.patch")) as p:
        subprocess.run(["patch", "-s", "-p1", "-d", tmp], stdin=p, check=True)
    out = {}
    for f in ("acquire", "release", "renew", "force_unlock"):
        with open(os.path.join(dst, f + ".lua")) as fh:
            out[f] = fh.read()
    shutil.rmtree(tmp)
    return out


def read(name):
    with open(os.path.join(SCRIPTS, name + ".lua")) as f:
        return f.read()


class Scripts:
    def __init__(self, r):
        self.r = r
        self.prelude = read("prelude") + read("holders") + read("shared_mode")
        self.bodies = {}
        for name in ("sem_acquire", "sem_release", "sem_renew",
                     "holder_refresh_liveness", "holders_inspect",
                     "holders_abandon", "election_proclaim", "read_acquire",
                     "read_release", "read_renew", "inspect", "multi_acquire"):
            self.bodies[name] = self.prelude + read(name)
        # The layout before readers, as a client of the current release
        # runs it: no holders.lua, no shared_mode.lua.
        self.bodies["old_acquire"] = read("prelude") + read("acquire")
        self.bodies["old_release"] = read("prelude") + read("release")
        for name, body in patched_writer_scripts().items():
            self.bodies[name] = self.prelude + body

    def __call__(self, name, keys, args):
        return self.r.eval(self.bodies[name], len(keys), *keys,
                           *[str(a) for a in args])


# --- Semaphores (C22) -------------------------------------------------------

def sem(run, key, owner, n, permits=1, lease=5000, wait=0, ttl=0,
        reserve=1000):
    return run("sem_acquire", [key],
               [owner, lease, 1 if wait else 0, ttl, n, permits, reserve, "",
                "", 0, ""])


def sem_release(run, key, owner, holds=1):
    return run("sem_release", [key], [owner, holds, CHANNEL, "\x1fsS", 0])


def semaphore_cases(r, run):
    k = "dlock:s{v:S}"
    a = sem(run, k, "t:A", 2)
    b = sem(run, k, "t:B", 2)
    expect("sem: two of N=2 granted", [a[0], b[0]], [1, 1])
    expect("sem: each grant's token is larger", b[1] > a[1], True)
    expect("sem: each takes the lowest free permit slot", (a[3], b[3]),
           ("0", "1"))
    expect("sem: a try for a third is refused without a write",
           sem(run, k, "t:C", 2)[0], 0)
    expect("sem: ...and leaves no reservation", r.hget(k, "q"), None)
    expect("sem: another N in force is FailedPrecondition (-2, the N)",
           sem(run, k, "t:D", 3), [-2, 2])
    again = sem(run, k, "t:A", 2)
    expect("sem: re-entry keeps the token and slot, holds 2", again,
           [1, a[1], 2, "0"])
    expect("sem: re-entry asking other permits is refused (-3)",
           sem(run, k, "t:A", 2, permits=2), [-3, 1])
    waiting = sem(run, k, "t:C", 2, wait=1)
    expect("sem: a waiter is refused with a hint", waiting[0], 0)
    expect("sem: the first waiter reserves its permits",
           r.hget(k, "q").endswith(" 1 t:C"), True)
    expect("sem: a non-owner's release is -1 and changes nothing",
           sem_release(run, k, "t:Z"), -1)
    p = r.pubsub()
    p.subscribe(CHANNEL)
    p.get_message(timeout=1)
    expect("sem: inner release leaves 1 hold", sem_release(run, k, "t:A"), 1)
    expect("sem: last release of A returns 0", sem_release(run, k, "t:A"), 0)
    msg = p.get_message(timeout=1)
    expect("sem: a release with a waiter is announced",
           msg and msg["data"], "\x1fsS")
    expect("sem: a newcomer cannot take the waiter's reserved permit",
           sem(run, k, "t:E", 2)[0], 0)
    c = sem(run, k, "t:C", 2, wait=1)
    expect("sem: the reserving waiter gets it, token above all before",
           c[0] == 1 and c[1] > b[1], True)
    expect("sem: ...in A's slot: that slot's tokens grow", c[3], "0")
    expect("sem: its reservation is gone", r.hget(k, "q"), None)
    sem_release(run, k, "t:B")
    sem_release(run, k, "t:C")
    expect("sem: the key goes with the last holder", r.exists(k), 0)
    expect("sem: a new N may start once nothing is held",
           sem(run, k, "t:D", 3)[0], 1)
    sem_release(run, k, "t:D")

    # Many permits at once, and a big waiter not starved by small ones.
    k = "dlock:s{v:M}"
    sem(run, k, "t:A", 3)
    expect("sem: 3 of 3 at once refused while 1 is held",
           sem(run, k, "t:B", 3, permits=3, wait=1)[0], 0)
    expect("sem: a later single permit is refused: it would starve B",
           sem(run, k, "t:C", 3, wait=1)[0], 0)
    sem_release(run, k, "t:A")
    expect("sem: B gets all 3 at once (one step), slots 0 to 2",
           sem(run, k, "t:B", 3, permits=3, wait=1)[::3], [1, "0,1,2"])
    sem_release(run, k, "t:B")
    run("holders_abandon", [k], ["t:C", "q", CHANNEL, "\x1fsM"])

    # A holder whose liveness lapses, or whose lease ends, gives its permit
    # back without any release.
    k = "dlock:s{v:L}"
    sem(run, k, "t:A", 1, lease=60000, ttl=150)
    expect("sem: full while A lives", sem(run, k, "t:B", 1)[0], 0)
    expect("sem: A's heartbeat refreshes its permit",
           run("holder_refresh_liveness", [k],
               ["t:A", r.hget(k, "t:A").split()[0], 150]), 1)
    time.sleep(0.2)
    b = sem(run, k, "t:B", 1)
    expect("sem: once A's liveness lapsed its permit is B's", b[0], 1)
    expect("sem: A's renewal then finds nothing (lost)",
           run("sem_renew", [k], ["t:A", 60000, 150]), 0)
    expect("sem: A's heartbeat too",
           run("holder_refresh_liveness", [k], ["t:A", 1, 150]), 0)
    sem_release(run, k, "t:B")
    sem(run, k, "t:A", 1, lease=100)
    time.sleep(0.15)
    expect("sem: a lease that ended frees the permit",
           sem(run, k, "t:B", 1)[0], 1)
    expect("sem: renewal extends the lease",
           run("sem_renew", [k], ["t:B", 200, 0]), 1)
    expect("sem: the key lives at least as long as its holders",
           r.pttl(k) > 150, True)
    ins = run("holders_inspect", [k], [])
    expect("sem: inspect shows N and the holder", ins[0] == 1 and
           ins[4] == "t:B", True)
    sem_release(run, k, "t:B")

    # A reservation of a waiter that went away lapses by itself.
    k = "dlock:s{v:R}"
    sem(run, k, "t:A", 1)
    sem(run, k, "t:B", 1, wait=1, reserve=100)
    sem_release(run, k, "t:A")
    expect("sem: while B's place lives C is refused",
           sem(run, k, "t:C", 1)[0], 0)
    time.sleep(0.15)
    expect("sem: once B stopped asking, C gets the permit",
           sem(run, k, "t:C", 1)[0], 1)
    sem_release(run, k, "t:C")
    sem(run, k, "t:A", 1)
    sem(run, k, "t:B", 1, wait=1)
    expect("sem: abandoning removes the waiter's place (C9)",
           run("holders_abandon", [k], ["t:B", "q", CHANNEL, "\x1fsR"]), 1)
    sem_release(run, k, "t:A")
    expect("sem: nothing left behind", r.exists(k), 0)


# --- Elections (C24) --------------------------------------------------------

def campaign(run, k, owner, value, wait=0, ttl=0, lease=5000):
    return run("sem_acquire", [k], [owner, lease, 1 if wait else 0, ttl, 1, 1,
                                    1000, CHANNEL, "\x1feE", 1, value])


def election_cases(r, run):
    k = "dlock:e{v:E}"
    p = r.pubsub()
    p.subscribe(CHANNEL)
    p.get_message(timeout=1)
    a = campaign(run, k, "t:A", "10.0.0.1:80")
    expect("elect: A leads", a[0], 1)
    msg = p.get_message(timeout=1)
    expect("elect: a new leader is announced (observers wake)",
           msg and msg["data"], "\x1feE")
    expect("elect: B waits", campaign(run, k, "t:B", "b", wait=1)[0], 0)
    ins = run("holders_inspect", [k], [])
    expect("elect: Leader() reads A and its value",
           (ins[3], ins[4], int(ins[7])), ("10.0.0.1:80", "t:A", a[1]))
    expect("elect: A proclaims a new value",
           run("election_proclaim", [k], ["t:A", a[1], "x", CHANNEL,
                                          "\x1feE"]), 1)
    expect("elect: a stale term cannot proclaim",
           run("election_proclaim", [k], ["t:A", a[1] - 1, "y", CHANNEL,
                                          "\x1feE"]), 0)
    expect("elect: nor can a non-leader",
           run("election_proclaim", [k], ["t:B", a[1], "y", CHANNEL,
                                          "\x1feE"]), 0)
    expect("elect: the value is the proclaimed one", r.hget(k, "v"), "x")
    p.get_message(timeout=1)
    p.get_message(timeout=1)
    expect("elect: resign", run("sem_release", [k],
                                ["t:A", 1, CHANNEL, "\x1feE", 1]), 0)
    msg = p.get_message(timeout=1)
    expect("elect: a resignation is announced", msg and msg["data"],
           "\x1feE")
    expect("elect: the value goes with the leader", r.hget(k, "v"), None)
    b = campaign(run, k, "t:B", "b", wait=1)
    expect("elect: B leads with a larger term", b[0] == 1 and b[1] > a[1],
           True)
    r_ = run("sem_acquire", [k], ["t:C", 5000, 1, 0, 1, 1, 0, CHANNEL,
                                  "\x1feE", 1, "c"])
    expect("elect: without reservations (Redlock) a waiter keeps no place",
           (r_[0], r.hget(k, "q")), (0, None))
    run("sem_release", [k], ["t:B", 1, CHANNEL, "\x1feE", 1])
    # A leader that stops refreshing its liveness is replaced.
    a = campaign(run, k, "t:A", "a", ttl=100, lease=60000)
    time.sleep(0.15)
    b = campaign(run, k, "t:B", "b")
    expect("elect: a lapsed leader is replaced, the term grows",
           b[0] == 1 and b[1] > a[1], True)
    run("sem_release", [k], ["t:B", 1, CHANNEL, "\x1feE", 1])


# --- Read-write locks (C23) -------------------------------------------------

def lock_keys(name):
    return ["dlock:{v:%s}" % name, "dlock:r{v:%s}" % name]


def read_lock(run, name, owner, wait=0, lease=5000, ttl=0):
    return run("read_acquire", lock_keys(name),
               [owner, lease, 1 if wait else 0, ttl])


def read_unlock(run, name, owner, holds=1):
    return run("read_release", lock_keys(name),
               [owner, holds, CHANNEL, name])


def write_lock(run, name, owner, wait=0, lease=5000, ttl=0, intent=1000):
    return run("acquire", lock_keys(name),
               [owner, lease, 1 if wait else 0, ttl, 0, intent])


def write_unlock(run, name, owner, holds=1, keep=0):
    return run("release", lock_keys(name),
               [owner, holds, CHANNEL, name, keep])


def rw_cases(r, run):
    n = "RW"
    lock, readers = lock_keys(n)
    a = read_lock(run, n, "t:A")
    b = read_lock(run, n, "t:B")
    expect("rw: two readers hold together", [a[0], b[0]], [1, 1])
    expect("rw: reader tokens grow", b[1] > a[1], True)
    expect("rw: the lock key holds the read marker (alive -2)",
           r.get(lock).split()[5], "-2")
    expect("rw: a writer's try is refused",
           write_lock(run, n, "t:W")[0], 0)
    expect("rw: ...and leaves no intent", r.hget(readers, "w"), None)
    expect("rw: the current layout's acquire sees the marker as kept, and "
           "waits (upgrade-safe)",
           run("old_acquire", [lock], ["t:O", 5000, 0, 0])[0], 0)
    expect("rw: a waiting writer is refused and records its intent",
           write_lock(run, n, "t:W", wait=1)[0], 0)
    expect("rw: the intent names W", r.hget(readers, "w").endswith(" t:W"),
           True)
    expect("rw: a new reader is refused while W waits (no starvation)",
           read_lock(run, n, "t:C", wait=1)[0], 0)
    expect("rw: a reader already in may re-enter",
           read_lock(run, n, "t:A")[:3:2], [1, 2])
    expect("rw: read-to-write upgrade is refused (-4)",
           write_lock(run, n, "t:A", wait=1), [-4, 0, ""])
    read_unlock(run, n, "t:A", holds=2)
    p = r.pubsub()
    p.subscribe(CHANNEL)
    p.get_message(timeout=1)
    expect("rw: the last reader's release", read_unlock(run, n, "t:B"), 0)
    msg = p.get_message(timeout=1)
    expect("rw: ...is announced", msg and msg["data"], n)
    expect("rw: ...and hands the lock to W (alive -3)",
           r.get(lock).split()[5], "-3")
    expect("rw: a reader cannot slip in before W",
           read_lock(run, n, "t:C", wait=1)[0], 0)
    expect("rw: nor another writer", write_lock(run, n, "t:X", wait=1)[0], 0)
    w = write_lock(run, n, "t:W", wait=1)
    expect("rw: W gets it, its token above every reader's",
           w[0] == 1 and w[1] > b[1], True)
    expect("rw: readers were refused, so W's value is marked waited",
           r.get(lock).split()[6], "1")
    expect("rw: W's release", write_unlock(run, n, "t:W"), 0)
    msg = p.get_message(timeout=1)
    expect("rw: ...wakes the refused readers", msg and msg["data"], n)
    expect("rw: the reader gets in", read_lock(run, n, "t:C")[0], 1)
    read_unlock(run, n, "t:C")
    expect("rw: nothing left behind", (r.exists(lock), r.exists(readers)),
           (0, 0))

    # A writer may read; its write release keeps the read (a downgrade).
    n = "DG"
    lock, readers = lock_keys(n)
    w = write_lock(run, n, "t:W")
    expect("rw: a reader waits for the writer",
           read_lock(run, n, "t:R", wait=1)[0], 0)
    expect("rw: the writer takes the read lock, with its token",
           read_lock(run, n, "t:W"), [1, w[1], 1])
    expect("rw: releasing the write hold keeps the read",
           write_unlock(run, n, "t:W"), 0)
    expect("rw: ...the lock is read-held", r.get(lock).split()[5], "-2")
    expect("rw: other readers join", read_lock(run, n, "t:R")[0], 1)
    expect("rw: a writer is still refused", write_lock(run, n, "t:X")[0], 0)
    read_unlock(run, n, "t:W")
    read_unlock(run, n, "t:R")
    x = write_lock(run, n, "t:X")
    expect("rw: the next writer's token exceeds the earlier writer's",
           x[0] == 1 and x[1] > w[1], True)
    write_unlock(run, n, "t:X")

    # A writer's read outliving its write lease keeps writers out; the
    # writer's renewal never cuts the key short.
    n = "WR"
    lock, readers = lock_keys(n)
    w = write_lock(run, n, "t:W", lease=150)
    read_lock(run, n, "t:W", lease=2000)
    expect("rw: the write hold's renewal does not shorten the key below "
           "its read", run("renew", [lock], ["t:W", 150, 0]) == 1 and
           r.pttl(lock) > 1500, True)
    time.sleep(0.2)
    expect("rw: past the write lease, its read still keeps writers out",
           write_lock(run, n, "t:X")[0], 0)
    expect("rw: the writer's read renews and keeps the key alive",
           run("read_renew", lock_keys(n), ["t:W", 3000, 0]) == 1 and
           r.pttl(lock) > 2500, True)
    read_unlock(run, n, "t:W")
    write_unlock(run, n, "t:W")
    expect("rw: released, the next writer's token is larger",
           write_lock(run, n, "t:X")[1] > w[1], True)
    write_unlock(run, n, "t:X")

    # Readers that die give the lock back; an intent that is not renewed
    # lapses.
    n = "LV"
    lock, readers = lock_keys(n)
    read_lock(run, n, "t:A", lease=60000, ttl=100)
    time.sleep(0.15)
    x = write_lock(run, n, "t:X")
    expect("rw: a reader whose liveness lapsed no longer keeps writers out",
           x[0], 1)
    expect("rw: its renewal finds nothing",
           run("read_renew", lock_keys(n), ["t:A", 60000, 100]), 0)
    write_unlock(run, n, "t:X")
    read_lock(run, n, "t:A", lease=60000)
    write_lock(run, n, "t:W", wait=1, intent=100)
    expect("rw: the intent keeps readers out",
           read_lock(run, n, "t:B")[0], 0)
    time.sleep(0.15)
    expect("rw: once W stopped retrying, readers come in again",
           read_lock(run, n, "t:B")[0], 1)
    expect("rw: read renewal extends the marker too",
           run("read_renew", lock_keys(n), ["t:B", 120000, 0]) == 1 and
           r.pttl(lock) > 100000, True)
    force = run("force_unlock", [lock, readers], [CHANNEL, n])
    expect("rw: force unlock removes the marker and every reader",
           (force, r.exists(lock), r.exists(readers)), (1, 0, 0))

    # The writer's usual path is the lock's, unchanged.
    n = "PL"
    a = write_lock(run, n, "t:A")
    expect("rw: a free lock costs the usual SET NX",
           (a[0], r.exists(lock_keys(n)[1])), (1, 0))
    expect("rw: re-entry", write_lock(run, n, "t:A")[2], 2)
    expect("rw: release x2 frees it",
           [write_unlock(run, n, "t:A"), write_unlock(run, n, "t:A")],
           [1, 0])


# --- Multi-locks in one slot (C25) ------------------------------------------

def multi_cases(r, run):
    # Names "job", "job}a", "job}b": their keys' hash tag is "v:job", one
    # slot (docs/redis.md, "One key, one slot").
    keys = ["dlock:{v:job}", "dlock:{v:job}a}", "dlock:{v:job}b}"]
    r.set(keys[2], "1 1 5000 1 %d -1 0 t:Z" % (int(time.time() * 1000) +
                                             5000), px=5000)
    got = run("multi_acquire", keys, ["t:A", 5000, 1, 0])
    expect("multi: one name held by another: none taken, its index",
           (got[0], got[2], r.exists(keys[0]), r.exists(keys[1])),
           (0, 3, 0, 0))
    expect("multi: ...and the holder marked so that its release is told",
           r.get(keys[2]).split()[6], "1")
    r.delete(keys[2])
    got = run("multi_acquire", keys, ["t:A", 5000, 1, 0])
    expect("multi: all free: all taken at once, one token",
           (got[0], r.exists(*keys)), (1, 3))
    expect("multi: each released like a lock", [
        run("old_release", [k], ["t:A", 1, CHANNEL, "x", 0]) for k in keys],
        [0, 0, 0])


def main():
    server = Server()
    try:
        run = Scripts(server.r)
        semaphore_cases(server.r, run)
        election_cases(server.r, run)
        rw_cases(server.r, run)
        multi_cases(server.r, run)
    finally:
        server.stop()
    finish()


if __name__ == "__main__":
    main()
