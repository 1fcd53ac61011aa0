"""The primitives' part of the comparative report (issue 24): dlock's
semaphores, read and write locks and elections (`dlock bench --scenarios
semaphore,shared,exclusive,election`) beside their peers, measured in
rounds whose order is shuffled as the mutex's are, and the section of
docs/benchmarks.md that shows them.

The issue gives no speed target for the primitives, and neither do the
docs: the section prints ratios, no MET or MISSED.
"""
import json
import statistics

from bench_report_measure import Failure, dlock_results, run

# The backends measured and dlock's URI for each (dlock_bench_servers' keys):
# every one that offers a primitive today; one that does not says so in its
# `dlock bench` record, and the section shows its traits' note.
BACKENDS = {"redis": "redis", "redis-cluster": "redis_cluster3", "zookeeper": "zookeeper",
            "postgres": "postgres", "etcd": "etcd"}
TITLES = {"redis": "Redis", "redis-cluster": "Redis Cluster (3 masters)",
          "zookeeper": "ZooKeeper", "postgres": "PostgreSQL (lease)", "etcd": "etcd"}
SCENARIOS = ["semaphore", "shared", "exclusive", "election"]
THREADS = [1, 16]
# Quick mode (the bench_report_quick test, a CI cost): 16 threads, and
# only where a peer runs beside dlock (dlock's primitives on every backend
# are the adapters_cli_bench_backends_test's).
QUICK_THREADS = [16]
# The peers of each primitive on each backend, where one exists here.
PEERS = {
    ("redis", "semaphore"): ["redis-semaphore"],
    ("zookeeper", "semaphore"): ["kazoo"],
    ("zookeeper", "shared"): ["kazoo"],
    ("zookeeper", "exclusive"): ["kazoo"],
    ("zookeeper", "election"): ["kazoo", "tooz-zookeeper"],
}
HANDOVERS = {"quick": 3, "full": 20}  # resign hand-overs per round
LAPSES = {"quick": 0, "full": 3}  # lease lapses per round (dlock only)
LAPSE_LEASE = "1s"


def peer_libraries():
    """Every peer library the primitives need (a worker each)."""
    return sorted({p for peers in PEERS.values() for p in peers})


class Slices:
    """One slice of dlock or of a peer, on a primitive."""

    def __init__(self, measurer, quick):
        self.m = measurer
        self.mode = "quick" if quick else "full"

    def dlock(self, backend, scenario, threads):
        uri = self.m.servers[BACKENDS[backend]]["uri"]
        cmd = [self.m.tools.dlock, "bench", "--backend", uri, "--scenarios", scenario,
               "--duration", "%dms" % (self.m.slice_s * 1000),
               "--warmup", "%dms" % (self.m.warmup_s * 1000), "--json"]
        if scenario == "election":
            cmd += ["--handovers", str(HANDOVERS[self.mode]), "--lapses", str(LAPSES[self.mode]),
                    "--lease", LAPSE_LEASE]
            timeout = self.m.timeout() + 10 * LAPSES[self.mode]
        else:
            cmd += ["--threads", str(threads)]
            timeout = self.m.timeout()
        results = [r for r in dlock_results(run(cmd, "dlock bench", timeout))
                   if r.get("scenario") == scenario]
        if len(results) != 1:
            raise Failure("dlock bench printed no %s record on %s: %s" % (
                scenario, backend, json.dumps(results)))
        return results[0]

    def peer(self, backend, library, scenario, threads):
        args = ["--library", library, "--target", self.m.servers[BACKENDS[backend]]["host_port"],
                "--scenario", scenario]
        if scenario == "election":
            args += ["--handovers", str(HANDOVERS[self.mode])]
        else:
            args += ["--concurrency", str(threads), "--seconds", "%g" % self.m.slice_s,
                     "--warmup", "%g" % self.m.warmup_s]
        return self.m.workers[library].slice(args, self.m.timeout())


def cells(quick):
    """(backend, scenario, key): key is the threads, or "resign" for an
    election."""
    for backend in BACKENDS:
        for scenario in SCENARIOS:
            if quick and (backend, scenario) not in PEERS:
                continue
            threads = QUICK_THREADS if quick else THREADS
            for key in (["resign"] if scenario == "election" else threads):
                yield backend, scenario, key


