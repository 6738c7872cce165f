#!/usr/bin/env python3
"""tricolor-replay against inputs that would exhaust memory (issue 7), with the real binary, each run
under an address-space limit (setrlimit RLIMIT_AS) so that a regression fails instead of swapping.
The plain build only: sanitizer builds reserve terabytes of address space and cannot run under such a
limit (meson does not register this test there).

The EAL of tricolor-replay reserves its 2 GiB heap (--no-huge -m 2048) as address space; every limit
below is that plus what the case may use.

Usage: hostile_memory_test.py TRICOLOR_REPLAY
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile

replay = sys.argv[1]
work = tempfile.mkdtemp(prefix="tricolor-hostile-memory-")
failures = []
GiB, MiB = 1 << 30, 1 << 20


def path(name):
    return os.path.join(work, name)


def write(name, text):
    with open(path(name), "w") as out:
        out.write(text)
    return path(name)


def sources_pcap(name, count):
    """A nanosecond pcap of `count` UDP packets, each from its own IPv4 source 10.x.y.z, 1 us apart.
    Written as it goes: this process stays small, since a child's peak memory (ru_maxrss) starts from
    the size of the process it was forked from."""
    eth = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00"
    tail = bytes([192, 168, 0, 1]) + struct.pack(">HHHH", 1000, 53, 26, 0) + b"\x00" * 18
    with open(path(name), "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
        for start in range(0, count, 10_000):
            parts = []
            for i in range(start, min(count, start + 10_000)):
                frame = eth + struct.pack(">BBHHHBBHI", 0x45, 0, 46, 0, 0, 64, 17, 0, 0x0a000000 + i) + tail
                t = 1_700_000_000_000_000_000 + i * 1000
                parts.append(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)) + frame)
            out.write(b"".join(parts))
    return path(name)


def run(args, address_space):
    """Runs the binary under an address-space limit; returns (exit status, stderr, peak RSS in bytes)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    with open(path("stderr"), "w+") as err:
        child = subprocess.Popen([replay, *args], stdout=subprocess.DEVNULL, stderr=err, preexec_fn=limit)
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except BaseException:
            child.kill()
            raise
        err.seek(0)
        text = err.read()
    code = os.waitstatus_to_exitcode(status)
    return code, text, usage.ru_maxrss * 1024


def check(name, code, stderr, expected_code, *fragments):
    if code != expected_code:
        failures.append(f"{name}: exit {code}, expected {expected_code}; stderr: {stderr[:600]!r}")
    for fragment in fragments:
        if fragment not in stderr:
            failures.append(f"{name}: stderr lacks {fragment!r}: {stderr[:600]!r}")


# Measured first, while this process is small (see sources_pcap), each in its own section below.
udp_dns = sources_pcap("few.pcap", 100)


# ---- finding 11: a key table costs its index from the start, and its entries as keys arrive ---------
# capacity 16m: an index of 256 MiB, resident when the rule is installed; 100 keys then cost one 512 KiB
# chunk of entries. The load-time message and the JSON say both; peak memory agrees with them.
costs = {}
for capacity in ("1k", "16m"):
    policy_path = write(f"cap-{capacity}.policy", f"profile add p 1r2c cir 1mbit cbs 10k\nrule add keys profile p "
                                                   f"per src capacity {capacity}\n")
    code, stderr, peak = run(["--policy", policy_path, "--in", udp_dns, "--json", path(f"cap-{capacity}.json")], 3 * GiB)
    check(f"capacity {capacity}", code, stderr, 0, "rule keys: key index", f"for capacity {capacity}, allocated and "
          "resident now; entries 128 B per live key, in 512 KiB chunks as keys arrive")
    if code == 0:
        costs[capacity] = (peak, json.load(open(path(f"cap-{capacity}.json")))["rules"][0]["keys"])
