#!/usr/bin/env python3
"""Markdown table of tricolor-bench-meters' JSON output: ns per check, tricolor beside rte_meter.

    tricolor-bench-meters --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \\
        --benchmark_out=meters.json --benchmark_out_format=json
    python3 bench/table.py meters.json [--stat median|mean|min] [--colors]

Rows are algorithm and mode, columns the meter counts: ns per check for each library and the ratio
rte_meter / tricolor (above 1: tricolor is faster). With repetitions, --stat picks the aggregate
(median by default); without, the runs of one benchmark are reduced the same way.
"""
import argparse
import json
import statistics
import sys

ROWS = [
    ("1r2c_blind", "1R2C, color-blind"),
    ("1r2c_aware", "1R2C, color-aware"),
    ("srtcm_blind", "srTCM (RFC 2697), color-blind"),
    ("srtcm_aware", "srTCM (RFC 2697), color-aware"),
    ("trtcm_blind", "trTCM (RFC 2698), color-blind"),
    ("trtcm_aware", "trTCM (RFC 2698), color-aware"),
    ("rfc4115_blind", "trTCM (RFC 4115), color-blind"),
    ("rfc4115_aware", "trTCM (RFC 4115), color-aware"),
    ("fixed_window_blind", "fixed window, color-blind"),
    ("sliding_window_blind", "sliding window, K = 4 (per-key form), color-blind"),
    ("sliding_window64_blind", "sliding window, K = 64 (aggregate form), color-blind"),
    ("gcra_blind", "GCRA, color-blind"),
    ("smooth_blind", "smooth, color-blind"),
    ("warmup_blind", "warm-up, color-blind"),
    ("warmup_aware", "warm-up, color-aware"),
]
LIBS = ("tricolor", "rte_meter")


def size_label(n):
    for unit, name in ((1 << 20, "Mi"), (1 << 10, "Ki")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return str(n)


def ns_per_check(b):
    if "ns_per_check" in b:  # a rate counter, inverted: seconds per check
        return b["ns_per_check"] * 1e9
    if b.get("items_per_second"):
        return 1e9 / b["items_per_second"]
    return None


def parse_name(run_name):
    # BM_<family>/<library>/<meters>
    parts = run_name.split("/")
    if len(parts) != 3 or not parts[0].startswith("BM_") or parts[1] not in LIBS:
        return None
    try:
        return parts[0][3:], parts[1], int(parts[2])
    except ValueError:
        return None


def reduce(values, stat):
    if stat == "min":
        return min(values)
    if stat == "mean":
        return statistics.fmean(values)
    return statistics.median(values)


def collect(benchmarks, stat):
    """{(family, lib, meters): benchmark entry with ns}, plus the largest relative spread seen."""
    aggregates, runs = {}, {}
    for b in benchmarks:
        if b.get("error_occurred"):
            continue
        key = parse_name(b.get("run_name", b["name"]))
        if key is None:
            continue
        if b.get("run_type") == "aggregate":
            aggregates.setdefault(key, {})[b.get("aggregate_name")] = b
        else:
            runs.setdefault(key, []).append(b)

    table, spread = {}, []
    for key in set(aggregates) | set(runs):
        agg = aggregates.get(key, {})
        if stat in agg:
            entry = dict(agg[stat])
            entry["ns"] = ns_per_check(agg[stat])
            mean, sd = agg.get("mean"), agg.get("stddev")
            if mean and sd and "ns_per_check" in mean and "ns_per_check" in sd and mean["ns_per_check"]:
                spread.append((sd["ns_per_check"] / mean["ns_per_check"], key))
        elif key in runs:
            values = [v for v in (ns_per_check(b) for b in runs[key]) if v is not None]
            if not values:
                continue
            entry = dict(runs[key][0])
            entry["ns"] = reduce(values, stat)
            for color in ("green", "yellow", "red"):
                if all(color in b for b in runs[key]):
                    entry[color] = reduce([b[color] for b in runs[key]], stat)
            if len(values) > 1 and statistics.fmean(values):
                spread.append((statistics.stdev(values) / statistics.fmean(values), key))
        else:
            continue
        table[key] = entry
    return table, spread


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="JSON written by --benchmark_out=FILE --benchmark_out_format=json (or - for stdin)")
    ap.add_argument("--stat", choices=("median", "mean", "min"), default="median")
    ap.add_argument("--colors", action="store_true", help="also print the color mix of every benchmark")
    args = ap.parse_args()

    with (sys.stdin if args.json == "-" else open(args.json)) as f:
        data = json.load(f)
    table, spread = collect(data.get("benchmarks", []), args.stat)
    if not table:
        sys.exit("table.py: no BM_<family>/<tricolor|rte_meter>/<meters> results in " + args.json)

    sizes = sorted({k[2] for k in table})
    known = [f for f, _ in ROWS]
    families = [f for f in known if any(k[0] == f for k in table)]
    families += sorted({k[0] for k in table} - set(known))
    labels = dict(ROWS)

    ctx = data.get("context", {})
    notes = [f"ns per check, {args.stat}"]
    if "load" in ctx:
        notes.append(f"load={ctx['load']}")
    for k in ("host_name", "date", "tsc_hz", "burst", "prefetch_distance"):
        if k in ctx:
            notes.append(f"{k}={ctx[k]}")
    print("_" + ", ".join(notes) + "_\n")

    head = ["meter, mode"]
    for n in sizes:
        s = size_label(n)
        head += [f"tricolor {s}", f"rte_meter {s}", f"rte/tricolor {s}"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" + "---:|" * (len(head) - 1))
    slower = []
    for fam in families:
        cells = [labels.get(fam, fam)]
        for n in sizes:
            ours = table.get((fam, "tricolor", n), {}).get("ns")
            theirs = table.get((fam, "rte_meter", n), {}).get("ns")
            ratio = theirs / ours if ours and theirs else None
            if ratio is not None and ratio < 1:
                slower.append(f"{labels.get(fam, fam)} at {size_label(n)} meters: {ours:.2f} vs {theirs:.2f} ns")
            cells += [fmt(ours), fmt(theirs), "—" if ratio is None else f"{ratio:.2f}×"]
        print("| " + " | ".join(cells) + " |")

    if spread:
        cv, key = max(spread)
        print(f"\nLargest spread between repetitions: {100 * cv:.1f}% (stddev/mean, {key[0]}/{key[1]}/{size_label(key[2])}).")
    if slower:
        print("\ntricolor slower than rte_meter: " + "; ".join(slower) + ".")

    if args.colors:
        print("\n| benchmark | green | yellow | red |\n|---|---:|---:|---:|")
        for fam in families:
            for n in sizes:
                for lib in LIBS:
                    e = table.get((fam, lib, n))
                    if e is None:
                        continue
                    print(f"| {fam}/{lib}/{size_label(n)} | "
                          + " | ".join(fmt(e.get(c), 3) for c in ("green", "yellow", "red")) + " |")


if __name__ == "__main__":
    main()
