#!/usr/bin/env python3
"""The metrics listener against one unauthenticated client that means harm (issue 21), on a real
daemon with a policy of 2 000 rules (an exposition of about 0.9 MB) and DPDK telemetry on:

(a) 400 ranges in one Range header, 4 such clients at once: each gets 200 and the whole exposition
    (as long as a plain scrape's), and the daemon's resident memory (VmRSS) grows by < 64 MB.
(b) a client streaming 8 KB header lines: answered 431 and cut off (it could send < 16 MB: what the
    listener read, 8 KiB and a linger's 64 KiB, and the sockets' buffers), its memory bounded, nothing
    answered with 200.
(c) slowloris: 8 connections each sending one header line every 1.5 s: a plain scrape meanwhile is
    answered within 2 s, and each slow one is closed (408) within 5 s + 1.5 s of its first byte.
(d) 2 000 idle TCP connections against a daemon whose descriptor limit is 1024: its open
    descriptors stay below before + 64 + 16 and below its limit, `tricolorctl ping` and DPDK
    telemetry answer during the flood, and a scrape succeeds once the idle ones are cut (5 s).
(e) 20 pipelined GET /metrics in one send: 20 whole replies, in order (the worker's idle polls never
    go back); 20 pipelined requests of four kinds (/metrics, /, a 404, HEAD): each answered in turn.
(f) HEAD, 404, 405 (with Allow), 505, a body refused (413), and gzip with Accept-Encoding: gzip,
    which decompresses to an exposition of the same series as a plain scrape.

Every bound asserted is generous: it proves a bound holds, it does not time the listener.

Run by meson: metrics_hostile_test.py BUILD_ROOT.
"""
import gzip
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import ctl, expect, file_prefix, finish, start_daemon, wait_for  # noqa: E402

RULES = 2000
TELEMETRY = "/usr/bin/dpdk-telemetry.py"
DAEMON_FD_LIMIT = 1024
MB = 1 << 20


def write_policy(path):
    with open(path, "w") as f:
        f.write("profile add gold trtcm cir 1mbit cbs 8k pir 2mbit pbs 16k\n")
        for i in range(RULES):
            f.write(f"rule add r{i} dst 10.{i // 256}.{i % 256}.0/24 profile gold\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid):
    """The daemon's resident memory in bytes (VmRSS)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """The daemon's largest VmRSS while the block runs, sampled every 5 ms."""

    def __init__(self, pid):
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def __enter__(self):
        self.before = rss(self.pid)
        self.thread = threading.Thread(target=self.sample)
        self.thread.start()
        return self

    def sample(self):
        while not self.done.is_set():
            self.peak = max(self.peak, rss(self.pid))
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, rss(self.pid))

    def growth(self):
        return self.peak - self.before


def scrape(port, timeout=10, headers=None):
    """(status, body) of GET /metrics through urllib."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return r.status, r.read()


class Conn:
    """A raw HTTP connection that reads replies by their Content-Length."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def send(self, data):
        self.s.sendall(data)

    def _more(self):
        chunk = self.s.recv(1 << 16)
        self.buffer += chunk
        return bool(chunk)

    def reply(self, head_only=False):
        """(status, headers, body) of the next reply, or None if the connection ends first."""
        try:
            while b"\r\n\r\n" not in self.buffer:
                if not self._more():
                    return None
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
            length = 0 if head_only else int(headers.get("content-length", "0"))
            while len(self.buffer) < length:
                if not self._more():
                    return None
            body, self.buffer = self.buffer[:length], self.buffer[length:]
            return int(lines[0].split()[1]), headers, body
        except (OSError, ValueError, IndexError):
            return None

    def ends(self):
        """Whether the server closes the connection (EOF or a reset) with nothing more to say."""
        try:
            while self._more():
                pass
            return True
        except ConnectionResetError:
            return True
        except OSError:
            return False

    def close(self):
        self.s.close()


def request(path="/metrics", method="GET", version="HTTP/1.1", extra=""):
    return f"{method} {path} {version}\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode()


