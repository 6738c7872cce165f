#!/usr/bin/env python3
"""Telemetry (issue 12): tricolord's metrics listener, `tricolorctl stats --prometheus` and its DPDK
telemetry endpoints, against a real daemon with traffic.

tricolord reads a capture over and over (net_pcap, infinite_rx=1) into net_null (no-rx), as fast as its worker
goes, with `--metrics 127.0.0.1:PORT --json` and DPDK telemetry on. Checked:
- the exposition, from /metrics (a real HTTP client: urllib) and from `tricolorctl stats --prometheus`,
  passes `promtool check metrics` (Debian's prometheus) with nothing to say; it is served as
  text/plain version 0.0.4; every family has HELP and TYPE once; `/` links to it, other paths are 404.
- the counters agree with `tricolorctl stats --json` taken between two scrapes (scrape 1 <= stats <=
  scrape 2, counter by counter: rules by color, drops, keys, default reasons, ports, workers), and grow
  where traffic flows; the default action's reasons add up to its packets.
- `reset counters` moves `stats`, not /metrics (Prometheus counters never go back); a rule change
  moves the generation and the time of the last change.
- dpdk-telemetry.py reads /tricolor/stats, /tricolor/rules, /tricolor/rules,NAME and
  /tricolor/keys,RULE[,N], bracketed by stats --json the same way, and says what was wrong for an
  unknown rule, a rule without keys and a bad count.
- the listener's backlog holds 1024 connections (a burst beyond its 64 connections waits there).
- 100 concurrent scrapes, a client that sends its request a byte every 0.2 s (cut off with a 408 5 s
  after its first byte: a whole request head must come within 5 s) and one that reads its
  reply a few bytes at a time: every scrape is answered (200, a whole exposition), the worker goes on
  forwarding (its packets grow during the storm; the rates before and during are printed, not
  asserted), and at the stop the conservation check holds: received = the worker's packets = the
  rules' and the default action's packets, and forwarded = port 1's TX + its tx-dropped.
- no thread of the daemon but its worker may run on the worker's CPU (the listener's two threads,
  metrics-http and metrics-expose, and DPDK's telemetry thread inherit the main lcore's).
- a second daemon given the same --metrics address stops at startup, saying the port is taken; a
  daemon without --metrics listens on no TCP port; a malformed --metrics is refused with an example.
- doc/tricolord.md's scrape configuration passes `promtool check config` and its queries parse.

Run by meson: metrics_test.py BUILD_ROOT.
"""
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
import daemon_capture as capture  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import ctl, expect, file_prefix, finish, start_daemon, tricolord, wait_for  # noqa: E402

# Meters far below the offered rate: every color shows, and red is dropped.
POLICY = """\
profile add gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k
profile add silver 1r2c cir 50mbit cbs 64k
rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold red drop
rule add hosts src 10.2.0.0/16 per src profile silver red drop
rule add idle dst 10.99.0.0/16 profile gold
"""
HOSTS = 8
COLORS = ("green", "yellow", "red")
PROMTOOL = "/usr/bin/promtool"
TELEMETRY = "/usr/bin/dpdk-telemetry.py"


