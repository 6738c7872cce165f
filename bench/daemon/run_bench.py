#!/usr/bin/env python3
"""The daemon benchmark (issue 9, section 4): one tricolord worker beside dpdk-testpmd's io forwarding
(the I/O ceiling) and DPDK's qos_meter sample, on the same ports and the same captures.

Ports: net_pcap with infinite_rx=1 (port 0: replays a capture from memory, as fast as it is polled)
and net_null with no-rx=1 (port 1: frees what it is sent). Every program forwards port 0 -> port 1 on
one worker lcore (core 1), its main lcore on core 0, no PCI, its own --file-prefix. Each case runs
every program in turn, rotating the order from round to round and reversing it every other round, so
that the machine's noise falls on all of them alike and each pair of programs runs in both orders
(with the order only rotated, a baseline-tricolord-... ran after its tricolord-... in every round; on
the 2-core guest the second of the two was the faster at 64 B, whichever binary it was).

Rates come from each program's own counters, printed once a second: the packets port 0 received
between a snapshot taken `--warmup` seconds after forwarding started and one `--measure` seconds later,
divided by the time between the two snapshots as the program measured it (tricolord's and qos_meter's
elapsed_s; testpmd's, rebuilt from its per-interval Rx-pps). Received = processed: infinite_rx hands
a packet to whoever polls, so each program runs as fast as it can. Beside it, the share of the
interval the worker thread spent on a CPU (/proc/PID/task/TID/schedstat, read as each snapshot
arrives), and the rate divided by it: on a machine where other work shares core 1, that rate is
what time-slicing does not change. And each run's slowest and fastest second within its measured
interval: the packets are the same every second, so a rate that moves within one process was moved
from outside it (on a lent 16-core VM, per-5-tuple processes moved up to 1.8x within themselves,
testpmd's up to 1.6x, the engine benchmark alone 2x: the host, not the program's layout or its DPDK;
doc/benchmarks.md).

Memory: infinite_rx preloads the whole capture into the mbuf pool (about 2.3 GiB at 1 Mi IMIX packets).
With `--memory auto` (the default) the script reserves the huge pages this takes
(/proc/sys/vm/nr_hugepages, hugetlbfs at /dev/hugepages, mounted if needed) and gives them back at the
end; when it cannot, every program runs with --no-huge -m MB. It says which.

Usage (from the source root, after `ninja -C build`):
  bench/daemon/run_bench.py                     # the full tables, about 12 minutes
  bench/daemon/run_bench.py --smoke             # the smallest case, briefly (meson test bench-daemon-smoke)
Each case's capture holds its flows or 65 536 packets, whichever is more (--capture-packets another
length: net_pcap's replay streams the whole capture, so its length moves every program's rate).
Captures, logs (each program's full output) and results.md / results.json go to the work folder.
"""
import argparse
import dataclasses
import json
import os
import platform
import queue
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import make_capture  # noqa: E402  (the modules beside this script)
from counters import QosMeterParser, Snapshot, TestpmdParser, TricolordParser  # noqa: E402
from memory import HUGE_DIR, Memory, mbufs_for, memory_mb_for  # noqa: E402

# The cases of issue 9 section 4.
FRAMES = ["64", "imix"]
FLOWS = [1, 4096, 65536, 1048576]
PROGRAMS = ["testpmd", "qos_meter", "tricolord-aggregate", "tricolord-5tuple", "tricolord-5tuple-steered"]
# Not run unless named in --programs: the same rules shaping instead of dropping (issue 27), each beside
# its policing form (shaped-*.policy).
# And flows per key: one key (the benchmark's /16 of destinations) and the flows counted under it, beside
# the same key without max-flows. And the aggregate rule against a flood (far below the offered rate:
# nearly every burst dropped whole).
SHAPED = {"tricolord-aggregate-shaped": "shaped-aggregate.policy", "tricolord-5tuple-shaped": "shaped-per-5-tuple.policy",
          "tricolord-per-dst": "per-dst.policy", "tricolord-per-dst-flows": "flows-per-dst.policy",
          "tricolord-flood": "flood.policy"}

