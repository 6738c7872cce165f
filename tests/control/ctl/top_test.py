#!/usr/bin/env python3
"""`tricolorctl top` against a real tricolord with traffic (issue 11): per-rule rates by color.

tricolord reads a capture over and over (net_pcap, infinite_rx=1) into net_null, as fast as its worker
goes, with the TSC clock: rules web and hosts see traffic in all the colors their profiles give (their
meters are far below the offered rate), rule idle sees none. Checked:
- `top --json -n 3`: the rates are positive where traffic flows and zero elsewhere, and they agree with
  the daemon's own counters: between two `stats --json` samples taken before and after top, whose
  window holds top's, the counts top's rates stand for (sum of rate x interval) are at most the
  counters' difference (exact: counters only grow) and at least what is left after the uncovered part
  of the window at up to 4 times the mean rate (the bound is computed from the measured windows; the
  worker's speed varies with the machine's load, never by 4 times within a second).
- rates are of each interval, not averages since the start: a rule changed mid-run to match nothing
  shows 0 in the first refresh wholly after the change, while the other rule goes on.
- `top -b -n 2 --sort red-pps`: plain text (no escape codes), one block per refresh, columns aligned,
  units scaled, rows in descending red-pps.
- the terminal mode in a pseudo-terminal: the alternate screen, q leaves with status 0 and the terminal
  restored (echo back on).
- a bad --sort column: status 1, the valid columns listed.
- `top --rule hosts`: its keys, once the daemon has `key list`; a daemon without it refuses (status 2)
  and this check says it is skipped.

Run by meson: top_test.py BUILD_ROOT.
"""
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture as capture  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import ctl, expect, finish, start_daemon, stop_daemon, tricolorctl, wait_for  # noqa: E402

# Meters far below the offered rate (millions of packets per second): every color shows.
POLICY = """\
profile add gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k
profile add silver 1r2c cir 50mbit cbs 64k
rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold
rule add hosts src 10.2.0.0/16 per src profile silver
rule add idle dst 10.99.0.0/16 profile gold
"""
HOSTS = 8
COUNTERS = [f"{color}_{unit}" for color in ("green", "yellow", "red", "dropped") for unit in ("packets", "bytes")]



def stats(sock):
    code, out, err = ctl(sock, "--json", "stats")
    assert code == 0, err
    return json.loads(out)["result"]


def write_capture(path):
    frames = []
    for i in range(3000):
        if i % 3 == 0:  # web: TCP to port 80, 554-byte frames; a third of the packets
            f = capture.ether(capture.ipv4([10, 9, 9, 9], [10, 1, 0, 1], 6, 0, capture.l4(6, 40000, 80, 500)), 0x0800)
        else:  # hosts: UDP from HOSTS sources of 10.2.0.0/16; more packets than web, so that red-pps
            src = [10, 2, 0, i % HOSTS]  # order (hosts first) is not the policy's
            f = capture.ether(capture.ipv4(src, [10, 3, 0, 1], 17, 0, capture.l4(17, 1, 2, 100)), 0x0800)
        frames.append((i * 10, f))
    capture.write_pcap(path, frames)


def start(workdir, sock, pcap):
    return start_daemon("top", os.path.join(workdir, "p.policy"), sock,
                        vdevs=[f"net_pcap0,rx_pcap={pcap},infinite_rx=1", "net_null0"], extra=["--clock", "tsc"],
                        duration=150)


def by_name(rows, field="name"):
    return {row[field]: row for row in rows}


SCALE = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def human(text):
    """A cell of top's table as a number; None for a blank."""
    if text == "-":
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kMGT]?)", text)
    assert m, f"not a rate: {text!r}"
    return float(m.group(1)) * SCALE[m.group(2)]


