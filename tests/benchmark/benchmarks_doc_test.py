#!/usr/bin/python3
"""docs/benchmarks.md is what scripts/bench_report_render.py makes of the
records it was measured from (docs/benchmarks/records.json): re-rendered
into a temporary directory, it comes out byte for byte the same. And it
opens with its summary, before how it was measured; the targets come after
the backends' sections.

    benchmarks_doc_test.py SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    source = sys.argv[1]
    docs = os.path.join(source, "docs")
    with tempfile.TemporaryDirectory(prefix="benchmarks_doc.") as out:
        os.makedirs(os.path.join(out, "benchmarks"))
        shutil.copy(os.path.join(docs, "benchmarks", "records.json"),
                    os.path.join(out, "benchmarks", "records.json"))
        subprocess.run(["/usr/bin/python3", "-B", os.path.join(source, "scripts", "bench_report.py"),
                        "--rerender", "--out", out], check=True)
        rendered = open(os.path.join(out, "benchmarks.md")).read()
    committed = open(os.path.join(docs, "benchmarks.md")).read()
    problems = []
    if rendered != committed:
        problems.append("docs/benchmarks.md differs from what bench_report.py --rerender "
                        "writes from docs/benchmarks/records.json: run it again")
    headings = [line for line in committed.splitlines() if line.startswith("## ")]
    if headings[:2] != ["## Summary", "## How it was measured"]:
        problems.append("docs/benchmarks.md should open with ## Summary, then ## How it "
                        "was measured; it has %s" % headings[:2])
    if "## Targets" not in headings or headings.index("## Targets") < headings.index("## Redis"):
        problems.append("the targets should follow the backends' sections")
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
