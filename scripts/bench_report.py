#!/usr/bin/python3
"""Writes docs/benchmarks.md: dlock against its ceilings and its peers.

    /usr/bin/python3 scripts/bench_report.py [--quick] [--out DIR] [--build DIR]
        [--primitives-only]

Run through scripts/bench-report.sh, which installs the dependencies and
builds what this needs into build/report first. Starts a redis-server, a
ZooKeeper, a PostgreSQL and two Redis Clusters (dlock_bench_servers) and a process per peer
library that runs slice after slice (its --serve mode), then, round after
round, runs one short slice each of dlock (`dlock bench --json`), of each
backend's ceiling and of each peer, in an order shuffled afresh for each
round by a seeded generator (--seed; the seed is recorded), so that load that comes and goes on a shared machine hits all of them
alike. The primitives follow, in rounds of their own
(bench_report_primitives.py). The watchdog and memory scenarios run once
per backend at the end, while the charts are drawn. Rates and latencies are medians over the
rounds; a ratio is the median of the per-round ratios, with their spread. Writes DIR/benchmarks.md (DIR: docs/
unless --out), its charts as SVG in DIR/benchmarks/ (matplotlib) and every
record it measured in DIR/benchmarks/records.json. The measuring is in
bench_report_measure.py, the figures, tables and markdown in
bench_report_render.py, the charts in bench_report_charts.py.

Nothing is skipped: a missing server, peer, tool or package stops the run
with a message saying what is missing, and the report is not written.
"""
import argparse
import datetime
import json
import os
import random
import sys
import time

# Before its own modules are imported: they leave no __pycache__ in scripts/.
sys.dont_write_bytecode = True
# noqa: E402 on each: imported after the line above on purpose.
from bench_report_charts import charts  # noqa: E402
from bench_report_measure import (  # noqa: E402
    CEILINGS, CLUSTER_MASTERS, CLUSTER_PEERS, CONTENDERS, PEERS, REPO, THREADS, Failure,
    Measurer, Servers, Tools, close, dlocks,
    measure, measure_once, reap, start_workers)
from bench_report_render import machine, targets, versions, write_report  # noqa: E402
import bench_report_primitives as primitives  # noqa: E402

# Who is measured, for tests/benchmark/bench_report_quick_test.py too.
__all__ = ["CEILINGS", "CLUSTER_MASTERS", "CLUSTER_PEERS", "CONTENDERS", "PEERS", "THREADS",
           "dlocks", "main"]


def load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one round of short slices (about half a minute), for a smoke test")
    parser.add_argument("--out", default=os.path.join(REPO, "docs"),
                        help="where benchmarks.md and benchmarks/ go (default docs/)")
    parser.add_argument("--build", default=os.path.join(REPO, "build", "report"),
                        help="the build with dlock and the benchmarks (default build/report)")
    parser.add_argument("--dlock", help="the dlock binary (default BUILD/adapters/cli/dlock)")
    parser.add_argument("--rounds", type=int, help="rounds (default 5; --quick: 1)")
    parser.add_argument("--slice", type=float, help="seconds per slice (default 1; --quick: 0.2)")
    parser.add_argument("--seed", type=int, help="seed of the slices' order (default: "
                        "a random one; records.json and the report say which)")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per slice (default 0.2; "
                        "--quick: 0.05)")
    parser.add_argument("--primitives-only", action="store_true",
                        help="measure the primitives' section alone (semaphores, read locks, "
                        "elections and their peers) and write it into OUT/benchmarks.md beside "
                        "the records OUT/benchmarks/records.json has already")
    parser.add_argument("--rerender", action="store_true",
                        help="measure nothing: write OUT/benchmarks.md again from the records "
                        "of OUT/benchmarks/records.json (after a change to the report's text)")
    args = parser.parse_args()
    if args.rerender:
        return rerender(args)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 5
    if args.slice is None:
        args.slice = 0.2 if args.quick else 1.0
    if args.seed is None:
        args.seed = random.randrange(2 ** 32)
    if args.warmup is None:
        args.warmup = 0.05 if args.quick else 0.2

    children = []  # stopped in the background; waited for at the end
    try:
        if args.primitives_only:
            return primitives_only(args, children)
        return report(args, children)
    finally:
        for child in children:
            reap(child)


