"""The benchmark's programs' periodic counters, read from their output: each parser turns lines into
Snapshots of port 0's received packets and port 1's sent packets on the program's own clock."""
import dataclasses
import json
import re


@dataclasses.dataclass
class Snapshot:
    t: float          # seconds, on the program's own clock
    rx: int           # packets port 0 received (= processed)
    tx: int           # packets port 1 sent (= forwarded)
    rx_nombuf: int = 0
    fallback: int = 0     # tricolord: packets whose new key found no room (rules' keys.table_full)
    wall: float = 0.0     # when the script read it (time.monotonic), and the worker thread's
    cpu_ns: int = 0       # time on a CPU then (/proc/PID/task/TID/schedstat)



class TricolordParser:
    """--json --stats-interval 1: one JSON object per line; "stats" and "final" events."""

    def __init__(self):
        self.final = None

    def feed(self, line):
        line = line.strip()
        if not line.startswith("{"):
            return None
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            return None
        if event.get("event") not in ("stats", "final"):
            return None
        ports = {p["port"]: p for p in event.get("ports", [])}
        if 0 not in ports or 1 not in ports:
            return None
        if event["event"] == "final":
            self.final = event
            return None
        fallback = sum(int(rule.get("keys", {}).get("table_full", 0)) for rule in event.get("rules", []))
        return Snapshot(float(event["elapsed_s"]), int(ports[0]["rx_packets"]), int(ports[1]["tx_packets"]),
                        int(ports[0].get("rx_nombuf", 0)), fallback)


class QosMeterParser:
    """Our patch's lines: "stats elapsed_s=F rx_packets=N ... tx_packets=N ..." once a second."""

    LINE = re.compile(r"^(stats|final) (.*)$")

    def __init__(self):
        self.final = None

    def feed(self, line):
        m = self.LINE.match(line.strip())
        if not m:
            return None
        fields = dict(kv.split("=", 1) for kv in m.group(2).split())
        snap = Snapshot(float(fields["elapsed_s"]), int(fields["rx_packets"]), int(fields["tx_packets"]),
                        int(fields["rx_nombuf"]))
        if m.group(1) == "final":
            self.final = snap
            return None
        return snap


class TestpmdParser:
    """--stats-period 1: a "NIC statistics for port N" block per port, with cumulative RX-packets and
    TX-packets and the interval's Rx-pps, which testpmd computes from its own clock
    (clock_gettime between two displays). The interval's length is therefore packets / Rx-pps: the
    time axis is rebuilt from testpmd's own measurements, not from when the lines reach us."""

    def __init__(self):
        self.port = None
        self.values = {}
        self.prev_rx = None
        self.t = 0.0
        self.final = None

    def feed(self, line):
        m = re.search(r"NIC statistics for port (\d+)", line)
        if m:
            self.port = int(m.group(1))
            return None
        if self.port is None:
            return None
        for key, pattern in (("rx", r"RX-packets:\s+(\d+)"), ("nombuf", r"RX-nombuf:\s+(\d+)"),
                             ("tx", r"TX-packets:\s+(\d+)"), ("rx_pps", r"Rx-pps:\s+(\d+)")):
            m = re.search(pattern, line)
            if m:
                self.values[(self.port, key)] = int(m.group(1))
        if self.port == 1 and re.search(r"Tx-pps:", line):
            return self._snapshot()
        return None

    def _snapshot(self):
        rx, pps = self.values.get((0, "rx")), self.values.get((0, "rx_pps"))
        tx, nombuf = self.values.get((1, "tx")), self.values.get((0, "nombuf"), 0)
        self.port = None
        if rx is None or tx is None or pps is None:
            return None
        if self.prev_rx is not None:
            if pps == 0:
                if rx != self.prev_rx:
                    return None  # packets but no rate: no clock for this interval; skip it
            else:
                self.t += (rx - self.prev_rx) / pps
        self.prev_rx = rx
        return Snapshot(self.t, rx, tx, nombuf)
