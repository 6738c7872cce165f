#!/usr/bin/python3
"""Golden packet-in/packet-out fixtures for tricolor-replay, the real binary.

scapy (an independent implementation) builds one input packet per parser branch and action, and the
exact bytes each must come out as: remarks are expected with the checksum scapy recomputes from
scratch and the ECN bits untouched, PCP rewrites only on the outermost tag, drops not at all. The test
writes the input pcap and a policy, runs tricolor-replay, and compares the forwarded pcap byte for
byte, the CSV line of every packet, and the JSON counters (drops and malformed packets by reason).

Usage: golden_test.py TRICOLOR_REPLAY [WORKDIR]
"""
import csv
import json
import os
import struct
import subprocess
import sys
import tempfile

from scapy.all import (AH, ARP, ESP, ICMP, IP, SCTP, TCP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6EchoRequest, IPv6,
                       IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPOption_RR,
                       Raw, fragment, rdpcap)

replay = sys.argv[1]
work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="tricolor-golden-")
os.makedirs(work, exist_ok=True)

POLICY = """
profile add big 1r2c cir 100gbit cbs 1g
profile add tiny 1r2c cir 8bit cbs 1
rule add drop-me dst 10.0.0.99 profile big green drop
rule add red-remark dst 10.0.0.77 profile tiny red remark af11
rule add remark4 dst 10.0.0.0/24 proto udp dport 5001 profile big green remark ef
rule add remark6 dst 2001:db8::/32 proto udp dport 5001 profile big green remark af41
rule add set-pcp proto udp dport 5002 profile big green pcp 5
rule add both proto tcp dport 5003 profile big green remark cs3 pcp 3
rule add vlan7 vlan 7 proto udp profile big
rule add vlan200 vlan 200 proto udp profile big
rule add frag-ports dst 10.7.0.1 proto udp dport 6000 profile big
rule add frag-any dst 10.7.0.1 proto udp profile big
rule add frag6-ports dst 2001:db8:7::1 proto udp dport 6000 profile big
rule add frag6-any dst 2001:db8:7::1 profile big
rule add diameter proto sctp dport 3868 profile big
rule add ping proto icmp profile big
rule add ping6 proto icmpv6 profile big
rule add ipsec proto 50 profile big
rule add ext6 dst 2001:db8:e::/48 proto udp dport 7000 profile big
rule add with-options dst 10.8.0.1 proto tcp dport 7001 profile big
default remark cs1
"""

SRC_MAC, DST_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"


def eth(**kw):
    return Ether(src=SRC_MAC, dst=DST_MAC, **kw)


def ip4(dst, tos=0, **kw):
    return IP(src="192.0.2.1", dst=dst, tos=tos, **kw)


def ip6(dst, tc=0, **kw):
    return IPv6(src="2001:db8:ffff::1", dst=dst, tc=tc, **kw)


def pad(pkt, size=80):
    raw = bytes(pkt)
    return raw + b"\x00" * max(0, size - len(raw)) if size else raw


def remarked4(pkt, dscp):
    """The same IPv4 packet with a new DSCP, ECN kept, checksum recomputed by scapy."""
    out = pkt.copy()
    out[IP].tos = (dscp << 2) | (pkt[IP].tos & 3)
    del out[IP].chksum
    return Ether(bytes(out))


def remarked6(pkt, dscp):
    out = pkt.copy()
    out[IPv6].tc = (dscp << 2) | (pkt[IPv6].tc & 3)
    return Ether(bytes(out))


def with_pcp(pkt, pcp):
    out = pkt.copy()
    tag = out[Dot1AD] if Dot1AD in out else out[Dot1Q]
    tag.prio = pcp
    return Ether(bytes(out))


# (name, input, expected output bytes or None when dropped, rule, out_color, action)
cases = []


def case(name, pkt, expected, rule, color, action):
    cases.append((name, bytes(pkt), None if expected is None else bytes(expected), rule, color, action))


# Actions on IPv4: remark keeps every ECN value; checksum as scapy computes it.
for ecn in range(4):
    p = eth() / ip4("10.0.0.5", tos=(10 << 2) | ecn) / UDP(sport=1000, dport=5001) / Raw(b"x" * 20)
    p = Ether(bytes(p))
    case(f"remark4 ecn{ecn}", p, remarked4(p, 46), "remark4", "green", "forward;dscp=46")