# --baseline-tricolord's runs: the same programs under this prefix.
BASELINE = "baseline-"
# With one worker there is nothing to steer: the same as tricolord-5tuple.
ONE_WORKER_SKIPS = {"tricolord-5tuple-steered"}
STARTUP_LIMIT_S = 120        # EAL, pool, preloading 1 Mi packets: a few seconds; this is a hang
STOP_LIMIT_S = 15            # after SIGINT, before the outer timeout kills


@dataclasses.dataclass
class Run:
    program: str
    frames: str
    flows: int
    round: int
    workers: int = 1             # forwarding lcores (testpmd's --nb-cores, tricolord's workers)
    ok: bool = False
    mpps: float = 0.0            # received (processed) per second, millions
    forwarded_mpps: float = 0.0  # sent on port 1
    seconds: float = 0.0         # the measured interval, program clock
    cpu_share: float = 0.0       # of the interval, the share the worker thread was on a CPU
    oncpu_mpps: float = 0.0      # mpps / cpu_share: the rate per second of the worker on its core
    slowest_second_mpps: float = 0.0  # the measured interval's slowest and fastest second (between two
    fastest_second_mpps: float = 0.0  # of the program's counter lines): how much the rate moved within it
    rx_nombuf: int = 0
    fallback: int = 0            # tricolord: packets metered by the fallback in the measured interval
    error: str = ""
    log: str = ""
    load: tuple = ()


# ----------------------------------------------------------------------------------------------------
# Running one program on one capture.

