"""What the validators of docs/design/primitives.md share: expectations
printed as PASS/FAIL lines, free loopback ports, worker threads, the exit
status."""

import socket
import sys
import threading

FAILED = []


def expect(what, got, want):
    """Prints PASS or FAIL for `what`; `want` is a value or a predicate."""
    ok = want(got) if callable(want) else got == want
    print(("PASS " if ok else "FAIL ") + what + (
        "" if ok else f": got {got!r}"))
    if not ok:
        FAILED.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_threads(worker, count):
    """Runs worker(i) for i in range(count) on threads, and waits for all."""
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def finish():
    if FAILED:
        print(f"{len(FAILED)} expectation(s) failed")
        sys.exit(1)
    print("all expectations met")
