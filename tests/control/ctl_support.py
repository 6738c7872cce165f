"""What the control socket's end-to-end tests share: the programs, checks that report and go on, the
CLI run once, and a tricolord started on virtual ports with a socket of its own.

Each test is run by meson as `TEST.py BUILD_ROOT`.
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

build_root = os.path.abspath(sys.argv[1])  # absolute: a test may run a program in another folder
tricolord = os.path.join(build_root, "control", "tricolord")
tricolorctl = os.path.join(build_root, "control", "tricolorctl")
tricolor_replay = os.path.join(build_root, "control", "tricolor-replay")

failures = []

# Two profiles and two rules (one per source), for the tests that need no traffic.
POLICY = """\
profile add gold trtcm cir 1mbit cbs 8k pir 2mbit pbs 16k
profile add silver 1r2c cir 500kbit cbs 4k
rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold
rule add hosts src 10.2.0.0/16 per src profile silver
"""


def expect(what, condition, detail=""):
    """A check that says ok or FAIL and goes on; finish() exits 1 if any failed."""
    print(("ok   " if condition else "FAIL ") + what + ("" if condition else f": {detail!r}"))
    if not condition:
        failures.append(what)


def finish():
    if failures:
        print(f"{len(failures)} failures: {failures}")
        sys.exit(1)
    print("all checks passed")


def ctl(sock, *words, user=None, stdin=None, timeout=30, cwd=None):
    """tricolorctl --socket SOCK WORDS... (as `user` through setpriv, or with `stdin`, in `cwd`): (status, out, err)."""
    argv = [tricolorctl, "--socket", sock, *words]
    if user:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin,
                       stdin=None if stdin is not None else subprocess.DEVNULL, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def file_prefix(name):
    """The EAL --file-prefix start_daemon gives a daemon of that name (DPDK telemetry's socket is under it)."""
    return f"tricolor-{name}-{os.getpid()}"


def start_daemon(name, policy, sock, vdevs=("net_null0",), extra=(), duration=120, stdout=subprocess.DEVNULL,
                 telemetry=False, env=None):
    """tricolord on lcores 0,1 (--no-huge, its own --file-prefix), the given ports and socket, DPDK
    telemetry off unless asked, `env` added to the environment; it ends by itself after `duration`
    seconds if the test dies."""
    args = [tricolord, "-l", "0,1", "--no-huge", "-m", "512", "--no-pci", *([] if telemetry else ["--no-telemetry"]),
            f"--file-prefix={file_prefix(name)}", "--log-level=lib.eal:warning",
            *(f"--vdev={v}" for v in vdevs),
            "--", "--policy", policy, "--socket", sock, "--duration", str(duration), *extra]
    return subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=None if env is None else dict(os.environ, **env))


def wait_for(sock, daemon, limit_s=30):
    """Until the daemon answers ping (False if it exits or takes longer than limit_s)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and daemon.poll() is None:
        if ctl(sock, "ping")[0] == 0:
            return True
        time.sleep(0.1)
    return False


def wait_metered(sock, packets, limit_s=30):
    """Until the daemon's workers have metered `packets` packets (a capture read through); how many they had."""
    deadline = time.monotonic() + limit_s
    metered = 0
    while time.monotonic() < deadline:
        status, out, _ = ctl(sock, "--json", "stats", "workers")
        metered = json.loads(out)["result"]["worker"]["packets"] if status == 0 else 0
        if metered >= packets:
            break
        time.sleep(0.05)
    return metered


def stop_daemon(daemon):
    """SIGTERM (if it still runs), then its stderr; killed if it does not end within 30 s."""
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
    try:
        return daemon.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        daemon.kill()
        return daemon.communicate()[1]


def frame(payload):
    """A frame of the control socket: bytes as they are, anything else as its JSON (UTF-8, not
    escaped to ASCII, so that a test can send what JSON allows raw)."""
    if not isinstance(payload, bytes):
        payload = json.dumps(payload, ensure_ascii=False).encode()
    return struct.pack("!I", len(payload)) + payload


def recv_exact(conn, n):
    """n bytes from the connection, or None if it closes first."""
    data = b""
    while len(data) < n:
        chunk = conn.recv(min(n - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return data


def raw_reply(conn, timeout=10):
    """One reply frame as JSON, or None if the connection closed first."""
    conn.settimeout(timeout)
    header = recv_exact(conn, 4)
    if header is None:
        return None
    body = recv_exact(conn, struct.unpack("!I", header)[0])
    return None if body is None else json.loads(body)


class NotifyListener:
    """The service manager's end of $NOTIFY_SOCKET: every datagram, with the time it came."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []  # (monotonic time, {key: value})
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            with self.lock:
                self.messages.append((time.monotonic(), fields))

    def having(self, key, since=0.0):
        with self.lock:
            return [(t, m) for t, m in self.messages if key in m and t >= since]

    def wait(self, key, since=0.0, limit_s=20):
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if found := self.having(key, since):
                return found[0]
            time.sleep(0.05)
        return None

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()