def write_capture(path):
    frames = []
    for i in range(3000):
        if i % 3 == 0:  # web: TCP to port 80
            f = capture.ether(capture.ipv4([10, 9, 9, 9], [10, 1, 0, 1], 6, 0, capture.l4(6, 40000, 80, 500)), 0x0800)
        elif i % 100 == 1:  # no rule: the default action (forward)
            f = capture.ether(capture.ipv4([10, 7, 0, 1], [10, 8, 0, 1], 17, 0, capture.l4(17, 1, 2, 60)), 0x0800)
        else:  # hosts: UDP from HOSTS sources
            f = capture.ether(capture.ipv4([10, 2, 0, i % HOSTS], [10, 3, 0, 1], 17, 0, capture.l4(17, 1, 2, 100)), 0x0800)
        frames.append((i * 10, f))
    capture.write_pcap(path, frames)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port, path="/metrics", timeout=10):
    """(status, content type, body) of GET path."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset of labels): value}, and the families' HELP and TYPE lines counted."""
    samples, help_lines, type_lines = {}, {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            help_lines[name] = help_lines.get(name, 0) + 1
        elif line.startswith("# TYPE "):
            name = line.split()[2]
            type_lines[name] = type_lines.get(name, 0) + 1
        elif line:
            m = SAMPLE.match(line)
            assert m, f"not a sample: {line!r}"
            labels = frozenset(LABEL.findall(m.group(2) or ""))
            text = m.group(3)  # a counter as an exact integer (a float would round it above 2^53)
            samples[(m.group(1), labels)] = int(text) if text.isdigit() else float(text)
    return samples, help_lines, type_lines


def metric(samples, name, /, **labels):
    return samples[(name, frozenset((k, str(v)) for k, v in labels.items()))]


def stats(sock):
    code, out, err = ctl(sock, "--json", "stats")
    assert code == 0, err
    return json.loads(out)["result"]


def promtool(text):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def telemetry(prefix, *commands):
    """Each command's reply through dpdk-telemetry.py, as JSON."""
    r = subprocess.run(["/usr/bin/python3", TELEMETRY, "-f", prefix],
                       input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=60)
    replies = []
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith("{") and '"/tricolor/' in line:
            replies.append(json.loads(line))
    assert len(replies) == len(commands), (r.stdout[-2000:], r.stderr[-2000:])
    return [next(iter(reply.values())) for reply in replies]


def bracket(s1, st, s2):
    """Each counter of stats --json against the same counter in two scrapes around it."""
    bad, grew = [], set()

    def one(what, name, labels, value):
        a, b = metric(s1, name, **labels), metric(s2, name, **labels)
        if not (a <= value <= b):
            bad.append((what, a, value, b))
        if b > a:
            grew.add(what)

    for r in st["rules"]:
        for c in COLORS:
            one(f"{r['name']} {c} packets", "tricolor_rule_packets_total", {"rule": r["name"], "color": c}, r[f"{c}_packets"])
            one(f"{r['name']} {c} bytes", "tricolor_rule_bytes_total", {"rule": r["name"], "color": c}, r[f"{c}_bytes"])
        one(f"{r['name']} dropped packets", "tricolor_rule_dropped_packets_total", {"rule": r["name"]}, r["dropped_packets"])
        one(f"{r['name']} dropped bytes", "tricolor_rule_dropped_bytes_total", {"rule": r["name"]}, r["dropped_bytes"])
        if "keys" in r:
            one(f"{r['name']} keys created", "tricolor_rule_keys_created_total", {"rule": r["name"]}, r["keys"]["created"])
    d = st["default"]
    one("default no_match", "tricolor_default_packets_total", {"reason": "no_match"}, d["no_match"])
    one("default non_ip", "tricolor_default_packets_total", {"reason": "non_ip"}, d["non_ip"])
    one("default bytes", "tricolor_default_bytes_total", {}, d["bytes"])
    one("default dropped", "tricolor_default_dropped_packets_total", {}, d["dropped_packets"])
    for p in st["ports"]:
        labels = {"port": p["port"], "name": p["name"]}
        for field in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes"):
            one(f"port {p['port']} {field}", f"tricolor_port_{field}_total", labels, p[field])
        one(f"port {p['port']} imissed", "tricolor_port_rx_missed_packets_total", labels, p["imissed"])
        one(f"port {p['port']} tx_dropped", "tricolor_port_tx_dropped_packets_total", labels, p["tx_dropped"])
    for w in st["workers"]:
        labels = {"worker": w["worker"], "lcore": w["lcore"]}
        one(f"worker {w['worker']} packets", "tricolor_worker_packets_total", labels, w["packets"])
        one(f"worker {w['worker']} bursts", "tricolor_worker_bursts_total", labels, w["bursts"])
        one(f"worker {w['worker']} idle polls", "tricolor_worker_polls_total", {**labels, "result": "idle"}, w["idle_polls"])
        one(f"worker {w['worker']} busy polls", "tricolor_worker_polls_total", {**labels, "result": "busy"},
            w["polls"] - w["idle_polls"])
        one(f"worker {w['worker']} policy drops", "tricolor_worker_policy_dropped_packets_total", labels, w["policy_drops"])
        for event, field in (("held", "shape_held_in"), ("released", "shape_released"), ("flushed", "shape_flushed")):
            one(f"worker {w['worker']} shape {event}", "tricolor_worker_shape_packets_total", {**labels, "event": event}, w[field])
        one(f"worker {w['worker']} shape dropped", "tricolor_worker_shape_dropped_packets_total", labels, w["shape_overflow"])
    return bad, grew


def check_exposition(port, sock):
    status, ctype, body = scrape(port)
    expect("GET /metrics: 200, text/plain version 0.0.4", status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8",
           (status, ctype))
    code, said = promtool(body)
    expect("promtool check metrics: /metrics passes, with nothing to say", code == 0 and said.strip() == "", (code, said))
    code, out, err = ctl(sock, "stats", "--prometheus")
    expect("tricolorctl stats --prometheus: status 0", code == 0, (code, err))
    pcode, said = promtool(out)
    expect("promtool check metrics: stats --prometheus passes, with nothing to say", pcode == 0 and said.strip() == "",
           (pcode, said))
    samples, helps, types = parse(body)
    names = {name for name, _ in samples}
    expect("every family has one HELP and one TYPE", all(helps.get(n) == 1 and types.get(n) == 1 for n in names) and
           set(helps) == set(types), [n for n in names if helps.get(n) != 1 or types.get(n) != 1])
    expect("... and the same families as stats --prometheus", names == {name for name, _ in parse(out)[0]},
           names ^ {name for name, _ in parse(out)[0]})
    status, ctype, index = scrape(port, "/")
    expect("GET /: a page linking /metrics", status == 200 and 'href="/metrics"' in index, (status, index[:200]))
    status, _, _ = scrape(port, "/nothing")
    expect("GET /nothing: 404", status == 404, status)
    code, _, err = ctl(sock, "stats", "rules", "--prometheus")
    expect("stats rules --prometheus: refused (status 1), --prometheus is for stats alone", code == 1 and "stats alone" in err,
           (code, err))
    code, _, err = ctl(sock, "--json", "stats", "--prometheus")
    expect("--json with --prometheus: refused (status 1)", code == 1 and "one format" in err, (code, err))


def check_against_stats(port, sock):
    s1 = parse(scrape(port)[2])[0]
    st = stats(sock)
    s2 = parse(scrape(port)[2])[0]
    bad, grew = bracket(s1, st, s2)
    expect("scrape 1 <= stats --json <= scrape 2, every counter", not bad, bad[:10])
    flowing = {f"{r} {c} packets" for r in ("web", "hosts") for c in ("green", "red")} | {
        "web yellow packets", "port 0 rx_packets", "port 1 tx_packets", "worker 0 packets", "default no_match"}
    expect("... the counters grow where traffic flows", flowing <= grew, flowing - grew)
    expect("... and not where it does not (rule idle)", not any(g.startswith("idle ") for g in grew), grew)
    reasons = sum(metric(s2, "tricolor_default_packets_total", reason=r) for r in ("non_ip", "no_match", "malformed"))
    expect("the default action's reasons add up to its packets", reasons == st["default"]["packets"] or
           metric(s1, "tricolor_default_packets_total", reason="no_match") <= st["default"]["packets"] <= reasons,
           (reasons, st["default"]["packets"]))
    malformed = sum(v for (n, _), v in s2.items() if n == "tricolor_malformed_packets_total")
    expect("... malformed by error sums to the malformed reason, every error present at zero",
           malformed == metric(s2, "tricolor_default_packets_total", reason="malformed") and
           len([1 for (n, _) in s2 if n == "tricolor_malformed_packets_total"]) == 13, malformed)
    expect("keys: hosts has its live keys, per worker and in all; no key series for aggregate rules",
           metric(s2, "tricolor_rule_keys", rule="hosts") == HOSTS and
           metric(s2, "tricolor_rule_worker_keys", rule="hosts", worker=0) == HOSTS and
           not any(n == "tricolor_rule_keys" and ("rule", "web") in labels for n, labels in s2), HOSTS)
    return s2


def check_reset_and_change(port, sock, before):
    code, _, err = ctl(sock, "reset", "counters")
    expect("reset counters", code == 0, err)
    after = parse(scrape(port)[2])[0]
    st = stats(sock)
    web_green = metric(after, "tricolor_rule_packets_total", rule="web", color="green")
    expect("after reset counters: /metrics keeps counting from the start, stats from the reset",
           web_green >= metric(before, "tricolor_rule_packets_total", rule="web", color="green") and
           next(r for r in st["rules"] if r["name"] == "web")["green_packets"] < web_green, web_green)
    generation = metric(after, "tricolor_rule_set_generation")
    changed_before = metric(after, "tricolor_rule_set_last_change_timestamp_seconds")
    started = metric(after, "tricolor_start_time_seconds")
    expect("the start and the last change are Unix times; no change yet: the start's",
           abs(started - time.time()) < 600 and abs(changed_before - started) < 1, (started, changed_before))
    time.sleep(1.1)
    at = time.time()
    code, _, err = ctl(sock, "profile", "change", "gold", "trtcm", "cir", "90mbit", "cbs", "64k", "pir", "200mbit", "pbs", "128k")
    expect("profile change gold", code == 0, err)
    changed = parse(scrape(port)[2])[0]
    expect("a change: the generation goes up by one, the time of the last change is the change's",
           metric(changed, "tricolor_rule_set_generation") == generation + 1 and
           abs(metric(changed, "tricolor_rule_set_last_change_timestamp_seconds") - at) < 1,
           (metric(changed, "tricolor_rule_set_generation"), metric(changed, "tricolor_rule_set_last_change_timestamp_seconds"), at))


def check_telemetry(prefix, sock):
    st1 = stats(sock)
    replies = telemetry(prefix, "/tricolor/stats", "/tricolor/rules", "/tricolor/rules,web", "/tricolor/keys,hosts",
                        "/tricolor/keys,hosts,3", "/tricolor/rules,nosuch", "/tricolor/keys,web", "/tricolor/keys,hosts,0",
                        "/tricolor/keys", '/tricolor/rules,a"b')
    st2 = stats(sock)
    t_stats, t_rules, t_web, t_keys, t_top3, nosuch, web_keys, zero, bare, quoted = replies
    rules1, rules2 = ({r["name"]: r for r in s["rules"]} for s in (st1, st2))
    expect("/tricolor/stats: between two stats --json", st1["worker"]["packets"] <= t_stats["packets"] <= st2["worker"]["packets"] and
           t_stats["rules"] == 3 and st1["generation"] == t_stats["generation"] and
           st1["default"]["no_match"] <= t_stats["default_no_match_packets"] <= st2["default"]["no_match"] and
           sum(rules1[r]["green_packets"] for r in rules1) <= t_stats["green_packets"] <= sum(rules2[r]["green_packets"] for r in rules2),
           t_stats)
    rows = {name: i for i, name in enumerate(t_rules["name"])}
    expect("/tricolor/rules: a table of the rules in policy order, between two stats --json",
           t_rules["name"] == ["web", "hosts", "idle"] and
           all(rules1[n][f"{c}_packets"] <= t_rules[f"{c}_packets"][i] <= rules2[n][f"{c}_packets"] for n, i in rows.items()
               for c in COLORS + ("dropped",)), t_rules)
    expect("/tricolor/rules,web: that rule in full (bytes and drops)", t_web.get("name") == "web" and
           rules1["web"]["red_bytes"] <= t_web["red_bytes"] <= rules2["web"]["red_bytes"] and
           rules1["web"]["dropped_packets"] <= t_web["dropped_packets"] <= rules2["web"]["dropped_packets"], t_web)
    expect("/tricolor/keys,hosts: a table of the HOSTS keys, each with its worker and counters",
           sorted(t_keys["key"]) == sorted(f"10.2.0.{i}" for i in range(HOSTS)) and
           all(t_keys["worker"][i] == 0 and t_keys["green_packets"][i] > 0 and t_keys["red_packets"][i] > 0
               for i in range(HOSTS)), t_keys)
    reds = t_top3["red_bytes"]
    expect("/tricolor/keys,hosts,3: three keys by red bytes, largest first", len(t_top3["key"]) == 3 and
           reds == sorted(reds, reverse=True), t_top3)
    expect("errors say what was wrong: no such rule, no per-key meters, a bad count, no rule",
           nosuch == "no rule named nosuch" and web_keys == "rule web has no per-key meters" and
           "N from 1 to 200" in zero and "/tricolor/keys,RULE" in bare, (nosuch, web_keys, zero, bare))
    expect("... a name that could not be a rule's is not repeated (DPDK 22.11 does not escape JSON strings)",
           quoted == "no rule named by that name", quoted)


def slow_writer(port, seconds, outcome):
    """Sends a scrape's request a byte at a time, 0.2 s apart, for `seconds` (not all of it), then
    waits: outcome["writer"] is (seconds from its first byte until the listener closed the connection,
    what it answered), or what went wrong. The listener wants a whole request head within 5 s of its
    first byte, however steadily the bytes come."""
    request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            first = time.monotonic()
            answer = b""
            for byte in request:
                if time.monotonic() - first > seconds:
                    break
                try:
                    s.sendall(bytes([byte]))
                except OSError:  # closed by the listener: its answer is still to be read
                    break
                readable, _, _ = select.select([s], [], [], 0.2)
                if readable:
                    break
            try:
                while chunk := s.recv(4096):  # whatever it answers, until it closes
                    answer += chunk
            except ConnectionResetError:
                pass
            outcome["writer"] = (time.monotonic() - first, answer[:40])
    except OSError as e:
        outcome["writer"] = repr(e)


def slow_reader(port, outcome):
    """A whole request, then the reply read 200 bytes at a time, 50 ms apart."""
    got = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            while chunk := s.recv(200):
                got += chunk
                time.sleep(0.05)
    except OSError as e:
        got += repr(e).encode()
    outcome["reader"] = got


def check_backlog(port):
    """The listening socket's backlog (ss's Send-Q for a listener): a burst of scrapers beyond the
    listener's 64 connections waits there (a small backlog would make them wait seconds for SYN retries)."""
    ss = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, timeout=30).stdout.split()
    expect("the listener's backlog is 1024", len(ss) >= 3 and ss[2] == "1024", ss)