def not_offered(cells_of_scenario):
    """Whether dlock's record said the backend does not offer it (its
    traits do not change between slices)."""
    return any(r.get("offered") is False for cell in cells_of_scenario.values()
               for r in cell.get("dlock", []))


def check(rec, who, backend, scenario, key):
    """A record that measured nothing fails the run; dlock's not-offered
    record is kept (the table says so)."""
    if rec.get("offered") is False:
        return
    figure = rec.get("resign_handover_us", {}).get("p50") if scenario == "election" else rec.get(
        "pairs_per_sec")
    if not figure:
        raise Failure("%s on %s, %s %s, measured nothing: %s" % (
            who, backend, scenario, key, json.dumps(rec)))


def measure(measurer, rounds, quick, log, shuffled):
    """prims[backend][scenario][key][contender] = [record per round]."""
    slices = Slices(measurer, quick)
    prims = {}
    for r in range(rounds):
        for backend, scenario, key in shuffled(list(cells(quick))):
            scenario_cells = prims.setdefault(backend, {}).setdefault(scenario, {})
            if not_offered(scenario_cells):
                continue
            cell = scenario_cells.setdefault(key, {})
            for who in shuffled(["dlock"] + PEERS.get((backend, scenario), [])):
                threads = key if key != "resign" else 0
                rec = (slices.dlock(backend, scenario, threads) if who == "dlock"
                       else slices.peer(backend, who, scenario, threads))
                check(rec, who, backend, scenario, key)
                cell.setdefault(who, []).append(rec)
                log("round %d/%d primitives %-13s %-9s %-6s %-15s %s" % (
                    r + 1, rounds, backend, scenario, key, who, figure_text(rec, scenario)))
    return prims


# --- rendering ---------------------------------------------------------------


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def get(rec, path):
    for p in path.split("."):
        rec = rec.get(p) if isinstance(rec, dict) else None
    return rec


def figure_text(rec, scenario):
    if rec.get("offered") is False:
        return "not offered"
    if scenario == "election":
        return "resign hand-over p50 %.2f ms" % (get(rec, "resign_handover_us.p50") / 1e3)
    return "%.0f permits/s" % rec["pairs_per_sec"]


def ratio(ours, theirs, path):
    """Median of the per-round ratios ours ÷ theirs, with min and max."""
    per_round = [get(a, path) / get(b, path) for a, b in zip(ours, theirs)
                 if get(a, path) and get(b, path)]
    if not per_round:
        return "n/a"
    return "%.2f (%.2f..%.2f)" % (statistics.median(per_round), min(per_round), max(per_round))


def ms(v):
    return "n/a" if v is None else "%.2f ms" % (v / 1e3)


def permits_table(prims, scenario, unit):
    rows = ["| backend | threads | contender | %s/s | acquire p50 / p99 | dlock ÷ this |" % unit,
            "| --- | --- | --- | --- | --- | --- |"]
    notes = []
    for backend in BACKENDS:
        cell = prims.get(backend, {}).get(scenario, {})
        if not_offered(cell):
            note = [r for c in cell.values() for r in c["dlock"]][0].get("note")
            notes.append("- %s does not offer it: %s" % (TITLES[backend], note))
            continue
        for threads in sorted(cell):
            contenders = cell[threads]
            dlock = contenders.get("dlock", [])
            for who, recs in sorted(contenders.items(), key=lambda kv: (kv[0] != "dlock", kv[0])):
                rows.append("| %s | %d | %s | %s | %s / %s | %s |" % (
                    TITLES[backend], threads, who,
                    format(int(round(median([r["pairs_per_sec"] for r in recs]))), ","),
                    ms(median([get(r, "acquire_us.p50") for r in recs])),
                    ms(median([get(r, "acquire_us.p99") for r in recs])),
                    "" if who == "dlock" else ratio(dlock, recs, "pairs_per_sec")))
    return rows + ([""] + notes if notes else [])


