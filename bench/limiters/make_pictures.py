#!/usr/bin/python3
"""The README's comparison of the meter algorithms: one greedy on/off source through each, side by side.

One capture (scapy): a source offering twice the rate R = 8 Mbit/s in 1000-byte frames, evenly spaced,
for 1 s, silent for 1 s, then again for 1 s, and silent to the end of the fourth second. Each algorithm
gets its own copy of that traffic (destination 10.0.0.N for the Nth algorithm) and a rule matching it,
with a profile of rate R and, where the algorithm has one, a burst of about 128 ms at R (128 KiB, a step wide enough to see). The
script replays the capture with tricolor-replay, draws the CSV with tricolor-plot, one panel per rule,
three to a row, and writes the picture (bench/limiters/onoff.png unless told).

Not a test (it asserts nothing) and not shipped: it makes a figure from the real programs, as the other
scripts under bench/ make the README's figures; run it again when an algorithm changes.

Usage: bench/limiters/make_pictures.py [--build build] [--out onoff.png] [--algorithms 1r2c,srtcm,...]
(/usr/bin/python3: Debian's python3-scapy and python3-matplotlib)
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

from scapy.all import Ether, IP, UDP, Raw

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RATE_BITS = 8_000_000  # R
FRAME_BYTES = 1000
ON_S, OFF_S, PERIODS, SECONDS = 1, 1, 2, 4  # on 1 s, off 1 s, twice; drawn over 4 s
# The profile of each algorithm, rate R (8 Mbit/s = 1 MB/s) and bursts of 128 KiB; windows of 250 ms hold
# 250 ms at R; the warm-up period is 500 ms, so that the ramp ends within a second on and the meter is cold again after a second off. The rule is named after the algorithm (onoff-ALGO: a name starts with a letter); its panel
# shows the profile.
PROFILES = {
    "1r2c": "1r2c cir 8mbit cbs 128k",
    "srtcm": "srtcm cir 8mbit cbs 128k ebs 128k",
    "trtcm": "trtcm cir 8mbit cbs 128k pir 12mbit pbs 128k",
    "trtcm4115": "trtcm4115 cir 8mbit cbs 128k eir 4mbit ebs 128k",
    "fixed-window": "fixed-window limit 250000 window 250ms",
    "sliding-window": "sliding-window limit 250000 window 250ms buckets 4",
    "gcra": "gcra rate 8mbit tolerance 128ms",
    "smooth": "smooth rate 8mbit max-burst 128k",
    "warmup": "warmup rate 8mbit period 500ms cold-factor 3",
}


def write_capture(path, count):
    """The on/off source, once per algorithm (destination 10.0.0.1 ... 10.0.0.count), as a nanosecond pcap."""
    gap_ns = FRAME_BYTES * 8 * 10**9 // (2 * RATE_BITS)  # twice the rate
    frames = [bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.9.0.1", dst=f"10.0.0.{n}") /
                    UDP(sport=4000, dport=5000) / Raw(b"\0" * (FRAME_BYTES - 42))) for n in range(1, count + 1)]
    start = 1_700_000_000 * 10**9
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for period in range(PERIODS):
            on = start + period * (ON_S + OFF_S) * 10**9
            for t in range(on, on + ON_S * 10**9, gap_ns):
                for frame in frames:
                    f.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)) + frame)
        # One packet of no rule at the end, so that the pictures span the whole 4 s.
        end = start + SECONDS * 10**9 - 1
        f.write(struct.pack("<IIII", end // 10**9, end % 10**9, len(frames[0]), len(frames[0])) +
                bytes(Ether() / IP(dst="10.1.0.1") / UDP() / Raw(b"\0" * (FRAME_BYTES - 42))))


def run(command):
    """A program of ours; its own message says what went wrong."""
    if subprocess.run(command, stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit(f"make_pictures: {os.path.basename(command[0])} failed (above)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the meson build folder (default build)")
    parser.add_argument("--out", default=os.path.join(HERE, "onoff.png"), help="the picture (default %(default)s)")
    parser.add_argument("--algorithms", default=",".join(PROFILES),
                        help="which, comma-separated, in order (default: all nine)")
    parser.add_argument("--work", help="keep the capture, policy and CSV in this folder (default: a temporary one)")
    args = parser.parse_args()
    algorithms = args.algorithms.split(",")
    unknown = [a for a in algorithms if a not in PROFILES]
    if unknown:
        sys.exit(f"make_pictures: unknown algorithm {', '.join(unknown)} (known: {', '.join(PROFILES)})")

    work = args.work or tempfile.mkdtemp(prefix="tricolor-pictures-")
    os.makedirs(work, exist_ok=True)
    capture, policy, table = (os.path.join(work, name) for name in ("onoff.pcap", "onoff.policy", "onoff.csv"))
    write_capture(capture, len(algorithms))
    with open(policy, "w") as f:
        for n, algorithm in enumerate(algorithms, 1):
            f.write(f"profile add p-{algorithm} {PROFILES[algorithm]}\n")
            f.write(f"rule add onoff-{algorithm} dst 10.0.0.{n} profile p-{algorithm}\n")
    run([os.path.join(args.build, "control", "tricolor-replay"), "--policy", policy, "--in", capture, "--csv", table])
    labels = [arg for algorithm in algorithms for arg in ("--label", f"onoff-{algorithm}={PROFILES[algorithm]}")]
    run([os.path.join(ROOT, "control", "tricolor_plot.py"), table, "-o", args.out, "--columns", "3", "--interval", "20ms",
         *labels, "--title", f"one greedy on/off source ({FRAME_BYTES}-byte frames at 16 Mbit/s for 1 s, silent 1 s, twice)"])
    print(f"make_pictures: {', '.join(algorithms)} -> {args.out}")


if __name__ == "__main__":
    main()
