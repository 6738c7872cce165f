#!/usr/bin/env python3
"""The layout runs one way (README, "Layout"; each folder's README.md says the same of itself).

Between the three top folders: policer <- dataplane <- control. Between the parts inside them:
  dataplane/engine  <- dataplane/dpdk, dataplane/replay, dataplane/xdp   (none includes another)
  control/language  <- control/daemon <- control/ctl      (ctl takes only the wire format, protocol.hpp)
  control/telemetry <- control/daemon                     (the daemon serves what telemetry shows)
  control/cluster   <- control/daemon                     (the daemon runs the lease side)
  control/language, dataplane/replay <- control/replay
Nothing in dataplane/ includes control/. Nothing in dataplane/engine/ includes a port, a file or a
socket API (DPDK's ethdev, mbufs or EAL; fstream, open(2), stat(2); sockets, epoll, poll). The
language, the CLI and policer/ include no DPDK header.

A line that breaks a rule fails this test, naming the file, the line and the rule. Before it looks at
the tree, the test checks itself: a scratch tree with one include of each wrong kind must fail.

Usage: layout_test.py SOURCE_ROOT
"""
import os
import re
import sys
import tempfile

# Each part: which of our paths it may include (a folder ending in "/", or one file).
PARTS = {
    "policer": ["policer/"],
    "dataplane/engine": ["policer/", "dataplane/engine/"],
    "dataplane/dpdk": ["policer/", "dataplane/engine/", "dataplane/dpdk/"],
    "dataplane/replay": ["policer/", "dataplane/engine/", "dataplane/replay/"],
    # The XDP dataplane translates the engine's compiled policy into its BPF maps.
    "dataplane/xdp": ["policer/", "dataplane/engine/", "dataplane/xdp/"],
    # The language builds the engine's header-only model of a policy, and nothing else of the dataplane.
    "control/language": ["policer/", "dataplane/engine/policy.hpp", "control/language/"],
    "control/telemetry": ["policer/", "dataplane/", "control/telemetry/"],
    # The lease side of cluster meters: the engine's leases, Redis (hiredis).
    "control/cluster": ["policer/", "dataplane/engine/", "control/cluster/"],
    "control/daemon": ["policer/", "dataplane/", "control/language/", "control/telemetry/", "control/cluster/",
                       "control/daemon/"],
    "control/ctl": ["policer/", "control/language/", "control/daemon/protocol.hpp", "control/ctl/"],
    # tricolor-replay starts a memory-only EAL for the engine's DPDK libraries: eal.hpp, no port.
    "control/replay": ["policer/", "dataplane/engine/", "dataplane/replay/", "dataplane/dpdk/eal.hpp",
                       "control/language/", "control/replay/"],
}
OURS = ("policer/", "dataplane/", "control/")

# System headers a part may not include, by what they are.
PORTS = r"rte_ethdev|rte_eth_|rte_mbuf|rte_eal|rte_bus|rte_dev|rte_pmd_|rte_launch|linux/if_xdp|xdp/|bpf/"
FILES = r"fstream|filesystem|fcntl\.h|sys/stat\.h|unistd\.h|dirent\.h|pcap"
SOCKETS = r"sys/socket\.h|sys/un\.h|sys/epoll\.h|sys/select\.h|poll\.h|netdb\.h|netinet/"
FORBIDDEN = {
    "dataplane/engine": [(PORTS, "a port API"), (FILES, "a file API"), (SOCKETS, "a socket API")],
    "policer": [(r"rte_", "DPDK"), (FILES, "a file API"), (SOCKETS, "a socket API")],
    "control/language": [(r"rte_", "DPDK")],
    "control/ctl": [(r"rte_", "DPDK")],
}

OUR_INCLUDE = re.compile(r'^\s*#\s*include\s+"([\w./-]+)"')
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s+<([\w./+-]+)>")


def part_of(relative):
    """The part a file belongs to: the longest PARTS key its path starts with."""
    matches = [p for p in PARTS if relative.startswith(p + "/")]
    return max(matches, key=len) if matches else None


