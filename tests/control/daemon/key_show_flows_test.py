#!/usr/bin/env python3
"""`key show` of a max-flows rule (issue 27), the real tricolord and the real tricolorctl: a key's open
flows against its limit, in text and JSON, and what the refused flows did to its counters.

Source 10.9.0.1 opens TCP flows to 10.0.0.1 at 1 ms intervals with the capture's clock (--clock
rx-timestamp, so no flow idles out): SYNs from ports 1001..1005 (three open, 1004 and 1005 refused), an
ACK of 1004 (a refused flow's later packet opens nothing: metered, green), a FIN of 1002 (two open), a
SYN from 1006 (three open), a SYN from 1007 (refused). Source 10.9.0.2 sends UDP from two ports: two
open flows. Every packet is small and the profile large, so every metered packet is green and the red
ones are exactly the refused flows' SYNs.

Run by meson: key_show_flows_test.py BUILD_ROOT.
"""
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402
from ctl_support import ctl, expect, finish, start_daemon, stop_daemon, wait_for, wait_metered  # noqa: E402

POLICY = """\
profile add host 1r2c cir 1gbit cbs 1m
rule add guests dst 10.0.0.1 per src max-flows 3 profile host red drop
"""
SYN, FIN, ACK = 0x02, 0x01, 0x10
TCP_SOURCE, UDP_SOURCE, SERVER = [10, 9, 0, 1], [10, 9, 0, 2], [10, 0, 0, 1]


def tcp(sport, flags):
    header = struct.pack("!HHIIBBHHH", sport, 80, 1, 0, 5 << 4, flags, 65535, 0, 0)
    return daemon_capture.ether(daemon_capture.ipv4(TCP_SOURCE, SERVER, 6, 0, header), 0x0800)


def udp(sport):
    return daemon_capture.ether(daemon_capture.ipv4(UDP_SOURCE, SERVER, 17, 0, daemon_capture.l4(17, sport, 53, 20)), 0x0800)


FRAMES = [tcp(1001, SYN), tcp(1002, SYN), tcp(1003, SYN), tcp(1004, SYN), tcp(1005, SYN), tcp(1004, ACK),
          tcp(1002, FIN | ACK), tcp(1006, SYN), tcp(1007, SYN), udp(2001), udp(2002), udp(2001)]
# (key, open flows, green packets, red packets, words the text must hold)
EXPECTED = [
    ("10.9.0.1", 3, 6, 3, ["open flows: 3 of max-flows 3", "green 6 packets", "red 3 packets"]),
    ("10.9.0.2", 2, 3, 0, ["open flows: 2 of max-flows 3", "green 3 packets", "red 0 packets"]),
]


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-keyshow-flows-") as workdir:
        policy = os.path.join(workdir, "p.policy")
        open(policy, "w").write(POLICY)
        capture = os.path.join(workdir, "in.pcap")
        daemon_capture.write_pcap(capture, [(i * 1000, frame) for i, frame in enumerate(FRAMES)])
        sock = os.path.join(workdir, "ctl.sock")
        daemon = start_daemon("keyshow-flows", policy, sock,
                              vdevs=[f"net_pcap0,rx_pcap={capture},tx_pcap={os.path.join(workdir, 'out.pcap')}"],
                              extra=["--clock", "rx-timestamp"], duration=60)
        try:
            expect("the daemon answers", wait_for(sock, daemon), daemon.poll())
            metered = wait_metered(sock, len(FRAMES))
            expect("every packet metered", metered == len(FRAMES), metered)
            for key, open_flows, greens, reds, words in EXPECTED:
                status, out, err = ctl(sock, "--json", "key", "show", "guests", key)
                expect(f"key show guests {key} --json answers", status == 0, err)
                shown = json.loads(out)["result"] if status == 0 else {}
                expect(f"{key}: {open_flows} open flows of 3 in JSON",
                       shown.get("open_flows") == open_flows and shown.get("max_flows") == 3, shown)
                expect(f"{key}: {greens} green and {reds} red", shown.get("green_packets") == greens and
                       shown.get("red_packets") == reds, shown)
                status, text, err = ctl(sock, "key", "show", "guests", key)
                print(text.rstrip())
                expect(f"{key}: the text says it", status == 0 and all(w in text for w in words), text + err)
            status, out, err = ctl(sock, "--json", "stats")
            stats = json.loads(out)["result"] if status == 0 else {}
            rule = next((r for r in stats.get("rules", []) if r.get("name") == "guests"), {})
            flows = rule.get("flows", {})
            # Opened: TCP 1001, 1002, 1003, 1006 and UDP 2001, 2002; closed: 1002's FIN; refused: three SYNs.
            expect("the rule's stats count the flows", flows.get("opened") == 6 and flows.get("closed") == 1 and
                   flows.get("refused_packets") == 3 and flows.get("expired") == 0, rule)
        finally:
            stop_daemon(daemon)
    finish()


main()