def check_storm(port, sock):
    # The clients on CPU 0 (the main lcore's), so that the worker's CPU carries only the worker: a
    # change in its rate is then the daemon's doing, not this test's threads'.
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        storm(port, sock)
    finally:
        os.sched_setaffinity(0, cpus)


def storm(port, sock):
    outcome = {}
    slow = [threading.Thread(target=slow_writer, args=(port, 8, outcome)), threading.Thread(target=slow_reader, args=(port, outcome))]
    for t in slow:
        t.start()
    time.sleep(0.5)
    before = stats(sock)
    time.sleep(1)
    start = stats(sock)
    results = [None] * 100
    barrier = threading.Barrier(100)

    def one(i):
        barrier.wait()
        try:
            status, _, body = scrape(port, timeout=30)
            results[i] = (status, "tricolor_worker_packets_total" in body and body.endswith("\n"))
        except OSError as e:
            results[i] = (repr(e), False)

    scrapers = [threading.Thread(target=one, args=(i,)) for i in range(100)]
    for t in scrapers:
        t.start()
    for t in scrapers:
        t.join(60)
    end = stats(sock)
    for t in slow:
        t.join(30)
    answered = sum(1 for r in results if r == (200, True))
    expect("100 concurrent scrapes, with a slow writer and a slow reader: every one answered with a whole exposition",
           answered == 100, [r for r in results if r != (200, True)][:5])
    reader = outcome.get("reader", b"")
    expect("the slow reader got its whole reply", reader.startswith(b"HTTP/1.1 200") and b"tricolor_mbufs_in_use" in reader,
           reader[-200:])
    writer = outcome.get("writer")
    expect("the slow writer, a byte every 0.2 s, was cut off 5 s after its first byte (+1 s), answered 408",
           isinstance(writer, tuple) and 4.5 < writer[0] < 6 and writer[1].startswith(b"HTTP/1.1 408 "), writer)
    rate = lambda a, b: (b["worker"]["packets"] - a["worker"]["packets"]) / (b["elapsed_s"] - a["elapsed_s"])  # noqa: E731
    quiet, storm = rate(before, start), rate(start, end)
    print(f"     worker: {quiet / 1e6:.2f} Mpps before, {storm / 1e6:.2f} Mpps during the storm "
          f"({storm / quiet:.2f}; not asserted: timing belongs to benchmarks)")
    expect("the worker forwarded during the storm", end["worker"]["packets"] > start["worker"]["packets"], (start, end))


