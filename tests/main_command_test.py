#!/usr/bin/env python3
"""The README's main command, `./dev run`, run for real: tricolord between two dpdk-testpmd processes
over memif (control/demo/run_demo.py).

Run by meson with the source root and this build directory; ./dev then finds everything installed and
the build current, so it only runs the main job. Checks, from what it prints: the policy it runs; a
block of rates about once a second for about 15 s, each with a line per rule of the policy (green,
yellow and red in Mpps and Mbit/s) and one for the default action; a summary in which every packet is
accounted for (generator sent = tricolord received = the rules' packets = forwarded + dropped,
forwarded = what port 1 sent + its tx-dropped, what the receiver got = what port 1 sent), agreeing
with the summary.json written beside the logs; tricolord's exit after SIGTERM and its mbufs back; the
command's end by itself in about 20 s, leaving no process and no DPDK runtime directory behind. Then
the same, briefly, with `--generator flowgen` and its per-destination policy, and with `--no-huge`
(the fallback of a machine without huge pages, whether or not this one has them).
"""
import json
import os
import re
import subprocess
import sys
import time

source_root, build_root = sys.argv[1], sys.argv[2]
env = dict(os.environ, TRICOLOR_BUILD_DIR=build_root)
demo_dir = os.path.join(build_root, "daemon-demo")
RATE = r"\s*(\d+\.\d+) Mpps\s+(\d+\.\d+) Mbit/s"


def leftovers(tag):
    """Processes and DPDK runtime directories whose --file-prefix starts with tag."""
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if tag.encode() in f.read():
                    procs.append(pid)
        except OSError:
            pass
    dirs = [d for d in os.listdir("/var/run/dpdk") if d.startswith(tag)] if os.path.isdir("/var/run/dpdk") else []
    return procs, dirs


