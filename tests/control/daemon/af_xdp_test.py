#!/usr/bin/python3
"""tricolord over net_af_xdp (and net_af_packet), with real packets through real Linux interfaces.

The test makes a network namespace (the "outside host") and veth pairs whose far ends are in it:

    namespace: OA ==veth== A (host)  [tricolord: net_af_xdp0 on A, net_af_xdp1 on B]  B (host) ==veth== OB

tricolord runs as a bump in the wire between A and B. From the namespace, raw packet sockets send
frames out of OA (and a few back out of OB) and capture what arrives on OB (and OA). The policy meters
UDP port 5001 with a packet-mode srTCM (CBS 10, EBS 5, CIR 1 packet/s): a burst of 40 frames gives
exactly 10 green frames (remarked AF41), 5 yellow (remarked AF12) and 25 red (dropped); everything else
takes the default action (forward, unchanged): other UDP, a VLAN-tagged frame, a non-IP frame, the
largest frame the port says it receives. The frames that arrive are compared byte for byte with what
scapy computes (DSCP rewritten, ECN kept, IPv4 checksum recomputed), in order, and tricolord's final
JSON counters must agree with them exactly. A frame one byte longer than the largest is dropped by
the kernel and counted as imissed. The same frames (less the largest) then go through net_af_packet.

With --no-huge and a pool little larger than the two AF_XDP fill queues, tricolord is stopped
(SIGSTOP) while 1000 frames go each way: the kernel can only use fill-queue mbufs that lie in the
memory the PMD registered, so all 2000 arrive only if every mbuf of the pool does (DPDK's default
pool layout leaves 42% of its mbufs outside with 4 KiB pages).

Error paths, each with its message and exit status: an interface that does not exist (exit 3, not a
daemon running one-armed on the port that remains), too few mbufs for AF_XDP's fill queue (exit 3,
and no XDP program left behind), a second tricolord on an interface the first holds (exit 3, and the
first keeps its XDP program: the traffic runs after it). An interface with two RX queues is named in
a note, with small RX rings (the default pool still covers AF_XDP's fill queue).

Everything the test makes is removed in every case (namespace, veths, DPDK runtime directories) and
every process it starts is ended. It exits 77 (meson: skipped) with the reason when this machine or
these privileges cannot run AF_XDP.

Usage: af_xdp_test.py TRICOLORD      (as root)
"""
import glob
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77
VETH_XDP_MTU = 3506
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6


# ---- Inside the namespace: send frames, capture what arrives (run by the test with ip netns exec) ----

def receive(sock):
    """One frame received by the interface, with the VLAN tag the kernel took out put back in."""
    data, ancillary, _flags, address = sock.recvmsg(65536, socket.CMSG_SPACE(32))
    if address[2] == PACKET_OUTGOING:
        return None
    for level, kind, payload in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA:
            status, _len, _snap, _mac, _net, tci, tpid = struct.unpack("IIIHHHH", payload[:20])
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data


def inside():
    spec = json.load(sys.stdin)
    captures = {}
    for name in spec["capture"]:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        # Room for every frame of the test: they are read once all are sent.
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
        sock.bind((name, 0))
        captures[name] = sock
    senders = {}
    for count, (name, frame) in enumerate(spec["send"], 1):
        if name not in senders:
            senders[name] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            senders[name].bind((name, 0))
        senders[name].send(bytes.fromhex(frame))
        if spec["pace"] and count % spec["pace"] == 0:
            time.sleep(0.002)  # a veth's XDP ring holds 256 frames: the sender keeps below that
    if spec["resume"]:
        time.sleep(0.2)  # the veths' queues drain into the AF_XDP sockets
        os.kill(spec["resume"], signal.SIGCONT)
    got = {name: [] for name in captures}
    expected = spec["expect"]
    deadline = time.monotonic() + spec["timeout"]
    settle_until = None  # once every count is reached, a little longer for frames that should not come
    while True:
        now = time.monotonic()
        if settle_until is None and all(len(got[n]) >= expected[n] for n in got):
            settle_until = now + 0.5
        end = min(deadline, settle_until) if settle_until else deadline
        if now >= end:
            break
        ready, _, _ = select.select(list(captures.values()), [], [], end - now)
        for name, sock in captures.items():
            if sock in ready:
                frame = receive(sock)
                if frame is not None:
                    got[name].append(frame.hex())
    json.dump(got, sys.stdout)