def check_threads(pid):
    """No thread of the daemon but its worker may run on the worker's CPU (lcore 1 is CPU 1)."""
    tasks = os.listdir(f"/proc/{pid}/task")
    named = {}
    for tid in tasks:
        try:
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            named[tid] = (comm, os.sched_getaffinity(int(tid)))
        except OSError:
            continue
    workers = [tid for tid, (comm, cpus) in named.items() if comm.startswith("rte-worker")]
    others = {tid: v for tid, v in named.items() if tid not in workers}
    expect("threads: the worker alone on CPU 1; the others (the listener's two, telemetry, control) off it",
           len(workers) == 1 and named[workers[0]][1] == {1} and
           {"metrics-http", "metrics-expose"} <= {comm for comm, _ in others.values()} and
           all(1 not in cpus for comm, cpus in others.values()), named)


def check_readme(workdir):
    """doc/tricolord.md's scrape configuration passes `promtool check config`, and each of its queries parses
    (`promtool check rules`, each query a recording rule)."""
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "doc", "tricolord.md")).read()
    section = readme[readme.index("## Telemetry: Prometheus and DPDK telemetry"):]
    config = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    queries = [line for line in re.search(r"```promql\n(.*?)```", section, re.S).group(1).splitlines()
               if line.strip() and not line.startswith("#")]
    config_path, rules_path = os.path.join(workdir, "prometheus.yml"), os.path.join(workdir, "queries.yml")
    open(config_path, "w").write(config)
    with open(rules_path, "w") as f:
        f.write("groups:\n  - name: readme\n    rules:\n")
        for i, query in enumerate(queries):
            f.write(f"      - record: readme:query_{i}\n        expr: {json.dumps(query)}\n")
    r = subprocess.run([PROMTOOL, "check", "config", config_path], capture_output=True, text=True, timeout=60)
    expect("doc/tricolord.md's scrape configuration passes promtool check config", r.returncode == 0, r.stdout + r.stderr)
    r = subprocess.run([PROMTOOL, "check", "rules", rules_path], capture_output=True, text=True, timeout=60)
    expect(f"doc/tricolord.md's {len(queries)} queries parse (promtool check rules)", r.returncode == 0 and len(queries) >= 8,
           r.stdout + r.stderr)


