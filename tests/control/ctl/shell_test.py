#!/usr/bin/env python3
"""tricolorctl's interactive shell, driven in a pseudo-terminal against a real tricolord (issue 11):
a command and its reply; a refused command with its caret, the shell going on; TAB completion of
keywords and of rule and profile names (the lines submitted are read back from the history file, so
the test sees what completion really produced, and a rule change made of completed names must take
effect); history kept across two sessions (up-arrow recalls the last line of the first); Ctrl-D leaves
with status 0; the daemon stopping mid-session leaves with status 3. And tricolorctl without a terminal:
stdin's commands one a line, stopping at the first refused one (status 2, its line named) or, with
--keep-going, going on.

tricolord runs on a net_null port (no packets needed), --no-huge, its own --file-prefix and socket; it
ends by itself (--duration) if this test dies.

Run by meson: shell_test.py BUILD_ROOT.
"""
import os
import pty
import re
import select
import signal
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import POLICY, ctl, expect, finish, start_daemon, stop_daemon, tricolorctl, wait_for  # noqa: E402



# What a terminal shows, without the line editor's cursor movements and bells.
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]|\x07")


class Session:
    """tricolorctl in a pseudo-terminal: what it prints (both streams) is read as a terminal shows it."""

    def __init__(self, sock, workdir, history):
        env = dict(os.environ, TERM="xterm", HOME=workdir, TRICOLORCTL_HISTORY=history)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(tricolorctl, [tricolorctl, "--socket", sock], env)
        self.raw = b""
        self.seen = 0  # expect() looks after what it matched last
        self.status = None

    def _read(self, seconds):
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # the child is gone and its terminal with it
            return False
        self.raw += chunk
        return bool(chunk)

    def text(self):
        return ESCAPES.sub("", self.raw.decode(errors="replace")).replace("\r", "")

    def expect(self, pattern, timeout=10):
        """The first match of pattern after the last one found; None after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.compile(pattern).search(self.text(), self.seen)
            if found:
                self.seen = found.end()
                return found
            if time.monotonic() > deadline or not self._read(0.1):
                found = re.compile(pattern).search(self.text(), self.seen)
                if found:
                    self.seen = found.end()
                return found

    def send(self, keys):
        if "\x04" in keys:
            self.wait_for_raw_mode()
        os.write(self.fd, keys.encode())

    def wait_for_raw_mode(self, timeout=10):
        """Until the line editor has the terminal in raw mode. The prompt is printed before that; a
        Ctrl-D that arrives in canonical mode is taken by the kernel as end-of-file and turns into a NUL
        byte once the editor switches to raw mode, and the shell would never see it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and termios.tcgetattr(self.fd)[3] & termios.ICANON:
            self._read(0.01)

    def wait(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.05)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                os.close(self.fd)
                return self.status
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return "still running"


PROMPT = r"tricolor> "


def history_lines(path):
    """The lines of the history file (libedit writes spaces as \\040)."""
    if not os.path.exists(path):
        return []
    lines = open(path).read().splitlines()
    return [line.replace("\\040", " ") for line in lines if not line.startswith("_HiStOrY_")]


def script_mode(sock):
    script = ("# a comment, then a blank line\n\nping\n"
              "rule add x proto tcpx profile gold\n"
              "rule add extra src 10.9.0.0/16 profile gold\n")
    code, out, err = ctl(sock, stdin=script)
    expect("stdin's commands: the first refused line stops them, status 2", code == 2 and out == "pong\n", (code, out, err))
    expect("... its error names the line, with a caret", "line 4: 'tcpx'" in err and
           err.splitlines()[2].index("^") == err.splitlines()[1].index("tcpx"), err)
    expect("... and the lines after it were not sent", "extra" not in ctl(sock, "rule", "list")[1])
    code, out, err = ctl(sock, "--keep-going", stdin=script)
    expect("--keep-going: the lines after a refused one are sent, status still 2", code == 2 and
           "rule add extra" in ctl(sock, "rule", "list")[1], (code, out, err))
    code, _, err = ctl(sock, stdin="rule delete extra\nquit\nrule add after-quit profile gold\n")
    expect("... quit ends them, status 0", code == 0 and "after-quit" not in ctl(sock, "rule", "list")[1], err)