# ---- The test ----

def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def capabilities():
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def check_machine():
    if os.geteuid() != 0:
        skip("AF_XDP needs root here (network namespaces, veth pairs, an XDP program on each interface)")
    for tool in ("ip", "sysctl"):
        if shutil.which(tool) is None:
            skip(f"`{tool}` is not installed (iproute2, procps)")
    caps = capabilities()
    missing = [name for name, bit in (("CAP_NET_ADMIN", 12), ("CAP_NET_RAW", 13)) if not caps >> bit & 1]
    if not (caps >> 21 & 1 or caps >> 39 & 1):
        missing.append("CAP_SYS_ADMIN or CAP_BPF")
    if missing:
        skip("these privileges do not allow XDP: " + ", ".join(missing) + " missing")
    try:
        socket.socket(44, socket.SOCK_RAW, 0).close()  # AF_XDP
    except OSError as e:
        skip(f"this kernel gives no AF_XDP socket ({e}): it needs CONFIG_XDP_SOCKETS")
    if not glob.glob("/usr/lib/*/dpdk/pmds-*/librte_net_af_xdp.so*") + \
            glob.glob("/usr/local/lib*/**/librte_net_af_xdp.so*", recursive=True):
        skip("DPDK's net_af_xdp driver (librte_net_af_xdp) is not installed")


def sh(*args, check=True):
    result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")
    return result


class Topology:
    """The namespace and the veth pairs; remove() takes away whatever exists, in any state."""

    def __init__(self, tag):
        self.ns = f"tcxdp{tag}"
        self.a, self.b, self.c = f"txa{tag}", f"txb{tag}", f"txc{tag}"        # host side
        self.oa, self.ob, self.oc = f"toa{tag}", f"tob{tag}", f"toc{tag}"     # in the namespace
        self.made = False

    def make(self):
        try:
            sh("ip", "netns", "add", self.ns)
        except RuntimeError as e:
            skip(f"cannot make a network namespace here: {e}")
        self.made = True
        for host, far, queues in ((self.a, self.oa, 1), (self.b, self.ob, 1), (self.c, self.oc, 2)):
            q = ["numrxqueues", str(queues), "numtxqueues", str(queues)]
            sh("ip", "link", "add", host, *q, "type", "veth", "peer", "name", far, *q)
            sh("ip", "link", "set", far, "netns", self.ns)
            # No IPv6 (router solicitations, MLD) and no addresses: the only frames are the test's.
            for cmd, name in ((["sysctl", "-qw"], host), (["ip", "netns", "exec", self.ns, "sysctl", "-qw"], far)):
                sh(*cmd, f"net.ipv6.conf.{name}.disable_ipv6=1")
            # The largest MTU a veth keeps with an XDP program on it (a 4 KiB page less the XDP headroom
            # and the kernel's skb overhead): above the port's own, so that tricolord says so.
            sh("ip", "link", "set", host, "mtu", str(VETH_XDP_MTU), "up")
            sh("ip", "netns", "exec", self.ns, "ip", "link", "set", far, "mtu", str(VETH_XDP_MTU), "up")

    def xdp_program(self, host):
        """The XDP program attached to a host-side interface, or None."""
        m = re.search(r"prog/xdp id (\d+)", sh("ip", "-d", "link", "show", "dev", host).stdout)
        return m.group(1) if m else None

    def remove(self):
        for host in (self.a, self.b, self.c):
            sh("ip", "link", "del", host, check=False)
        if self.made:
            sh("ip", "netns", "del", self.ns, check=False)


