#!/usr/bin/env python3
"""Writes the benchmark's captures: IPv4/UDP frames of N distinct 5-tuples, 64-byte frames or IMIX.

Frame sizes are Ethernet frames with their 4-byte FCS, as packet generators count them: a "64-byte"
frame is 60 bytes in the capture (the FCS is not captured). IMIX is 7:4:1 of 64/570/1518-byte frames,
interleaved in a fixed shuffled order of 12.

Flow i (0 <= i < flows) is src 10.0.0.0 + i, dst 172.16.(i >> 8 & 255).(i & 255), UDP sport
1024 + i % 60000, dport 5001. The destination address's last byte is i & 255, so DPDK's qos_meter
sample (one meter per value of frame byte 33) spreads the flows over its 256 meters. The destination
MAC's last byte (frame byte 5, where qos_meter reads its input color) is 0: green.

The capture holds max(flows, 64 Ki) packets (--packets overrides): passes over a random permutation of
the flows (fixed seed), so every flow is seen once per pass in an order no cache predicts, and the
captures of up to 64 Ki flows are the same size (the same I/O work for testpmd). Written with struct,
not scapy: a million packets take seconds.
"""
import argparse
import random
import struct
import sys

FRAME_64, FRAME_570, FRAME_1518 = 64, 570, 1518
FCS = 4
IMIX_PATTERN = [FRAME_64] * 7 + [FRAME_570] * 4 + [FRAME_1518]
DEFAULT_MIN_PACKETS = 64 * 1024
SEED = 20240903

DST_MAC = bytes([0x02, 0x00, 0x00, 0x00, 0x00, 0x00])  # byte 5 = 0: qos_meter's input color green
SRC_MAC = bytes([0x02, 0x00, 0x00, 0x00, 0x00, 0x01])
ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17
DST_PORT = 5001


def frame_sizes(frames: str) -> list[int]:
    if frames == "64":
        return [FRAME_64]
    pattern = list(IMIX_PATTERN)
    random.Random(SEED).shuffle(pattern)
    return pattern


def ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame(flow: int, wire_size: int) -> bytes:
    captured = wire_size - FCS
    ip_total = captured - 14
    udp_len = ip_total - 20
    src_ip = (10 << 24) + flow
    dst_ip = (172 << 24) | (16 << 16) | (((flow >> 8) & 0xFF) << 8) | (flow & 0xFF)
    ip = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, ip_total, flow & 0xFFFF, 0, 64, IPPROTO_UDP, 0,
                               src_ip, dst_ip))
    struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
    udp = struct.pack("!HHHH", 1024 + flow % 60000, DST_PORT, udp_len, 0)  # checksum 0: none (IPv4)
    return DST_MAC + SRC_MAC + struct.pack("!H", ETHERTYPE_IPV4) + bytes(ip) + udp + bytes(udp_len - 8)


def write_capture(path: str, flows: int, frames: str, packets: int, part: int = 0, parts: int = 1) -> None:
    """The capture; with parts > 1 only the packets of the flows i with i % parts == part (what queue
    `part` of a NIC steering flows over `parts` queues would receive), about packets / parts of them."""
    if not 1 <= flows <= (1 << 24):
        sys.exit(f"make_capture: flows {flows} must be 1 .. 2^24 (one source address each in 10/8)")
    order = list(range(flows))
    random.Random(SEED + flows).shuffle(order)
    sizes = frame_sizes(frames)
    with open(path, "wb") as out:
        # pcap global header: microsecond timestamps, version 2.4, snaplen 65535, Ethernet.
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        chunk = bytearray()
        for j in range(packets):
            if order[j % flows] % parts != part:
                continue
            data = frame(order[j % flows], sizes[j % len(sizes)])
            chunk += struct.pack("<IIII", j // 1000000, j % 1000000, len(data), len(data))
            chunk += data
            if len(chunk) > (1 << 22):
                out.write(chunk)
                chunk.clear()
        out.write(chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, required=True)
    parser.add_argument("--frames", choices=["64", "imix"], required=True)
    parser.add_argument("--packets", type=int, help=f"default: max(flows, {DEFAULT_MIN_PACKETS})")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    write_capture(args.out, args.flows, args.frames, args.packets or max(args.flows, DEFAULT_MIN_PACKETS))


if __name__ == "__main__":
    main()
