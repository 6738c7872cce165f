#!/usr/bin/env python3
"""Live changes while traffic flows, packet for packet (issue 11, section 3): the real tricolord and the
real tricolorctl, checked against tricolor-replay given the same changes at the same packets.

tricolord reads a named pipe as its net_pcap input, so the test decides what it has received when a
change arrives; its clock is the capture's (RX timestamps). Each packet carries its sequence number;
each color is remarked to its own DSCP (green af11, yellow af12, red af13; no rule: unchanged), and
`--stamp-generation` writes into each forwarded packet's IPv4 identification the rule set generation it
was metered under. So the output capture tells, for every packet, its color and the rule set it saw.

Phases (one worker, so that the packets' order is the metering order):
  1. packets [0, A), then with the input paused: a trTCM rule's profile swapped (rule change) and the
     per-source rule's profile given new rates (profile change: its live keys keep their levels);
  2. packets [A, B), paused: a rule added and another deleted (its packets fall to the default);
  3. the rest streamed in small chunks while a second thread sends profile and rule changes at random
     moments: the boundaries are wherever they land.
Checks: the first packet under each change's generation is A, then B, exactly (the change takes effect
at the first burst after it); generations never go back; and tricolor-replay, given each command
before the first packet whose stamp reached that command's generation (--change-at), gives every
packet the daemon's color. Also: `stats`, `key list` and `key show` over the socket agree with the
output, and `reset counters` restarts what `stats` reports.

Run by meson: live_change_test.py BUILD_ROOT [limiters].
"""
import collections
import json
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import expect, finish, tricolor_replay as replay, tricolorctl, tricolord  # noqa: E402

COLORS = " green remark af11 yellow remark af12 red remark af13"
POLICY = f"""\
profile add aggp trtcm cir 2mbit cbs 8192 pir 4mbit pbs 16384
profile add aggq trtcm cir 1mbit cbs 4096 pir 3mbit pbs 8192
profile add keyp trtcm cir 100kbit cbs 4096 pir 200kbit pbs 8192
profile add oldp srtcm cir 1mbit cbs 8192 ebs 8192
rule add agg dst 10.2.0.0/16 profile aggp{COLORS}
rule add persrc dst 10.3.0.0/16 per src timeout 30s profile keyp{COLORS}
rule add old dst 10.4.0.0/16 profile oldp{COLORS}
"""
PHASE1 = ["rule change agg dst 10.2.0.0/16 profile aggq" + COLORS,
          "profile change keyp trtcm cir 60kbit cbs 4096 pir 150kbit pbs 8192"]
PHASE2 = ["rule add new dst 10.5.0.0/16 profile oldp" + COLORS, "rule delete old"]
STREAMED = ["profile change aggq trtcm cir 1500kbit cbs 4096 pir 3mbit pbs 8192",
            "rule change agg dst 10.2.0.0/16 profile aggp" + COLORS,
            "profile change keyp trtcm cir 120kbit cbs 4096 pir 250kbit pbs 8192",
            "profile change oldp srtcm cir 500kbit cbs 8192 ebs 16384",
            "rule change agg dst 10.2.0.0/16 profile aggq" + COLORS,
            "profile change keyp trtcm cir 80kbit cbs 4096 pir 200kbit pbs 8192"]
# The same test over the other classic limiters (issue 13), run with the argument `limiters`: aggregate
# sliding windows of 16 sub-windows and GCRA, smooth and warm-up per source, fixed windows; changes within
# an algorithm (state kept) and across algorithms (afresh), which tricolor-replay must make at the same
# packets as the daemon.
LIMITERS = "limiters" in sys.argv[2:]
if LIMITERS:
    POLICY = f"""\
profile add aggp sliding-window limit 64k window 100ms buckets 16
profile add aggq gcra rate 1mbit tolerance 20ms
profile add keyp smooth rate 100kbit max-burst 4096
profile add oldp fixed-window limit 20k window 50ms
rule add agg dst 10.2.0.0/16 profile aggp{COLORS}
rule add persrc dst 10.3.0.0/16 per src timeout 30s profile keyp{COLORS}
rule add old dst 10.4.0.0/16 profile oldp{COLORS}
"""
    PHASE1 = ["rule change agg dst 10.2.0.0/16 profile aggq" + COLORS,
              "profile change keyp smooth rate 60kbit max-burst 2048"]
    STREAMED = ["profile change aggq gcra rate 1500kbit tolerance 10ms",
                "rule change agg dst 10.2.0.0/16 profile aggp" + COLORS,
                "profile change keyp warmup rate 120kbit period 200ms",
                "profile change oldp fixed-window limit 40k window 20ms",
                "profile change aggp sliding-window limit 32k window 100ms buckets 8",
                "profile change keyp warmup rate 80kbit period 100ms cold-factor 4"]
