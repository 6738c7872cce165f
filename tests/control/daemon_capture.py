"""Captures and policies for the daemon's tests: frames written as bytes (no scapy: fast at any size),
in a pcap with microsecond timestamps, the resolution net_pcap gives the daemon's RX-timestamp clock.
"""
import json
import os
import random
import signal
import struct
import subprocess
import time

# Every algorithm in byte and packet mode, color-blind and color-aware (a DSCP input, a PCP color map),
# per-key meters, a parent, DSCP and PCP remarks, and a rule for jumbo frames.
POLICY = """\
profile add gold trtcm cir 1mbit cbs 8k pir 3mbit pbs 16k
profile add dnsp srtcm cir 300pps cbs 16pkt ebs 64pkt
profile add voice 1r2c cir 800kbit cbs 4k
profile add bulk trtcm4115 cir 2mbit cbs 16k eir 2mbit ebs 16k
profile add pk trtcm cir 2kpps cbs 50pkt pir 4kpps pbs 100pkt
profile add pk4115 trtcm4115 cir 1kpps cbs 20pkt eir 1kpps ebs 20pkt
profile add pk1 1r2c cir 10pps cbs 5pkt
profile add sr srtcm cir 3mbit cbs 20k ebs 40k
profile add guest 1r2c cir 16kbit cbs 2k
profile add guests-total srtcm cir 400kbit cbs 16k ebs 16k
color-map add prio pcp yellow 1-3 red 0
rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold yellow remark af12 red drop
rule add dns proto udp dport 53 profile dnsp red drop
rule add voice dscp ef profile voice red remark be
rule add bulk6 src 2001:db8::/32 profile bulk input dscp length l3 yellow remark af12 red drop
rule add tagged vlan 7 profile pk input map pcp-map prio red drop yellow pcp 1
rule add jumbo dst 10.9.0.0/16 profile sr red drop
rule add flows proto udp dport 7000 per 5-tuple timeout 1s profile pk1 red drop
rule add pk4 dst 10.4.0.0/16 profile pk4115 input dscp green>yellow remark af11
rule add guests dst 192.168.8.0/24 profile guest per src timeout 10s parent guests-total red drop
"""

MAC_DST = bytes.fromhex("020000000002")
MAC_SRC = bytes.fromhex("020000000001")
AF_DSCPS = [0, 10, 12, 14, 18, 20, 22, 46]


def checksum(header):
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4(src, dst, proto, dscp, payload):
    header = struct.pack("!BBHHHBBH4s4s", 0x45, dscp << 2, 20 + len(payload), 0, 0, 64, proto, 0, bytes(src), bytes(dst))
    return header[:10] + struct.pack("!H", checksum(header)) + header[12:] + payload


def ipv6(src, dst, proto, dscp, payload):
    first = (6 << 28) | (dscp << 22)
    return struct.pack("!IHBB16s16s", first, len(payload), proto, 64, bytes(src), bytes(dst)) + payload


def l4(proto, sport, dport, size):
    body = bytes(max(size, 0))
    if proto == 6:
        return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x10, 65535, 0, 0) + body
    return struct.pack("!HHHH", sport, dport, 8 + len(body), 0) + body


def ether(l3, ethertype, vlan=None):
    tag = b"" if vlan is None else struct.pack("!HH", 0x8100, vlan)
    return MAC_DST + MAC_SRC + tag + struct.pack("!H", ethertype) + l3


