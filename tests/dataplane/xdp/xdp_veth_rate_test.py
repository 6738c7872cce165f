#!/usr/bin/env python3
"""The XDP program's aggregate meter under the kernel's own traffic (issue 24, section 3).

Two network namespaces of the test's own (unique names, removed in `finally`) joined by a veth pair;
tricolord --xdp on one end (native XDP), a UDP flood for about 2 s from a socket in the peer
namespace, far above the rule's rate. Checked, from `tricolorctl stats` (green bytes are L2 frames,
the length the rule meters):
  green bytes <= CBS + CIR·T + one frame, T from the sender's first send to its last plus 50 ms
  (CLOCK_MONOTONIC, bpf_ktime_get_ns's clock, read in the sender's namespace: the same clock);
  green bytes >= half of CIR times the sending time (the meter does let its rate through: a meter
  that admitted nothing would pass the bound);
  red packets > 0 (the flood was above the rate) and every frame sent counted once: green + red
  (so the program metered the whole flood: it is attached before the first send).
The daemon ends by itself (--duration) or is stopped by its own PID.

Run by meson: xdp_veth_rate_test.py BUILD_ROOT.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77  # meson: skipped
if os.geteuid() != 0:
    print("skipped: attaching XDP programs and making network namespaces needs root")
    sys.exit(SKIP)

BUILD = os.path.abspath(sys.argv[1])
TRICOLORD = os.path.join(BUILD, "control", "tricolord")
TRICOLORCTL = os.path.join(BUILD, "control", "tricolorctl")

TAG = f"{os.getpid() % 100000}"
NS_D, NS_P = f"trd{TAG}", f"trp{TAG}"
IF_D, IF_P = f"trd{TAG}", f"trp{TAG}"
ADDR_D, ADDR_P = "10.78.0.1", "10.78.0.2"

CIR_BYTES = 1_000_000  # 8 Mbit/s
CBS_BYTES = 20_000
PAYLOAD = 972  # 1014-byte frames: 14 + 20 + 8 + 972
FRAME = 14 + 20 + 8 + PAYLOAD
SEND_S = 2.0

# Green dropped too: counted as green all the same, and no port-unreachable comes back (an ICMP error
# would fail the sender's next send, IP_RECVERR being on).
POLICY = f"""\
profile add agg 1r2c cir {CIR_BYTES * 8}bit cbs {CBS_BYTES}
rule add agg proto udp dport 5001 profile agg green drop red drop
"""

# Sends as fast as one socket can for SEND_S seconds; prints the count and its first and last send's
# CLOCK_MONOTONIC (ns).
SENDER = r"""
import socket, sys, time
dst, seconds, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
# Without IP_RECVERR a UDP send the device refuses (the veth's ring full: ENOBUFS) returns success.
s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_RECVERR", 11), 1)
payload = b"x" * size
count, first = 0, time.clock_gettime_ns(time.CLOCK_MONOTONIC)
end = first + int(seconds * 1e9)
last = first
while last < end:
    try:
        s.sendto(payload, (dst, 5001))
        count += 1
    except OSError:  # a full queue: try again
        pass
    last = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
print(count, first, last, flush=True)
"""

failures = []


def expect(what, condition, detail=""):
    print(("ok    " if condition else "FAIL  ") + what + ("" if condition else f": {detail}"), flush=True)
    if not condition:
        failures.append(what)


def sh(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r


def in_ns(ns, *argv):
    return ["ip", "netns", "exec", ns, *argv]


def main():
    work = tempfile.mkdtemp(prefix="tricolor-xdp-rate-")
    policy = os.path.join(work, "policy")
    with open(policy, "w") as f:
        f.write(POLICY)
    sock = os.path.join(work, "sock")
    daemon = None
    try:
        sh("ip", "netns", "add", NS_D)
        sh("ip", "netns", "add", NS_P)
        sh("ip", "link", "add", IF_D, "netns", NS_D, "type", "veth", "peer", "name", IF_P, "netns", NS_P)
        sh("ip", "-n", NS_D, "addr", "add", f"{ADDR_D}/24", "dev", IF_D)
        sh("ip", "-n", NS_P, "addr", "add", f"{ADDR_P}/24", "dev", IF_P)
        for ns, dev in ((NS_D, IF_D), (NS_P, IF_P)):
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        mac_d = json.loads(sh("ip", "-n", NS_D, "-j", "link", "show", IF_D).stdout)[0]["address"]
        sh("ip", "-n", NS_P, "neigh", "replace", ADDR_D, "lladdr", mac_d, "dev", IF_P, "nud", "permanent")

        daemon = subprocess.Popen(in_ns(NS_D, TRICOLORD, "--xdp", IF_D, "--policy", policy, "--socket", sock,
                                        "--duration", "60"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        # Until it answers and the program is on the link: the socket's file alone is not enough (frames
        # sent before the program is attached are not metered).
        deadline = time.monotonic() + 30
        answered = False
        while not answered and daemon.poll() is None and time.monotonic() < deadline:
            answered = subprocess.run([TRICOLORCTL, "--socket", sock, "ping"], capture_output=True,
                                      timeout=30).returncode == 0
            if not answered:
                time.sleep(0.1)
        if not answered:
            raise RuntimeError(f"tricolord --xdp did not start: {daemon.stderr.read() if daemon.poll() is not None else ''}")
        attached = sh("ip", "-n", NS_D, "-d", "link", "show", IF_D).stdout
        if "prog/xdp" not in attached:
            raise RuntimeError(f"no XDP program on {IF_D} once tricolord answers: {attached}")

        out = sh(*in_ns(NS_P, sys.executable, "-c", SENDER, ADDR_D, str(SEND_S), str(PAYLOAD))).stdout.split()
        sent, first, last = int(out[0]), int(out[1]), int(out[2])
        time.sleep(0.1)  # the last frames through the program
        r = subprocess.run([TRICOLORCTL, "--socket", sock, "--json", "stats", "rules"], capture_output=True,
                           text=True, timeout=30)
        expect("stats rules answers", r.returncode == 0, r.stderr)
        rules = {x["name"]: x for x in json.loads(r.stdout)["result"]["rules"]} if r.returncode == 0 else {}
        agg = rules.get("agg", {})
        green, red = agg.get("green_bytes", 0), agg.get("red_packets", 0)
        t_ns = last - first + 50_000_000
        bound = CBS_BYTES + CIR_BYTES * t_ns // 1_000_000_000 + FRAME
        print(f"sent {sent} frames of {FRAME} bytes in {(last - first) / 1e9:.3f} s; green {green} bytes "
              f"({agg.get('green_packets')} frames), red {red}; bound {bound}", flush=True)
        expect("green bytes within CBS + CIR·T + one frame", green <= bound, f"{green} > {bound}")
        expect("green bytes at least half of CIR over the sending time",
               2 * green >= CIR_BYTES * (last - first) // 1_000_000_000, green)
        expect("the flood was above the rate: red frames", red > 0, agg)
        expect("every frame counted once, green or red",
               agg.get("green_packets", 0) + red == sent and green == agg.get("green_packets", 0) * FRAME, agg)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)  # by the PID started here (ip netns exec execs tricolord)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        subprocess.run(["ip", "netns", "del", NS_D], capture_output=True)
        subprocess.run(["ip", "netns", "del", NS_P], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failures else 0)


main()
