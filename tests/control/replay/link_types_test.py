#!/usr/bin/env python3
"""tricolor-replay over the captures operators take (issue 25): `tcpdump -i any` (LINUX_SLL, LINUX_SLL2),
raw IP (RAW, IPV4, IPV6), BSD loopback (NULL in either byte order, LOOP), beside Ethernet.

For each: the same IP packets as an Ethernet capture give the same CSV, line for line (the same rule,
colors, action and lengths: the link-layer header counts as Ethernet's 14 bytes); what is not IP (an
ARP frame, an unknown address family, a header cut short) is counted as not IP, never dropped silently;
--out has the input's link type and each record's own link-layer header, the IP packet remarked.

Run by meson: link_types_test.py TRICOLOR_REPLAY.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from daemon_capture import checksum, ether, ipv4, ipv6, l4, read_pcap_frames, write_pcap  # noqa: E402

replay = sys.argv[1]
failures = []


def expect(what, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + what + ("" if condition else f": {detail!r}"))
    if not condition:
        failures.append(what)


def ipv4_packet(i, length=80):
    return ipv4([192, 0, 2, 1 + i % 3], [10, 0, 0, 1], 17, 0, l4(17, 1000 + i, 53, length - 28))


def ipv6_packet(i, length=100):
    return ipv6(bytes.fromhex("20010db8" + "00" * 11 + "02"), bytes.fromhex("20010db8" + "00" * 11 + "01"), 17, 0,
                l4(17, 2000 + i, 53, length - 48))


AF_INET6 = {"linux": 10, "freebsd": 28}
ETHERTYPE = {4: 0x0800, 6: 0x86DD}


def link_header(link_type, version, ether_type=None):
    """The link-layer header of each kind for an IP packet of this version (or a given Ethernet type)."""
    proto = ether_type if ether_type is not None else ETHERTYPE[version]
    family = 2 if version == 4 else AF_INET6["freebsd"]
    if link_type == 113:  # LINUX_SLL: packet type, ARPHRD, address length, address (8), protocol
        return struct.pack(">HHH8sH", 0, 1, 6, bytes.fromhex("020000000002") + bytes(2), proto)
    if link_type == 276:  # LINUX_SLL2: protocol, reserved, ifindex, ARPHRD, packet type, address length, address
        return struct.pack(">HHIHBB8s", proto, 0, 2, 1, 0, 6, bytes.fromhex("020000000002") + bytes(2))
    if link_type == 0:  # NULL: the family in the capturing host's byte order (little-endian here)
        return struct.pack("<I", family if ether_type is None else 99)
    if link_type == 108:  # LOOP: network byte order
        return struct.pack(">I", family if ether_type is None else 99)
    return b""  # RAW, IPV4, IPV6


def read_pcap(path):
    """The link type of a pcap, and its frames."""
    return struct.unpack_from("<I", open(path, "rb").read(24), 20)[0], read_pcap_frames(path)


POLICY = """profile add p 1r2c cir 200kbit cbs 2k
rule add v4 dst 10.0.0.0/8 profile p green remark af11
rule add v6 dst 2001:db8::/32 profile p green remark af11
"""
CASES = [(113, "LINUX_SLL", (4, 6)), (276, "LINUX_SLL2", (4, 6)), (101, "RAW", (4, 6)), (228, "IPV4", (4,)),
         (229, "IPV6", (6,)), (0, "NULL", (4, 6)), (108, "LOOP", (4, 6))]

with tempfile.TemporaryDirectory(prefix="tricolor-link-types-") as tmp:
    policy = os.path.join(tmp, "policy")
    open(policy, "w").write(POLICY)

    def run(name, link_type, frames):
        files = {k: os.path.join(tmp, f"{name}.{k}") for k in ("in", "out", "csv", "json")}
        write_pcap(files["in"], [(i, frame) for i, frame in enumerate(frames)], link_type=link_type)
        r = subprocess.run([replay, "--policy", policy, "--in", files["in"], "--out", files["out"], "--csv", files["csv"],
                            "--json", files["json"]], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        return r, files

    for link_type, name, versions in CASES:
        packets = [(ipv4_packet(i) if versions[i % len(versions)] == 4 else ipv6_packet(i)) for i in range(60)]
        versions_of = [versions[i % len(versions)] for i in range(60)]
        ethernet = [ether(p, ETHERTYPE[v]) for v, p in zip(versions_of, packets)]
        theirs = [link_header(link_type, v) + p for v, p in zip(versions_of, packets)]
        # What is not IP: an ARP frame (cooked), an unknown family (loopback), a raw packet of version 5.
        not_ip = []
        if link_type in (113, 276):
            not_ip = [link_header(link_type, 4, ether_type=0x0806) + bytes(28)]
        elif link_type in (0, 108):
            not_ip = [link_header(link_type, 4, ether_type=0) + ipv4_packet(99)]
        elif link_type == 101:
            not_ip = [bytes([0x50]) + bytes(39)]
        r_eth, eth = run(f"{name}-ethernet", 1, ethernet)
        r, files = run(name, link_type, theirs + not_ip)
        expect(f"{name}: read, status 0", r.returncode == 0 and r_eth.returncode == 0, (r.stderr, r_eth.stderr))
        if r.returncode != 0:
            continue
        csv_eth = open(eth["csv"]).read().splitlines()
        csv = open(files["csv"]).read().splitlines()
        expect(f"{name}: every IP packet metered as the same packet on Ethernet (the CSV line for line)",
               csv[:len(csv_eth)] == csv_eth, [(a, b) for a, b in zip(csv, csv_eth) if a != b][:2])
        summary = json.load(open(files["json"]))
        greens = sum(rule["green"]["packets"] for rule in summary["rules"])
        expect(f"{name}: the rule of each IP version in the capture met packets, some green", greens > 0 and all(
            sum(rule[c]["packets"] for c in ("green", "yellow", "red")) > 0 for rule in summary["rules"]
            if int(rule["name"][1]) in versions), summary["rules"])
        expect(f"{name}: what is not IP is counted as such", summary["default"]["non_ip"] == len(not_ip), summary["default"])
        out_type, out_frames = read_pcap(files["out"])
        expect(f"{name}: --out has the input's link type", out_type == link_type, out_type)
        forwarded = [line.split(",") for line in csv[1:]]
        kept = [theirs_frame for theirs_frame, line in zip(theirs + not_ip, forwarded) if line[5] != "drop"]
        header_length = len(link_header(link_type, 4))
        same_headers = len(out_frames) == len(kept) and all(o[:header_length] == k[:header_length] and len(o) == len(k)
                                                             for o, k in zip(out_frames, kept))
        expect(f"{name}: --out: each forwarded record with its own link-layer header, its length unchanged",
               same_headers, (len(out_frames), len(kept)))
        remarked = [o for o, line in zip(out_frames, [l for l in forwarded if l[5] != "drop"]) if line[4] == "green"]
        ok = True
        for o in remarked:
            ip = o[header_length:]
            if ip[0] >> 4 == 4:
                ok = ok and ip[1] == (10 << 2) and checksum(ip[:20]) == 0
            else:
                ok = ok and ((struct.unpack(">I", ip[:4])[0] >> 20) & 0xFF) == (10 << 2)
        expect(f"{name}: green packets remarked AF11 in --out (IPv4 checksum right)", remarked and ok, len(remarked))

    # A cooked capture cut short in its header: not IP, counted.
    r, files = run("sll-short", 113, [link_header(113, 4)[:10]])
    summary = json.load(open(files["json"])) if r.returncode == 0 else {}
    expect("LINUX_SLL cut short in its header: counted as not IP", r.returncode == 0 and summary["default"]["non_ip"] == 1,
           (r.returncode, r.stderr, summary.get("default")))

if failures:
    print(f"{len(failures)} failures: {failures}")
    sys.exit(1)
print("all checks passed")
