#!/usr/bin/env python3
"""Turns the history checker's result lines into the matrix of
docs/reliability.md.

    build/test/tests/history/history_test | scripts/history_matrix.py
    scripts/history_matrix.py < build/test/Testing/Temporary/LastTest.log

Reads lines "HISTORY <backend> <scenario>: grants N, overlaps N (max X ms),
..." (as history_test prints them) and writes a Markdown table: one row per
scenario, one column per backend.
"""
import re
import sys

BACKENDS = ["redis", "redis_aof", "zookeeper", "postgres_lease",
            "postgres_session", "etcd", "etcd_cluster"]
LINE = re.compile(r"HISTORY (\S+) (\S+): (.*)")


def number(pattern, text, default=None):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else default


def cell(summary):
    overlaps = number(r"overlaps (\d+)", summary, 0)
    max_overlap = number(r"overlaps \d+ \(max ([\d.]+) ms\)", summary, 0)
    stale = number(r"stale writes accepted (\d+)", summary, 0)
    late = number(r"late notices (\d+)", summary, 0)
    regress = number(r"token regressions (\d+)", summary, 0)
    lead = number(r"earliest notice lead ([\d.]+) ms", summary)
    recovery = number(r"recovery after kill ([\d.]+) ms", summary)
    back = number(r"all granted ([\d.]+) ms after the heal", summary)
    m = re.search(r"grants after heal per worker \[([-\d ]+)\]", summary)
    never = m is not None and "0" in m.group(1).split()
    parts = []
    if overlaps or late or stale:
        parts.append(f"**overlap {max_overlap:.0f} ms**" if overlaps else "")
        parts.append(f"**{late:.0f} late notices**" if late else "")
        parts.append(f"**{stale:.0f} stale writes accepted**" if stale else "")
    else:
        parts.append("overlap 0")
    if regress:
        parts.append(f"{regress:.0f} token regressions")
    if lead is not None:
        parts.append(f"told {lead:.0f} ms before the next grant")
    if recovery is not None:
        parts.append(f"taken over {recovery / 1000:.2f} s after the kill")
    if never:
        parts.append("**a worker never got the lock back**")
    elif back is not None and back >= 20000:
        parts.append(f"**all workers back only after {back / 1000:.0f} s**")
    elif back is not None:
        parts.append(f"all workers back in {back / 1000:.1f} s")
    return ", ".join(p for p in parts if p)


def main():
    results = {}
    order = []
    for line in sys.stdin:
        m = LINE.search(line)
        if not m:
            continue
        backend, scenario, summary = m.groups()
        if scenario not in order:
            order.append(scenario)
        results[(scenario, backend)] = cell(summary)
    used = [b for b in BACKENDS if any(k[1] == b for k in results)]
    print("| scenario | " + " | ".join(used) + " |")
    print("| --- |" + " --- |" * len(used))
    for scenario in order:
        row = [results.get((scenario, b), "n/a") for b in used]
        print(f"| {scenario} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
