#!/usr/bin/env python3
"""The control socket against careless and hostile local clients (issue 21), with the real daemon and
the real CLI. Each check names the finding it covers; each failed on the code before the issue.

- 3: the audit log is created 0640 (it says who changed what).
- 7: one client writing 1 000 pipelined `stats prometheus` (2 000 rules) and never reading: the
  daemon's resident memory grows by less than 64 MB (was 77 MB -> 1.01 GB), and another client's
  `ping` is answered within a second meanwhile (was 6.3 s).
- 8: a client that sends 20 000 pings and shuts down its writing side without reading the replies:
  the control thread stays mostly asleep (was 100% of a CPU).
- 9: 256 idle connections of a group member: the ones beyond the group's slots are refused saying
  why (tricolorctl as that member exits 3, unreachable); root still gets in (slots kept for it); with
  --socket-idle-timeout 2 the idle ones are closed with a reply saying so, and the member gets in;
  tricolorctl reading a script connects again after its connection was closed for being idle.
- 10: 199 requests, each followed at once by close(): all applied, each with its audit line.
- 11: 40 pipelined cycles of `rule add kN ... per src capacity 1m` and `rule delete kN`: all accepted
  (was refused from cycle 27, "cannot allocate its key index").
- 13: SIGUSR1, SIGUSR2 and SIGALRM: the daemon goes on (each said on stderr); SIGHUP reloads the policy
  file (said on stderr; service_test.py checks the reload itself); SIGTERM still stops it cleanly with
  its final counters, removing its socket.
- 1 (the daemon's half): `save PATH` is refused (the daemon writes no file); `save` returns the text.
- 17: `ping extra` and the like refused; `key list ... top 5 top 6` and `key show hosts 10.0.0.1/99`
  refused; a port listed 50 000 times refused; a refused 60 MiB token is not echoed whole; a request
  that is not JSON is told at which byte.

Run by meson: hostile_test.py BUILD_ROOT.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import (POLICY, ctl, expect, finish, frame, raw_reply, start_daemon, stop_daemon,  # noqa: E402
                         tricolorctl, wait_for)

NOBODY = 65534


def request(command, **fields) -> bytes:
    return frame({"command": command, **fields})


def connect(sock):
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(sock)
    return conn


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    """The main thread's (the control loop's) user + system time, in clock ticks."""
    fields = open(f"/proc/{pid}/task/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def big_policy(rules):
    lines = ["profile add gold trtcm cir 1mbit cbs 8k pir 2mbit pbs 16k"]
    lines += [f"rule add r{i} dst 10.{i // 250}.{i % 250}.0/24 profile gold" for i in range(rules)]
    return "\n".join(lines) + "\n"


# A group member's connections, held by a process of its own: how each one ended (a reply's
# "closing", or "open" if it still was at the end).
HOLDER = r"""
import json, select, socket, struct, sys, time
path, count, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conns = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    conns.append(s)
print("connected", flush=True)
ended = {}
deadline = time.monotonic() + hold
while time.monotonic() < deadline and len(ended) < count:
    ready, _, _ = select.select([c for c in conns if c.fileno() not in ended], [], [], 0.2)
    for c in ready:
        data = c.recv(65536)
        reason = "closed"
        if len(data) >= 4:
            reason = json.loads(data[4:4 + struct.unpack("!I", data[:4])[0]]).get("closing", "none")
        ended[c.fileno()] = reason