def election_table(prims):
    rows = ["| backend | contender | resign hand-over p50 / p99 | dlock ÷ this (p50) "
            "| lease-lapse hand-over p50 / p99 |",
            "| --- | --- | --- | --- | --- |"]
    notes = []
    for backend in BACKENDS:
        contenders = prims.get(backend, {}).get("election", {}).get("resign", {})
        dlock = contenders.get("dlock", [])
        if dlock and dlock[0].get("offered") is False:
            notes.append("- %s does not offer it: %s" % (TITLES[backend], dlock[0].get("note")))
            continue
        for who, recs in sorted(contenders.items(), key=lambda kv: (kv[0] != "dlock", kv[0])):
            lapses = [r for r in recs if r.get("lapses")]
            rows.append("| %s | %s | %s / %s | %s | %s |" % (
                TITLES[backend], who,
                ms(median([get(r, "resign_handover_us.p50") for r in recs])),
                ms(median([get(r, "resign_handover_us.p99") for r in recs])),
                "" if who == "dlock" else ratio(dlock, recs, "resign_handover_us.p50"),
                "%s / %s (%d lapses of a %d ms lease)" % (
                    ms(median([get(r, "lapse_handover_us.p50") for r in lapses])),
                    ms(median([get(r, "lapse_handover_us.p99") for r in lapses])),
                    sum(r["lapses"] for r in lapses), lapses[0]["lease_ms"])
                if lapses else "not measured"))
    return rows + ([""] + notes if notes else [])


HEADING = "## Semaphores, read-write locks and elections"


def run_line(meta):
    """How the primitives were measured, for their section's text."""
    return ("measured on %s in %d round%s of %g s slices (warm-up %g s), %s, order seed %d, "
            "load average %s at the start and %s at the end; took %d s" % (
                meta["date"], meta["rounds"], "" if meta["rounds"] == 1 else "s", meta["slice"],
                meta["warmup"], "quick mode" if meta["quick"] else "full mode", meta["seed"],
                meta["load_start"], meta["load_end"], meta["took"]))


def section(saved):
    """The markdown lines of the section, from what measure() returned and
    how it ran ({"meta": ..., "records": ...}); None: not measured."""
    if not saved:
        return ["", HEADING, "",
                "Not in these records (measured before the primitives were): "
                "`scripts/bench-report.sh` measures them."]
    return [
        "", HEADING, "",
        "dlock's primitives (`dlock bench --scenarios semaphore,shared,exclusive,election`) "
        "beside the peers that have them, %s. Permits: N threads of one client on ONE "
        "semaphore of N permits (nobody waits for a permit: what is measured is the "
        "semaphore's own cost), or on ONE read-write lock's read side (readers do not "
        "wait for each other) or write side (writers take turns, so the threads wait "
        "for each other), each taking one permit or hold (10 s lease, no watchdog) and giving "
        "it back: permits or holds per second. Peers: redis-semaphore's `Semaphore` (N "
        "async loops on one ioredis connection, a Semaphore object each, `lockTimeout` "
        "10 s), kazoo's `Semaphore` (`max_leases` N), `ReadLock` and `WriteLock` (N "
        "threads of one KazooClient, an object each). "
        "Election: two campaigners, a client each; the leader resigns while the other "
        "campaigns (given 50 ms to reach the server first), and the hand-over runs from "
        "the resign call to the other's election; the first of each slice warms up and "
        "is not counted. Peers: kazoo's `Election` (its function returning resigns) and "
        "tooz's leader election on its ZooKeeper driver, whose `run_watchers()` tries "
        "the leader lock without waiting: called every 10 ms here (its documentation's "
        "loop sleeps a second). A lease-lapse hand-over (dlock only: kazoo and tooz "
        "leaders have no lease, only a session that expires after 10 s) runs from the "
        "end of a leader's lease that it neither renewed nor resigned (counted from its "
        "Campaign() call, so at most one round trip too long) to the other's election. "
        "`dlock ÷ this` is the median of the per-round ratios (rates: dlock's over the "
        "row's; hand-over: dlock's p50 over the row's, lower is better), with their "
        "range. The issue sets no target for the primitives: ratios only." % run_line(
            saved["meta"]),
    ] + tables(saved["records"])


def tables(prims):
    def measured(scenario, table):
        if any(prims.get(b, {}).get(scenario) for b in BACKENDS):
            return table
        return ["Not in these records (measured before it was): "
                "`scripts/bench-report.sh` measures it."]

    return [
        "", "### Semaphore: permits per second", ""] + measured(
            "semaphore", permits_table(prims, "semaphore", "permits")) + [
        "", "### Read locks: read holds per second", ""] + measured(
            "shared", permits_table(prims, "shared", "holds")) + [
        "", "### Write locks: write holds per second", ""] + measured(
            "exclusive", permits_table(prims, "exclusive", "holds")) + [
        "", "### Election hand-over", ""] + measured("election", election_table(prims))