def series(body):
    """Each sample's name and labels (its value left out), in order."""
    return [line.rsplit(" ", 1)[0] for line in body.decode().splitlines() if line and not line.startswith("#")]


def idle_polls(body):
    m = re.search(rb'^tricolor_worker_polls_total\{[^}]*result="idle"[^}]*\} (\d+)$', body, re.M)
    return int(m.group(1)) if m else None


def check_ranges(port, pid):
    _, plain = scrape(port)
    expect(f"a plain scrape: the whole exposition of {RULES} rules ({len(plain) / MB:.2f} MB)",
           len(plain) > 500_000 and plain.endswith(b"\n"), len(plain))
    ranges = "Range: bytes=" + ",".join(["0-"] * 400) + "\r\n"
    results = [None] * 4

    def one(i):
        c = Conn(port, timeout=30)
        c.send(request(extra=ranges + "Connection: close\r\n"))
        results[i] = c.reply()
        c.close()

    with PeakRss(pid) as memory:
        clients = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in clients:
            t.start()
        for t in clients:
            t.join(60)
    got = [(r[0], r[1].get("content-type"), len(r[2])) if r else None for r in results]
    expect("(a) 400 ranges, 4 clients at once: each gets 200 and the whole exposition (a plain scrape's length)",
           all(r and r[0] == 200 and abs(r[2] - len(plain)) <= 64 and r[1].startswith("text/plain") for r in got), got)
    expect(f"(a) ... the daemon's VmRSS grew by < 64 MB ({memory.growth() / MB:.1f} MB)", memory.growth() < 64 * MB,
           memory.growth())