class Bench:
    def __init__(self, args, memory):
        self.args = args
        self.memory = memory
        self.serial = 0

    def command(self, program, capture, packets, flows, prefix, workers, policy=None, extra=(), own_limit=None):
        """The program's command line, its counters' parser and the seconds after which it stops by itself.
        tricolord: `policy` replaces the program's policy file, `extra` is added to its options and
        `own_limit` replaces its duration (the control benchmark, bench/control/run_control_bench.py)."""
        args = self.args
        # One worker: main lcore on core 0, the worker on core 1. Two: the second worker beside the main
        # lcore on core 0 (it sleeps between its turns), each worker with an RX queue of its own (the
        # capture preloaded once per queue) and a TX queue of its own.
        lcores = ["-l", "0,1"] if workers == 1 else ["--lcores", "0@0,1@1,2@0"]
        # tricolord-5tuple-steered: each queue holds its share of the flows (the capture split by flow, as a
        # NIC steering by RSS would deliver it), and the daemon takes the queues as steered: no handoff.
        binary = args.baseline_tricolord if program.startswith(BASELINE) else args.tricolord
        program = program.removeprefix(BASELINE)
        steered = program == "tricolord-5tuple-steered"
        rx = ",".join([f"rx_pcap={part}" for part in capture] if steered else [f"rx_pcap={capture[0]}"] * workers)
        eal = [*lcores, "--main-lcore", "0", "--no-pci", "--file-prefix", prefix,
               "--vdev", f"net_pcap0,{rx},infinite_rx=1", "--vdev", "net_null0,no-rx=1"]
        eal += self.memory.eal_args(packets * workers, flows, workers)
        mbufs = mbufs_for(packets * workers, workers)
        own_limit = own_limit or int(STARTUP_LIMIT_S + args.warmup + args.measure + 10)   # the program's own end
        if program == "testpmd":
            return [args.testpmd, *eal, "--", "--forward-mode=io", "--auto-start", "--stats-period", "1",
                    f"--total-num-mbufs={mbufs}", f"--nb-cores={workers}", f"--rxq={workers}", f"--txq={workers}"], \
                TestpmdParser(), own_limit
        if program == "qos_meter":
            return [args.qos_meter, *eal, "--", "-p", "3", "-n", str(mbufs), "-T", str(own_limit)], \
                QosMeterParser(), own_limit
        policy = policy or os.path.join(HERE, SHAPED.get(program) or
                                        ("aggregate.policy" if program == "tricolord-aggregate" else "per-5-tuple.policy"))
        return [binary, *eal, "--", "--policy", policy, "--json", "--stats-interval", "1",
                "--duration", str(own_limit), "--mbufs", str(mbufs), *(["--placement=steered"] if steered else []),
                *extra], \
            TricolordParser(), own_limit

    def run(self, program, frames, flows, capture, packets, round_, workers=1):
        self.serial += 1
        prefix = f"tricolor-bench-{os.getpid()}-{self.serial}"
        log_path = os.path.join(self.args.workdir, "logs", f"{frames}-{flows}-w{workers}-{program}-r{round_}.log")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        argv, parser, own_limit = self.command(program, capture, packets, flows, prefix, workers)
        result = Run(program, frames, flows, round_, workers, log=log_path, load=os.getloadavg())
        # The outer timeout ends the program whatever happens to this script; SIGINT first (testpmd,
        # qos_meter and tricolord all stop cleanly on it), SIGKILL STOP_LIMIT_S later.
        hard_limit = own_limit + STOP_LIMIT_S
        full = ["timeout", "--signal=INT", f"--kill-after={STOP_LIMIT_S}", str(hard_limit), *argv]
        with open(log_path, "w") as log:
            log.write(" ".join(full) + "\n")
            log.flush()
            proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    errors="replace", bufsize=1, start_new_session=True)
            lines = queue.Queue()
            reader = threading.Thread(target=_pump, args=(proc.stdout, log, lines), daemon=True)
            reader.start()
            try:
                result = self._measure(proc, parser, lines, result)
            finally:
                self._stop(proc, reader)
        final = getattr(parser, "final", None)
        if isinstance(final, Snapshot):
            result.rx_nombuf = max(result.rx_nombuf, final.rx_nombuf)
        elif isinstance(final, dict):
            result.rx_nombuf = max(result.rx_nombuf, sum(int(p.get("rx_nombuf", 0)) for p in final["ports"]))
        if result.ok and proc.returncode not in (0, 124):  # 124: timeout's status when it sent the signal
            result.ok, result.error = False, f"exit status {proc.returncode}"
        if result.ok and result.rx_nombuf:
            result.error = f"rx_nombuf {result.rx_nombuf}: the pool ran dry (rates are still the program's)"
        if result.ok and result.fallback:
            result.error = (f"{result.fallback} packets of the measured interval found no room for their key "
                            f"and took the rule's fallback")
        _remove_runtime_files(prefix)
        return result

    def _measure(self, proc, parser, lines, result):
        args = self.args
        snaps, start, first, first_at, worker = [], None, None, 0, None
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                if time.monotonic() < deadline:
                    continue
                result.error = f"{result.program} printed no counters for too long (a hang?)"
                return result
            if line is EOF:
                result.error = f"{result.program} ended before the measurement was complete"
                return result
            snap = parser.feed(line)
            if snap is None:
                continue
            worker = worker or _worker_thread(proc.pid)
            snap.wall = time.monotonic()
            snap.cpu_ns = _cpu_ns(worker)
            snaps.append(snap)
            deadline = time.monotonic() + 10  # counters come once a second from now on
            result.rx_nombuf = max(result.rx_nombuf, snap.rx_nombuf)
            if start is None and snap.rx > 0:
                start = snap  # forwarding has begun: the warm-up runs from here
            if start is not None and first is None and snap.t >= start.t + args.warmup - 0.05:
                first, first_at = snap, len(snaps) - 1
            if first is not None and snap.t >= first.t + args.measure - 0.05:
                seconds = snap.t - first.t
                result.ok = True
                result.seconds = seconds
                result.mpps = (snap.rx - first.rx) / seconds / 1e6
                result.forwarded_mpps = (snap.tx - first.tx) / seconds / 1e6
                result.fallback = snap.fallback - first.fallback
                measured = snaps[first_at:]
                seconds_mpps = [(b.rx - a.rx) / (b.t - a.t) / 1e6 for a, b in zip(measured, measured[1:]) if b.t > a.t]
                if seconds_mpps:
                    result.slowest_second_mpps, result.fastest_second_mpps = min(seconds_mpps), max(seconds_mpps)
                if worker and first.cpu_ns and snap.wall > first.wall:
                    result.cpu_share = (snap.cpu_ns - first.cpu_ns) / 1e9 / (snap.wall - first.wall)
                    result.oncpu_mpps = result.mpps / result.cpu_share if result.cpu_share > 0 else 0.0
                if snap.tx == first.tx:
                    result.ok, result.error = False, f"{result.program} forwarded no packet"
                return result

    @staticmethod
    def _stop(proc, reader):
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)  # the timeout process we started; it passes SIGINT on
        try:
            proc.wait(timeout=STOP_LIMIT_S + 5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)


