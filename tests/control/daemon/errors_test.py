#!/usr/bin/env python3
"""tricolord's error paths: each gives its message and exit status (1 the command line, 2 the policy,
3 the EAL, a port or memory), within a time limit (no hang), and a refused policy touches no port.

Run by meson: errors_test.py BUILD_ROOT.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture  # noqa: E402

tricolord = os.path.join(sys.argv[1], "control", "tricolord")
GOOD_POLICY = "profile add p 1r2c cir 1mbit cbs 10k\nrule add all dst 10.0.0.0/8 profile p\n"
failures = []
socket_dir = tempfile.mkdtemp(prefix="tricolord-errors-sockets-")
socket_names = []


def eal(name, *vdevs, lcores="0,1"):
    args = ["-l", lcores, "--no-huge", "-m", "512", "--no-pci", "--no-telemetry", f"--file-prefix=tricolor-errors-{os.getpid()}-{name}",
            "--log-level=lib.eal:error"]
    return args + [f"--vdev={v}" for v in vdevs]


def case(name, args, status, *phrases, check=None, absent=()):
    # A socket of its own: the default one may belong to a tricolord that is running on this machine.
    if "--" in args and "--socket" not in args:
        args = [*args, "--socket", os.path.join(socket_dir, f"{len(socket_names)}.sock")]
        socket_names.append(name)
    try:
        run = subprocess.run([tricolord, *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        failures.append(f"{name}: no exit within 30 s")
        return
    said = run.stderr + run.stdout
    problems = []
    if run.returncode != status:
        problems.append(f"exit status {run.returncode}, expected {status}")
    problems += [f"no {p!r} in what it said" for p in phrases if p not in said]
    problems += [f"{p!r} in what it said" for p in absent if p in said]
    if check is not None and (problem := check()):
        problems.append(problem)
    # Whatever failed, after the EAL started or while it did: its runtime directory does not outlive it.
    if any(a.startswith("--file-prefix") for a in args) and os.path.exists(runtime := daemon_capture.runtime_dir(args)):
        problems.append(f"{runtime} left behind")
    if problems:
        failures.append(f"{name}: {'; '.join(problems)}\n--- it said:\n{said}")
    else:
        print(f"ok  {name}: exit {run.returncode}")


with tempfile.TemporaryDirectory(prefix="tricolord-errors-") as tmp:
    good = os.path.join(tmp, "good.policy")
    open(good, "w").write(GOOD_POLICY)
    bad = os.path.join(tmp, "bad.policy")
    open(bad, "w").write(GOOD_POLICY + "rule add web dst 10.1.0.0/16 proto tcp dport 80 profile nosuch\n")
    capture = os.path.join(tmp, "in.pcap")
    with open(capture, "wb") as f:  # an empty capture: a valid pcap header, no packets
        f.write(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    out = os.path.join(tmp, "out.pcap")
    pcap = f"net_pcap0,rx_pcap={capture},tx_pcap={out}"

    # The command line.
    case("no options", [], 1, "at least -- --policy FILE")
    case("daemon options without --", ["--policy", good], 1, "after `--`")
    case("no --policy", ["--"], 1, "--policy FILE is required")
    case("unknown option", ["--", "--policy", good, "--bogus"], 1, "--bogus")
    case("bad --clock", ["--", "--policy", good, "--clock", "wall"], 1, "--clock 'wall': expected tsc or rx-timestamp")
    case("bad --pair", ["--", "--policy", good, "--pair", "0-1"], 1, "--pair '0-1': expected two different port numbers")
    case("help", ["--help"], 0, "Usage: tricolord [EAL options] -- --policy FILE", "Exit status:")

    # The policy: refused before the EAL or any port is touched (the output capture is never created).
    no_port_touched = lambda: "the port was touched: out.pcap exists" if os.path.exists(out) else None  # noqa: E731
    case("policy file missing", [*eal("missing", pcap), "--", "--policy", os.path.join(tmp, "nosuch.policy")], 2,
         "nosuch.policy", check=no_port_touched)
    case("policy line refused", [*eal("bad", pcap), "--", "--policy", bad], 2, "line 3", "nosuch", check=no_port_touched)
    two_rules = os.path.join(tmp, "two.policy")
    open(two_rules, "w").write(GOOD_POLICY + "rule add more dst 11.0.0.0/8 profile p\n")
    # What the engine refuses (the classifier's limit, key memory) needs the EAL, which probes the
    # ports; no port is configured or started.
    case("policy over the classifier limit",
         [*eal("limit", pcap), "--", "--policy", two_rules, "--max-classifier-entries", "1"], 2,
         "raise the limit with --max-classifier-entries", absent=["tricolord: port 0"])
    case("a limit of 0 entries", ["--", "--policy", good, "--max-classifier-entries", "0"], 1, "--max-classifier-entries")

    # The EAL, the lcores and the ports.
    case("unknown device", eal("vdev", "net_bogus0") + ["--", "--policy", good], 3, "EAL could not start")
    case("no ports", eal("noports") + ["--", "--policy", good], 3, "the EAL found no ports")
    case("no worker lcore", eal("lcore", pcap, lcores="0") + ["--", "--policy", good], 1, "no worker lcore")
    case("a port that does not exist", eal("port", pcap) + ["--", "--policy", good, "--pair", "0:5"], 3,
         "port 5 does not exist; the EAL found 1: 0 net_pcap0")
    case("a port in two pairs", eal("twice", pcap, "net_null0", "net_null1") + ["--", "--policy", good, "--pair", "0:1", "--pair", "1:2"],
         1, "a port may be in one pair only")
    case("rx-timestamp on a port without timestamps", eal("ts", "net_null0") + ["--", "--policy", good, "--clock", "rx-timestamp"],
         3, "does not timestamp the packets it receives")
    case("pool too large", eal("pool", "net_null0") + ["--", "--policy", good, "--mbufs", "4000000000"], 3, "cannot create a pool")

    # A capture net_pcap replays from memory (infinite_rx=1) holds an mbuf a packet: a --mbufs too small
    # for it is refused in tricolord's words (DPDK's own was "Not enough mbufs ... At least 5000 mbufs per
    # queue is required" and "cannot set up RX queue 0"); without --mbufs the pool is sized for it.
    replayed = os.path.join(tmp, "replayed.pcap")
    frame = bytes.fromhex("02000000000102000000000208004500001c00000000401100000a000001"
                          "0a0000020035003500080000") + bytes(18)
    with open(replayed, "wb") as f:
        f.write(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
        for i in range(5000):
            f.write(struct.pack("<IIII", i, 0, len(frame), len(frame)) + frame)
    infinite = f"net_pcap0,rx_pcap={replayed},tx_pcap={out},infinite_rx=1"
    case("--mbufs too few for an infinite_rx capture", eal("infinite", infinite) + ["--", "--policy", good, "--mbufs", "2047"],
         1, "--mbufs 2047 is too few", "net_pcap0's capture", "holds 5000",
         "shaping may hold 1 worker x --shape-capacity 4096 = 4096 packets", "give at least 9224",
         absent=["Not enough mbufs"])
    case("an infinite_rx capture sizes the pool", eal("infinite-sized", infinite) + ["--", "--policy", good, "--duration", "0.5"],
         0, "16383 mbufs", absent=["Not enough mbufs"])  # the capture's 5000 and shaping's 4096 among them

    # Shaping (issue 27): each worker may hold --shape-capacity packets in mbufs of the pool. The
    # default pool counts them; a --mbufs without room for them is refused, naming both numbers.
    case("--mbufs too few for what shaping holds", eal("shape-few", "net_null0") + ["--", "--policy", good, "--mbufs", "4000"],
         1, "--mbufs 4000 is too few", "shaping may hold 1 worker x --shape-capacity 4096 = 4096 packets",
         "the workers' bursts need 128", "give at least 4224", "lower --shape-capacity")
    case("--mbufs with a smaller --shape-capacity", eal("shape-small", "net_null0") +
         ["--", "--policy", good, "--mbufs", "4000", "--shape-capacity", "1000", "--duration", "0.3",
          "--socket", os.path.join(tmp, "shape-small.sock")], 0, "4000 mbufs")
    # Every shaping rule bounded by queue N: their queues must all fit one worker's --shape-capacity.
    queued = os.path.join(tmp, "queued.policy")
    open(queued, "w").write("profile add s 1r2c cir 1mbit cbs 10k\n"
                            "rule add a dst 10.1.0.0/16 profile s red shape max-delay 5ms queue 600\n"
                            "rule add b dst 10.2.0.0/16 profile s per src red shape max-delay 5ms queue 500\n")
    case("shaping queues past --shape-capacity", eal("queue-over", "net_null0") +
         ["--", "--policy", queued, "--shape-capacity", "1000"], 2,
         "the shaping queues cannot all be held: a 600 + b 500 = 1100 packets per worker, more than the 1000 each worker can hold (--shape-capacity)")
    case("shaping queues within --shape-capacity", eal("queue-fits", "net_null0") +
         ["--", "--policy", queued, "--shape-capacity", "1100", "--duration", "0.3",
          "--socket", os.path.join(tmp, "queue-fits.sock")], 0, "mbufs")
    case("--shape-capacity beyond the limit", ["--", "--policy", good, "--shape-capacity", "16777217"], 1, "--shape-capacity")
    case("--shape-capacity negative", ["--", "--policy", good, "--shape-capacity", "-1"], 1, "--shape-capacity")

shutil.rmtree(socket_dir, ignore_errors=True)
if failures:
    print("\n\n".join(failures))
    sys.exit(1)
