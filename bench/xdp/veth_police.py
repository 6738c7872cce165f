#!/usr/bin/env python3
"""Mpps on a veth pair: tricolord --xdp beside tc police on the same veth, as information (issue 24, 4).

A veth pair between two network namespaces of this script's own (tests/control/daemon/veth_rig.py);
dpdk-testpmd `txonly` on `net_af_packet` in the peer namespace sends 64-byte UDP frames into its end as
fast as it can; on the other end, in turn:
  - nothing attached (what the veth delivers: the kernel's own receive path, `ip -s link` counters);
  - `tc police` (clsact ingress, matchall, police at RATE, drop what exceeds);
  - `tricolord --xdp` (native mode) with one aggregate rule at the same RATE (red dropped), its
    `stats` counters;
each for --seconds, the packets the policer saw per second. The generator is the same for all three, so
where it is the bottleneck all three read alike: then the figure says only that neither policer slowed
the veth down. As root; about 30 s.

    bench/xdp/veth_police.py --build-dir build [--seconds 5] [--rate 100mbit]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "control", "daemon"))
from veth_rig import Rig, in_ns, sh, tag  # noqa: E402


def rx_packets(rig):
    stats = json.loads(sh("ip", "-n", rig.d, "-j", "-s", "link", "show", rig.d_if[0]).stdout)[0]["stats64"]["rx"]
    return stats["packets"]


def tc_packets(rig):
    out = sh("ip", "netns", "exec", rig.d, "tc", "-s", "filter", "show", "dev", rig.d_if[0], "ingress").stdout
    m = re.search(r"Sent \d+ bytes (\d+) pkt", out)
    return int(m.group(1)) if m else 0


def xdp_packets(ctl, sock):
    r = subprocess.run([ctl, "--socket", sock, "--json", "stats", "rules"], capture_output=True, text=True, timeout=30)
    rule = json.loads(r.stdout)["result"]["rules"][0]
    return rule["green_packets"] + rule["yellow_packets"] + rule["red_packets"]


def measure(count, seconds):
    """Packets per second between two reads of `count`, `seconds` apart, after a second of warm-up."""
    time.sleep(1.0)
    c0, t0 = count(), time.monotonic()
    time.sleep(seconds)
    c1, t1 = count(), time.monotonic()
    return (c1 - c0) / (t1 - t0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", default="100mbit", help="both policers' rate (tc and tricolor units alike)")
    parser.add_argument("--testpmd", default="/usr/bin/dpdk-testpmd")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("veth_police.py: needs root (namespaces, tc, XDP)")
    tricolord = os.path.join(args.build_dir, "control", "tricolord")
    tricolorctl = os.path.join(args.build_dir, "control", "tricolorctl")
    rig = Rig(tag())
    work = tempfile.mkdtemp(prefix="tricolor-veth-bench-")
    generator = None
    results, unavailable = {}, {}
    try:
        rig.make()
        mac_d = json.loads(sh("ip", "-n", rig.d, "-j", "link", "show", rig.d_if[0]).stdout)[0]["address"]
        generator = subprocess.Popen(
            in_ns(rig.p, args.testpmd, "-l", "0,1", "--no-pci", "--no-huge", "-m", "512",
                  "--file-prefix", f"veth-bench-{os.getpid()}", "--vdev", f"net_af_packet0,iface={rig.p_if[0]}",
                  "--", "--total-num-mbufs=8192", "--forward-mode=txonly", "--txpkts=64", f"--eth-peer=0,{mac_d}", "--auto-start",
                  "--stats-period", "1"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        results["nothing attached"] = measure(lambda: rx_packets(rig), args.seconds)

        sh("ip", "netns", "exec", rig.d, "tc", "qdisc", "add", "dev", rig.d_if[0], "clsact")
        police = sh("ip", "netns", "exec", rig.d, "tc", "filter", "add", "dev", rig.d_if[0], "ingress", "matchall",
                    "action", "police", "rate", args.rate, "burst", "64k", "conform-exceed", "drop/ok", check=False)
        if police.returncode == 0:
            results["tc police"] = measure(lambda: tc_packets(rig), args.seconds)
        else:  # a kernel without cls_matchall or act_police (and no module to load)
            unavailable["tc police"] = police.stderr.strip().splitlines()[0] if police.stderr.strip() else "refused"
        sh("ip", "netns", "exec", rig.d, "tc", "qdisc", "del", "dev", rig.d_if[0], "clsact")

        policy = os.path.join(work, "policy")
        with open(policy, "w") as f:
            f.write(f"profile add p srtcm cir {args.rate} cbs 64k ebs 0\nrule add all profile p red drop\n")
        sock = os.path.join(work, "sock")
        daemon = subprocess.Popen(in_ns(rig.d, tricolord, "--xdp", rig.d_if[0], "--policy", policy, "--socket", sock,
                                        "--duration", str(int(args.seconds) + 30)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 30
        while subprocess.run([tricolorctl, "--socket", sock, "ping"], capture_output=True).returncode != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"tricolord --xdp did not start: {daemon.communicate()[1][-800:]}")
            time.sleep(0.1)
        results["tricolord --xdp"] = measure(lambda: xdp_packets(tricolorctl, sock), args.seconds)
        daemon.send_signal(signal.SIGTERM)  # the PID this script started
        daemon.communicate(timeout=30)
    finally:
        if generator is not None and generator.poll() is None:
            generator.send_signal(signal.SIGINT)  # the PID this script started
            try:
                generator.wait(timeout=20)
            except subprocess.TimeoutExpired:
                generator.kill()
                generator.wait()
        rig.remove()
    base = results.get("nothing attached", 0) or 1
    print(f"64-byte frames from dpdk-testpmd txonly (net_af_packet) into a veth, {args.seconds:.0f} s each, "
          f"policers at {args.rate}:")
    print("| on the receiving veth | Mpps seen | ratio to nothing attached |")
    print("|---|---:|---:|")
    for name, pps in results.items():
        print(f"| {name} | {pps / 1e6:.3f} | {pps / base:.2f} |")
    for name, why in unavailable.items():
        print(f"| {name} | not on this kernel: {why} | |")


main()
