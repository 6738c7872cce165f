#!/usr/bin/python3
"""The five limiters (issue 13) through tricolor-replay, the real binary: packets in, colors out, as a table.

Each rule meters its own destination with one algorithm; each row is a packet (when, how long) and the
color the README's rule gives it, worked out by hand in the row's comment. The capture is a nanosecond
pcap, so every time is exact; frames are built to the byte (metered length l2: the frame without FCS).

Usage: limiters_test.py TRICOLOR_REPLAY [WORKDIR]
"""
import csv
import os
import struct
import subprocess
import sys
import tempfile

replay = sys.argv[1]
work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="tricolor-limiters-")
os.makedirs(work, exist_ok=True)

# (Algorithm names are keywords, so the profiles and rules have names of their own.)
POLICY = """
profile add per-window fixed-window limit 3pkt window 10ms
profile add leap sliding-window limit 3pkt window 10ms buckets 2
profile add leap-key sliding-window limit 2pkt window 4ms buckets 4
profile add cells gcra rate 1kpps tolerance 2ms
profile add bursty smooth rate 8kbit max-burst 100
profile add cold warmup rate 1kpps period 4ms cold-factor 3
rule add by-window dst 10.0.0.1 profile per-window red drop
rule add by-leap dst 10.0.0.2 profile leap red drop
rule add by-leap-key dst 10.0.1.0/24 profile leap-key per dst red drop
rule add by-cells dst 10.0.0.3 profile cells red drop
rule add by-bursty dst 10.0.0.4 profile bursty red drop
rule add by-cold dst 10.0.0.5 profile cold red drop
"""

MS = 1_000_000  # ns
G, R = "green", "red"

# (destination, time in ns from the start, frame bytes, expected color). Times are absolute ticks from
# a start that is a whole number of seconds, so the sliding windows' sub-windows (multiples of W/K)
# start at the table's multiples of 5 ms and 1 ms.
TABLE = [
    # fixed-window limit 3 per 10 ms: the first packet opens [0, 10 ms).
    ("10.0.0.1", 0, 64, G),               # opens the window: 1 of 3
    ("10.0.0.1", 8 * MS, 64, G),          # 2
    ("10.0.0.1", 9 * MS, 64, G),          # 3
    ("10.0.0.1", 9 * MS + 500_000, 64, R),  # 4th in the window
    ("10.0.0.1", 10 * MS, 64, G),         # the window has ended: this opens [10, 20 ms)
    ("10.0.0.1", 10 * MS, 64, G),
    ("10.0.0.1", 10 * MS + 1, 64, G),     # 8 to 10 ms: 5 green in 2 ms where 3 per 10 ms was asked
    ("10.0.0.1", 19 * MS, 64, R),
    ("10.0.0.1", 35 * MS, 64, G),         # a window opens at the first packet after the last ended
    ("10.0.0.1", 44 * MS, 64, G),         # [35, 45): 2 of 3
    # sliding-window limit 3 per 10 ms, 2 sub-windows of 5 ms: a window is the current and the previous.
    ("10.0.0.2", 0, 64, G),               # sub-window 0
    ("10.0.0.2", 1 * MS, 64, G),
    ("10.0.0.2", 4 * MS, 64, G),          # 3 in sub-window 0
    ("10.0.0.2", 6 * MS, 64, R),          # sub-windows 0 + 1 count 3
    ("10.0.0.2", 9 * MS + 999_999, 64, R),
    ("10.0.0.2", 10 * MS, 64, G),         # sub-window 2: 0 has left, 1 is empty
    ("10.0.0.2", 10 * MS, 64, G),
    ("10.0.0.2", 14 * MS, 64, G),         # 3 in sub-window 2
    ("10.0.0.2", 15 * MS, 64, R),         # sub-windows 2 + 3: still 3 (the fixed window would allow 3 more)
    ("10.0.0.2", 20 * MS, 64, G),         # sub-windows 3 + 4: empty
    # sliding-window per destination, limit 2 per 4 ms, 4 sub-windows of 1 ms: two keys, each its own.
    ("10.0.1.1", 0, 64, G),
    ("10.0.1.2", 0, 64, G),
    ("10.0.1.1", 1 * MS, 64, G),          # key 1: 2 in sub-windows 0..1
    ("10.0.1.1", 3 * MS, 64, R),          # sub-windows 0..3 hold 2
    ("10.0.1.2", 3 * MS, 64, G),          # key 2: 1 so far
    ("10.0.1.1", 4 * MS, 64, G),          # sub-windows 1..4: sub-window 0 has left
    ("10.0.1.1", 4 * MS + 1, 64, R),      # sub-windows 1..4 hold 2
    # gcra rate 1000 pps tolerance 2 ms: T = 1 ms; a packet conforms when max(TAT, t) + T - t <= tau + T
    # (3 ms): a burst of 3 after idle, then one per ms.
    ("10.0.0.3", 0, 64, G),               # TAT 1 ms
    ("10.0.0.3", 0, 64, G),               # 2 ms
    ("10.0.0.3", 0, 64, G),               # 3 ms: TAT - t + T = 3 ms = tau + T
    ("10.0.0.3", 0, 64, R),
    ("10.0.0.3", 1 * MS - 1, 64, R),      # TAT 3 ms: 3 ms - t + 1 ms > 3 ms
    ("10.0.0.3", 1 * MS, 64, G),          # exactly on time: TAT 4 ms
    ("10.0.0.3", 1 * MS, 64, R),
    ("10.0.0.3", 10 * MS, 64, G),         # idle: a burst of 3 again
    ("10.0.0.3", 10 * MS, 64, G),
    ("10.0.0.3", 10 * MS, 64, G),
    ("10.0.0.3", 10 * MS, 64, R),
    # smooth rate 1000 bytes/s max-burst 100 bytes, starting with 100 stored.
    ("10.0.0.4", 0, 1000, G),             # next free time not in the future: passes; 100 stored + 900 owed = 0.9 s
    ("10.0.0.4", 0, 64, R),               # next free at 0.9 s
    ("10.0.0.4", 500 * MS, 64, R),
    ("10.0.0.4", 900 * MS, 100, G),       # at the next free time: 100 owed, next free 1.0 s
    ("10.0.0.4", 950 * MS, 64, R),
    ("10.0.0.4", 1000 * MS, 64, G),       # next free 1.064 s
    ("10.0.0.4", 5000 * MS, 100, G),      # idle: 100 stored again, spent: next free stays 5 s
    ("10.0.0.4", 5000 * MS, 100, G),      # nothing stored: prepaid, next free 5.1 s
    ("10.0.0.4", 5000 * MS, 64, R),
    # warmup rate 1000 pps period 4 ms cold-factor 3: threshold 2 permits, most stored 4, starting cold
    # (4 stored). A permit x above the threshold costs 1 ms * (1 + 2x / 2): spending 4 -> 3 costs the
    # area from x = 2 down to 1, 2.5 ms; 3 -> 2 costs 1.5 ms; below the threshold 1 ms each.
    ("10.0.0.5", 0, 64, G),               # next free 2.5 ms
    ("10.0.0.5", 1 * MS, 64, R),
    ("10.0.0.5", 2 * MS + 500_000, 64, G),  # next free 4 ms
    ("10.0.0.5", 4 * MS - 1, 64, R),
    ("10.0.0.5", 4 * MS, 64, G),          # 2 -> 1 stored: next free 5 ms
    ("10.0.0.5", 5 * MS, 64, G),          # 1 -> 0: 6 ms
    ("10.0.0.5", 6 * MS, 64, G),          # nothing stored: 1 ms, at the stable rate: 7 ms
    ("10.0.0.5", 6 * MS + 500_000, 64, R),
    ("10.0.0.5", 7 * MS, 64, G),
]

