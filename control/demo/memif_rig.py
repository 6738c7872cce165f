"""tricolord between two dpdk-testpmd processes over memif: the rig behind `./dev run` and the daemon's
generator test (tests/control/daemon/generator_test.py).

    generator: dpdk-testpmd txonly|flowgen --memif gen.sock-->  tricolord port 0
                                                                tricolord port 1 --memif back.sock-->
    receiver:  dpdk-testpmd rxonly  <--------------------------------------------------------------'

Why two testpmd processes: testpmd runs one forwarding mode for all its ports, and txonly never polls
RX; a second testpmd in rxonly mode counts what tricolord sends back. Both testpmds' lcores sit on the
first CPU, tricolord's main lcore too (it sleeps between its 10 ms turns), and tricolord's worker has
the second CPU to itself.

tricolord is the memif server of both links (it owns the sockets, in a private temporary directory)
and starts first; the testpmds are clients. Every process has its own --file-prefix, dies with this
script (PR_SET_PDEATHSIG), and has a deadline of its own besides: tricolord's --duration, testpmd's
end of input (its command line quits when standard input closes).

Counting exactly. A memif port's counters restart at zero when its peer disconnects, so every count
is read while all three processes still run, in this order (stop_traffic):
  1. the generator's `stop` (its forwarding lcore has returned: nothing more is sent), then its TX
     count G from `show port stats 0`;
  2. tricolord's JSON stats lines until one in which port 0 has received G packets, the worker has
     processed every packet received, and port 1 has sent or dropped every packet forwarded: the
     counters are then final (they only grow, and nothing is left to arrive);
  3. the receiver's `show port stats 0` until it has received what tricolord's port 1 sent;
  4. SIGTERM to tricolord, whose final JSON line then holds the same counters;
  5. `quit` to both testpmds.
"""
from __future__ import annotations

import ctypes
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

TESTPMD = "/usr/bin/dpdk-testpmd"
FRAME_BYTES = 64  # the generator's frames (testpmd --txpkts)

# Huge pages for all three processes, or for none: tricolord's mbufs and tables and two testpmd pools
# of 16 Ki mbufs fit well within this.
HUGE_MB_NEEDED = 512
TESTPMD_MBUFS = 16384
TESTPMD_NO_HUGE_MB = 256   # -m without huge pages: the pool (36 MB) and memif's rings
TRICOLORD_NO_HUGE_MB = 1024  # -m without huge pages: the demo policy is small; unused memory costs nothing
RECEIVER_RING_LOG2 = 14    # the receiver shares its CPU with the generator: a deep ring rides out its pauses


@dataclass(frozen=True)
class Generator:
    name: str
    testpmd_args: tuple[str, ...]
    policy: str  # file name in control/demo
    traffic: str  # what the frames look like, for people


GENERATORS = {
    "txonly": Generator(
        "txonly",
        ("--forward-mode=txonly", "--txonly-multi-flow", "--tx-ip=10.0.0.1,10.0.0.2"),
        "daemon.policy",
        "testpmd txonly --txonly-multi-flow: 64-byte UDP frames (port 9 to 9) from 256 sources 10.0.0-255.3 "
        "to 10.0.0.2, in turn"),
    "flowgen": Generator(
        "flowgen",
        ("--forward-mode=flowgen", "--flowgen-flows=1024"),
        "daemon-flowgen.policy",
        "testpmd flowgen: 60-byte UDP frames (port 1000 to 1001; testpmd counts 4 more for the FCS) from "
        "10.254.0.0 to 1024 destinations 10.253.0.0-10.253.3.255, in turn"),
}


class RigError(RuntimeError):
    """A process did not start, did not answer, or exited too early; the message says which and why."""


# ---- the machine -------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoryPlan:
    huge: bool
    reason: str

    def testpmd_eal(self) -> list[str]:
        return [] if self.huge else ["--no-huge", "-m", str(TESTPMD_NO_HUGE_MB)]

    def tricolord_eal(self) -> list[str]:
        return [] if self.huge else ["--no-huge", "-m", str(TRICOLORD_NO_HUGE_MB)]