print(json.dumps({r: list(ended.values()).count(r) for r in set(ended.values())} | {"open": count - len(ended)}), flush=True)
"""


def check_audit_mode(workdir):
    mode = os.stat(os.path.join(workdir, "audit.log")).st_mode & 0o777
    expect("3: the audit log is created 0640", mode == 0o640, oct(mode))


def check_daemon_commands(sock):
    code, _, err = ctl(sock, "ping", "extra")
    expect("17: ping extra: refused, exit 2", code == 2 and "ping: takes nothing after it" in err, (code, err))
    for words in (["version", "x"], ["names", "x"]):
        code, _, err = ctl(sock, *words)
        expect(f"17: {' '.join(words)}: refused", code == 2, (code, err))
    code, _, err = ctl(sock, "key", "list", "hosts", "top", "5", "top", "6")
    expect("17: key list ... top 5 top 6: refused", code == 2 and "`top N` or `all`, once" in err, (code, err))
    code, _, err = ctl(sock, "key", "show", "hosts", "10.2.0.1/99")
    expect("17: key show hosts 10.2.0.1/99: refused", code == 2 and "is not a key of rule hosts" in err, (code, err))
    code, _, err = ctl(sock, "pong")
    expect("an unknown command names the language's and the daemon's", code == 2 and "(the daemon)" in err, err)

    huge = request("rule add x proto " + "t" * (60 << 20) + " profile gold")  # made first: 2 s idle closes
    conn = connect(sock)
    conn.sendall(frame(b'{"command":"ping"} x'))
    reply = raw_reply(conn)
    expect("17: a request that is not JSON is told at which byte",
           reply and "at byte 20 of 20" in reply["error"]["message"], reply)
    conn.sendall(huge)
    reply = raw_reply(conn, timeout=60)
    expect("17: a refused 60 MiB token is not echoed whole (its reply is small)",
           reply and not reply["ok"] and len(json.dumps(reply)) < 4096, len(json.dumps(reply or {})))
    conn.sendall(request("rule add dup dport " + ",".join(["80"] * 50_000) + " profile gold"))
    reply = raw_reply(conn)
    expect("17: a port listed 50 000 times: refused",
           reply and not reply["ok"] and "ports 80 and 80 are the same port" in reply["error"]["message"], reply)
    conn.sendall(request("save /etc/tricolor-test-must-not-exist"))
    reply = raw_reply(conn)
    expect("1: save PATH is refused: the daemon writes no file",
           reply and not reply["ok"] and "tricolord writes no files" in reply["error"]["message"] and
           not os.path.exists("/etc/tricolor-test-must-not-exist"), reply)
    conn.sendall(request("save"))
    reply = raw_reply(conn)
    expect("1: save returns the running policy's text and its counts",
           reply and reply["ok"] and reply["output"] == ctl(sock, "show")[1] and reply["result"]["rules"] == 2, reply)
    conn.close()


def check_pipelined_replies(sock, pid):
    """7: 1 000 pipelined `stats prometheus`, never read."""
    before = rss_kb(pid)
    greedy = connect(sock)
    greedy.sendall(request("stats prometheus") * 1000)
    time.sleep(0.5)
    started = time.monotonic()
    code, out, _ = ctl(sock, "ping", timeout=30)
    waited = time.monotonic() - started
    expect("7: another client's ping is answered within 1 s meanwhile", (code, out) == (0, "pong\n") and waited < 1.0,
           (code, waited))
    time.sleep(2)
    grown = (rss_kb(pid) - before) / 1024
    print(f"     resident memory grew by {grown:.1f} MB")
    expect("7: the daemon's resident memory grows by less than 64 MB", grown < 64, grown)
    greedy.close()


def check_half_closed(sock, pid):
    """8: 20 000 pings, then shutdown(SHUT_WR), replies never read."""
    conn = connect(sock)
    sender = threading.Thread(target=lambda: conn.sendall(request("ping") * 20_000))
    sender.start()
    sender.join(30)
    conn.shutdown(socket.SHUT_WR)
    time.sleep(1)
    hz = os.sysconf("SC_CLK_TCK")
    first, started = cpu_ticks(pid), time.monotonic()
    time.sleep(3)
    share = (cpu_ticks(pid) - first) / hz / (time.monotonic() - started)
    print(f"     the control thread used {share:.0%} of a CPU")
    expect("8: a half-closed client with unread replies does not make the control thread spin (under 20% of a CPU)", share < 0.2, share)
    conn.close()


def check_connection_slots(sock):
    """9: 256 idle connections of a group member."""
    holder = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                               sys.executable, "-c", HOLDER, sock, "256", "8"],
                              stdout=subprocess.PIPE, text=True)
    try:
        expect("9: the member's 256 connections are made", holder.stdout.readline().strip() == "connected")
        time.sleep(0.3)
        code, out, err = ctl(sock, "ping")
        expect("9: root still gets in (slots kept for it)", (code, out) == (0, "pong\n"), (code, err))
        code, _, err = ctl(sock, "ping", user=NOBODY)
        expect("9: a member beyond the slots is refused saying why: exit 3 (unreachable)",
               code == 3 and "too many clients" in err, (code, err))
        ended = json.loads(holder.stdout.readline())
        print(f"     the member's connections: {ended}")
        expect("9: beyond 120, refused at once (\"too-many-clients\"); the 120 idle ones closed after 2 s (\"idle\")",
               ended.get("too-many-clients") == 136 and ended.get("idle") == 120 and ended.get("open") == 0, ended)
        code, out, err = ctl(sock, "ping", user=NOBODY)
        expect("9: the member gets in once the idle ones are closed", (code, out) == (0, "pong\n"), (code, err))
    finally:
        holder.wait(30)


def check_idle_reconnect(sock):
    """9: a kept connection (the shell's, a script's) outlives the daemon's idle close."""
    script = subprocess.Popen([tricolorctl, "--socket", sock], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    script.stdin.write("ping\n")
    script.stdin.flush()
    time.sleep(3.5)  # the daemon closes the idle connection after 2 s
    script.stdin.write("version\n")
    script.stdin.close()
    script.wait(30)
    out, err = script.stdout.read(), script.stderr.read()
    expect("9: tricolorctl connects again after an idle close, and the next command is answered",
           script.returncode == 0 and out.startswith("pong\ntricolord "), (script.returncode, out, err))


def check_request_then_close(sock, workdir):
    """10: a request followed at once by close()."""
    audit = os.path.join(workdir, "audit.log")
    lines_before = open(audit).read().count("accepted: 'rule add gone")
    for i in range(199):
        conn = connect(sock)
        conn.sendall(request(f"rule add gone{i} dst 10.77.{i}.0/24 profile gold"))
        conn.close()
    deadline = time.monotonic() + 20
    applied = 0
    while time.monotonic() < deadline:
        applied = ctl(sock, "rule", "list")[1].count("rule add gone")
        if applied == 199:
            break
        time.sleep(0.2)
    expect("10: 199 requests each followed at once by close(): all applied", applied == 199, applied)
    audited = open(audit).read().count("accepted: 'rule add gone") - lines_before
    expect("10: ... each with its audit line", audited == 199, audited)


def check_pipelined_key_tables(sock):
    """11: pipelined add/delete of a per-key rule of capacity 1m."""
    conn = connect(sock)
    pipelined = b""
    for i in range(40):
        pipelined += request(f"rule add k{i} src 10.9.0.0/16 per src capacity 1m profile gold")
        pipelined += request(f"rule delete k{i}")
    conn.sendall(pipelined)
    replies = [raw_reply(conn, timeout=60) for _ in range(80)]
    refused = [(i // 2, r["error"]["message"]) for i, r in enumerate(replies) if not (r and r["ok"])]
    expect("11: 40 pipelined cycles of a 1m-key rule added and deleted: all accepted", not refused, refused[:2])
    conn.close()


def check_signals(daemon, sock):
    """13: HUP (a reload), USR1, USR2, ALRM leave it running."""
    for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        daemon.send_signal(sig)
        time.sleep(0.3)
        code, out, _ = ctl(sock, "ping")
        expect(f"13: after {sig.name} the daemon still answers", daemon.poll() is None and code == 0, (daemon.poll(), code))


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-hostile-") as workdir:
        os.chmod(workdir, 0o755)  # the group member reaches the socket's folder
        policy = os.path.join(workdir, "p.policy")
        open(policy, "w").write(POLICY)
        sock = os.path.join(workdir, "ctl.sock")
        counters = open(os.path.join(workdir, "counters.txt"), "w")
        daemon = start_daemon("hostile", policy, sock, stdout=counters,
                              extra=["--audit-log", os.path.join(workdir, "audit.log"), "--socket-group", "nogroup",
                                     "--socket-idle-timeout", "2"])
        stderr = ""
        try:
            expect("the daemon answers ping", wait_for(sock, daemon))
            check_audit_mode(workdir)
            check_daemon_commands(sock)
            check_request_then_close(sock, workdir)
            check_pipelined_key_tables(sock)
            check_half_closed(sock, daemon.pid)
            check_connection_slots(sock)
            check_idle_reconnect(sock)
            check_signals(daemon, sock)
            big = os.path.join(workdir, "big.policy")
            open(big, "w").write(big_policy(2000))
            code, _, err = ctl(sock, "load", big, timeout=120)
            expect("a policy of 2 000 rules loads", code == 0, err)
            check_pipelined_replies(sock, daemon.pid)
        finally:
            stderr = stop_daemon(daemon)
        counters.close()
        final = open(os.path.join(workdir, "counters.txt")).read()
        expect("13: SIGTERM stops it cleanly (status 0, its final counters)",
               daemon.returncode == 0 and "r1999" in final, (daemon.returncode, final[-300:], stderr[-500:]))
        for sig in ("SIGUSR1", "SIGUSR2", "SIGALRM"):
            expect(f"13: {sig} said on stderr", f"{sig} received: ignored" in stderr, stderr[-2000:])
        expect("13: SIGHUP reloads the policy file, said on stderr", "SIGHUP: file '" in stderr, stderr[-2000:])
        expect("13: the socket file is removed", not os.path.exists(sock))
    finish()


if __name__ == "__main__":
    main()