# IPv4 with options: remark updates the checksum over the longer header.
p = Ether(bytes(eth() / ip4("10.0.0.6", tos=3, options=[IPOption_RR(routers=["1.2.3.4"])]) / UDP(dport=5001)))
case("remark4 options", p, remarked4(p, 46), "remark4", "green", "forward;dscp=46")
# IPv6 traffic class across its two bytes, ECN kept.
for ecn in (0, 1, 2, 3):
    p = Ether(bytes(eth() / ip6("2001:db8::5", tc=(18 << 2) | ecn) / UDP(dport=5001) / Raw(b"y" * 10)))
    case(f"remark6 ecn{ecn}", p, remarked6(p, 34), "remark6", "green", "forward;dscp=34")
# PCP: single tag, QinQ (outer only), untagged (unchanged), both remark and pcp.
p = Ether(bytes(eth() / Dot1Q(vlan=10, prio=0) / ip4("10.1.0.1") / UDP(dport=5002)))
case("pcp 802.1q", p, with_pcp(p, 5), "set-pcp", "green", "forward;pcp=5")
p = Ether(bytes(eth() / Dot1AD(vlan=20, prio=1) / Dot1Q(vlan=30, prio=6) / ip4("10.1.0.1") / UDP(dport=5002)))
case("pcp qinq", p, with_pcp(p, 5), "set-pcp", "green", "forward;pcp=5")
p = Ether(bytes(eth() / ip4("10.1.0.1") / UDP(dport=5002)))
case("pcp untagged", p, p, "set-pcp", "green", "forward")
p = Ether(bytes(eth() / Dot1Q(vlan=11, prio=7) / ip4("10.1.0.2", tos=2) / TCP(dport=5003)))
case("remark and pcp", p, with_pcp(remarked4(p, 24), 3), "both", "green", "forward;dscp=24;pcp=3")
# Drop, and a red packet's action.
case("drop", eth() / ip4("10.0.0.99") / UDP(dport=1), None, "drop-me", "green", "drop")
p = Ether(bytes(eth() / ip4("10.0.0.77", tos=1) / UDP(dport=1)))
case("red remark", p, remarked4(p, 10), "red-remark", "red", "forward;dscp=10")
# VLAN matching: the outermost id.
p = eth() / Dot1Q(vlan=7) / ip4("10.2.0.1") / UDP(dport=9)
case("vlan 7", p, p, "vlan7", "green", "forward")
p = eth() / Dot1AD(vlan=200) / Dot1Q(vlan=7) / ip4("10.2.0.1") / UDP(dport=9)
case("qinq outer 200", p, p, "vlan200", "green", "forward")
p = eth(type=0x9100) / Dot1Q(vlan=200) / ip4("10.2.0.1") / UDP(dport=9)
case("qinq 0x9100", p, p, "vlan200", "green", "forward")
# Fragments: every fragment, first included, has ports 0, so all meet the frag-any rule.
whole = ip4("10.7.0.1") / UDP(sport=5000, dport=6000) / Raw(b"z" * 120)
case("unfragmented", eth() / whole, eth() / whole, "frag-ports", "green", "forward")
for i, frag in enumerate(fragment(whole, fragsize=64)):
    case(f"fragment {i}", eth() / frag, eth() / frag, "frag-any", "green", "forward")
whole6 = ip6("2001:db8:7::1") / UDP(sport=5000, dport=6000) / Raw(b"w" * 40)
case("ipv6 unfragmented", eth() / whole6, eth() / whole6, "frag6-ports", "green", "forward")
first6 = ip6("2001:db8:7::1") / IPv6ExtHdrFragment(offset=0, m=1, id=9) / UDP(sport=5000, dport=6000) / Raw(b"w" * 16)
later6 = ip6("2001:db8:7::1") / IPv6ExtHdrFragment(offset=3, m=0, id=9, nh=17) / Raw(b"w" * 16)
case("ipv6 first fragment", eth() / first6, eth() / first6, "frag6-any", "green", "forward")
case("ipv6 later fragment", eth() / later6, eth() / later6, "frag6-any", "green", "forward")
atomic6 = ip6("2001:db8:7::1") / IPv6ExtHdrFragment(offset=0, m=0, id=9) / UDP(sport=5000, dport=6000)
case("ipv6 atomic fragment", eth() / atomic6, eth() / atomic6, "frag6-ports", "green", "forward")
# Other protocols.
p = eth() / ip4("10.3.0.1") / SCTP(sport=1, dport=3868)
case("sctp", p, p, "diameter", "green", "forward")
p = eth() / ip4("10.3.0.1") / ICMP()
case("icmp", p, p, "ping", "green", "forward")
p = eth() / ip6("2001:db8:3::1") / ICMPv6EchoRequest()
case("icmpv6", p, p, "ping6", "green", "forward")
p = eth() / ip4("10.3.0.1") / ESP(spi=1, seq=1)
case("esp ipv4", p, p, "ipsec", "green", "forward")
# IPv6 extension headers, skipped to the UDP ports.
for name, ext in [("hop-by-hop", IPv6ExtHdrHopByHop()), ("routing", IPv6ExtHdrRouting()),
                  ("destination options", IPv6ExtHdrDestOpt()),
                  ("chain", IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting() / IPv6ExtHdrDestOpt()),
                  ("ah", AH(nh=17, payloadlen=4, spi=5, icv=b"\x00" * 12))]:  # (4 + 2) * 4 = 24 bytes
    p = eth() / ip6("2001:db8:e::1") / ext / UDP(dport=7000)
    case(f"ipv6 {name}", p, p, "ext6", "green", "forward")
