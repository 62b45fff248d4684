#!/usr/bin/env python3
"""Summarises the workers bench's span file (TERN_BENCH_SPANS=<file>).

Per measured point (the bench's `point` event: store, workers, partitions),
the mean, median and 90th percentile of each span's duration (time.busy +
time.idle, as tracing-subscriber writes them when a span closes) and its mean
CPU time (time.busy). Usage: bench_spans.py <spans.json>
"""
import json
import re
import statistics
import sys
from collections import defaultdict

UNITS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}


def millis(text):
    m = re.match(r"([\d.]+)(ns|µs|us|ms|s)$", text)
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def main(path):
    point, seq = None, 0
    spans = defaultdict(lambda: defaultdict(list))
    order = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            fields = record.get("fields", {})
            if fields.get("message") == "point":
                seq += 1
                point = (f"#{seq} {fields.get('store')} workers={fields.get('workers')} "
                         f"partitions={fields.get('partitions')}")
                order.append(point)
            elif fields.get("message") == "close" and point:
                name = record.get("span", {}).get("name")
                busy, idle = millis(fields["time.busy"]), millis(fields["time.idle"])
                spans[point][name].append((busy + idle, busy))
    for point in order:
        print(point)
        for name, values in spans[point].items():
            total = sorted(t for t, _ in values)
            busy = [b for _, b in values]
            print(f"  {name:12s} n={len(values):6d} mean={statistics.mean(total):8.2f} ms "
                  f"median={statistics.median(total):8.2f} p90={total[int(len(total) * 0.9)]:8.2f} "
                  f"cpu={statistics.mean(busy):7.3f} ms")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench_spans.py <spans.json>")
    main(sys.argv[1])