def rerender(args):
    """Writes the report again from the records a run saved, unchanged: the
    same figures, in the text of this version of bench_report_render.py."""
    out_dir = os.path.abspath(args.out)
    with open(os.path.join(out_dir, "benchmarks", "records.json")) as f:
        saved = json.load(f)

    def int_keys(d):
        # JSON made the thread and client counts strings.
        if not isinstance(d, dict):
            return d
        return {int(k) if k.isdigit() else k: int_keys(v) for k, v in d.items()}

    records = int_keys(saved["uncontended_and_contention"])
    meta = saved["meta"]
    # A run records how it ran; records from before it did ran the defaults.
    run = meta.get("run", {})
    args.rounds = run.get("rounds", len(records["redis"]["uncontended"][1]["dlock"]))
    args.slice = run.get("slice", 1.0)
    args.warmup = run.get("warmup", 0.2)
    args.quick = run.get("quick", False)
    path = os.path.join(out_dir, "benchmarks.md")
    write_report(path, "benchmarks", records, saved["once"], meta, args,
                 int_keys(saved.get("primitives")))
    log("wrote %s from %s/benchmarks/records.json" % (path, out_dir))
    return 0


def shuffler(seed):
    """shuffled(items): a copy in an order drawn from a generator seeded
    with `seed`."""
    rng = random.Random(seed)

    def shuffled(items):
        items = list(items)
        rng.shuffle(items)
        return items

    return shuffled


def measure_primitives(measurer, args, started_at, load_start):
    """The primitives' records with how they were measured."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    records = primitives.measure(measurer, args.rounds, args.quick, log,
                                 shuffler(args.seed + 1))
    return {"meta": {"date": date, "rounds": args.rounds, "slice": args.slice,
                     "warmup": args.warmup, "seed": args.seed + 1, "quick": args.quick,
                     "load_start": load_start, "load_end": load_average(),
                     "took": time.monotonic() - started_at},
            "records": records}


def primitives_only(args, children):
    """Measures the primitives alone and writes them into the report whose
    records OUT/benchmarks/records.json holds (the other sections keep their
    figures and their date)."""
    started = time.monotonic()
    load_start = load_average()
    out_dir = os.path.abspath(args.out)
    records_path = os.path.join(out_dir, "benchmarks", "records.json")
    tools = Tools(os.path.abspath(args.build), args.dlock and os.path.abspath(args.dlock))
    try:
        with open(records_path) as f:
            saved = json.load(f)
        tools.check()
        workers = start_workers(tools, primitives.peer_libraries())
        children += [w.process for w in workers.values()]
        servers = Servers(tools)
        children.append(servers.process)
        measurer = Measurer(tools, servers, args.slice, args.warmup, workers)
        saved["primitives"] = measure_primitives(measurer, args, started, load_start)
    except (Failure, OSError) as e:
        log("bench_report: %s" % e)
        return 1
    finally:
        for child in children:
            close(child)
    with open(records_path, "w") as f:
        json.dump(saved, f, indent=1, default=str)
    return rerender(args)


def log(message):
    print(message, file=sys.stderr, flush=True)


def report(args, children):
    """Measures and writes the report: 0, or 1 when something failed."""
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = load_average()
    tools = Tools(os.path.abspath(args.build), args.dlock and os.path.abspath(args.dlock))
    try:
        tools.check()
        log("starting the peers, redis-server (plain and TLS), two Redis Clusters, ZooKeeper "
            "and PostgreSQL")
        workers = start_workers(tools)
        children += [w.process for w in workers.values()]
        servers = Servers(tools)
        children.append(servers.process)
        measurer = Measurer(tools, servers, args.slice, args.warmup, workers)
        records = measure(measurer, args.rounds, args.quick, log, args.seed)
        prims = measure_primitives(measurer, args, time.monotonic(), load_average())
        for worker in workers.values():
            close(worker.process)
        dlock_version = records["redis"]["uncontended"][1]["dlock"][0].get("version")
        once, (svgs, versions_run) = measure_once(
            measurer, args.quick, log,
            lambda: (charts(records), versions(tools, dlock_version)))
    except Failure as e:
        log("bench_report: %s" % e)
        return 1
    finally:
        for child in children:
            close(child)
    meta = {
        "date": date,
        "machine": machine(),
        "load_start": load_start,
        "load_end": load_average(),
        "versions": versions_run,
        "took": time.monotonic() - started,
        "seed": args.seed,
        "run": {"rounds": args.rounds, "slice": args.slice, "warmup": args.warmup,
                "quick": args.quick},
    }
    out_dir = os.path.abspath(args.out)
    charts_dir = os.path.join(out_dir, "benchmarks")
    os.makedirs(charts_dir, exist_ok=True)
    for name, svg in svgs.items():
        with open(os.path.join(charts_dir, name), "w") as f:
            f.write(svg)
    with open(os.path.join(charts_dir, "records.json"), "w") as f:
        json.dump({"meta": meta, "uncontended_and_contention": records, "once": once,
                   "primitives": prims}, f, indent=1, default=str)
    path = os.path.join(out_dir, "benchmarks.md")
    write_report(path, "benchmarks", records, once, meta, args, prims)
    log("wrote %s and %d charts in %s (%.0f s)" % (path, len(svgs), charts_dir,
                                                   time.monotonic() - started))
    print("\n".join(targets(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
