#!/usr/bin/env python3
"""tricolor-replay on a long capture (issue 25): on a terminal it shows its progress on stderr (packets,
rate, elapsed, time left), never when stderr is not a terminal; at Ctrl-C (SIGINT) it stops, says after
how many packets, exits 130, and every output is whole: the pcap's records, the CSV's lines (one per
packet said), the JSON. A second run without SIGINT goes to the end (exit 0).

Run by meson: interrupt_test.py TRICOLOR_REPLAY.
"""
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402

replay = sys.argv[1]
failures = []
PACKETS = 2_000_000


def expect(what, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + what + ("" if condition else f": {detail!r}"))
    if not condition:
        failures.append(what)


def write_capture(path):
    """PACKETS UDP frames to 10.0.0.1, 1 us apart (a nanosecond pcap)."""
    frame = bytes.fromhex("02000000000102000000000208004500001c00000000401100000a000002"
                          "0a0000010035003500080000") + bytes(18)
    head = struct.Struct("<IIII")
    with open(path, "wb") as f:
        f.write(bytes.fromhex("4d3cb2a1020004000000000000000000ffff000001000000"))
        chunk = []
        for i in range(PACKETS):
            ns = i * 1000
            chunk.append(head.pack(ns // 1_000_000_000, ns % 1_000_000_000, len(frame), len(frame)) + frame)
            if len(chunk) == 100_000:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))


def pcap_records(path):
    """The records of a nanosecond pcap, checking that each is whole; None if one is cut short."""
    data = open(path, "rb").read()
    at, count = 24, 0
    while at < len(data):
        if at + 16 > len(data):
            return None
        length = struct.unpack_from("<I", data, at + 8)[0]
        at += 16 + length
        if at > len(data):
            return None
        count += 1
    return count


with tempfile.TemporaryDirectory(prefix="tricolor-interrupt-") as tmp:
    capture = os.path.join(tmp, "long.pcap")
    write_capture(capture)
    policy = os.path.join(tmp, "policy")
    open(policy, "w").write("profile add p 1r2c cir 100mbit cbs 64k\nrule add all dst 10.0.0.0/8 profile p\n")
    outputs = {name: os.path.join(tmp, f"out.{name}") for name in ("pcap", "csv", "json")}
    argv = [replay, "--policy", policy, "--in", capture, "--out", outputs["pcap"], "--csv", outputs["csv"],
            "--json", outputs["json"]]

    # On a terminal: the progress line, then Ctrl-C.
    master, slave = pty.openpty()
    run = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    said = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and b"left" not in said:
        if select.select([master], [], [], 0.2)[0]:
            try:
                said += os.read(master, 4096)
            except OSError:
                break
    expect("on a terminal: a progress line with packets, rate, elapsed and time left",
           re.search(rb"\rtricolor-replay: \d+ packets, [\d.]+ Mpps, \d+:\d\d elapsed, about \d+:\d\d left", said), said[-300:])
    run.send_signal(signal.SIGINT)
    while True:
        try:
            ready = select.select([master], [], [], 30)[0]
            chunk = os.read(master, 4096) if ready else b""
        except OSError:
            chunk = b""
        if not chunk:
            break
        said += chunk
    status = run.wait(timeout=60)
    os.close(master)
    text = said.decode(errors="replace")
    expect("SIGINT: exit status 130", status == 130, status)
    match = re.search(r"interrupted \(SIGINT\) after (\d+) packets", text)
    expect("SIGINT: says after how many packets", match, text[-500:])
    done = int(match.group(1)) if match else -1
    expect("SIGINT: stopped before the end", 0 < done < PACKETS, done)
    expect("SIGINT: the progress line is cleared before the message", "\r\x1b[K" in text)
    # Its memory-only EAL's runtime directory went as soon as the EAL was up, however the process ends.
    runtime = daemon_capture.prefix_runtime_dir(f"tricolor-replay-{run.pid}")
    expect("SIGINT: no DPDK runtime directory left", not os.path.exists(runtime), runtime)
    records = pcap_records(outputs["pcap"])
    expect("SIGINT: the pcap's records are whole, one per packet forwarded", records is not None and 0 < records <= done,
           (records, done))
    csv_lines = open(outputs["csv"]).read().split("\n")
    expect("SIGINT: the CSV has a whole line per packet processed", csv_lines[-1] == "" and len(csv_lines) - 2 == done,
           (len(csv_lines), done))
    summary = json.load(open(outputs["json"]))
    metered = sum(summary["rules"][0][color]["packets"] for color in ("green", "yellow", "red"))
    expect("SIGINT: the JSON is whole, counts those packets and says the capture was not read to its end",
           summary["capture"] == {"packets": done, "truncated": True} and metered == done, (summary["capture"], metered))

    # Not a terminal: no progress line; to the end.
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    expect("not a terminal: to the end, exit 0, no progress line", run.returncode == 0 and "Mpps" not in run.stderr,
           (run.returncode, run.stderr[-300:]))
    expect("to the end: every packet in the CSV", len(open(outputs["csv"]).read().split("\n")) - 2 == PACKETS)

if failures:
    print(f"{len(failures)} failures: {failures}")
    sys.exit(1)
print("all checks passed")
