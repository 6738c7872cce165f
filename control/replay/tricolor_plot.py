#!/usr/bin/python3
"""tricolor-plot: draws a tricolor-replay CSV (--csv) as rates over time, one panel per rule.

Per rule: the offered rate (every packet of the rule, a dashed line) and the green, yellow and red rates
(the packets its meter gave that color, stacked in that order), in bit/s or packet/s, over intervals counted from the capture's first
packet. A shaping rule (red shape max-delay D) also gets its released rate (a solid line): the packets it
forwarded, each counted when it left (its time plus its delay_ns). Reads the CSV and nothing else. Exit status: 0 done; 1 the command line is wrong; 2 an input or
output that cannot be used (the message names it and why).
"""
import argparse
import csv
import sys
from fractions import Fraction

VERSION = "0.1.0"  # meson.build's project version (tests/control/daemon/service_test.py compares them)
COLORS = ("green", "yellow", "red")
FILL = {"green": "#2ca02c", "yellow": "#f0c020", "red": "#d62728"}
NEEDED = ("rule", "out_color", "time_ns", "frame_bytes", "metered_bytes")
UNITS_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}
FORMATS = (".png", ".svg", ".pdf")
TARGET_INTERVALS = 50  # the default interval cuts the capture into at least this many
MAX_INTERVALS = 1_000_000  # more would not show, and would cost memory per rule