p = eth() / ip6("2001:db8:e::1") / ESP(spi=1, seq=1)
case("ipv6 esp ends the chain", p, p, "ipsec", "green", "forward")  # protocol 50, no prefix: IPv6 too
p = eth() / ip4("10.8.0.1", options=[IPOption_RR(routers=["1.1.1.1", "2.2.2.2", "3.3.3.3"])]) / TCP(dport=7001)
case("ipv4 options ports", p, p, "with-options", "green", "forward")
# Default action (remark cs1): unmatched IP is remarked; non-IP and malformed frames are forwarded as they are.
p = Ether(bytes(eth() / ip4("198.51.100.1", tos=1) / UDP(dport=4)))
case("no match", p, remarked4(p, 8), "-", "-", "forward;dscp=8")
p = eth() / ARP(pdst="10.0.0.1")
case("arp", p, p, "-", "-", "forward")
p = Ether(src=SRC_MAC, dst="01:80:c2:00:00:02", type=0x8809) / Raw(b"\x01\x01" + b"\x00" * 40)  # LACP
case("lacp", p, p, "-", "-", "forward")
MALFORMED = []


def malformed(name, raw, reason):
    case(name, raw, raw, "-", "-", "forward")
    MALFORMED.append(reason)


good = bytes(eth() / ip4("10.0.0.5") / UDP(dport=5001) / Raw(b"q" * 30))
malformed("ihl 4", good[:14] + bytes([0x44]) + good[15:], "bad_ipv4_header_length")
malformed("total length beyond the frame", good[:16] + (2000).to_bytes(2, "big") + good[18:], "bad_ipv4_total_length")
malformed("three tags", bytes(eth() / Dot1AD(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3) / ip4("10.0.0.5") / UDP()),
          "too_many_vlans")
malformed("ipv6 payload beyond the frame", bytes(eth() / ip6("2001:db8::5", plen=900) / UDP(dport=5001)),
          "bad_ipv6_payload_length")
malformed("ethernet cut", bytes(eth())[:10], "truncated_ethernet")

in_pcap, out_pcap = os.path.join(work, "in.pcap"), os.path.join(work, "out.pcap")
with open(in_pcap, "wb") as f:  # raw bytes, malformed frames included (scapy would re-dissect them)
    f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i, (_, raw, *_) in enumerate(cases):
        f.write(struct.pack("<IIII", 1_700_000_000, i, len(raw), len(raw)) + raw)
with open(os.path.join(work, "policy"), "w") as f:
    f.write(POLICY)
outputs = dict(csv=os.path.join(work, "out.csv"), json=os.path.join(work, "out.json"))
run = subprocess.run([replay, "--policy", os.path.join(work, "policy"), "--in", in_pcap, "--out", out_pcap,
                      "--csv", outputs["csv"], "--json", outputs["json"]], capture_output=True, text=True)
assert run.returncode == 0, run.stderr

failures = []
rows = list(csv.reader(open(outputs["csv"])))
assert rows[0] == ["index", "rule", "key", "in_color", "out_color", "action", "time_ns", "frame_bytes",
                   "metered_bytes", "delay_ns"], rows[0]
forwarded = [bytes(p) for p in rdpcap(out_pcap)] if os.path.getsize(out_pcap) > 24 else []
expected_out = [exp for _, _, exp, *_ in cases if exp is not None]
for i, (name, raw, expected, rule, color, action) in enumerate(cases):
    row = rows[i + 1]
    # Packet i is stamped i microseconds after the first; the rules meter the whole frame (length l2);
    # none shapes (no delay).
    want = [str(i), rule, "-", "-", color, action, str(i * 1000), str(len(raw)), str(len(raw)) if rule != "-" else "-",
            "-"]
    if row != want:
        failures.append(f"{name}: CSV {row}, expected {want}")
