#!/usr/bin/env python3
"""tricolor-replay given careless or hostile files and options (issue 7), with the real binary: each
case is a command line, the exit status it must end with, the words its stderr must hold, and what
must be true of the files afterwards (an input never overwritten, an output never mixed).

Usage: hostile_files_test.py TRICOLOR_REPLAY REPLAY_DOC (doc/replay.md)
"""
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile

replay, readme = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="tricolor-hostile-files-")
failures = []

USAGE, INPUT = 1, 2  # tricolor-replay's exit statuses: a wrong command line; an unusable file


def path(name):
    return os.path.join(work, name)


def frame(i):
    ip = bytes([0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1 + i % 200, 10, 0, 0, 1])
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + struct.pack(">HHHH", 1000 + i, 53, 26, 0) + b"\x00" * 18


def write_pcap(name, frames):
    data = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        data += struct.pack("<IIII", 1_700_000_000, i * 1000, len(f), len(f)) + f
    with open(path(name), "wb") as out:
        out.write(data)
    return path(name)


def write(name, text, mode="w"):  # text, or bytes with mode "wb"
    with open(path(name), mode) as out:
        out.write(text)
    return path(name)


def digest(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(args, stdout=subprocess.PIPE):
    # Every case here ends in well under a second; one that does not (a policy read from /dev/zero
    # without end) is stopped, and fails, long before it could exhaust memory.
    try:
        return subprocess.run([replay, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, "timeout", "", "(still running after 20 s: stopped)")


def check(name, result, code, *fragments):
    if result.returncode != code:
        failures.append(f"{name}: exit {result.returncode}, expected {code}; stderr: {result.stderr[:500]!r}")
    for fragment in fragments:
        if fragment not in result.stderr:
            failures.append(f"{name}: stderr lacks {fragment!r}: {result.stderr[:500]!r}")


POLICY_TEXT = "profile add p 1r2c cir 1mbit cbs 10k\nrule add dns proto udp dport 53 profile p per src\n"
policy = write("policy", POLICY_TEXT)
capture = write_pcap("in.pcap", [frame(i) for i in range(100)])
os.mkdir(path("sub"))

# ---- finding 2 and 6: a policy that is not a regular file, or too large -------------------------------
os.mkfifo(path("fifo"))
with open(path("huge.policy"), "wb") as f:
    f.truncate(65 << 20)  # sparse: 65 MiB of NULs, over the 64 MiB limit
for name, policy_path, words in [
    ("policy /dev/zero", "/dev/zero", ["'/dev/zero'", "is a character device, not a policy file"]),
    ("policy is a directory", path("sub"), ["is a directory, not a policy file"]),
    ("policy is a FIFO with no writer", path("fifo"), ["is a FIFO, not a policy file"]),
    ("policy over the size limit", path("huge.policy"), ["is 65 MiB; a policy file may have at most 64 MiB"]),
    ("policy missing", path("nope.policy"), ["cannot open: No such file or directory"]),
]:
    check(name, run(["--policy", policy_path, "--in", capture]), INPUT, *words)

# ---- finding 14: an unreadable policy says why ------------------------------------------------------
locked = write("locked.policy", POLICY_TEXT)
os.chmod(locked, 0)
if os.geteuid() == 0:
    # root reads any file: run the case without the capabilities that let it (util-linux's setpriv)
    result = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", replay, "--policy",
                             locked, "--in", capture], capture_output=True, text=True, timeout=20)
else:
    result = run(["--policy", locked, "--in", capture])
check("unreadable policy", result, INPUT, "cannot open: Permission denied")

# ---- findings 13 and 14: messages show hostile text quoted and escaped; any line ending loads ---------
hostile = write("hostile.policy", "profile add p 1r2c cir 1mbit cbs 10k\nrule add x\x1b]0;owned\x07 profile p\n" +
                "rule add y proto " + "u" * 10_000_000 + "\n")
result = run(["--policy", hostile, "--in", capture])
check("escape sequence in a rule name", result, INPUT, "line 2:", r"'x\x1b]0;owned\x07'")
if "\x1b" in result.stderr or "\x07" in result.stderr or len(result.stderr) > 500:
    failures.append(f"escape sequence in a rule name: stderr is not short printable text: {result.stderr[:200]!r}")
os.mkdir(path("odd\x1b[31mdir"))
result = run(["--policy", path("odd\x1b[31mdir"), "--in", capture])
check("escape sequence in a path", result, INPUT, r"odd\x1b[31mdir'", "is a directory")
if "\x1b" in result.stderr:
    failures.append(f"escape sequence in a path reached the terminal: {result.stderr!r}")
