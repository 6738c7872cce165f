#!/usr/bin/env python3
"""tricolorctl against a fake daemon that sends what tricolord would not (issue 21): a Unix socket
served here, answering each request with canned frames. Checked:
- terminal injection: escape sequences, NULs, DEL, C1 and bidi controls in a reply's output, an error's
  message, top's rule and key names reach stdout and stderr escaped (one command, stdin's commands,
  top -b, top in a pseudo-terminal); printable UTF-8, tabs and line ends are kept; with --json (and
  top --json) the printed JSON is ASCII, holds the same values, fields in their order;
- malformed replies: top's stats or key list with a rule that is not an object, a name that is not a
  string, a key that is a number ...; a reply that is not JSON, not an object, of 0 bytes or over the
  limit; an answer without its output; save's result without its counts; the shell's names with a
  number: "a broken reply from tricolord", status 3, never a crash;
- a connection refused (too-many-clients, permission) or closed (busy): status 3 with the daemon's
  message, the request not sent again; an idle close sent unasked before the next request, or as the
  answer to it, or the stream's end: tricolorctl connects again and sends the request once more
  (each request runs once); an idle close twice: status 3; no reply at all: status 3, not sent again;
- a reply of 100 MB is read and printed;
- save FILE: the daemon's text written by tricolorctl, the words of the line by the language's
  tokenizer (a leading VT), exactly one file; load of a file whose request would exceed the frame
  limit refused before connecting;
- --timeout and --interval: finite seconds within their range, else a usage error naming it;
- the shell's TAB completion offers no name that holds an escape sequence.

Run by meson: ctl_hostile_test.py BUILD_ROOT.
"""
import json
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import expect, finish, frame, recv_exact, tricolorctl  # noqa: E402

MAX_REQUEST = (128 << 20) + (64 << 10)  # protocol::kMaxRequestFrameBytes
CLOSE = object()  # in a script's actions: close the connection

# What must not reach a terminal raw: C0 controls but tab and line feed, a CR not before a line feed,
# DEL, the C1 controls (UTF-8), the bidi controls (UTF-8).
UNSAFE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae]|"
                    rb"\xe2\x81[\xa6-\xa9]|\xd8\x9c")
# The text a hostile daemon sends: a title, a screen clear, a NUL, a C1 CSI, a bidi override and an
# isolate, DEL, a lone CR; and what must be kept: UTF-8 letters, a tab, line ends.
HOSTILE = "A\x1b]0;pwned\x07\x1b[2J\x00B\u009b31mC\u202eD\u2066E\x7fF\rG caf\u00e9\tT\r\nline2\n"


def ok(output="", result=None):
    reply = {"ok": True, "output": output}
    if result is not None:
        reply["result"] = result
    return frame(reply)


def refused(message, column=None, closing=None):
    error = {"message": message}
    if column:
        error["column"] = column
    reply = {"ok": False, "error": error}
    if closing:
        reply["closing"] = closing
    return frame(reply)


class Fake:
    """A daemon that answers with what `script(connection, index, command)` returns: frames to send,
    then CLOSE to close the connection. `greeting(connection)` may send frames at once (a refusal)."""

    def __init__(self, path):
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.set(lambda c, i, command: [ok("pong")])
        threading.Thread(target=self._accept, daemon=True).start()

    def set(self, script, greeting=None):
        self.script, self.greeting = script, greeting
        self.connections = 0
        self.requests = []  # (connection, command)
        self.closed = threading.Event()  # the fake closed a connection of its own accord

    def commands(self):
        return [command for _, command in self.requests]

    def _accept(self):
        while True:
            conn, _ = self.listener.accept()
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn, number):
        try:
            if self.greeting and self._act(conn, self.greeting(number)):
                return
            index = 0
            while True:
                header = recv_exact(conn, 4)
                if header is None:
                    return
                (length,) = struct.unpack("!I", header)
                if length > MAX_REQUEST:  # as tricolord: said, and closed
                    self._act(conn, [refused("a frame over the limit", closing="frame"), CLOSE])
                    return
                request = json.loads(recv_exact(conn, length))
                self.requests.append((number, request["command"]))
                if self._act(conn, self.script(number, index, request["command"])):
                    return
                index += 1
        except OSError:
            pass
        finally:
            conn.close()

    def _act(self, conn, actions):
        for action in actions:
            if action is CLOSE:
                conn.close()
                self.closed.set()
                return True
            conn.sendall(action)
        return False


