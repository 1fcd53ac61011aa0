#!/usr/bin/python3
"""Plays the proposed ZooKeeper recipes of issue 24 against a real server.

    /usr/bin/python3 docs/design/validation/zookeeper_primitives.py

Starts a standalone ZooKeeper 3.8 (Debian's jar) on a free port in a
temporary directory (stopped at exit: only that process), and runs, with
kazoo clients (python3-kazoo) in threads, the queue rules of
docs/design/primitives.md ("ZooKeeper"): a semaphore's admission by the
permits queued ahead, read and write nodes in one queue, an election's
leader and observers, and multi-locks enqueued in one multi. Leases (node
mtime), re-entry and lost replies are the mutex recipe's, unchanged, and
are not played here. Not part of CI: the evidence the design rests on.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from kazoo.client import KazooClient  # python3-kazoo
from kazoo.exceptions import KazooException, NoNodeError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validation_common import expect, finish, free_port, run_threads  # noqa: E402

class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-prim-zk-")
        self.port = free_port()
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime=200\ndataDir={self.dir}/data\n"
                    f"clientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\nforceSync=no\n"
                    "4lw.commands.whitelist=ruok\n")
        cp = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
        if os.path.exists("/usr/share/java/slf4j-simple.jar"):
            cp += ":/usr/share/java/slf4j-simple.jar"
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg],
            stdout=open(os.path.join(self.dir, "log"), "w"),
            stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                    s.sendall(b"ruok")
                    if s.recv(4) == b"imok":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("zookeeper did not start (apt-get install -y "
                         "zookeeper)")

    def client(self):
        zk = KazooClient(hosts=f"127.0.0.1:{self.port}", timeout=4)
        zk.start()
        return zk

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# The mutex recipe's queue rule (zk_layout.cc SequenceOf): a lock node is a
# child whose name ends in "-lock-" and ZooKeeper's 10 digits.
LOCK_NODE = re.compile(r"-lock-(\d{10})$")


def sequence_of(name):
    m = LOCK_NODE.search(name)
    return int(m.group(1)) if m else None


def queue(children):
    return sorted((c for c in children if sequence_of(c) is not None),
                  key=sequence_of)


def wait_event(zk, watch_setter, timeout):
    """Sets a one-shot watch with watch_setter(callback) and sleeps until it
    fires or `timeout` passes (no polling in between)."""
    fired = threading.Event()
    if watch_setter(lambda _e: fired.set()) is None:
        return  # what we would watch is gone already: look again now
    fired.wait(timeout)


def data_of(zk, path, watch=None):
    """A node's data; None once it is gone (deleted while we looked)."""
    try:
        return zk.get(path, watch=watch)[0]
    except NoNodeError:
        return None


def unless(seen, changed):
    """For wait_event: None (do not sleep) when what was just read, with
    the watch set, already differs from what the decision was made on."""
    if seen is None or changed(seen):
        return None
    return seen


# --- Semaphores (C22): permits and N in the node name ------------------------
#
# A node is admitted when the permits queued ahead leave room for its own
# AND its predecessor is admitted already (its data says "held"), so that
# admissions happen one after another in queue order: each grant's token
# (its node's czxid) exceeds every earlier grant's. Admitted, it takes the
# lowest free permit slots, written in its data: the slots of the nodes
# ahead are all known then (they are all admitted), and none behind it is.

SEM_NODE = re.compile(r"-s(\d+)of(\d+)-lock-\d{10}$")


class Mismatch(Exception):
    pass