class Daemons:
    """The tricolord processes the test starts; each ends, at the latest in stop_all()."""

    def __init__(self, tricolord, work, tag):
        self.tricolord, self.work, self.tag = tricolord, work, tag
        self.count = 0
        self.running = []
        self.prefixes = []

    def start(self, vdevs, options, eal=()):
        self.count += 1
        prefix = f"tricolor-afxdp-{self.tag}-{self.count}"
        self.prefixes.append(prefix)
        out = open(os.path.join(self.work, f"daemon{self.count}.out"), "w+")
        err = open(os.path.join(self.work, f"daemon{self.count}.err"), "w+")
        args = [self.tricolord, "-l", "0,1", "--no-pci", "--file-prefix", prefix, *eal]
        for vdev in vdevs:
            args += ["--vdev", vdev]
        process = subprocess.Popen(args + ["--"] + options, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        self.running.append(process)
        process.out, process.err = out, err
        return process

    @staticmethod
    def text(f):
        f.flush()
        f.seek(0)
        return f.read()

    def run(self, vdevs, options, timeout=60):
        """Runs a daemon that must end by itself; returns (exit status, stdout, stderr)."""
        process = self.start(vdevs, options)
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            status = f"no exit within {timeout} s (killed)"
        return status, self.text(process.out), self.text(process.err)

    def wait_running(self, process, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "tricolord: running;" in self.text(process.err):
                return True
            if process.poll() is not None:
                return False
            time.sleep(0.1)
        return False

    def stop_all(self):
        for process in self.running:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for prefix in self.prefixes:
            shutil.rmtree(os.path.join("/var/run/dpdk", prefix), ignore_errors=True)


POLICY = """\
profile add burst10 srtcm cir 1pps cbs 10pkt ebs 5pkt
rule add udp5001 proto udp dport 5001 profile burst10 green remark af41 yellow remark af12 red drop
"""
GREEN, YELLOW, BURST, BURST_FRAME = 10, 5, 40, 100
AF41, AF12 = 34, 12


def udp_frame(dport, seq, tos=0, size=100, src="10.9.0.1", dst="10.9.0.2", tag=None):
    """Ethernet (a VLAN tag if `tag`), IPv4, UDP from port 4000 + seq: `size` bytes in all."""
    from scapy.all import IP, UDP, Dot1Q, Ether, Raw
    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    head = eth / Dot1Q(vlan=tag, prio=3) if tag is not None else eth
    packet = head / IP(src=src, dst=dst, tos=tos) / UDP(sport=4000 + seq, dport=dport)
    return bytes(packet / Raw(b"\xa5" * (size - len(packet))))


def remarked(frame, dscp):
    """The frame with a new DSCP, its ECN bits kept and its IPv4 checksum computed again (by scapy)."""
    from scapy.all import IP, Ether
    packet = Ether(frame)
    packet[IP].tos = dscp << 2 | packet[IP].tos & 3
    del packet[IP].chksum
    return bytes(packet)


def frames(largest):
    """The frames sent, (side, frame) in order; those expected on OB and on OA; the one too long (with
    the largest frame, when `largest` is known)."""
    from scapy.all import Ether, Raw
    sent, forward, backward = [], [], []
    for seq in range(BURST):  # ECT(1): the remark keeps it
        frame = udp_frame(5001, seq, tos=1, size=BURST_FRAME)
        sent.append(("oa", frame))
        if seq < GREEN:
            forward.append(remarked(frame, AF41))
        elif seq < GREEN + YELLOW:
            forward.append(remarked(frame, AF12))
    others = [udp_frame(5002, seq, tos=0xb8) for seq in range(5)]                  # EF, no rule
    others.append(udp_frame(5002, 5, tag=100))                                     # VLAN-tagged, no rule
    others.append(bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x88b5) / Raw(b"\x5a" * 86)))
    if largest:
        others.append(udp_frame(5002, 6, size=largest))                            # the largest frame
    for frame in others:
        sent.append(("oa", frame))
        forward.append(frame)
    # One byte more: beyond the veth's MTU untagged, so tagged; dropped by the kernel (imissed).
    too_long = udp_frame(5002, 7, size=largest + 1, tag=200) if largest else None
    if too_long:
        sent.append(("oa", too_long))
    for seq in range(3):
        frame = udp_frame(5002, 10 + seq, src="10.9.0.2", dst="10.9.0.1")
        sent.append(("ob", frame))
        backward.append(frame)
    return sent, forward, backward, too_long


