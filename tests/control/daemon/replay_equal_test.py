#!/usr/bin/env python3
"""The daemon equals replay: the same capture through tricolord (net_pcap in and out, the RX-timestamp
clock) and through tricolor-replay gives the same frames in the same order, byte for byte (record
timestamps not compared), and the same counters per rule and color and for the default action.

The policy uses every algorithm in byte and packet mode, blind and aware, per-key meters, a parent, a
PCP color map, DSCP and PCP remarks; the capture has tagged frames and jumbo frames (several mbufs in
the daemon). The daemon is stopped with SIGTERM once its RX count equals the capture's packet count;
the test checks that the pool never ran dry (rx_nombuf 0) and that every mbuf is back at the stop.

Then the daemon's usual burst: a policy of one rule (an aggregate trTCM, then a trTCM per 5-tuple)
over plain UDP frames, each numbered, at about twice the rule's rate, so that nearly every burst
forwards some packets and drops others: the worker leaves such a burst's verdicts unwritten and the
forwarder parts it by a bit a packet (Worker::WholeBurst::split). The same comparison, and the replay's
numbers say that most 32-packet windows were both forwarded and dropped from.

The daemon takes 32 packets a burst by default; the policy of every algorithm runs again at --burst 1
and the plain policies at --burst 64, each with the same comparison.

Run by meson: replay_equal_test.py BUILD_ROOT.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402

build_root = sys.argv[1]
tricolord = os.path.join(build_root, "control", "tricolord")
replay = os.path.join(build_root, "control", "tricolor-replay")


def run_daemon(workdir, capture, policy, expected_packets, name, burst):
    out = os.path.join(workdir, f"{name}-daemon.pcap")
    args = [tricolord, "-l", "0,1", "--no-huge", "-m", "1024", "--no-pci", "--no-telemetry",
            f"--file-prefix=tricolor-replay-equal-{name}-{os.getpid()}", "--log-level=lib.eal:warning",
            f"--vdev=net_pcap0,rx_pcap={capture},tx_pcap={out}",
            "--", "--policy", policy, "--clock", "rx-timestamp", "--json", "--stats-interval", "0.2",
            "--socket", os.path.join(workdir, "tricolord.sock"),  # not the default one: it may be taken
            *(["--burst", str(burst)] if burst is not None else [])]
    final, errors = daemon_capture.run_through(args, lambda s: s["ports"][0]["rx_packets"] >= expected_packets)
    print(errors, file=sys.stderr)
    return final, out


def replay_and_daemon(workdir, name, policy_text, capture, packets, burst=None):
    """The capture through tricolor-replay and tricolord under the policy: equal counters per rule and
    color and for the default action, and the same forwarded frames in the same order, byte for byte.
    `burst`: tricolord's --burst (None: its default). Returns (replay's summary, the forwarded frames)."""
    policy = os.path.join(workdir, f"{name}.policy")
    open(policy, "w").write(policy_text)
    replayed = os.path.join(workdir, f"{name}-replay.pcap")
    summary = os.path.join(workdir, f"{name}-replay.json")
    subprocess.run([replay, "--policy", policy, "--in", capture, "--out", replayed, "--json", summary],
                   check=True, timeout=120, stdin=subprocess.DEVNULL)
    expected = json.load(open(summary))

    final, out = run_daemon(workdir, capture, policy, packets, name, burst)
    port = final["ports"][0]
    assert port["rx_packets"] == packets, port
    assert port["rx_nombuf"] == 0, f"the pool ran dry: {port}"
    assert final["mbufs_in_use"] == final["mbufs_in_use_at_start"], final
    assert final["worker"]["no_timestamp"] == 0, final["worker"]
    if burst is not None:  # the option took: no burst longer than it, and (net_pcap reads a file as fast
        # as it is polled) nearly all as long
        worker = final["worker"]
        assert worker["bursts"] * burst >= worker["packets"], (burst, worker)
        assert worker["packets"] * 4 > worker["bursts"] * burst * 3, (burst, worker)

    # Counters per rule and color, and the default action's.
    by_name = {r["name"]: r for r in final["rules"]}
    for rule in expected["rules"]:
        got = by_name[rule["name"]]
        for color in ("green", "yellow", "red"):
            assert got[f"{color}_packets"] == rule[color]["packets"], (rule["name"], color, got, rule)
            assert got[f"{color}_bytes"] == rule[color]["bytes"], (rule["name"], color, got, rule)
        assert got["dropped_packets"] == rule["dropped"]["packets"], (rule["name"], got, rule)
        metered = sum(rule[c]["packets"] for c in ("green", "yellow", "red"))
        assert (got["first_tick"] is not None) == (metered > 0), got
        print(f"{name}: {rule['name']:8} green {rule['green']['packets']:6} yellow {rule['yellow']['packets']:6} "
              f"red {rule['red']['packets']:6}: equal")
    d = final["default"]
    e = expected["default"]
    assert (d["packets"], d["bytes"], d["non_ip"], d["no_match"]) == (e["packets"], e["bytes"], e["non_ip"], e["no_match"]), (d, e)

    # The same frames in the same order, byte for byte (remarks included).
    ours = daemon_capture.read_pcap_frames(out)
    theirs = daemon_capture.read_pcap_frames(replayed)
    assert len(ours) == len(theirs), f"{name}: the daemon forwarded {len(ours)} frames, replay {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"{name}: forwarded frame {i} differs: daemon {a[:64].hex()} replay {b[:64].hex()}"
    return expected, ours


def numbered_udp(seq, flow, size):
    """A plain UDP frame of one of 16 flows to 172.16.0.0/16 carrying its number."""
    payload = struct.pack("!I", seq) + bytes(size)
    udp = struct.pack("!HHHH", 1000 + flow, 2000, 8 + len(payload), 0) + payload
    return daemon_capture.ether(daemon_capture.ipv4([10, 0, 0, 1 + flow], [172, 16, 0, 1 + flow], 17, 0, udp), 0x0800)


PLAIN_POLICIES = {
    # About 40 Mbit/s offered to each.
    "aggregate": "profile add all trtcm cir 12mbit cbs 8k pir 20mbit pbs 8k\n"
                 "rule add all dst 172.16.0.0/16 proto udp profile all length l3\n",
    "per-5-tuple": "profile add flow trtcm cir 800kbit cbs 4k pir 1200kbit pbs 4k\n"
                   "rule add flows dst 172.16.0.0/16 proto udp per 5-tuple profile flow length l3\n",
}


def plain_bursts(workdir):
    rng = random.Random(23)
    packets, t = [], 0
    while t < 1_500_000:
        packets.append((t, numbered_udp(len(packets), rng.randrange(16), rng.choice([20, 200, 500]))))
        t += rng.randrange(1, 100)  # about 20 000 frames a second
    capture = os.path.join(workdir, "plain.pcap")
    daemon_capture.write_pcap(capture, packets)
    number_at = 14 + 20 + 8
    # At the daemon's default burst and at its longest (--burst 64): the decisions do not depend on
    # where the bursts begin and end.
    for (name, policy_text), burst in [(item, b) for item in PLAIN_POLICIES.items() for b in (None, 64)]:
        name = name if burst is None else f"{name}-burst-{burst}"
        expected, forwarded = replay_and_daemon(workdir, name, policy_text, capture, len(packets), burst)
        kept = {struct.unpack("!I", f[number_at:number_at + 4])[0] for f in forwarded}
        windows = [range(w, min(w + 32, len(packets))) for w in range(0, len(packets), 32)]
        both = sum(1 for w in windows if any(i in kept for i in w) and not all(i in kept for i in w))
        print(f"{name}: {len(kept)} of {len(packets)} forwarded; {both} of {len(windows)} windows of 32 both "
              "forwarded and dropped from")
        assert 0.2 * len(packets) < len(kept) < 0.8 * len(packets), (name, len(kept), len(packets))
        assert both > len(windows) // 2, (name, both, len(windows))


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-replay-equal-") as workdir:
        capture = os.path.join(workdir, "in.pcap")
        packets = daemon_capture.mixed_capture(capture, seconds=3.0, rate_pps=10000)
        print(f"capture: {packets} packets")
        expected, ours = replay_and_daemon(workdir, "every", daemon_capture.POLICY, capture, packets)

        # Every rule saw traffic, and every color appeared somewhere: the comparison is not vacuous.
        assert all(sum(r[c]["packets"] for c in ("green", "yellow", "red")) > 0 for r in expected["rules"]), expected["rules"]
        for color in ("green", "yellow", "red"):
            assert sum(r[color]["packets"] for r in expected["rules"]) > 0, color
        jumbo = sum(1 for f in ours if len(f) > 2048)
        assert jumbo > 0, "no jumbo frame was forwarded"
        print(f"forwarded: {len(ours)} frames equal byte for byte ({jumbo} jumbo); dropped {packets - len(ours)}")

        # A packet a burst (--burst 1): the same again.
        replay_and_daemon(workdir, "every-burst-1", daemon_capture.POLICY, capture, packets, burst=1)
        print("--burst 1: the same frames and counters")

        plain_bursts(workdir)


main()