def check_header_flood(port, pid):
    line = b"X-Fill: " + b"a" * 7990 + b"\r\n"  # 8 KB a line (under cpp-httplib's limit of 8 KiB a line)
    sent, answer, error = 0, b"", None
    with PeakRss(pid) as memory:
        c = Conn(port, timeout=5)
        try:
            c.send(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            while sent < 200 * MB:  # cpp-httplib read 400 MB of these
                c.send(line)
                sent += len(line)
        except OSError as e:  # cut off (reset, or the listener stopped reading)
            error = e
        try:
            while chunk := c.s.recv(1 << 16):
                answer += chunk
        except OSError:
            pass
        c.close()
    # What the client could send is what the listener read (8 KiB, then what its linger drops: at most
    # 64 KiB) and what the two sockets' buffers held when it closed.
    expect(f"(b) 8 KB header lines without end: cut off ({error!r} after {sent / MB:.2f} MB sent; "
           "cpp-httplib read 400 MB)", error is not None and sent < 16 * MB, sent)
    expect("(b) ... answered 431, never 200", answer.startswith(b"HTTP/1.1 431 ") and b" 200 OK" not in answer, answer[:80])
    expect(f"(b) ... its VmRSS grew by < 64 MB ({memory.growth() / MB:.1f} MB)", memory.growth() < 64 * MB, memory.growth())


def check_slowloris(port):
    outcome = [None] * 8

    def slow(i):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
                first = time.monotonic()
                s.sendall(b"GET /metrics HTTP/1.1\r\n")
                n = 0
                while time.monotonic() - first < 15:
                    readable, _, _ = select.select([s], [], [], 1.5)
                    if readable:
                        break
                    n += 1
                    try:
                        s.sendall(f"X-Slow-{n}: yes\r\n".encode())
                    except OSError:
                        break
                answer = b""
                try:
                    while chunk := s.recv(4096):
                        answer += chunk
                except ConnectionResetError:
                    pass
                outcome[i] = (time.monotonic() - first, answer[:30])
        except OSError as e:
            outcome[i] = (None, repr(e))

    slow_ones = [threading.Thread(target=slow, args=(i,)) for i in range(8)]
    for t in slow_ones:
        t.start()
    time.sleep(2)  # each has sent a line or two
    started = time.monotonic()
    try:
        status, body = scrape(port, timeout=2)
    except OSError as e:
        status, body = repr(e), b""
    took = time.monotonic() - started
    expect(f"(c) during slowloris (8 connections, a header line each 1.5 s): a scrape answered within 2 s ({took:.2f} s)",
           status == 200 and took < 2 and body.endswith(b"\n"), (status, took))
    for t in slow_ones:
        t.join(30)
    expect("(c) ... each slow one closed within 5 s + 1.5 s of its first byte, answered 408",
           all(o and o[0] is not None and o[0] < 6.5 and o[1].startswith(b"HTTP/1.1 408 ") for o in outcome),
           outcome)


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_limit(pid):
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return 0


def telemetry_answers(prefix):
    r = subprocess.run(["/usr/bin/python3", TELEMETRY, "-f", prefix], input="/tricolor/stats\n",
                       capture_output=True, text=True, timeout=30)
    return '"/tricolor/stats": {' in r.stdout and f'"rules": {RULES}' in r.stdout


def check_idle_flood(port, pid, sock, prefix):
    before, limit = open_fds(pid), fd_limit(pid)
    flood = []
    started = time.monotonic()
    for _ in range(2000):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))  # the handshake completes in the kernel (or in the backlog)
        flood.append(s)
    peak = open_fds(pid)
    pinged = telemetry = False
    try:
        for _ in range(6):  # over about 2 s
            peak = max(peak, open_fds(pid))
            time.sleep(0.3)
        pinged = ctl(sock, "ping")[0] == 0
        telemetry = telemetry_answers(prefix)
        peak = max(peak, open_fds(pid))
        expect(f"(d) 2 000 idle connections: the daemon's descriptors stay below before + 64 + 16 and its limit "
               f"({before} before, {peak} at most, limit {limit})",
               peak < before + 64 + 16 and peak < limit, (before, peak, limit))
        expect("(d) ... tricolorctl ping answers during the flood", pinged)
        expect("(d) ... DPDK telemetry answers during the flood (/tricolor/stats)", telemetry)
        answered = None
        while answered is None and time.monotonic() - started < 12:
            try:
                status, body = scrape(port, timeout=2)
                if status == 200 and body.endswith(b"\n"):
                    answered = time.monotonic() - started
            except OSError:
                time.sleep(0.25)
        expect(f"(d) ... a scrape answered once the idle ones are cut ({answered and round(answered, 1)} s after the flood began; "
               f"they have 5 s)", answered is not None and answered < 12, answered)
    finally:
        for s in flood:
            s.close()


def check_pipelined(port):
    c = Conn(port, timeout=30)
    c.send(request() * 20)
    replies = [c.reply() for _ in range(20)]
    c.close()
    whole = [r is not None and r[0] == 200 and r[2].endswith(b"\n") and b"tricolor_build_info" in r[2] and
             len(r[2]) == int(r[1]["content-length"]) for r in replies]
    polls = [idle_polls(r[2]) if r else None for r in replies]
    expect("(e) 20 pipelined GET /metrics in one send: 20 whole replies", all(whole), whole)
    expect("(e) ... in order: the worker's idle polls never go back from one to the next",
           None not in polls and polls == sorted(polls) and polls[0] < polls[-1], polls)
    # Requests that differ, to see the order: /metrics, /, a 404 and HEAD /metrics, five times.
    kinds = [(request(), 200, False), (request("/"), 200, False), (request("/x"), 404, False),
             (request(method="HEAD"), 200, True)] * 5
    c = Conn(port, timeout=30)
    c.send(b"".join(raw for raw, _, _ in kinds))
    got = []
    for raw, status, head_only in kinds:
        r = c.reply(head_only)
        got.append(r and (r[0], r[1].get("content-type", "").split(";")[0], len(r[2])))
    c.close()
    wanted = [(200, "text/plain"), (200, "text/html"), (404, "text/plain"), (200, "text/plain")] * 5
    expect("(e) ... 20 pipelined requests of four kinds: each answered in its turn",
           [g and g[:2] for g in got] == wanted and all(g and (g[2] == 0) == (i % 4 == 3) for i, g in enumerate(got)),
           got)


