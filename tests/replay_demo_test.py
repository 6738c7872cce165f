#!/usr/bin/env python3
"""The README's offline demo (./dev replay-demo) runs and prints its per-rule table.

Run by meson with the source root and this build directory; ./dev then finds everything installed and
the build current, so it only runs the demo: tricolor-replay --demo, which writes a capture and the
example policy into <build>/demo and replays them. Checks that the printed table has a row per
rule of the policy, that it agrees with the JSON summary written beside it, that each meter handed
out no more than its buckets allow (burst + rate x duration), that a greedy flow's green is within a
packet of CBS + CIR x T, and that the CSV has a line per packet.
"""
import json
import os
import re
import subprocess
import sys

source_root, build_root = sys.argv[1], sys.argv[2]
env = dict(os.environ, TRICOLOR_BUILD_DIR=build_root)
result = subprocess.run([os.path.join(source_root, "dev"), "replay-demo"], env=env, stdin=subprocess.DEVNULL,
                        capture_output=True, text=True, timeout=600)
print(result.stdout)
print(result.stderr, file=sys.stderr)
assert result.returncode == 0, f"./dev replay-demo exited {result.returncode}"

demo = os.path.join(build_root, "demo")
summary = json.load(open(os.path.join(demo, "summary.json")))
policy = open(os.path.join(demo, "demo.policy")).read()

header = "rule profile green_pkts green_bytes yellow_pkts yellow_bytes red_pkts red_bytes dropped".split()
lines = result.stdout.splitlines()
start = next(i for i, line in enumerate(lines) if line.split() == header)
rows = {}
for line in lines[start + 1:]:
    if line.startswith("(default)"):
        default_line = line
        break
    fields = line.split()
    assert len(fields) == len(header), f"malformed row: {line!r}"
    rows[fields[0]] = dict(zip(header, fields))
else:
    raise AssertionError("no (default) line after the rule rows")

rule_names = re.findall(r"^rule add (\S+)", policy, re.M)
assert list(rows) == rule_names, f"rows {list(rows)} != rules {rule_names}"

# The table and the JSON say the same.
for rule in summary["rules"]:
    row = rows[rule["name"]]
    assert row["profile"] == rule["profile"]
    for color in ("green", "yellow", "red"):
        assert int(row[f"{color}_pkts"]) == rule[color]["packets"], (rule["name"], color)
        assert int(row[f"{color}_bytes"]) == rule[color]["bytes"], (rule["name"], color)
    assert int(row["dropped"]) == rule["dropped"]["packets"]
d = summary["default"]
assert default_line.startswith(f"(default)    {d['packets']} packets, {d['bytes']} bytes: {d['non_ip']} not IP, "
                               f"{d['no_match']} matching no rule"), default_line
assert d["non_ip"] > 0 and d["no_match"] > 0 and sum(d["malformed"].values()) > 0, d

# Every packet is accounted for once, and the CSV has a line for each.
total = sum(r[c]["packets"] for r in summary["rules"] for c in ("green", "yellow", "red")) + d["packets"]
assert total == summary["capture"]["packets"], (total, summary["capture"])
with open(os.path.join(demo, "packets.csv")) as csv:
    assert sum(1 for _ in csv) == total + 1

# Buckets: no meter hands out more than burst + rate x T (T = the 3 s of demo traffic).
SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}
def rate(text):
    m = re.fullmatch(r"(\d+)([kmg]?)(bit|pps)", text)
    value = int(m.group(1)) * SI[m.group(2)]
    return value // 8 if m.group(3) == "bit" else value
def burst(text):
    m = re.fullmatch(r"(\d+)(k|pkt)?", text)
    return int(m.group(1)) * (1024 if m.group(2) == "k" else 1)
profiles = {}
for name, algo, params in re.findall(r"^profile add (\S+) (\S+) (.*)$", policy, re.M):
    words = params.split()
    profiles[name] = (algo, {k: (rate(v) if k.endswith("ir") else burst(v)) for k, v in zip(words[::2], words[1::2])})
seconds = 3
for rule in summary["rules"]:
    # A rule's color is its parent's when it has one; per-key meters alone bound only each key.
    line = re.search(rf"^rule add {rule['name']} .*$", policy, re.M).group(0)
    parent = re.search(r" parent (\S+)", line)
    if " per " in line and not parent:
        continue
    bounding = parent.group(1) if parent else rule["profile"]
    algo, p = profiles[bounding]
    unit = "packets" if "pps" in re.search(rf"^profile add {bounding} .*$", policy, re.M).group(0) else "bytes"
    green, yellow = rule["green"][unit], rule["yellow"][unit]
    assert green <= p["cbs"] + p["cir"] * seconds, rule["name"]
    if algo == "srtcm":
        assert green + yellow <= p["cbs"] + p["ebs"] + p["cir"] * seconds, rule["name"]
    if algo == "trtcm":
        assert green + yellow <= p["pbs"] + p["pir"] * seconds, rule["name"]
    if algo == "1r2c":
        assert yellow == 0, rule["name"]
keyed = [line for line in lines if line.startswith("(keys)")]
assert keyed and all(re.match(r"\(keys\)\s+\S+: [1-9]\d* live, \d+ created", line) for line in keyed), keyed

# web is offered 15 Mbit/s against a 5 Mbit/s committed rate: green within a packet of CBS + CIR x T.
web = next(r for r in summary["rules"] if r["name"] == "web")
bound = profiles["gold"][1]["cbs"] + profiles["gold"][1]["cir"] * seconds
assert bound - 1500 < web["green"]["bytes"] <= bound, (web["green"], bound)
# The picture of the rates per rule (tricolor-plot), drawn after the CSV.
picture = os.path.join(demo, "rates.png")
assert os.path.exists(picture), "./dev replay-demo drew no build/demo/rates.png"
assert open(picture, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "rates.png is not a PNG"
assert os.path.getmtime(picture) >= os.path.getmtime(os.path.join(demo, "packets.csv")), "rates.png is older than the CSV"
assert "rates per rule, drawn" in result.stderr, result.stderr

# Without matplotlib (hidden by a module that fails to import): the demo runs, and says so.
hide = os.path.join(build_root, "demo-no-matplotlib", "matplotlib")
os.makedirs(hide, exist_ok=True)
with open(os.path.join(hide, "__init__.py"), "w") as f:
    f.write("raise ImportError('hidden by replay_demo_test.py')\n")
os.remove(picture)
bare = subprocess.run([os.path.join(source_root, "dev"), "replay-demo"], env=dict(env, PYTHONPATH=os.path.dirname(hide)),
                      stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
assert bare.returncode == 0, f"without matplotlib, ./dev replay-demo exited {bare.returncode}: {bare.stderr}"
assert "tricolor-plot needs python3-matplotlib" in bare.stderr, bare.stderr
assert not os.path.exists(picture), "a picture without matplotlib?"
print("replay demo: ok")