def memory_plan(no_huge: bool = False) -> MemoryPlan:
    """Huge pages when enough are free and hugetlbfs is mounted (the same answer for all three processes,
    so that the first one started cannot take what the others were counting on); --no-huge otherwise,
    or when asked."""
    if no_huge:
        return MemoryPlan(False, "without huge pages (--no-huge, as asked): for all three processes")
    free_pages, page_kb = 0, 0
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("HugePages_Free:"):
                free_pages = int(line.split()[1])
            elif line.startswith("Hugepagesize:"):
                page_kb = int(line.split()[1])
    with open("/proc/mounts") as mounts:
        mounted = any(line.split()[2:3] == ["hugetlbfs"] for line in mounts)
    free_mb = free_pages * page_kb // 1024
    if mounted and free_mb >= HUGE_MB_NEEDED:
        return MemoryPlan(True, f"huge pages ({free_mb} MB free)")
    why = "no hugetlbfs mounted" if not mounted else f"{free_mb} MB of huge pages free, {HUGE_MB_NEEDED} MB wanted"
    return MemoryPlan(False, f"without huge pages ({why}): --no-huge for all three processes; "
                             f"reserve some for speed: echo 1024 > /proc/sys/vm/nr_hugepages")


def two_cpus() -> tuple[int, int]:
    """The first CPU (both testpmds, tricolord's main lcore) and the second (tricolord's worker alone)."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], cpus[1] if len(cpus) > 1 else cpus[0]


# ---- processes ---------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _runtime_dir(prefix: str) -> str:
    """Where DPDK keeps a process's shared files (EAL's eal_get_runtime_dir)."""
    base = "/var/run" if os.geteuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    return os.path.join(base, "dpdk", prefix)


class Child:
    """A process this rig started: its output goes to a log file as it comes."""

    def __init__(self, name: str, log_path: str):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.log_lock = threading.Lock()
        self.proc: Optional[subprocess.Popen] = None
        self.file_prefix = ""

    def _start(self, args: list[str], **popen):
        self.log.write("$ " + " ".join(args) + "\n")
        self.log.flush()
        # Its own session: a Ctrl-C at the terminal reaches this script alone, which then stops the
        # processes in order (Rig.close); the parent-death signal covers this script's own death.
        self.proc = subprocess.Popen(args, preexec_fn=_die_with_parent, start_new_session=True, **popen)

    def _log(self, line: str):
        with self.log_lock:
            if not self.log.closed:
                self.log.write(line)
                self.log.flush()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        with open(self.log_path, errors="replace") as f:
            tail = f.readlines()[-lines:]
        return "".join("    " + line for line in tail)

    def died(self, doing: str) -> RigError:
        status = self.proc.poll() if self.proc else None
        return RigError(f"{self.name} exited (status {status}) while {doing}; the end of {self.log_path}:\n"
                        f"{self.log_tail()}")

    def end(self, timeout: float):
        """Waits for the process to end by itself; past the timeout, SIGTERM, then SIGKILL (its PID only)."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._log(f"[rig] {self.name} still running after {timeout} s: SIGTERM\n")
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with self.log_lock:
            self.log.close()
        if self.file_prefix:
            shutil.rmtree(_runtime_dir(self.file_prefix), ignore_errors=True)


@dataclass
class PortStats:
    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0


