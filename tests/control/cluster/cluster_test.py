#!/usr/bin/env python3
"""Cluster meters across boxes (issue 26), with a real Redis and three real tricolord:

- redis-server on loopback (its own port and folder, a password), three tricolord on virtual ports (TSC
  clock, each replaying a capture from memory as fast as its worker goes: far more than the budget),
  each with `rule ... cluster global` and --cluster-boxes 3: over an interval T, the green bytes of all
  three together are at most CBS + CIR*T + 3 chunks (+ a burst each), and at least 0.9 x CIR*T; Redis
  sees a lease per chunk, not a call per packet (INFO commandstats).
- Redis killed (SIGKILL): every box falls back to its share within its timeout and goes on forwarding;
  the counters and `stats` say so. Redis started again: the leases resume.
- A slow Redis (DEBUG SLEEP past --cluster-timeout): the boxes fall back, their workers never stop.
- A wrong Redis: the cluster's key of another type (WRONGTYPE), a server that answers the script with
  garbage, a wrong password: a clear message, the fallback, nothing crashes; the leases resume when the
  key is right again.

Run by meson: cluster_test.py BUILD_ROOT.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import daemon_capture  # noqa: E402
from ctl_support import ctl, expect, finish, start_daemon, stop_daemon, wait_for  # noqa: E402

CIR = 500_000  # bytes/s (4 Mbit/s), the budget of all boxes together
CBS = 20_480
RTT_MS = 20
CHUNK = 2 * CIR * RTT_MS // 1000  # 20 000 bytes: what tricolord says at load
BOXES = 3
FRAME = 1042  # bytes on the wire, every packet of the capture
POLICY = f"""\
profile add local 1r2c cir 1gbit cbs 1m
profile add global 1r2c cir {CIR * 8 // 1000}kbit cbs {CBS // 1024}k
rule add all dst 10.0.0.0/8 profile local cluster global
"""
PASSWORD = "s3cret-lease"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """redis-server on 127.0.0.1:port, in its own folder, no persistence; stopped by its PID."""

    def __init__(self, workdir, port):
        self.workdir, self.port, self.process = workdir, port, None

    def start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.workdir, "--requirepass", PASSWORD, "--enable-debug-command", "local"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.cli("PING").strip() == "PONG":
                return True
            time.sleep(0.05)
        return False

    def cli(self, *words, timeout=10):
        run = subprocess.run(["redis-cli", "-p", str(self.port), "--no-auth-warning", "-a", PASSWORD, *words],
                             capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return run.stdout

    def evalsha_calls(self):
        for line in self.cli("INFO", "commandstats").splitlines():
            if line.startswith("cmdstat_evalsha:"):
                return int(line.split("calls=")[1].split(",")[0])
        return 0

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


class GarbageRedis:
    """A server that speaks Redis' protocol and answers the lease script with what no lease is."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.listener.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while self.running:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            conn.settimeout(0.2)
            buffered = b""
            while self.running:
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                buffered += data
                # One reply per command seen (each starts with '*'): the words decide which.
                while b"\r\n" in buffered and buffered.count(b"*") >= 1:
                    text = buffered.decode(errors="replace")
                    if "SCRIPT" in text:
                        conn.sendall(b"$40\r\n" + b"0" * 40 + b"\r\n")
                    elif "EVALSHA" in text:
                        conn.sendall(b"*2\r\n:-5\r\n$3\r\nabc\r\n")  # two elements, a negative grant
                    else:
                        conn.sendall(b"+OK\r\n")
                    buffered = b""
            conn.close()

    def close(self):
        self.running = False
        self.thread.join()
        self.listener.close()


def stats(sock):
    status, out, _ = ctl(sock, "--json", "stats", "rules")
    return json.loads(out)["result"] if status == 0 else None


def cluster_of(result):
    return next(c for c in result["clusters"] if c["name"] == "global")


def wait_until(condition, limit_s):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def all_modes(socks, mode):
    results = [stats(s) for s in socks]
    return all(r is not None and cluster_of(r)["mode"] == mode for r in results)


def main():
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        print("SKIP: redis-server is not installed (./dev installs it)")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="tricolor-cluster-") as workdir:
        policy = os.path.join(workdir, "p.policy")
        open(policy, "w").write(POLICY)
        password_file = os.path.join(workdir, "password")
        with open(os.open(password_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(PASSWORD + "\n")
        capture = os.path.join(workdir, "in.pcap")
        payload = FRAME - 14 - 20 - 8
        daemon_capture.write_pcap(capture, [(i * 10, daemon_capture.ether(daemon_capture.ipv4(
            [10, 9, 0, 1], [10, 1, 0, i % 50 + 1], 17, 0, daemon_capture.l4(17, 1000, 53, payload)), 0x0800))
            for i in range(2000)])
        redis = Redis(workdir, free_port())
        expect("redis-server starts on loopback", redis.start())
        vdevs = [f"net_pcap0,rx_pcap={capture},infinite_rx=1", "net_null0,no-rx=1"]
        cluster_options = ["--cluster-redis", f"127.0.0.1:{redis.port}", "--cluster-boxes", str(BOXES),
                           "--cluster-rtt", str(RTT_MS), "--cluster-timeout", "50", "--cluster-retry", "200",
                           "--cluster-password-file", password_file]
        socks = [os.path.join(workdir, f"box{b}.sock") for b in range(BOXES)]
        boxes = [start_daemon(f"cluster{b}", policy, socks[b], vdevs=vdevs, extra=cluster_options, duration=150)
                 for b in range(BOXES)]
        garbage = None
        try:
            expect("three boxes answer", all(wait_for(s, d) for s, d in zip(socks, boxes)), [d.poll() for d in boxes])
            expect("every box leases from Redis", wait_until(lambda: all_modes(socks, "leased"), 15),
                   [cluster_of(stats(s)) for s in socks])

            # ---- the bound, over about 3 s ----
            t_a0 = time.monotonic()
            before = [stats(s) for s in socks]
            t_a1 = time.monotonic()
            calls_before = redis.evalsha_calls()
            time.sleep(3)
            t_b0 = time.monotonic()
            after = [stats(s) for s in socks]
            t_b1 = time.monotonic()
            calls = redis.evalsha_calls() - calls_before
            green = sum(a["rules"][0]["green_bytes"] - b["rules"][0]["green_bytes"] for a, b in zip(after, before))
            packets = sum(sum(a["rules"][0][f"{c}_packets"] - b["rules"][0][f"{c}_packets"] for c in ("green", "yellow", "red"))
                          for a, b in zip(after, before))
            t_outer, t_inner = t_b1 - t_a0, t_b0 - t_a1
            bound = CBS + CIR * t_outer + BOXES * CHUNK + BOXES * 32 * FRAME
            print(f"note: green {green} B in {t_inner:.3f}..{t_outer:.3f} s across {BOXES} boxes: "
                  f"{green / t_outer / CIR:.4f}..{green / t_inner / CIR:.4f} x CIR; bound {bound:.0f} B; "
                  f"{packets} packets metered, {calls} leases ({calls / t_inner:.0f}/s)")
            expect("green across the boxes <= CBS + CIR*T + boxes x chunk (+ a burst each)", green <= bound, (green, bound))
            expect("green across the boxes >= 0.9 x CIR*T", green >= 0.9 * CIR * t_inner, (green, CIR * t_inner))
            expect("no Redis call per packet: leases per chunk", 0 < calls and calls * 1000 < packets, (calls, packets))
            expect("each box holds at most one chunk", all(cluster_of(a)["balance"] <= CHUNK for a in after),
                   [cluster_of(a) for a in after])

            # ---- Redis killed: the fallback, forwarding goes on ----
            redis.kill()
            killed_at = time.monotonic()
            fell_back = wait_until(lambda: all_modes(socks, "share"), 5)
            print(f"note: every box in its fallback {time.monotonic() - killed_at:.3f} s after Redis was killed")
            expect("Redis killed: every box falls back to its share", fell_back, [cluster_of(stats(s)) for s in socks])
            first = [stats(s) for s in socks]
            time.sleep(1)
            second = [stats(s) for s in socks]
            expect("Redis killed: forwarding goes on, the share passing green", all(
                cluster_of(b)["fallback_packets"] > cluster_of(a)["fallback_packets"] and
                b["rules"][0]["green_packets"] > a["rules"][0]["green_packets"] for a, b in zip(first, second)),
                [(cluster_of(a), cluster_of(b)) for a, b in zip(first, second)])
            share_green = sum(b["rules"][0]["green_bytes"] - a["rules"][0]["green_bytes"] for a, b in zip(first, second))
            print(f"note: in the fallback, {share_green} green bytes in about 1 s across the boxes ({share_green / CIR:.3f} x CIR)")
            expect("the fallback counted (fallbacks >= 1 on each box)", all(cluster_of(b)["fallbacks"] >= 1 for b in second))

            # ---- Redis back: the leases resume ----
            expect("redis-server starts again", redis.start())
            expect("Redis back: every box leases again", wait_until(lambda: all_modes(socks, "leased"), 10),
                   [cluster_of(stats(s)) for s in socks])

            # ---- a slow Redis: DEBUG SLEEP past the timeout ----
            leases_before = [cluster_of(stats(s))["leases"] for s in socks]
            packets_before = [stats(s)["rules"][0]["red_packets"] for s in socks]
            sleeper = subprocess.Popen(["redis-cli", "-p", str(redis.port), "--no-auth-warning", "-a", PASSWORD,
                                        "DEBUG", "SLEEP", "1.5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            slow = wait_until(lambda: all_modes(socks, "share"), 1.4)
            packets_during = [stats(s)["rules"][0]["red_packets"] for s in socks]
            sleeper.wait(timeout=10)
            expect("a slow Redis: the boxes fall back within the sleep", slow)
            expect("a slow Redis: the workers go on metering", all(d > b for d, b in zip(packets_during, packets_before)))
            expect("a slow Redis answering again: the leases resume", wait_until(lambda: all_modes(socks, "leased"), 10) and
                   all(cluster_of(stats(s))["leases"] > n for s, n in zip(socks, leases_before)))

            # ---- a key of the wrong type ----
            redis.cli("DEL", "tricolor:cluster:global")
            redis.cli("SET", "tricolor:cluster:global", "not a bucket")
            expect("a key of another type: the boxes fall back", wait_until(lambda: all_modes(socks, "share"), 10),
                   [cluster_of(stats(s)) for s in socks])
            redis.cli("DEL", "tricolor:cluster:global")
            expect("the key right again: the leases resume", wait_until(lambda: all_modes(socks, "leased"), 10))

            # ---- a server that answers garbage, and a wrong password ----
            garbage = GarbageRedis()
            wrong_password = os.path.join(workdir, "wrong")
            open(wrong_password, "w").write("not-the-password\n")
            os.chmod(wrong_password, 0o600)
            odd = []
            for name, address, pw in (("garbage", f"127.0.0.1:{garbage.port}", password_file),
                                      ("badauth", f"127.0.0.1:{redis.port}", wrong_password)):
                sock = os.path.join(workdir, f"{name}.sock")
                options = ["--cluster-redis", address, "--cluster-boxes", str(BOXES), "--cluster-rtt", str(RTT_MS),
                           "--cluster-retry", "200", "--cluster-password-file", pw]
                daemon = start_daemon(f"cluster-{name}", policy, sock, vdevs=vdevs, extra=options, duration=60)
                answered = wait_for(sock, daemon)
                time.sleep(1.5)
                result = stats(sock) if answered else None
                odd.append((name, daemon, result))
            for name, daemon, result in odd:
                errors = stop_daemon(daemon)
                c = cluster_of(result) if result else {}
                expect(f"{name}: the box meters at its share, forwarding", c.get("mode") == "share" and
                       result["rules"][0]["green_packets"] > 0 and c.get("leases") == 0, c)
                expect(f"{name}: it exits 0 and says what was wrong", daemon.returncode == 0 and (
                    "expected three integers" in errors if name == "garbage" else "AUTH refused" in errors),
                    (daemon.returncode, errors[-1500:]))
        finally:
            errors = [stop_daemon(d) for d in boxes]
            redis.kill()
            if garbage:
                garbage.close()
        expect("the three boxes exit 0", all(d.returncode == 0 for d in boxes), [e[-800:] for e in errors])
        expect("each box said the bound at load", all(
            f"leased in chunks of {CHUNK} bytes" in e and f"= {CBS + BOXES * CHUNK} bytes + CIR*T" in e for e in errors),
            [e[-1500:] for e in errors])
        expect("each box said when Redis went and came back", all(
            "every cluster meter falls back to share" in e and "answers again; leases resume" in e for e in errors))
        expect("each box said what the wrong key was", all("WRONGTYPE" in e for e in errors))
    finish()


if __name__ == "__main__":
    main()
