#!/usr/bin/env python3
"""Cluster meters' figures (issue 26; doc/tricolord.md, *Cluster meters*): a redis-server on loopback and
1, 2, then 3 tricolord (--cluster-boxes N), each replaying a capture from memory as fast as its worker
goes, far above the budget. For each N, over --seconds: the green bytes of all boxes against CIR*T,
and the leases per second per box. Then a box's cost of the gate: Mpps of one tricolord whose every
packet is green, with a cluster whose budget passes everything and without one, alternated.

Usage: run_cluster_bench.py BUILD_ROOT [--seconds S] [--rounds R]   (as root; a benchmark, not a test)
"""
import argparse
import os
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "control", "cluster"))
import cluster_test as ct  # noqa: E402  (its Redis, its capture, its policy's budget)
import daemon_capture  # noqa: E402
from ctl_support import start_daemon, stop_daemon, wait_for  # noqa: E402


def capture(path):
    payload = ct.FRAME - 14 - 20 - 8
    daemon_capture.write_pcap(path, [(i * 10, daemon_capture.ether(daemon_capture.ipv4(
        [10, 9, 0, 1], [10, 1, 0, i % 50 + 1], 17, 0, daemon_capture.l4(17, 1000, 53, payload)), 0x0800))
        for i in range(2000)])


def boxes_run(workdir, redis, cap, n, seconds):
    policy = os.path.join(workdir, "p.policy")
    open(policy, "w").write(ct.POLICY)
    vdevs = [f"net_pcap0,rx_pcap={cap},infinite_rx=1", "net_null0,no-rx=1"]
    options = ["--cluster-redis", f"127.0.0.1:{redis.port}", "--cluster-boxes", str(n), "--cluster-rtt", str(ct.RTT_MS),
               "--cluster-password-file", os.path.join(workdir, "password")]
    socks = [os.path.join(workdir, f"b{n}-{b}.sock") for b in range(n)]
    daemons = [start_daemon(f"cbench{n}-{b}", policy, socks[b], vdevs=vdevs, extra=options, duration=120) for b in range(n)]
    try:
        assert all(wait_for(s, d) for s, d in zip(socks, daemons))
        assert ct.wait_until(lambda: ct.all_modes(socks, "leased"), 15), "the boxes did not lease"
        t0 = time.monotonic()
        before = [ct.stats(s) for s in socks]
        calls0 = redis.evalsha_calls()
        time.sleep(seconds)
        after = [ct.stats(s) for s in socks]
        t1 = time.monotonic()
        calls = redis.evalsha_calls() - calls0
    finally:
        for d in daemons:
            stop_daemon(d)
    green = sum(a["rules"][0]["green_bytes"] - b["rules"][0]["green_bytes"] for a, b in zip(after, before))
    return green / ((t1 - t0) * ct.CIR), calls / (t1 - t0) / n


def mpps(workdir, cap, with_cluster, seconds, redis):
    policy = os.path.join(workdir, "all-green.policy")
    cluster = " cluster global" if with_cluster else ""
    open(policy, "w").write("profile add local 1r2c cir 400gbit cbs 1g\nprofile add global 1r2c cir 400gbit cbs 512m\n"
                            f"rule add all dst 10.0.0.0/8 profile local{cluster}\n")
    sock = os.path.join(workdir, "mpps.sock")
    options = ["--cluster-redis", f"127.0.0.1:{redis.port}", "--cluster-password-file", os.path.join(workdir, "password")]
    daemon = start_daemon("cbench-mpps", policy, sock, vdevs=[f"net_pcap0,rx_pcap={cap},infinite_rx=1", "net_null0,no-rx=1"],
                          extra=options, duration=120)
    try:
        assert wait_for(sock, daemon)
        if with_cluster:
            assert ct.wait_until(lambda: ct.all_modes([sock], "leased"), 15)
        time.sleep(0.5)
        t0, a = time.monotonic(), ct.stats(sock)
        time.sleep(seconds)
        t1, b = time.monotonic(), ct.stats(sock)
    finally:
        stop_daemon(daemon)
    packets = sum(b["rules"][0][f"{c}_packets"] - a["rules"][0][f"{c}_packets"] for c in ("green", "yellow", "red"))
    return packets / (t1 - t0) / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_root")
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tricolor-cluster-bench-") as workdir:
        with open(os.open(os.path.join(workdir, "password"), os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(ct.PASSWORD + "\n")
        cap = os.path.join(workdir, "in.pcap")
        capture(cap)
        redis = ct.Redis(workdir, ct.free_port())
        assert redis.start()
        try:
            print(f"budget: CIR {ct.CIR} bytes/s, CBS {ct.CBS} bytes, chunk {ct.CHUNK} bytes; {args.seconds} s each")
            for n in (1, 2, 3):
                ratio, leases = boxes_run(workdir, redis, cap, n, args.seconds)
                print(f"{n} box{'es' if n > 1 else ''}: green {ratio:.4f} x CIR, {leases:.1f} leases/s per box")
            rounds = [(mpps(workdir, cap, False, args.seconds, redis), mpps(workdir, cap, True, args.seconds, redis))
                      for _ in range(args.rounds)]
            for i, (without, with_) in enumerate(rounds):
                print(f"round {i + 1}: one box, every packet green: {without:.2f} Mpps without a cluster, "
                      f"{with_:.2f} with one ({with_ / without:.3f})")
        finally:
            redis.kill()


if __name__ == "__main__":
    main()