# What `key show` gives a per-source key's state: the buckets, or the limiter's own words.
KEY_STATE = ("stored", "owed") if LIMITERS else ("C", "P")
DSCP_COLOR = {10: "green", 12: "yellow", 14: "red", 0: "-"}
SOURCES = 16
SECONDS, RATE_PPS = 3.0, 20_000
# Packet indexes at which the input pauses for a change: multiples of 32, the daemon's RX burst (net_pcap
# reading a pipe returns a burst only once it has read all 32 packets of it).
PAUSE_A, PAUSE_B = 625 * 32, 1094 * 32



def make_packets(seed=11):
    rng = random.Random(seed)
    packets, t, seq = [], 0, 0
    while t < SECONDS * 1_000_000:
        src = [10, 1, 0, rng.randrange(SOURCES)]
        dst = [10, rng.choice([2, 3, 4, 5]), 0, 1]
        payload = struct.pack("!I", seq) + bytes(rng.choice([60, 200, 600, 1200]))
        udp = struct.pack("!HHHH", 1000 + src[3], 7, 8 + len(payload), 0) + payload
        packets.append((t, daemon_capture.ether(daemon_capture.ipv4(src, dst, 17, 0, udp), 0x0800)))
        t += rng.randrange(1, 2 * 1_000_000 // RATE_PPS)
        seq += 1
    return packets


def record(t_us, frame, start_us=1_767_225_600_000_000):
    t = start_us + t_us
    return struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(frame), len(frame)) + frame


def decode(frame):
    """(seq, color, generation) of an output frame."""
    return struct.unpack("!I", frame[42:46])[0], DSCP_COLOR[frame[15] >> 2], struct.unpack("!H", frame[18:20])[0]