for name, ending in (("LF", "\n"), ("CR LF", "\r\n"), ("CR", "\r")):
    text = POLICY_TEXT.replace("\n", ending)
    check(f"policy with {name} line ends", run(["--policy", write("ends.policy", text), "--in", capture]), 0)
    bad = ending.join(["profile add p 1r2c cir 1mbit cbs 10k", "# fine", "rule add r proto udpx profile p", ""])
    check(f"error with {name} line ends", run(["--policy", write("ends.policy", bad), "--in", capture]), INPUT,
          "line 3: 'udpx'")

# ---- finding 5: an output that is an input or another output, however spelt ------------------------
# Inputs of their own: a regression here destroys them, and the cases after this section need theirs.
policy, capture = write("victim.policy", POLICY_TEXT), write_pcap("victim.pcap", [frame(i) for i in range(100)])
os.symlink(capture, path("link.pcap"))
os.link(capture, path("hard.pcap"))
os.symlink(work, path("dirlink"))
inputs_before = {p: digest(p) for p in (policy, capture)}
same_file_cases = [
    (["--out", capture], "--out '%s' is the same file as --in" % capture),
    (["--out", path("sub/../victim.pcap")], "is the same file as --in"),
    (["--out", path("link.pcap")], "is the same file as --in"),
    (["--out", path("hard.pcap")], "is the same file as --in"),
    (["--csv", path("dirlink/victim.pcap")], "is the same file as --in"),
    (["--json", capture], "is the same file as --in"),
    (["--csv", policy], "is the same file as --policy"),
    (["--json", "./" + os.path.relpath(policy)], "is the same file as --policy"),
    (["--out", path("a"), "--csv", path("a")], "are the same file: each output needs a file of its own"),
    (["--csv", path("b"), "--json", path("sub/../b")], "are the same file"),
    (["--out", path("c"), "--json", path("dirlink/c")], "are the same file"),
]
for extra, words in same_file_cases:
    result = run(["--policy", policy, "--in", capture, *extra])
    check("same file: " + " ".join(extra), result, INPUT, words, "writing it would destroy the input"
          if "--in" in words or "--policy" in words else "each output")
    for leftover in ("a", "b", "c"):
        if os.path.exists(path(leftover)):
            failures.append(f"same file {extra}: '{leftover}' was created before the refusal")
            os.remove(path(leftover))
for p, before in inputs_before.items():
    if digest(p) != before:
        failures.append(f"{p} changed although every run naming it as an output was refused")
policy, capture = path("policy"), path("in.pcap")

# The table on standard output is an output too: redirected to a file that --csv also names.
with open(path("stdout.txt"), "w") as out:
    result = run(["--policy", policy, "--in", capture, "--table", "--csv", path("stdout.txt")], stdout=out)
check("table and --csv into one file", result, INPUT, "standard output (the table)", "are the same file")
# Character devices are not files that outputs could overwrite: both outputs to /dev/null is fine.
check("two outputs to /dev/null", run(["--policy", policy, "--in", capture, "--csv", "/dev/null", "--json", "/dev/null"]), 0)

# ---- finding 7: a failed write to standard output fails the run -------------------------------------
with open("/dev/full", "w") as full:
    result = run(["--policy", policy, "--in", capture, "--table"], stdout=full)
check("table to /dev/full", result, INPUT, "cannot write to standard output: No space left on device")
check("csv to /dev/full", run(["--policy", policy, "--in", capture, "--csv", "/dev/full"]), INPUT,
      "cannot write '/dev/full': No space left on device")
check("json to /dev/full", run(["--policy", policy, "--in", capture, "--json", "/dev/full"]), INPUT,
      "cannot write '/dev/full': No space left on device")

# ---- finding 14: options that were silently accepted or ignored --------------------------------------
for value, words in [("-1", "expected a number of keys, 0 or more"),
                     ("18446744073709551616", "at most 268435456"),
                     ("268435457", "at most 268435456"),
                     ("1e3", "expected a number of keys"),
                     ("", "expected a number of keys")]:
    check(f"--top-keys {value!r}", run(["--policy", policy, "--in", capture, "--json", "/dev/null",
                                        "--top-keys", value]), USAGE, words)
check("--top-keys 0", run(["--policy", policy, "--in", capture, "--json", "/dev/null", "--top-keys", "0"]), 0)
for extra in (["--policy", policy], ["--in", capture], ["--out", path("x.pcap")], ["--csv", path("x.csv")],
              ["--json", path("x.json")]):
    check(f"--demo with {extra[0]}", run(["--demo", path("demo"), *extra]), USAGE, "cannot be combined with " + extra[0])
if os.path.exists(path("demo")):
    failures.append("--demo ran although it was combined with a file option")