if len(forwarded) != len(expected_out):
    failures.append(f"{len(forwarded)} packets forwarded, expected {len(expected_out)}")
else:
    names = [name for name, _, exp, *_ in cases if exp is not None]
    for name, got, want in zip(names, forwarded, expected_out):
        if got != want:
            failures.append(f"{name}: forwarded bytes differ\n  got  {got.hex()}\n  want {want.hex()}")

summary = json.load(open(outputs["json"]))
malformed_counts = summary["default"]["malformed"]
for reason in set(MALFORMED):
    if malformed_counts.get(reason) != MALFORMED.count(reason):
        failures.append(f"malformed {reason}: {malformed_counts.get(reason)} counted, expected {MALFORMED.count(reason)}")
drop_rule = next(r for r in summary["rules"] if r["name"] == "drop-me")
if drop_rule["dropped"]["packets"] != 1:
    failures.append(f"drop-me dropped {drop_rule['dropped']}")

# The same with the rules scanned in order instead of put in rte_acl's trie (this policy has more
# entries than the default scans), and through a flow cache in front of the trie, of 2 entries (every
# flow shares them) and of 8192 (it holds every flow): the same bytes in every output.
for variant, options in [("scanned", ["--classifier-scan-entries", "256", "--classifier-no-hash"]),
                         ("cache2", ["--flow-cache-entries", "2"]),
                         ("cache8192", ["--flow-cache-entries", "8192"])]:
    other = {name: path + "." + variant for name, path in dict(outputs, out=out_pcap).items()}
    run = subprocess.run([replay, "--policy", os.path.join(work, "policy"), "--in", in_pcap, "--out", other["out"],
                          "--csv", other["csv"], "--json", other["json"], *options],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    for name, path in dict(outputs, out=out_pcap).items():
        if open(path, "rb").read() != open(other[name], "rb").read():
            failures.append(f"{' '.join(options)}: the {name} output differs from the trie's")

# A policy of one shape (a /32 per host, UDP, one port each: more entries than the default scans, so
# a hash lookup, no trie): the same bytes in every output as with its rules scanned in order; rules
# repeat one another (the first must win) and the capture's packets hit several of them.
ONE_SHAPE = "profile add big 1r2c cir 100gbit cbs 1g\n" + "".join(
    f"rule add n{net}-host{host}-{port} dst 10.{net}.0.{host} proto udp dport {port} profile big green remark af{11 + 10 * (host % 3)}\n"
    for net in (0, 1, 2, 7) for host in (1, 5, 6, 99) for port in (5001, 5002, 6000, 9))
ONE_SHAPE += "rule add again dst 10.0.0.5 proto udp dport 5001 profile big green drop\n"  # never matches: host5-5001 first
one_shape_policy = os.path.join(work, "one-shape.policy")
with open(one_shape_policy, "w") as f:
    f.write(ONE_SHAPE)
shape_runs = {}
for variant, options in [("hashed", []), ("scanned", ["--classifier-scan-entries", "256", "--classifier-no-hash"])]:
    files = {name: os.path.join(work, f"one-shape.{variant}.{name}") for name in ("out", "csv", "json")}
    run = subprocess.run([replay, "--policy", one_shape_policy, "--in", in_pcap, "--out", files["out"], "--csv",
                          files["csv"], "--json", files["json"], *options], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    shape_runs[variant] = {name: open(path, "rb").read() for name, path in files.items()}
for name in ("out", "csv", "json"):
    if shape_runs["hashed"][name] != shape_runs["scanned"][name]:
        failures.append(f"one-shape policy: the hashed {name} output differs from the scanned one")
shape_rules = json.loads(shape_runs["hashed"]["json"])["rules"]
hit = {r["name"] for r in shape_rules if sum(r[c]["packets"] for c in ("green", "yellow", "red")) > 0}
if len(hit) < 3 or "again" in hit:
    failures.append(f"one-shape policy: rules that metered packets {sorted(hit)}: expected several, not 'again'")

# A flow cache size that is not a power of two is refused, naming the option.
run = subprocess.run([replay, "--policy", os.path.join(work, "policy"), "--in", in_pcap, "--flow-cache-entries", "3"],
                     capture_output=True, text=True)
if run.returncode == 0 or "--flow-cache-entries 3: expected a power of two" not in run.stderr:
    failures.append(f"--flow-cache-entries 3: exit {run.returncode}, {run.stderr.strip()!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"golden: {len(cases)} packets, {len(expected_out)} forwarded, all as expected, in a trie, scanned, through flow caches, and a one-shape policy hashed as scanned")