class Testpmd(Child):
    """dpdk-testpmd in interactive mode, driven through its standard input (one port: port 0)."""

    _number = re.compile(r"([A-Za-z-]+):\s+(\d+)")

    def __init__(self, name: str, log_path: str):
        super().__init__(name, log_path)
        self.stats: queue.Queue[PortStats] = queue.Queue()
        self.links: queue.Queue[bool] = queue.Queue()

    def start(self, file_prefix: str, cpu: int, memory: MemoryPlan, vdev: str, mode_args: list[str]):
        self.file_prefix = file_prefix
        args = ["stdbuf", "-oL", "-eL", TESTPMD, "--lcores", f"0@{cpu},1@{cpu}", "--no-pci", "--no-telemetry",
                "--file-prefix", file_prefix, *memory.testpmd_eal(), "--vdev", vdev,
                "--", "-i", f"--total-num-mbufs={TESTPMD_MBUFS}", f"--txpkts={FRAME_BYTES}", *mode_args]
        self._start(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        block: Optional[dict] = None
        for line in self.proc.stdout:
            self._log(line)
            if "NIC statistics for port" in line:
                block = {}
            elif block is not None:
                if line.strip() and set(line.strip()) == {"#"}:
                    self.stats.put(PortStats(block.get("RX-packets", 0), block.get("RX-bytes", 0),
                                             block.get("TX-packets", 0), block.get("TX-bytes", 0)))
                    block = None
                else:
                    block.update((k, int(v)) for k, v in self._number.findall(line))
            if line.strip().startswith("Link status:"):
                self.links.put(line.split(":", 1)[1].strip() == "up")

    def command(self, text: str):
        if not self.alive():
            raise self.died(f"sending it {text!r}")
        self._log(f"[rig] > {text}\n")
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def _answer(self, answers: queue.Queue, doing: str, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return answers.get(timeout=0.1)
            except queue.Empty:
                if not self.alive():
                    raise self.died(doing)
        raise RigError(f"{self.name} did not answer {doing} within {timeout} s; the end of {self.log_path}:\n"
                       f"{self.log_tail()}")

    def port_stats(self, timeout: float = 10) -> PortStats:
        self.command("show port stats 0")
        return self._answer(self.stats, "show port stats 0", timeout)

    def wait_link_up(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            self.command("show port info 0")
            if self._answer(self.links, "show port info 0", timeout):
                return
            if time.monotonic() > deadline:
                raise RigError(f"{self.name}'s memif link is still down after {timeout} s; "
                               f"the end of {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.1)

    def quit(self, timeout: float = 10):
        if self.alive():
            try:
                self.command("quit")
                self.proc.stdin.close()
            except (BrokenPipeError, RigError):
                pass
        self.end(timeout)


class Tricolord(Child):
    """tricolord with --json: counters as JSON lines on standard output, messages on standard error."""

    def __init__(self, name: str, log_path: str):
        super().__init__(name, log_path)
        self.events: queue.Queue[dict] = queue.Queue()
        self.running = threading.Event()
        self.running_at = 0.0  # time.monotonic() when it said it runs (its worker had just started)
        self.messages: list[str] = []
        self.exit_s: Optional[float] = None  # from SIGTERM to the process's end

    def start(self, binary: str, file_prefix: str, cpus: tuple[int, int], memory: MemoryPlan, vdevs: list[str],
              policy: str, stats_interval: float, backstop_s: float, extra_args: tuple[str, ...] = ()):
        self.file_prefix = file_prefix
        eal = ["--lcores", f"0@{cpus[0]},1@{cpus[1]}", "--no-pci", "--file-prefix", file_prefix, *memory.tricolord_eal()]
        for vdev in vdevs:
            eal += ["--vdev", vdev]
        args = [binary, *eal, "--", "--policy", policy, "--json", "--stats-interval", str(stats_interval),
                "--duration", str(backstop_s), *extra_args]
        self._start(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    bufsize=1)
        threading.Thread(target=self._read_messages, daemon=True).start()
        threading.Thread(target=self._read_counters, daemon=True).start()

    def _read_messages(self):
        for line in self.proc.stderr:
            self._log(line)
            if line.startswith("tricolord: "):
                self.messages.append(line.rstrip("\n"))
            if line.startswith("tricolord: running"):
                self.running_at = time.monotonic()
                self.running.set()

    def _read_counters(self):
        for line in self.proc.stdout:
            self._log(line)
            try:
                self.events.put(json.loads(line))
            except json.JSONDecodeError:
                self._log(f"[rig] not JSON: {line!r}\n")

    def wait_running(self, timeout: float):
        deadline = time.monotonic() + timeout
        while not self.running.wait(0.1):
            if not self.alive():
                raise self.died("starting")
            if time.monotonic() > deadline:
                raise RigError(f"tricolord did not start within {timeout} s; the end of {self.log_path}:\n"
                               f"{self.log_tail()}")

    def next_event(self, timeout: float) -> Optional[dict]:
        """The next JSON line, or None after `timeout` seconds without one."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.events.get(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
            except queue.Empty:
                if not self.alive() and self.events.empty():
                    raise self.died("counters were awaited")
                if time.monotonic() >= deadline:
                    return None

    def stop(self, timeout: float) -> dict:
        """SIGTERM; returns the final counters. exit_s is the time from the signal to the process's end."""
        if not self.alive():
            raise self.died("it was to be stopped")
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise RigError(f"tricolord did not exit within {timeout} s of SIGTERM")
        self.exit_s = time.monotonic() - sent
        while True:
            try:
                event = self.events.get(timeout=2)
            except queue.Empty:
                raise RigError(f"tricolord exited (status {self.proc.returncode}) without its final counters; "
                               f"the end of {self.log_path}:\n{self.log_tail()}")
            if event.get("event") == "final":
                return event


# ---- the rig -----------------------------------------------------------------------------------

def port(event: dict, number: int) -> dict:
    return next(p for p in event["ports"] if p["port"] == number)


def zeroed(event: dict, elapsed_s: float) -> dict:
    """The counters of `event` at zero, at elapsed_s: tricolord's counters before any traffic."""
    def zero(value):
        if isinstance(value, dict):
            return {k: zero(v) for k, v in value.items()}
        if isinstance(value, list):
            return [zero(v) for v in value]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return 0
        return value
    z = zero(event)
    for kept in ("ports", "rules"):  # names and port numbers stay
        for zp, p in zip(z[kept], event[kept]):
            zp.update({k: v for k, v in p.items() if k in ("port", "name")})
    z["elapsed_s"] = elapsed_s
    return z


def settled(event: dict, generator_tx: int) -> bool:
    """Everything the generator sent is received, processed, and sent on or dropped (see the module's text)."""
    p0, p1, worker = port(event, 0), port(event, 1), event["worker"]
    received = p0["rx_packets"] + p1["rx_packets"]
    forwarded = worker["packets"] - worker["policy_drops"] - worker["vlan_restore_failed"]
    sent_on = p0["tx_packets"] + p0["tx_dropped"] + p1["tx_packets"] + p1["tx_dropped"]
    return p0["rx_packets"] == generator_tx and worker["packets"] == received and sent_on == forwarded


@dataclass
class Outcome:
    generator_sent: Optional[PortStats]  # None after terminate_under_load
    receiver_got: Optional[PortStats]
    final: dict            # tricolord's final JSON counters
    tricolord_exit_s: float
    tricolord_status: int
    traffic_s: float       # from the generator's start to its stop
    settle_s: float = 0.0  # from the generator's stop to tricolord's counters settled
    stats: list[dict] = field(default_factory=list)  # tricolord's stats lines during the traffic


class Rig:
    """Starts the three processes; `traffic` runs the generator; `stop_traffic` or `terminate_under_load`
    ends the run. Use as a context manager: whatever happens, every process it started ends."""

    def __init__(self, tricolord: str, policy: str, generator: Generator, out_dir: str, stats_interval: float = 1.0,
                 backstop_s: float = 120.0, name: str = "demo", no_huge: bool = False):
        self.tricolord_binary = tricolord
        self.policy = policy
        self.generator = generator
        self.out_dir = out_dir
        self.stats_interval = stats_interval
        self.backstop_s = backstop_s
        self.memory = memory_plan(no_huge)
        self.cpus = two_cpus()
        os.makedirs(out_dir, exist_ok=True)
        self.sockets = tempfile.mkdtemp(prefix=f"tricolor-{name}-")
        tag = f"tricolor-{name}-{os.getpid()}"
        self.prefixes = {"tricolord": f"{tag}-daemon", "generator": f"{tag}-gen", "receiver": f"{tag}-rx"}
        self.daemon = Tricolord("tricolord", os.path.join(out_dir, "tricolord.log"))
        self.sender = Testpmd(f"the generator (dpdk-testpmd {generator.name})", os.path.join(out_dir, "generator.log"))
        self.receiver = Testpmd("the receiver (dpdk-testpmd rxonly)", os.path.join(out_dir, "receiver.log"))
        self.started_at = 0.0
        self.start_elapsed = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _socket(self, name: str) -> str:
        return os.path.join(self.sockets, name)

    def start(self):
        """tricolord (the memif server: its sockets must exist before a client starts), then the receiver
        and the generator; returns once both memif links are up, the generator still idle."""
        gen_sock, back_sock = self._socket("generator.sock"), self._socket("back.sock")
        self.daemon.start(self.tricolord_binary, self.prefixes["tricolord"], self.cpus, self.memory,
                          [f"net_memif0,role=server,id=0,socket={gen_sock},socket-abstract=no",
                           f"net_memif1,role=server,id=0,socket={back_sock},socket-abstract=no"],
                          self.policy, self.stats_interval, self.backstop_s)
        self.daemon.wait_running(60)
        self.receiver.start(self.prefixes["receiver"], self.cpus[0], self.memory,
                            f"net_memif0,role=client,id=0,socket={back_sock},socket-abstract=no,"
                            f"rsize={RECEIVER_RING_LOG2}", ["--forward-mode=rxonly"])
        self.sender.start(self.prefixes["generator"], self.cpus[0], self.memory,
                          f"net_memif0,role=client,id=0,socket={gen_sock},socket-abstract=no",
                          list(self.generator.testpmd_args))
        self.receiver.wait_link_up(30)
        self.sender.wait_link_up(30)
        self.receiver.command("start")
        # Counters from here on: tricolord's stats lines before the traffic say nothing.
        while not self.daemon.events.empty():
            self.daemon.events.get_nowait()

    def traffic(self, seconds: float, on_stats=None) -> list[dict]:
        """Runs the generator for `seconds`, passing each of tricolord's stats lines to on_stats.
        start_elapsed is then the traffic's start on tricolord's clock (its elapsed_s), within milliseconds."""
        self.sender.command("start")
        self.started_at = time.monotonic()
        self.start_elapsed = self.started_at - self.daemon.running_at
        lines = []
        end = self.started_at + seconds
        while time.monotonic() < end:
            try:
                event = self.daemon.events.get(timeout=max(0.01, min(0.2, end - time.monotonic())))
            except queue.Empty:
                if not self.daemon.alive():
                    raise self.daemon.died("traffic was running")
                continue
            lines.append(event)
            if on_stats:
                on_stats(event)
        return lines

    def stop_traffic(self, timeout: float = 15) -> Outcome:
        """Stops the generator, waits until tricolord has handled and the receiver received all of it, then
        stops tricolord (SIGTERM) and both testpmds: every count is exact (see the module's text)."""
        self.sender.command("stop")
        traffic_s = time.monotonic() - self.started_at
        stopped_at = time.monotonic()
        sent = self.sender.port_stats()
        deadline = stopped_at + timeout
        last = None
        while True:
            event = self.daemon.next_event(max(0.0, deadline - time.monotonic()))
            if event is None:
                received = port(last, 0)["rx_packets"] if last else "no counters"
                raise RigError(f"tricolord's counters did not settle within {timeout} s of the generator's stop: "
                               f"the generator sent {sent.tx_packets} packets; tricolord's port 0 received "
                               f"{received}; the last counters: {json.dumps(last)}")
            if event.get("event") == "stats":
                last = event
                if settled(event, sent.tx_packets):
                    break
        settle_s = time.monotonic() - stopped_at
        back = port(event, 1)["tx_packets"]
        while True:
            got = self.receiver.port_stats()
            if got.rx_packets >= back or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        final = self.daemon.stop(10)
        self.sender.quit()
        self.receiver.quit()
        return Outcome(sent, got, final, self.daemon.exit_s, self.daemon.proc.returncode, traffic_s, settle_s)

    def terminate_under_load(self, timeout: float = 10) -> Outcome:
        """SIGTERM to tricolord while the generator still sends: how long it takes to exit, and its final
        counters. The testpmds' counts are not read: tricolord's exit disconnects their memif ports, which
        resets them."""
        traffic_s = time.monotonic() - self.started_at
        final = self.daemon.stop(timeout)
        self.sender.quit()
        self.receiver.quit()
        return Outcome(None, None, final, self.daemon.exit_s, self.daemon.proc.returncode, traffic_s)

    def close(self):
        """Ends whatever still runs (the testpmds by closing their input, tricolord by SIGTERM) and removes
        the sockets' directory and the processes' DPDK runtime directories."""
        for testpmd in (self.sender, self.receiver):
            if testpmd.proc is not None and testpmd.alive():
                testpmd.quit(5)
            elif testpmd.proc is not None:
                testpmd.end(0)
        if self.daemon.alive():
            self.daemon.proc.send_signal(signal.SIGTERM)
        self.daemon.end(10)
        shutil.rmtree(self.sockets, ignore_errors=True)