if len(costs) == 2:
    (small_peak, small), (big_peak, big) = costs["1k"], costs["16m"]
    expected_index = 8 * 2 * 16 * 2**20 + 548 * 4096 + 16 * 64  # slots + per-chunk bookkeeping + bitmaps
    if big.get("index_bytes") != expected_index or big.get("entry_bytes") != 512 * 1024:
        failures.append(f"capacity 16m: JSON says index {big.get('index_bytes')} and entries {big.get('entry_bytes')}, "
                        f"expected {expected_index} and {512 * 1024}")
    growth = big_peak - small_peak
    if not 0.9 * expected_index <= growth <= expected_index + 32 * MiB:
        failures.append(f"capacity 16m: peak memory is {growth / MiB:.0f} MiB above capacity 1k's, expected its index "
                        f"({expected_index / MiB:.0f} MiB) resident and little else")
    print(f"capacity 16m: {growth / MiB:.0f} MiB above capacity 1k (index {expected_index / MiB:.1f} MiB)")

# ---- finding 4: key indexes that cannot be had refuse the policy before any packet -------------------
two = write("two.policy", "profile add p 1r2c cir 1mbit cbs 10k\n" +
            "rule add a dst 192.168.0.0/24 profile p per src capacity 256m\n"
            "rule add b profile p per src capacity 256m\n")
code, stderr, _ = run(["--policy", two, "--in", udp_dns, "--csv", path("two.csv")], 7 * GiB)
check("two rules of capacity 256m in 7 GiB (the EAL's 2 GiB, one index of 4 GiB)", code, stderr, 2, "rule b: cannot allocate its key index: capacity 256m keys "
      "needs 4.03 GiB", "out of memory")
if os.path.exists(path("two.csv")) and len(open(path("two.csv")).read().splitlines()) > 1:
    failures.append("two rules of capacity 256m in 6 GiB: packets were processed before the refusal")

# ---- finding 1: a rule whose list lengths multiply to 2^64 ------------------------------------------
# 2^15 ingress ports x 2^17 source ports x 2^16 destination ports x 2^16 DSCP values (a 1.2 MB file):
# the old count wrapped to 0 and the expansion grew until it aborted. Since issue 21 the language
# refuses a list that names a value twice, at once and naming the value, within the memory limit (the
# classifier still merges repeats given through its API: classifier_test's AHostileRuleIsRefused...).
# The same shape with distinct values everywhere is refused by the classifier, naming each list.
def listing(values):
    return ",".join(map(str, values))


wrap = write("wrap.policy", "profile add p 1r2c cir 1gbit cbs 1m\n" +
             f"rule add wrap port {listing(range(0, 65536, 2))} proto udp sport {listing([1000] * 2**17)} "
             f"dport {listing([53] * 2**16)} dscp {listing([0] * 2**16)} profile p\n")
code, stderr, _ = run(["--policy", wrap, "--in", udp_dns, "--json", path("wrap.json")], 3 * GiB)
check("a rule whose list lengths multiply to 2^64", code, stderr, 2, "line 2:",
      "ports 1000 and 1000 are the same port; list each once")
distinct = write("distinct.policy", "profile add p 1r2c cir 1gbit cbs 1m\n" +
                 f"rule add wide port {listing(range(0, 65536, 2))} proto udp sport {listing(range(1, 65536, 2))} "
                 f"dport {listing(range(0, 65536, 2))} dscp {listing(range(0, 64, 2))} profile p\n")
code, stderr, _ = run(["--policy", distinct, "--in", udp_dns], 3 * GiB)
check("a rule of 2^50 distinct entries", code, stderr, 2, "rule wide expands to", "32768 ingress port ranges x "
      "32768 source port ranges x 32768 destination port ranges x 32 DSCP blocks", "at most 65536")