def run(args, policy_name, seconds, max_wall):
    started = time.monotonic()
    proc = subprocess.Popen([os.path.join(source_root, "dev"), "run", *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    wall = time.monotonic() - started
    print(out)
    print(err, file=sys.stderr)
    assert proc.returncode == 0, f"./dev run {' '.join(args)} exited {proc.returncode}"
    print(f"./dev run {' '.join(args)}: {wall:.1f} s")
    assert wall < max_wall, f"./dev run took {wall:.1f} s"
    # dev execs the script: its PID names the processes' file prefixes (tricolor-demo-PID-...).
    procs, dirs = leftovers(f"tricolor-demo-{proc.pid}-")
    assert not procs and not dirs, f"left behind: processes {procs}, runtime directories {dirs}"

    policy = open(os.path.join(source_root, "control", "demo", policy_name)).read()
    rule_names = re.findall(r"^rule add (\S+)", policy, re.M)
    lines = out.splitlines()

    # The policy, printed.
    for command in re.findall(r"^(?:profile|rule) add .*$", policy, re.M):
        assert "    " + command in lines, f"the policy's {command!r} is not printed"

    # The rates: a block about once a second, a line per rule in the policy's order, then the default.
    blocks = [i for i, line in enumerate(lines) if re.match(r"\[\s*\d+\.\d s\]  generator -> port 0" + RATE, line)]
    assert seconds - 2 <= len(blocks) <= seconds + 2, f"{len(blocks)} blocks of rates for {seconds} s"
    for i in blocks:
        for name, line in zip(rule_names, lines[i + 1:]):
            assert re.fullmatch(rf"  {re.escape(name)}\s+green{RATE} yellow{RATE} red{RATE}(  keys \d+)?", line), \
                f"not a rate line for rule {name}: {line!r}"
        assert re.fullmatch(r"  \(default\)\s+" + RATE, lines[i + 1 + len(rule_names)]), lines[i + 1 + len(rule_names)]
    # Traffic flowed, and was policed: the last block has red for every rule.
    last = lines[blocks[-1] + 1:blocks[-1] + 1 + len(rule_names)]
    assert all(float(re.findall(RATE, line)[2][1]) > 0 for line in last), last

    # The summary.
    start = lines.index(next(line for line in lines if line.startswith("Summary after ")))
    summary = lines[start:]

    def row(label):
        line = next(line for line in summary if line.startswith("  " + label))
        packets, byte_count = re.search(r"\s(\d+)\s+(\d+)\s", line[2 + len(label):]).groups()
        return int(packets), int(byte_count), line

    sent, sent_bytes, _ = row("generator sent (testpmd")
    received, received_bytes, _ = row("tricolord received (port 0)")
    port1, port1_bytes, port1_line = row("tricolord sent (port 1)")
    got, got_bytes, _ = row("receiver got (testpmd rxonly RX)")
    tx_dropped = int(re.search(r"tx-dropped (\d+)", port1_line).group(1))
    header = summary.index(next(line for line in summary if line.split()[:2] == ["rule", "packets"]))
    printed = {}
    for name, line in zip(rule_names, summary[header + 1:]):
        fields = line.split()
        assert fields[0] == name, f"summary row {line!r} for rule {name}"
        printed[name] = dict(zip(["packets", "green", "yellow", "red", "forwarded", "dropped"], map(int, fields[1:7])))
    default = summary[header + 1 + len(rule_names)].split()
    assert default[0] == "(default)", default

    assert sent > 0, "the generator sent nothing"
    assert sent == received and sent_bytes == received_bytes, (sent, received)
    for name, r in printed.items():
        assert r["packets"] == r["green"] + r["yellow"] + r["red"] == r["forwarded"] + r["dropped"], (name, r)
        assert r["dropped"] == r["red"], (name, r)  # the demo policies drop red, forward green and yellow
    assert sum(r["packets"] for r in printed.values()) + int(default[1]) == received
    assert sum(r["forwarded"] for r in printed.values()) + int(default[2]) == port1 + tx_dropped
    assert got == port1 and got_bytes == port1_bytes, (got, port1)
    assert any(line.startswith("  accounting: generator sent = tricolord received") for line in summary), summary
    assert not any("DOES NOT ADD UP" in line for line in summary)
    m = re.search(r"tricolord: exit status 0 (\d+\.\d+) s after SIGTERM; mbufs in use (\d+) once its ports had started, "
                  r"(\d+) after the stop", out)
    assert m and float(m.group(1)) < 3 and m.group(2) == m.group(3), m and m.groups()

    # summary.json says the same.
    with open(os.path.join(demo_dir, "summary.json")) as f:
        saved = json.load(f)
    assert saved["problems"] == [] and saved["generator_sent"]["tx_packets"] == sent, saved["generator_sent"]
    for rule in saved["tricolord_final"]["rules"]:
        r = printed[rule["name"]]
        assert (rule["green_packets"], rule["yellow_packets"], rule["red_packets"], rule["dropped_packets"]) == \
            (r["green"], r["yellow"], r["red"], r["dropped"]), rule["name"]
    assert saved["receiver_got"]["rx_packets"] == got
    # Huge pages or not, all three processes alike, and said.
    daemon_log = open(os.path.join(demo_dir, "tricolord.log")).read()
    without = "running without huge pages" in daemon_log
    assert without == (not saved["huge_pages"]), "tricolord's memory differs from the plan"
    assert any(line.startswith("  memory: " + ("without" if without else "huge pages")) for line in lines)
    for testpmd in ("generator.log", "receiver.log"):
        assert ("--no-huge" in open(os.path.join(demo_dir, testpmd)).readline()) == without, testpmd
    if "--no-huge" in args:
        assert without, "--no-huge was not honoured"
    return printed


run([], "daemon.policy", 15, max_wall=60)  # about 20 s; the margin is for a loaded machine
# Without huge pages too, whatever the machine has: the fallback a machine without them takes.
flowgen = run(["--generator", "flowgen", "--seconds", "3", "--no-huge"], "daemon-flowgen.policy", 3, max_wall=45)
assert list(flowgen) == ["steady", "tiered", "destinations"], list(flowgen)
print("main command: ok")