EOF = object()  # what _pump queues when the program's output ends


def _worker_thread(timeout_pid):
    """The program's worker lcore thread (DPDK names it rte-worker-1 or lcore-worker-1; it is the
    one thread allowed only on core 1), as /proc/PID/task/TID; the program is timeout's child."""
    try:
        with open(f"/proc/{timeout_pid}/task/{timeout_pid}/children") as f:
            children = f.read().split()
    except OSError:
        return None
    for pid in children:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            task = f"/proc/{pid}/task/{tid}"
            try:
                with open(task + "/comm") as f:
                    name = f.read().strip()
                with open(task + "/status") as f:
                    allowed = next((l.split(":", 1)[1].strip() for l in f if l.startswith("Cpus_allowed_list")), "")
            except OSError:
                continue
            if name.endswith("worker-1") or allowed == "1":
                return task
    return None


def _cpu_ns(task):
    """The thread's time on a CPU, ns: the first field of schedstat (then time waiting, timeslices)."""
    if task is None:
        return 0
    try:
        with open(task + "/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _pump(stream, log, lines):
    for line in stream:
        log.write(line)
        lines.put(line)
    log.flush()
    lines.put(EOF)


def _remove_runtime_files(prefix):
    """What a DPDK process leaves when it is killed: its runtime folder and, with huge pages, its
    page files. Only this run's prefix."""
    runtime = os.path.join("/var/run/dpdk", prefix)
    if os.path.isdir(runtime):
        for name in os.listdir(runtime):
            try:
                os.remove(os.path.join(runtime, name))
            except OSError:
                pass
        try:
            os.rmdir(runtime)
        except OSError:
            pass
    if os.path.isdir(HUGE_DIR):
        for name in os.listdir(HUGE_DIR):
            if name.startswith(prefix + "map_"):
                try:
                    os.remove(os.path.join(HUGE_DIR, name))
                except OSError:
                    pass


# ----------------------------------------------------------------------------------------------------
# Captures, cached in the work folder.

def capture_packets(flows, wanted=None):
    """Packets in a case's capture: `wanted` (--capture-packets) but never fewer than the flows, else the
    flows or make_capture's minimum, whichever is more."""
    return max(flows, wanted) if wanted else max(flows, make_capture.DEFAULT_MIN_PACKETS)


def capture_for(workdir, frames, flows, parts=1, wanted=None):
    """The capture, or its `parts` shares split by flow, as a list of paths."""
    packets = capture_packets(flows, wanted)
    generator = os.path.join(HERE, "make_capture.py")
    paths = []
    # The default length keeps its old names; another has its length in its name.
    length = "" if packets == capture_packets(flows) else f"-{packets}p"
    for part in range(parts):
        name = f"{frames}-{flows}{length}.pcap" if parts == 1 else f"{frames}-{flows}{length}-part{part}of{parts}.pcap"
        path = os.path.join(workdir, "captures", name)
        if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(generator):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            print(f"  writing {path}", flush=True)
            make_capture.write_capture(path + ".tmp", flows, frames, packets, part, parts)
            os.replace(path + ".tmp", path)
        paths.append(path)
    return paths, packets


# ----------------------------------------------------------------------------------------------------
# Report.

def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def table(runs, programs, frames_list, flows_list, metric="mpps", workers_list=(1,)):
    heads = {"testpmd": "testpmd io", "qos_meter": "qos_meter (256 meters)",
             "tricolord-aggregate": "tricolord aggregate", "tricolord-5tuple": "tricolord per-5-tuple",
             "tricolord-5tuple-steered": "tricolord per-5-tuple, queues steered",
             "tricolord-aggregate-shaped": "tricolord aggregate shaping", "tricolord-5tuple-shaped": "tricolord per-5-tuple shaping",
             "tricolord-per-dst": "tricolord per dst/16", "tricolord-per-dst-flows": "tricolord per dst/16 max-flows",
             "tricolord-flood": "tricolord aggregate, flood"}
    heads.update({BASELINE + p: "baseline " + h for p, h in heads.items()})
    many = len(workers_list) > 1 or workers_list[0] != 1
    out = ["| frames | flows | " + ("workers | " if many else "") + " | ".join(heads[p] + " Mpps" for p in programs) + " |",
           "|---|---:|" + ("---:|" if many else "") + "---:|" * len(programs)]
    for frames in frames_list:
        for flows in flows_list:
          for workers in workers_list:
            cells = []
            ceiling = None
            for program in programs:
                ok = [getattr(r, metric) for r in runs
                      if r.ok and getattr(r, metric)
                      and (r.program, r.frames, r.flows, r.workers) == (program, frames, flows, workers)]
                if not ok:
                    skipped = workers == 1 and program.removeprefix(BASELINE) in ONE_WORKER_SKIPS or workers > 1 and program == "qos_meter"
                    cells.append("—" if skipped else "failed")
                    continue
                value = max(ok)  # interference only ever slows a run down: the best round is the least disturbed
                if program == "testpmd":
                    ceiling = value
                    cells.append(f"{value:.2f}")
                elif ceiling:
                    cells.append(f"{value:.2f} ({value / ceiling:.2f})")
                else:
                    cells.append(f"{value:.2f}")
            label = "64 B" if frames == "64" else "IMIX"
            out.append(f"| {label} | {_flows_label(flows)} | " + (f"{workers} | " if many else "") + " | ".join(cells) + " |")
    return "\n".join(out)


def spread_lines(runs, programs, frames_list, flows_list, workers_list=(1,)):
    """Per program and case: every round's rate, and forwarded / received (what the policy let pass)."""
    out = []
    for frames in frames_list:
        for flows in flows_list:
          for workers in workers_list:
            parts = []
            for program in programs:
                mine = [r for r in runs if (r.program, r.frames, r.flows, r.workers) == (program, frames, flows, workers)]
                rates = "/".join(f"{r.mpps:.2f}@{100 * r.cpu_share:.0f}%" if r.ok else "x" for r in mine)
                passed = [r.forwarded_mpps / r.mpps for r in mine if r.ok and r.mpps]
                share = f", {100 * median(passed):.0f}% forwarded" if passed else ""
                parts.append(f"{program} {rates}{share}")
            out.append(f"  {frames:>4} {_flows_label(flows):>5} x{workers}: " + "; ".join(parts))
    return out


def within_line(runs, programs):
    parts = []
    for program in programs:
        moved = [r.fastest_second_mpps / r.slowest_second_mpps for r in runs
                 if r.program == program and r.ok and r.slowest_second_mpps > 0]
        if moved:
            parts.append(f"{program} {max(moved):.2f}x")
    return "  " + "; ".join(parts)


def _flows_label(flows):
    for unit, size in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if flows >= size and flows % size == 0:
            return f"{flows // size} {unit}"
    return str(flows)


def machine_line():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    dpdk = subprocess.run(["pkg-config", "--modversion", "libdpdk"], capture_output=True, text=True).stdout.strip()
    return f"{model}, {os.cpu_count()} cores, Linux {platform.release()}, DPDK {dpdk}"


# ----------------------------------------------------------------------------------------------------

def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.path.join(SOURCE_ROOT, "build")
    parser.add_argument("--build-dir", default=build, help="where tricolord and qos_meter were built (default: %(default)s)")
    parser.add_argument("--tricolord", help="default: BUILD/control/tricolord")
    parser.add_argument("--baseline-tricolord", metavar="PATH",
                        help="another tricolord (the code before a change): each tricolord case runs it too, as "
                             "baseline-tricolord-..., in the same rounds, so before and after share testpmd's figures")
    parser.add_argument("--qos-meter", help="default: BUILD/bench/daemon/qos_meter/qos_meter")
    parser.add_argument("--testpmd", default="/usr/bin/dpdk-testpmd")
    parser.add_argument("--workdir", help="captures, logs and results (default: BUILD/bench/daemon/work)")
    parser.add_argument("--frames", default=",".join(FRAMES), help="64,imix")
    parser.add_argument("--flows", default=",".join(map(str, FLOWS)))
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--capture-packets", type=int, metavar="N",
                        help=f"packets in each capture, at least its flows (default: the flows or "
                             f"{make_capture.DEFAULT_MIN_PACKETS}, whichever is more). net_pcap replays the "
                             f"capture from memory, so every program streams it: a shorter one streams less "
                             f"(doc/benchmarks.md: testpmd io's rate depends on it)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds after forwarding starts (default 2)")
    parser.add_argument("--measure", type=float, default=4.0, help="seconds between the snapshots (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each program per case (default 3)")
    parser.add_argument("--workers", default="1",
                        help="forwarding lcores, e.g. 1,2: each case runs with each (qos_meter: 1 only; default 1)")
    parser.add_argument("--memory", choices=["auto", "huge", "no-huge"], default="auto")
    parser.add_argument("--smoke", action="store_true",
                        help="64-byte frames, 64 flows in 4096 packets, one and two workers, one round, 1 s warm-up, "
                             "2 s measured, --no-huge")
    args = parser.parse_args()
    if args.smoke:
        args.frames, args.flows, args.rounds, args.warmup, args.measure = "64", "64", 1, 1.0, 2.0
        args.workers = "1,2"
        args.memory = "no-huge"
        args.capture_packets = args.capture_packets or 4096  # a capture of another length than the default's
    args.tricolord = args.tricolord or os.path.join(args.build_dir, "control", "tricolord")
    args.qos_meter = args.qos_meter or os.path.join(args.build_dir, "bench", "daemon", "qos_meter", "qos_meter")
    args.workdir = args.workdir or os.path.join(args.build_dir, "bench", "daemon", "work")
    args.frames_list = args.frames.split(",")
    args.flows_list = [int(f) for f in args.flows.split(",")]
    args.programs_list = args.programs.split(",")
    if args.baseline_tricolord:
        args.programs_list += [BASELINE + p for p in args.programs_list if p.startswith("tricolord-")]
    args.workers_list = [int(w) for w in args.workers.split(",")]
    if any(w not in (1, 2) for w in args.workers_list):
        parser.error("--workers: 1 or 2 (this machine has 2 cores)")
    if args.capture_packets is not None and args.capture_packets < 1:
        parser.error(f"--capture-packets: {args.capture_packets} is not a number of packets (1 or more)")
    for frames in args.frames_list:
        if frames not in FRAMES:
            parser.error(f"--frames: {frames!r} is not one of {FRAMES}")
    for program in args.programs_list:
        if program.removeprefix(BASELINE) not in PROGRAMS + list(SHAPED):
            parser.error(f"--programs: {program!r} is not one of {PROGRAMS + list(SHAPED)}")
    binaries = {"testpmd": args.testpmd, "qos_meter": args.qos_meter,
                "tricolord-aggregate": args.tricolord, "tricolord-5tuple": args.tricolord,
                "tricolord-5tuple-steered": args.tricolord}
    binaries.update({p: args.tricolord for p in SHAPED})
    binaries.update({BASELINE + p: args.baseline_tricolord for p in PROGRAMS + list(SHAPED) if p.startswith("tricolord-")})
    for program in args.programs_list:
        if not os.access(binaries[program], os.X_OK):
            parser.error(f"{program}: no program at {binaries[program]} (build it, or --programs without it)")
    return args


