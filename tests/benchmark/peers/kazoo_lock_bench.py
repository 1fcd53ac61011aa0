"""The peer of the zk:// benchmark: kazoo's Lock recipe on the same server.

    python3 kazoo_lock_bench.py <hosts> <seconds> <threads>

Each thread of one KazooClient takes and releases a lock of its own for
<seconds>; prints "RATE <acquire+release pairs per second>".
"""
import sys
import threading
import time

from kazoo.client import KazooClient


def main():
    hosts, seconds, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    client = KazooClient(hosts=hosts)
    client.start(timeout=10)
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def run(index):
        lock = client.Lock("/kazoo-bench/lock-%d" % index, "bench")
        done = 0
        while time.monotonic() < stop:
            lock.acquire()
            lock.release()
            done += 1
        counts[index] = done

    start = time.monotonic()
    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print("RATE %.1f" % (sum(counts) / (time.monotonic() - start)))
    client.stop()


if __name__ == "__main__":
    main()
