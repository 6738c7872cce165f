#!/usr/bin/env python3
"""The control-plane benchmark (issue 11, section 4): tricolord forwarding at full rate while a client
changes its policy over the control socket.

The daemon runs as in the daemon benchmark (bench/daemon/run_bench.py, whose pieces this script
imports): net_pcap `rx_pcap=F,infinite_rx=1` in, net_null out, 64-byte frames, one worker (main lcore
on core 0, the worker on core 1) or two (`--lcores 0@0,1@1,2@0`: the second worker beside the main
lcore), its own --file-prefix, huge pages when the script can reserve them. This script is the client:
one AF_UNIX connection speaking control/daemon/protocol.hpp (a 4-byte big-endian length, then a JSON object),
pinned to core 0 (the control side's core), so that it does not time-slice with worker 0.

Measurements, each in a daemon of its own, per number of workers:
  changes    aggregate and per-5-tuple rule (bench/daemon/*.policy), 4 Ki flows: windows of
             `--window` s alternating without changes (the baseline) and with `profile change` sent
             back to back (each as soon as the previous reply is in) or at a fixed rate (10, 100,
             1000 /s); per window the changes per second achieved and port 0's Mpps, as a ratio to
             the mean of the two baseline windows beside it.
  latency    N changes spaced `--spacing` ms: send -> reply, and send -> every worker's
             generation_seen >= the reply's generation (`stats workers`, sent in the same write as the
             change, so evaluated right after it; polled again while not reached).
  keys       per-5-tuple rule filled with 1 Mi live keys (a capture of 1 Mi flows): the latency of
             a profile change, and the rule's green rate under a new low profile against what the
             profile says (live keys x CIR: every key offers more than CIR), then back.
  load       a policy of 10 240 rules (distinct /32 destinations, 4 profiles) loaded over the socket
             (`load` with the text inline) while forwarding: the reply time and the Mpps during the
             load; then one-rule changes (`rule change`) on that policy, latency as above.
  scrapes    the metrics listener (`--metrics`, issue 12) on the aggregate rule: windows of GET
             /metrics back to back from one client, and from 16 clients at once, against windows
             without (the Mpps ratio, as for changes); each scrape's time and size; then the same on
             the 10 240-rule policy (`load`), with the control socket's `ping` round trip meanwhile
             (how long a scrape holds the control thread).

Usage (from the source root, as root, after `ninja -C build control/tricolord`):
  bench/control/run_control_bench.py            # everything, one and two workers, ~8 minutes
  bench/control/run_control_bench.py --smoke    # short windows and few changes (meson test bench-control-smoke)
Logs (the daemon's full output), captures, results.md and results.json go to the work folder.
"""
import argparse
import json
import multiprocessing
import os
import socket
import struct
import subprocess
import sys
import threading
import queue
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
DAEMON_BENCH = os.path.join(SOURCE_ROOT, "bench", "daemon")
sys.path.insert(0, DAEMON_BENCH)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import make_capture  # noqa: E402
import run_bench  # noqa: E402  (the daemon benchmark: how tricolord is started, stopped and cleaned up)
from memory import Memory, memory_mb_for  # noqa: E402

AGGREGATE = os.path.join(DAEMON_BENCH, "aggregate.policy")
PER_5_TUPLE = os.path.join(DAEMON_BENCH, "per-5-tuple.policy")
# The two parameter sets the changes alternate between: the policies' own, and half of it.
PROFILE_A = "profile change bench trtcm cir 368mbit cbs 2048 pir 552mbit pbs 2048"
PROFILE_B = "profile change bench trtcm cir 184mbit cbs 2048 pir 276mbit pbs 2048"
# For the 1 Mi keys: a rate every key exceeds (at 3..15 Mpps over 1 Mi keys, each key offers 3 to 15
# packets of 46 L3 bytes a second, 138 to 690 bytes/s), so that the rule's green rate is live keys x
# CIR. Buckets of 128 bytes: the tokens a key gains between two of its packets never overflow them.
LOW_CIR_BYTES = 60                # 480 bit/s: a green packet per key every 46 / 60 = 0.77 s
LOW_PROFILE = "profile change bench trtcm cir 480bit cbs 128 pir 960bit pbs 128"
L3_BYTES = 46                     # a 64-byte frame's metered length (length l3): 60 captured - 14
RULES_10K = 10240
CONNECT_LIMIT_S = 120             # the daemon's startup (EAL, preloading 1 Mi packets): seconds


# ----------------------------------------------------------------------------------------------------
# The control socket's client.