def check_json_against_stats(sock):
    before = stats(sock)
    code, out, err = ctl(sock, "top", "--json", "-n", "3", "--interval", "0.5")
    after = stats(sock)
    expect("top --json -n 3: status 0, three objects", code == 0 and len(out.splitlines()) == 3, (code, out, err))
    if code != 0:
        return
    refreshes = [json.loads(line) for line in out.splitlines()]
    expect("each refresh lists the rules in policy order",
           all([r["name"] for r in f["rules"]] == ["web", "hosts", "idle"] for f in refreshes), refreshes)
    colors = ("green", "red", "dropped")
    expect("rates positive where traffic flows (web and hosts: green, red, dropped)",
           all(f_rules[name][f"{c}_{u}"] > 0 for f in refreshes for f_rules in [by_name(f["rules"])]
               for name in ("web", "hosts") for c in colors for u in ("pps", "bps")), refreshes[-1])
    expect("... yellow for web's trTCM, none for hosts' 1r2c",
           all(by_name(f["rules"])["web"]["yellow_pps"] > 0 and by_name(f["rules"])["hosts"]["yellow_pps"] == 0
               for f in refreshes), refreshes[-1])
    expect("zero elsewhere (idle)", all(v == 0 for f in refreshes for k, v in by_name(f["rules"])["idle"].items()
                                        if k != "name"), refreshes[-1])
    expect("hosts' live keys", all(by_name(f["rules"])["hosts"].get("live_keys") == HOSTS for f in refreshes), refreshes[-1])

    # top's window [first sample, last sample], in the daemon's elapsed_s, lies within the two stats.
    top_start = refreshes[0]["elapsed_s"] - refreshes[0]["interval_s"]
    top_end = refreshes[-1]["elapsed_s"]
    window, covered = after["elapsed_s"] - before["elapsed_s"], top_end - top_start
    expect("top's samples lie between the two stats samples", before["elapsed_s"] <= top_start and top_end <= after["elapsed_s"],
           (before["elapsed_s"], top_start, top_end, after["elapsed_s"]))
    expect("... the intervals follow each other", all(abs(refreshes[i]["elapsed_s"] - refreshes[i]["interval_s"] -
                                                        refreshes[i - 1]["elapsed_s"]) < 1e-6 for i in (1, 2)), refreshes)
    uncovered = window - covered
    lower = window / (covered + 4 * uncovered)  # the uncovered part at up to 4x the mean rate
    print(f"     stats window {window:.3f} s, top's {covered:.3f} s; top's rate / stats' rate must be in [{lower:.3f}, {window / covered:.3f}]")
    old, new = by_name(before["rules"]), by_name(after["rules"])
    worst = []
    for name in ("web", "hosts"):
        for counter in COUNTERS:
            color, unit = counter.split("_")
            key = f"{color}_{'pps' if unit == 'packets' else 'bps'}"
            per_unit = 1 if unit == "packets" else 8
            top_count = sum(f_rule[key] * f["interval_s"] / per_unit for f in refreshes for f_rule in [by_name(f["rules"])[name]])
            stats_count = new[name][counter] - old[name][counter]
            if stats_count == 0:
                ok = top_count == 0
            else:
                ratio = (top_count / covered) / (stats_count / window)
                ok = top_count <= stats_count * (1 + 1e-9) + 1e-6 and ratio >= lower
                worst.append((ratio, name, counter))
            if not ok:
                worst.append(("FAIL", name, counter, top_count, stats_count))
    expect("top's rates agree with the difference of two stats samples (every rule with traffic, color, unit)",
           all(w[0] != "FAIL" for w in worst), worst)
    ratios = [w[0] for w in worst if w[0] != "FAIL"]
    if ratios:
        print(f"     rate ratios top/stats: min {min(ratios):.4f} max {max(ratios):.4f}")


