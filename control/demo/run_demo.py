#!/usr/bin/env python3
"""The README's main command (`./dev run`): tricolord policing real packets from a packet generator.

    dpdk-testpmd txonly|flowgen --memif--> tricolord --memif--> dpdk-testpmd rxonly

Starts the three processes (control/demo/memif_rig.py says how and why so), lets the generator send for
--seconds, prints each rule's green/yellow/red rates once a second from tricolord's counters, then
stops the generator, waits until tricolord has handled every packet and the receiver has counted what
came back, stops tricolord, and prints a summary in which every packet is accounted for. It exits by
itself; every process it starts ends with it. Ctrl-C ends the traffic early (the summary still comes; a
second Ctrl-C abandons it). Logs and the summary as JSON go to --out.

Exit status: 0 done, every packet accounted for; 1 the counts do not add up (the summary says where);
2 a wrong command line; 3 a process failed to start or to answer (its log's end is printed).
"""
import argparse
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memif_rig  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COLORS = ("green", "yellow", "red")


def rate(packets: float, byte_count: float, seconds: float) -> str:
    """As tricolord prints rates: '  1.234 Mpps     630.2 Mbit/s'."""
    return f"{packets / seconds / 1e6:7.3f} Mpps {byte_count * 8 / seconds / 1e6:9.1f} Mbit/s"


def print_rates(before: dict, now: dict, traffic_start: float, out=sys.stdout):
    """One block per second: each direction's rate, then each rule's green/yellow/red rates (the lines
    `tricolord --stats-interval 1` prints without --json)."""
    seconds = now["elapsed_s"] - before["elapsed_s"]
    if seconds <= 0:
        return
    p0b, p0 = memif_rig.port(before, 0), memif_rig.port(now, 0)
    p1b, p1 = memif_rig.port(before, 1), memif_rig.port(now, 1)
    print(f"[{now['elapsed_s'] - traffic_start:5.1f} s]  generator -> port 0 "
          f"{rate(p0['rx_packets'] - p0b['rx_packets'], p0['rx_bytes'] - p0b['rx_bytes'], seconds)};  "
          f"port 1 -> receiver {rate(p1['tx_packets'] - p1b['tx_packets'], p1['tx_bytes'] - p1b['tx_bytes'], seconds)}",
          file=out)
    for rb, r in zip(before["rules"], now["rules"]):
        line = f"  {r['name']:<16}"
        for c in COLORS:
            line += f" {c} {rate(r[c + '_packets'] - rb[c + '_packets'], r[c + '_bytes'] - rb[c + '_bytes'], seconds)}"
        if "keys" in r:
            line += f"  keys {r['keys']['live']}"
        print(line, file=out)
    d, db = now["default"], before["default"]
    print(f"  {'(default)':<16}       {rate(d['packets'] - db['packets'], d['bytes'] - db['bytes'], seconds)}", file=out,
          flush=True)


def rule_packets(rule: dict) -> int:
    return sum(rule[c + "_packets"] for c in COLORS)


def rule_bytes(rule: dict) -> int:
    return sum(rule[c + "_bytes"] for c in COLORS)


def metered_seconds(rule: dict, tick_hz: int) -> float:
    """From the rule's first to its last metered packet, as tricolord reports them."""
    if rule["first_tick"] is None:
        return 0.0
    return (rule["last_tick"] - rule["first_tick"]) / tick_hz


def accounting(outcome: memif_rig.Outcome) -> list[str]:
    """What does not add up, if anything: generator TX = tricolord RX = the rules' and the default
    action's packets = forwarded + dropped; forwarded = port 1's TX + its tx-dropped; what came back to
    the receiver = port 1's TX."""
    f = outcome.final
    p0, p1, w = memif_rig.port(f, 0), memif_rig.port(f, 1), f["worker"]
    metered = sum(rule_packets(r) for r in f["rules"]) + f["default"]["packets"]
    dropped = sum(r["dropped_packets"] for r in f["rules"]) + f["default"]["dropped_packets"]
    problems = []

    def check(what, a, b):
        if a != b:
            problems.append(f"{what}: {a} != {b}")

    check("generator sent (testpmd TX) = tricolord port 0 received", outcome.generator_sent.tx_packets, p0["rx_packets"])
    check("generator bytes = tricolord port 0 bytes", outcome.generator_sent.tx_bytes, p0["rx_bytes"])
    check("port 0 received = packets the worker handled", p0["rx_packets"] + p1["rx_packets"], w["packets"])
    check("packets handled = the rules' and the default action's", w["packets"], metered)
    check("dropped by the rules and the default action = dropped by the worker", dropped,
          w["policy_drops"] + w["vlan_restore_failed"])
    forwarded = metered - dropped
    check("forwarded = port 1 sent + its tx-dropped (+ port 0's)",
          forwarded, p1["tx_packets"] + p1["tx_dropped"] + p0["tx_packets"] + p0["tx_dropped"])
    check("port 1 sent = receiver got (testpmd RX)", p1["tx_packets"], outcome.receiver_got.rx_packets)
    return problems