class Client:
    def __init__(self, path, timeout):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = bytearray()

    def close(self):
        self.sock.close()

    @staticmethod
    def frame(command, text=None):
        request = {"command": command, "json": True}
        if text is not None:
            request["text"] = text
        payload = json.dumps(request).encode()
        return struct.pack("!I", len(payload)) + payload

    def send(self, *frames):
        self.sock.sendall(b"".join(frames))

    def receive(self):
        while True:
            if len(self.buffer) >= 4:
                length = struct.unpack("!I", self.buffer[:4])[0]
                if len(self.buffer) >= 4 + length:
                    payload = bytes(self.buffer[4:4 + length])
                    del self.buffer[:4 + length]
                    return json.loads(payload)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the daemon closed the control socket")
            self.buffer += chunk

    def call(self, command, text=None):
        self.send(self.frame(command, text))
        return checked(self.receive(), command)


def checked(reply, command):
    if not reply.get("ok"):
        raise RuntimeError(f"{command!r} refused: {reply.get('error')}")
    return reply.get("result", {})


# ----------------------------------------------------------------------------------------------------
# One daemon, started as the daemon benchmark starts it, with a control socket.

class Daemon:
    def __init__(self, ctx, label, policy, capture, packets, flows, workers, seconds, extra=()):
        self.ctx, self.label = ctx, label
        ctx.serial += 1
        self.prefix = f"tricolor-ctlbench-{os.getpid()}-{ctx.serial}"
        self.socket_path = f"/tmp/{self.prefix}.sock"
        self.log_path = os.path.join(ctx.args.workdir, "logs", f"{label}-w{workers}.log")
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        argv, _, own_limit = ctx.bench.command("tricolord-5tuple", capture, packets, flows, self.prefix, workers,
                                               policy=policy, extra=["--socket", self.socket_path, *extra],
                                               own_limit=int(seconds))
        hard_limit = own_limit + run_bench.STOP_LIMIT_S
        self.argv = ["timeout", "--signal=INT", f"--kill-after={run_bench.STOP_LIMIT_S}", str(hard_limit), *argv]
        self.proc = self.reader = self.client = None
        self.worker_task = self.main_task = None
        self.turns = {}  # per list of commands alternated, how many were sent (the next must change something)

    def next_command(self, commands):
        """The next of `commands`, taken in turn; a command that would change nothing gets no new rule set."""
        turn = self.turns.get(commands, 0)
        self.turns[commands] = turn + 1
        return commands[turn % len(commands)]

    def __enter__(self):
        self.log = open(self.log_path, "w")
        self.log.write(" ".join(self.argv) + "\n")
        self.log.flush()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", bufsize=1, start_new_session=True)
        lines = queue.Queue()  # the daemon's own once-a-second lines go to the log only
        self.reader = threading.Thread(target=run_bench._pump, args=(self.proc.stdout, self.log, lines), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + CONNECT_LIMIT_S
        while self.client is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tricolord ended at startup (log {self.log_path})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"tricolord: no control socket after {CONNECT_LIMIT_S} s (log {self.log_path})")
            try:
                self.client = Client(self.socket_path, CONNECT_LIMIT_S)
            except OSError:
                time.sleep(0.05)
        # Served once forwarding runs: wait until port 0 has received packets.
        while counters(self).rx == 0:
            time.sleep(0.1)
        self.worker_task = run_bench._worker_thread(self.proc.pid)
        self.main_task = _main_thread(self.proc.pid)
        return self

    def __exit__(self, *exc):
        if self.client:
            self.client.close()
        run_bench.Bench._stop(self.proc, self.reader)
        self.log.close()
        run_bench._remove_runtime_files(self.prefix)
        if self.proc.returncode not in (0, 124) and exc[0] is None:
            raise RuntimeError(f"tricolord exit status {self.proc.returncode} (log {self.log_path})")
        return False


def _main_thread(timeout_pid):
    """The daemon's main thread (its main lcore: the control side), as /proc/PID/task/PID."""
    try:
        with open(f"/proc/{timeout_pid}/task/{timeout_pid}/children") as f:
            pid = f.read().split()[0]
        return f"/proc/{pid}/task/{pid}"
    except (OSError, IndexError):
        return None


class Counters:
    def __init__(self, daemon, result):
        self.t = float(result["elapsed_s"])
        ports = {p["port"]: p for p in result["ports"]}
        self.rx, self.tx = int(ports[0]["rx_packets"]), int(ports[1]["tx_packets"])
        self.wall = time.monotonic()
        self.worker_ns = run_bench._cpu_ns(daemon.worker_task)
        self.main_ns = run_bench._cpu_ns(daemon.main_task)


def counters(daemon):
    return Counters(daemon, daemon.client.call("stats ports"))


def rates(a, b):
    """Port 0's Mpps between two counters (the daemon's clock), worker 0's share of its core, and the
    main lcore's CPU ms (the control side, with whatever else the daemon's main thread did)."""
    seconds = b.t - a.t
    wall = b.wall - a.wall
    return {"seconds": seconds, "mpps": (b.rx - a.rx) / seconds / 1e6,
            "worker_cpu_share": (b.worker_ns - a.worker_ns) / 1e9 / wall if wall > 0 else 0.0,
            "main_cpu_ms": (b.main_ns - a.main_ns) / 1e6}


