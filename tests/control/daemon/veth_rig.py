"""Network namespaces and veth pairs of a test's own, and UDP traffic between them, for the tests of
tricolord --xdp (xdp_daemon_test.py, xdp_traffic_test.py).

Two namespaces, the daemon's and the peer's, joined by one or more veth pairs, one IPv4 /24 on each
pair, permanent neighbour entries both ways (no ARP for the XDP program to see). Names carry the test's
PID, so that tests running at once do not meet; `remove()` deletes both namespaces (and with them the
veths), whatever happened.
"""
import json
import os
import subprocess
import sys
import time

# A UDP receiver: binds the ports given, reads each datagram's TOS (IP_RECVTOS), prints "ready", then
# one JSON list of [port, source, tos, payload] when an END datagram comes or after argv[2] seconds.
RECEIVER = r"""
import json, socket, sys, select, time
ports = [int(p) for p in sys.argv[1].split(",")]
socks = []
for p in ports:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("0.0.0.0", p))
    socks.append(s)
print("ready", flush=True)
got = []
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    ready, _, _ = select.select(socks, [], [], 0.1)
    for s in ready:
        data, anc, _, addr = s.recvmsg(2048, socket.CMSG_SPACE(4))
        tos = next((c[2][0] for c in anc if c[0] == socket.IPPROTO_IP), None)
        if data == b"END":
            print(json.dumps(got), flush=True); sys.exit(0)
        got.append([s.getsockname()[1], addr[0], tos, data.decode()[:16]])
print(json.dumps(got), flush=True)
"""

# A UDP sender: argv dst, port, count, src[, size]: datagrams "PORT-I" padded to `size` bytes.
# IP_RECVERR: without it a send the device refuses (a full ring: ENOBUFS) returns success, the datagram
# lost; with it the send fails and is tried again, so that `count` datagrams do leave.
SENDER = r"""
import socket, sys, time
dst, port, count, src = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
size = int(sys.argv[5]) if len(sys.argv) > 5 else 0
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_RECVERR", 11), 1)
s.bind((src, 0))
for i in range(count):
    while True:
        try:
            s.sendto(f"{port}-{i}".encode().ljust(size, b"."), (dst, port))
            break
        except OSError:
            time.sleep(0.0001)
"""

END_PORT = 5009  # the receiver's END datagram; no rule of the tests matches it


def sh(*argv, check=True):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r


def in_ns(ns, *argv):
    return ["ip", "netns", "exec", ns, *argv]


class Rig:
    """Namespaces `d` (the daemon's) and `p` (the peer's); pair i joins d_if[i] (10.(77+i).0.1) and
    p_if[i] (10.(77+i).0.2, and .3 on the first pair)."""

    def __init__(self, tag, pairs=1):
        self.d, self.p = f"txd{tag}", f"txp{tag}"
        self.d_if = [f"txd{tag}" if i == 0 else f"txd{tag}-{i}" for i in range(pairs)]
        self.p_if = [f"txp{tag}" if i == 0 else f"txp{tag}-{i}" for i in range(pairs)]
        self.d_addr = [f"10.{77 + i}.0.1" for i in range(pairs)]
        self.p_addr = [f"10.{77 + i}.0.2" for i in range(pairs)]
        self.p_addr2 = "10.77.0.3"  # a second source on the first pair

    def make(self):
        sh("ip", "netns", "add", self.d)
        sh("ip", "netns", "add", self.p)
        for ns in (self.d, self.p):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for i, (di, pi) in enumerate(zip(self.d_if, self.p_if)):
            sh("ip", "link", "add", di, "netns", self.d, "type", "veth", "peer", "name", pi, "netns", self.p)
            sh("ip", "-n", self.d, "addr", "add", f"{self.d_addr[i]}/24", "dev", di)
            sh("ip", "-n", self.p, "addr", "add", f"{self.p_addr[i]}/24", "dev", pi)
            if i == 0:
                sh("ip", "-n", self.p, "addr", "add", f"{self.p_addr2}/24", "dev", pi)
            for ns, dev in ((self.d, di), (self.p, pi)):
                sh("ip", "-n", ns, "link", "set", dev, "up")
            mac_d = json.loads(sh("ip", "-n", self.d, "-j", "link", "show", di).stdout)[0]["address"]
            mac_p = json.loads(sh("ip", "-n", self.p, "-j", "link", "show", pi).stdout)[0]["address"]
            sh("ip", "-n", self.p, "neigh", "replace", self.d_addr[i], "lladdr", mac_d, "dev", pi, "nud", "permanent")
            for a in (self.p_addr[i], self.p_addr2) if i == 0 else (self.p_addr[i],):
                sh("ip", "-n", self.d, "neigh", "replace", a, "lladdr", mac_p, "dev", di, "nud", "permanent")

    def remove(self):
        for ns in (self.d, self.p):
            sh("ip", "netns", "del", ns, check=False)

    def xdp_attached(self, pair=0):
        """The XDP words of `ip link show` for the daemon's end of a pair, or '' when none is attached."""
        out = sh("ip", "-n", self.d, "-d", "link", "show", self.d_if[pair]).stdout
        return " ".join(w for w in out.split() if "xdp" in w or w.startswith("prog/"))

    def wait_detached(self, limit_s=5):
        deadline = time.monotonic() + limit_s
        while self.xdp_attached() and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.xdp_attached() == ""

    def send(self, port, count, src=None, pair=0, size=0):
        """`count` datagrams from the peer to the daemon's side of `pair`, as fast as one process sends."""
        sh(*in_ns(self.p, sys.executable, "-c", SENDER, self.d_addr[pair], str(port), str(count),
                  src or self.p_addr[pair], str(size)))

    def receiver(self, ports, limit_s=60):
        return Receiver(self, ports, limit_s)


class Receiver:
    """A UDP receiver in the daemon's namespace, until an END datagram (to END_PORT) or its limit."""

    def __init__(self, rig, ports, limit_s):
        self.rig = rig
        self.process = subprocess.Popen(
            in_ns(rig.d, sys.executable, "-c", RECEIVER, ",".join(str(p) for p in [*ports, END_PORT]), str(limit_s)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"

    def result(self):
        time.sleep(0.3)
        sh(*in_ns(self.rig.p, sys.executable, "-c", SENDER.replace('f"{port}-{i}".encode()', 'b"END"'),
                  self.rig.d_addr[0], str(END_PORT), "1", self.rig.p_addr[0]))
        out, _ = self.process.communicate(timeout=90)
        return json.loads(out.strip().splitlines()[-1])


def tag():
    return f"{os.getpid() % 100000}"


def skip_unless_xdp_and_root(xdp_built):
    """Exits as meson's skipped (77), saying why, without the XDP dataplane built or without root."""
    if not xdp_built:
        print("skipped: tricolord was built without the XDP dataplane (clang, bpftool, libbpf-dev; -Dxdp=enabled)")
        sys.exit(77)
    if os.geteuid() != 0:
        print("skipped: attaching XDP programs and making network namespaces needs root")
        sys.exit(77)
