#!/usr/bin/env python3
"""Shaping in the daemon (issue 27): the same capture through tricolord (net_pcap in and out, the
RX-timestamp clock) and through tricolor-replay, with rules whose red action is `shape max-delay 5ms`.

The capture's shaped flows exceed their rates: some packets conform at once, some are held in the
worker's timing wheel until their meter colors them green, and the late ones (more than 5 ms) are
dropped; a fast flow of small frames in spurts has its held packets due within a microsecond of its
next conforming one's arrival. Checked, with one worker and with two (per-source keys passed to
their owner, held there):
- the daemon forwards exactly the frames tricolor-replay forwards (the same set, byte for byte), and
  each flow's frames in the same order (releasing a wheel slot late, or releasing what a burst's last
  timestamp makes due before the burst's earlier packets, reorders the fast flow: both seen to fail);
- the same counters per rule and color (the late ones: red, dropped);
- the shaping counters add up: held in = released + flushed at the stop, held now 0, none dropped for
  a full wheel; and they are not vacuous (packets were held, and released at their tick);
- every mbuf is back in the pool after the stop, and the pool never ran dry.
With --shape-capacity 2 the wheel fills: what it refuses is freed and counted (shape_overflow), the
others leave as before, and every mbuf is back.
With small queues (queue N, one worker: a queue is per worker, as replay's single one), the rules'
queues overflow: the daemon forwards exactly replay's frames, with replay's counters per rule and
color and its queue_overflow_packets; the wheel never fills, holds nothing after the stop, every mbuf
is back.

Run by meson: shape_test.py BUILD_ROOT.
"""
import collections
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402

build_root = sys.argv[1]
tricolord = os.path.join(build_root, "control", "tricolord")
replay = os.path.join(build_root, "control", "tricolor-replay")

POLICY = """\
profile add agg 1r2c cir 4mbit cbs 3000
profile add host 1r2c cir 1mbit cbs 2000
profile add plain 1r2c cir 2mbit cbs 3000
profile add fast 1r2c cir 1gbit cbs 200
rule add shaped dst 10.21.0.0/16 profile agg red shape max-delay 5ms
rule add hosts src 10.30.0.0/24 per src profile host red shape max-delay 5ms
rule add dropper dst 10.41.0.0/16 profile plain red drop
rule add fine dst 10.51.0.0/16 profile fast red shape max-delay 5ms
"""

QUEUED = "\n".join(line + (" queue " + n if n else "") for line, n in
                   zip(POLICY.rstrip("\n").split("\n"), ["", "", "", "", "2", "3", "", "2"])) + "\n"


def udp_frame(src, dst, seq, size):
    """An IPv4/UDP frame whose payload starts with its sequence number: every frame is unique."""
    payload = struct.pack("!I", seq) + bytes(max(size - 4, 0))
    udp = struct.pack("!HHHH", 1000, 2000, 8 + len(payload), 0) + payload
    return daemon_capture.ether(daemon_capture.ipv4(src, dst, 17, 0, udp), 0x0800)


