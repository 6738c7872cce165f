#!/usr/bin/env python3
"""tricolord on two workers: every rate holds as with one meter, and no flow is reordered.

Packets carry a sequence number; every rule remarks each color to its own DSCP (green af11, yellow
af12, red af13) and drops nothing, so the output capture tells each packet's color. The clock is the
capture's (net_pcap RX timestamps), so the daemon's colors can be compared with tricolor-replay's.

  one queue    one net_pcap RX queue, two workers (twice: without, then with a flow cache of 4 entries
               in each worker): worker 0 receives everything and passes the packets
               of the keys worker 1 owns to it. Every packet of the aggregate rule, the per-source rule
               and the aggregate rule under a parent has the color tricolor-replay gives it; the
               per-source rule under a parent (its parent checked by both workers) stays within the
               parent's bound; a rule of capacity 8 has 4 keys on each worker, and each worker's full
               table is reported on its own.
  two queues   the capture split by flow over two net_pcap RX queues, so each source's flows reach
               both workers: each key is metered by exactly one worker (--dump-keys says which), each
               key's and each aggregate's green bytes stay within CBS + CIR * T + one packet.
  steered      the capture split by source over two queues, as a NIC steering by source would split
               it, with --placement=steered (the queues taken as steered): no handoff, the same checks.
  none         the same as two queues with --placement=none (each worker meters what it receives on meters of its
               own): the checks above must fail, for keys and aggregates, or they prove nothing.
  pair         two ports forwarding to each other (net_pcap0 <-> net_pcap1), two RX queues each, so
               that a burst worker 1 takes from its ring holds packets of both ports: every packet
               leaves by the other port than the one it came in by, none by its own.
In every run: packets of one flow leave in the order they arrived; nothing is lost (rx = tx, no
handoff drop, every mbuf back).

Run by meson: workers_test.py BUILD_ROOT.
"""
import collections
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

KEY_CIR_BPS, KEY_CBS = 100_000 // 8, 4096          # keyp: per source
AGG_CIR_BPS, AGG_CBS = 2_000_000 // 8, 8192        # aggp
TOP_CIR_BPS, TOP_CBS = 3_000_000 // 8, 16384       # top: parent of `capped`
CAP_CIR_BPS, CAP_CBS = 1_000_000 // 8, 8192        # capp: parent of `keycap`
COLORS = " green remark af11 yellow remark af12 red remark af13"
POLICY = f"""\
profile add keyp trtcm cir 100kbit cbs 4096 pir 200kbit pbs 8192
profile add aggp trtcm cir 2mbit cbs 8192 pir 4mbit pbs 16384
profile add top srtcm cir 3mbit cbs 16384 ebs 16384
profile add capp 1r2c cir 1mbit cbs 8192
rule add agg dst 10.2.0.0/16 profile aggp{COLORS}
rule add persrc dst 10.3.0.0/16 per src timeout 30s profile keyp{COLORS}
rule add capped dst 10.4.0.0/16 profile aggp parent top{COLORS}
rule add keycap dst 10.5.0.0/16 per src timeout 30s profile keyp parent capp{COLORS}
rule add small dst 10.6.0.0/16 per src timeout 30s capacity 8 profile keyp{COLORS}
"""
RULE_OF_DST = {2: "agg", 3: "persrc", 4: "capped", 5: "keycap", 6: "small"}
DSCP_COLOR = {10: "green", 12: "yellow", 14: "red"}
SOURCES, PORTS_PER_SOURCE = 32, 4
SECONDS, RATE_PPS = 2.0, 20_000


