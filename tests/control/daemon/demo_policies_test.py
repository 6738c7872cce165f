#!/usr/bin/env python3
"""The demo's policies (control/demo/*.policy) load in tricolor-replay and split the generators' traffic
as their comments say.

Builds a capture of the frames each generator sends, one per address in turn (the fields testpmd
writes: txonly --txonly-multi-flow --tx-ip=10.0.0.1,10.0.0.2 sends 64-byte UDP frames 9 -> 9 from
10.0.X.3, X = 0..255; flowgen --flowgen-flows=1024 sends 60-byte UDP frames 1000 -> 1001 from
10.254.0.0 to 10.253.0.0 + i, i = 0..1023), replays it through the policy with --csv and --json, and
checks the rule of every frame and the per-key rule's key count.

Usage: demo_policies_test.py TRICOLOR_REPLAY SOURCE_ROOT
"""
import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

replay, source_root = sys.argv[1], sys.argv[2]
demo = os.path.join(source_root, "control", "demo")


def udp_frame(src, dst, sport, dport, size):
    ethernet = bytes.fromhex("020000000001" "020000000002" "0800")  # destination, source, IPv4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, 0, 0, 64, 17, 0, bytes(src), bytes(dst))
    udp = struct.pack("!HHHH", sport, dport, size - 14 - 20, 0)
    return ethernet + ip + udp + bytes(size - 14 - 28)


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # microseconds, Ethernet
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", 1, i, len(frame), len(frame)) + frame)


cases = {
    # policy: (frames, the rule each frame must meet, the per-key rule and its keys)
    "daemon.policy": (
        [udp_frame([10, 0, x, 3], [10, 0, 0, 2], 9, 9, 64) for x in range(256)],
        ["steady"] * 64 + ["tiered"] * 64 + ["sources"] * 128, "sources", 128),
    "daemon-flowgen.policy": (
        [udp_frame([10, 254, 0, 0], [10, 253, i >> 8, i & 255], 1000, 1001, 60) for i in range(1024)],
        ["steady"] * 256 + ["tiered"] * 256 + ["destinations"] * 512, "destinations", 512),
}


def check(policy, frames, expected, keyed, keys):
    capture, table, summary = (os.path.join(work, policy + suffix) for suffix in (".pcap", ".csv", ".json"))
    write_pcap(capture, frames)
    result = subprocess.run([replay, "--policy", os.path.join(demo, policy), "--in", capture, "--csv", table,
                             "--json", summary], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        failures.append(f"{policy}: tricolor-replay exited {result.returncode}: {result.stderr.strip()}")
        return
    with open(table) as f:
        got = [row["rule"] for row in csv.DictReader(f)]
    wrong = [(i, g, e) for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    if len(got) != len(expected) or wrong:
        failures.append(f"{policy}: {len(got)} rows for {len(expected)} frames; first wrong (frame, rule, "
                        f"expected): {wrong[:3]}")
    with open(summary) as f:
        rule = next(r for r in json.load(f)["rules"] if r["name"] == keyed)
    if rule["keys"]["live"] != keys:
        failures.append(f"{policy}: rule {keyed} has {rule['keys']['live']} live keys, {keys} expected")
    print(f"{policy}: {len(frames)} frames, rules as documented, {keyed}: {rule['keys']['live']} keys")


work = tempfile.mkdtemp(prefix="tricolor-demo-policies-")
failures = []
try:
    for policy, case in cases.items():
        check(policy, *case)
finally:
    shutil.rmtree(work)
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("demo policies: ok")
