#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_parse: one valid frame of each kind the parser knows.

Each file is fuzz_parse's input: a 6-byte header (flags, stripped TCI, wire-length difference, DSCP,
PCP; see tests/fuzz/fuzz_parse.cpp) and the frame. Python 3 standard library only; the output is
deterministic, so rerunning it changes nothing in the repository.

    python3 tests/fuzz/make_parse_corpus.py [DIR]   (default: tests/fuzz/corpus/fuzz_parse next to it)
"""
import pathlib
import struct
import sys

FLAG_STRIPPED_VLAN = 0x01
FLAG_WIRE_LONGER = 0x02
FLAG_SCALE_DIFFERENCE = 0x08

ETH_IPV4, ETH_ARP, ETH_IPV6, ETH_LACP = 0x0800, 0x0806, 0x86DD, 0x8809
TPID_8021Q, TPID_8021AD, TPID_LEGACY_QINQ = 0x8100, 0x88A8, 0x9100
HOP_BY_HOP, TCP, UDP, ROUTING, FRAGMENT, ESP, AH, ICMPV6, NO_NEXT, DEST_OPTS = 0, 6, 17, 43, 44, 50, 51, 58, 59, 60
ICMP, SCTP = 1, 132
IPV4_MORE_FRAGMENTS = 0x2000
IPV4_DONT_FRAGMENT = 0x4000

MACS = bytes.fromhex("020000000001") + bytes.fromhex("020000000002")


def fuzz_input(frame, flags=0, stripped_tci=0, wire_difference=0, dscp=46, pcp=5):
    return struct.pack("!BHBBB", flags, stripped_tci, wire_difference, dscp, pcp) + frame


def ethernet(ether_type, payload, tags=()):
    header = MACS
    for tpid, tci in tags:
        header += struct.pack("!HH", tpid, tci)
    return header + struct.pack("!H", ether_type) + payload


def checksum(data):
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4(protocol, payload, tos=0, options=b"", flags_fragment=IPV4_DONT_FRAGMENT):
    ihl = 5 + len(options) // 4
    header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, ihl * 4 + len(payload), 0x1234, flags_fragment,
                         64, protocol, 0, bytes([192, 0, 2, 1]), bytes([198, 51, 100, 7])) + options
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return header + payload


def ipv6(next_header, payload, traffic_class=0):
    first_word = (6 << 28) | (traffic_class << 20) | 0x12345
    src = bytes.fromhex("20010db8000000000000000000000001")
    dst = bytes.fromhex("20010db8ffff0000000000000000abcd")
    return struct.pack("!IHBB", first_word, len(payload), next_header, 64) + src + dst + payload


def options_header(next_header, length=8):
    """Hop-by-hop, routing or destination options: length a multiple of 8."""
    return bytes([next_header, length // 8 - 1]) + bytes(length - 2)


def ah_header(next_header, length=24):
    return bytes([next_header, length // 4 - 2]) + bytes(length - 2)


def fragment_header(next_header, offset_units, more):
    return struct.pack("!BBHI", next_header, 0, (offset_units << 3) | int(more), 0xCAFEF00D)


def tcp(src, dst, data=b""):
    return struct.pack("!HHIIBBHHH", src, dst, 1, 0, 5 << 4, 0x18, 65535, 0, 0) + data


def udp(src, dst, data=b""):
    return struct.pack("!HHHH", src, dst, 8 + len(data), 0) + data


def sctp(src, dst):
    return struct.pack("!HHII", src, dst, 0, 0)


def corpus():
    nop_options = b"\x01\x01\x01\x00" * 3
    yield "ipv4_tcp", fuzz_input(ethernet(ETH_IPV4, ipv4(TCP, tcp(40000, 443, b"hello"), tos=0xB9)))
    yield "ipv4_options_udp_8021q", fuzz_input(
        ethernet(ETH_IPV4, ipv4(UDP, udp(53, 5353, b"q"), options=nop_options), tags=[(TPID_8021Q, 0x1064)]))
    yield "ipv4_sctp_qinq", fuzz_input(
        ethernet(ETH_IPV4, ipv4(SCTP, sctp(2905, 2906)), tags=[(TPID_8021AD, 0xA00A), (TPID_8021Q, 0x0014)]))
    yield "ipv4_first_fragment", fuzz_input(
        ethernet(ETH_IPV4, ipv4(TCP, tcp(1, 2, bytes(16)), flags_fragment=IPV4_MORE_FRAGMENTS)))
    yield "ipv4_later_fragment", fuzz_input(ethernet(ETH_IPV4, ipv4(UDP, bytes(24), flags_fragment=185)))
    # A datagram of 22 bytes, cut inside its UDP ports, in a frame padded to Ethernet's 60: the capture
    # holds the ports, the datagram does not (truncated_l4, the plain frame's edge).
    yield "ipv4_udp_ports_past_datagram", fuzz_input(ethernet(ETH_IPV4, ipv4(UDP, struct.pack("!H", 53)) + bytes(24)))
    yield "ipv4_icmp_stripped_and_tag", fuzz_input(
        ethernet(ETH_IPV4, ipv4(ICMP, bytes([8, 0, 0, 0, 0, 1, 0, 1])), tags=[(TPID_LEGACY_QINQ, 0x0030)]),
        flags=FLAG_STRIPPED_VLAN, stripped_tci=0x6123)
    # A 1344-byte frame captured to 64 bytes (pcap snaplen): the wire is 5 * 256 bytes longer.
    snaplen_frame = ethernet(ETH_IPV4, ipv4(TCP, tcp(80, 8080, bytes(1290))))
    assert len(snaplen_frame) == 64 + 5 * 256
    yield "ipv4_tcp_snaplen", fuzz_input(snaplen_frame[:64], flags=FLAG_WIRE_LONGER | FLAG_SCALE_DIFFERENCE,
                                         wire_difference=5)
    yield "ipv6_udp_8021q", fuzz_input(
        ethernet(ETH_IPV6, ipv6(UDP, udp(546, 547, b"dhcp"), traffic_class=0xB8), tags=[(TPID_8021Q, 0x2001)]))
    chain = (options_header(ROUTING, 8) + options_header(DEST_OPTS, 24) + fragment_header(AH, 0, False)
             + ah_header(DEST_OPTS, 16) + options_header(TCP, 8) + tcp(9, 10))
    yield "ipv6_extension_chain_tcp", fuzz_input(ethernet(ETH_IPV6, ipv6(HOP_BY_HOP, chain)))
    yield "ipv6_fragment", fuzz_input(ethernet(ETH_IPV6, ipv6(FRAGMENT, fragment_header(UDP, 0, True) + udp(1, 2))))
    yield "ipv6_esp", fuzz_input(ethernet(ETH_IPV6, ipv6(HOP_BY_HOP, options_header(ESP) + bytes(32))))
    yield "ipv6_icmpv6", fuzz_input(ethernet(ETH_IPV6, ipv6(ICMPV6, bytes([128, 0, 0, 0, 0, 1, 0, 1]))))
    yield "ipv6_no_next_header", fuzz_input(ethernet(ETH_IPV6, ipv6(NO_NEXT, b"")), flags=FLAG_STRIPPED_VLAN,
                                            stripped_tci=0x0FFF)
    yield "arp", fuzz_input(ethernet(ETH_ARP, bytes.fromhex("0001080006040001") + MACS[6:] + bytes(18)))
    yield "lacp_8021q", fuzz_input(ethernet(ETH_LACP, bytes([1, 1]) + bytes(108), tags=[(TPID_8021Q, 0x0005)]))


def main():
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "corpus" / "fuzz_parse"
    out.mkdir(parents=True, exist_ok=True)
    for name, data in corpus():
        (out / name).write_bytes(data)
        print(f"{out / name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