def make_capture(seed=10):
    """(offset us, frame, flow) in time order: UDP from 32 sources x 4 source ports to the four rules."""
    rng = random.Random(seed)
    packets, t, seq = [], 0, 0
    while t < SECONDS * 1_000_000:
        src = [10, 1, 0, rng.randrange(SOURCES)]
        sport = 1000 + rng.randrange(PORTS_PER_SOURCE)
        dst = [10, rng.choice(list(RULE_OF_DST)), 0, 1]
        size = rng.choice([60, 200, 600, 1200])
        payload = struct.pack("!I", seq) + bytes(size)
        udp = struct.pack("!HHHH", sport, 7, 8 + len(payload), 0) + payload
        frame = daemon_capture.ether(daemon_capture.ipv4(src, dst, 17, 0, udp), 0x0800)
        packets.append((t, frame, (src[3], sport, dst[1])))
        t += rng.randrange(1, 2 * 1_000_000 // RATE_PPS)
        seq += 1
    return packets


def decode(frame):
    """(seq, color, rule, source, flow) of an output frame."""
    dscp = frame[15] >> 2
    src, dst = frame[29], frame[31]
    sport = struct.unpack("!H", frame[34:36])[0]
    seq = struct.unpack("!I", frame[42:46])[0]
    return seq, DSCP_COLOR[dscp], RULE_OF_DST[dst], src, (src, sport, dst)


def run_daemon(workdir, label, rx_files, expected, extra=()):
    out = os.path.join(workdir, f"{label}.pcap")
    keys = os.path.join(workdir, f"{label}.keys")
    rx = ",".join(f"rx_pcap={f}" for f in rx_files)
    args = [tricolord, "--lcores=0@0,1@1,2@0", "--no-huge", "-m", "1024", "--no-pci", "--no-telemetry",
            f"--file-prefix=tricolor-workers-{os.getpid()}-{label}", "--log-level=lib.eal:warning",
            f"--vdev=net_pcap0,{rx},tx_pcap={out}",
            "--", "--policy", os.path.join(workdir, "p.policy"), "--clock", "rx-timestamp", "--json",
            "--stats-interval", "0.2", "--handoff-ring", "16384", "--dump-keys", keys,
            "--socket", os.path.join(workdir, f"{label}.sock"), *extra]  # not the default one: it may be taken
    final, errors = daemon_capture.run_through(
        args, lambda s: s["ports"][0]["rx_packets"] >= expected and s["ports"][0]["tx_packets"] >= expected, label)
    print(errors, file=sys.stderr)
    dumped = [json.loads(line) for line in open(keys)]
    return final, daemon_capture.read_pcap_frames(out), dumped, errors


def run_pair(workdir, packets):
    """The capture over two ports (by source) and two queues each (by source port), forwarded as a pair;
    returns (final, {port: the sequence numbers it received}, {port: the frames it sent})."""
    rx_files, received = {0: [], 1: []}, {0: set(), 1: set()}
    for port in (0, 1):
        for queue in (0, 1):
            part = [(t, f) for t, f, flow in packets if flow[0] % 2 == port and flow[1] % 2 == queue]
            received[port].update(struct.unpack("!I", f[42:46])[0] for _, f in part)  # its sequence number
            path = os.path.join(workdir, f"pair-rx{port}-{queue}.pcap")
            daemon_capture.write_pcap(path, part)
            rx_files[port].append(path)
    outs = {port: os.path.join(workdir, f"pair-tx{port}.pcap") for port in (0, 1)}
    vdevs = [f"--vdev=net_pcap{port}," + ",".join(f"rx_pcap={f}" for f in rx_files[port]) + f",tx_pcap={outs[port]}"
             for port in (0, 1)]
    args = [tricolord, "--lcores=0@0,1@1,2@0", "--no-huge", "-m", "1024", "--no-pci", "--no-telemetry",
            f"--file-prefix=tricolor-workers-{os.getpid()}-pair", "--log-level=lib.eal:warning", *vdevs,
            "--", "--policy", os.path.join(workdir, "p.policy"), "--clock", "rx-timestamp", "--json",
            "--stats-interval", "0.2", "--handoff-ring", "16384", "--socket", os.path.join(workdir, "pair.sock")]
    expected = len(packets)
    final, _ = daemon_capture.run_through(
        args, lambda s: sum(p["rx_packets"] for p in s["ports"]) >= expected
        and sum(p["tx_packets"] for p in s["ports"]) >= expected, "pair")
    return final, received, {port: daemon_capture.read_pcap_frames(outs[port]) for port in (0, 1)}


def colors_differing(frames, expected_color, label):
    """Packets whose color differs from tricolor-replay's, by rule; none for agg, persrc and capped (the
    parent that both workers check, keycap's, may differ)."""
    differ = collections.Counter()
    for frame in frames:
        seq, color, rule, _, _ = decode(frame)
        if color != expected_color[seq]:
            differ[rule] += 1
    for rule in ("agg", "persrc", "capped"):
        assert differ[rule] == 0, f"{label}: {differ[rule]} packets of rule {rule} differ from tricolor-replay"
    return differ


def check_delivery(label, final, frames, expected):
    """Nothing lost, every mbuf back, and each flow's packets in arrival (sequence) order."""
    port = final["ports"][0]
    assert port["rx_packets"] == expected and port["tx_packets"] == expected, f"{label}: {port}"
    assert len(frames) == expected, f"{label}: {len(frames)} frames out of {expected}"
    workers = final["workers"]
    assert len(workers) == 2, workers
    assert sum(w["handoff_dropped"] for w in workers) == 0 and final["handoff_left_at_stop"] == 0, workers
    assert sum(w["handed_out"] for w in workers) == sum(w["handed_in"] for w in workers), workers
    assert final["mbufs_in_use"] == final["mbufs_in_use_at_start"], final
    last = {}
    for frame in frames:
        seq, _, _, _, flow = decode(frame)
        assert last.get(flow, -1) < seq, f"{label}: flow {flow} reordered: {seq} after {last[flow]}"
        last[flow] = seq


def duration_s(packets, rule):
    times = [t for t, _, flow in packets if RULE_OF_DST[flow[2]] == rule]
    return (times[-1] - times[0]) / 1e6


def bound(cbs, cir_bps, seconds):
    return cbs + cir_bps * seconds + 1242  # one packet: the largest frame


def exactness_failures(final, dumped, packets):
    """What breaks 'all workers together admit no more than one meter would'; empty when it holds."""
    failures = []
    rules = {r["name"]: r for r in final["rules"]}
    for name, cbs, cir in [("agg", AGG_CBS, AGG_CIR_BPS), ("capped", TOP_CBS, TOP_CIR_BPS), ("keycap", CAP_CBS, CAP_CIR_BPS)]:
        limit = bound(cbs, cir, duration_s(packets, name))
        if rules[name]["green_bytes"] > limit:
            failures.append(f"rule {name}: {rules[name]['green_bytes']} green bytes > {limit:.0f}")
    by_key = collections.defaultdict(list)
    for k in dumped:
        by_key[(k["rule"], k["key"])].append(k)
    limit = bound(KEY_CBS, KEY_CIR_BPS, SECONDS)
    for (rule, key), entries in sorted(by_key.items()):
        if len(entries) > 1:
            failures.append(f"rule {rule} key {key}: metered by workers {[e['worker'] for e in entries]}")
        green = sum(e["bytes"][0] for e in entries)
        if rule == "persrc" and green > limit:
            failures.append(f"rule {rule} key {key}: {green} green bytes > {limit:.0f}")
    return failures


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-workers-") as workdir:
        open(os.path.join(workdir, "p.policy"), "w").write(POLICY)
        packets = make_capture()
        whole = os.path.join(workdir, "in.pcap")
        daemon_capture.write_pcap(whole, [(t, f) for t, f, _ in packets])
        print(f"capture: {len(packets)} packets over {SECONDS} s, {SOURCES} sources x {PORTS_PER_SOURCE} flows")

        replayed = os.path.join(workdir, "replay.pcap")
        subprocess.run([replay, "--policy", os.path.join(workdir, "p.policy"), "--in", whole, "--out", replayed],
                       check=True, timeout=120, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        expected_color = {decode(f)[0]: decode(f)[1] for f in daemon_capture.read_pcap_frames(replayed)}

        # One queue: packet for packet as tricolor-replay, but for the parent that both workers check.
        final, frames, dumped, errors = run_daemon(workdir, "one-queue", [whole], len(packets))
        check_delivery("one queue", final, frames, len(packets))
        assert "each key metered by one worker, chosen by a hash of the key" in errors, errors
        assert "more workers may police fewer packets than one" in errors, errors
        assert "RSS steering off: port 0 (net_pcap) has 1 RX queue for 2 workers" in errors, errors
        # --lcores 0@0,1@1,2@0 puts worker 2 on the main lcore's CPU (this machine has 2): said at startup.
        assert "warning: worker lcore 2 shares a CPU with the main lcore 0" in errors, errors
        differ = colors_differing(frames, expected_color, "one queue")
        workers = final["workers"]
        assert workers[0]["handed_out"] > 0 and workers[1]["handed_in"] == workers[0]["handed_out"], workers
        owners = {k["worker"] for k in dumped if k["rule"] == "persrc"}
        assert owners == {0, 1}, f"one queue: persrc's keys on workers {owners}"
        # A rule's capacity split across the workers (8 keys: 4 each, for 32 sources), each worker's
        # full table reported on its own (new keys beyond it take the rule's aggregate meter).
        small = {r["name"]: r for r in final["rules"]}["small"]
        assert small["keys"]["capacity_per_worker"] == 4, small
        assert [w["live_keys"] for w in small["workers"]] == [4, 4], small
        assert all(w["table_full"] > 0 for w in small["workers"]), small
        assert small["keys"]["table_full"] == sum(w["table_full"] for w in small["workers"]), small
        failures = exactness_failures(final, dumped, packets)
        assert not failures, failures
        print(f"one queue: colors equal tricolor-replay's for agg, persrc and capped; keycap differs in "
              f"{differ['keycap']} packets (its parent sees the two workers' bursts in their order), within its "
              f"bound; worker 0 passed {workers[0]['handed_out']} packets to worker 1")

        # One queue again, each worker classifying through a flow cache of 4 entries (more flows than it
        # holds, flows sharing its entries, keys handed to the other worker): the same colors.
        final, frames, _, errors = run_daemon(workdir, "one-queue-cache", [whole], len(packets),
                                              ["--flow-cache-entries", "4"])
        check_delivery("one queue, flow cache", final, frames, len(packets))
        colors_differing(frames, expected_color, "one queue, flow cache")
        assert final["workers"][0]["handed_out"] > 0, final["workers"]
        cache = [(w["flow_cache_hits"], w["flow_cache_misses"]) for w in final["workers"]]
        assert cache[0][0] > 0 and cache[0][1] > 0, f"one queue, flow cache: worker 0's hits and misses {cache[0]}"
        print(f"one queue, flow cache of 4 entries (hits, misses per worker: {cache}): colors equal tricolor-replay's for agg, persrc and capped")

        # Two queues, split by flow: every source reaches both workers.
        halves = ([], [])
        for t, f, flow in packets:
            halves[hash(flow) % 2].append((t, f))
        files = [os.path.join(workdir, f"half{i}.pcap") for i in (0, 1)]
        for path, half in zip(files, halves):
            daemon_capture.write_pcap(path, half)
        final, frames, dumped, _ = run_daemon(workdir, "two-queues", files, len(packets))
        check_delivery("two queues", final, frames, len(packets))
        failures = exactness_failures(final, dumped, packets)
        assert not failures, failures
        rx = [w["packets"] - w["handed_in"] for w in final["workers"]]
        assert all(n > 0 for n in rx), f"two queues: each worker should receive: {final['workers']}"
        keys = [k for k in dumped if k["rule"] in ("persrc", "keycap")]
        assert len(keys) == 2 * SOURCES, f"two queues: {len(keys)} keys for {SOURCES} sources in two rules"
        print(f"two queues: {len(keys)} keys, each on one worker "
              f"({sum(k['worker'] == 0 for k in keys)} on worker 0); every bound holds")

        # Steered: each source's packets all on one queue, as a NIC steering by source would deliver them;
        # --placement=steered (a test switch) takes the queues as steered: no handoff, and still exact.
        by_source = ([], [])
        for t, f, flow in packets:
            by_source[flow[0] % 2].append((t, f))
        steered_files = [os.path.join(workdir, f"source{i}.pcap") for i in (0, 1)]
        for path, half in zip(steered_files, by_source):
            daemon_capture.write_pcap(path, half)
        final, frames, dumped, errors = run_daemon(workdir, "steered", steered_files, len(packets), ["--placement=steered"])
        assert "ASSUMED STEERED" in errors, errors
        check_delivery("steered", final, frames, len(packets))
        assert all(w["handed_out"] == 0 for w in final["workers"]), final["workers"]
        failures = exactness_failures(final, dumped, packets)
        assert not failures, failures
        print("steered: no packet handed over, each key on the worker of its queue, every bound holds")

        # A pair of ports: bursts from the handoff ring mix the two ports' packets, and each packet leaves
        # by its own ingress port's egress (the other port), not by the first packet's.
        final, received, sent = run_pair(workdir, packets)
        workers = final["workers"]
        assert len(workers) == 2 and all(w["handed_in"] > 0 for w in workers), workers
        assert sum(w["handoff_dropped"] for w in workers) == 0 and final["mbufs_in_use"] == final["mbufs_in_use_at_start"], final
        for port in (0, 1):
            out = [decode(f) for f in sent[port]]
            seqs = [seq for seq, *_ in out]
            assert len(seqs) == len(set(seqs)), f"pair: port {port} sent a packet twice"
            own = set(seqs) & received[port]
            assert not own, f"pair: port {port} sent {len(own)} packets back out of it, e.g. seq {min(own)}"
            assert set(seqs) == received[1 - port], (
                f"pair: port {port} sent {len(seqs)} packets; port {1 - port} received {len(received[1 - port])}")
            last = {}
            for seq, _, _, _, flow in out:
                assert last.get(flow, -1) < seq, f"pair: flow {flow} reordered: {seq} after {last[flow]}"
                last[flow] = seq
        print(f"pair: {len(sent[0])} packets 1 -> 0 and {len(sent[1])} 0 -> 1, each out of the other port; "
              f"handed in: {[w['handed_in'] for w in workers]}")

        # Placement off: the same checks must catch it.
        final, frames, dumped, errors = run_daemon(workdir, "none", files, len(packets), ["--placement=none"])
        assert "PLACEMENT OFF" in errors, errors
        failures = exactness_failures(final, dumped, packets)
        twice = [f for f in failures if "metered by workers" in f]
        over = [f for f in failures if "green bytes >" in f and " key " in f]
        rules_over = [f for f in failures if f.startswith("rule ") and " key " not in f]
        assert twice and over and rules_over, f"--placement=none went unnoticed: {failures}"
        print(f"placement none: caught: {len(twice)} keys metered twice, {len(over)} keys and {len(rules_over)} "
              f"aggregates over their bound, e.g. {twice[0]}; {over[0]}; {rules_over[0]}")


if __name__ == "__main__":
    main()
