#!/usr/bin/python3
"""Runs the proposed PostgreSQL functions of issue 24 against a real server.

    /usr/bin/python3 docs/design/validation/postgres_primitives.py   (as root)

Creates a throwaway cluster with initdb as the postgres user in a temporary
directory, starts it on a free port (unix socket there, fsync off; stopped
at exit, only that server), creates version 5's schema from the statements
of backends/postgres/pg_schema.cc, applies the changes this design makes to
its acquire and release statements (WRITER_CHANGES below), loads
postgres_primitives.sql, and plays the scenarios of
docs/design/primitives.md ("Validated"). Not part of CI: the evidence the
design rests on, and the cases implementers turn into backend tests.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psycopg2  # python3-psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validation_common import expect, finish, free_port, run_threads  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BIN = "/usr/lib/postgresql/15/bin"
TABLE = "dlock_locks"
CHANNEL = TABLE + "_released"
NS = "v"

FILL = {"{T}": '"%s"' % TABLE, "{M}": '"%s_meta"' % TABLE,
        "{S}": '"%s_fencing"' % TABLE, "{F}": '"%s_s_' % TABLE,
        "{V}": '"%s_liveness"' % TABLE, "{H}": '"%s_holders"' % TABLE}

# What this design changes in version 5's statements (docs/design/
# primitives.md, "PostgreSQL"): the acquire statement resets the row's mode
# when it takes a row (a lapsed read-held row, a lapsed hand-off) and returns
# the mode, so that a writer refused by readers asks write_acquire; the
# release statement leaves rows of mode 'w' (a writer that reads too) to
# write_release.
WRITER_CHANGES = {
    "acquire": [
        ("   wanted, live_ids) =",
         "   wanted, live_ids, mode, claim_owner, claim_until) ="),
        ("          ELSE l.live_ids || $5::text END\n",
         "          ELSE l.live_ids || $5::text END,\n"
         "     CASE WHEN d.take AND NOT d.again THEN NULL ELSE l.mode END,\n"
         "     CASE WHEN d.take THEN NULL ELSE l.claim_owner END,\n"
         "     CASE WHEN d.take THEN NULL ELSE l.claim_until END\n"),
        ("      - clock_timestamp()) * 1000))::bigint AS left_ms),",
         "      - clock_timestamp()) * 1000))::bigint AS left_ms, l.mode),"),
    ],
    "release": [
        ("  WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3\n",
         "  WHERE l.namespace = $1 AND l.name = $2 AND l.owner = $3\n"
         "    AND l.mode IS DISTINCT FROM 'w'\n"),
    ],
}


def as_postgres(args, **kw):
    return ["runuser", "-u", "postgres", "--"] + args


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-prim-pg-")
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        if not os.path.exists(os.path.join(BIN, "initdb")):
            raise SystemExit("no PostgreSQL 15 (apt-get install -y postgresql)")
        subprocess.run(as_postgres([os.path.join(BIN, "initdb"), "-D",
                                    self.data, "-A", "trust", "-U",
                                    "postgres"]),
                       check=True, stdout=subprocess.DEVNULL)
        self.proc = subprocess.Popen(as_postgres(
            [os.path.join(BIN, "postgres"), "-D", self.data, "-p",
             str(self.port), "-k", self.dir, "-c", "listen_addresses=",
             "-c", "fsync=off"]), stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                self.connect().close()
                return
            except psycopg2.OperationalError:
                time.sleep(0.05)
        raise SystemExit("postgres did not start")

    def connect(self):
        c = psycopg2.connect(host=self.dir, port=self.port, user="postgres",
                             dbname="postgres")
        c.autocommit = True
        return c

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def statements():
    with open(os.path.join(ROOT, "backends", "postgres", "pg_schema.cc")) as f:
        cc = f.read()
    out = {}
    for name, var in (("create", "kCreate"), ("acquire", "kAcquire"),
                      ("release", "kRelease"), ("renew", "kRenew")):
        m = re.search(r"constexpr char %s\[\] = R\"sql\((.*?)\)sql\";" % var,
                      cc, re.S)
        out[name] = m.group(1)
    for name, changes in WRITER_CHANGES.items():
        for old, new in changes:
            assert old in out[name], (name, old)
            out[name] = out[name].replace(old, new)
    with open(os.path.join(HERE, "postgres_primitives.sql")) as f:
        out["v6"] = f.read()
    for name, text in out.items():
        for k, v in FILL.items():
            text = text.replace(k, v)
        out[name] = text
    return out


class Db:
    def __init__(self, conn):
        self.c = conn
        self.cur = conn.cursor()

    def q(self, sql, *args):
        self.cur.execute(sql, args)
        return self.cur.fetchall() if self.cur.description else None

    def one(self, sql, *args):
        rows = self.q(sql, *args)
        return tuple(rows[0]) if rows else None


F = '"%s_s_' % TABLE


def sem(db, name, owner, n, permits=1, lease=5000, wait=False, ttl=0,
        reserve=1000):
    return db.one('SELECT * FROM %ssem_acquire"(%%s,%%s,%%s,%%s,%%s,%%s,%%s,'
                  '%%s,%%s,%%s)' % F, NS, "\x1fs" + name, owner, lease, wait,
                  "id-" + owner, ttl, n, permits, reserve)


def sem_release(db, name, owner, holds=1):
    return db.one('SELECT %ssem_release"(%%s,%%s,%%s,%%s,%%s)' % F, NS,
                  "\x1fs" + name, owner, holds, CHANNEL)[0]


def semaphore_cases(db, listener):
    a = sem(db, "S", "t:A", 2)
    b = sem(db, "S", "t:B", 2)
    expect("sem: two of N=2", (a[0], b[0]), (1, 1))
    expect("sem: tokens grow per grant", b[1] > a[1], True)
    expect("sem: the lowest free permit slots", (a[4], b[4]), ([0], [1]))
    expect("sem: a third try is refused", sem(db, "S", "t:C", 2)[0], 0)
    expect("sem: another N in force: -2 and the N",
           sem(db, "S", "t:D", 3)[:2], (-2, 2))
    expect("sem: re-entry: same token, 2 holds",
           sem(db, "S", "t:A", 2)[:3], (1, a[1], 2))
    expect("sem: re-entry with other permits: -3",
           sem(db, "S", "t:A", 2, permits=2)[:2], (-3, 1))
    expect("sem: a waiter is refused and keeps a place",
           (sem(db, "S", "t:C", 2, wait=True)[0],
            db.one('SELECT claim_owner FROM "%s" WHERE name = %%s' % TABLE,
                   "\x1fsS")[0]), (0, "t:C"))
    expect("sem: non-owner release: NULL", sem_release(db, "S", "t:Z"), None)
    sem_release(db, "S", "t:A")
    listener.drain()
    expect("sem: A's last release", sem_release(db, "S", "t:A"), 0)
    expect("sem: ...is announced to the waiter",
           listener.wait_for(NS + ":\x1fsS"), True)
    expect("sem: a newcomer cannot take C's place",
           sem(db, "S", "t:E", 2)[0], 0)
    c = sem(db, "S", "t:C", 2, wait=True)
    expect("sem: C gets it, token above all", c[0] == 1 and c[1] > b[1], True)
    expect("sem: ...in A's slot", c[4], [0])
    sem_release(db, "S", "t:B")
    sem_release(db, "S", "t:C")
    expect("sem: nothing held: the row is free",
           db.one('SELECT expires_at <= clock_timestamp() FROM "%s" WHERE '
                  'name = %%s' % TABLE, "\x1fsS")[0], True)
    expect("sem: then another N may start", sem(db, "S", "t:D", 3)[0], 1)
    sem_release(db, "S", "t:D")
    sem(db, "M", "t:A", 3)
    expect("sem: 3 at once while 1 is held: refused",
           sem(db, "M", "t:B", 3, permits=3, wait=True)[0], 0)
    expect("sem: a single permit would starve B: refused",
           sem(db, "M", "t:C", 3)[0], 0)
    sem_release(db, "M", "t:A")
    expect("sem: B gets its 3 in one step, slots 0 to 2",
           sem(db, "M", "t:B", 3, permits=3, wait=True)[0:5:4], (1, [0, 1, 2]))
    sem_release(db, "M", "t:B")
    sem(db, "L", "t:A", 1, lease=60000, ttl=150)
    expect("sem: full while A's client lives", sem(db, "L", "t:B", 1)[0], 0)
    time.sleep(0.25)
    expect("sem: A's client lapsed: its permit comes back",
           sem(db, "L", "t:B", 1)[0], 1)
    expect("sem: A's renewal finds nothing",
           db.one('SELECT %sholder_renew"(%%s,%%s,%%s,%%s)' % F, NS, "\x1fsL",
                  "t:A", 60000)[0], False)
    expect("sem: B's renewal works",
           db.one('SELECT %sholder_renew"(%%s,%%s,%%s,%%s)' % F, NS, "\x1fsL",
                  "t:B", 60000)[0], True)
    expect("sem: the object row lives as long as its holders",
           db.one('SELECT expires_at > clock_timestamp() + interval \'50 s\' '
                  'FROM "%s" WHERE name = %%s' % TABLE, "\x1fsL")[0], True)
    sem_release(db, "L", "t:B")


def acquire(db, name, owner, lease=5000, wait=False, ttl=0):
    """The lease-mode acquire statement (changed): got, holds, token, left,
    mode."""
    return db.one("EXECUTE dlock_acquire(%s,%s,%s,%s,%s,%s)", NS, name, owner,
                  lease, "id-" + owner, ttl)


def release(db, name, owner, holds=1):
    """The release statement, then write_release when it found nothing."""
    rows = db.q("EXECUTE dlock_release(%s,%s,%s,%s,%s,%s)", NS, name, owner,
                holds, CHANNEL, 0)
    if rows:
        return rows[0][0]
    return db.one('SELECT %swrite_release"(%%s,%%s,%%s,%%s,%%s)' % F, NS, name,
                  owner, holds, CHANNEL)[0]


def write(db, name, owner, lease=5000, wait=False, ttl=0, intent=1000):
    """A writer as the backend runs it: the statement, and write_acquire when
    the statement found a read-held or handed-over row."""
    got = acquire(db, name, owner, lease, wait, ttl)
    if got[0]:
        return (1, got[2], got[1], 0)
    if got[4] in ("r", "v"):
        return db.one('SELECT * FROM %swrite_acquire"(%%s,%%s,%%s,%%s,%%s,%%s,'
                      '%%s,%%s)' % F, NS, name, owner, lease, wait,
                      "id-" + owner, ttl, intent)
    return (0, 0, 0, got[3])


def read(db, name, owner, lease=5000, wait=False, ttl=0):
    return db.one('SELECT * FROM %sread_acquire"(%%s,%%s,%%s,%%s,%%s,%%s,%%s)'
                  % F, NS, name, owner, lease, wait, "id-" + owner, ttl)


def read_release(db, name, owner, holds=1):
    return db.one('SELECT %sread_release"(%%s,%%s,%%s,%%s,%%s)' % F, NS, name,
                  owner, holds, CHANNEL)[0]


def mode_of(db, name):
    return db.one('SELECT mode, owner FROM "%s" WHERE namespace = %%s AND '
                  'name = %%s' % TABLE, NS, name)


def rw_cases(db, listener):
    a = read(db, "RW", "t:A")
    b = read(db, "RW", "t:B")
    expect("rw: readers share", (a[0], b[0]), (1, 1))
    expect("rw: the row is read-held", mode_of(db, "RW"), ("r", ""))
    expect("rw: the usual acquire statement refuses a writer, naming mode r",
           acquire(db, "RW", "t:W")[0:5:4], (False, "r"))
    expect("rw: a waiting writer is refused with an intent",
           (write(db, "RW", "t:W", wait=True)[0],
            db.one('SELECT claim_owner FROM "%s" WHERE name = %%s' % TABLE,
                   "RW")[0]), (0, "t:W"))
    expect("rw: no new reader while W waits",
           read(db, "RW", "t:C", wait=True)[0], 0)
    expect("rw: a reader re-enters", read(db, "RW", "t:A")[0:3:2], (1, 2))
    expect("rw: read-to-write upgrade refused: -4",
           write(db, "RW", "t:A", wait=True)[0], -4)
    read_release(db, "RW", "t:A", holds=2)
    listener.drain()
    expect("rw: last reader's release", read_release(db, "RW", "t:B"), 0)
    expect("rw: ...announced", listener.wait_for(NS + ":RW"), True)
    expect("rw: ...hands the row to W", mode_of(db, "RW"), ("v", ""))
    expect("rw: no reader slips in", read(db, "RW", "t:C", wait=True)[0], 0)
    expect("rw: nor another writer", write(db, "RW", "t:X", wait=True)[0], 0)
    w = write(db, "RW", "t:W", wait=True)
    expect("rw: W gets it, token above the readers'",
           w[0] == 1 and w[1] > b[1], True)
    listener.drain()
    expect("rw: W's release (the usual statement)", release(db, "RW", "t:W"),
           0)
    expect("rw: ...wakes the refused readers", listener.wait_for(NS + ":RW"),
           True)
    expect("rw: the reader gets in", read(db, "RW", "t:C")[0], 1)
    read_release(db, "RW", "t:C")

    w = write(db, "DG", "t:W")
    expect("rw: the writer reads too, with its token",
           read(db, "DG", "t:W")[:2], (1, w[1]))
    expect("rw: marked w", mode_of(db, "DG"), ("w", "t:W"))
    expect("rw: releasing the write hold keeps the read",
           release(db, "DG", "t:W"), 0)
    expect("rw: ...read-held", mode_of(db, "DG"), ("r", ""))
    expect("rw: others read", read(db, "DG", "t:R")[0], 1)
    expect("rw: writers wait", write(db, "DG", "t:X")[0], 0)
    read_release(db, "DG", "t:W")
    read_release(db, "DG", "t:R")
    x = write(db, "DG", "t:X")
    expect("rw: the next writer's token is larger", x[0] == 1 and x[1] > w[1],
           True)
    release(db, "DG", "t:X")

    read(db, "LV", "t:A", lease=60000, ttl=150)
    time.sleep(0.25)
    expect("rw: readers whose clients lapsed no longer keep writers out "
           "(the usual statement takes the row)", acquire(db, "LV", "t:X")[0],
           True)
    expect("rw: ...and resets its mode", mode_of(db, "LV"), (None, "t:X"))
    release(db, "LV", "t:X")


def campaign(db, name, owner, value, ttl=0, lease=5000):
    return db.one('SELECT * FROM %scampaign"(%%s,%%s,%%s,%%s,%%s,%%s,%%s,%%s)'
                  % F, NS, "\x1fe" + name, owner, lease, "id-" + owner, ttl,
                  psycopg2.Binary(value), CHANNEL)


def election_cases(db, listener):
    listener.drain()
    a = campaign(db, "E", "t:A", b"10.0.0.1:80")
    expect("elect: A leads", a[0], 1)
    expect("elect: the new leader is announced",
           listener.wait_for(NS + ":\x1feE"), True)
    expect("elect: B is refused", campaign(db, "E", "t:B", b"b")[0], 0)
    expect("elect: Leader() reads owner, value, term",
           db.one('SELECT owner, value::text, fencing_token FROM "%s" WHERE '
                  'name = %%s' % TABLE, "\x1feE"),
           ("t:A", "\\x31302e302e302e313a3830", a[1]))
    listener.drain()
    expect("elect: resign is the lock's release",
           release(db, "\x1feE", "t:A"), 0)
    expect("elect: ...announced (the row is always wanted)",
           listener.wait_for(NS + ":\x1feE"), True)
    b = campaign(db, "E", "t:B", b"b")
    expect("elect: B leads, the term grows", b[0] == 1 and b[1] > a[1], True)
    release(db, "\x1feE", "t:B")


def multi_cases(db, server):
    acquire(db, "m2", "t:Z")
    got = db.one('SELECT * FROM %sacquire_all"(%%s,%%s,%%s,%%s,%%s,%%s,%%s)' % F,
                 NS, ["m3", "m1", "m2"], "t:A", 5000, True, "id-t:A", 0)
    expect("multi: a held name: nothing taken, its index",
           (got[0], got[2]), (0, 3))
    expect("multi: ...none of the others is A's", db.one(
        'SELECT count(*) FROM "%s" WHERE owner = %%s' % TABLE, "t:A")[0], 0)
    release(db, "m2", "t:Z")
    got = db.one('SELECT * FROM %sacquire_all"(%%s,%%s,%%s,%%s,%%s,%%s,%%s)' % F,
                 NS, ["m3", "m1", "m2"], "t:A", 5000, True, "id-t:A", 0)
    expect("multi: all free: all taken", (got[0], db.one(
        'SELECT count(*) FROM "%s" WHERE owner = %%s' % TABLE, "t:A")[0]),
        (1, 3))
    for n in ("m1", "m2", "m3"):
        release(db, n, "t:A")
    # Opposite orders from many sessions at once never deadlock.
    errors, grants = [], [0]
    lock = threading.Lock()

    def worker(i):
        names = ["x", "y", "z"] if i % 2 else ["z", "y", "x"]
        owner = "t:%d" % i
        c = server.connect()
        d = Db(c)
        prepare(d, SQL)
        for _ in range(100):
            try:
                g = d.one('SELECT * FROM %sacquire_all"(%%s,%%s,%%s,%%s,%%s,'
                          '%%s,%%s)' % F, NS, names, owner, 5000, False,
                          "id-" + owner, 0)
                if g[0] == 1:
                    for n in names:
                        release(d, n, owner)
                    with lock:
                        grants[0] += 1
            except psycopg2.Error as e:
                errors.append(str(e))
        c.close()

    run_threads(worker, 6)
    expect("multi: 6 sessions, opposite orders, 600 tries: no deadlock error",
           errors[:1], [])
    expect("multi: ...some granted (%d)" % grants[0], grants[0] > 0, True)
    expect("multi: ...nothing left held", db.one(
        'SELECT count(*) FROM "%s" WHERE name IN (\'x\',\'y\',\'z\') AND '
        'expires_at > clock_timestamp()' % TABLE)[0], 0)


SQL = {}


def prepare(db, sql):
    db.cur.execute("PREPARE dlock_acquire(text,text,text,bigint,text,"
                   "bigint) AS " + sql["acquire"])
    db.cur.execute("PREPARE dlock_release(text,text,text,bigint,text,"
                   "bigint) AS " + sql["release"])


class Listener:
    """LISTEN on the release channel, as the backend's listener does."""

    def __init__(self, server):
        self.c = server.connect()
        self.c.cursor().execute('LISTEN "%s"' % CHANNEL)

    def drain(self):
        self.c.poll()
        self.c.notifies.clear()

    def wait_for(self, payload, timeout=2.0):
        import select
        end = time.time() + timeout
        while time.time() < end:
            self.c.poll()
            for n in self.c.notifies:
                if n.payload == payload:
                    self.c.notifies.clear()
                    return True
            select.select([self.c], [], [], 0.05)
        return False


def main():
    server = Server()
    try:
        sql = statements()
        conn = server.connect()
        db = Db(conn)
        conn.autocommit = True
        db.cur.execute(sql["create"])
        db.cur.execute(sql["v6"])
        SQL.update(sql)
        prepare(db, sql)
        listener = Listener(server)
        semaphore_cases(db, listener)
        rw_cases(db, listener)
        election_cases(db, listener)
        multi_cases(db, server)
    finally:
        server.stop()
    finish()


if __name__ == "__main__":
    main()
