"""The charts of the comparative report (scripts/bench_report.py), as SVG
drawn by matplotlib: throughput by concurrency, acquire latency, hand-off
latency and fairness, one of each per backend.
"""
import io

from bench_report_measure import CEILINGS, CONTENDERS, PEERS, THREADS, dlocks
from bench_report_render import TITLES, median_of


def plotted(value):
    """A figure for matplotlib: a missing one (no hand-off happened in a
    slice, so no percentile) is NaN, which it leaves out."""
    return float("nan") if value is None else value


def charts(records):
    """{file name: SVG text} of every chart; written by the caller once the
    whole run has succeeded."""
    import matplotlib
    matplotlib.use("Agg")
    # The same figures give the same SVG: no date in it, and ids from a fixed
    # salt rather than a random one, so a regenerated chart diffs only where
    # a figure moved.
    matplotlib.rcParams["svg.hashsalt"] = "dlock-bench-report"
    import matplotlib.pyplot as plt

    written = {}

    def save(fig, name):
        svg = io.StringIO()
        fig.tight_layout()
        fig.savefig(svg, format="svg", metadata={"Date": None})
        plt.close(fig)
        written[name] = svg.getvalue()

    for backend in PEERS:
        title = TITLES[backend]
        unc = records[backend]["uncontended"]
        contenders = dlocks(backend) + CEILINGS[backend] + PEERS[backend]

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for who in contenders:
            ys = [plotted(median_of(unc[t][who], "pairs_per_sec")) for t in THREADS]
            ax.plot(THREADS, ys, marker="o", label=who,
                    linewidth=2.5 if who == "dlock" else 1.2,
                    linestyle="--" if who.startswith("ceiling") else "-")
        ax.set_xscale("log", base=2)
        ax.set_xticks(THREADS)
        ax.set_xticklabels([str(t) for t in THREADS])
        ax.set_yscale("log")
        ax.set_xlabel("threads (concurrent loops)")
        ax.set_ylabel("acquire + release pairs/s")
        ax.set_title("%s: throughput by concurrency" % title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "throughput_%s.svg" % backend)

        measured = dlocks(backend) + PEERS[backend]  # ceilings have no latencies
        fig, axes = plt.subplots(1, len(THREADS), figsize=(11, 4), sharey=True)
        width = 0.8 / len(measured)
        for ax, threads in zip(axes, THREADS):
            for i, who in enumerate(measured):
                ys = [plotted(median_of(unc[threads][who], "acquire_us", p))
                      for p in ["p50", "p99", "p999"]]
                ax.bar([x + i * width for x in range(3)], ys, width, label=who)
            ax.set_xticks([x + width * (len(measured) - 1) / 2 for x in range(3)])
            ax.set_xticklabels(["p50", "p99", "p99.9"])
            ax.set_yscale("log")
            ax.set_title("%d thread%s" % (threads, "" if threads == 1 else "s"))
            ax.grid(True, axis="y", which="both", alpha=0.3)
        axes[0].set_ylabel("acquire latency, µs")
        axes[0].legend(fontsize=8)
        fig.suptitle("%s: acquire latency percentiles" % title)
        save(fig, "latency_%s.svg" % backend)

        con = records[backend]["contention"][CONTENDERS]
        measured = ["dlock"] + PEERS[backend]  # the variants run uncontended only
        fig, ax = plt.subplots(figsize=(7, 4))
        width = 0.8 / len(measured)
        for i, who in enumerate(measured):
            ys = [plotted(median_of(con[who], "handoff_us", p)) for p in ["p50", "p99", "p999"]]
            ax.bar([x + i * width for x in range(3)], ys, width, label=who)
        ax.set_xticks([x + width * (len(measured) - 1) / 2 for x in range(3)])
        ax.set_xticklabels(["p50", "p99", "p99.9"])
        ax.set_yscale("log")
        ax.set_ylabel("hand-off latency, µs")
        ax.set_title("%s: hand-off latency, %d clients on one lock" % (title, CONTENDERS))
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "handoff_%s.svg" % backend)

        fig, ax = plt.subplots(figsize=(7, 4))
        for i, who in enumerate(measured):
            # Shares of the median round by Jain's index, sorted: the shape of
            # the distribution, not which client got what.
            recs = sorted(con[who], key=lambda r: r["jain"])
            shares = sorted(recs[len(recs) // 2]["shares"], reverse=True)
            ax.bar([x + i * width for x in range(len(shares))], shares, width,
                   label="%s (Jain %.3f)" % (who, median_of(con[who], "jain")))
        ax.axhline(1.0 / CONTENDERS, color="black", linewidth=0.8, linestyle=":")
        ax.set_xticks([x + width * (len(measured) - 1) / 2 for x in range(CONTENDERS)])
        ax.set_xticklabels([str(x + 1) for x in range(CONTENDERS)])
        ax.set_xlabel("clients, most acquisitions first (dotted: an equal share)")
        ax.set_ylabel("share of acquisitions")
        ax.set_title("%s: fairness, %d clients on one lock" % (title, CONTENDERS))
        ax.legend(fontsize=8)
        save(fig, "fairness_%s.svg" % backend)
    return written
