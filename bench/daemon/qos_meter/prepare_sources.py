#!/usr/bin/env python3
"""Copies DPDK's qos_meter sample (Debian's dpdk-doc: /usr/share/dpdk/examples/qos_meter) into the
build directory and applies our patches to the copy; /usr/share is never written.

Usage: prepare_sources.py OUTDIR SOURCE_FILE... PATCH...
"""
import os
import shutil
import subprocess
import sys

outdir, inputs = sys.argv[1], sys.argv[2:]
sources = [p for p in inputs if not p.endswith(".patch")]
patches = [p for p in inputs if p.endswith(".patch")]
for source in sources:
    target = os.path.join(outdir, os.path.basename(source))
    if os.path.exists(target):
        os.remove(target)
    shutil.copyfile(source, target)
for patch in patches:
    result = subprocess.run(["patch", "--batch", "--forward", "--no-backup-if-mismatch", "-p1", "-d", outdir,
                             "-i", os.path.abspath(patch)], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"prepare_sources: {os.path.basename(patch)} does not apply to {sources[0]}'s folder "
                 f"(another dpdk-doc version?):\n{result.stdout}{result.stderr}")