START = 1_700_000_000  # seconds: a multiple of every sub-window above


def udp_frame(dst, size):
    """Ethernet + IPv4 + UDP to `dst`, `size` bytes in all (no FCS), checksums left 0."""
    ip_len = size - 14
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, 17, 0, bytes([192, 0, 2, 1]),
                     bytes(int(x) for x in dst.split(".")))
    udp = struct.pack("!HHHH", 1000, 53, ip_len - 20, 0)
    frame = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00]) + ip + udp
    return frame + bytes(size - len(frame))


# The packets in time order (the table is grouped by rule); a stable sort keeps each group's order.
packets = sorted(enumerate(TABLE), key=lambda item: item[1][1])
in_pcap = os.path.join(work, "in.pcap")
with open(in_pcap, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))  # nanosecond pcap
    for _, (dst, t, size, _) in packets:
        frame = udp_frame(dst, size)
        f.write(struct.pack("<IIII", START + t // 1_000_000_000, t % 1_000_000_000, len(frame), len(frame)) + frame)
policy = os.path.join(work, "policy")
with open(policy, "w") as f:
    f.write(POLICY)
out_csv = os.path.join(work, "out.csv")
run = subprocess.run([replay, "--policy", policy, "--in", in_pcap, "--csv", out_csv], capture_output=True, text=True)
if run.returncode != 0:
    sys.exit(f"tricolor-replay failed ({run.returncode}): {run.stderr}")

rows = list(csv.DictReader(open(out_csv)))
assert len(rows) == len(packets), f"{len(rows)} CSV rows for {len(packets)} packets"
failures = []
for row, (table_index, (dst, t, size, expected)) in zip(rows, packets):
    if row["out_color"] != expected:
        failures.append(f"row {table_index} ({dst} at {t / MS:g} ms, {size} bytes, rule {row['rule']}): "
                        f"{row['out_color']}, expected {expected}")
    if row["action"] != ("drop" if expected == R else "forward"):
        failures.append(f"row {table_index}: action {row['action']} for {row['out_color']}")
for line in failures:
    print("FAIL", line)
print(f"{len(packets) - len(failures)} of {len(packets)} packets as the table says")
sys.exit(1 if failures else 0)
