#!/usr/bin/env python3
"""tricolor-replay's command line, with the real binary: unreadable or missing capture and policy, a
policy error (the line and token named, nothing run), a capture cut mid-packet (results for what was
read, a warning, "truncated" in the JSON), a capture of another link type, and a pcapng capture whose
interface ids become ingress ports.

Usage: errors_test.py TRICOLOR_REPLAY
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

replay = sys.argv[1]
work = tempfile.mkdtemp(prefix="tricolor-replay-errors-")
failures = []


def run(*args):
    return subprocess.run([replay, *args], capture_output=True, text=True, timeout=120)


def expect(name, result, code, *fragments):
    if result.returncode != code:
        failures.append(f"{name}: exit {result.returncode}, expected {code}; stderr: {result.stderr!r}")
    for fragment in fragments:
        if fragment not in result.stderr:
            failures.append(f"{name}: stderr lacks {fragment!r}: {result.stderr!r}")


def frame(i):
    # Ethernet + IPv4 + UDP to 10.0.0.1:53, 60 bytes, valid header checksum not needed here.
    ip = bytes([0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 10, 0, 0, 1])
    udp = struct.pack(">HHHH", 1000 + i, 53, 26, 0)
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + udp + b"\x00" * 18


def write_pcap(path, frames, linktype=1, cut=0):
    data = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, linktype)
    for i, f in enumerate(frames):
        data += struct.pack("<IIII", 1_700_000_000, i * 1000, len(f), len(f)) + f
    with open(path, "wb") as out:
        out.write(data[:len(data) - cut] if cut else data)


policy = os.path.join(work, "policy")
with open(policy, "w") as f:
    f.write("profile add p 1r2c cir 1mbit cbs 10k\nrule add dns proto udp dport 53 profile p\n")
capture = os.path.join(work, "in.pcap")
write_pcap(capture, [frame(i) for i in range(10)])

ok = run("--policy", policy, "--in", capture, "--json", os.path.join(work, "ok.json"))
expect("good inputs", ok, 0)

# --change-at INDEX:COMMAND (live changes replayed): each malformed one refused before anything runs.
expect("change-at without an index", run("--policy", policy, "--in", capture, "--change-at", "rule delete dns"), 1,
       "expected INDEX:COMMAND")
expect("change-at with a bad index", run("--policy", policy, "--in", capture, "--change-at", "1x:rule delete dns"), 1,
       "expected INDEX:COMMAND")
expect("change-at out of order", run("--policy", policy, "--in", capture, "--change-at", "5:profile change p 1r2c cir 2mbit cbs 10k",
                                     "--change-at", "3:rule delete dns"), 1, "in the order of their packets (3 after 5)")
expect("change-at with a bad command", run("--policy", policy, "--in", capture, "--change-at", "2:rule delete nosuch"), 1,
       "--change-at '2:rule delete nosuch': ", "nosuch")
expect("change-at past the capture", run("--policy", policy, "--in", capture, "--change-at", "10:rule delete dns"), 0,
       "never applied: the capture has 10 packets")
changed = run("--policy", policy, "--in", capture, "--csv", os.path.join(work, "changed.csv"), "--change-at", "4:rule delete dns")
expect("change-at applied before its packet", changed, 0)
rules = [line.split(",")[1] for line in open(os.path.join(work, "changed.csv")).read().splitlines()[1:]]
if rules != ["dns"] * 4 + ["-"] * 6:
    failures.append(f"change-at 4: the rule of each packet is {rules}, expected dns for 0-3 and none after")

expect("missing capture", run("--policy", policy, "--in", os.path.join(work, "nope.pcap")), 2, "nope.pcap")
expect("capture is a directory", run("--policy", policy, "--in", work), 2, work)
not_capture = os.path.join(work, "text.pcap")
with open(not_capture, "w") as f:
    f.write("hello, this is not a capture\n")
expect("not a capture", run("--policy", policy, "--in", not_capture), 2, "text.pcap")
wifi = os.path.join(work, "wifi.pcap")
write_pcap(wifi, [frame(0)], linktype=105)
expect("a link type not read", run("--policy", policy, "--in", wifi), 2, "wifi.pcap", "link type 105 (IEEE802_11) is not one tricolor reads")
expect("missing policy", run("--policy", os.path.join(work, "nope.policy"), "--in", capture), 2, "nope.policy")
bad = os.path.join(work, "bad.policy")
with open(bad, "w") as f:
    f.write("profile add p 1r2c cir 1mbit cbs 10k\n# fine so far\nrule add dns proto udpx dport 53 profile p\n")
bad_run = run("--policy", bad, "--in", capture, "--csv", os.path.join(work, "bad.csv"))
expect("policy error", bad_run, 2, "bad.policy", "line 3", "'udpx'")
if os.path.exists(os.path.join(work, "bad.csv")):
    failures.append("a policy error still wrote the CSV")
expect("no arguments", run(), 1, "--policy and --in are required")

# Cut in the middle of the 8th packet: 7 packets of results, a warning, exit 0.
cut = os.path.join(work, "cut.pcap")
write_pcap(cut, [frame(i) for i in range(8)], cut=20)
cut_json, cut_csv = os.path.join(work, "cut.json"), os.path.join(work, "cut.csv")
cut_run = run("--policy", policy, "--in", cut, "--json", cut_json, "--csv", cut_csv)
expect("cut capture", cut_run, 0, "reading stopped after 7 packets (truncated dump file")
if cut_run.returncode == 0:
    summary = json.load(open(cut_json))
    if summary["capture"] != {"packets": 7, "truncated": True}:
        failures.append(f"cut capture summary: {summary['capture']}")
    if sum(1 for _ in open(cut_csv)) != 8:
        failures.append("cut capture: the CSV should have a header and 7 lines")
    if summary["rules"][0]["green"]["packets"] != 7:
        failures.append(f"cut capture: {summary['rules'][0]}")

# pcapng: the interface id is the ingress port; each interface has its own timestamp resolution.
def block(kind, body):
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", kind, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def option(code, value):
    return struct.pack("<HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
idb_us = block(1, struct.pack("<HHI", 1, 0, 65535))                                    # interface 0: microseconds
idb_ns = block(1, struct.pack("<HHI", 1, 0, 65535) + option(9, b"\x09") + option(0, b""))  # interface 1: ns
packets = b""
for i in range(6):
    interface = i % 2
    ticks = (1_700_000_000 * 10**6 + i) if interface == 0 else (1_700_000_000 * 10**9 + i * 1000)
    f = frame(i)
    packets += block(6, struct.pack("<IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(f), len(f)) + f)
pcapng = os.path.join(work, "two-ports.pcapng")
with open(pcapng, "wb") as out:
    out.write(shb + idb_us + idb_ns + packets)
port_policy = os.path.join(work, "ports.policy")
with open(port_policy, "w") as f:
    f.write("profile add p 1r2c cir 1mbit cbs 10k\nrule add from-one port 1 profile p\nrule add from-zero port 0 profile p\n")
port_csv = os.path.join(work, "ports.csv")
port_run = run("--policy", port_policy, "--in", pcapng, "--csv", port_csv)
expect("pcapng", port_run, 0)
if port_run.returncode == 0:
    got = [row.split(",")[1] for row in open(port_csv).read().splitlines()[1:]]
    if got != ["from-zero", "from-one"] * 3:
        failures.append(f"pcapng interfaces as ports: {got}")

if failures:
    print("\n".join(failures))
    print(f"files kept in {work}")
    sys.exit(1)
shutil.rmtree(work)
print("replay errors: ok")