def check_startup_refusals(workdir, port):
    policy = os.path.join(workdir, "p.policy")
    second = start_daemon("metrics2", policy, os.path.join(workdir, "second.sock"), extra=["--metrics", f"127.0.0.1:{port}"],
                          duration=20)
    try:
        _, err = second.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        second.kill()
        _, err = second.communicate()
    expect("a second daemon on the same --metrics address: status 1 at startup, the port said to be taken",
           second.returncode == 1 and f"--metrics 127.0.0.1:{port}: cannot listen there: Address already in use" in err,
           (second.returncode, err[-500:]))
    r = subprocess.run([tricolord, "--", "--policy", policy, "--metrics", "localhost"], capture_output=True, text=True, timeout=30)
    expect("--metrics without a port: status 1, an example given", r.returncode == 1 and
           "--metrics 'localhost': expected ADDRESS:PORT (e.g. 127.0.0.1:9400" in r.stderr, (r.returncode, r.stderr))
    sock = os.path.join(workdir, "plain.sock")
    plain = start_daemon("metrics3", policy, sock, duration=20)
    try:
        listening = None
        if wait_for(sock, plain):
            ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30).stdout
            listening = [line for line in ss.splitlines() if f"pid={plain.pid}," in line]
        expect("without --metrics: the daemon listens on no TCP port", listening == [], listening)
    finally:
        plain.send_signal(signal.SIGTERM)
        plain.communicate(timeout=30)


