#!/usr/bin/env python3
"""tricolord --xdp under the kernel's own traffic (issue 24's veth tests), in generic (skb) mode, on two
interfaces at once.

Two network namespaces of the test's own joined by two veth pairs (veth_rig.py); tricolord --xdp on
both daemon-side ends with --xdp-mode skb and --metrics; UDP from sockets in the peer namespace,
received by sockets that read each datagram's TOS. Checked:
  1. both interfaces carry the program in generic mode;
  2. DSCP remarks exact: an all-green flow on each interface arrives whole, every datagram AF41; an
     all-red flow (a bucket of one packet) arrives whole, the green ones AF41 and the red CS1, and each
     count equals the rule's counters;
  3. an aggregate's bound under a flood: green bytes <= CBS + CIR x T + one frame, with T from the
     program's own first and last metered timestamps (`stats`' first_tick and last_tick, ns), and
     at least half of CIR x T; what arrives is exactly the green packets, remarked AF21;
  4. SIGHUP reloads the policy file: a rate made larger takes effect (the all-red flow arrives green);
  5. the Prometheus endpoint serves the rule's counters as `stats` gives them;
  6. after SIGTERM neither interface carries a program.
Every process started here ends by itself (--duration) or is stopped by its own PID.

Run by meson: xdp_traffic_test.py BUILD_ROOT XDP_BUILT (1 or 0).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ctl_support import ctl, expect, finish, tricolord, wait_for  # noqa: E402
from veth_rig import Rig, in_ns, sh, skip_unless_xdp_and_root, tag  # noqa: E402

skip_unless_xdp_and_root(sys.argv[2] == "1")

RIG = Rig(tag(), pairs=2)
AF41, AF21, CS1 = 34 << 2, 18 << 2, 8 << 2  # TOS bytes (ECN 0)
CIR_BYTES_PER_S, CBS = 100_000, 3000          # the bound rule: 800kbit, 3000 bytes
PAYLOAD = 200
FRAME = 14 + 20 + 8 + PAYLOAD                 # the bytes the rule meters (layer 2) and counts
METRICS_PORT = 9400 + os.getpid() % 500

POLICY = """\
profile add open srtcm cir 10gbit cbs 16m ebs 0
profile add tight srtcm cir 1pps cbs 1pkt ebs 0pkt
profile add bound srtcm cir 800kbit cbs 3000 ebs 0
rule add allgreen proto udp dport 6001 profile open green remark af41
rule add allred proto udp dport 6002 profile tight green remark af41 red remark cs1
rule add bound proto udp dport 6003 profile bound green remark af21 red drop
"""
RELOADED = POLICY.replace("profile add tight srtcm cir 1pps cbs 1pkt ebs 0pkt",
                          "profile add tight srtcm cir 10gbit cbs 16m ebs 0")

FETCH = r"""
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode())
"""


def rules(sock):
    code, out, err = ctl(sock, "--json", "stats", "rules")
    if code != 0:
        raise RuntimeError(f"stats: {err}")
    return {r["name"]: r for r in json.loads(out)["result"]["rules"]}


def tos_counts(got, port):
    counts = {}
    for g in got:
        if g[0] == port:
            counts[g[2]] = counts.get(g[2], 0) + 1
    return counts


def main():
    work = tempfile.mkdtemp(prefix="tricolor-xdpt-")
    policy = os.path.join(work, "policy")
    with open(policy, "w") as f:
        f.write(POLICY)
    sock = os.path.join(work, "sock")
    daemon = None
    try:
        RIG.make()
        daemon = subprocess.Popen(
            in_ns(RIG.d, tricolord, "--xdp", ",".join(RIG.d_if), "--xdp-mode", "skb", "--policy", policy,
                  "--socket", sock, "--metrics", f"127.0.0.1:{METRICS_PORT}", "--duration", "120"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        started = wait_for(sock, daemon)
        expect("tricolord --xdp on two interfaces, skb mode, answers", started,
               daemon.poll() if daemon.poll() is None else daemon.communicate()[1][-1500:])
        if not started:
            raise RuntimeError("tricolord did not start: nothing else can be checked")

        # 1. generic mode on both
        for pair in (0, 1):
            expect(f"interface {pair + 1}: the program attached in generic mode", "xdpgeneric" in RIG.xdp_attached(pair),
                   RIG.xdp_attached(pair))

        # 2. all green on both interfaces; all red but the bucket's one packet
        rx = RIG.receiver([6001, 6002, 6003])
        RIG.send(6001, 200, pair=0)
        RIG.send(6001, 100, pair=1)
        RIG.send(6002, 200)
        got = rx.result()
        green = tos_counts(got, 6001)
        expect("all-green flows on both interfaces: every datagram arrives, AF41", green == {AF41: 300}, green)
        r = rules(sock)
        expect("all green: the counters say 300 green, 0 red",
               r["allgreen"]["green_packets"] == 300 and r["allgreen"]["red_packets"] == 0, r["allgreen"])
        red = tos_counts(got, 6002)
        expect("all-red flow: every datagram arrives, AF41 or CS1", sum(red.values()) == 200 and
               set(red) <= {AF41, CS1}, red)
        expect("all red: the bucket's one packet green (two if a second passed), the rest CS1",
               red.get(AF41, 0) in (1, 2), red)
        expect("all red: each remark count equals the rule's counter",
               red.get(AF41, 0) == r["allred"]["green_packets"] and red.get(CS1, 0) == r["allred"]["red_packets"],
               (red, r["allred"]))

        # 3. the aggregate's bound under a flood
        rx = RIG.receiver([6003])
        RIG.send(6003, 20000, size=PAYLOAD)
        got = rx.result()
        b = rules(sock)["bound"]
        span_s = (b["last_tick"] - b["first_tick"]) / 1e9 if b["first_tick"] is not None else 0.0
        allowed = CBS + CIR_BYTES_PER_S * span_s + FRAME
        expect(f"flood: green bytes {b['green_bytes']} <= CBS + CIR x T + one frame = {allowed:.0f} (T {span_s:.3f} s)",
               b["green_bytes"] <= allowed, b)
        # At least half: a sender descheduled for longer than the bucket's 30 ms loses what it cannot hold.
        expect(f"flood: green bytes at least half of CIR x T ({0.5 * CIR_BYTES_PER_S * span_s:.0f})",
               b["green_bytes"] >= 0.5 * CIR_BYTES_PER_S * span_s and span_s > 0.02, b)
        expect("flood: the program saw every datagram", b["green_packets"] + b["red_packets"] == 20000, b)
        flood = tos_counts(got, 6003)
        expect("flood: what arrives is exactly the green packets, AF21", flood == {AF21: b["green_packets"]},
               (flood, b["green_packets"]))
        expect("flood: the red ones dropped, counted", b["dropped_packets"] == b["red_packets"], b)

        # 4. SIGHUP reloads the policy file
        before = json.loads(ctl(sock, "--json", "version")[1])["result"]["generation"]
        with open(policy, "w") as f:
            f.write(RELOADED)
        daemon.send_signal(signal.SIGHUP)  # by the PID this test started (ip netns exec execs tricolord)
        deadline = time.monotonic() + 10
        after = before
        while after == before and time.monotonic() < deadline:
            time.sleep(0.1)
            after = json.loads(ctl(sock, "--json", "version")[1])["result"]["generation"]
        expect("SIGHUP: the policy file reloaded (a new generation)", after == before + 1, (before, after))
        rx = RIG.receiver([6002])
        RIG.send(6002, 100)
        red = tos_counts(rx.result(), 6002)
        expect("after the reload the formerly red flow arrives green, AF41", red == {AF41: 100}, red)

        # 5. Prometheus
        metrics = sh(*in_ns(RIG.d, sys.executable, "-c", FETCH, str(METRICS_PORT))).stdout
        r = rules(sock)
        want = f'tricolor_rule_packets_total{{rule="allgreen",color="green"}} {r["allgreen"]["green_packets"]}'
        expect("the metrics endpoint serves the rule's counters", want in metrics,
               [line for line in metrics.splitlines() if 'rule="allgreen"' in line][:6])

        # 6. stop
        daemon.send_signal(signal.SIGTERM)
        err = daemon.communicate(timeout=30)[1]
        expect("SIGTERM: the daemon exits 0", daemon.returncode == 0, err[-800:])
        expect("after the stop: neither interface carries a program",
               RIG.xdp_attached(0) == "" and RIG.xdp_attached(1) == "", (RIG.xdp_attached(0), RIG.xdp_attached(1)))
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        RIG.remove()
        shutil.rmtree(work, ignore_errors=True)
    finish()


main()
