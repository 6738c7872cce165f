#!/usr/bin/env python3
"""tricolor-replay against inputs that would exhaust memory (issue 7), with the real binary, each run
under an address-space limit (setrlimit RLIMIT_AS) so that a regression fails instead of swapping.
The plain build only: sanitizer builds reserve terabytes of address space and cannot run under such a
limit (meson does not register this test there).

The EAL of tricolor-replay reserves its 2 GiB heap (--no-huge -m 2048) as address space; every limit
below is that plus what the case may use.

Usage: hostile_memory_test.py TRICOLOR_REPLAY
"""
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile

replay = sys.argv[1]
work = tempfile.mkdtemp(prefix="tricolor-hostile-memory-")
failures = []
GiB, MiB = 1 << 30, 1 << 20


def path(name):
    return os.path.join(work, name)


def write(name, text):
    with open(path(name), "w") as out:
        out.write(text)
    return path(name)


def sources_pcap(name, count):
    """A nanosecond pcap of `count` UDP packets, each from its own IPv4 source 10.x.y.z, 1 us apart."""
    parts = [struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1)]
    eth = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00"
    tail = bytes([192, 168, 0, 1]) + struct.pack(">HHHH", 1000, 53, 26, 0) + b"\x00" * 18
    for i in range(count):
        ip = struct.pack(">BBHHHBBHI", 0x45, 0, 46, 0, 0, 64, 17, 0, 0x0a000000 + i)
        frame = eth + ip + tail
        t = 1_700_000_000_000_000_000 + i * 1000
        parts.append(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)) + frame)
    with open(path(name), "wb") as out:
        out.write(b"".join(parts))
    return path(name)


def run(args, address_space):
    """Runs the binary under an address-space limit; returns (exit status, stderr, peak RSS in bytes)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    with open(path("stderr"), "w+") as err:
        child = subprocess.Popen([replay, *args], stdout=subprocess.DEVNULL, stderr=err, preexec_fn=limit)
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except BaseException:
            child.kill()
            raise
        err.seek(0)
        text = err.read()
    code = os.waitstatus_to_exitcode(status)
    return code, text, usage.ru_maxrss * 1024


def check(name, code, stderr, expected_code, *fragments):
    if code != expected_code:
        failures.append(f"{name}: exit {code}, expected {expected_code}; stderr: {stderr[:600]!r}")
    for fragment in fragments:
        if fragment not in stderr:
            failures.append(f"{name}: stderr lacks {fragment!r}: {stderr[:600]!r}")


# ---- finding 12: --json --all-keys streams the key list -------------------------------------------------
# It used to build a JSON document of about 2.2 KB per key (1.2 GB for 500 000 keys); the keys are now
# held as 88-byte binary copies to sort them, and written as they go.
KEYS = 500_000
keys_pcap = sources_pcap("keys.pcap", KEYS)
keys_policy = write("keys.policy", "profile add p 1r2c cir 1mbit cbs 10k\nrule add all profile p per src capacity 1m\n")
runs = {}
for label, extra in (("top", []), ("all", ["--all-keys"])):
    code, stderr, peak = run(["--policy", keys_policy, "--in", keys_pcap, "--json", path(label + ".json"), *extra],
                             3 * GiB)
    check(f"--json {' '.join(extra) or '(top keys)'} over {KEYS} keys", code, stderr, 0)
    runs[label] = peak
if not failures:
    per_key = (runs["all"] - runs["top"]) / KEYS
    if per_key > 200:
        failures.append(f"--all-keys costs {per_key:.0f} bytes of peak memory per key (at most 200 expected: "
                        f"{runs['top'] / MiB:.0f} MiB without, {runs['all'] / MiB:.0f} MiB with)")
    listed = json.load(open(path("all.json")))["rules"][0]["keys"]["all"]
    if len(listed) != KEYS or sum(k["green"]["packets"] for k in listed) != KEYS:
        failures.append(f"--all-keys listed {len(listed)} keys, expected {KEYS} with one green packet each")
    print(f"--all-keys: {per_key:.0f} bytes of peak memory per key "
          f"({runs['top'] / MiB:.0f} MiB without, {runs['all'] / MiB:.0f} MiB with, {KEYS} keys)")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("hostile memory: ok")