def main():
    args = parse_args()
    if os.geteuid() != 0:
        sys.exit("run_bench: DPDK's EAL needs root here (memory, /var/run/dpdk)")
    os.makedirs(args.workdir, exist_ok=True)
    largest = max(args.flows_list)
    need_mb = memory_mb_for(capture_packets(largest, args.capture_packets) * max(args.workers_list), largest,
                            workers=max(args.workers_list))
    started = time.monotonic()
    runs = []
    with Memory(args.memory, need_mb) as memory:
        print(f"daemon benchmark: {machine_line()}")
        print(f"memory: {memory.describe()}")
        print(f"lcores: main on core 0, forwarding on core 1; warm-up {args.warmup:g} s, measured "
              f"{args.measure:g} s, {args.rounds} round(s); load average {os.getloadavg()[0]:.2f} at start", flush=True)
        if args.capture_packets:
            print(f"captures: {args.capture_packets} packets each, or the case's flows where they are more "
                  f"(--capture-packets; the default is {make_capture.DEFAULT_MIN_PACKETS})", flush=True)
        bench = Bench(args, memory)
        for frames in args.frames_list:
            for flows in args.flows_list:
                whole, packets = capture_for(args.workdir, frames, flows, wanted=args.capture_packets)
                split = (capture_for(args.workdir, frames, flows, max(args.workers_list), args.capture_packets)[0]
                         if "tricolord-5tuple-steered" in args.programs_list and max(args.workers_list) > 1 else [])
                for round_ in range(args.rounds):
                  for workers in args.workers_list:
                    programs = [p for p in args.programs_list
                                if not (workers == 1 and p.removeprefix(BASELINE) in ONE_WORKER_SKIPS
                                        or workers > 1 and p == "qos_meter")]
                    shift = round_ % len(programs)
                    order = programs[shift:] + programs[:shift]
                    for program in (order if round_ % 2 == 0 else order[::-1]):
                        capture = split if program.removeprefix(BASELINE) == "tricolord-5tuple-steered" else whole
                        run = bench.run(program, frames, flows, capture, packets, round_, workers)
                        runs.append(run)
                        status = (f"{run.mpps:6.2f} Mpps received, {run.forwarded_mpps:6.2f} forwarded over "
                                  f"{run.seconds:.2f} s (its seconds {run.slowest_second_mpps:.2f}–"
                                  f"{run.fastest_second_mpps:.2f}), worker on its core {100 * run.cpu_share:3.0f}% of it"
                                  if run.ok else f"FAILED: {run.error} (log {run.log})")
                        note = f" [{run.error}]" if run.ok and run.error else ""
                        print(f"  {frames:>4} {_flows_label(flows):>5} x{workers} round {round_ + 1} {program:<20} {status}{note}"
                              f"  (load {run.load[0]:.2f})", flush=True)
        memory_line = memory.describe()
    loads = [r.load[0] for r in runs]
    print()
    report = [
        table(runs, args.programs_list, args.frames_list, args.flows_list, workers_list=args.workers_list),
        "",
        "Each cell: the best of the rounds of the packets per second (millions) the program's worker "
        "received (= processed), from its own counters; in parentheses, the ratio to testpmd io's best "
        "on the same capture.",
        "",
        "The same per second of the worker's time on a CPU (rate / the share of the interval its thread "
        "ran, from /proc/PID/task/TID/schedstat): what time-slicing with other processes on core 1 does "
        "not change (their cache traffic still does):",
        "",
        table(runs, args.programs_list, args.frames_list, args.flows_list, metric="oncpu_mpps",
              workers_list=args.workers_list),
        "",
        "Every round's rate @ the worker's share of its core, and the share forwarded (the rest dropped "
        "by the policy):",
        *spread_lines(runs, args.programs_list, args.frames_list, args.flows_list, args.workers_list),
        "",
        "Within one round, second to second (the most a program's fastest second outran its slowest, over "
        "its rounds). Every second of a run offers the same packets, so a program whose seconds move much "
        "more than testpmd io's was moved by something beside its packets: the host (on a VM, often "
        "another tenant on the same physical core), or work of its own (tricolord's sweep of idle keys):",
        within_line(runs, args.programs_list),
    ]
    print("\n".join(report))
    print(f"memory: {memory_line}")
    print(f"1-minute load average during the runs: {min(loads):.2f} .. {max(loads):.2f}; "
          f"{time.monotonic() - started:.0f} s in all")
    with open(os.path.join(args.workdir, "results.md"), "w") as f:
        f.write("\n".join(report) + f"\n\nmemory: {memory_line}\n")
    with open(os.path.join(args.workdir, "results.json"), "w") as f:
        json.dump({"machine": machine_line(), "memory": memory_line, "args": sys.argv[1:],
                   "runs": [dataclasses.asdict(r) for r in runs]}, f, indent=1)
    failed = [r for r in runs if not r.ok]
    if failed:
        for r in failed:
            print(f"run_bench: {r.program} on {r.frames}/{r.flows}: {r.error} (log {r.log})", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