# ----------------------------------------------------------------------------------------------------
# What the client does during a window.

def idle(daemon, seconds):
    time.sleep(seconds)
    return {}


def changes(daemon, seconds, per_second=None, commands=(PROFILE_B, PROFILE_A)):
    """Changes back to back (per_second None: each sent when the previous reply is in) or paced at
    per_second (each at its slot; one late does not make the next early twice)."""
    client, sent, generations = daemon.client, 0, []
    start = time.monotonic()
    end = start + seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if per_second:
            slot = start + sent / per_second
            if slot > now:
                time.sleep(min(slot, end) - now)
                continue
        result = client.call(daemon.next_command(commands))
        generations.append(result["generation"])
        sent += 1
    elapsed = time.monotonic() - start
    if any(b != a + 1 for a, b in zip(generations, generations[1:])):
        raise RuntimeError("a change did not publish exactly one rule set")
    return {"changes": sent, "changes_per_s": sent / elapsed}


def polls(daemon, seconds):
    """`stats workers` back to back: the latency probe's own cost, and its round trip."""
    client, times = daemon.client, []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        client.call("stats workers")
        times.append(time.perf_counter() - t0)
    return {"polls": len(times), "poll_rtt_us": summary([t * 1e6 for t in times])}


def window(daemon, seconds, action, **kwargs):
    a = counters(daemon)
    extra = action(daemon, seconds, **kwargs)
    b = counters(daemon)
    out = rates(a, b)
    out.update(extra)
    return out


def latency(daemon, count, spacing_s, commands=(PROFILE_B, PROFILE_A)):
    """Per change: send -> reply, and send -> the first `stats workers` reply in which every worker's
    generation_seen has reached the change's generation, polled back to back from the reply on. The
    daemon publishes a change before it replies, so the effect is bounded by the reply and the first
    poll after it; the poll is not sent with the change (the daemon writes the replies to one read
    together: a slow `stats` would delay the change's reply)."""
    client = daemon.client
    to_reply, to_effect, extra_polls = [], [], 0
    poll = Client.frame("stats workers")
    next_at = time.monotonic()
    for i in range(count):
        command = daemon.next_command(commands)
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        next_at += spacing_s
        t0 = time.perf_counter()
        client.send(Client.frame(command))
        generation = checked(client.receive(), command)["generation"]
        t1 = time.perf_counter()
        client.send(poll)
        while True:
            seen = min(w["generation_seen"] for w in checked(client.receive(), "stats workers")["workers"])
            if seen >= generation:
                break
            extra_polls += 1
            client.send(poll)
        t2 = time.perf_counter()
        to_reply.append((t1 - t0) * 1e6)
        to_effect.append((t2 - t0) * 1e6)
    return {"changes": count, "spacing_ms": spacing_s * 1e3, "reply_us": summary(to_reply),
            "effect_us": summary(to_effect), "polls_beyond_the_first": extra_polls,
            "reply_to_effect_us": summary([e - r for r, e in zip(to_reply, to_effect)])}


def summary(values):
    values = sorted(values)
    if not values:
        return {}
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]  # noqa: E731
    return {"n": len(values), "p50": pick(0.5), "p99": pick(0.99), "max": values[-1], "min": values[0]}


# ----------------------------------------------------------------------------------------------------
# The measurements.

def beside(w, before, after):
    """The window against the mean of the windows without changes before and after it: the Mpps ratio,
    and the control thread's CPU per change beyond what it spends without changes."""
    w["baseline_mpps"] = (before["mpps"] + after["mpps"]) / 2
    w["ratio"] = w["mpps"] / w["baseline_mpps"]
    # Per second of worker 0 on a CPU: what time-slicing with other processes on its core does not change
    # (on a busy machine, the client's work on core 0 pushes other processes onto core 1).
    oncpu = [x["mpps"] / x["worker_cpu_share"] if x["worker_cpu_share"] > 0 else 0.0 for x in (w, before, after)]
    w["oncpu_ratio"] = oncpu[0] / ((oncpu[1] + oncpu[2]) / 2) if oncpu[1] + oncpu[2] > 0 else 0.0
    idle_ms_per_s = (before["main_cpu_ms"] / before["seconds"] + after["main_cpu_ms"] / after["seconds"]) / 2
    if w.get("changes"):
        w["main_cpu_us_per_change"] = (w["main_cpu_ms"] - idle_ms_per_s * w["seconds"]) * 1e3 / w["changes"]


