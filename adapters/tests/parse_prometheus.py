"""Parses a Prometheus text exposition page with the reference client's
parser (Debian's python3-prometheus-client) and prints one line per sample:
    <sample name> <labels as k=v,k=v sorted> <value>
Exits 1 with the parser's complaint when the page does not parse."""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        lines = []
        for family in text_string_to_metric_families(text):
            lines.append(f"# {family.name} {family.type}")
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                lines.append(f"{sample.name} {labels} {sample.value!r}")
    except Exception as e:  # the parser raises ValueError and others
        print(f"does not parse: {e!r}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
