#!/usr/bin/env python3
"""The packet path's prefetches are in the built engine, not only in its source.

GCC (12) takes a function whose only effect is __builtin_prefetch to have none (the builtin touches
no memory as it models it), marks it const and deletes every call whose result is unused: the key
table's entry prefetch pass was compiled away that way for two days of issue 23 with every test
passing. Helpers that only prefetch are always inlined for that reason (key_table.hpp,
exact_match.hpp); this test reads the optimised engine library and fails when a function of the
packet path holds fewer prefetch instructions than its source issues in its compiled forms.

  prefetch_test.py LIBENGINE.a

Run on the plain (optimised, unsanitised) GCC build only: the counts are of its code.
"""
import re
import shutil
import subprocess
import sys

# Function (demangled name, up to its parameters) -> (at least this many prefetches, where they are).
EXPECTED = {
    "tricolor::dataplane::Worker::process": (
        9, "the parse loop's prefetch of each frame in its two forms (with and without the only entry), "
           "and KeyTable::prefetch of each key's index line in the uniform pass's seven forms "
           "(three length bases, color-blind or aware, and the form that reads the rule as it goes)"),
    "tricolor::dataplane::Worker::meter_keyed": (
        3, "KeyTable::prefetch of the index lines of keys hashed there, and find_or_create's prefetch "
           "of a found key's second line in its two forms (two key words compared, or all)"),
    "tricolor::dataplane::Worker::sweep_keys": (1, "KeyTable::sweep's prefetch of the entries ahead"),
    "bool tricolor::dataplane::plain::pass<": (
        12, "a plain burst's prefetch of each frame in its six forms (three length bases, keyed or not), and "
            "KeyTable::prefetch of each key's index line in the keyed forms' two loops"),
    "tricolor::dataplane::FlowCache::classify": (2, "the flow cache's prefetch of each packet's two candidate slots"),
    "tricolor::dataplane::Classifier::look_up": (1, "ExactMatch::prefetch of each packet's slot in the exact-match table"),
}
PREFETCH = re.compile(r"\s(prefetch\w*|prfm)\s")  # x86-64 and arm64 mnemonics
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def main():
    library = sys.argv[1]
    objdump = shutil.which("objdump")
    if objdump is None:
        print("objdump not found: skipped")
        return 77
    text = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", library],
                          capture_output=True, text=True, check=True).stdout
    found = {name: 0 for name in EXPECTED}
    current = None
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            signature = m.group(1)
            # The function itself, not a lambda or local class inside it ("...::{lambda...").
            # A template's name ends with "<": each of its forms counts.
            current = next((name for name in EXPECTED
                            if signature.startswith(name if name.endswith("<") else name + "(")), None)
            continue
        if current is not None and PREFETCH.search(line):
            found[current] += 1
    failures = 0
    for name, (least, where) in EXPECTED.items():
        state = "ok" if found[name] >= least else "MISSING"
        print(f"{state}: {name}: {found[name]} prefetch instructions, at least {least} expected: {where}")
        if found[name] < least:
            failures += 1
    if failures:
        print("A prefetch of the packet path was compiled away: a helper whose only effect is a prefetch "
              "must be inlined before GCC's analysis ([[gnu::always_inline]]), or sit in a function with "
              "other effects.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