check("--demo-seconds without --demo", run(["--policy", policy, "--in", capture, "--demo-seconds", "5"]), USAGE,
      "--demo-seconds changes the traffic of --demo; it needs --demo DIR")

# ---- finding 8: a capture that declares an FCS is metered and written without it ------------------------
def block(kind, body):
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", kind, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def option(code, value):
    return struct.pack("<HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def read_pcap(p):
    """(link type word, [(seconds, frame)]) of a little-endian pcap."""
    data = open(p, "rb").read()
    linktype = struct.unpack_from("<I", data, 20)[0]
    records, at = [], 24
    while at < len(data):
        seconds, _, captured, _ = struct.unpack_from("<IIII", data, at)
        records.append((seconds, data[at + 16:at + 16 + captured]))
        at += 16 + captured
    return linktype, records


frames = [frame(i) for i in range(5)]
fcs = b"\xde\xad\xbe\xef"
SHB = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
fcs_captures = {
    # pcap: the link-type word's "FCS present" bit and a length of 2 16-bit words
    "pcap FCS bits": write("fcs.pcap", struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535,
                                                   1 | 0x04000000 | 2 << 28) +
                           b"".join(struct.pack("<IIII", 1_700_000_000, i, len(f) + 4, len(f) + 4) + f + fcs
                                    for i, f in enumerate(frames)), "wb"),
    # pcapng: if_fcslen 4 on the interface
    "pcapng if_fcslen": write("fcs.pcapng", SHB + block(1, struct.pack("<HHI", 1, 0, 65535) + option(13, b"\x04")) +
                              b"".join(block(6, struct.pack("<IIIII", 0, 395812, i, len(f) + 4, len(f) + 4) + f + fcs)
                                       for i, f in enumerate(frames)), "wb"),
}
fcs_policy = write("fcs.policy", "profile add p 1r2c cir 1gbit cbs 1m\nrule add dns proto udp dport 53 profile p\n")
for name, capture_path in fcs_captures.items():
    result = run(["--policy", fcs_policy, "--in", capture_path, "--json", path("fcs.json"), "--out", path("fcs-out.pcap")])
    check(name, result, 0)
    if result.returncode != 0:
        continue
    green = json.load(open(path("fcs.json")))["rules"][0]["green"]
    if green != {"packets": 5, "bytes": sum(map(len, frames))}:
        failures.append(f"{name}: metered {green}, expected 5 packets of {sum(map(len, frames))} bytes without FCS")
    linktype, written = read_pcap(path("fcs-out.pcap"))
    if linktype != 1 or [f for _, f in written] != frames:
        failures.append(f"{name}: --out has link type {linktype:#x} and frames {[len(f) for _, f in written]}, "
                        f"expected plain Ethernet (1) and the frames without their FCS")

# ---- finding 9: times that pcap's 32-bit seconds cannot hold are written with a warning ------------------
late = write("late.pcapng", SHB + block(1, struct.pack("<HHI", 1, 0, 65535) + option(9, b"\x00")) +  # 1 s ticks
             b"".join(block(6, struct.pack("<IIIII", 0, 1, i, len(f), len(f)) + f)  # 2^32 + i seconds
                      for i, f in enumerate(frames)), "wb")
result = run(["--policy", fcs_policy, "--in", late, "--out", path("late-out.pcap")])
check("times after 2106", result, 0, "warning: --out", "5 packets are stamped after 2106-02-07 06:28:15 UTC",
      "the first 2106-02-07 06:28:16 UTC", "minus 2^32 s")
if result.returncode == 0 and [t for t, _ in read_pcap(path("late-out.pcap"))[1]] != list(range(5)):
    failures.append("times after 2106: the file should hold them minus 2^32 s")
check("times before 2106: no warning", run(["--policy", fcs_policy, "--in", capture, "--out", path("early.pcap")]), 0)

# ---- finding 15: doc/replay.md's CSV columns are the binary's -------------------------------------
fresh_policy = write("fresh.policy", POLICY_TEXT)
fresh_capture = write_pcap("fresh.pcap", [frame(i) for i in range(10)])
result = run(["--policy", fresh_policy, "--in", fresh_capture, "--csv", path("out.csv")])
check("csv", result, 0)
header = open(path("out.csv")).readline().strip() if os.path.exists(path("out.csv")) else "(no CSV written)"
documented = re.search(r"`--csv`: one line per packet, `([^`]*)`", open(readme).read())
if not documented:
    failures.append("doc/replay.md: no '`--csv`: one line per packet, `...`' sentence")
elif documented.group(1) != header:
    failures.append(f"doc/replay.md documents the CSV as {documented.group(1)!r}; the binary writes {header!r}")

shutil.rmtree(work, ignore_errors=True)
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("hostile files: ok")