def check_conservation(final):
    p0 = next(p for p in final["ports"] if p["port"] == 0)
    p1 = next(p for p in final["ports"] if p["port"] == 1)
    packets = sum(r[f"{c}_packets"] for r in final["rules"] for c in COLORS) + final["default"]["packets"]
    dropped = sum(r["dropped_packets"] for r in final["rules"]) + final["default"]["dropped_packets"]
    expect("conservation at the stop: received = the worker's packets = the rules' and the default's",
           p0["rx_packets"] == final["worker"]["packets"] == packets and p0["rx_packets"] > 0 and p1["rx_packets"] == 0,
           (p0["rx_packets"], final["worker"]["packets"], packets))
    expect("... forwarded = port 1's TX + tx-dropped; each rule drops its red",
           packets - dropped == p1["tx_packets"] + p1["tx_dropped"] and
           all(r["dropped_packets"] == r["red_packets"] for r in final["rules"] if r["name"] != "idle"),
           (packets - dropped, p1["tx_packets"], p1["tx_dropped"]))


def main():
    for program in (PROMTOOL, TELEMETRY):
        if not os.access(program, os.X_OK):
            sys.exit(f"FAIL: {program} is missing (./dev installs prometheus and dpdk-dev)")
    with tempfile.TemporaryDirectory(prefix="tricolor-metrics-") as workdir:
        open(os.path.join(workdir, "p.policy"), "w").write(POLICY)
        pcap = os.path.join(workdir, "traffic.pcap")
        write_capture(pcap)
        sock = os.path.join(workdir, "ctl.sock")
        port = free_port()
        daemon = start_daemon("metrics", os.path.join(workdir, "p.policy"), sock,
                              vdevs=[f"net_pcap0,rx_pcap={pcap},infinite_rx=1", "net_null0,no-rx=1"],
                              extra=["--clock", "tsc", "--json", "--metrics", f"127.0.0.1:{port}"],
                              duration=150, stdout=subprocess.PIPE, telemetry=True)
        out = err = ""
        try:
            if not wait_for(sock, daemon):
                daemon.kill()
                sys.exit("tricolord did not answer ping: " + daemon.communicate()[1][-2000:])
            time.sleep(1)  # the first packets metered
            check_exposition(port, sock)
            before = check_against_stats(port, sock)
            check_telemetry(file_prefix("metrics"), sock)
            check_threads(daemon.pid)
            check_backlog(port)
            check_storm(port, sock)
            check_reset_and_change(port, sock, before)
            check_startup_refusals(workdir, port)
            check_readme(workdir)
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
            try:
                out, err = daemon.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                out, err = daemon.communicate()
        expect("the daemon stopped cleanly", daemon.returncode == 0, (daemon.returncode, err[-1000:]))
        isolated = open("/sys/devices/system/cpu/isolated").read().split()
        if not isolated:  # this machine's kernel isolates no CPU
            expect("startup: a note that the worker's CPU 1 is not isolated",
                   "note: the worker's CPU 1 is not isolated: the kernel may run other processes there" in err, err[-2000:])
        else:
            print(f"SKIP the note on a CPU not isolated: this kernel isolates {isolated[0]}")
        finals = [json.loads(line) for line in out.splitlines() if '"event": "final"' in line or '"event":"final"' in line]
        expect("its final counters", len(finals) == 1, out[-500:])
        if finals:
            check_conservation(finals[0])
    finish()


if __name__ == "__main__":
    main()
