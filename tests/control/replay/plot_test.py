#!/usr/bin/python3
"""tricolor-replay's CSV times and lengths, and tricolor-plot over them.

Writes a nanosecond pcap whose times and lengths the test chooses (a packet stamped before the first,
a record captured short of its wire length, rules metering l3+4 and l2, packets of the default action),
replays it, and checks the CSV's time_ns, frame_bytes and metered_bytes exactly. Then runs tricolor-plot:
its --table (explicit and default interval, bit/s and packet/s, metered and frame lengths, chosen
rules) must equal rates computed here with fractions from what the test wrote; its pictures must be a
well-formed PNG (chunks, CRCs, pixel data of the declared size) and an SVG; and each refusal must come
with its exit status and message.

Usage: plot_test.py TRICOLOR_REPLAY TRICOLOR_PLOT (run with /usr/bin/python3: scapy, matplotlib)
"""
import csv
import io
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from fractions import Fraction

from scapy.all import Ether, IP, UDP, Raw

replay, plot = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="tricolor-plot-test-")
path = lambda name: os.path.join(work, name)
failures = []

POLICY = """profile add small trtcm cir 1mbit cbs 2k pir 2mbit pbs 4k
profile add one 1r2c cir 5mbit cbs 8k
rule add a dst 10.0.0.1 profile small length l3+4
rule add b dst 10.0.0.2 profile one
"""
ETHERNET = 14
T0 = 1_700_000_000_123_456_789  # ns since the epoch: not a whole second, not a whole microsecond


def frame(dst, size):
    return bytes(Ether() / IP(src="10.9.0.1", dst=dst) / UDP(sport=1000, dport=2000) / Raw(b"x" * (size - 42)))


# (offset from the first packet in ns, destination, wire length, captured length): about 20 ms of
# traffic far above both rates, so that every color shows.
rng = random.Random(13)
packets, t = [], 0
for i in range(300):
    dst = ("10.0.0.1", "10.0.0.2", "10.0.0.3")[rng.randrange(3)]
    size = rng.randrange(64, 1515)
    packets.append((t, dst, size, size))
    t += rng.randrange(1, 140_000)