class Refused(Exception):
    """An input or output that cannot be used: exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # a wrong command line: exit status 1, as tricolor-replay
        self.print_usage(sys.stderr)
        print(f"tricolor-plot: {message}", file=sys.stderr)
        sys.exit(1)


def duration_ns(text):
    """'100ms', '0.5s', '250us': a whole positive number of nanoseconds."""
    unit = next((u for u in ("ns", "us", "ms", "s") if text.endswith(u)), None)
    try:
        value = Fraction(text[: -len(unit)]) * UNITS_NS[unit] if unit else None
    except (ValueError, ZeroDivisionError):
        value = None
    if value is None or value <= 0 or value.denominator != 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration such as 100ms, 250us or 1s "
                                         "(a whole number of nanoseconds, more than 0)")
    return int(value)


def packets(path, length):
    """Each packet of the CSV as (rule, out_color, time_ns, bytes, delay_ns), read as it goes (a CSV can
    hold millions: the caller passes over it twice rather than keep it); rule is '-' for the default
    action; delay_ns is None but for a packet a shaping rule forwarded (CSVs before shaping have none)."""
    try:
        with open(path, newline="") as f:
            rows = csv.reader(f)
            header = next(rows, None)
            if header is None:
                raise Refused(f"{path!r} is empty: not a tricolor-replay CSV")
            if "time_ns" not in header and {"rule", "out_color"} <= set(header):
                raise Refused(f"{path!r} has no time_ns column: it was written by an older tricolor-replay; "
                              "replay the capture again to get times and lengths")
            missing = [name for name in NEEDED if name not in header]
            if missing:
                raise Refused(f"{path!r} is not a tricolor-replay CSV: no {', '.join(missing)} column")
            rule, color, time = (header.index(name) for name in ("rule", "out_color", "time_ns"))
            size = header.index("metered_bytes" if length == "metered" else "frame_bytes")
            delay = header.index("delay_ns") if "delay_ns" in header else None
            for line, row in enumerate(rows, 2):
                try:
                    ruled = row[rule] != "-"  # the default action's packets have no metered length
                    held = None if delay is None or row[delay] == "-" else int(row[delay])
                    yield (row[rule], row[color], int(row[time]), int(row[size]) if ruled or length == "frame" else 0,
                           held)
                except (IndexError, ValueError):
                    raise Refused(f"{path!r} line {line}: malformed ({','.join(row)!r})") from None
    except OSError as e:
        raise Refused(f"cannot read {path!r}: {e.strerror}") from None


def survey(path, length):
    """The first pass: the earliest and latest times (a release included), the rules in the order they
    first come, and those that shaped."""
    earliest = latest = None
    rules = {}
    shaping = set()
    for rule, _, time, _, delay in packets(path, length):
        earliest = time if earliest is None else min(earliest, time)
        latest = max(time, time + (delay or 0)) if latest is None else max(latest, time + (delay or 0))
        if rule != "-":
            rules[rule] = None
            if delay is not None:
                shaping.add(rule)
    if earliest is None:
        raise Refused(f"{path!r} holds no packets")
    return earliest, latest, list(rules), shaping


def default_interval_ns(span_ns):
    """The largest 1, 2 or 5 times a power of ten that cuts the span into at least TARGET_INTERVALS."""
    best, step = 1, 1
    while step * TARGET_INTERVALS <= span_ns:
        for m in (1, 2, 5):
            if m * step * TARGET_INTERVALS <= span_ns:
                best = m * step
        step *= 10
    return best


def series_names(shaping):
    return ("offered",) + COLORS + (("released",) if shaping else ())


def binned(path, length, earliest, latest, rules, interval, unit, shaping):
    """The second pass: {rule: {series: [rate per interval]}} and the intervals' first index. A rate is
    what arrived (or, for `released`, left) in an interval over its length (int / int: correctly
    rounded). `released` only when some rule shaped."""
    first, last = earliest // interval, latest // interval
    count = last - first + 1
    amounts = {r: {s: [0] * count for s in series_names(shaping)} for r in rules}
    for rule, color, time, size, delay in packets(path, length):
        if rule not in amounts:
            continue
        amount = 1 if unit == "packets" else size * 8
        slot = time // interval - first
        amounts[rule]["offered"][slot] += amount
        if color in COLORS:  # '-': a packet that found a full key table and was not metered
            amounts[rule][color][slot] += amount
        if delay is not None:
            amounts[rule]["released"][(time + delay) // interval - first] += amount
    rates = {r: {s: [a * 10**9 / interval for a in v] for s, v in series.items()} for r, series in amounts.items()}
    return rates, first


def print_table(rates, first, interval, unit, shaping):
    suffix = "_bit_s" if unit == "bits" else "_packet_s"
    names = series_names(shaping)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["rule", "start_ns", "end_ns"] + [s + suffix for s in names])
    for rule, series in rates.items():
        for i in range(len(series["offered"])):
            start = (first + i) * interval
            out.writerow([rule, start, start + interval] + [repr(series[s][i]) for s in names])


def draw(rates, first, interval, unit, columns, title, labels, output, shaping):
    try:
        import matplotlib
    except ImportError:
        raise Refused("drawing needs matplotlib for /usr/bin/python3 (Debian: apt-get install "
                      "python3-matplotlib); --table needs none") from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    rows = -(-len(rates) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 2.4 * rows + 0.6), squeeze=False,
                             sharex=True, constrained_layout=True)
    count = len(next(iter(rates.values()))["offered"])
    edges = [(first + i) * interval / 1e9 for i in range(count + 1)]
    for ax, (rule, series) in zip(axes.flat, rates.items()):
        # The colors stacked (green at the bottom): their top is the metered rate, which the offered
        # line follows unless packets went unmetered; lines of equal height would hide each other.
        bottom = [0.0] * count
        for name in COLORS:
            top = [b + v for b, v in zip(bottom, series[name])]
            ax.stairs(top, edges, baseline=bottom, fill=True, color=FILL[name], alpha=0.85, linewidth=0, label=name)
            bottom = top
        ax.stairs(series["offered"], edges, baseline=None, color="black", linestyle="--", linewidth=1.2,
                  label="offered")
        if rule in shaping:  # what left, when it left: never above the rate
            ax.stairs(series["released"], edges, baseline=None, color="#1f4e9c", linewidth=1.6, label="released")
        ax.set_title(labels.get(rule, rule), fontsize=10)
        ax.yaxis.set_major_formatter(EngFormatter(unit="bit/s" if unit == "bits" else "pkt/s"))
        ax.set_ylim(0, max(max(series["offered"]), 1) * 1.3)  # headroom for the legend
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(rates):]:
        ax.set_visible(False)
    for column in range(columns):  # the time axis under each column's last panel
        lowest = max(r for r in range(rows) if r * columns + column < len(rates))
        axes[lowest, column].xaxis.set_tick_params(labelbottom=True)
        axes[lowest, column].set_xlabel("time since the first packet (s)")
    axes.flat[0].legend(fontsize=8, loc="upper center", ncol=5, frameon=False)
    interval_text = f"{interval / 1e6:g} ms" if interval >= 10**5 else f"{interval / 1e3:g} us"
    fig.suptitle(f"{title + ': ' if title else ''}rates per {interval_text}", fontsize=11)
    try:
        fig.savefig(output)
    except OSError as e:
        raise Refused(f"cannot write {output!r}: {e.strerror}") from None


def main():
    parser = Parser(prog="tricolor-plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"tricolor-plot {VERSION}")
    parser.add_argument("csv", help="a CSV written by tricolor-replay --csv")
    parser.add_argument("-o", "--output", help="the picture to write: .png, .svg or .pdf")
    parser.add_argument("--rule", action="append", help="draw this rule (repeatable; default: every rule, in order)")
    parser.add_argument("--interval", type=duration_ns, help="interval of the rates, e.g. 100ms (default: from "
                        f"the capture's length, at least {TARGET_INTERVALS} intervals)")
    parser.add_argument("--unit", choices=("bits", "packets"), default="bits", help="bit/s (default) or packet/s")
    parser.add_argument("--length", choices=("metered", "frame"), default="metered",
                        help="bytes: the length each rule meters (default) or the frame's")
    parser.add_argument("--columns", type=int, default=1, help="panels per row (default 1)")
    parser.add_argument("--title", default="", help="a title above the panels")
    parser.add_argument("--label", action="append", default=[], metavar="RULE=TEXT",
                        help="a panel's title instead of its rule's name (repeatable)")
    parser.add_argument("--table", action="store_true", help="print the binned rates as CSV on stdout")
    args = parser.parse_args()
    if not args.output and not args.table:
        parser.error("nothing to do: give -o FILE (a picture), --table, or both")
    if args.output and not args.output.lower().endswith(FORMATS):
        parser.error(f"-o {args.output!r}: the picture's name must end in {', '.join(FORMATS)}")
    if args.columns < 1:
        parser.error("--columns: at least 1")
    if any("=" not in label for label in args.label):
        parser.error("--label: expected RULE=TEXT")
    labels = dict(label.split("=", 1) for label in args.label)

    earliest, latest, present, shaping = survey(args.csv, args.length)
    if not present:
        raise Refused(f"{args.csv!r}: no packet matched a rule (only the default action's)")
    rules = list(dict.fromkeys(args.rule)) if args.rule else present
    unknown = [r for r in dict.fromkeys(rules + list(labels)) if r not in present]
    if unknown:
        raise Refused(f"{args.csv!r} has no packets of rule {', '.join(map(repr, unknown))} "
                      f"(its rules: {', '.join(present)})")
    span = latest - earliest
    interval = args.interval or default_interval_ns(span)
    if span // interval + 1 > MAX_INTERVALS:
        parser.error(f"--interval {interval} ns cuts the capture's {span} ns into more than {MAX_INTERVALS} intervals")
    rates, first = binned(args.csv, args.length, earliest, latest, rules, interval, args.unit, shaping)
    if args.table:
        print_table(rates, first, interval, args.unit, shaping)
    if args.output:
        draw(rates, first, interval, args.unit, min(args.columns, len(rules)), args.title, labels,
             args.output, shaping)


if __name__ == "__main__":
    try:
        main()
    except Refused as e:
        print(f"tricolor-plot: {e}", file=sys.stderr)
        sys.exit(2)
