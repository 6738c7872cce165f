#!/usr/bin/env python3
"""`key show` of a per-key limiter (issue 13), the real tricolord and the real tricolorctl: each of the five
limiters meters one source per rule, ten 114-byte packets 1 ms apart, read from a capture with the capture's
clock (--clock rx-timestamp), so every value `key show` prints is worked out by hand below; text and JSON.

Run by meson: key_show_limiters_test.py BUILD_ROOT.
"""
import json
import struct
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import ctl, expect, finish, start_daemon, stop_daemon, wait_for, wait_metered  # noqa: E402

POLICY = """\
profile add per-window fixed-window limit 3pkt window 250ms
profile add leap sliding-window limit 3pkt window 4ms buckets 4
profile add cells gcra rate 500pps tolerance 5ms
profile add bursty smooth rate 8kbit max-burst 500
profile add cold warmup rate 1kpps period 4ms
rule add by-window dst 10.0.0.1 per src profile per-window red drop
rule add by-leap dst 10.0.0.2 per src profile leap red drop
rule add by-cells dst 10.0.0.3 per src profile cells red drop
rule add by-bursty dst 10.0.0.4 per src profile bursty red drop
rule add by-cold dst 10.0.0.5 per src profile cold red drop
"""
SOURCE = [10, 9, 0, 1]
PACKETS, SIZE = 10, 114

# rule: (green packets of the ten, the JSON levels expected, words the text must hold). Packets at 0..9 ms.
EXPECTED = {
    # 3 per 250 ms: the window opened at 0 ms closes 241 ms after the last packet (9 ms).
    "by-window": (3, {"left": 0, "closes_in_ns": 241_000_000},
                  ["0 packets left in the open window, which closes 241.000 ms after that packet"]),
    # 3 per 4 ms in sub-windows of 1 ms: green at 0, 1, 2 (3 counted), red at 3; green at 4, 5, 6 (sub-window
    # 0 has left, then 1, then 2), red at 7 (4..7 hold 3), green at 8, 9. At 9 ms, sub-windows 9, 8, 7, 6.
    "by-leap": (8, {"counted": 3, "sub_windows": [1, 1, 0, 1]}, ["3 packets counted in the window"]),
    # T = 2 ms, tau = 5 ms: a packet conforms while the TAT's lead plus 2 ms is at most 7 ms. Leads before
    # each packet: 0, 1, 2, 3, 4, 5 (green), 6 (red), 5 (green: 7), 6 (red), 5 (green: 7 ms ahead, 3.5 packets).
    "by-cells": (8, {"tat_ahead_ns": 7_000_000, "tat_ahead": "3.500"}, ["7.000 ms"]),
    # 1000 bytes/s, 500 stored: 114 bytes at 0..3 ms from storage (plus 1 byte earned per ms: 47 left at 3 ms),
    # at 4 ms 48 stored and 66 owed (next free 70 ms); red after. At 9 ms: 61 owed, 61 ms ahead.
    "by-bursty": (5, {"stored": "0.000", "owed": "61.000", "next_free_ahead_ns": 61_000_000},
                  ["61.000 bytes owed", "61.000 ms"]),
}
# warmup rate 1000 pps period 4 ms, cold factor 3: threshold 2 permits, 4 stored at first; a permit x
# above the threshold costs 1 ms * (1 + x). Green at 0 (4 -> 3 stored: 2.5 ms, next free 2.5 ms), at
# 3 ms (0.5 earned: 3.5 -> 2.5 costs 2 ms: next free 5 ms), at 5 (2.5 -> 1.5: 0.625 + 0.5 ms: 6.125), at
# 7 (0.875 earned: 2.375 -> 1.375: 1.0703125 ms: 8.0703125), at 9 (0.9296875 earned: 2.3046875 ->
# 1.3046875 stored; 0.3046875 + 0.3046875^2 / 2 + 0.6953125 = 1.046417236328125 ms ahead).
WARMUP_GREEN, WARMUP_STORED, WARMUP_AHEAD_NS = 5, "1.304", 1_046_417


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-keyshow-") as workdir:
        policy = os.path.join(workdir, "p.policy")
        open(policy, "w").write(POLICY)
        packets = []
        for i in range(PACKETS):
            for host in range(1, 6):
                payload = bytes(SIZE - 14 - 20 - 8)
                udp = struct.pack("!HHHH", 1000, 53, 8 + len(payload), 0) + payload
                packets.append((i * 1000, daemon_capture.ether(daemon_capture.ipv4(SOURCE, [10, 0, 0, host], 17, 0, udp),
                                                               0x0800)))
        capture = os.path.join(workdir, "in.pcap")
        daemon_capture.write_pcap(capture, packets)
        sock = os.path.join(workdir, "ctl.sock")
        daemon = start_daemon("keyshow", policy, sock,
                              vdevs=[f"net_pcap0,rx_pcap={capture},tx_pcap={os.path.join(workdir, 'out.pcap')}"],
                              extra=["--clock", "rx-timestamp"], duration=60)
        try:
            expect("the daemon answers", wait_for(sock, daemon), daemon.poll())
            metered = wait_metered(sock, len(packets))
            expect("every packet metered", metered == len(packets), metered)
            key = ".".join(map(str, SOURCE))
            shown = {}
            for rule in [*EXPECTED, "by-cold"]:
                status, out, err = ctl(sock, "--json", "key", "show", rule, key)
                expect(f"key show {rule} --json answers", status == 0, err)
                shown[rule] = json.loads(out)["result"] if status == 0 else {}
                status, text, err = ctl(sock, "key", "show", rule, key)
                shown[rule]["text"] = text
                print(text.rstrip())
            for rule, (greens, levels, words) in EXPECTED.items():
                one = shown[rule]
                expect(f"{rule}: {greens} of {PACKETS} green", one.get("green_packets") == greens, one)
                expect(f"{rule}: the state in JSON", all(one.get("levels", {}).get(k) == v for k, v in levels.items()),
                       one.get("levels"))
                expect(f"{rule}: the state in words", all(w in one["text"] for w in words), one["text"])
            cold = shown["by-cold"]
            expect(f"by-cold: {WARMUP_GREEN} of {PACKETS} green (at 0, 3, 5, 7 and 9 ms)",
                   cold.get("green_packets") == WARMUP_GREEN, cold)
            levels = cold.get("levels", {})
            # The curve's area is rounded up to whole 1/hz tokens (a nanosecond of a packet here), and the
            # time ahead printed rounded down: 1 046 417 or 1 046 418 ns.
            expect("by-cold: stored permits and the next free time's lead in JSON",
                   levels.get("stored") == WARMUP_STORED and
                   WARMUP_AHEAD_NS <= levels.get("next_free_ahead_ns", 0) <= WARMUP_AHEAD_NS + 1, levels)
            expect("by-cold: the state in words", "1.304 packets stored" in cold["text"], cold["text"])
        finally:
            stop_daemon(daemon)
    finish()


main()