# ---- finding 3: a policy's classifier entries are limited; memory running out is an error -----------
# 60 rules of 65536 entries each (32768 disjoint source ports x 2 DSCP blocks): 5 GB and a minute to
# build in rte_acl's trie. Refused at once by the default limit; with the limit raised, under 1 GiB of
# headroom, the build runs out of memory and says so (exit 2, not an abort). r0's /24 among the others'
# /16 keeps the rules from being of one shape, so that the trie is what is built.
def sixty_rules(first_prefix):
    return "profile add p 1r2c cir 1gbit cbs 1m\n" + "".join(
        f"rule add r{i} dst 10.{i}.0.0/{first_prefix if i == 0 else 16} proto udp sport {listing(range(1, 65536, 2))} "
        f"dscp 0,2 profile p\n" for i in range(60))
sixty = write("sixty.policy", sixty_rules(24))
code, stderr, _ = run(["--policy", sixty, "--in", udp_dns], 3 * GiB)
check("60 rules of 65536 entries", code, stderr, 2, "the rules expand to 3932160 classifier entries, more than the "
      "limit of 131072", "biggest rules r0 65536, r1 65536, r2 65536", "raise the limit with --max-classifier-entries")
code, stderr, _ = run(["--policy", sixty, "--in", udp_dns, "--max-classifier-entries", "4000000"], 3 * GiB)
check("60 rules of 65536 entries, limit raised, 1 GiB of memory", code, stderr, 2, "cannot build the classifier of "
      "3932160 entries", "out of memory")
# The same rules all of one shape (r0 a /16 too) are a hash table (issue 23), not a trie: under the
# same 1 GiB they are built and run; under half of it, the table's memory runs out and that is said.
one_shape = write("sixty-one-shape.policy", sixty_rules(16))
code, stderr, _ = run(["--policy", one_shape, "--in", udp_dns, "--max-classifier-entries", "4000000"], 3 * GiB)
check("60 rules of 65536 entries of one shape, 1 GiB of memory", code, stderr, 0)
code, stderr, _ = run(["--policy", one_shape, "--in", udp_dns, "--max-classifier-entries", "4000000"], 5 * GiB // 2)
check("60 rules of 65536 entries of one shape, 0.5 GiB of memory", code, stderr, 2, "cannot build the classifier of "
      "3932160 entries", "building the exact-match tables: out of memory")

# ---- finding 12: --json --all-keys streams the key list (last: reading its JSON makes this process big)
# It used to build a JSON document of about 2.2 KB per key (1.2 GB for 500 000 keys); the keys are now
# held as 88-byte binary copies to sort them, and written as they go.
KEYS = 500_000
keys_pcap = sources_pcap("keys.pcap", KEYS)
keys_policy = write("keys.policy", "profile add p 1r2c cir 1mbit cbs 10k\nrule add all profile p per src capacity 1m\n")
runs = {}
for label, extra in (("top", []), ("all", ["--all-keys"])):
    code, stderr, peak = run(["--policy", keys_policy, "--in", keys_pcap, "--json", path(label + ".json"), *extra],
                             3 * GiB)
    check(f"--json {' '.join(extra) or '(top keys)'} over {KEYS} keys", code, stderr, 0)
    runs[label] = peak
if not failures:
    per_key = (runs["all"] - runs["top"]) / KEYS
    if per_key > 200:
        failures.append(f"--all-keys costs {per_key:.0f} bytes of peak memory per key (at most 200 expected: "
                        f"{runs['top'] / MiB:.0f} MiB without, {runs['all'] / MiB:.0f} MiB with)")
    listed = json.load(open(path("all.json")))["rules"][0]["keys"]["all"]
    if len(listed) != KEYS or sum(k["green"]["packets"] for k in listed) != KEYS:
        failures.append(f"--all-keys listed {len(listed)} keys, expected {KEYS} with one green packet each")
    print(f"--all-keys: {per_key:.0f} bytes of peak memory per key "
          f"({runs['top'] / MiB:.0f} MiB without, {runs['all'] / MiB:.0f} MiB with, {KEYS} keys)")

if failures:
    print("\n".join(failures))
    print(f"files kept in {work}")
    sys.exit(1)
shutil.rmtree(work)
print("hostile memory: ok")