def check_methods(port):
    c = Conn(port)
    c.send(request(method="HEAD") + request("/nothing") + request(method="POST") +
           request(extra="Accept-Encoding: gzip\r\n") + request())
    head = c.reply(head_only=True)
    missing, refused, packed, plain = c.reply(), c.reply(), c.reply(), c.reply()
    c.close()
    expect("(f) HEAD /metrics: 200, a Content-Length and no body",
           head and head[0] == 200 and int(head[1]["content-length"]) > 500_000 and head[2] == b"", head and head[:2])
    expect("(f) GET /nothing: 404 (the connection kept)", missing and missing[0] == 404, missing)
    expect("(f) POST /metrics: 405 with Allow: GET, HEAD", refused and refused[0] == 405 and
           refused[1].get("allow") == "GET, HEAD", refused)
    ok = packed and packed[0] == 200 and packed[1].get("content-encoding") == "gzip"
    unpacked = gzip.decompress(packed[2]) if ok else b""
    expect(f"(f) Accept-Encoding: gzip: gzip ({len(packed[2]) if packed else 0} bytes), Vary: Accept-Encoding; it "
           "decompresses to the same series as a plain scrape",
           ok and packed[1].get("vary") == "Accept-Encoding" and plain and series(unpacked) == series(plain[2]),
           packed and packed[1])
    for what, raw, status in (("HTTP/2.0", request(version="HTTP/2.0"), 505),
                              ("a body (Content-Length: 5)", request(extra="Content-Length: 5\r\n") + b"hello", 413)):
        c = Conn(port)
        c.send(raw)
        r = c.reply()
        expect(f"(f) {what}: {status}, and the connection closed", r and r[0] == status and c.ends(), r)
        c.close()


def main():
    if not os.access(TELEMETRY, os.X_OK):
        sys.exit(f"FAIL: {TELEMETRY} is missing (./dev installs dpdk-dev)")
    # This process opens the flood: its own limit raised as far as the hard limit lets it.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2200:
        sys.exit(f"FAIL: this test opens 2 000 sockets; the descriptor limit's hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    with tempfile.TemporaryDirectory(prefix="tricolor-hostile-") as workdir:
        policy = os.path.join(workdir, "p.policy")
        write_policy(policy)
        sock = os.path.join(workdir, "ctl.sock")
        port = free_port()
        daemon = start_daemon("hostile", policy, sock, vdevs=["net_null0,no-rx=1"],
                              extra=["--metrics", f"127.0.0.1:{port}"], duration=120, telemetry=True)
        # It writes a line per rule at startup: read as it comes, so that it never waits on a full pipe.
        said = []
        reader = threading.Thread(target=lambda: said.extend(daemon.stderr))
        reader.start()
        try:
            if not wait_for(sock, daemon, limit_s=60):
                daemon.kill()
                reader.join(30)
                sys.exit("tricolord did not answer ping: " + "".join(said)[-2000:])
            # A limit of 1024 descriptors, soft and hard, as the daemon had (DPDK's EAL raises the
            # soft limit to the hard one at startup, so it is set once the daemon runs).
            resource.prlimit(daemon.pid, resource.RLIMIT_NOFILE, (DAEMON_FD_LIMIT, DAEMON_FD_LIMIT))
            expect(f"the daemon's descriptor limit is {DAEMON_FD_LIMIT}", fd_limit(daemon.pid) == DAEMON_FD_LIMIT,
                   fd_limit(daemon.pid))
            check_methods(port)
            check_pipelined(port)
            check_ranges(port, daemon.pid)
            check_header_flood(port, daemon.pid)
            check_slowloris(port)
            check_idle_flood(port, daemon.pid, sock, file_prefix("hostile"))
            status, _ = scrape(port)
            expect("afterwards: a plain scrape answered", status == 200, status)
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
            reader.join(30)
        expect("the daemon stopped cleanly", daemon.returncode == 0, (daemon.returncode, "".join(said)[-1000:]))
    finish()


if __name__ == "__main__":
    main()
