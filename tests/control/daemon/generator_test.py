#!/usr/bin/env python3
"""tricolord with a real packet generator: dpdk-testpmd txonly --txonly-multi-flow over memif.

    generator (testpmd txonly) --memif--> tricolord port 0 ... port 1 --memif--> receiver (testpmd rxonly)

The rig (control/demo/memif_rig.py, the one behind `./dev run`) pins the lcores: both testpmds and
tricolord's main lcore on the first CPU, tricolord's worker alone on the second; each process has its
own --file-prefix and its memif sockets sit in a private temporary directory; every process ends by
itself (tricolord's --duration, testpmd's end of input, and PR_SET_PDEATHSIG should this test die).

Run 1, conservation and the meters (10 s of traffic). For the counts to be exact the generator must
stop before tricolord does, and every count must be read while all three processes still run (a memif
port's counters restart at zero when its peer disconnects):
  1. the generator's `stop`: its forwarding lcore has returned, so its TX count G (`show port stats 0`)
     is final;
  2. tricolord's JSON stats lines (every 0.25 s) until one in which port 0 has received G packets, the
     worker has handled every packet received and the ports have sent or dropped every packet
     forwarded: the counters only grow and nothing is left to arrive, so they are final;
  3. the receiver's `show port stats 0` until it has received what tricolord's port 1 sent;
  4. SIGTERM to tricolord: its final JSON line must hold those same counts.
Then: generator TX = tricolord RX = the rules' packets = forwarded + dropped, per rule (each rule
drops exactly its red packets and forwards its green and yellow ones); forwarded = port 1's TX + its
tx-dropped; the receiver's RX = port 1's TX. For each aggregate rule whose CIR is at most a tenth of
what it was offered, green bytes lie between 0.95 x and 1 x (CBS + CIR x T) + one packet, T from the
rule's first to its last metered tick as tricolord reports them (a per-source rule under a parent takes
its color from the parent: its green is held to the parent's bound, from above). The mbuf pool's
in-use count is back to its start.

Run 2, SIGTERM under full traffic (4 s in): tricolord exits 0 within 3 s (the time is printed), with
its final counters (stop_s among them), every packet it received handled, and its mbufs back.

Usage: generator_test.py TRICOLORD SOURCE_ROOT
"""
import os
import re
import shutil
import sys
import tempfile

tricolord, source_root = sys.argv[1], sys.argv[2]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(source_root, "control", "demo"))
import memif_rig  # noqa: E402

FRAME = memif_rig.FRAME_BYTES
# txonly's 256 sources 10.0.X.3 in turn: a quarter each for the two aggregate rules, half per source.
POLICY = """\
profile add slow srtcm cir 256kbit cbs 64k ebs 64k
profile add tiered trtcm cir 512kbit cbs 64k pir 1mbit pbs 64k
profile add host srtcm cir 40kbit cbs 4k ebs 4k
profile add hosts trtcm cir 1mbit cbs 64k pir 2mbit pbs 64k
rule add slow src 10.0.0.0/18 profile slow red drop
rule add tiered src 10.0.64.0/18 profile tiered yellow remark af12 red drop
rule add hosts src 10.0.128.0/17 profile host per src capacity 4k parent hosts red drop
"""
SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def bytes_per_second(text):
    m = re.fullmatch(r"(\d+)([kmg]?)bit", text)
    return int(m.group(1)) * SI[m.group(2)] / 8


def burst_bytes(text):
    m = re.fullmatch(r"(\d+)(k?)", text)
    return int(m.group(1)) * (1024 if m.group(2) else 1)


profiles = {}
for name, params in re.findall(r"^profile add (\S+) \S+ (.*)$", POLICY, re.M):
    words = params.split()
    profiles[name] = dict(zip(words[::2], words[1::2]))
rules = {name: body for name, body in re.findall(r"^rule add (\S+) (.*)$", POLICY, re.M)}

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL: " + message)


def packets(rule):
    return rule["green_packets"] + rule["yellow_packets"] + rule["red_packets"]


work = tempfile.mkdtemp(prefix="tricolor-generator-test-")
policy_path = os.path.join(work, "policy")
with open(policy_path, "w") as f:
    f.write(POLICY)
