#!/usr/bin/env python3
"""tricolord --xdp (issue 24, second part), the real daemon on a real veth pair with real packets.

Two network namespaces of the test's own (unique names, removed in `finally`) joined by a veth pair;
tricolord --xdp on one end (native XDP), UDP from a socket in the peer namespace, received by a
socket on the daemon's side that reads each datagram's TOS (IP_RECVTOS). Checked:
  1. an aggregate rule (srTCM in packets: 10 green, then red): green remarked AF41, red dropped;
     `stats` agrees with what was sent and received; a per-key rule meters each source apart, and
     `key list` / `key show` show its keys; a full key table takes the rule's fallback, counted; the sweep deletes an idle key and
     its place goes to a new one;
  2. a profile change through tricolorctl takes effect and keeps the bucket's level (an emptied
     bucket stays empty across a change that makes it larger);
  3. a policy the XDP program cannot run (a PCP remark) is refused by `load`, naming the rule, and
     nothing changes; a rule deleted before others leaves them their keys and counters, and a new rule
     put first starts with a full bucket and counters from zero in the slot it left;
  4. a second tricolord on the same interface is refused;
  5. after SIGTERM the interface has no XDP program; after SIGKILL (of the PID this test started) the
     kernel detaches it and a new start works;
  6. a foreign XDP program (a tiny one built here) makes a start refused, unless --xdp-force.
Every process started here ends by itself (--duration) or is stopped by its own PID.

Run by meson: xdp_daemon_test.py BUILD_ROOT XDP_BUILT (1 or 0).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ctl_support import ctl, expect, finish, tricolord, wait_for  # noqa: E402
from veth_rig import Rig, in_ns, sh, skip_unless_xdp_and_root, tag  # noqa: E402

skip_unless_xdp_and_root(sys.argv[2] == "1")

RIG = Rig(tag())
NS_D, NS_P, IF_D, IF_P = RIG.d, RIG.p, RIG.d_if[0], RIG.p_if[0]
ADDR_D, ADDR_P, ADDR_P2 = RIG.d_addr[0], RIG.p_addr[0], RIG.p_addr2
AF41_TOS = 34 << 2

POLICY = """\
profile add agg srtcm cir 1pps cbs 10pkt ebs 0pkt
profile add host srtcm cir 1pps cbs 3pkt ebs 0pkt
rule add agg proto udp dport 5001 profile agg green remark af41 red drop
rule add hosts proto udp dport 5002 per src capacity 64 profile host red drop
rule add few proto udp dport 5003 per src capacity 1 timeout 1s fallback drop profile host
"""
REFUSED = POLICY + "rule add tagged proto udp dport 5004 profile agg green pcp 3\n"

TINY_XDP = r"""
#include <linux/bpf.h>
__attribute__((section("xdp"), used)) int foreign_pass(struct xdp_md *ctx) { return XDP_PASS; }
char LICENSE[] __attribute__((section("license"), used)) = "GPL";
"""


xdp_attached = RIG.xdp_attached
wait_detached = RIG.wait_detached


def send(port, count, src=ADDR_P):
    RIG.send(port, count, src)


def Receiver():  # noqa: N802 (reads as the class it makes)
    return RIG.receiver([5001, 5002, 5003])


def main():
    work = tempfile.mkdtemp(prefix="tricolor-xdpd-")
    daemons = []
    policy = os.path.join(work, "policy")
    with open(policy, "w") as f:
        f.write(POLICY)
    sock = os.path.join(work, "sock")
    audit = os.path.join(work, "audit.log")

    def start(extra=(), socket_path=sock):
        d = subprocess.Popen(in_ns(NS_D, tricolord, "--xdp", IF_D, "--policy", policy, "--socket", socket_path,
                                   "--audit-log", audit, "--duration", "120", *extra),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        daemons.append(d)
        return d

    def stop(d, sig=signal.SIGTERM):
        if d.poll() is None:
            d.send_signal(sig)  # by the PID this test started (ip netns exec execs tricolord: same PID)
        return d.communicate(timeout=30)[1]

    try:
        RIG.make()

        # 1. traffic
        daemon = start()
        expect("tricolord --xdp starts and answers", wait_for(sock, daemon), daemon.poll())
        expect("an XDP program is attached", "xdp" in xdp_attached(), xdp_attached())
        rx = Receiver()
        send(5001, 25)
        send(5002, 8, ADDR_P)
        send(5002, 8, ADDR_P2)
        send(5003, 2, ADDR_P)
        send(5003, 2, ADDR_P2)
        got = rx.result()
        agg = [g for g in got if g[0] == 5001]
        hosts = [g for g in got if g[0] == 5002]
        expect("aggregate: the green burst arrives (10, or 11 if a second passed)", len(agg) in (10, 11), len(agg))
        expect("aggregate: green arrives remarked AF41", all(g[2] == AF41_TOS for g in agg), agg)
        expect("aggregate: the first 10 sent are the ones that arrive",
               [g[3] for g in agg[:10]] == [f"5001-{i}" for i in range(10)], agg)
        for src in (ADDR_P, ADDR_P2):
            mine = [g for g in hosts if g[1] == src]
            expect(f"per-key: source {src} gets its own 3 green (red dropped)", len(mine) in (3, 4), hosts)
            expect(f"per-key: source {src} unremarked", all(g[2] == 0 for g in mine), mine)
        code, out, err = ctl(sock, "--json", "stats", "rules")
        expect("stats rules answers", code == 0, err)
        rules = {r["name"]: r for r in json.loads(out)["result"]["rules"]} if code == 0 else {}
        a = rules.get("agg", {})
        expect("stats: agg green = received", a.get("green_packets") == len(agg), a)
        expect("stats: agg red = dropped = sent - received",
               a.get("red_packets") == 25 - len(agg) and a.get("dropped_packets") == 25 - len(agg), a)
        h = rules.get("hosts", {})
        expect("stats: hosts 2 keys live and created", h.get("keys", {}).get("live") == 2 and
               h.get("keys", {}).get("created") == 2, h)
        expect("stats: hosts green + red = 16", h.get("green_packets", 0) + h.get("red_packets", 0) == 16, h)
        few = [g for g in got if g[0] == 5003]
        expect("full key table: the second source takes the fallback (drop)", [g[1] for g in few] == [ADDR_P] * 2, few)
        f = rules.get("few", {}).get("keys", {})
        expect("stats: the full table's packets counted", f.get("table_full") == 2 and f.get("live") == 1, f)
        # the sweep: the key idle past its 1 s timeout and the 1 s margin is deleted, its place given back
        time.sleep(3.0)
        code, out, err = ctl(sock, "--json", "key", "list", "few")
        expect("sweep: the idle key deleted", code == 0 and json.loads(out)["result"]["live"] == 0, (out, err))
        rx = Receiver()
        send(5003, 2, ADDR_P2)
        few = [g for g in rx.result() if g[0] == 5003]
        expect("sweep: its place goes to a new key", [g[1] for g in few] == [ADDR_P2] * 2, few)
        f = {r["name"]: r for r in json.loads(ctl(sock, "--json", "stats", "rules")[1])["result"]["rules"]}["few"]["keys"]
        expect("stats after the sweep: one live key, two created", f["live"] == 1 and f["created"] == 2, f)
        code, out, err = ctl(sock, "--json", "key", "list", "hosts")
        listed = json.loads(out)["result"] if code == 0 else {}
        expect("key list hosts: the two sources", sorted(k["key"] for k in listed.get("keys", [])) ==
               [ADDR_P, ADDR_P2] and listed.get("live") == 2, (out, err))
        code, out, err = ctl(sock, "key", "show", "hosts", ADDR_P2)
        expect("key show hosts ADDR: that key", code == 0 and ADDR_P2 in out and ADDR_P + " " not in out, (out, err))
        code, out, err = ctl(sock, "key", "show", "hosts", "10.77.0.9")
        expect("key show of a key not live: refused", code != 0, out)
        code, out, err = ctl(sock, "stats")
        expect("stats (text) answers", code == 0 and "agg" in out, (out, err))
        code, out, err = ctl(sock, "stats", "prometheus")
        expect("stats prometheus has the rule", code == 0 and 'rule="agg"' in out, (out[:300], err))

        # 2. a rate change keeps the level: the bucket is emptied just before; made larger, it stays nearly
        # empty. It refills at 1 pps, so the bound is the seconds from the drain to the second burst, measured
        # (a sanitizer build's tricolorctl is slow), far below a reset bucket's 30.
        rx = Receiver()
        drained_at = time.monotonic()
        send(5001, 25)
        drained = len([g for g in rx.result() if g[0] == 5001])
        code, out, err = ctl(sock, "profile", "change", "agg", "srtcm", "cir", "1pps", "cbs", "30pkt", "ebs", "0pkt")
        expect("profile change through tricolorctl accepted", code == 0, err)
        code, out, err = ctl(sock, "profile", "show", "agg")
        expect("the change is the running policy", "30" in out, out)
        rx = Receiver()
        send(5001, 25)
        refill = int(time.monotonic() - drained_at) + 2
        got = [g for g in rx.result() if g[0] == 5001]
        expect(f"after the change the level was kept (at most the {refill} refilled since the drain, not a full 30)",
               len(got) <= refill < 30, (len(got), refill, drained))
        a2 = {r["name"]: r for r in json.loads(ctl(sock, "--json", "stats", "rules")[1])["result"]["rules"]}["agg"]
        expect("stats after the change: counters carried on", a2["green_packets"] + a2["red_packets"] == 75, a2)

        # 3. a refused policy changes nothing
        before = json.loads(ctl(sock, "--json", "version")[1])["result"]["generation"]
        refused_path = os.path.join(work, "refused")
        with open(refused_path, "w") as f:
            f.write(REFUSED)
        code, out, err = ctl(sock, "load", refused_path)
        expect("load of a policy XDP cannot run: refused naming the rule", code != 0 and "tagged" in err, (code, out, err))
        after = json.loads(ctl(sock, "--json", "version")[1])["result"]["generation"]
        expect("refused load: generation unchanged", after == before, (before, after))
        code, out, _ = ctl(sock, "rule", "list")
        expect("refused load: the rules unchanged", "tagged" not in out and "agg" in out, out)
        with open(policy, "w") as f:
            f.write(REFUSED)
        code, out, err = ctl(sock, "reload")
        expect("reload of a policy XDP cannot run: refused naming the rule", code != 0 and "tagged" in err, err)
        with open(policy, "w") as f:
            f.write(POLICY)
        # Meters, keys and counters follow a rule's name: the first rule deleted, the others keep theirs;
        # a new rule put first takes the deleted one's slot with a full bucket and counters from zero.
        hosts_before = {r["name"]: r for r in json.loads(ctl(sock, "--json", "stats", "rules")[1])["result"]["rules"]}["hosts"]
        code, out, err = ctl(sock, "rule", "delete", "agg")
        expect("rule delete before other rules: taken", code == 0, (code, err))
        code, out, _ = ctl(sock, "--json", "key", "list", "hosts")
        expect("after the delete: the next rule's keys kept", code == 0 and json.loads(out)["result"]["live"] == 2, out)
        hosts_after = {r["name"]: r for r in json.loads(ctl(sock, "--json", "stats", "rules")[1])["result"]["rules"]}["hosts"]
        expect("after the delete: the next rule's counters kept",
               hosts_after["green_packets"] == hosts_before["green_packets"] and
               hosts_after["red_packets"] == hosts_before["red_packets"], (hosts_before, hosts_after))
        rx = Receiver()
        send(5001, 5)
        got = [g for g in rx.result() if g[0] == 5001]
        expect("after the delete: its packets take the default action (forwarded, unremarked)",
               len(got) == 5 and all(g[2] == 0 for g in got), got)
        time.sleep(0.6)  # past the daemon's sweep, which clears the deleted rule's slot
        code, out, err = ctl(sock, "rule", "add", "again", "first", "proto", "udp", "dport", "5001", "profile", "host",
                             "red", "drop")
        expect("a rule added first: taken", code == 0, err)
        rx = Receiver()
        send(5001, 25)
        got = [g for g in rx.result() if g[0] == 5001]
        expect("the new first rule meters afresh: a full bucket of 3 (4 if a second passed)", len(got) in (3, 4), len(got))
        again = {r["name"]: r for r in json.loads(ctl(sock, "--json", "stats", "rules")[1])["result"]["rules"]}["again"]
        expect("the new rule's counters start from zero", again["green_packets"] == len(got) and
               again["green_packets"] + again["red_packets"] == 25, again)
        code, out, err = ctl(sock, "rule", "add", "late", "proto", "udp", "dport", "5009", "profile", "agg")
        expect("a rule added at the end: taken", code == 0, err)
        with open(audit) as f:
            log = f.read()
        expect("audit log has the accepted change and the refusals", "accepted" in log and "tagged" in log, log[-500:])

        # 4. a second daemon on the same interface is refused
        second = start(socket_path=sock + "2")
        err2 = second.communicate(timeout=30)[1]
        expect("a second tricolord on the interface is refused", second.returncode != 0 and IF_D in err2, err2)

        # 5. SIGTERM detaches; SIGKILL: the kernel detaches; a new start works
        err = stop(daemon)
        expect("SIGTERM: the daemon exits 0", daemon.returncode == 0, err[-800:])
        expect("after the stop: no XDP program on the interface", wait_detached(), xdp_attached())
        daemon = start()
        expect("restart answers", wait_for(sock, daemon), daemon.poll())
        stop(daemon, signal.SIGKILL)
        expect("after SIGKILL: the kernel detached the program", wait_detached(), xdp_attached())
        if os.path.exists(sock):
            os.unlink(sock)  # the killed daemon's socket file
        daemon = start()
        expect("after SIGKILL a new start works", wait_for(sock, daemon), daemon.poll())
        stop(daemon)

        # 6. a foreign XDP program
        src = os.path.join(work, "foreign.c")
        obj = os.path.join(work, "foreign.o")
        with open(src, "w") as f:
            f.write(TINY_XDP)
        multiarch = sh("gcc", "-print-multiarch").stdout.strip()
        sh("clang", "-O2", "-target", "bpf", "-I", f"/usr/include/{multiarch}", "-c", src, "-o", obj)
        sh("ip", "-n", NS_D, "link", "set", "dev", IF_D, "xdpdrv", "obj", obj, "sec", "xdp")
        expect("the foreign program is attached", "xdp" in xdp_attached(), xdp_attached())
        third = start()
        err3 = third.communicate(timeout=30)[1]
        expect("a start on an interface with a foreign program is refused", third.returncode != 0 and
               "--xdp-force" in err3, err3)
        daemon = start(["--xdp-force"])
        expect("--xdp-force replaces it", wait_for(sock, daemon), daemon.poll())
        stop(daemon)
        expect("after the forced daemon's stop: no XDP program", wait_detached(), xdp_attached())
    finally:
        for d in daemons:
            if d.poll() is None:
                d.kill()
                d.wait()
        RIG.remove()
        shutil.rmtree(work, ignore_errors=True)
    finish()


main()