def check_change_mid_run(sock):
    top = subprocess.Popen([tricolorctl, "--socket", sock, "top", "--json", "-n", "4", "--interval", "0.5"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    lines = [top.stdout.readline(), top.stdout.readline()]
    code, _, err = ctl(sock, "rule", "change", "web", "dst", "10.50.0.0/16", "proto", "tcp", "dport", "80,443", "profile", "gold")
    lines += [top.stdout.readline(), top.stdout.readline()]
    top.communicate(timeout=30)
    expect("a rule change while top runs is accepted", code == 0, err)
    try:
        refreshes = [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        expect("top --json -n 4 prints four objects", False, lines)
        return
    first, last = by_name(refreshes[0]["rules"]), by_name(refreshes[-1]["rules"])
    expect("before the change web has traffic", first["web"]["red_pps"] > 0, first["web"])
    expect("rates are per interval: web matching nothing shows 0 in the refresh after the change",
           all(last["web"][f"{c}_{u}"] == 0 for c in ("green", "yellow", "red", "dropped") for u in ("pps", "bps")), last["web"])
    expect("... while hosts goes on", last["hosts"]["red_pps"] > 0 and last["hosts"]["green_pps"] > 0, last["hosts"])
    ctl(sock, "rule", "change", "web", "dst", "10.1.0.0/16", "proto", "tcp", "dport", "80,443", "profile", "gold")


def check_batch(sock):
    code, out, err = ctl(sock, "top", "-b", "-n", "2", "--interval", "0.5", "--sort", "red-pps")
    expect("top -b -n 2: status 0, no escape codes", code == 0 and "\x1b" not in out, (code, err))
    blocks = [b for b in out.split("\n\n") if b.strip()]
    expect("... two blocks", len(blocks) == 2, out)
    for block in blocks:
        lines = block.splitlines()
        expect("... a title naming the sort", lines[0].startswith("tricolor top: 3 rules") and "sorted by red-pps" in lines[0], lines[0])
        header, rows = lines[1].split(), [line.split() for line in lines[2:]]
        expect("... the columns", header == ["NAME", "GREEN-PPS", "GREEN-BPS", "YELLOW-PPS", "YELLOW-BPS", "RED-PPS",
                                             "RED-BPS", "DROPPED-PPS", "DROPPED-BPS", "KEYS"], header)
        expect("... aligned: every line of the table as wide, numbers right-aligned under their header",
               len({len(line) for line in lines[1:]}) == 1 and
               all(line[lines[1].index("RED-PPS") + len("RED-PPS") - 1] != " " for line in lines[1:]), block)
        red = [human(row[header.index("RED-PPS")]) for row in rows]
        expect("... rows in descending red-pps (hosts, web, idle: not the policy's order)",
               red == sorted(red, reverse=True) and [row[0] for row in rows] == ["hosts", "web", "idle"], block)
        web = next(row for row in rows if row[0] == "web")
        expect("... units scaled for people (web's red bit/s in M or G)", re.fullmatch(r"\d+(\.\d+)?[MG]", web[header.index("RED-BPS")]),
               web)
        expect("... idle all zero", [cell for cell in next(row for row in rows if row[0] == "idle")[1:]] == ["0"] * 8 + ["-"], block)


def check_terminal(sock):
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(tricolorctl, [tricolorctl, "--socket", sock, "top", "--interval", "0.2"], dict(os.environ, TERM="xterm"))
    seen = b""

    def read_for(seconds):
        nonlocal seen
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    return

    read_for(1.0)
    echo_while_running = termios.tcgetattr(fd)[3] & termios.ECHO
    os.write(fd, b"q")
    status = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and status is None:
        read_for(0.1)
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    text = seen.decode(errors="replace")
    expect("terminal mode: the alternate screen, redrawn in place", text.startswith("\x1b[?1049h") and text.count("\x1b[H") >= 3 and
           "NAME" in text and "web" in text, text[:300])
    expect("... q leaves with status 0", status == 0, status)
    expect("... the terminal restored: the main screen, the cursor, echo back on",
           text.endswith("\x1b[?25h\x1b[?1049l") and not echo_while_running and termios.tcgetattr(fd)[3] & termios.ECHO, text[-100:])
    os.close(fd)


def check_keys(sock):
    code, out, err = ctl(sock, "--json", "key", "list", "hosts", "top", "3", "by", "red-bytes")
    if code == 2 and "unknown command" in out + err:
        code, out, err = ctl(sock, "top", "--rule", "hosts", "-b", "-n", "1", "--interval", "0.3")
        expect("top --rule on a daemon without key list: status 2, its refusal printed", code == 2 and "'key'" in err, (code, err))
        print("SKIP top --rule hosts lists keys: this tricolord has no `key list` yet (issue 11, the daemon side)")
        return
    # All the keys (HOSTS): each is in both samples (with fewer, keys of equal rates change places in
    # the top N between samples, and one back in it shows blanks, as the README says).
    code, out, err = ctl(sock, "top", "--rule", "hosts", "--keys", str(HOSTS), "--json", "-n", "2", "--interval", "0.5",
                         "--sort", "green-pps")
    expect("top --rule hosts --json -n 2: status 0", code == 0, (code, err))
    if code != 0:
        return
    last = [json.loads(line) for line in out.splitlines()][-1]
    expect("... the rule's keys, from 10.2.0.0/16", last["rule"] == "hosts" and last["live_keys"] == HOSTS and
           sorted(k["key"] for k in last["keys"]) == [f"10.2.0.{i}" for i in range(HOSTS)], last)
    expect("... each with traffic (green and red) and no yellow (1r2c)",
           all(k["green_pps"] > 0 and k["red_pps"] > 0 and k["yellow_pps"] == 0 for k in last["keys"]), last)
    green = [k["green_pps"] for k in last["keys"]]
    expect("... sorted by green-pps", green == sorted(green, reverse=True), green)
    code, out, err = ctl(sock, "top", "--rule", "hosts", "--keys", "3", "-b", "-n", "1", "--interval", "0.3")
    lines = out.splitlines()
    expect("top --rule hosts --keys 3 -b: the top 3 keys", code == 0 and lines[1].split()[:3] == ["KEY", "WORKER", "GREEN-PPS"] and
           len([line for line in lines[2:] if line.strip()]) == 3 and "8 live keys, top 3 by red bytes" in lines[0], (code, out, err))


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-top-") as workdir:
        open(os.path.join(workdir, "p.policy"), "w").write(POLICY)
        pcap = os.path.join(workdir, "traffic.pcap")
        write_capture(pcap)
        sock = os.path.join(workdir, "ctl.sock")
        daemon = start(workdir, sock, pcap)
        try:
            if not wait_for(sock, daemon):
                daemon.kill()
                sys.exit("tricolord did not answer ping: " + daemon.communicate()[1][-2000:])
            code, _, err = ctl(sock, "top", "--sort", "reds")
            expect("a bad --sort column: status 1, the valid ones listed", code == 1 and
                   "no column 'reds'; the columns are name, green-pps, green-bps, yellow-pps, yellow-bps, red-pps, red-bps, "
                   "dropped-pps, dropped-bps, keys" in err, (code, err))
            code, _, err = ctl(sock, "top", "--rule", "hosts", "--sort", "name")
            expect("... with --rule, the key columns", code == 1 and "the columns are key, worker, green-pps" in err, (code, err))
            code, _, err = ctl(sock, "top", "--rule", "hosts all by packets")
            expect("--rule takes one word, not more of a command line: status 1",
                   code == 1 and "--rule 'hosts all by packets': a rule's name, one word" in err, (code, err))
            time.sleep(1)  # the first packets metered
            check_json_against_stats(sock)
            check_batch(sock)
            check_change_mid_run(sock)
            check_terminal(sock)
            check_keys(sock)
        finally:
            errors = stop_daemon(daemon)
        expect("the daemon stopped cleanly", daemon.returncode == 0, (daemon.returncode, errors[-1000:]))
    finish()


if __name__ == "__main__":
    main()