def measure_changes(ctx, workers, policy_label, policy):
    args = ctx.args
    capture, packets = ctx.capture(4096)
    seconds = 300 + args.window * (2 * len(args.rates) + 8) + args.changes * args.spacing / 1000 * 2
    out = {"measurement": "changes", "policy": policy_label, "workers": workers, "windows": []}
    with Daemon(ctx, f"changes-{policy_label}", policy, capture, packets, 4096, workers, seconds) as d:
        time.sleep(args.warmup)
        out["load_at_start"] = os.getloadavg()[0]
        baseline = [window(d, args.window, idle)]
        for rate in args.rates:
            w = window(d, args.window, changes, per_second=rate)
            baseline.append(window(d, args.window, idle))
            w["rate_asked"] = rate or "back to back"
            beside(w, baseline[-2], baseline[-1])
            out["windows"].append(w)
            ctx.say(f"  {policy_label} x{workers} changes {w['rate_asked']}: {w['changes_per_s']:8.1f}/s, "
                    f"{w['mpps']:.2f} Mpps vs {w['baseline_mpps']:.2f} ({w['ratio']:.3f}), "
                    f"control thread {w.get('main_cpu_us_per_change', 0):.0f} us CPU per change")
        # The latency probe: its own cost, then the latency itself.
        p = window(d, args.window, polls)
        baseline.append(window(d, args.window, idle))
        beside(p, baseline[-2], baseline[-1])
        out["polling"] = p
        lat = window(d, 0, lambda daemon, _s: latency(daemon, args.changes, args.spacing / 1000))
        baseline.append(window(d, args.window, idle))
        beside(lat, baseline[-2], baseline[-1])
        out["latency"] = lat
        out["baseline"] = baseline
        out["load_at_end"] = os.getloadavg()[0]
        ctx.say(f"  {policy_label} x{workers} polling stats workers: rtt p50 {p['poll_rtt_us']['p50']:.0f} us, "
                f"{p['mpps']:.2f} Mpps vs {p['baseline_mpps']:.2f}; latency (us) reply p50/p99/max "
                f"{fmt3(lat['reply_us'])}, effect {fmt3(lat['effect_us'])}")
    return out


def measure_keys(ctx, workers):
    """1 Mi live keys in a per-5-tuple rule: a profile change's latency and its effect on old keys."""
    args = ctx.args
    flows = args.key_flows
    capture, packets = ctx.capture(flows)
    out = {"measurement": "keys", "workers": workers, "flows": flows}
    seconds = 300 + args.window * 6 + args.key_changes * 0.2
    with Daemon(ctx, "keys", PER_5_TUPLE, capture, packets, flows, workers, seconds) as d:
        start, previous = time.monotonic(), -1
        while True:  # every flow seen once: its key is live (or, two workers, its worker's share is full)
            live = rule_stats(d)["keys"]["live"]
            if live >= flows or live == previous or time.monotonic() - start > 60:
                break
            previous = live
            time.sleep(0.5)
        out["fill_s"] = time.monotonic() - start
        time.sleep(args.warmup)
        out["load_at_start"] = os.getloadavg()[0]
        before = colors_window(d, args.window)
        out["before"] = before
        # Latency of changes that keep the keys (alternating rates well above every key's offer).
        out["latency"] = latency(d, args.key_changes, 0.2)
        # The effect on old keys: a low profile, then back.
        lowered = latency(d, 1, 0, commands=(LOW_PROFILE,))
        # Every key has had packets under the new profile (one pass: keys / rate) and its first greens
        # (its C level, clamped to 128 bytes, spent): from then on one green per key every 46 / CIR s.
        # Those instants start in step (all keys switched within one pass), so the window is a whole
        # number of that period: a key's count in it does not depend on where its greens fall.
        time.sleep(2.0)
        period = L3_BYTES / LOW_CIR_BYTES
        low = colors_window(d, max(4, round(args.window / period)) * period)
        low["live_keys"] = rule_stats(d)["keys"]["live"]
        low["offered_bytes_per_key"] = low["mpps"] * 1e6 / low["live_keys"] * L3_BYTES
        low["predicted_green_pps"] = low["live_keys"] * LOW_CIR_BYTES / L3_BYTES
        low["green_vs_predicted"] = low["green_pps"] / low["predicted_green_pps"]
        low["change"] = lowered
        raised = latency(d, 1, 0, commands=(PROFILE_A,))
        time.sleep(1.0)
        back = colors_window(d, args.window)
        back["change"] = raised
        out.update(low=low, back=back, live_keys=low["live_keys"], load_at_end=os.getloadavg()[0])
        out["pass_s"] = low["live_keys"] / (before["mpps"] * 1e6)  # each key's packet interval
        ctx.say(f"  1 Mi keys x{workers}: {low['live_keys']} live; latency (us) reply {fmt3(out['latency']['reply_us'])}, "
                f"effect {fmt3(out['latency']['effect_us'])}; low profile: green {low['green_pps'] / 1e6:.3f} Mpps "
                f"for {low['predicted_green_pps'] / 1e6:.3f} predicted ({low['green_vs_predicted']:.3f}); "
                f"before {before['green_share']:.3f} green, back {back['green_share']:.3f}")
    return out


def rule_stats(daemon, name="flows"):
    return daemon.client.call(f"stats rule {name}")["rules"][0]