def start(workdir, sock):
    return start_daemon("shell", os.path.join(workdir, "p.policy"), sock)


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-shell-") as workdir:
        open(os.path.join(workdir, "p.policy"), "w").write(POLICY)
        sock = os.path.join(workdir, "ctl.sock")
        history = os.path.join(workdir, "history")
        daemon = start(workdir, sock)
        try:
            expect("the daemon answers ping", wait_for(sock, daemon))
            script_mode(sock)

            # First session: a command, an error, completion; Ctrl-D.
            s = Session(sock, workdir, history)
            expect("the shell prompts", s.expect(PROMPT), s.text())
            s.send("ping\r")
            expect("a command and its reply", s.expect(r"ping\n(.*\n)?pong\n" + PROMPT), s.text())
            s.send("rule add x proto tcpx profile gold\r")
            error = s.expect(r"tricolorctl: 'tcpx': expected a protocol[^\n]*\n(  rule add x[^\n]*)\n( *\^)\n")
            expect("a refused command: its error, the line and a caret under the token", error and
                   error.group(2).index("^") == error.group(1).index("tcpx"), s.text()[-400:])
            s.send("version\r")
            expect("... and the shell goes on", s.expect(r"tricolord \S+; policy from .*\n" + PROMPT), s.text()[-400:])
            s.send("rule sh\t\r")
            s.expect(PROMPT)
            s.send("rule show w\t\r")
            s.expect(PROMPT)
            # Names completed where they belong: the rule's and its new profile's.
            s.send("rule change w\tdst 10.1.0.0/16 profile s\t\r")
            s.expect(PROMPT)
            s.send("rule li\t\r")
            expect("TAB completes a keyword (rule li -> rule list) and the command runs",
                   s.expect(r"rule add web dst 10\.1\.0\.0/16 profile silver\n"), s.text()[-600:])
            # The limiters' words (issue 13): an algorithm, then its own parameters.
            s.send("profile add lim warm\trate 1kpps per\t4ms\r")
            s.expect(PROMPT)
            s.send("version\r")
            s.expect(r"tricolord \S+; policy from")
            s.expect(PROMPT)
            s.send("\x04")
            expect("Ctrl-D leaves with status 0", s.wait() == 0, (s.status, s.text()[-300:]))
            lines = history_lines(history)
            expect("history file written", lines[:3] == ["ping", "rule add x proto tcpx profile gold", "version"], lines)
            expect("TAB completes a keyword: rule sh -> rule show", "rule show" in lines, lines)
            expect("TAB completes a rule name: rule show w -> rule show web", "rule show web" in lines, lines)
            expect("TAB completes names in a rule line (rule, then profile)",
                   "rule change web dst 10.1.0.0/16 profile silver" in lines, lines)
            expect("TAB completes an algorithm and its parameter: warm -> warmup, per -> period",
                   "profile add lim warmup rate 1kpps period 4ms" in lines, lines)

            # Second session: the history of the first is there.
            s = Session(sock, workdir, history)
            s.expect(PROMPT)
            s.send("\x1b[A\r")  # up-arrow: the last line of the first session, version
            expect("history kept across sessions: up-arrow recalls the last line",
                   s.expect(r"tricolord \S+; policy from"), s.text())
            s.expect(PROMPT)
            s.send("quit\r")
            expect("quit leaves with status 0", s.wait() == 0, s.status)

            # Third session: the daemon stops under it.
            s = Session(sock, workdir, history)
            s.expect(PROMPT)
            s.send("ping\r")
            s.expect(r"pong\n" + PROMPT)
            daemon.send_signal(signal.SIGTERM)
            daemon.communicate(timeout=30)
            s.send("ping\r")
            expect("the daemon gone: said so", s.expect(r"tricolorctl: tricolord is gone: [^\n]+"), s.text()[-300:])
            expect("... and status 3", s.wait() == 3, s.status)
        finally:
            stop_daemon(daemon)
    finish()


if __name__ == "__main__":
    main()
