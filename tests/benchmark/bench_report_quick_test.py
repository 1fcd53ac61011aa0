"""ctest bench_report_quick: the comparative report's quick mode end to end.

    /usr/bin/python3 bench_report_quick_test.py SOURCE_DIR BUILD_DIR

Runs scripts/bench_report.py --quick into a temporary directory against the
build's binaries, then checks that the markdown and every chart were
written and that dlock, every ceiling and every peer produced a number.
Fails, printing why, when anything is missing: a server, a peer or a
package that cannot run is a failure, never a skip.
"""
import json
import os
import subprocess
import sys
import tempfile


def primitives_problems(primitives, report, out):
    """dlock and every peer measured each primitive of the quick run, or
    dlock said its backend does not offer it."""
    problems = []
    if primitives.HEADING not in report:
        problems.append("benchmarks.md has no primitives section")
    with open(os.path.join(out, "benchmarks", "records.json")) as f:
        prims = json.load(f).get("primitives", {}).get("records", {})
    for backend, scenario, key in primitives.cells(quick=True):
        cell = prims.get(backend, {}).get(scenario, {})
        if primitives.not_offered(cell):
            if primitives.PEERS.get((backend, scenario)):
                problems.append("dlock on %s says it has no %s, which its peers have" % (
                    backend, scenario))
            continue
        for who in ["dlock"] + primitives.PEERS.get((backend, scenario), []):
            recs = cell.get(str(key), {}).get(who, [])
            figure = ("resign_handover_us" if scenario == "election" else "pairs_per_sec")
            if not recs or not all(r.get(figure) for r in recs):
                problems.append("%s on %s, %s %s: no figure" % (who, backend, scenario, key))
    return problems


def main():
    source, build = sys.argv[1], sys.argv[2]
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.join(source, "scripts"))
    import bench_report  # the lists of backends, ceilings and peers

    with tempfile.TemporaryDirectory(prefix="bench_report_quick.") as out:
        done = subprocess.run(["/usr/bin/python3", os.path.join(source, "scripts", "bench_report.py"),
                               "--quick", "--out", out, "--build", build])
        if done.returncode != 0:
            sys.exit("bench_report.py --quick failed (exit %d); its messages above say "
                     "what is missing" % done.returncode)
        problems = []
        report_path = os.path.join(out, "benchmarks.md")
        report = open(report_path).read() if os.path.exists(report_path) else ""
        if "do not edit by hand" not in report:
            problems.append("benchmarks.md was not written, or has no header")
        if "MET" not in report and "MISSED" not in report:
            problems.append("benchmarks.md has no target verdicts")
        for backend in bench_report.PEERS:
            for chart in ["throughput", "latency", "handoff", "fairness"]:
                path = os.path.join(out, "benchmarks", "%s_%s.svg" % (chart, backend))
                if not os.path.exists(path) or "<svg" not in open(path).read(2000):
                    problems.append("chart %s was not written" % path)
        with open(os.path.join(out, "benchmarks", "records.json")) as f:
            records = json.load(f)["uncontended_and_contention"]
        for backend, peers in bench_report.PEERS.items():
            for threads in bench_report.THREADS:
                cell = records[backend]["uncontended"].get(str(threads), {})
                for who in bench_report.dlocks(backend) + bench_report.CEILINGS[backend] + peers:
                    rates = [r.get("pairs_per_sec") for r in cell.get(who, [])]
                    if not rates or not all(isinstance(x, (int, float)) and x > 0 for x in rates):
                        problems.append("%s on %s, %d threads: no rate" % (who, backend, threads))
                    if who in peers and who not in report:
                        problems.append("%s is not in the report" % who)
            cell = records[backend]["contention"].get(str(bench_report.CONTENDERS), {})
            for who in ["dlock"] + peers:
                recs = cell.get(who, [])
                if not recs or any(len(r.get("shares", [])) != bench_report.CONTENDERS or
                                   not r.get("handoffs_per_sec") for r in recs):
                    problems.append("%s on %s: no contention figures" % (who, backend))
        for masters in bench_report.CLUSTER_MASTERS:
            cell = records.get("redis_cluster", {}).get(str(masters), {})
            for who in ["dlock"] + bench_report.CLUSTER_PEERS:
                rates = [r.get("pairs_per_sec") for r in cell.get(who, [])]
                if not rates or not all(isinstance(x, (int, float)) and x > 0 for x in rates):
                    problems.append("%s on the Redis Cluster of %d masters: no rate" % (
                        who, masters))
        problems += primitives_problems(bench_report.primitives, report, out)
        if "## Redis Cluster" not in report:
            problems.append("benchmarks.md has no Redis Cluster section")
        if problems:
            sys.exit("the quick report is incomplete:\n  " + "\n  ".join(problems))
    print("bench_report_quick: report, charts and every contender's figures written")


if __name__ == "__main__":
    main()