def print_summary(outcome: memif_rig.Outcome, generator: memif_rig.Generator, out=sys.stdout):
    f = outcome.final
    seconds = outcome.traffic_s
    p0, p1 = memif_rig.port(f, 0), memif_rig.port(f, 1)
    sent, got = outcome.generator_sent, outcome.receiver_got
    print(f"\nSummary after {seconds:.1f} s of traffic ({generator.name}):", file=out)
    print(f"  {'':34}{'packets':>12} {'bytes':>14}   average rate", file=out)

    def row(label, packets, byte_count, extra=""):
        print(f"  {label:<34}{packets:>12} {byte_count:>14}   {rate(packets, byte_count, seconds)}{extra}", file=out)

    row(f"generator sent (testpmd {generator.name} TX)", sent.tx_packets, sent.tx_bytes)
    row("tricolord received (port 0)", p0["rx_packets"], p0["rx_bytes"])
    print(f"  {'rule':<16}{'packets':>12}{'green':>12}{'yellow':>12}{'red':>12}{'forwarded':>12}{'dropped':>12}"
          f"   green Mbit/s", file=out)
    for r in f["rules"]:
        packets = rule_packets(r)
        t = metered_seconds(r, f["tick_hz"])
        green_rate = f"{r['green_bytes'] * 8 / t / 1e6:10.2f}" if t > 0 else f"{'-':>10}"
        keys = f"   ({r['keys']['live']} keys)" if "keys" in r else ""
        print(f"  {r['name']:<16}{packets:>12}{r['green_packets']:>12}{r['yellow_packets']:>12}{r['red_packets']:>12}"
              f"{packets - r['dropped_packets']:>12}{r['dropped_packets']:>12}   {green_rate}{keys}", file=out)
    d = f["default"]
    print(f"  {'(default)':<16}{d['packets']:>12}{'':>36}{d['packets'] - d['dropped_packets']:>12}"
          f"{d['dropped_packets']:>12}", file=out)
    row("tricolord sent (port 1)", p1["tx_packets"], p1["tx_bytes"],
        f"; tx-dropped {p1['tx_dropped']}" + (" (the receiver's ring was full)" if p1["tx_dropped"] else ""))
    row("receiver got (testpmd rxonly RX)", got.rx_packets, got.rx_bytes)
    problems = accounting(outcome)
    if problems:
        print("  accounting: DOES NOT ADD UP:\n    " + "\n    ".join(problems), file=out)
    else:
        print("  accounting: generator sent = tricolord received = forwarded + dropped; forwarded = port 1 sent "
              "+ tx-dropped; receiver got = port 1 sent", file=out)
    w = f["worker"]
    idle = w["idle_polls"] / w["polls"] if w["polls"] else 0
    print(f"  tricolord's worker: {w['packets']} packets in {w['bursts']} bursts, {idle:.1%} of its {w['polls']} polls "
          f"found nothing" + (" (the generator set the pace)" if idle > 0.5 else ""), file=out)
    print(f"  tricolord: exit status {outcome.tricolord_status} {outcome.tricolord_exit_s:.2f} s after SIGTERM; "
          f"mbufs in use {f['mbufs_in_use_at_start']} once its ports had started, {f['mbufs_in_use']} after the stop",
          file=out, flush=True)
    return problems