def sem_acquire(zk, parent, me, permits, limit, timeout=10):
    path = zk.create(f"{parent}/{me}-s{permits}of{limit}-lock-", b"waiting",
                     ephemeral=True, sequence=True, makepath=True)
    name = path.rsplit("/", 1)[1]
    end = time.time() + timeout
    while time.time() < end:
        q = queue(zk.get_children(parent))
        i = q.index(name)
        for child in q:
            n = int(SEM_NODE.search(child).group(2))
            if n != limit:
                zk.delete(path)  # leaves nothing (C9): FailedPrecondition
                raise Mismatch(n)
        ahead = [data_of(zk, f"{parent}/{c}") for c in q[:i]]
        if None in ahead:
            continue  # one left while we looked: list again
        if i > 0 and not ahead[-1].startswith(b"held"):
            # Behind a waiter: woken when it is admitted (its write) or
            # leaves (its delete). The watch is set by the read that looks,
            # so a change in between is not missed.
            pred = f"{parent}/{q[i - 1]}"
            wait_event(zk, lambda cb: unless(
                data_of(zk, pred, watch=cb), lambda d: d.startswith(b"held")),
                end - time.time())
            continue
        used = sum(int(SEM_NODE.search(c).group(1)) for c in q[:i])
        if used + permits <= limit:
            taken = {int(x) for d in ahead for x in d.split()[1:]}
            slots = [x for x in range(limit) if x not in taken][:permits]
            zk.set(path, b"held " + " ".join(map(str, slots)).encode())
            return path, zk.exists(path).czxid, slots
        # The head waiter: any holder's delete may admit it.
        wait_event(zk, lambda cb: unless(
            queue(zk.get_children(parent, watch=cb)), lambda now: now != q),
            end - time.time())
    zk.delete(path)
    return None, None, None


def semaphore_cases(server):
    zk = server.client()
    parent = "/dlock/v/%1FsS"
    held, peak, lock = [0], [0], threading.Lock()
    errors, grants = [], [0]
    # A fenced register per permit slot, as the history checker's: a write
    # carries the grant's token and is refused below the slot's last one.
    slot_user, slot_token, stale = {}, {}, [0]

    def worker(i):
        c = server.client()
        try:
            for _ in range(15):
                k = 2 if i == 0 else 1
                path, token, slots = sem_acquire(c, parent, f"c{i}", k, 3)
                with lock:
                    held[0] += k
                    peak[0] = max(peak[0], held[0])
                    grants[0] += 1
                    for x in slots:
                        if x in slot_user or token < slot_token.get(x, 0):
                            stale[0] += 1
                        slot_user[x] = i
                        slot_token[x] = token
                time.sleep(0.005)
                with lock:
                    held[0] -= k
                    for x in slots:
                        del slot_user[x]
                c.delete(path)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
        finally:
            c.stop()

    run_threads(worker, 6)
    expect("zk sem: 6 clients, N=3, one asking 2 permits: no error",
           errors[:1], [])
    expect("zk sem: never more than N permits held (peak %d)" % peak[0],
           peak[0] <= 3, True)
    expect("zk sem: permits did overlap (peak > 1)", peak[0] > 1, True)
    expect("zk sem: the 2-permit client was never starved (90 grants)",
           grants[0], 90)
    expect("zk sem: each slot one holder at a time, its tokens growing "
           "(fenced register per slot)", stale[0], 0)
    p, _, _ = sem_acquire(zk, parent, "a", 1, 3)
    try:
        sem_acquire(zk, parent, "b", 1, 4)
        expect("zk sem: another N in force is refused", False, True)
    except Mismatch as e:
        expect("zk sem: another N in force is refused, naming it",
               e.args[0], 3)
    expect("zk sem: ...and leaves no node", len(zk.get_children(parent)), 1)
    zk.delete(p)
    zk.stop()


# --- Read-write locks (C23): read nodes in the lock's own queue --------------

def is_read(name):
    return "-read-lock-" in name


def rw_acquire(zk, parent, me, read, timeout=10):
    """Owner `me` is in the node data, as "r:<owner>" on read nodes, so that
    a client of the current layout, which counts read nodes as lock nodes,
    never re-enters one as its own (docs/design/primitives.md)."""
    mine = zk.get_children(parent) if zk.exists(parent) else []
    if not read and any(is_read(c) and
                        data_of(zk, f"{parent}/{c}") == b"r:" + me.encode()
                        for c in queue(mine)):
        return "upgrade", None  # FailedPrecondition, never a deadlock
    kind = "-read-lock-" if read else "-lock-"
    data = (b"r:" if read else b"") + me.encode()
    path = zk.create(f"{parent}/{me}{kind}", data, ephemeral=True,
                     sequence=True, makepath=True)
    name = path.rsplit("/", 1)[1]
    end = time.time() + timeout
    while time.time() < end:
        q = queue(zk.get_children(parent))
        i = q.index(name)
        if read:
            writers = [c for c in q[:i] if not is_read(c) and
                       data_of(zk, f"{parent}/{c}") not in (me.encode(), None)]
            if not writers:
                return path, zk.exists(path).czxid
            block = writers[-1]  # the last writer ahead
        else:
            if i == 0:
                return path, zk.exists(path).czxid
            block = q[i - 1]  # the predecessor, whatever it is
        wait_event(zk, lambda cb: zk.exists(f"{parent}/{block}", watch=cb),
                   end - time.time())
    zk.delete(path)
    return None, None