generator = memif_rig.GENERATORS["txonly"]

# ---- run 1: conservation, the meters' bounds, the mbufs -----------------------------------------
try:
    with memif_rig.Rig(tricolord, policy_path, generator, os.path.join(work, "run1"), stats_interval=0.25,
                       backstop_s=60, name="gentest") as rig:
        print(f"memory: {rig.memory.reason}; CPUs {rig.cpus}")
        rig.start()
        rig.traffic(10)
        outcome = rig.stop_traffic()
except memif_rig.RigError as e:
    sys.exit(f"FAIL: run 1: {e}\nlogs in {work}")
final = outcome.final
sent, got = outcome.generator_sent, outcome.receiver_got
p0, p1, worker = memif_rig.port(final, 0), memif_rig.port(final, 1), final["worker"]
print(f"run 1: {outcome.traffic_s:.1f} s of traffic; generator sent {sent.tx_packets} packets "
      f"({sent.tx_packets / outcome.traffic_s / 1e6:.3f} Mpps); tricolord's counters settled "
      f"{outcome.settle_s:.2f} s after the generator's stop; port 1 sent {p1['tx_packets']} "
      f"(tx-dropped {p1['tx_dropped']}), the receiver got {got.rx_packets}")
check(outcome.tricolord_status == 0, f"tricolord exited {outcome.tricolord_status}")
check(sent.tx_packets > 0, "the generator sent nothing")

# Conservation, in packets and bytes.
check(sent.tx_packets == p0["rx_packets"], f"generator TX {sent.tx_packets} != tricolord port 0 RX {p0['rx_packets']}")
check(sent.tx_bytes == p0["rx_bytes"], f"generator TX bytes {sent.tx_bytes} != port 0 RX bytes {p0['rx_bytes']}")
check(p1["rx_packets"] == 0 and p0["tx_packets"] == 0, "traffic the other way (the receiver sends nothing)")
check(worker["packets"] == p0["rx_packets"], f"worker handled {worker['packets']} of {p0['rx_packets']} received")
total = sum(packets(r) for r in final["rules"]) + final["default"]["packets"]
check(total == p0["rx_packets"], f"rules + default {total} != received {p0['rx_packets']}")
check(final["default"]["packets"] == 0, f"default action took {final['default']['packets']} (every source has a rule)")
total_bytes = sum(r["green_bytes"] + r["yellow_bytes"] + r["red_bytes"] for r in final["rules"])
check(total_bytes == p0["rx_bytes"], f"rules' bytes {total_bytes} != received bytes {p0['rx_bytes']}")
forwarded = 0
for r in final["rules"]:
    # Every rule says `red drop`: green and yellow are forwarded, red dropped.
    check(r["dropped_packets"] == r["red_packets"] and r["dropped_bytes"] == r["red_bytes"],
          f"rule {r['name']}: dropped {r['dropped_packets']} != red {r['red_packets']}")
    check(packets(r) > 0, f"rule {r['name']} saw nothing")
    forwarded += packets(r) - r["dropped_packets"]
check(worker["policy_drops"] == sum(r["dropped_packets"] for r in final["rules"]), "worker's drops != rules' drops")
check(forwarded == p1["tx_packets"] + p1["tx_dropped"],
      f"forwarded {forwarded} != port 1 TX {p1['tx_packets']} + tx-dropped {p1['tx_dropped']}")
check(got.rx_packets == p1["tx_packets"], f"receiver RX {got.rx_packets} != port 1 TX {p1['tx_packets']}")
check(got.rx_bytes == p1["tx_bytes"], f"receiver RX bytes {got.rx_bytes} != port 1 TX bytes {p1['tx_bytes']}")
hosts = next(r for r in final["rules"] if r["name"] == "hosts")
check(hosts["keys"]["live"] == 128, f"hosts: {hosts['keys']['live']} live keys, 128 sources expected")

