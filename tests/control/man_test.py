#!/usr/bin/env python3
"""The man pages (issue 25): each renders without a warning from groff (-ww) or man (--warnings), and
says what its program does today: every option of the program's --help is in its page, every command
of the daemon in tricolorctl(8), every keyword of the language (control/language/words.hpp) in
tricolor-policy(5).

Run by meson: man_test.py BUILD_ROOT SOURCE_ROOT.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_support import build_root, expect, finish  # noqa: E402

source_root = os.path.abspath(sys.argv[2])
control = os.path.join(build_root, "control")


def rendered(page):
    """The page as man shows it (plain text), and what groff and man warned."""
    path = os.path.join(control, page)
    groff = subprocess.run(["groff", "-ww", "-man", "-Tutf8", path], capture_output=True, text=True, timeout=60)
    env = dict(os.environ, MANWIDTH="200", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
    man = subprocess.run(["man", "--warnings", "-l", path], capture_output=True, text=True, timeout=60, env=env)
    text = re.sub(r".\x08", "", man.stdout)  # overstrikes (bold, underline) to plain letters
    text = text.replace("\u2010", "-").replace("\u2212", "-")  # man's hyphens back to ASCII
    text = re.sub(r"-\n\s*", "", text)  # words hyphenated across lines, joined
    return text, (groff.stderr + man.stderr).strip()


def options_of(argv):
    """The long options a program's --help lists."""
    run = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60)
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", run.stdout)) - {"--help"})


PAGES = {
    "tricolord.8": [os.path.join(control, "tricolord")],
    "tricolorctl.8": [os.path.join(control, "tricolorctl")],
    "tricolor-replay.1": [os.path.join(control, "tricolor-replay")],
    "tricolor-plot.1": [sys.executable, os.path.join(source_root, "control", "replay", "tricolor_plot.py")],
}

texts = {}
for page in list(PAGES) + ["tricolor-policy.5"]:
    text, warnings = rendered(page)
    texts[page] = text
    expect(f"{page}: rendered without warnings", text.strip() and not warnings, warnings[:500])
    expect(f"{page}: NAME, a synopsis or description, SEE ALSO",
           "NAME" in text and ("SYNOPSIS" in text or "DESCRIPTION" in text) and "SEE ALSO" in text)

for page, argv in PAGES.items():
    options = options_of(argv)
    missing = [o for o in options if o not in texts[page]]
    expect(f"{page}: each of the {len(options)} options of --help", options and not missing, missing)

protocol = open(os.path.join(source_root, "control", "daemon", "protocol.hpp")).read()
commands = re.findall(r'"([a-z]+)"', re.search(r"kDaemonCommands\[\] = \{([^}]*)\}", protocol).group(1))
missing = [c for c in commands if not re.search(rf"\b{c}\b", texts["tricolorctl.8"])]
expect(f"tricolorctl.8: each of the daemon's {len(commands)} commands", commands and not missing, missing)

words = open(os.path.join(source_root, "control", "language", "words.hpp")).read()
keywords = re.findall(r'"([^"]+)"', re.search(r"kKeywords\{(.*?)\};", words, re.S).group(1))
policy_text = texts["tricolor-policy.5"]
missing = [k for k in keywords if not re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", policy_text)]
expect(f"tricolor-policy.5: each of the language's {len(keywords)} keywords", len(keywords) > 60 and not missing, missing)

finish()