def shaped_capture(path, seconds=1.0):
    """Three kinds of flow, over `seconds`, in microseconds: one aggregate flow at 3x its rate, eight
    per-source flows at about 2x theirs, and a policed (not shaped) flow. Returns the packet count."""
    packets = []
    seq = 0
    end = int(seconds * 1_000_000)
    streams = [([10, 20, 0, 1], [10, 21, 0, 1], 1000, 1_000_000 // 1500)]                     # 12 Mbit/s vs 4
    streams += [([10, 30, 0, h], [10, 31, 0, 1], 400, 1_000_000 // 600) for h in range(1, 9)]  # 1.9 Mbit/s vs 1
    streams += [([10, 40, 0, 1], [10, 41, 0, 1], 500, 1_000_000 // 1000)]                      # 4 Mbit/s vs 2
    for i, (src, dst, size, gap) in enumerate(streams):
        for t in range(i * 37, end, gap):
            packets.append((t, src, dst, size))
    # A fast flow of small frames in spurts (3 a microsecond for 20 us, then one every 5 us for 30 us),
    # 10 ms of it: its queue drains within microseconds of the next packet's arrival, so that a packet
    # released even a wheel slot (1 us) late would leave after a later one of its flow that conforms.
    for cycle in range(200):
        start = 500 + cycle * 50
        for t in range(start, start + 20):
            packets += [(t, [10, 50, 0, 1], [10, 51, 0, 1], 20)] * 3
        for t in range(start + 20, start + 50, 5):
            packets.append((t, [10, 50, 0, 1], [10, 51, 0, 1], 20))
    packets.sort(key=lambda p: p[0])  # stable: a microsecond's packets keep their order
    out = []
    for t, src, dst, size in packets:
        out.append((t, udp_frame(src, dst, seq, size)))
        seq += 1
    daemon_capture.write_pcap(path, out)
    return len(out)


def flow_of(frame):
    return frame[26:34]  # IPv4 source and destination


def by_flow(frames):
    flows = collections.defaultdict(list)
    for f in frames:
        flows[flow_of(f)].append(f)
    return flows


def run_daemon(workdir, name, capture, policy, expected_packets, lcores, extra=(), clock="rx-timestamp", empty=False):
    """Stops the daemon once it has received the capture (and, with `empty`, holds nothing)."""
    out = os.path.join(workdir, f"{name}.pcap")
    args = [tricolord, *lcores, "--no-huge", "-m", "1024", "--no-pci", "--no-telemetry",
            f"--file-prefix=tricolor-shape-{os.getpid()}-{name}", "--log-level=lib.eal:warning",
            f"--vdev=net_pcap0,rx_pcap={capture},tx_pcap={out}",
            "--", "--policy", policy, "--clock", clock, "--json", "--stats-interval", "0.2",
            "--socket", os.path.join(workdir, f"{name}.sock"), *extra]
    def done(s):
        return s["ports"][0]["rx_packets"] >= expected_packets and (not empty or s["worker"]["shape_held"] == 0)
    final, errors = daemon_capture.run_through(args, done, label=f"tricolord ({name})")
    print(errors, file=sys.stderr)
    return final, daemon_capture.read_pcap_frames(out)


def check_pool(name, final, packets):
    port = final["ports"][0]
    assert port["rx_packets"] == packets, (name, port)
    assert port["rx_nombuf"] == 0, f"{name}: the pool ran dry: {port}"
    assert final["mbufs_in_use"] == final["mbufs_in_use_at_start"], \
        f"{name}: mbufs not back after the stop: {final['mbufs_in_use']} in use, {final['mbufs_in_use_at_start']} at the start"
    assert final["worker"]["no_timestamp"] == 0, final["worker"]
    # A packet a handoff ring could not take was never metered: nothing would compare.
    assert final["worker"]["handoff_dropped"] == 0 and final["handoff_left_at_stop"] == 0, (name, final["worker"])


def check_shape_counters(name, final):
    w = final["worker"]
    for one in final["workers"] + [w]:
        assert one["shape_held_in"] == one["shape_released"] + one["shape_flushed"], (name, one)
        assert one["shape_held"] == 0, (name, one)
    print(f"{name}: shaping held {w['shape_held_in']}, released at their tick {w['shape_released']}, "
          f"sent at the stop {w['shape_flushed']}, dropped (wheel full) {w['shape_overflow']}")
    return w


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-shape-") as workdir:
        capture = os.path.join(workdir, "in.pcap")
        policy = os.path.join(workdir, "shape.policy")
        open(policy, "w").write(POLICY)
        packets = shaped_capture(capture)
        print(f"capture: {packets} packets")

        replayed = os.path.join(workdir, "replay.pcap")
        summary = os.path.join(workdir, "replay.json")
        subprocess.run([replay, "--policy", policy, "--in", capture, "--out", replayed, "--json", summary],
                       check=True, timeout=120, stdin=subprocess.DEVNULL)
        expected = json.load(open(summary))
        theirs = daemon_capture.read_pcap_frames(replayed)
        assert 0 < len(theirs) < packets, f"replay forwarded {len(theirs)} of {packets}: nothing to compare"

        # Two workers: net_pcap has one RX queue, so worker 0 receives everything and passes the keys
        # worker 1 owns over a ring, long enough that the second worker (sharing the main lcore's CPU
        # on a two-CPU machine) never lets it fill while the capture is read at full speed.
        runs = [("one-worker", ["-l", "0,1"], []),
                ("two-workers", ["--lcores=0@0,1@1,2@0"], ["--handoff-ring", "16384"])]
        for name, lcores, extra in runs:
            final, ours = run_daemon(workdir, name, capture, policy, packets, lcores, extra)
            check_pool(name, final, packets)

            # The same counters per rule and color (the late packets are each rule's red, dropped).
            by_name = {r["name"]: r for r in final["rules"]}
            for rule in expected["rules"]:
                got = by_name[rule["name"]]
                for color in ("green", "yellow", "red"):
                    assert got[f"{color}_packets"] == rule[color]["packets"], (name, rule["name"], color, got, rule)
                    assert got[f"{color}_bytes"] == rule[color]["bytes"], (name, rule["name"], color, got, rule)
                assert got["dropped_packets"] == rule["dropped"]["packets"], (name, rule["name"], got, rule)
            for rule in ("shaped", "hosts", "dropper"):
                assert by_name[rule]["red_packets"] > 0, f"{name}: rule {rule} had no late packet: {by_name[rule]}"
            fine = by_name["fine"]
            assert 0 < fine["shaped_packets"] < fine["green_packets"], f"{name}: rule fine held none, or all: {fine}"

            # The same frames, and each flow's in the same order.
            assert sorted(ours) == sorted(theirs), \
                f"{name}: the daemon forwarded {len(ours)} frames, replay {len(theirs)}; not the same set"
            mine, replays = by_flow(ours), by_flow(theirs)
            assert mine.keys() == replays.keys()
            for flow in replays:
                if mine[flow] != replays[flow]:
                    seqs = lambda frames: [struct.unpack("!I", f[42:46])[0] for f in frames]  # noqa: E731
                    a, b = seqs(mine[flow]), seqs(replays[flow])
                    at = next(i for i in range(len(a)) if a[i] != b[i])
                    raise AssertionError(f"{name}: flow {flow.hex()} in another order from its frame {at}: "
                                         f"daemon {a[max(at - 3, 0):at + 6]}, replay {b[max(at - 3, 0):at + 6]}")

            w = check_shape_counters(name, final)
            assert w["shape_overflow"] == 0, (name, w)
            assert w["shape_released"] > 0, f"{name}: no packet was released from the wheel at its tick: {w}"
            shaped = sum(r.get("shaped_packets", 0) for r in final["rules"])
            assert w["shape_held_in"] == shaped, f"{name}: the wheel took {w['shape_held_in']}, the rules held {shaped}"
            if name == "two-workers":
                held_by = [one["shape_held_in"] for one in final["workers"]]
                assert all(h > 0 for h in held_by), f"both workers should hold packets (per-source keys): {held_by}"
            print(f"{name}: forwarded {len(ours)} frames equal to replay's, in each flow's order "
                  f"({len(replays)} flows); dropped {packets - len(ours)}")

        # Small queues: what a full queue refuses is dropped, nothing taken, exactly as replay does.
        queued = os.path.join(workdir, "queued.policy")
        open(queued, "w").write(QUEUED)
        q_summary = os.path.join(workdir, "replay-queued.json")
        q_replayed = os.path.join(workdir, "replay-queued.pcap")
        subprocess.run([replay, "--policy", queued, "--in", capture, "--out", q_replayed, "--json", q_summary],
                       check=True, timeout=120, stdin=subprocess.DEVNULL)
        q_expected = json.load(open(q_summary))
        q_theirs = daemon_capture.read_pcap_frames(q_replayed)
        final, ours = run_daemon(workdir, "queued", capture, queued, packets, ["-l", "0,1"])
        check_pool("queued", final, packets)
        w = check_shape_counters("queued", final)
        assert w["shape_overflow"] == 0, w
        by_name = {r["name"]: r for r in final["rules"]}
        for rule in q_expected["rules"]:
            got = by_name[rule["name"]]
            for color in ("green", "yellow", "red"):
                assert got[f"{color}_packets"] == rule[color]["packets"], ("queued", rule["name"], color, got, rule)
            if "shaping" in rule:
                assert got["shaped_packets"] == rule["shaping"]["held_packets"], ("queued", got, rule)
                assert got["queue_overflow_packets"] == rule["shaping"]["queue_overflow_packets"], ("queued", got, rule)
        for rule in ("shaped", "hosts", "fine"):
            assert by_name[rule]["queue_overflow_packets"] > 0, f"queued: rule {rule}'s queue never overflowed: {by_name[rule]}"
        assert sorted(ours) == sorted(q_theirs), f"queued: the daemon forwarded {len(ours)} frames, replay {len(q_theirs)}"
        print(f"queued: forwarded {len(ours)} frames equal to replay's; queue overflow "
              f"{ {r: by_name[r]['queue_overflow_packets'] for r in ('shaped', 'hosts', 'fine')} }")

        # A wheel of 2: what it refuses is dropped and counted; the rest leaves as it would have.
        final, ours = run_daemon(workdir, "capacity-2", capture, policy, packets, ["-l", "0,1"],
                                 extra=["--shape-capacity", "2"])
        check_pool("capacity-2", final, packets)
        w = check_shape_counters("capacity-2", final)
        assert w["shape_overflow"] > 0, f"a wheel of 2 never filled: {w}"
        shaped = sum(r.get("shaped_packets", 0) for r in final["rules"])
        assert w["shape_held_in"] + w["shape_overflow"] == shaped, (w, shaped)
        assert len(ours) == len(theirs) - w["shape_overflow"], (len(ours), len(theirs), w)
        assert set(ours) <= set(theirs), "a frame replay did not forward"

        # The TSC clock: net_pcap reads the capture in milliseconds, so the decisions are not replay's,
        # but held packets leave at their tick from the poll loop's clock reads (5 ms at most, long
        # before a stats line shows the wheel empty and stops the daemon; without them it never empties),
        # each flow in its order, every mbuf back.
        final, ours = run_daemon(workdir, "tsc", capture, policy, packets, ["-l", "0,1"], clock="tsc", empty=True)
        check_pool("tsc", final, packets)
        w = check_shape_counters("tsc", final)
        assert w["shape_held_in"] > 0 and w["shape_released"] == w["shape_held_in"], f"tsc: not all released: {w}"
        for flow, frames in by_flow(ours).items():
            seqs = [struct.unpack("!I", f[42:46])[0] for f in frames]
            assert seqs == sorted(seqs), f"tsc: flow {flow.hex()} reordered"


main()