def describe(frame_hex):
    from scapy.all import IP, UDP, Ether
    packet = Ether(bytes.fromhex(frame_hex))
    if IP in packet and UDP in packet:
        return f"{len(frame_hex) // 2} bytes udp {packet[UDP].sport}->{packet[UDP].dport} dscp {packet[IP].tos >> 2}"
    return f"{len(frame_hex) // 2} bytes type {packet.type:#x}"


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--inside":
        inside()
        return
    tricolord = sys.argv[1]
    check_machine()
    tag = str(os.getpid())
    work = tempfile.mkdtemp(prefix="tricolor-afxdp-")
    topology = Topology(tag)
    daemons = Daemons(tricolord, work, tag)
    failures = []

    def expect(what, condition, detail=""):
        if not condition:
            failures.append(f"{what}{': ' + detail if detail else ''}")

    def expect_exit(what, result, status, *fragments):
        code, _out, err = result
        expect(f"{what}: exit status {status}", code == status, f"got {code}; stderr:\n{err}")
        for fragment in fragments:
            expect(f"{what}: says {fragment!r}", fragment in err, f"stderr:\n{err}")

    def start(vdevs, options, eal=()):
        daemon = daemons.start(vdevs, options + ["--json"], eal)
        if not daemons.wait_running(daemon):
            raise AssertionError(f"tricolord did not start ({' '.join(vdevs)}):\n{daemons.text(daemon.err)}")
        return daemon

    def exchange(sent, forward, backward, pace=0, resume=0):
        """Sends from the namespace (then sends SIGCONT to `resume`, a daemon the test stopped); returns
        what arrived on OB (forward) and on OA (backward)."""
        t = topology
        names = {"oa": t.oa, "ob": t.ob}
        spec = {"send": [(names[side], frame.hex()) for side, frame in sent], "capture": [t.oa, t.ob],
                "expect": {t.ob: len(forward), t.oa: len(backward)}, "pace": pace, "resume": resume, "timeout": 10}
        inner = subprocess.run(["ip", "netns", "exec", t.ns, "/usr/bin/python3", os.path.abspath(__file__), "--inside"],
                               input=json.dumps(spec), capture_output=True, text=True, timeout=60)
        if inner.returncode != 0:
            raise AssertionError(f"the sender in the namespace failed:\n{inner.stderr}")
        got = json.loads(inner.stdout)
        return got[t.ob], got[t.oa]

    def stop(daemon):
        """SIGTERM; the final counters."""
        daemon.send_signal(signal.SIGTERM)
        status = daemon.wait(timeout=10)
        expect("tricolord exits 0 at SIGTERM", status == 0, f"exit {status}:\n{daemons.text(daemon.err)}")
        lines = [json.loads(line) for line in daemons.text(daemon.out).splitlines() if line.startswith("{")]
        if not lines or lines[-1].get("event") != "final":
            raise AssertionError(f"no final counters on standard output:\n{daemons.text(daemon.out)}")
        return lines[-1]

    def same_frames(where, have, want):
        """Exactly the frames expected, in order, byte for byte."""
        want = [frame.hex() for frame in want]
        if have != want:
            rows = [f"  {'ok  ' if h == w else 'DIFF'} got {describe(h) if h else '-'}; "
                    f"expected {describe(w) if w else '-'}"
                    for h, w in zip(have + [""] * len(want), want + [""] * len(have)) if h or w]
            failures.append(f"frames arriving on {where}: {len(have)}, expected {len(want)}:\n" + "\n".join(rows[:60]))

    def expect_ports(label, final, received, forward, backward, imissed):
        p0, p1 = final["ports"]
        sizes = lambda frames: (len(frames), sum(map(len, frames)))  # noqa: E731
        expect(f"{label}: port 0 rx", (p0["rx_packets"], p0["rx_bytes"]) == sizes(received), f"{p0}")
        expect(f"{label}: port 0 imissed {imissed}", p0["imissed"] == imissed, f"{p0}")
        expect(f"{label}: port 1 tx", (p1["tx_packets"], p1["tx_bytes"]) == sizes(forward), f"{p1}")
        expect(f"{label}: port 1 rx", (p1["rx_packets"], p1["rx_bytes"]) == sizes(backward), f"{p1}")
        expect(f"{label}: port 0 tx", (p0["tx_packets"], p0["tx_bytes"]) == sizes(backward), f"{p0}")
        for port in (p0, p1):
            expect(f"{label}: port {port['port']}: no rx_nombuf, tx-dropped or errors",
                   port["rx_nombuf"] == port["tx_dropped"] == port["rx_errors"] == port["tx_errors"] == 0, f"{port}")
        expect(f"{label}: port 1 imissed 0", p1["imissed"] == 0, f"{p1}")
        expect(f"{label}: worker packets", final["worker"]["packets"] == len(received) + len(backward),
               f"{final['worker']}")
        # net_af_xdp frees a transmitted mbuf when it next transmits (its completion queue) or closes: up
        # to a burst per port may still be out when the final counters are read.
        held = final["mbufs_in_use"] - final["mbufs_in_use_at_start"]
        expect(f"{label}: mbufs in use after the stop: at most a burst per port more than at the start",
               0 <= held <= 2 * 32, f"{final['mbufs_in_use_at_start']} at start, {final['mbufs_in_use']} after")

    def bump_in_wire(daemon, driver, largest):
        """The policy's frames through a running daemon, then its final counters, each checked."""
        t = topology
        sent, forward, backward, too_long = frames(largest)
        got_forward, got_backward = exchange(sent, forward, backward)
        final = stop(daemon)
        same_frames(f"{t.ob} ({driver})", got_forward, forward)
        same_frames(f"{t.oa} ({driver})", got_backward, backward)
        print(f"{driver}: {t.ob}: {len(got_forward)} frames arrived of {sum(1 for s, _ in sent if s == 'oa')} sent; "
              f"{t.oa}: {len(got_backward)} of {len(backward)}")
        # The counters agree with the frames.
        rule = final["rules"][0]
        for color, count in (("green", GREEN), ("yellow", YELLOW), ("red", BURST - GREEN - YELLOW)):
            expect(f"{driver}: rule {color} packets", rule[f"{color}_packets"] == count, f"{rule}")
            expect(f"{driver}: rule {color} bytes", rule[f"{color}_bytes"] == count * BURST_FRAME, f"{rule}")
        expect(f"{driver}: rule dropped", rule["dropped_packets"] == BURST - GREEN - YELLOW, f"{rule}")
        if rule["first_tick"] is not None:
            span = (rule["last_tick"] - rule["first_tick"]) / final["tick_hz"]
            expect(f"{driver}: the burst was metered within 1 s (the expectation assumes no token was added)",
                   span < 1.0, f"{span:.3f} s")
        received = [frame for side, frame in sent if side == "oa" and frame != too_long]
        default = final["default"]
        others = len(received) - BURST + len(backward)
        expect(f"{driver}: default: packets", default["packets"] == others, f"{default}")
        expect(f"{driver}: default: non-IP", default["non_ip"] == 1, f"{default}")
        expect(f"{driver}: default: matching no rule", default["no_match"] == others - 1, f"{default}")
        expect_ports(driver, final, received, forward, backward, imissed=1 if too_long else 0)  # the frame too long

    try:
        topology.make()
        t = topology
        policy = os.path.join(work, "policy")
        with open(policy, "w") as f:
            f.write(POLICY)
        options = ["--policy", policy]
        pair = [f"net_af_xdp0,iface={t.a}", f"net_af_xdp1,iface={t.b}"]

        # An interface that does not exist: refused, not a daemon running one-armed on the other port.
        result = daemons.run([f"net_af_xdp0,iface=nosuch{tag}", pair[1]], options + ["--duration", "3"])
        expect_exit("an interface that does not exist", result, 3,
                    f"--vdev 'net_af_xdp0,iface=nosuch{tag}': the EAL could not create port net_af_xdp0")

        # Too few mbufs for AF_XDP's fill queue: refused before the interface is touched. (No room kept
        # for shaping, --shape-capacity 0: that check comes first and is errors_test's.)
        result = daemons.run(pair, options + ["--mbufs", "1023", "--shape-capacity", "0", "--duration", "3"])
        expect_exit("--mbufs 1023", result, 3, "net_af_xdp keeps 2048 mbufs in its fill queue", "--mbufs")
        expect("no XDP program left on the interfaces after a refusal",
               t.xdp_program(t.a) is None and t.xdp_program(t.b) is None)

        # Two RX queues (named in a note) and small RX rings (the default pool still covers the fill queue).
        result = daemons.run([f"net_af_xdp0,iface={t.c}"],
                             options + ["--rx-descriptors", "128", "--tx-descriptors", "128", "--duration", "0.5"])
        expect_exit("an interface with two RX queues, 128-descriptor rings", result, 0,
                    f"interface {t.c} has 2 RX queues and this port reads one", f"ethtool -L {t.c} combined 1")

        # Every mbuf in the fill queues usable, in 4 KiB pages (--no-huge), with a pool little larger than
        # the two fill queues (2048 mbufs each). tricolord is stopped (SIGSTOP) while 1000 frames go each
        # way: the kernel can put them only into fill-queue mbufs it accepts (inside the memory the PMD
        # registered), and nothing refills the queues until tricolord continues and forwards them all.
        # The policy does not shape: --shape-capacity 0 keeps the pool at the fill queues' size.
        daemon = start(pair, options + ["--mbufs", "4300", "--shape-capacity", "0"], eal=["--no-huge", "-m", "512"])
        many_forward = [udp_frame(5002, seq) for seq in range(1000)]
        many_backward = [udp_frame(5002, seq, src="10.9.0.2", dst="10.9.0.1") for seq in range(1000)]
        sent = [("oa", f) for f in many_forward] + [("ob", f) for f in many_backward]
        daemon.send_signal(signal.SIGSTOP)
        try:
            got_forward, got_backward = exchange(sent, many_forward, many_backward, pace=100, resume=daemon.pid)
        finally:
            daemon.send_signal(signal.SIGCONT)
        final = stop(daemon)
        same_frames(f"{t.ob} (--no-huge, --mbufs 4300)", got_forward, many_forward)
        same_frames(f"{t.oa} (--no-huge, --mbufs 4300)", got_backward, many_backward)
        expect_ports("--no-huge, --mbufs 4300", final, many_forward, many_forward, many_backward, imissed=0)

        # The bump in the wire, with the memory tricolord chooses.
        daemon = start(pair, options)
        startup = daemons.text(daemon.err)
        print(startup)
        port0 = re.search(r"port 0 net_af_xdp0 \(net_af_xdp, socket \d+\): MTU (\d+)", startup)
        limit = re.search(rf"interface {t.a} has MTU {VETH_XDP_MTU}: frames longer than (\d+) bytes are dropped by the "
                          r"kernel", startup)
        expect("tricolord's port line says its MTU and its largest frame", port0 and limit, startup)
        largest = int(limit.group(1)) if limit else None  # without it, the rest runs without those frames
        if port0 and limit:
            mtu = int(port0.group(1))
            expect(f"the port's MTU {mtu} fits its largest frame {largest} with two VLAN tags", mtu + 14 + 8 <= largest)
        program = t.xdp_program(t.a)
        expect(f"an XDP program on {t.a} while tricolord runs", program is not None)

        # A second tricolord on an interface the first holds: refused, and the first keeps its program.
        result = daemons.run([f"net_af_xdp0,iface={t.a}"],
                             options + ["--socket", os.path.join(work, "second.sock"), "--duration", "3"])
        expect_exit("a second tricolord on the same interface", result, 3, "cannot set up RX queue 0",
                    f"ip link set dev {t.a} xdp off")
        expect("the first tricolord keeps its XDP program", t.xdp_program(t.a) == program,
               f"was {program}, now {t.xdp_program(t.a)}")

        bump_in_wire(daemon, "net_af_xdp", largest)
        expect(f"no XDP program left on {t.a} after the stop", t.xdp_program(t.a) is None)

        # The same frames through net_af_packet (PACKET_MMAP sockets) on the same interfaces, less the
        # largest frame: its default ring frames hold 2048 bytes.
        daemon = start([f"net_af_packet0,iface={t.a}", f"net_af_packet1,iface={t.b}"], options)
        bump_in_wire(daemon, "net_af_packet", None)
    except AssertionError as e:
        failures.append(str(e))
    except Exception:  # noqa: BLE001 (said with the failures found so far)
        failures.append(traceback.format_exc())
    finally:
        daemons.stop_all()
        topology.remove()
        shutil.rmtree(work, ignore_errors=True)

    if failures:
        print(f"{len(failures)} failures:", file=sys.stderr)
        for failure in failures:
            print(f"- {failure}", file=sys.stderr)
        sys.exit(1)
    print("tricolord over net_af_xdp (and net_af_packet): every check passed")


if __name__ == "__main__":
    main()