def run(sock, *words, stdin=None, timeout=60, cwd=None):
    r = subprocess.run([tricolorctl, "--socket", sock, *words], capture_output=True, timeout=timeout, input=stdin,
                       stdin=None if stdin is not None else subprocess.DEVNULL, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def clean(data):
    return UNSAFE.search(data) is None


def escaped_hostile(data):
    """The hostile text is there, escaped, with what must be kept kept."""
    return all(part in data for part in (rb"A\x1b]0;pwned\x07\x1b[2J\x00B", rb"\xc2\x9b31mC\xe2\x80\xaeD\xe2\x81\xa6E",
                                         b"\\x7fF\\x0dG caf\xc3\xa9\tT\r\nline2\n"))


# ---- terminal injection ----------------------------------------------------------------------------

def injection(fake, sock):
    fake.set(lambda c, i, command: [ok(HOSTILE)])
    code, out, err = run(sock, "ping")
    expect("an output's escape sequences, NUL, C1 and bidi controls are escaped", code == 0 and clean(out) and
           escaped_hostile(out), (code, out, err))
    code, out, err = run(sock, stdin=b"ping\nversion\n")
    expect("... in stdin's commands too", code == 0 and clean(out) and out.count(b"pwned") == 2, (code, out, err))

    fake.set(lambda c, i, command: [refused("no \x1b[31mred\x00 \u202eevil\x07", column=10)])
    code, out, err = run(sock, "rule", "add", "x\x1b[2J")
    expect("an error's message is escaped, and the line under it", code == 2 and clean(err) and
           rb"no \x1b[31mred\x00 \xe2\x80\xaeevil\x07" in err and rb"rule add x\x1b[2J" in err, (code, err))
    lines = err.splitlines()
    expect("... the caret under the token as the line is shown", len(lines) == 3 and b"x\\x1b" in lines[1] and
           lines[2].find(b"^") == lines[1].find(b"x\\x1b"), err)
    code, out, err = run(sock, stdin=b"rule add x\n")
    expect("... in stdin's commands too, the line named", code == 2 and clean(err) and b"line 1: no \\x1b[31mred" in err,
           (code, err))

    pairs = [("ok", True), ("output", "a\x7fb\u009bc\u202ed\x1b"), ("result", {"zeta": "\u2066", "alpha": "caf\u00e9"})]
    fake.set(lambda c, i, command: [frame(json.dumps(dict(pairs), ensure_ascii=False).encode())])
    code, out, err = run(sock, "--json", "ping")
    expect("--json: printed as ASCII (DEL, C1, bidi as \\u), the same values, fields in their order",
           code == 0 and clean(out) and max(out) < 0x7f and
           json.loads(out, object_pairs_hook=list) == json.loads(json.dumps(dict(pairs)), object_pairs_hook=list),
           (code, out, err))
    fake.set(lambda c, i, command: [frame(b'{"ok":true,"output":"pong"}')])
    code, out, _ = run(sock, "--json", "ping")
    expect("--json: a printable reply printed as it came", (code, out) == (0, b'{"ok":true,"output":"pong"}\n'), out)


def stats_script(names):
    def script(c, i, command):
        t = i + 1  # a later sample each time, counters growing
        rules = [{"name": n, "green_packets": 10 * t, "green_bytes": 1000 * t, "red_packets": t, "red_bytes": 100 * t}
                 for n in names]
        return [ok(result={"elapsed_s": float(t), "generation": 1, "rules": rules})]
    return script


def keys_script(names):
    def script(c, i, command):
        t = i + 1
        keys = [{"key": n, "worker": 0, "green_packets": t, "green_bytes": 100 * t} for n in names]
        return [ok(result={"rule": "hosts", "live_keys": len(names), "keys": keys})]
    return script


NAMES = ["web\x1b]0;pwned\x07", "nul\x00", "evil\u202eb", "c1\u009b2J"]


def top_modes(fake, sock):
    fake.set(stats_script(NAMES))
    code, out, err = run(sock, "top", "-b", "-n", "1", "--interval", "0.05")
    expect("top -b: rule names escaped", code == 0 and clean(out) and rb"web\x1b]0;pwned\x07" in out and
           rb"nul\x00" in out and rb"evil\xe2\x80\xaeb" in out, (code, out, err))
    fake.set(stats_script(NAMES))
    code, out, err = run(sock, "top", "--json", "-n", "1", "--interval", "0.05")
    doc = json.loads(out) if code == 0 else {}
    expect("top --json: ASCII, the names as they are", code == 0 and max(out) < 0x7f and
           [r["name"] for r in doc["rules"]] == NAMES, (code, out, err))
    fake.set(keys_script(NAMES))
    code, out, err = run(sock, "top", "--rule", "hosts", "-b", "-n", "1", "--interval", "0.05")
    expect("top --rule: key names escaped", code == 0 and clean(out) and rb"web\x1b]0;pwned\x07" in out, (code, out, err))

    # The terminal mode, in a pseudo-terminal: top's own escape codes, none of the daemon's.
    fake.set(stats_script(NAMES))
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(tricolorctl, [tricolorctl, "--socket", sock, "top", "-n", "1", "--interval", "0.05"],
                  dict(os.environ, TERM="xterm"))
    seen, deadline = b"", time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        try:
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:
            break
        if ready and not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    expect("top in a terminal: the names escaped, no title, no C1, no bidi control",
           os.waitstatus_to_exitcode(status) == 0 and rb"web\x1b]0;pwned\x07" in seen and b"\x1b]" not in seen and
           b"pwned\x07" not in seen and re.search(rb"\xc2[\x80-\x9f]|\xe2\x80\xae|\x00", seen) is None, seen[-600:])


# ---- malformed replies -----------------------------------------------------------------------------

def malformed(fake, sock, workdir):
    def broken(code, err):
        return code == 3 and b"a broken reply from tricolord" in err and clean(err)

    for what, result in [("a rule that is not an object", {"elapsed_s": 1.0, "rules": [5]}),
                         ("a rule whose name is a number", {"elapsed_s": 1.0, "rules": [{"name": 5}]}),
                         ("a rule whose name is null", {"elapsed_s": 1.0, "rules": [{"name": None}]}),
                         ("a counter that is a string", {"elapsed_s": 1.0, "rules": [{"name": "a", "red_bytes": "1"}]}),
                         ("rules that are an object", {"elapsed_s": 1.0, "rules": {"name": "a"}}),
                         ("keys that are a number", {"elapsed_s": 1.0, "rules": [{"name": "a", "keys": 3}]}),
                         ("elapsed_s a string", {"elapsed_s": "1", "rules": []}),
                         ("a result that is a list", [1, 2])]:
        fake.set(lambda c, i, command, result=result: [ok(result=result)])
        code, out, err = run(sock, "top", "-b", "-n", "1", "--interval", "0.05")
        expect(f"top, stats with {what}: a broken reply, status 3", broken(code, err), (code, err))
    for what, result in [("keys that hold a number", {"live_keys": 1, "keys": [7]}),
                         ("a key that is an object", {"live_keys": 1, "keys": [{"key": {}}]}),
                         ("a worker of -1", {"live_keys": 1, "keys": [{"key": "k", "worker": -1}]}),
                         ("live_keys a string", {"live_keys": "1", "keys": []})]:
        fake.set(lambda c, i, command, result=result: [ok(result=result)])
        code, out, err = run(sock, "top", "--rule", "hosts", "-b", "-n", "1", "--interval", "0.05")
        expect(f"top --rule, key list with {what}: a broken reply, status 3", broken(code, err), (code, err))

    for what, payload in [("not JSON", b"hello \x1b[2J"), ("not an object", b"[1,2]"), ("ok a string", b'{"ok":"yes"}'),
                          ("an answer without its output", b'{"ok":true}'),
                          ("an output that is a number", b'{"ok":true,"output":5}'),
                          ("an error without a message", b'{"ok":false,"error":{}}')]:
        fake.set(lambda c, i, command, payload=payload: [frame(payload)])
        code, out, err = run(sock, "ping")
        expect(f"a reply {what}: a broken reply, status 3", broken(code, err), (code, out, err))
    fake.set(lambda c, i, command: [frame(b'{"ok":true,"output":7}')])
    code, out, err = run(sock, "stats", "--prometheus")
    expect("stats --prometheus, its output a number: a broken reply, status 3", broken(code, err), (code, err))
    for what, raw in [("a frame of 0 bytes", struct.pack("!I", 0)), ("a frame over 1 GiB", struct.pack("!I", (1 << 30) + 1))]:
        fake.set(lambda c, i, command, raw=raw: [raw, CLOSE])
        code, out, err = run(sock, "ping")
        expect(f"{what}: a broken reply, status 3", broken(code, err), (code, err))

    target = os.path.join(workdir, "malformed.policy")
    for what, result in [("no result", None), ("rules a string", {"rules": "2", "profiles": 1, "color_maps": 0,
                                                                  "generation": 1})]:
        fake.set(lambda c, i, command, result=result: [ok("rule add a profile b\n", result)])
        code, out, err = run(sock, "save", target)
        expect(f"save, {what}: a broken reply, status 3, no file", broken(code, err) and not os.path.exists(target),
               (code, err))


# ---- refusals, closes, idle ------------------------------------------------------------------------

def closes(fake, sock):
    for reason, message in [("too-many-clients", "too many clients: 120 are connected"),
                            ("permission", "permission denied: uid 65534 may not use this socket")]:
        fake.set(lambda c, i, command: [ok("pong")], greeting=lambda c, m=message, r=reason: [refused(m, closing=r), CLOSE])
        code, out, err = run(sock, "ping")
        expect(f"a connection refused ({reason}): status 3, the daemon's message", code == 3 and message.encode() in err and
               fake.commands() in ([], ["ping"]) and fake.connections == 1, (code, err, fake.requests, fake.connections))
    fake.set(lambda c, i, command: [refused("busy: the daemon holds 256 MiB", closing="busy"), CLOSE])
    code, out, err = run(sock, "rule", "add", "x", "profile", "gold")
    expect("a request answered busy with closing: status 3, not sent again", code == 3 and b"busy" in err and
           fake.commands() == ["rule add x profile gold"], (code, err, fake.requests))

    fake.set(lambda c, i, command: [refused("idle: no request for 60 s", closing="idle"), CLOSE])
    code, out, err = run(sock, "ping")
    expect("an idle close as the answer, twice: status 3, sent twice only", code == 3 and b"idle" in err and
           fake.commands() == ["ping", "ping"] and fake.connections == 2, (code, err, fake.requests))

    fake.set(lambda c, i, command: [CLOSE])
    code, out, err = run(sock, "rule", "add", "x", "profile", "gold")
    expect("no reply at all: status 3, the request not sent again", code == 3 and
           fake.commands() == ["rule add x profile gold"] and fake.connections == 1, (code, err, fake.requests))
    fake.set(lambda c, i, command: [refused("no such profile"), CLOSE])
    code, out, err = run(sock, "rule", "add", "x", "profile", "gold")
    expect("a refusal without closing, then the end: status 2, not sent again", code == 2 and
           fake.commands() == ["rule add x profile gold"], (code, err, fake.requests))

    # A kept connection the daemon closed while tricolorctl waited for the next line: stdin's lines are
    # written one at a time, the second once the fake has closed the first connection.
    def kept(first_actions, what):
        def script(c, i, command):
            if c == 1 and i == 0:
                return [ok("first")] + first_actions
            return [ok("second")]
        fake.set(script)
        p = subprocess.Popen([tricolorctl, "--socket", sock], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdin.write(b"ping\n")
        p.stdin.flush()
        closed = fake.closed.wait(10)
        time.sleep(0.1)  # the close reaches tricolorctl's side
        out, err = p.communicate(b"rule change web profile silver\n", timeout=30)
        expect(f"{what}: connected again, each request sent once", closed and p.returncode == 0 and
               out == b"first\nsecond\n" and fake.commands() == ["ping", "rule change web profile silver"] and
               fake.connections == 2, (p.returncode, out, err, fake.requests))
    kept([refused("idle: no request for 60 s", closing="idle"), CLOSE], "an idle close sent unasked")
    kept([CLOSE], "the stream's end")

    # The idle close crossing the next request: it answers that request, which is sent once more.
    def crossing(c, i, command):
        if c == 1 and i == 1:
            return [refused("idle: no request for 60 s", closing="idle"), CLOSE]
        return [ok(f"ran {command} on connection {c}")]
    fake.set(crossing)
    code, out, err = run(sock, stdin=b"ping\nrule change web profile silver\n")
    expect("an idle close as the answer: connected again, the request sent once more and run once",
           code == 0 and out == b"ran ping on connection 1\nran rule change web profile silver on connection 2\n" and
           fake.requests == [(1, "ping"), (1, "rule change web profile silver"), (2, "rule change web profile silver")],
           (code, out, err, fake.requests))


# ---- big replies, save, load, options --------------------------------------------------------------

def big_reply(fake, sock):
    line = "tricolor_rule_packets_total{rule=\"r%07d\",color=\"green\"} 123456789\n"
    text = "".join(line % i for i in range(1_500_000))  # about 100 MB
    payload = frame(json.dumps({"ok": True, "output": text}).encode())
    fake.set(lambda c, i, command: [payload])
    started = time.monotonic()
    code, out, err = run(sock, "stats", "--prometheus", timeout=120)
    took = time.monotonic() - started
    print(f"     a reply of {len(payload) / 1e6:.0f} MB read and printed in {took:.1f} s")
    expect("a reply of 100 MB (over 64 MiB) is read and printed whole", code == 0 and len(out) == len(text) and
           out[-100:] == text[-100:].encode() and fake.commands() == ["stats prometheus"], (code, len(out), err[-300:]))


def save_and_words(fake, sock, workdir):
    text = "profile add gold srtcm cir 1mbit cbs 8k ebs 8k\nrule add web profile gold\n"
    result = {"rules": 1, "profiles": 1, "color_maps": 0, "generation": 7}
    fake.set(lambda c, i, command: [ok(text, result)] if command == "save" else [refused("save: tricolord writes no files")])
    target = os.path.join(workdir, "saved.policy")
    code, out, err = run(sock, "save", target)
    expect("save FILE: asks `save`, writes the text itself", code == 0 and out == f"saved 1 rule to {target}\n".encode() and
           open(target).read() == text and fake.commands() == ["save"], (code, out, err, fake.requests))
    os.unlink(target)
    fake.set(fake.script)
    code, out, err = run(sock, stdin=f"\vsave {target}\n\f \rsave {target}2 # a comment\n".encode())
    expect("a line's words are the tokenizer's: a leading VT, FF or CR before save, a comment after it",
           code == 0 and open(target).read() == text and open(target + "2").read() == text and
           fake.commands() == ["save", "save"], (code, out, err, fake.requests))
    fake.set(fake.script)
    code, out, err = run(sock, "--json", "save", "caf\u00e9.policy", cwd=workdir)
    doc = json.loads(out) if code == 0 else {}
    expect("save --json: ASCII JSON with the counts and the path; a relative path in the working directory",
           code == 0 and max(out) < 0x7f and doc.get("result", {}).get("generation") == 7 and
           doc["result"]["path"] == "caf\u00e9.policy" and open(os.path.join(workdir, "caf\u00e9.policy")).read() == text,
           (code, out, err))

    code, out, err = run(sock, "save", workdir)
    expect("save to a directory: not written, status 1", code == 1 and b"is a directory: not replaced" in err, (code, err))

    fake.set(lambda c, i, command: [ok("pong")])
    for words, message in [(["save"], b"save FILE: one file to write the policy to; none given"),
                           (["save", "a", "b"], b"save FILE: one file to write the policy to; 2 words given: 'a' 'b'"),
                           (["load"], b"load FILE: one policy file to load; none given"),
                           (["save", ""], b"an empty file name")]:
        code, out, err = run(sock, *words)
        expect(f"{' '.join(words)!r}: a usage error, status 1, nothing sent", code == 1 and message in err and
               fake.commands() == [], (code, err, fake.requests))
    code, out, err = run(sock, stdin=b"ping\nsave a b # c\nping\n")
    expect("... in stdin's commands, the line named and the rest not sent", code == 1 and
           b"line 2: save FILE: one file to write the policy to; 2 words given: 'a' 'b'" in err and
           fake.commands() == ["ping"], (code, err, fake.requests))


def oversized_load(fake, sock, workdir):
    # Control bytes take 6 bytes each in JSON: 23 MiB of them (a file within the 64 MiB limit) make a
    # request of 138 MiB, over the frame limit.
    path = os.path.join(workdir, "control-bytes.policy")
    with open(path, "wb") as f:
        f.write(b"rule add a profile b #" + b"\x01" * (23 << 20) + b"\n")
    fake.set(lambda c, i, command: [ok("loaded")])
    code, out, err = run(sock, "load", path, timeout=120)
    expect("a load whose request would exceed the frame limit: a usage error before connecting, both sizes named",
           code == 1 and b"make a request of 14" in err and str(MAX_REQUEST).encode() in err and
           fake.connections == 0, (code, err, fake.connections))
    os.unlink(path)


def options(fake, sock):
    fake.set(lambda c, i, command: [ok("pong")])
    for value in ["nan", "inf", "-inf", "1e300", "0", "-1", "0.0009", "86400.5"]:
        code, out, err = run(sock, "--timeout", value, "ping")
        expect(f"--timeout {value}: a usage error naming the range", code == 1 and
               b"--timeout: seconds from 0.001 to 86400" in err and fake.connections == 0, (code, err))
    for value in ["0.5", "86400"]:
        code, out, err = run(sock, "--timeout", value, "ping")
        expect(f"--timeout {value}: accepted", (code, out) == (0, b"pong\n"), (code, out, err))
    for value in ["nan", "inf", "0.01", "1e300"]:
        code, out, err = run(sock, "top", "--interval", value, "-n", "1")
        expect(f"top --interval {value}: a usage error naming the range", code == 1 and
               b"--interval: seconds from 0.05 to 3600" in err, (code, err))


# ---- the shell's completion ------------------------------------------------------------------------

def completion(fake, sock, workdir):
    def session(names_result, steps):
        """The shell in a pseudo-terminal; each step's keys are typed once the step's text has shown
        and the line editor reads keys one at a time (see shell_test.py's wait_for_raw_mode)."""
        def script(c, i, command):
            if command == "names":
                return [ok(result=names_result)]
            return [ok(f"ran {command}")]
        fake.set(script)
        env = dict(os.environ, TERM="xterm", HOME=workdir, TRICOLORCTL_HISTORY=os.path.join(workdir, "history"))
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(tricolorctl, [tricolorctl, "--socket", sock], env)
        seen, deadline = b"", time.monotonic() + 20
        steps = list(steps)
        status = None
        while time.monotonic() < deadline:
            if steps and steps[0][0] in seen and not termios.tcgetattr(fd)[3] & termios.ICANON:
                os.write(fd, steps.pop(0)[1])
            ready, _, _ = select.select([fd], [], [], 0.05)
            try:
                chunk = os.read(fd, 65536) if ready else b""
            except OSError:
                chunk = b""
            seen += chunk
            pid_done, st = os.waitpid(pid, os.WNOHANG)
            if pid_done:
                status = os.waitstatus_to_exitcode(st)
                break
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
        return status, seen

    status, seen = session({"rules": ["web\x1b]0;pwned\x07", "webx"], "profiles": [], "color_maps": []},
                           [(b"tricolor> ", b"rule show w\t\r"), (b"ran rule show webx", b"\x04")])
    expect("TAB completion offers no name with an escape sequence (w -> webx, the only plain one)",
           status == 0 and "rule show webx" in fake.commands() and b"pwned" not in seen, (status, fake.requests, seen[-400:]))
    status, seen = session({"rules": [1, 2], "profiles": [], "color_maps": []}, [(b"tricolor> ", b"rule show w\t\r")])
    expect("a names reply with numbers for names: a broken reply, the shell leaves with status 3",
           status == 3 and b"a broken reply from tricolord" in seen and fake.commands() == ["names"],
           (status, fake.requests, seen[-400:]))


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-hostile-") as workdir:
        sock = os.path.join(workdir, "fake.sock")
        fake = Fake(sock)
        for part, args in [(injection, ()), (top_modes, ()), (malformed, (workdir,)), (closes, ()),
                           (save_and_words, (workdir,)), (oversized_load, (workdir,)), (options, ()),
                           (completion, (workdir,)), (big_reply, ())]:
            try:
                part(fake, sock, *args)
            except Exception as e:  # a check that cannot go on fails; the others still run
                expect(f"{part.__name__} ran to its end", False, repr(e))
    finish()


if __name__ == "__main__":
    main()
