#!/usr/bin/env python3
"""The daemon equals replay: the same capture through tricolord (net_pcap in and out, the RX-timestamp
clock) and through tricolor-replay gives the same frames in the same order, byte for byte (record
timestamps not compared), and the same counters per rule and color and for the default action.

The policy uses every algorithm in byte and packet mode, blind and aware, per-key meters, a parent, a
PCP color map, DSCP and PCP remarks; the capture has tagged frames and jumbo frames (several mbufs in
the daemon). The daemon is stopped with SIGTERM once its RX count equals the capture's packet count;
the test checks that the pool never ran dry (rx_nombuf 0) and that every mbuf is back at the stop.

Run by meson: replay_equal_test.py BUILD_ROOT.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402

build_root = sys.argv[1]
tricolord = os.path.join(build_root, "control", "tricolord")
replay = os.path.join(build_root, "control", "tricolor-replay")


def run_daemon(workdir, capture, policy, expected_packets):
    out = os.path.join(workdir, "daemon.pcap")
    args = [tricolord, "-l", "0,1", "--no-huge", "-m", "1024", "--no-pci", "--no-telemetry",
            f"--file-prefix=tricolor-replay-equal-{os.getpid()}", "--log-level=lib.eal:warning",
            f"--vdev=net_pcap0,rx_pcap={capture},tx_pcap={out}",
            "--", "--policy", policy, "--clock", "rx-timestamp", "--json", "--stats-interval", "0.2",
            "--socket", os.path.join(workdir, "tricolord.sock")]  # not the default one: it may be taken
    final, errors = daemon_capture.run_through(args, lambda s: s["ports"][0]["rx_packets"] >= expected_packets)
    print(errors, file=sys.stderr)
    return final, out


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-replay-equal-") as workdir:
        capture = os.path.join(workdir, "in.pcap")
        policy = os.path.join(workdir, "every.policy")
        open(policy, "w").write(daemon_capture.POLICY)
        packets = daemon_capture.mixed_capture(capture, seconds=3.0, rate_pps=10000)
        print(f"capture: {packets} packets")

        replayed = os.path.join(workdir, "replay.pcap")
        summary = os.path.join(workdir, "replay.json")
        subprocess.run([replay, "--policy", policy, "--in", capture, "--out", replayed, "--json", summary],
                       check=True, timeout=120, stdin=subprocess.DEVNULL)
        expected = json.load(open(summary))

        final, out = run_daemon(workdir, capture, policy, packets)
        port = final["ports"][0]
        assert port["rx_packets"] == packets, port
        assert port["rx_nombuf"] == 0, f"the pool ran dry: {port}"
        assert final["mbufs_in_use"] == final["mbufs_in_use_at_start"], final
        assert final["worker"]["no_timestamp"] == 0, final["worker"]

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
            print(f"{rule['name']:8} green {rule['green']['packets']:6} yellow {rule['yellow']['packets']:6} "
                  f"red {rule['red']['packets']:6}: equal")
        d = final["default"]
        e = expected["default"]
        assert (d["packets"], d["bytes"], d["non_ip"], d["no_match"]) == (e["packets"], e["bytes"], e["non_ip"], e["no_match"]), (d, e)

        # Every rule saw traffic, and every color appeared somewhere: the comparison is not vacuous.
        assert all(sum(r[c]["packets"] for c in ("green", "yellow", "red")) > 0 for r in expected["rules"]), expected["rules"]
        for color in ("green", "yellow", "red"):
            assert sum(r[color]["packets"] for r in expected["rules"]) > 0, color

        # The same frames in the same order, byte for byte (remarks included).
        ours = daemon_capture.read_pcap_frames(out)
        theirs = daemon_capture.read_pcap_frames(replayed)
        assert len(ours) == len(theirs), f"the daemon forwarded {len(ours)} frames, replay {len(theirs)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert a == b, f"forwarded frame {i} differs: daemon {a[:64].hex()} replay {b[:64].hex()}"
        jumbo = sum(1 for f in ours if len(f) > 2048)
        assert jumbo > 0, "no jumbo frame was forwarded"
        print(f"forwarded: {len(ours)} frames equal byte for byte ({jumbo} jumbo); dropped {packets - len(ours)}")


main()