# The meters: green within (CBS + CIR x T) + one packet, and at least 0.95 of it.
tick_hz = final["tick_hz"]
checked = []
for r in final["rules"]:
    body = rules[r["name"]]
    seconds = (r["last_tick"] - r["first_tick"]) / tick_hz
    offered = (r["green_bytes"] + r["yellow_bytes"] + r["red_bytes"]) / seconds  # bytes per second
    parent = re.search(r" parent (\S+)", body)
    profile = profiles[parent.group(1) if parent else re.search(r" profile (\S+)", body).group(1)]
    cir, cbs = bytes_per_second(profile["cir"]), burst_bytes(profile["cbs"])
    bound = cbs + cir * seconds
    green = r["green_bytes"]
    print(f"  rule {r['name']}: offered {offered * 8 / 1e6:.2f} Mbit/s over {seconds:.3f} s; green {green} bytes, "
          f"CBS + CIR x T = {bound:.0f} ({green / bound:.4f} of it)")
    check(green <= bound + FRAME, f"rule {r['name']}: green {green} > CBS + CIR x T + one packet = {bound + FRAME:.0f}")
    if " per " in body:
        continue  # per-key meters below a parent: the parent bounds the rule's green from above only
    if cir > offered / 10:
        print(f"  rule {r['name']}: its CIR is more than a tenth of what it was offered: lower bound not checked")
        continue
    check(green >= 0.95 * bound, f"rule {r['name']}: green {green} < 0.95 x (CBS + CIR x T) = {0.95 * bound:.0f}")
    checked.append(r["name"])
check(checked, "no aggregate rule was offered ten times its CIR: the generator was too slow to test the meters")

check(final["mbufs_in_use"] == final["mbufs_in_use_at_start"],
      f"mbufs in use {final['mbufs_in_use']} after the stop, {final['mbufs_in_use_at_start']} at the start")

# ---- run 2: SIGTERM under full traffic ------------------------------------------------------
try:
    with memif_rig.Rig(tricolord, policy_path, generator, os.path.join(work, "run2"), stats_interval=0.25,
                       backstop_s=60, name="gentest") as rig:
        rig.start()
        stats = rig.traffic(4)
        outcome = rig.terminate_under_load(timeout=10)
except memif_rig.RigError as e:
    sys.exit(f"FAIL: run 2: {e}\nlogs in {work}")
final = outcome.final
p0, p1, worker = memif_rig.port(final, 0), memif_rig.port(final, 1), final["worker"]
last_two = [s for s in stats if s.get("event") == "stats"][-2:]
flowing = len(last_two) == 2 and memif_rig.port(last_two[1], 0)["rx_packets"] > memif_rig.port(last_two[0], 0)["rx_packets"]
print(f"run 2: SIGTERM after {outcome.traffic_s:.1f} s of traffic: tricolord exited {outcome.tricolord_status} "
      f"{outcome.tricolord_exit_s:.3f} s later (its worker stopped in {final.get('stop_s', float('nan')):.3f} s), "
      f"having received {p0['rx_packets']} packets")
check(flowing, "traffic was not flowing when SIGTERM was sent")
check(outcome.tricolord_status == 0, f"tricolord exited {outcome.tricolord_status} after SIGTERM")
check(outcome.tricolord_exit_s < 3, f"tricolord took {outcome.tricolord_exit_s:.3f} s to exit after SIGTERM")
check("stop_s" in final and 0 < final["stop_s"] <= outcome.tricolord_exit_s, f"stop_s {final.get('stop_s')}")
check(p0["rx_packets"] > 0 and worker["packets"] == p0["rx_packets"],
      f"worker handled {worker['packets']} of {p0['rx_packets']} received")
check(sum(packets(r) for r in final["rules"]) + final["default"]["packets"] == worker["packets"],
      "rules + default != packets handled")
forwarded = worker["packets"] - worker["policy_drops"]
check(forwarded == p1["tx_packets"] + p1["tx_dropped"],
      f"forwarded {forwarded} != port 1 TX {p1['tx_packets']} + tx-dropped {p1['tx_dropped']}")
check(final["mbufs_in_use"] == final["mbufs_in_use_at_start"],
      f"mbufs in use {final['mbufs_in_use']} after SIGTERM, {final['mbufs_in_use_at_start']} at the start")

if failures:
    print(f"{len(failures)} failures; logs in {work}")
    sys.exit(1)
shutil.rmtree(work)
print("daemon-generator: ok")