def rw_cases(server):
    parent = "/dlock/v/RW"
    state = {"readers": 0, "writers": 0, "bad": 0, "overlap": 0}
    lock = threading.Lock()
    stop = threading.Event()
    writer_waits = []

    def reader(i):
        c = server.client()
        while not stop.is_set():
            path, _ = rw_acquire(c, parent, f"r{i}", True)
            with lock:
                state["readers"] += 1
                state["overlap"] = max(state["overlap"], state["readers"])
                if state["writers"]:
                    state["bad"] += 1
            time.sleep(0.03)
            with lock:
                state["readers"] -= 1
            c.delete(path)
        c.stop()

    def writer(i):
        c = server.client()
        tokens = []
        for _ in range(8):
            t0 = time.time()
            path, token = rw_acquire(c, parent, f"w{i}", False)
            writer_waits.append(time.time() - t0)
            tokens.append(token)
            with lock:
                state["writers"] += 1
                if state["writers"] > 1 or state["readers"]:
                    state["bad"] += 1
            time.sleep(0.01)
            with lock:
                state["writers"] -= 1
            c.delete(path)
            time.sleep(0.02)
        c.stop()
        writer_tokens.append(tokens)

    writer_tokens = []
    readers = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    writers = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    expect("zk rw: no writer beside any holder", state["bad"], 0)
    expect("zk rw: readers overlapped (%d at once)" % state["overlap"],
           state["overlap"] > 1, True)
    expect("zk rw: writers got in under a steady stream of readers, "
           "longest wait %.3fs" % max(writer_waits), max(writer_waits) < 2,
           True)
    expect("zk rw: each writer's tokens grow",
           all(t == sorted(t) for t in writer_tokens), True)

    zk = server.client()
    r, _ = rw_acquire(zk, parent, "u", True)
    expect("zk rw: read-to-write upgrade is refused",
           rw_acquire(zk, parent, "u", False)[0], "upgrade")
    zk.delete(r)
    w, _ = rw_acquire(zk, parent, "d", False)
    r, _ = rw_acquire(zk, parent, "d", True, timeout=2)
    expect("zk rw: a writer takes the read lock behind its own write node",
           r is not None, True)
    zk.delete(w)  # a downgrade: the read node stays
    other, _ = rw_acquire(zk, parent, "e", True, timeout=2)
    expect("zk rw: after the downgrade other readers come in",
           other is not None, True)
    expect("zk rw: the current layout counts a read node as a lock node, so "
           "its writers wait behind readers",
           sequence_of(r.rsplit("/", 1)[1]) is not None, True)
    zk.delete(r)
    zk.delete(other)
    zk.stop()


# --- Elections (C24) ---------------------------------------------------------

def elections_cases(server):
    parent = "/dlock/v/%1FeE"
    observer = server.client()
    seen, changes = [], threading.Event()

    def leader_of(zk):
        q = queue(zk.get_children(parent)) if zk.exists(parent) else []
        if not q:
            return None
        data, stat = zk.get(f"{parent}/{q[0]}")
        return data.split(b"\n", 1)[1], stat.czxid

    def observe():
        # Observe: a children watch on the election plus a data watch on the
        # leader's node (proclaim), re-armed after each event; never a poll.
        def on_change(_event=None):
            try:
                observer.get_children(parent, watch=on_change)
                leader = leader_of(observer)
                if leader:
                    first = queue(observer.get_children(parent))[0]
                    observer.get(f"{parent}/{first}", watch=on_change)
            except KazooException:
                return  # closing, or the leader left meanwhile: next event
            if not seen or seen[-1] != leader:
                seen.append(leader)
                changes.set()
        observer.ensure_path(parent)
        on_change()

    observe()
    campaigners = [server.client() for _ in range(3)]
    nodes = [c.create(f"{parent}/c{i}-lock-", b"dlock1 1 0 0 0 c%d\nv%d" % (i, i),
                      ephemeral=True, sequence=True)
             for i, c in enumerate(campaigners)]
    time.sleep(0.3)
    expect("zk elect: the first campaigner leads, its value seen",
           seen[-1][0], b"v0")
    first_term = seen[-1][1]
    campaigners[0].set(nodes[0], b"dlock1 1 0 0 0 c0\nv0-new")
    time.sleep(0.3)
    expect("zk elect: a proclaimed value reaches the observer",
           seen[-1][0], b"v0-new")
    campaigners[0].stop()  # the leader's session ends
    campaigners[0].close()
    deadline = time.time() + 5
    while time.time() < deadline and seen[-1][0] != b"v1":
        changes.clear()
        changes.wait(0.5)
    expect("zk elect: the next campaigner leads once the leader's session "
           "ends", seen[-1][0], b"v1")
    expect("zk elect: its term (czxid) is larger", seen[-1][1] > first_term,
           True)
    for c in campaigners[1:]:
        c.stop()
    observer.stop()