def frame(rng, t):
    """One frame for one of the policy's rules (or none), chosen by `rng`."""
    kind = rng.randrange(11)
    size = rng.choice([18, 100, 500, 1400])
    if kind == 0:  # web
        return ether(ipv4([10, 9, 9, 9], [10, 1, rng.randrange(4), 1], 6, 0, l4(6, 40000, rng.choice([80, 443]), size)), 0x0800)
    if kind == 1:  # dns
        return ether(ipv4([10, 2, 0, 1], [10, 3, 0, 1], 17, 0, l4(17, 5353, 53, rng.choice([40, 80]))), 0x0800)
    if kind == 2:  # voice
        return ether(ipv4([10, 5, 0, 1], [10, 6, 0, 1], 17, 46, l4(17, 16384, 16385, 160)), 0x0800)
    if kind == 3:  # bulk6, colour-aware by DSCP
        src = bytes.fromhex("20010db8000000000000000000000001")
        dst = bytes.fromhex("20010db9000000000000000000000002")
        return ether(ipv6(src, dst, 17, rng.choice(AF_DSCPS), l4(17, 1000, 2000, size)), 0x86DD)
    if kind == 4:  # tagged: VLAN 7, input colour from the PCP
        pcp = rng.randrange(8)
        return ether(ipv4([10, 7, 0, 1], [10, 8, 0, 1], 17, 0, l4(17, 1, 2, 60)), 0x0800, vlan=(pcp << 13) | 7)
    if kind == 5:  # jumbo frames: several mbufs in the daemon
        return ether(ipv4([10, 2, 0, 9], [10, 9, 0, 1], 17, 0, l4(17, 9, 9, rng.choice([3000, 8900]))), 0x0800)
    if kind == 6:  # flows: per 5-tuple, 64 of them
        return ether(ipv4([10, 11, 0, rng.randrange(64)], [10, 12, 0, 1], 17, 0, l4(17, 1234, 7000, 64)), 0x0800)
    if kind == 7:  # pk4, colour-aware by DSCP, packet mode
        return ether(ipv4([10, 3, 3, 3], [10, 4, 0, 1], 17, rng.choice(AF_DSCPS), l4(17, 5, 6, 64)), 0x0800)
    if kind == 8:  # guests: per source under a parent
        return ether(ipv4([172, 16, rng.randrange(4), rng.randrange(50)], [192, 168, 8, 1], 6, 0, l4(6, 3000, 22, size)), 0x0800)
    if kind == 9:  # no rule
        return ether(ipv4([10, 200, 0, 1], [10, 201, 0, 1], 17, 0, l4(17, 1, 1, 20)), 0x0800)
    return MAC_DST + MAC_SRC + b"\x08\x06" + bytes(28)  # ARP: not IP


def write_pcap(path, packets, start_us=1_767_225_600_000_000, link_type=1):
    """packets: (offset in microseconds, frame bytes), in time order; frames of link_type (Ethernet)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, link_type))
        for offset_us, data in packets:
            t = start_us + offset_us
            f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(data), len(data)))
            f.write(data)


def mixed_capture(path, seconds=3.0, rate_pps=10000, seed=9):
    """Traffic for every rule of POLICY at about rate_pps, microsecond timestamps; returns the count."""
    rng = random.Random(seed)
    packets, t = [], 0
    end = int(seconds * 1_000_000)
    while t < end:
        packets.append((t, frame(rng, t)))
        t += rng.randrange(1, 2 * 1_000_000 // rate_pps)
    write_pcap(path, packets)
    return len(packets)


def read_pcap_frames(path):
    """The frames of a pcap (either timestamp resolution), without their record headers."""
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), f"{path}: not a little-endian pcap"
    frames, at = [], 24
    while at + 16 <= len(data):
        _, _, caplen, _ = struct.unpack("<IIII", data[at:at + 16])
        frames.append(data[at + 16:at + 16 + caplen])
        at += 16 + caplen
    return frames


def prefix_runtime_dir(prefix):
    """Where DPDK keeps the runtime files of a --file-prefix: under /var/run/dpdk for root, else the
    user's runtime directory."""
    base = "/var/run" if os.geteuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    return os.path.join(base, "dpdk", prefix)


def runtime_dir(args):
    """The DPDK runtime directory of a process started with these EAL arguments (its --file-prefix, in
    either form, or DPDK's default "rte")."""
    prefix = "rte"
    for i, a in enumerate(args):
        if a.startswith("--file-prefix="):
            prefix = a.split("=", 1)[1]
        elif a == "--file-prefix" and i + 1 < len(args):
            prefix = args[i + 1]
    return prefix_runtime_dir(prefix)


def run_through(args, done, label="tricolord", limit_s=60):
    """Runs tricolord (args: with --json --stats-interval) until done(stats) holds for a stats line, then
    stops it with SIGTERM; returns (the final JSON object, its stderr). Fails if it takes longer than
    limit_s or the daemon does not exit 0."""
    daemon = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + limit_s
    try:
        for line in daemon.stdout:
            stats = json.loads(line)
            if done(stats):
                daemon.send_signal(signal.SIGTERM)
                break
            assert time.monotonic() < deadline, f"{label}: not through after {limit_s} s: {stats['ports']}"
        rest, errors = daemon.communicate(timeout=30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert daemon.returncode == 0, f"{label}: tricolord exited {daemon.returncode}: {errors[-2000:]}"
    final = [json.loads(line) for line in rest.splitlines() if line.strip()][-1]
    assert final["event"] == "final", final
    # A daemon that stopped leaves no runtime directory (a prefix per run would leave one each).
    assert not os.path.exists(runtime_dir(args)), f"{label}: {runtime_dir(args)} left after the daemon stopped"
    return final, errors