def check(root):
    failures = []
    for top in ("policer", "dataplane", "control"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp", ".h", ".c")):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root)
                part = part_of(relative)
                if part is None:
                    failures.append(f"{relative}: in no part of the layout (tests/layout_test.py, PARTS)")
                    continue
                for number, line in enumerate(open(path, encoding="utf-8"), 1):
                    where = f"{relative}:{number}: {line.strip()}"
                    ours = OUR_INCLUDE.match(line)
                    if ours and ours.group(1).startswith(OURS):
                        target = ours.group(1)
                        if not any(target == may or (may.endswith("/") and target.startswith(may))
                                   for may in PARTS[part]):
                            failures.append(f"{where}: {part}/ may not include {target} "
                                            f"(it may include {', '.join(PARTS[part])})")
                    system = SYSTEM_INCLUDE.match(line)
                    if system:
                        for pattern, what in FORBIDDEN.get(part, []):
                            if re.match(pattern, system.group(1)):
                                failures.append(f"{where}: {part}/ may not include {what}")
    return failures


def self_check():
    """Each wrong include, alone in a scratch tree, must be caught; a right one must not."""
    wrong = [
        ("dataplane/engine/a.hpp", '#include "dataplane/dpdk/ports.hpp"'),
        ("dataplane/engine/a.hpp", '#include "dataplane/replay/capture.hpp"'),
        ("dataplane/engine/a.cpp", "#include <rte_ethdev.h>"),
        ("dataplane/engine/a.cpp", "#include <fstream>"),
        ("dataplane/engine/a.cpp", "#include <sys/socket.h>"),
        ("dataplane/dpdk/a.hpp", '#include "dataplane/replay/replay.hpp"'),
        ("dataplane/replay/a.hpp", '#include "dataplane/dpdk/forwarder.hpp"'),
        ("dataplane/replay/a.hpp", '#include "control/language/language.hpp"'),
        ("policer/a.hpp", '#include "dataplane/engine/packet.hpp"'),
        ("control/language/a.hpp", '#include "control/daemon/protocol.hpp"'),
        ("control/language/a.hpp", '#include "dataplane/engine/engine.hpp"'),
        ("control/daemon/a.hpp", '#include "control/ctl/ctl_client.hpp"'),
        ("control/telemetry/a.hpp", '#include "control/daemon/daemon_commands.hpp"'),
        ("control/ctl/a.hpp", '#include "control/daemon/daemon_commands.hpp"'),
        ("control/ctl/a.hpp", "#include <rte_mbuf.h>"),
        ("control/replay/a.hpp", '#include "dataplane/dpdk/ports.hpp"'),
        ("control/elsewhere/a.hpp", "#include <string>"),
    ]
    right = [
        ("dataplane/dpdk/a.hpp", '#include "dataplane/engine/engine.hpp"'),
        ("control/ctl/a.hpp", '#include "control/daemon/protocol.hpp"'),
        ("control/language/a.hpp", '#include "dataplane/engine/policy.hpp"'),
        ("dataplane/engine/a.cpp", "#include <rte_acl.h>"),
    ]
    problems = []
    for case, should_fail in [(c, True) for c in wrong] + [(c, False) for c in right]:
        with tempfile.TemporaryDirectory() as scratch:
            file, line = case
            os.makedirs(os.path.join(scratch, os.path.dirname(file)))
            with open(os.path.join(scratch, file), "w", encoding="utf-8") as out:
                out.write(line + "\n")
            if bool(check(scratch)) != should_fail:
                problems.append(f"self-check: {file} with {line} was {'passed' if should_fail else 'failed'}")
    return problems


problems = self_check()
if problems:
    print("\n".join(problems))
    sys.exit(1)
failures = check(sys.argv[1])
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("layout: policer <- dataplane <- control; engine <- dpdk, engine <- replay; "
      "language <- daemon <- ctl, telemetry <- daemon; no port, file or socket API in the engine")
