#!/usr/bin/env python3
"""Instructions a packet on the packet path, counted under valgrind's callgrind: a figure that the
machine's noise does not move, for before/after comparisons of a change to the engine on a shared VM
(where timings of the same binary differ by up to 2x from run to run, issue 23). It counts work, not
time: cache misses and stalls are not in it, so it goes beside the timed benchmarks, never instead.

  bench/instructions.py engine [--binary B] [--baseline B0] [--filter REGEX]
      tricolor-bench-engine's cases (default BM_engine_per_key/1, /4096, /65536, BM_engine_aggregate/4096):
      the instructions inside Engine::process a packet, from two runs of different lengths, differenced
      (what a packet costs once the keys exist: the warm-up is the same in both and cancels out).
  bench/instructions.py daemon [--tricolord T] [--baseline T0] [--policy P ...] [--seconds S]
      tricolord with one worker on net_pcap (the daemon benchmark's 64-byte capture of 4 Ki flows,
      replayed from memory) and net_null, no huge pages: the instructions inside Worker::process divided
      by the packets its port received (start-up and key creation included, spread over millions).
  bench/instructions.py loop [--tricolord T] [--testpmd P] [--policy P ...] [--tricolord-option O ...] [--seconds S]
      The whole forwarding thread of testpmd io and of tricolord (each policy) on the same ports and
      capture as `daemon`: its instructions a packet by part (the PMDs' receive and transmit, DPDK's
      per-lcore look-ups, each of tricolord's functions), side by side; the all row's ratio to testpmd
      io's is what the daemon benchmark's ratio would be if every instruction took the same time.

With --baseline, each case runs for both binaries, the baseline first. Needs valgrind (./dev installs it).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "daemon"))
import make_capture  # noqa: E402
from memory import mbufs_for  # noqa: E402

ENGINE_CASES = r"BM_engine_per_key/(1|4096|65536)$|BM_engine_aggregate/4096$"
WORKER_PROCESS = "tricolor::dataplane::Worker::process("
BURST = 32  # the engine benchmark's burst


def callgrind(command, toggle, out):
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", f"--toggle-collect={toggle}",
                    *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    report = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=calling", out],
                            capture_output=True, text=True, check=True).stdout
    # The inclusive count of Worker::process as Engine::process calls it, and how many calls.
    for line in report.splitlines():
        if ">" in line and WORKER_PROCESS in line:
            m = re.match(r"\s*([\d,]+).*\(([\d,]+)x\)", line)
            if m:
                return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
    for line in report.splitlines():  # no caller in the collected part (the daemon): the function itself
        if WORKER_PROCESS in line:
            return int(re.match(r"\s*([\d,]+)", line).group(1).replace(",", "")), None
    raise SystemExit(f"instructions: no {WORKER_PROCESS.rstrip('(')} in callgrind's report of {command[0]}")


def engine_case(binary, case, work):
    counts = []
    for seconds in ("0.02", "0.2"):
        counts.append(callgrind([binary, f"--benchmark_filter={case}", f"--benchmark_min_time={seconds}"],
                                "tricolor::dataplane::Engine::process*", os.path.join(work, f"engine.{seconds}")))
    (short_ir, short_bursts), (long_ir, long_bursts) = counts
    if long_bursts <= short_bursts:
        raise SystemExit(f"instructions: {case}: the longer run made no more bursts ({short_bursts}, {long_bursts})")
    return (long_ir - short_ir) / (long_bursts - short_bursts) / BURST


def tricolord_received(stdout):
    """The packets tricolord's ports received, from its last JSON line with port counters (0: none)."""
    received = 0
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "ports" in event:
                received = sum(p["rx_packets"] for p in event["ports"])
    return received