# --- Multi-locks (C25): one multi enqueues in every name's queue -------------

def multi_cases(server):
    zk = server.client()
    names = ["/dlock/v/ma", "/dlock/v/mb", "/dlock/v/mc"]
    for n in names:
        zk.ensure_path(n)
    errors, holders, bad = [], {n: 0 for n in names}, [0]
    lock = threading.Lock()

    def worker(i):
        c = server.client()
        order = names if i % 2 else list(reversed(names))
        try:
            for _ in range(10):
                t = c.transaction()
                for n in order:
                    t.create(f"{n}/w{i}-lock-", b"", ephemeral=True,
                             sequence=True)
                paths = t.commit()
                assert all(isinstance(p, str) for p in paths), paths
                # Held when first in every queue; wait on the predecessor of
                # the first queue where it is not.
                end = time.time() + 20
                while time.time() < end:
                    blocked = None
                    for n, p in zip(order, paths):
                        q = queue(c.get_children(n))
                        i_ = q.index(p.rsplit("/", 1)[1])
                        if i_ > 0:
                            blocked = f"{n}/{q[i_ - 1]}"
                            break
                    if blocked is None:
                        break
                    wait_event(c, lambda cb: c.exists(blocked, watch=cb), 5)
                else:
                    raise RuntimeError("deadlock: not held in 20 s")
                with lock:
                    for n in order:
                        holders[n] += 1
                        if holders[n] > 1:
                            bad[0] += 1
                time.sleep(0.002)
                with lock:
                    for n in order:
                        holders[n] -= 1
                t = c.transaction()
                for p in paths:
                    t.delete(p)
                t.commit()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
        finally:
            c.stop()

    run_threads(worker, 6)
    expect("zk multi: 6 clients, opposite orders, 60 multi-locks: no deadlock",
           errors[:1], [])
    expect("zk multi: each name held by one at a time", bad[0], 0)
    expect("zk multi: nothing left behind",
           sum(len(zk.get_children(n)) for n in names), 0)
    # One multi's nodes come in the same order in every queue.
    a, b = server.client(), server.client()
    for _ in range(20):
        ta, tb = a.transaction(), b.transaction()
        for n in names:
            ta.create(f"{n}/a-lock-", b"", ephemeral=True, sequence=True)
        for n in reversed(names):
            tb.create(f"{n}/b-lock-", b"", ephemeral=True, sequence=True)
        ra, rb = [], []
        t1 = threading.Thread(target=lambda: ra.extend(ta.commit()))
        t2 = threading.Thread(target=lambda: rb.extend(tb.commit()))
        t1.start(); t2.start(); t1.join(); t2.join()
        orders = set()
        for n in names:
            q = queue(zk.get_children(n))
            orders.add(tuple(x[0] for x in q))
        for p in ra + rb:
            zk.delete(p)
        if len(orders) != 1:
            break
    expect("zk multi: two multis racing: the same order in every queue",
           len(orders), 1)
    a.stop(); b.stop(); zk.stop()


def main():
    server = Server()
    try:
        semaphore_cases(server)
        rw_cases(server)
        elections_cases(server)
        multi_cases(server)
    finally:
        server.stop()
    finish()


if __name__ == "__main__":
    main()