def colors_window(daemon, seconds):
    """Port 0's Mpps and the rule's packets per second by color over a window."""
    a = daemon.client.call("stats")
    a_c = Counters(daemon, a)
    time.sleep(seconds)
    b = daemon.client.call("stats")
    b_c = Counters(daemon, b)
    out = rates(a_c, b_c)
    ra, rb = a["rules"][0], b["rules"][0]
    total = 0
    for color in ("green", "yellow", "red"):
        n = rb[f"{color}_packets"] - ra[f"{color}_packets"]
        out[f"{color}_pps"] = n / out["seconds"]
        total += n
    out["green_share"] = out["green_pps"] * out["seconds"] / total if total else 0.0
    return out


def policy_10k(reverse=False):
    """10 240 rules, one per /32 destination of the captures' flows (172.16.x.y: the 4 Ki flows match
    the first 4096), 4 profiles; `reverse` lists them in the opposite order (every rule moves: the
    classifier is built again)."""
    lines = [f"profile add p{k} trtcm cir {100 * (k + 1)}mbit cbs 64k pir {200 * (k + 1)}mbit pbs 128k" for k in range(4)]
    order = range(RULES_10K - 1, -1, -1) if reverse else range(RULES_10K)
    for i in order:
        lines.append(f"rule add r{i} {rule_body(i, i % 4)}")
    return "\n".join(lines) + "\n"


def rule_body(i, profile):
    return f"dst 172.16.{(i >> 8) & 255}.{i & 255}/32 proto udp profile p{profile} length l3"