def daemon_case(tricolord, policy, capture, seconds, work):
    out = os.path.join(work, "daemon.out")
    command = [tricolord, "-l", "0,1", "--main-lcore", "0", "--no-pci", "--file-prefix", f"instructions-{os.getpid()}",
               "--vdev", f"net_pcap0,rx_pcap={capture},infinite_rx=1", "--vdev", "net_null0,no-rx=1",
               "--no-huge", "-m", "1024", "--", "--policy", policy, "--json", "--stats-interval", "1",
               "--duration", str(seconds), "--mbufs", str(mbufs_for(make_capture.DEFAULT_MIN_PACKETS))]
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          "--toggle-collect=tricolor::dataplane::Worker::process*", *command],
                         capture_output=True, text=True, check=False)
    received = tricolord_received(run.stdout)
    if run.returncode != 0 or not received:
        raise SystemExit(f"instructions: tricolord under valgrind failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    report = subprocess.run(["callgrind_annotate", "--inclusive=yes", out], capture_output=True, text=True, check=True).stdout
    for line in report.splitlines():
        if WORKER_PROCESS in line:
            return int(re.match(r"\s*([\d,]+)", line).group(1).replace(",", "")) / received
    raise SystemExit("instructions: no Worker::process in callgrind's report of tricolord")


def short_name(symbol):
    """A callgrind symbol without its return type, namespaces, template and argument lists; a lambda as
    `(lambda)` of its function; an object's unnamed code by the object (`net_pcap`)."""
    where = re.search(r"\[(.*)\]\s*$", symbol)
    name = symbol[:where.start()].strip() if where else symbol.strip()
    name = name.split(":", 1)[1] if name.startswith("???:") or re.match(r"^[./\w-]+:", name) else name
    if name.startswith("0x"):  # no symbol: the object's name stands for it
        base = os.path.basename(where.group(1)) if where else "?"
        return re.sub(r"^librte_|\.so.*$", "", base)
    kept, depth = [], 0
    for ch in name:  # argument and template lists removed, nested ones included
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    name = "".join(kept).replace("tricolor::dataplane::", "").replace("tricolor::", "").replace(" [clone .isra.0]", "")
    name = re.sub(r"::\{lambda#?\d*\}.*", " (lambda)", name)
    name = re.sub(r"^(auto|bool|void|unsigned|int|long|char|std::\S+)\s+", "", name)
    return name.replace("operator", "").strip() or symbol


def forwarding_thread(out_prefix):
    """The per-thread profile (valgrind --separate-threads=yes) with the most instructions in net_pcap's
    receive: the forwarding lcore's. Its functions' self counts, by short name."""
    best = None
    for path in sorted(p for p in os.listdir(os.path.dirname(out_prefix)) if p.startswith(os.path.basename(out_prefix))):
        report = subprocess.run(["callgrind_annotate", "--threshold=100", os.path.join(os.path.dirname(out_prefix), path)],
                                capture_output=True, text=True, check=False).stdout
        parts = {}
        for line in report.splitlines():
            m = re.match(r"\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*)$", line)
            if m and "PROGRAM TOTALS" not in line:
                name = short_name(m.group(2))
                parts[name] = parts.get(name, 0) + int(m.group(1).replace(",", ""))
        if best is None or parts.get("net_pcap", 0) > best.get("net_pcap", 0):
            best = parts
    if not best or not best.get("net_pcap"):
        raise SystemExit(f"instructions: no thread received from net_pcap in {out_prefix}-*")
    return best


def loop_case(program, binary, policy, capture, seconds, work, extra=()):
    """(instructions by part, packets received) of one program's forwarding thread; `extra`: tricolord's
    options besides the policy's."""
    tag = f"{program}-{os.path.basename(policy or 'io')}"
    out = os.path.join(work, f"loop-{tag}")
    eal = [binary, "-l", "0,1", "--main-lcore", "0", "--no-pci", "--file-prefix", f"instructions-{os.getpid()}",
           "--vdev", f"net_pcap0,rx_pcap={capture},infinite_rx=1", "--vdev", "net_null0,no-rx=1",
           "--no-huge", "-m", "1024"]
    mbufs = mbufs_for(make_capture.DEFAULT_MIN_PACKETS)
    if program == "testpmd":
        # testpmd runs until interrupted: SIGINT after `seconds` of forwarding (valgrind's start-up first).
        command = [*eal, "--", "--forward-mode=io", "--auto-start", "--stats-period", "1",
                   f"--total-num-mbufs={mbufs}"]
    else:
        command = [*eal, "--", "--policy", policy, "--json", "--stats-interval", "1", "--duration", str(seconds),
                   "--mbufs", str(mbufs), *extra]
    # Output to a file (nothing to block on), testpmd's line by line (stdbuf) so that its first display,
    # which starts the clock below, shows as it is printed.
    log = os.path.join(work, f"loop-{tag}.log")
    with open(log, "w") as sink:
        process = subprocess.Popen(["stdbuf", "-oL", "valgrind", "--tool=callgrind", "--separate-threads=yes",
                                    f"--callgrind-out-file={out}", *command],
                                   stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
        if program == "testpmd":
            started, deadline = None, time.monotonic() + 600
            while process.poll() is None and time.monotonic() < deadline:
                if started is None and "NIC statistics for port" in open(log).read():
                    started = time.monotonic()  # forwarding
                if started is not None and time.monotonic() - started >= seconds:
                    break
                time.sleep(0.5)
            process.send_signal(signal.SIGINT)
        process.wait(timeout=600 + 60 * seconds)
    text = open(log).read()
    if program == "testpmd":
        received = max((int(v) for v in re.findall(r"RX-packets:\s+(\d+)", text)), default=0)
    else:
        received = tricolord_received(text)
    if not received:
        raise SystemExit(f"instructions: {program} under valgrind received nothing (exit {process.returncode}):\n"
                         f"{text[-2000:]}")
    return forwarding_thread(out), received


def print_loop(args, work):
    capture = os.path.join(work, "64-4096.pcap")
    make_capture.write_capture(capture, 4096, "64", make_capture.DEFAULT_MIN_PACKETS)
    columns = [("testpmd io", "testpmd", args.testpmd, None)]
    columns += [(f"tricolord {os.path.basename(p).removesuffix('.policy')}", "tricolord", args.tricolord, p)
                for p in args.policy]
    extra = args.tricolord_option or []
    counted = [loop_case(program, binary, policy, capture, args.seconds, work, extra)
               for _, program, binary, policy in columns]
    per_packet = [{name: ir / received for name, ir in parts.items()} for parts, received in counted]
    shown = sorted({name for parts in per_packet for name, v in parts.items() if v >= 1.0},
                   key=lambda name: -max(parts.get(name, 0.0) for parts in per_packet))
    print("| a packet | " + " | ".join(title for title, *_ in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name in shown:
        print(f"| {name} | " + " | ".join(f"{parts[name]:.1f}" if name in parts else "—" for parts in per_packet) + " |")
    print("| the rest (under 1 a packet each) | " + " | ".join(
        f"{sum(v for n, v in parts.items() if n not in shown):.1f}" for parts in per_packet) + " |")
    totals = [sum(parts.values()) for parts in per_packet]
    print("| all | " + " | ".join(f"{t:.1f}" + ("" if i == 0 else f" ({totals[0] / t:.2f})")
                                   for i, t in enumerate(totals)) + " |")
    print(f"packets received: " + ", ".join(f"{title} {received}" for (title, *_), (_, received) in zip(columns, counted)))
    print("instructions a packet over the whole forwarding thread (callgrind); in parentheses, testpmd io's "
          "all divided by the program's")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    engine = sub.add_parser("engine")
    engine.add_argument("--binary", default=os.path.join(ROOT, "build/bench/tricolor-bench-engine"))
    engine.add_argument("--baseline")
    engine.add_argument("--filter", default=ENGINE_CASES, help="benchmark cases, each run on its own")
    daemon = sub.add_parser("daemon")
    daemon.add_argument("--tricolord", default=os.path.join(ROOT, "build/control/tricolord"))
    daemon.add_argument("--baseline")
    daemon.add_argument("--policy", nargs="+", default=[os.path.join(HERE, "daemon/aggregate.policy"),
                                                        os.path.join(HERE, "daemon/per-5-tuple.policy")])
    daemon.add_argument("--seconds", type=int, default=4, help="tricolord's --duration (valgrind runs it ~50x slower)")
    loop = sub.add_parser("loop")
    loop.add_argument("--tricolord", default=os.path.join(ROOT, "build/control/tricolord"))
    loop.add_argument("--testpmd", default="/usr/bin/dpdk-testpmd")
    loop.add_argument("--policy", nargs="+", default=[os.path.join(HERE, "daemon/aggregate.policy"),
                                                      os.path.join(HERE, "daemon/per-5-tuple.policy")])
    loop.add_argument("--tricolord-option", action="append", metavar="OPTION",
                      help="an option for tricolord after --, e.g. --tricolord-option=--burst=64 (repeatable)")
    loop.add_argument("--seconds", type=int, default=4, help="forwarding time of each program under valgrind (testpmd: at least, from its first display)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tricolor-instructions-") as work:
        if args.what == "loop":
            print_loop(args, work)
            return
        if args.what == "engine":
            listed = subprocess.run([args.binary, f"--benchmark_filter={args.filter}", "--benchmark_list_tests"],
                                    capture_output=True, text=True, check=True).stdout.split()
            binaries = [("baseline", args.baseline)] if args.baseline else []
            binaries.append(("this", args.binary))
            print("| case | " + " | ".join(name for name, _ in binaries) + " |")
            print("|---|" + "---:|" * len(binaries))
            for case in listed:
                counts = [engine_case(b, "^" + re.escape(case) + "$", work) for _, b in binaries]
                print(f"| {case} | " + " | ".join(f"{c:.1f}" for c in counts) + " |", flush=True)
        else:
            capture = os.path.join(work, "64-4096.pcap")
            make_capture.write_capture(capture, 4096, "64", make_capture.DEFAULT_MIN_PACKETS)
            binaries = [("baseline", args.baseline)] if args.baseline else []
            binaries.append(("this", args.tricolord))
            print("| policy | " + " | ".join(name for name, _ in binaries) + " |")
            print("|---|" + "---:|" * len(binaries))
            for policy in args.policy:
                counts = [daemon_case(b, policy, capture, args.seconds, work) for _, b in binaries]
                print(f"| {os.path.basename(policy)} | " + " | ".join(f"{c:.1f}" for c in counts) + " |", flush=True)
        print("instructions a packet inside the engine's packet path (callgrind)")


if __name__ == "__main__":
    main()
