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

With --baseline, each case runs for both binaries, the baseline first. Needs valgrind (./dev installs it).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

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


def daemon_case(tricolord, policy, capture, seconds, work):
    out = os.path.join(work, "daemon.out")
    command = [tricolord, "-l", "0,1", "--main-lcore", "0", "--no-pci", "--file-prefix", f"instructions-{os.getpid()}",
               "--vdev", f"net_pcap0,rx_pcap={capture},infinite_rx=1", "--vdev", "net_null0,no-rx=1",
               "--no-huge", "-m", "1024", "--", "--policy", policy, "--json", "--stats-interval", "1",
               "--duration", str(seconds), "--mbufs", str(mbufs_for(make_capture.DEFAULT_MIN_PACKETS))]
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          "--toggle-collect=tricolor::dataplane::Worker::process*", *command],
                         capture_output=True, text=True, check=False)
    received = None
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "ports" in event:
                received = sum(p["rx_packets"] for p in event["ports"])
    if run.returncode != 0 or not received:
        raise SystemExit(f"instructions: tricolord under valgrind failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    report = subprocess.run(["callgrind_annotate", "--inclusive=yes", out], capture_output=True, text=True, check=True).stdout
    for line in report.splitlines():
        if WORKER_PROCESS in line:
            return int(re.match(r"\s*([\d,]+)", line).group(1).replace(",", "")) / received
    raise SystemExit("instructions: no Worker::process in callgrind's report of tricolord")


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
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tricolor-instructions-") as work:
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