def summary_json(outcome: memif_rig.Outcome, rig: memif_rig.Rig, problems: list[str]) -> dict:
    return {
        "generator": rig.generator.name,
        "policy": rig.policy,
        "traffic_s": outcome.traffic_s,
        "settle_s": outcome.settle_s,
        "cpus": list(rig.cpus),
        "huge_pages": rig.memory.huge,
        "generator_sent": vars(outcome.generator_sent),
        "receiver_got": vars(outcome.receiver_got),
        "tricolord_exit_s": outcome.tricolord_exit_s,
        "tricolord_status": outcome.tricolord_status,
        "tricolord_final": outcome.final,
        "stats": outcome.stats,
        "problems": problems,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="the build directory (tricolord is BUILD/control/tricolord)")
    parser.add_argument("--generator", choices=sorted(memif_rig.GENERATORS), default="txonly",
                        help="txonly: many sources (the default); flowgen: many destinations")
    parser.add_argument("--seconds", type=float, default=15, help="seconds of traffic (default 15)")
    parser.add_argument("--policy", help="the policy (default: control/demo/daemon.policy, or "
                                         "daemon-flowgen.policy with --generator flowgen)")
    parser.add_argument("--out", help="logs and summary.json (default BUILD/daemon-demo)")
    parser.add_argument("--no-huge", action="store_true",
                        help="run all three processes without huge pages even when the machine has them")
    args = parser.parse_args()
    if not 1 <= args.seconds <= 600:
        parser.error("--seconds takes 1 to 600")

    generator = memif_rig.GENERATORS[args.generator]
    policy = args.policy or os.path.join(HERE, generator.policy)
    tricolord = os.path.join(args.build, "control", "tricolord")
    out_dir = args.out or os.path.join(args.build, "daemon-demo")
    for path, what in ((tricolord, "tricolord (build it: ninja -C BUILD control/tricolord)"),
                       (memif_rig.TESTPMD, "dpdk-testpmd (Debian's dpdk-dev package; ./dev installs it)"),
                       (policy, "the policy")):
        if not os.path.exists(path):
            print(f"run_demo: {path} does not exist: {what}", file=sys.stderr)
            return 2

    rig = memif_rig.Rig(tricolord, policy, generator, out_dir, stats_interval=1.0, backstop_s=args.seconds + 90,
                        no_huge=args.no_huge)
    with rig:
        print(f"tricolord demo: dpdk-testpmd {generator.name} --memif--> tricolord --memif--> dpdk-testpmd rxonly")
        print(f"  traffic: {generator.traffic}")
        print(f"  policy {os.path.relpath(policy)}:")
        for line in open(policy):
            if line.strip() and not line.lstrip().startswith("#"):
                print("    " + line.rstrip())
        cpu0, cpu1 = rig.cpus
        print(f"  CPUs: both testpmds and tricolord's main lcore on CPU {cpu0}, tricolord's worker alone on CPU {cpu1}"
              + ("" if cpu0 != cpu1 else " (this machine lets us use one CPU only: all share it)"))
        print(f"  memory: {rig.memory.reason}")
        print(f"  logs and summary.json: {out_dir}/", flush=True)
        try:
            rig.start()
            print(f"\nRates each second for {args.seconds:g} s (tricolord's counters, green/yellow/red per rule):",
                  flush=True)
            previous = {}

            def show(event):
                if event.get("event") != "stats":
                    return
                # Before the first line, the counters at the traffic's start: all zero.
                before = previous.get("event") or memif_rig.zeroed(event, rig.start_elapsed)
                print_rates(before, event, rig.start_elapsed)
                previous["event"] = event

            try:
                stats = rig.traffic(args.seconds, show)
            except KeyboardInterrupt:  # the traffic ends early; the summary still comes
                print("run_demo: interrupted: stopping the traffic (Ctrl-C again abandons the summary)",
                      file=sys.stderr, flush=True)
                stats = []
            outcome = rig.stop_traffic()
            outcome.stats = stats
        except memif_rig.RigError as e:
            print(f"run_demo: {e}", file=sys.stderr)
            return 3
        except KeyboardInterrupt:
            print("run_demo: interrupted again: stopping tricolord and both testpmds", file=sys.stderr)
            return 130
    problems = print_summary(outcome, generator)
    print("\nMore: ./dev run --generator flowgen (many destinations); ./dev replay-demo (a capture replayed offline "
          "through a richer policy); tricolord --help.")
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary_json(outcome, rig, problems), f, indent=1)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
