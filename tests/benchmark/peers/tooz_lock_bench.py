"""The peer of the postgres:// benchmark: tooz's PostgreSQL driver, same server.

    /usr/bin/python3 tooz_lock_bench.py <postgresql-url> <seconds> <threads>

Each thread of one coordinator takes and releases a lock of its own for
<seconds>; prints "RATE <acquire+release pairs per second>". Debian's
python3-tooz and python3-psycopg2 are installed for /usr/bin/python3, not for
another python on PATH.

The driver is measured as shipped: its lock opens a connection on every
acquire (pg_advisory_lock) and closes it on release. Its advisory-lock key is
the first two bytes of the name's md5, so two names can share a key; the
names below are chosen with distinct keys, so that the threads never wait
for each other (each stays uncontended, as in dlock's measurement).
"""
import hashlib
import sys
import threading
import time

from tooz import coordination


def distinct_key_names(count):
    names, keys, i = [], set(), 0
    while len(names) < count:
        name = b"tooz-bench-%d" % i
        key = hashlib.md5(name).digest()[0:2]
        if key not in keys:
            keys.add(key)
            names.append(name)
        i += 1
    return names


def main():
    url, seconds, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    coordinator = coordination.get_coordinator(url, b"dlock-bench")
    coordinator.start()
    names = distinct_key_names(threads)
    counts = [0] * threads
    errors = []
    stop = time.monotonic() + seconds

    def run(index):
        lock = coordinator.get_lock(names[index])
        done = 0
        try:
            while time.monotonic() < stop:
                if not lock.acquire():
                    raise RuntimeError("a blocking acquire returned False")
                lock.release()
                done += 1
        except Exception as e:  # reported below; the rate would be wrong
            errors.append(repr(e))
        counts[index] = done

    start = time.monotonic()
    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - start
    coordinator.stop()
    if errors:
        print("ERROR %s" % errors[0])
        sys.exit(1)
    print("RATE %.1f" % (sum(counts) / elapsed))


if __name__ == "__main__":
    main()