class Daemon:
    def __init__(self, workdir, fifo, out):
        self.socket = os.path.join(workdir, "ctl.sock")
        args = [tricolord, "--lcores=0@0,1@1", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
                f"--file-prefix=tricolor-live-{os.getpid()}", "--log-level=lib.eal:warning",
                f"--vdev=net_pcap0,rx_pcap={fifo},tx_pcap={out}",
                "--", "--policy", os.path.join(workdir, "p.policy"), "--clock", "rx-timestamp", "--json",
                "--stamp-generation", "--socket", self.socket, "--audit-log", os.path.join(workdir, "audit.log"),
                "--duration", "120"]
        self.reset_at = 0  # packets metered when the counters were reset (stats counts from there)
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                        text=True)

    def ctl(self, *words, check=True):
        run = subprocess.run([tricolorctl, "--socket", self.socket, "--timeout", "10", *words], capture_output=True,
                             text=True, timeout=30, stdin=subprocess.DEVNULL)
        if check:
            assert run.returncode == 0, f"tricolorctl {' '.join(words)}: exit {run.returncode}: {run.stderr}"
        return run

    def json(self, *words):
        return json.loads(self.ctl("--json", *words).stdout)["result"]

    def wait_metered(self, count, limit_s=60):
        """Until the worker has metered `count` packets (the counter follows each burst's processing)."""
        deadline = time.monotonic() + limit_s
        while True:
            metered = self.json("stats", "workers")["worker"]["packets"] + self.reset_at
            if metered >= count:
                return metered
            assert time.monotonic() < deadline, f"the daemon metered {metered} of {count} packets"
            time.sleep(0.01)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, f"tricolord exited {self.process.returncode}: {err[-2000:]}"
        return [json.loads(line) for line in out.splitlines() if line.strip()][-1], err


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-live-") as workdir:
        open(os.path.join(workdir, "p.policy"), "w").write(POLICY)
        packets = make_packets()
        whole = os.path.join(workdir, "in.pcap")
        daemon_capture.write_pcap(whole, packets)
        print(f"capture: {len(packets)} packets over {SECONDS} s from {SOURCES} sources to 4 rules")
        fifo = os.path.join(workdir, "in.fifo")
        os.mkfifo(fifo)
        out = os.path.join(workdir, "out.pcap")

        daemon = Daemon(workdir, fifo, out)
        try:
            # The daemon opens the pipe while it starts its port: the pcap header, then packets on demand.
            pipe = open(fifo, "wb", buffering=0)
            pipe.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))

            def send(first, last):
                pipe.write(b"".join(record(t, f) for t, f in packets[first:last]))

            applied = []  # (command, the generation its reply named), in order
            send(0, PAUSE_A)
            daemon.wait_metered(PAUSE_A)
            for command in PHASE1:
                applied.append((command, daemon.json(*command.split())["generation"]))
            send(PAUSE_A, PAUSE_B)
            daemon.wait_metered(PAUSE_B)

            # While paused: what the socket reports against what was sent.
            rules = {r["name"]: r for r in daemon.json("stats", "rules")["rules"]}
            expect("stats rules: the per-source rule counted every packet sent to it so far",
                   sum(rules["persrc"][f"{c}_packets"] for c in ("green", "yellow", "red")) ==
                   sum(1 for _, f in packets[:PAUSE_B] if f[31] == 3), rules["persrc"])
            keys = daemon.json("key", "list", "persrc", "top", "5", "by", "red-bytes")
            red = [k["red_bytes"] for k in keys["keys"]]
            expect("key list: 16 live keys, the top 5 by red bytes in order", keys["live_keys"] == SOURCES and
                   len(red) == 5 and red == sorted(red, reverse=True), keys)
            one = daemon.json("key", "show", "persrc", keys["keys"][0]["key"])
            expect("key show: the top key's counters as key list gave them",
                   one["red_bytes"] == keys["keys"][0]["red_bytes"] and one["worker"] == 0 and
                   all(word in one["levels"] for word in KEY_STATE), one)
            shown = daemon.ctl("key", "show", "persrc", "10.9.9.9", check=False)
            expect("key show of a key that is not live: refused, exit 2", shown.returncode == 2 and
                   "has no live key 10.9.9.9" in shown.stderr, shown.stderr)

            for command in PHASE2:
                applied.append((command, daemon.json(*command.split())["generation"]))
            before_reset = daemon.json("stats", "rule", "agg")["rules"][0]["green_packets"]
            daemon.ctl("reset", "counters")
            daemon.reset_at = PAUSE_B  # the input is paused there
            after_reset = daemon.json("stats", "rule", "agg")["rules"][0]
            worker_after = daemon.json("stats", "workers")["worker"]["packets"]
            expect("reset counters: stats starts again from zero (the rule had counted packets)",
                   before_reset > 0 and after_reset["green_packets"] == 0 and after_reset["red_packets"] == 0
                   and worker_after == 0, (before_reset, after_reset, worker_after))

            # Phase 3: the rest in chunks of 1 to 300 packets while changes arrive at random moments.
            rng, change_rng = random.Random(5), random.Random(6)
            done = threading.Event()

            def changer():
                for command in STREAMED:
                    time.sleep(change_rng.uniform(0.02, 0.12))
                    applied.append((command, daemon.json(*command.split())["generation"]))
                done.set()

            thread = threading.Thread(target=changer)
            thread.start()
            # The last TAIL packets go only once every change is answered, so that each lands in the traffic.
            at, tail = PAUSE_B, len(packets) - 3000
            while at < tail:
                if done.is_set():
                    break
                step = min(rng.randrange(1, 300), tail - at)
                send(at, at + step)
                at += step
                time.sleep(0.003)
            thread.join(timeout=60)
            send(at, len(packets))
            expect("every streamed change was answered", done.is_set())
            pipe.close()  # end of input
            daemon.wait_metered(len(packets))
            final, errors = daemon.stop()
        finally:
            if daemon.process.poll() is None:
                daemon.process.kill()
                daemon.process.wait()

        port = final["ports"][0]
        expect("every packet received and sent", port["rx_packets"] == len(packets) == port["tx_packets"], port)
        frames = daemon_capture.read_pcap_frames(out)
        decoded = [decode(f) for f in frames]
        expect("the output keeps the input's order", [d[0] for d in decoded] == list(range(len(packets))))
        stamps = [d[2] for d in decoded]
        expect("generations never go back", all(a <= b for a, b in zip(stamps, stamps[1:])))

        def first_at(generation):
            return next((i for i, g in enumerate(stamps) if g >= generation), len(stamps))

        generations = [g for _, g in applied]
        expect("each change's reply named a newer generation", len(applied) == len(PHASE1 + PHASE2 + STREAMED) and
               generations == sorted(set(generations)), applied)
        landed = [first_at(g) for _, g in applied]
        phase1, phase2, streamed = landed[:2], landed[2:4], landed[4:]
        expect("phase 1's changes took effect at packet A exactly, under the second's rule set",
               phase1 == [PAUSE_A] * 2 and stamps[PAUSE_A - 1] < generations[0] and stamps[PAUSE_A] == generations[1],
               (phase1, stamps[PAUSE_A - 1:PAUSE_A + 1]))
        expect("phase 2's changes took effect at packet B exactly", phase2 == [PAUSE_B] * 2 and
               stamps[PAUSE_B - 1] < generations[2] and stamps[PAUSE_B] == generations[3],
               (phase2, stamps[PAUSE_B - 1:PAUSE_B + 1]))
        print(f"streamed changes took effect at packets {streamed}")
        expect("the streamed changes landed inside the traffic", all(PAUSE_B < i < len(packets) for i in streamed),
               streamed)

        replayed = os.path.join(workdir, "replay.pcap")
        args = [replay, "--policy", os.path.join(workdir, "p.policy"), "--in", whole, "--out", replayed]
        for (command, _), index in zip(applied, landed):
            args += ["--change-at", f"{index}:{command}"]
        subprocess.run(args, check=True, timeout=120, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        reference = [decode(f)[1] for f in daemon_capture.read_pcap_frames(replayed)]
        colors = [d[1] for d in decoded]
        differ = [i for i in range(len(colors)) if i >= len(reference) or colors[i] != reference[i]]
        counts = collections.Counter(colors)
        expect(f"every packet has tricolor-replay's color, the changes applied at the same packets ({dict(counts)})",
               not differ and len(reference) == len(colors),
               f"{len(differ)} differ, first at {differ[:5]}: daemon {[colors[i] for i in differ[:5]]}, "
               f"replay {[reference[i] if i < len(reference) else None for i in differ[:5]]}")
        # The changes mattered: without them the colors differ.
        plain = os.path.join(workdir, "plain.pcap")
        subprocess.run([replay, "--policy", os.path.join(workdir, "p.policy"), "--in", whole, "--out", plain],
                       check=True, timeout=120, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        unchanged = [decode(f)[1] for f in daemon_capture.read_pcap_frames(plain)]
        changed = sum(1 for a, b in zip(unchanged, colors) if a != b)
        expect(f"the changes changed colors ({changed} packets differ from a run without them)", changed > 1000)
        deleted = [i for i in range(PAUSE_B, len(packets)) if packets[i][1][31] == 4]
        expect("after `rule delete old` its packets take the default (not remarked)",
               deleted and all(colors[i] == "-" for i in deleted))
        added = [i for i in range(PAUSE_B) if packets[i][1][31] == 5]
        expect("before `rule add new` its packets took the default; after, they are metered",
               all(colors[i] == "-" for i in added) and
               all(colors[i] != "-" for i in range(PAUSE_B, len(packets)) if packets[i][1][31] == 5))
        audit = open(os.path.join(workdir, "audit.log")).read()
        expect("the audit log has every change and the reset",
               all(c in audit for c, _ in applied) and "reset the counters" in audit, audit[-500:])
    finish()


main()