packets[7] = (-2_345, *packets[7][1:])                  # stamped before the first packet
packets[11] = (packets[11][0], "10.0.0.2", 1400, 60)    # captured short: the frame is 1400 bytes on the wire
with open(path("in.pcap"), "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))  # nanosecond pcap, Ethernet
    for offset, dst, size, captured in packets:
        raw, stamp = frame(dst, size)[:captured], T0 + offset
        f.write(struct.pack("<IIII", stamp // 10**9, stamp % 10**9, len(raw), size) + raw)
with open(path("policy"), "w") as f:
    f.write(POLICY)

# ---- the CSV's new columns -----------------------------------------------------------------------
result = subprocess.run([replay, "--policy", path("policy"), "--in", path("in.pcap"), "--csv", path("packets.csv")],
                        capture_output=True, text=True)
assert result.returncode == 0, result.stderr
with open(path("packets.csv"), newline="") as f:
    rows = list(csv.reader(f))
header = "index,rule,key,in_color,out_color,action,time_ns,frame_bytes,metered_bytes".split(",")
assert rows[0] == header + ["delay_ns"], rows[0]
assert len(rows) == len(packets) + 1, len(rows)
RULE = {"10.0.0.1": "a", "10.0.0.2": "b", "10.0.0.3": "-"}
METERED = {"a": lambda size: size - ETHERNET + 4, "b": lambda size: size}  # l3+4, l2
colors = []
for k, ((offset, dst, size, _), row) in enumerate(zip(packets, rows[1:])):
    rule = RULE[dst]
    want = [str(k), rule, str(offset), str(size), str(METERED[rule](size)) if rule != "-" else "-"]
    got = [row[0], row[1], row[6], row[7], row[8]]
    if got != want:
        failures.append(f"packet {k}: CSV index,rule,time_ns,frame_bytes,metered_bytes {got}, expected {want}")
    colors.append(row[4])
seen = {c for c, (_, dst, *_) in zip(colors, packets) if RULE[dst] == "a"}
assert seen == {"green", "yellow", "red"}, f"rule a should show every color, saw {seen}"


# ---- tricolor-plot --table against rates computed here -------------------------------------------
def write_file(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


def run_plot(*args, env=None):
    return subprocess.run([plot, *args], capture_output=True, text=True, env=env)


def expected_table(interval, unit, length, rules):
    """Rates per interval from the test's own packets, in fractions, rounded once to float."""
    times = [offset for offset, *_ in packets]
    first, last = min(times) // interval, max(times) // interval
    lines = []
    for rule in rules:
        for slot in range(first, last + 1):
            sums = dict(offered=0, green=0, yellow=0, red=0)
            for (offset, dst, size, _), color in zip(packets, colors):
                if RULE[dst] != rule or offset // interval != slot:
                    continue
                amount = 1 if unit == "packets" else 8 * (METERED[rule](size) if length == "metered" else size)
                sums["offered"] += amount
                sums[color] += amount
            lines.append([rule, slot * interval, (slot + 1) * interval] +
                         [float(Fraction(sums[s] * 10**9, interval)) for s in ("offered", "green", "yellow", "red")])
    return lines


def table_of(result):
    if result.returncode != 0:
        return f"exit {result.returncode}: {result.stderr.strip()}"
    lines = list(csv.reader(io.StringIO(result.stdout)))
    return [lines[0]] + [[r[0], int(r[1]), int(r[2])] + [float(x) for x in r[3:]] for r in lines[1:]]


def check_table(name, args, interval, unit, length, rules):
    got = table_of(run_plot(path("packets.csv"), "--table", *args))
    suffix = "_bit_s" if unit == "bits" else "_packet_s"
    want = [["rule", "start_ns", "end_ns"] + [s + suffix for s in ("offered", "green", "yellow", "red")]]
    want += expected_table(interval, unit, length, rules)
    if got != want:
        diff = [(g, w) for g, w in zip(got, want) if g != w][:3] if isinstance(got, list) else got
        failures.append(f"--table {name}: differs from the rates computed here (first differences {diff}; "
                        f"{len(got)} lines, {len(want)} expected)")


in_order = list(dict.fromkeys(RULE[dst] for _, dst, *_ in packets if RULE[dst] != "-"))  # the rules, as they come
span = max(p[0] for p in packets) - min(p[0] for p in packets)
# The default: the largest of 1, 2 and 5 times a power of ten that cuts the span into 50 or more.
default_interval = max(m * 10**e for e in range(0, 19) for m in (1, 2, 5) if m * 10**e * 50 <= span)
check_table("1ms, bits, metered", ["--interval", "1ms"], 10**6, "bits", "metered", in_order)
check_table("default interval", [], default_interval, "bits", "metered", in_order)
check_table("0.25ms packets frame b a",
            ["--interval", "0.25ms", "--unit", "packets", "--length", "frame", "--rule", "b", "--rule", "a"],
            250_000, "packets", "frame", ["b", "a"])
check_table("333us frame", ["--interval", "333us", "--length", "frame", "--rule", "a"], 333_000, "bits", "frame",
            ["a"])

# The default interval at its edges: a span of exactly 50 x 500 us takes 500 us, a nanosecond less 200 us;
# 50 x 1 s takes 1 s, and a span of 0 takes 1 ns.
for span_ns, want in ((25_000_000, 500_000), (24_999_999, 200_000), (50 * 10**9, 10**9), (99, 1), (0, 1)):
    lines = [",".join(header), f"0,a,-,-,green,forward,0,100,100", f"1,a,-,-,red,forward,{span_ns},100,100"]
    result = run_plot(write_file(f"span{span_ns}.csv", "\n".join(lines) + "\n"), "--table")
    got = table_of(result)
    if isinstance(got, str) or got[1][2] - got[1][1] != want:
        failures.append(f"default interval for a span of {span_ns} ns: {got if isinstance(got, str) else got[1]}, "
                        f"expected intervals of {want} ns")


# A shaping rule's released rate: each packet it forwarded counted at time + delay_ns, in its own column
# (the interval of a release past the last arrival included); a late one ('-') and other rules' packets
# not at all; the rule without shaping gets 0 there.
shaped = [",".join(header + ["delay_ns"]),
          "0,s,-,-,green,forward,0,100,100,0",
          "1,s,-,-,green,forward,100,100,100,1500",     # leaves at 1600: the second interval
          "2,s,-,-,red,drop,200,100,100,-",             # late
          "3,p,-,-,green,forward,300,100,100,-",        # a policing rule
          "4,s,-,-,green,forward,900,100,100,2100"]     # leaves at 3000: an interval past the arrivals
got = table_of(run_plot(write_file("shaped.csv", "\n".join(shaped) + "\n"), "--table", "--interval", "1us", "--unit", "packets"))
want = [["rule", "start_ns", "end_ns"] + [s + "_packet_s" for s in ("offered", "green", "yellow", "red", "released")],
        ["s", 0, 1000, 4e6, 3e6, 0.0, 1e6, 1e6], ["s", 1000, 2000, 0.0, 0.0, 0.0, 0.0, 1e6],
        ["s", 2000, 3000, 0.0, 0.0, 0.0, 0.0, 0.0], ["s", 3000, 4000, 0.0, 0.0, 0.0, 0.0, 1e6],
        ["p", 0, 1000, 1e6, 1e6, 0.0, 0.0, 0.0], ["p", 1000, 2000, 0.0, 0.0, 0.0, 0.0, 0.0],
        ["p", 2000, 3000, 0.0, 0.0, 0.0, 0.0, 0.0], ["p", 3000, 4000, 0.0, 0.0, 0.0, 0.0, 0.0]]
if got != want:
    failures.append(f"--table of a shaping rule: {got}, expected {want}")

# ---- the pictures --------------------------------------------------------------------------------
def png_problem(file):
    """None for a well-formed 8-bit RGB(A) PNG: signature, chunk CRCs, IHDR first, IEND last, and IDAT
    data that inflates to exactly the rows the header declares."""
    data = open(file, "rb").read()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "no PNG signature"
    at, chunks = 8, []
    while at < len(data):
        if at + 12 > len(data):
            return "a chunk cut short"
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0] != zlib.crc32(kind + body):
            return f"chunk {kind} has a wrong CRC"
        chunks.append((kind, body))
        at += 12 + length
    if chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        return f"chunks {[k for k, _ in chunks]}"
    width, height, depth, color = struct.unpack(">IIBB", chunks[0][1][:10])
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or width < 200 or height < 200:
        return f"header {width}x{height} depth {depth} color type {color}"
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    if len(pixels) != height * (1 + width * channels):
        return f"{len(pixels)} bytes of pixels for {width}x{height}x{channels}"
    return None


result = run_plot(path("packets.csv"), "-o", path("rates.png"), "--columns", "2", "--title", "test", "--label",
                  "a=trtcm, l3+4")
if result.returncode != 0:
    failures.append(f"-o rates.png: exit {result.returncode}: {result.stderr.strip()}")
elif (problem := png_problem(path("rates.png"))) is not None:
    failures.append(f"rates.png is not a valid PNG: {problem}")
result = run_plot(path("packets.csv"), "-o", path("rates.svg"), "--rule", "b")
if result.returncode != 0 or b"<svg" not in open(path("rates.svg"), "rb").read(4096):
    failures.append(f"-o rates.svg: exit {result.returncode}, {result.stderr.strip()}, or no <svg> element")


# ---- refusals ------------------------------------------------------------------------------------
old = write_file("old.csv", "index,rule,key,in_color,out_color,action\n0,a,-,-,green,forward\n")
no_matplotlib = path("no-matplotlib")
os.makedirs(os.path.join(no_matplotlib, "matplotlib"))
write_file("no-matplotlib/matplotlib/__init__.py", "raise ImportError('not installed (the test hides it)')\n")
hidden = dict(os.environ, PYTHONPATH=no_matplotlib)
good = path("packets.csv")
refusals = [
    ("missing file", [path("nowhere.csv"), "--table"], None, 2, "cannot read", "No such file or directory"),
    ("empty file", [write_file("empty.csv", ""), "--table"], None, 2, "is empty", "not a tricolor-replay CSV"),
    ("header only", [write_file("header.csv", ",".join(header) + "\n"), "--table"], None, 2, "holds no packets"),
    ("older tricolor-replay", [old, "-o", path("x.png")], None, 2, "no time_ns column", "older tricolor-replay"),
    ("not a replay CSV", [write_file("other.csv", "a,b\n1,2\n"), "--table"], None, 2, "not a tricolor-replay CSV"),
    ("malformed line", [write_file("bad.csv", ",".join(header) + "\n0,a,-,-,green,forward,0,64,54\n1,a,-,-,green,"
                              "forward,zero,64,54\n"), "--table"], None, 2, "line 3: malformed"),
    ("default action only", [write_file("default.csv", ",".join(header) + "\n0,-,-,-,-,forward,0,60,-\n"), "--table"],
     None, 2, "no packet matched a rule"),
    ("unknown rule", [good, "--table", "--rule", "a", "--rule", "nope"], None, 2, "no packets of rule 'nope'",
     f"(its rules: {', '.join(in_order)})"),
    ("label of an unknown rule", [good, "--table", "--label", "c=x"], None, 2, "no packets of rule 'c'"),
    ("label without =", [good, "--table", "--label", "a"], None, 1, "--label: expected RULE=TEXT"),
    ("unwritable output", [good, "-o", path("no/such/dir/x.png")], None, 2, "cannot write"),
    ("not a picture format", [good, "-o", path("x.txt")], None, 1, "must end in .png, .svg, .pdf"),
    ("nothing to do", [good], None, 1, "nothing to do"),
    ("bad interval", [good, "--table", "--interval", "0ms"], None, 1, "expected a duration"),
    ("too many intervals", [good, "--table", "--interval", "10ns"], None, 1, "into more than 1000000 intervals"),
    ("fractional ns", [good, "--table", "--interval", "1.5ns"], None, 1, "whole number of nanoseconds"),
    ("no matplotlib", [good, "-o", path("y.png")], hidden, 2, "drawing needs matplotlib", "python3-matplotlib"),
]
for name, args, env, status, *words in refusals:
    result = run_plot(*args, env=env)
    if result.returncode != status or not all(w in result.stderr for w in words):
        failures.append(f"{name}: exit {result.returncode} (expected {status}), stderr {result.stderr.strip()!r} "
                        f"(expected {words})")
if os.path.exists(path("y.png")) or os.path.exists(path("x.png")):
    failures.append("a refused run wrote a picture")
# Without matplotlib, --table still works.
if table_of(run_plot(good, "--table", "--interval", "1ms", env=hidden)) != table_of(run_plot(good, "--table", "--interval", "1ms")):
    failures.append("--table without matplotlib differs from --table with it")

if failures:
    print("\n".join(failures))
    print(f"files kept in {work}")
    sys.exit(1)
shutil.rmtree(work)
print(f"plot: {len(packets)} packets, CSV times and lengths exact, 4 tables, PNG and SVG, {len(refusals)} refusals")
