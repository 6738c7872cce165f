#!/usr/bin/env python3
"""The layout runs one way (README, "Layout"): policer includes nothing of ours but policer; dataplane
includes policer and dataplane; control (the language and the programs) may include all three. A
header that reaches back up fails this test, naming the file and the line.

Usage: layout_test.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]
allowed = {"policer": {"policer"}, "dataplane": {"policer", "dataplane"}, "control": {"policer", "dataplane", "control"}}
include = re.compile(r'^\s*#\s*include\s+"(\w+)/')
failures = []
for folder, may in allowed.items():
    for directory, _, files in os.walk(os.path.join(root, folder)):
        for name in sorted(files):
            if not name.endswith((".hpp", ".cpp", ".h")):
                continue
            path = os.path.join(directory, name)
            for number, line in enumerate(open(path, encoding="utf-8"), 1):
                m = include.match(line)
                if m and m.group(1) in allowed and m.group(1) not in may:
                    failures.append(f"{os.path.relpath(path, root)}:{number}: {folder}/ includes {m.group(1)}/: "
                                    f"{line.strip()}")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("layout: policer <- dataplane <- control")