def measure_load(ctx, workers):
    args = ctx.args
    capture, packets = ctx.capture(4096)
    out = {"measurement": "load", "workers": workers, "rules": RULES_10K, "loads": []}
    seconds = 300 + args.window * 10 + args.changes * args.spacing / 1000
    texts = [policy_10k(), policy_10k(reverse=True)]
    with Daemon(ctx, "load", AGGREGATE, capture, packets, 4096, workers, seconds) as d:
        time.sleep(args.warmup)
        out["load_at_start"] = os.getloadavg()[0]
        out["before"] = window(d, args.window, idle)  # one rule
        for n in range(args.loads):
            a = counters(d)
            t0 = time.perf_counter()
            result = d.client.call("load", texts[n % 2])
            reply_s = time.perf_counter() - t0
            b = counters(d)
            during = rates(a, b)
            during.update(reply_s=reply_s, generation=result["generation"], text_bytes=len(texts[n % 2]))
            after = window(d, args.window, idle)
            during["after_mpps"] = after["mpps"]
            out["loads"].append(during)
            ctx.say(f"  load {RULES_10K} rules x{workers}: reply {reply_s * 1e3:.0f} ms; {during['mpps']:.2f} Mpps "
                    f"during it (the window from before the request to after the reply), "
                    f"{after['mpps']:.2f} after (10 Ki rules), {out['before']['mpps']:.2f} before (1 rule)")
        names = d.client.call("names")
        if len(names["rules"]) != RULES_10K:
            raise RuntimeError(f"after load: {len(names['rules'])} rules, not {RULES_10K}")
        # One-rule changes on the 10 Ki rule policy: a rule's profile, its match unchanged.
        i = 1234
        commands = (f"rule change r{i} {rule_body(i, (i + 1) % 4)}", f"rule change r{i} {rule_body(i, i % 4)}")
        p = window(d, args.window, polls)
        out["polling"] = p
        lat = window(d, 0, lambda daemon, _s: latency(daemon, max(3, args.changes // 30), args.spacing / 1000,
                                                      commands=commands))
        out["rule_change"] = lat
        out["after"] = window(d, args.window, idle)
        out["load_at_end"] = os.getloadavg()[0]
        ctx.say(f"  rule change on {RULES_10K} rules x{workers}: latency (us) reply {fmt3(lat['reply_us'])}, "
                f"effect {fmt3(lat['effect_us'])}; stats workers rtt p50 {p['poll_rtt_us']['p50']:.0f} us")
    return out


def _scrape_for(port, seconds, clients, results):
    """In a process of its own (its own interpreter lock: the ping below is timed undisturbed): GET
    /metrics back to back from `clients` threads; each scrape's seconds and bytes put on `results`."""
    end = time.monotonic() + seconds

    def scraper():
        while time.monotonic() < end:
            t0 = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                body = r.read()
            results.put((time.perf_counter() - t0, len(body)))

    threads = [threading.Thread(target=scraper) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(None)


def scrapes(daemon, seconds, clients=1):
    """GET /metrics back to back from `clients` threads of another process (each scrape as soon as its
    previous one is in), and the control socket's `ping` round trip meanwhile (every 2 ms)."""
    results = multiprocessing.Queue()
    scraper = multiprocessing.Process(target=_scrape_for, args=(daemon.metrics_port, seconds, clients, results))
    scraper.start()
    pings = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        daemon.client.call("ping")
        pings.append((time.perf_counter() - t0) * 1e6)
        time.sleep(0.002)
    times, sizes = [], []
    while (item := results.get(timeout=60)) is not None:
        times.append(item[0])
        sizes.append(item[1])
    scraper.join()
    return {"scrapes": len(times), "scrapes_per_s": len(times) / seconds, "clients": clients,
            "scrape_ms": summary([t * 1e3 for t in times]), "bytes": max(sizes) if sizes else 0,
            "ping_us": summary(pings)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_scrapes(ctx, workers):
    args = ctx.args
    capture, packets = ctx.capture(4096)
    port = free_port()
    seconds = 300 + args.window * 12
    out = {"measurement": "scrapes", "workers": workers, "windows": []}
    with Daemon(ctx, "scrapes", AGGREGATE, capture, packets, 4096, workers, seconds,
                extra=["--metrics", f"127.0.0.1:{port}"]) as d:
        d.metrics_port = port
        time.sleep(args.warmup)
        out["load_at_start"] = os.getloadavg()[0]
        baseline = [window(d, args.window, idle)]
        for rules, clients in ((1, 1), (1, 16), (RULES_10K, 1)):
            if rules != 1:
                d.client.call("load", policy_10k())
                baseline.append(window(d, args.window, idle))
            w = window(d, args.window, scrapes, clients=clients)
            baseline.append(window(d, args.window, idle))
            beside(w, baseline[-2], baseline[-1])
            w["rules"] = rules
            out["windows"].append(w)
            ctx.say(f"  scrapes x{workers}, {rules} rules, {clients} clients: {w['scrapes_per_s']:.0f}/s of "
                    f"{w['bytes']} bytes, {w['scrape_ms']['p50']:.1f} ms p50; {w['mpps']:.2f} Mpps vs "
                    f"{w['baseline_mpps']:.2f} ({w['ratio']:.3f}; on a CPU {w['oncpu_ratio']:.3f}, worker "
                    f"{100 * w['worker_cpu_share']:.0f}% on its core); ping p50/p99/max {fmt3(w['ping_us'])} us")
        out["load_at_end"] = os.getloadavg()[0]
    return out


def fmt3(s):
    return f"{s['p50']:.0f}/{s['p99']:.0f}/{s['max']:.0f}"


# ----------------------------------------------------------------------------------------------------
# Report.

def report(results, machine, memory_line, loads):
    lines = ["## Sustained changes (`profile change`, alternating two rate sets; 64 B frames, 4 Ki flows)", "",
             "| rule | workers | changes asked | changes/s achieved | Mpps during | Mpps without (beside) | ratio | "
             "worker 0 on its core | ratio per second on a CPU | control thread CPU per change |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if r["measurement"] != "changes":
            continue
        for w in r["windows"]:
            asked = w["rate_asked"] if isinstance(w["rate_asked"], str) else f"{w['rate_asked']}/s"
            lines.append(f"| {r['policy']} | {r['workers']} | {asked} | {w['changes_per_s']:.0f} | {w['mpps']:.2f} | "
                         f"{w['baseline_mpps']:.2f} | {w['ratio']:.3f} | {100 * w['worker_cpu_share']:.0f}% | {w['oncpu_ratio']:.3f} | "
                         f"{w.get('main_cpu_us_per_change', 0):.0f} us |")
    lines += ["", "## Latency from command to effect (one change every "
              f"{next((r['latency']['spacing_ms'] for r in results if r['measurement'] == 'changes'), 0):g} ms)", "",
              "| rule | workers | changes | to reply p50 / p99 / max (us) | to every worker on it, at most: "
              "p50 / p99 / max (us) | of which after the reply p50 (us) | second polls | Mpps during / without | "
              "`stats workers` round trip p50 (us) | Mpps while polling back to back / without |",
              "|---|---:|---:|---|---|---:|---:|---|---:|---|"]
    for r in results:
        if r["measurement"] != "changes":
            continue
        lat, p = r["latency"], r["polling"]
        lines.append(f"| {r['policy']} | {r['workers']} | {lat['changes']} | {fmt3(lat['reply_us'])} | "
                     f"{fmt3(lat['effect_us'])} | {lat['reply_to_effect_us']['p50']:.0f} | "
                     f"{lat['polls_beyond_the_first']} | {lat['mpps']:.2f} / "
                     f"{lat['baseline_mpps']:.2f} | {p['poll_rtt_us']['p50']:.0f} | {p['mpps']:.2f} / {p['baseline_mpps']:.2f} |")
    lines += ["", "## A profile change on a rule holding 1 Mi live keys (per 5-tuple)", "",
              "| workers | live keys | fill (s) | changes | to reply p50 / p99 / max (us) | to effect p50 / p99 / max (us) "
              "| Mpps | one pass over the keys (s) | offered per key (L3 bytes/s) | green under the low profile: "
              "Mpps measured / predicted | green share before / low / back |",
              "|---:|---:|---:|---:|---|---|---:|---:|---:|---|---|"]
    for r in results:
        if r["measurement"] != "keys":
            continue
        lat, low = r["latency"], r["low"]
        lines.append(f"| {r['workers']} | {r['live_keys']} | {r['fill_s']:.1f} | {lat['changes']} | {fmt3(lat['reply_us'])} | "
                     f"{fmt3(lat['effect_us'])} | {r['before']['mpps']:.2f} | {r['pass_s']:.2f} | "
                     f"{low['offered_bytes_per_key']:.0f} | "
                     f"{low['green_pps'] / 1e6:.3f} / {low['predicted_green_pps'] / 1e6:.3f} ({low['green_vs_predicted']:.3f}) | "
                     f"{r['before']['green_share']:.3f} / {low['green_share']:.3f} / {r['back']['green_share']:.3f} |")
    lines += ["", f"## Loading {RULES_10K} rules over the socket while forwarding", "",
              "| workers | load | reply (ms) | Mpps during the load | Mpps before (1 rule) | Mpps after (10 Ki rules) |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if r["measurement"] != "load":
            continue
        for n, l in enumerate(r["loads"]):
            lines.append(f"| {r['workers']} | {n + 1}{' (reversed)' if n % 2 else ''} | {l['reply_s'] * 1e3:.0f} | "
                         f"{l['mpps']:.2f} | {r['before']['mpps']:.2f} | {l['after_mpps']:.2f} |")
    lines += ["", f"One-rule change (`rule change`, profile only) on the {RULES_10K}-rule policy:", "",
              "| workers | changes | to reply p50 / p99 / max (us) | to effect p50 / p99 / max (us) | "
              "`stats workers` round trip p50 (us) |", "|---:|---:|---|---|---:|"]
    for r in results:
        if r["measurement"] != "load":
            continue
        lat = r["rule_change"]
        lines.append(f"| {r['workers']} | {lat['changes']} | {fmt3(lat['reply_us'])} | {fmt3(lat['effect_us'])} | "
                     f"{r['polling']['poll_rtt_us']['p50']:.0f} |")
    lines += ["", "## Scraping /metrics while forwarding (`--metrics`; GET /metrics back to back)", "",
              "| workers | rules | clients | scrapes/s | bytes | scrape p50 / p99 / max (ms) | Mpps during | "
              "Mpps without (beside) | ratio | worker 0 on its core | ratio per second on a CPU | "
              "control socket ping p50 / p99 / max (us) |",
              "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if r["measurement"] != "scrapes":
            continue
        for w in r["windows"]:
            ms = w["scrape_ms"]
            lines.append(f"| {r['workers']} | {w['rules']} | {w['clients']} | {w['scrapes_per_s']:.0f} | {w['bytes']} | "
                         f"{ms['p50']:.1f} / {ms['p99']:.1f} / {ms['max']:.1f} | {w['mpps']:.2f} | {w['baseline_mpps']:.2f} | "
                         f"{w['ratio']:.3f} | {100 * w['worker_cpu_share']:.0f}% | {w['oncpu_ratio']:.3f} | {fmt3(w['ping_us'])} |")
    lines += ["", f"machine: {machine}", f"memory: {memory_line}",
              f"1-minute load average during the run: {min(loads):.2f} .. {max(loads):.2f}"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------

class Context:
    def __init__(self, args, memory):
        self.args = args
        self.bench = run_bench.Bench(args, memory)
        self.serial = 0

    def capture(self, flows):
        paths, packets = run_bench.capture_for(self.args.workdir, "64", flows)
        return paths, packets

    @staticmethod
    def say(text):
        print(text, flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.path.join(SOURCE_ROOT, "build")
    parser.add_argument("--build-dir", default=build)
    parser.add_argument("--tricolord", help="default: BUILD/control/tricolord")
    parser.add_argument("--workdir", help="captures, logs and results (default: BUILD/bench/control/work)")
    parser.add_argument("--workers", default="1,2", help="1, 2 or 1,2 (default 1,2)")
    parser.add_argument("--measurements", default="changes,keys,load,scrapes")
    parser.add_argument("--window", type=float, default=3.0, help="seconds per window (default 3)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds after forwarding starts (default 2)")
    parser.add_argument("--rates", default="0,10,100,1000", help="changes per second asked; 0: back to back")
    parser.add_argument("--changes", type=int, default=1000, help="changes timed for the latency (default 1000)")
    parser.add_argument("--spacing", type=float, default=10.0, help="ms between two timed changes (default 10)")
    parser.add_argument("--key-flows", type=int, default=1 << 20, help="flows (keys) of the keys measurement")
    parser.add_argument("--key-changes", type=int, default=100)
    parser.add_argument("--loads", type=int, default=3, help="loads of the 10 Ki rule policy (default 3)")
    parser.add_argument("--memory", choices=["auto", "huge", "no-huge"], default="auto")
    parser.add_argument("--smoke", action="store_true",
                        help="one worker, 0.3 s windows, changes back to back only, 10 timed changes, 64 Ki keys, "
                             "one load, --no-huge: every measurement runs (~1 minute)")
    args = parser.parse_args()
    if args.smoke:
        args.window, args.warmup, args.changes, args.spacing, args.workers = 0.3, 0.3, 10, 5.0, "1"
        args.rates, args.key_flows, args.key_changes, args.loads, args.memory = "0", 65536, 4, 1, "no-huge"
    args.tricolord = args.tricolord or os.path.join(args.build_dir, "control", "tricolord")
    args.workdir = args.workdir or os.path.join(args.build_dir, "bench", "control", "work")
    args.workers_list = [int(w) for w in args.workers.split(",")]
    args.rates = [float(r) or None for r in args.rates.split(",")]
    args.measurements_list = args.measurements.split(",")
    if any(w not in (1, 2) for w in args.workers_list):
        parser.error("--workers: 1 or 2 (this machine has 2 cores)")
    if any(m not in ("changes", "keys", "load", "scrapes") for m in args.measurements_list):
        parser.error("--measurements: of changes, keys, load, scrapes")
    if not os.access(args.tricolord, os.X_OK):
        parser.error(f"no tricolord at {args.tricolord} (ninja -C build control/tricolord)")
    return args


def missing_numbers(results, args):
    """What a measurement failed to produce (the smoke test's only check: no timing is asserted)."""
    missing = []
    kinds = {r["measurement"] for r in results}
    missing += [f"no {m} measurement" for m in args.measurements_list if m not in kinds]
    for r in results:
        name = f"{r['measurement']} x{r['workers']}"
        if r["measurement"] == "changes":
            missing += [f"{name}: a window forwarded nothing or sent no change" for w in r["windows"]
                        if not (w["mpps"] > 0 and w["changes"] > 0)]
            lat = r["latency"]
            if not (lat["reply_us"].get("n") == args.changes and lat["effect_us"]["p50"] > 0):
                missing.append(f"{name}: latency")
        elif r["measurement"] == "keys":
            if not (r["live_keys"] > 0 and r["low"]["green_pps"] > 0 and r["latency"]["effect_us"].get("n")):
                missing.append(f"{name}: no live keys, no green under the low profile or no latency")
        elif r["measurement"] == "scrapes":
            missing += [f"{name}: a window forwarded nothing or scraped nothing" for w in r["windows"]
                        if not (w["mpps"] > 0 and w["scrapes"] > 0 and w["bytes"] > 0)]
        elif r["measurement"] == "load":
            if not (r["loads"] and all(l["reply_s"] > 0 and l["mpps"] > 0 for l in r["loads"])
                    and r["rule_change"]["reply_us"].get("n")):
                missing.append(f"{name}: load or rule change")
    return missing


def main():
    args = parse_args()
    if os.geteuid() != 0:
        sys.exit("run_control_bench: DPDK's EAL needs root here (memory, /var/run/dpdk)")
    os.makedirs(args.workdir, exist_ok=True)
    os.sched_setaffinity(0, {0})  # the client beside the control side, not on worker 0's core
    flows = args.key_flows if "keys" in args.measurements_list else 4096
    packets = max(flows, make_capture.DEFAULT_MIN_PACKETS)
    need_mb = memory_mb_for(packets * max(args.workers_list), flows, workers=max(args.workers_list))
    started = time.monotonic()
    results, loads = [], [os.getloadavg()[0]]
    with Memory(args.memory, need_mb) as memory:
        ctx = Context(args, memory)
        machine = run_bench.machine_line()
        print(f"control benchmark: {machine}\nmemory: {memory.describe()}\nload average {loads[0]:.2f} at start",
              flush=True)
        for workers in args.workers_list:
            if "changes" in args.measurements_list:
                results.append(measure_changes(ctx, workers, "aggregate", AGGREGATE))
                results.append(measure_changes(ctx, workers, "per-5-tuple", PER_5_TUPLE))
            if "keys" in args.measurements_list:
                results.append(measure_keys(ctx, workers))
            if "load" in args.measurements_list:
                results.append(measure_load(ctx, workers))
            if "scrapes" in args.measurements_list:
                results.append(measure_scrapes(ctx, workers))
            loads.append(os.getloadavg()[0])
        for r in results:
            loads += [r["load_at_start"], r["load_at_end"]]
        memory_line = memory.describe()
    text = report(results, machine, memory_line, loads)
    print("\n" + text + f"\n{time.monotonic() - started:.0f} s in all")
    with open(os.path.join(args.workdir, "results.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.workdir, "results.json"), "w") as f:
        json.dump({"machine": machine, "memory": memory_line, "args": sys.argv[1:], "loads": loads,
                   "results": results}, f, indent=1)
    missing = missing_numbers(results, args)
    if missing:
        sys.exit("run_control_bench: " + "; ".join(missing))


if __name__ == "__main__":
    main()
