#!/usr/bin/env python3
"""The README's main command (./dev run) runs and prints its per-flow table.

Run by meson with the source root and this build directory; ./dev then finds everything installed and
the build current, so it only runs the main job. Checks the table's shape, that the colors add up,
and, for the flows offered at a constant rate above their committed rate, that green is
CBS + CIR * T within one packet.
"""
import os
import re
import subprocess
import sys

source_root, build_root = sys.argv[1], sys.argv[2]
env = dict(os.environ, TRICOLOR_BUILD_DIR=build_root)
result = subprocess.run([os.path.join(source_root, "dev"), "run", "--seconds", "3"], env=env,
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
print(result.stdout)
print(result.stderr, file=sys.stderr)
assert result.returncode == 0, f"./dev run exited {result.returncode}"

header = ("flow algorithm unit input green_pkts green_bytes yellow_pkts yellow_bytes red_pkts red_bytes").split()
lines = result.stdout.splitlines()
start = next(i for i, line in enumerate(lines) if line.split() == header)
rows = {}
for line in lines[start + 1:]:
    if not line.strip():
        break
    fields = line.split()
    assert len(fields) == len(header), f"malformed row: {line!r}"
    rows[fields[0]] = dict(zip(header, fields))
assert len(rows) >= 8, f"expected a row per embedded flow, got {sorted(rows)}"

algorithms = {r["algorithm"] for r in rows.values()}
assert algorithms == {"1r2c", "srtcm", "trtcm", "trtcm4115"}, algorithms
assert {r["unit"] for r in rows.values()} == {"bytes", "packets"}
assert {r["input"] for r in rows.values()} == {"blind", "aware"}

profiles = {}
for line in lines:
    m = re.match(r"\s+(\S+)\s+(\S+) (.*), offered (\S+)$", line)
    if m:
        profiles[m.group(1)] = (m.group(2), dict(zip(m.group(3).split()[::2], m.group(3).split()[1::2])), m.group(4))

SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}
def rate(text):  # bytes/s or packets/s
    m = re.fullmatch(r"(\d+)([kmg]?)(bit|pps)", text)
    value = int(m.group(1)) * SI[m.group(2)]
    return value // 8 if m.group(3) == "bit" else value
def burst(text):
    m = re.fullmatch(r"(\d+)(k|pkt)?", text)
    return int(m.group(1)) * (1024 if m.group(2) == "k" else 1)

seconds = 3
for name, row in rows.items():
    pkts = [int(row[f"{c}_pkts"]) for c in ("green", "yellow", "red")]
    assert sum(pkts) > 0, f"{name}: no packets"
    algorithm, params, offered = profiles[name]
    assert algorithm == row["algorithm"], name
    if algorithm == "1r2c":
        assert pkts[1] == 0, f"{name}: a two-color meter marked yellow"
    # Whatever the traffic, a bucket cannot hand out more than its burst plus its rate times the time.
    tokens = {c: int(row[f"{c}_bytes" if row["unit"] == "bytes" else f"{c}_pkts"]) for c in ("green", "yellow")}
    p = {k: (rate(v) if k.endswith("ir") else burst(v)) for k, v in params.items()}
    assert tokens["green"] <= p["cbs"] + p["cir"] * seconds, f"{name}: too much green"
    if algorithm == "srtcm":
        assert tokens["green"] + tokens["yellow"] <= p["cbs"] + p["ebs"] + p["cir"] * seconds, name
    if algorithm == "trtcm":
        assert tokens["green"] + tokens["yellow"] <= p["pbs"] + p["pir"] * seconds, name
    if algorithm == "trtcm4115":
        assert tokens["yellow"] <= p["ebs"] + p["eir"] * seconds, name

# voice is offered a constant 4 Mbit/s against a 2 Mbit/s 1R2C meter: green is exact to a packet.
voice = rows["voice"]
green, size = int(voice["green_bytes"]), int(voice["green_bytes"]) // int(voice["green_pkts"])
bound = burst(profiles["voice"][1]["cbs"]) + rate(profiles["voice"][1]["cir"]) * seconds
assert bound - size < green <= bound, f"voice: green {green} not within a packet of {bound}"
print("main command: ok")
