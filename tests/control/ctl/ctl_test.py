#!/usr/bin/env python3
"""The real daemon and the real CLI over the control socket (issue 11, first part): commands applied
whole or not at all, errors with the token and a caret, load of a file with an error changing
nothing, save that loads back, peers that may not use the socket, clients that vanish mid-request or
send too much, 100 clients at once, the audit log, and the daemon that is not running.

Issue 21: `save FILE` written by tricolorctl as the user who runs it (a daemon whose socket the group
nogroup may use, and tricolorctl as nobody): a root-only file nobody cannot replace, a symbolic link, a
device node, a FIFO, a fixed PATH.tmp name, a relative path, the mode and owner kept; and a `load` of
a policy of 64 MiB full of quotes and backslashes, whose request (about 128 MiB) fits the frame limit
(its time and memory printed).

tricolord runs on net_null ports (no packets needed here), --no-huge, lcores 0,1, its own
--file-prefix and socket; it ends by itself (--duration) if this test dies.

Run by meson: ctl_test.py BUILD_ROOT.
"""
import concurrent.futures
import json
import os
import subprocess
import socket
import stat
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/control/
from ctl_support import (POLICY, ctl, expect, finish, frame, raw_reply, start_daemon, stop_daemon,  # noqa: E402
                         tricolorctl, wait_for)


def start(workdir, sock, name, extra=()):
    return start_daemon(f"ctl-{name}", os.path.join(workdir, "p.policy"), sock,
                        extra=["--audit-log", os.path.join(workdir, "audit.log"), *extra])


NOBODY = 65534  # and its group, nogroup


def save_checks(workdir):
    """tricolorctl save FILE against a daemon that nogroup may use: the file is written by tricolorctl,
    as the user who runs it, and never through a link, into a device or a FIFO."""
    sock = os.path.join(workdir, "save.sock")
    daemon = start(workdir, sock, "save", extra=["--socket-group", "nogroup"])
    try:
        expect("save: the daemon answers ping", wait_for(sock, daemon))
        shown = ctl(sock, "show")[1]
        rootdir = os.path.join(workdir, "root-only")  # root's, 0755: nobody may not create a file in it
        opendir = os.path.join(workdir, "open")       # 0777: nobody may
        os.mkdir(rootdir, 0o755)
        os.mkdir(opendir)
        os.chmod(opendir, 0o777)

        # A root-only 0600 file: nobody may not replace it, even where nobody may create files (the
        # rename would need only the directory's permission).
        for folder in (rootdir, opendir):
            secret = os.path.join(folder, "shadow")
            with open(secret, "w") as f:
                f.write("root:secret\n")
            os.chmod(secret, 0o600)
            before = sorted(os.listdir(folder))
            code, out, err = ctl(sock, "save", secret, user=NOBODY)
            expect(f"save as nobody over a root-only 0600 file (in {os.path.basename(folder)}): refused, status 1, said why",
                   code == 1 and "cannot write it: Permission denied; not replaced" in err, (code, out, err))
            expect("... the file unchanged, nothing else written there", open(secret).read() == "root:secret\n" and
                   os.stat(secret).st_uid == 0 and sorted(os.listdir(folder)) == before, (sorted(os.listdir(folder)), before))
        code, out, err = ctl(sock, "save", os.path.join(rootdir, "new.policy"), user=NOBODY)
        expect("save as nobody of a new file in root's folder: refused, status 1, nothing written",
               code == 1 and "cannot create a file in its directory" in err and "Permission denied" in err and
               os.listdir(rootdir) == ["shadow"], (code, err, os.listdir(rootdir)))

        target = os.path.join(workdir, "target")
        with open(target, "w") as f:
            f.write("precious\n")
        link = os.path.join(opendir, "link.policy")
        os.symlink(target, link)
        code, _, err = ctl(sock, "save", link)
        expect("save (as root) to a symbolic link: refused, status 1", code == 1 and "is a symbolic link: not replaced" in err,
               (code, err))
        expect("... its target unchanged, the link still a link", open(target).read() == "precious\n" and
               os.path.islink(link), open(target).read())
        device = os.path.join(opendir, "null")
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        for path, kind in [(device, "a character device"), ("/dev/null", "a character device")]:
            code, _, err = ctl(sock, "save", path)
            expect(f"save to {path}: refused as {kind}", code == 1 and f"is {kind}: not replaced" in err, (code, err))
        expect("... the node still a device", stat.S_ISCHR(os.stat(device).st_mode))
        fifo = os.path.join(opendir, "fifo")
        os.mkfifo(fifo)
        code, _, err = ctl(sock, "save", fifo, timeout=10)
        expect("save to a FIFO: refused without blocking", code == 1 and "is a FIFO: not replaced" in err, (code, err))

        # A link or a FIFO at a fixed temporary name is left alone: the temporary file's name is random.
        fixed = os.path.join(opendir, "fixed.policy")
        os.symlink(target, fixed + ".tmp")
        os.mkfifo(fixed + "~")
        code, out, err = ctl(sock, "save", fixed, timeout=10)
        expect("save with a link at PATH.tmp and a FIFO at PATH~: written, neither touched",
               code == 0 and open(fixed).read() == shown and open(target).read() == "precious\n" and
               os.path.islink(fixed + ".tmp") and stat.S_ISFIFO(os.stat(fixed + "~").st_mode), (code, out, err))
        other = os.path.join(opendir, "other.policy")
        os.mkfifo(other + ".tmp")
        code, out, err = ctl(sock, "save", other, timeout=10)
        expect("save with a FIFO at PATH.tmp: written without blocking, the FIFO untouched",
               code == 0 and open(other).read() == shown and stat.S_ISFIFO(os.stat(other + ".tmp").st_mode), (code, out, err))
        expect("... no temporary file left", sorted(os.listdir(opendir)) ==
               sorted(["shadow", "link.policy", "null", "fifo", "fixed.policy", "fixed.policy.tmp", "fixed.policy~",
                       "other.policy", "other.policy.tmp"]), os.listdir(opendir))

        code, out, err = ctl(sock, "save", "mine.policy", user=NOBODY, cwd=opendir)
        mine = os.path.join(opendir, "mine.policy")
        expect("save as nobody, a relative path: in tricolorctl's working directory, nobody's file, said so",
               code == 0 and out == "saved 2 rules to mine.policy\n" and os.path.exists(mine) and
               os.stat(mine).st_uid == NOBODY and open(mine).read() == shown, (code, out, err))
        if not os.path.exists(mine):
            return
        os.chmod(mine, 0o640)
        code, _, err = ctl(sock, "save", mine, user=NOBODY)
        expect("save over an existing file keeps its mode", code == 0 and stat.S_IMODE(os.stat(mine).st_mode) == 0o640,
               (code, err, oct(os.stat(mine).st_mode)))
        code, _, err = ctl(sock, "save", mine)
        expect("... and as root, its owner and group too", code == 0 and os.stat(mine).st_uid == NOBODY and
               os.stat(mine).st_gid == NOBODY and stat.S_IMODE(os.stat(mine).st_mode) == 0o640, (code, err))
        code, _, err = ctl(sock, "load", mine)
        expect("the saved file loads back to the same show", code == 0 and ctl(sock, "show")[1] == shown, err)
    finally:
        stop_daemon(daemon)


def peak_mib(pid):
    """A live process's peak resident set (VmHWM), in MiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0


def large_load(sock, workdir, daemon):
    """A policy file of nearly 64 MiB (the file limit), most of it comment lines of quotes and
    backslashes, each two bytes in JSON: its request, about 128 MiB, fits the frame limit."""
    small = os.path.join(workdir, "small.policy")
    with open(small, "w") as f:
        f.write(POLICY)
    big = os.path.join(workdir, "big.policy")
    line = "#" + '"\\' * 511 + "\n"  # 1024 bytes: the quotes, backslashes and line end take two each in JSON
    lines = (64 << 20) // len(line) - 1
    with open(big, "w") as f:
        f.write(POLICY)
        for _ in range(lines):
            f.write(line)
    size = os.path.getsize(big)
    # The request's size, worked out rather than made: this process stays small, so that the peak
    # resident set wait4 gives below is tricolorctl's own (a child starts as a copy of this one).
    request = len(json.dumps({"command": "load", "text": POLICY}, separators=(",", ":"))) + lines * len(json.dumps(line)[1:-1])
    print(f"     a policy file of {size} bytes, a request of {request} bytes (the limit: {(128 << 20) + (64 << 10)})")
    code, _, err = ctl(sock, "load", small)
    expected = ctl(sock, "show")[1]
    generation = json.loads(ctl(sock, "--json", "version")[1])["result"]["generation"]
    started = time.monotonic()
    # tricolorctl's own peak resident set: wait4's, of that process alone.
    p = subprocess.Popen([tricolorctl, "--socket", sock, "load", big], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.stdout.read(), p.stderr.read()  # a few lines: the pipes never fill
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = code = os.waitstatus_to_exitcode(status)
    took = time.monotonic() - started
    print(f"     load of it: {took:.1f} s; tricolorctl: {usage.ru_utime + usage.ru_stime:.1f} s of CPU, "
          f"a peak of {usage.ru_maxrss / 1024:.0f} MiB; tricolord's peak so far {peak_mib(daemon.pid):.0f} MiB")
    expect("a load of 64 MiB of quotes and backslashes (a request over 64 MiB) is installed",
           size <= 64 << 20 and request > 64 << 20 and code == 0 and ctl(sock, "show")[1] == expected and
           json.loads(ctl(sock, "--json", "version")[1])["result"]["generation"] == generation + 1, (code, out, err))
    os.unlink(big)


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-ctl-") as workdir:
        os.chmod(workdir, 0o755)  # the unprivileged peer below must reach the socket's folder
        open(os.path.join(workdir, "p.policy"), "w").write(POLICY)
        sock = os.path.join(workdir, "ctl.sock")
        daemon = start(workdir, sock, "main")
        try:
            expect("the daemon answers ping", wait_for(sock, daemon))
            code, out, _ = ctl(sock, "ping")
            expect("ping: pong, exit 0", (code, out) == (0, "pong\n"), (code, out))
            mode = os.stat(sock).st_mode & 0o777
            expect("the socket's mode is 0660", mode == 0o660, oct(mode))

            code, out, _ = ctl(sock, "rule", "list")
            expect("rule list prints the policy's rules", code == 0 and out.count("rule add") == 2, out)
            code, out, _ = ctl(sock, "--json", "version")
            generation = json.loads(out)["result"]["generation"]
            code, _, err = ctl(sock, "rule", "change", "web", "dst", "10.1.0.0/16", "profile", "silver")
            expect("a rule change is accepted", code == 0, err)
            code, out, _ = ctl(sock, "rule", "list")
            expect("rule list shows the change", "rule add web dst 10.1.0.0/16 profile silver" in out, out)
            code, out, _ = ctl(sock, "--json", "version")
            expect("the change published a new rule set", json.loads(out)["result"]["generation"] == generation + 1, out)

            before = ctl(sock, "show")[1]
            code, _, err = ctl(sock, "rule", "add", "x", "proto", "tcpx", "profile", "gold")
            expect("a bad token: exit 2", code == 2, (code, err))
            lines = err.splitlines()
            expect("the error names the token", lines and "'tcpx': expected a protocol" in lines[0], err)
            expect("a caret points at the token", len(lines) == 3 and lines[2].index("^") == lines[1].index("tcpx"), err)
            code, _, err = ctl(sock, "rule", "change", "web", "profile", "bronze")
            expect("an unknown profile: exit 2", code == 2 and "'bronze': no such profile" in err, err)
            code, _, err = ctl(sock, "profile", "delete", "silver")
            expect("a profile in use cannot be deleted", code == 2, err)

            # The daemon's own commands: each refusal says what was wrong, with a caret at the token.
            def refused(words, message, token):
                code, _, err = ctl(sock, *words)
                lines = err.splitlines()
                return (code == 2 and message in err and len(lines) == 3 and
                        lines[2].index("^") == lines[1].index(token)), (code, err)
            for words, message, token in [
                    (["stats", "colours"], "stats: expected nothing, rules, rule NAME, default, ports, workers or prometheus", "colours"),
                    (["stats", "rule", "nosuch"], "stats: no rule named 'nosuch'", "nosuch"),
                    (["reset", "meters"], "reset: expected `reset counters`", "meters"),
                    (["key", "list", "nosuch"], "key: no rule named 'nosuch'", "nosuch"),
                    (["key", "list", "web"], "key: rule web has no per-key meters", "web"),
                    (["key", "list", "hosts", "top", "0"], "key list: top: a count from 1 to 1000000", "0"),
                    (["key", "list", "hosts", "by", "blue"], "key list: by: one of red-bytes, red-packets", "blue"),
                    (["key", "list", "hosts", "sideways"], "key list: expected `top N`, `all` or `by ORDER` here", "sideways"),
                    (["key", "show", "hosts", "10.2.300.1"], "key show: '10.2.300.1' is not a key of rule hosts", "10.2.300.1"),
                    (["key", "show", "hosts", "10.2.0.1"], "key show: rule hosts has no live key 10.2.0.1", "10.2.0.1"),
                    (["key", "drop", "hosts"], "key: expected `key list RULE", "drop")]:
                ok, detail = refused(words, message, token)
                expect(f"{' '.join(words)}: refused, exit 2, the caret at {token!r}", ok, detail)
            # A word that appears twice: the caret under the one at fault (the tokenizer's column).
            code, _, err = ctl(sock, "key", "list", "hosts", "by", "hosts")
            lines = err.splitlines()
            expect("the caret under the second of two equal words", code == 2 and len(lines) == 3 and
                   lines[2].index("^") == lines[1].rindex("hosts"), err)
            code, out, _ = ctl(sock, "--json", "names")
            expect("names lists the rules and profiles",
                   code == 0 and json.loads(out)["result"] == {"rules": ["web", "hosts"], "profiles": ["gold", "silver"],
                                                               "color_maps": []}, out)
            code, out, _ = ctl(sock, "--json", "key", "list", "hosts")
            expect("key list of a rule with no live key: an empty list",
                   code == 0 and json.loads(out)["result"]["keys"] == [] and json.loads(out)["result"]["live_keys"] == 0, out)
            code, out, _ = ctl(sock, "--json", "stats", "ports")
            result = json.loads(out)["result"] if code == 0 else {}
            expect("stats ports: the ports block only", code == 0 and len(result.get("ports", [])) == 1 and
                   "rules" not in result, out)
            code, out, _ = ctl(sock, "stats", "workers")
            expect("stats workers (text): each worker and the generation its latest burst saw",
                   code == 0 and "worker 0 on lcore 1" in out and "rule set generation" in out and "rule web" not in out, out)

            bad = os.path.join(workdir, "bad.policy")
            open(bad, "w").write("profile add z 1r2c cir 1mbit cbs 8k\nrule add all profile z\nrule add bad dst 999.1.1.1 profile z\n")
            code, _, err = ctl(sock, "load", bad)
            expect("load of a file with an error: exit 2, its line named", code == 2 and "line 3:" in err, err)
            expect("... and nothing changed", ctl(sock, "show")[1] == before)

            saved = os.path.join(workdir, "saved.policy")
            code, out, err = ctl(sock, "save", saved)
            expect("save writes the running policy (tricolorctl writes it)", code == 0 and open(saved).read() == before and
                   out == f"saved 2 rules to {saved}\n", (code, out, err))
            good = os.path.join(workdir, "good.policy")
            open(good, "w").write("profile add z 1r2c cir 1mbit cbs 8k\nrule add all profile z\n")
            code, _, err = ctl(sock, "load", good)
            expect("load of a good file replaces the policy", code == 0 and ctl(sock, "show")[1] == open(good).read(), err)
            code, _, err = ctl(sock, "load", saved)
            expect("the saved policy loads back to the same state", code == 0 and ctl(sock, "show")[1] == before, err)

            code, _, err = ctl(sock, "ping", user=65534)
            expect("a peer that is neither root nor in the group: exit 3, said why",
                   code == 3 and "Permission denied" in err, (code, err))

            # A client that vanishes mid-request, one that is slow, one that announces too much.
            gone = socket.socket(socket.AF_UNIX)
            gone.connect(sock)
            gone.sendall(struct.pack("!I", 1000) + b'{"command":')
            gone.close()
            slow = socket.socket(socket.AF_UNIX)
            slow.connect(sock)
            slow.sendall(struct.pack("!I", 100) + b'{"comm')
            code, out, _ = ctl(sock, "ping", timeout=5)
            expect("a slow client and a vanished one block nobody", (code, out) == (0, "pong\n"), (code, out))
            slow.close()
            big = socket.socket(socket.AF_UNIX)
            big.connect(sock)
            big.sendall(struct.pack("!I", 0x7FFFFFFF))
            reply = raw_reply(big)
            expect("a frame over the limit: an error reply", reply and not reply["ok"] and
                   "the limit is 134283264" in reply["error"]["message"] and reply.get("closing") == "frame", reply)
            expect("... then the connection is closed", big.recv(1) == b"")
            big.close()
            raw = socket.socket(socket.AF_UNIX)
            raw.connect(sock)
            raw.sendall(frame(b'{"command":"ping"}') + frame(b'{"command":"rule list","jsno":1}'))
            first, second = raw_reply(raw), raw_reply(raw)
            expect("pipelined requests answered in order", first["output"] == "pong" and not second["ok"] and
                   "'jsno'" in second["error"]["message"], (first, second))
            raw.close()

            with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
                results = list(pool.map(lambda _: ctl(sock, "ping", timeout=60), range(100)))
            expect("100 clients at once all answered", all(r[:2] == (0, "pong\n") for r in results),
                   [r for r in results if r[:2] != (0, "pong\n")][:3])

            second = start(workdir, sock, "second")
            _, err = second.communicate(timeout=60)
            expect("a second daemon on the same socket is refused", second.returncode == 3 and
                   "another tricolord serves" in err, (second.returncode, err[-300:]))

            large_load(sock, workdir, daemon)

            audit = open(os.path.join(workdir, "audit.log")).read()
            expect("the audit log has accepted changes with the peer's uid",
                   "uid 0 pid" in audit and "accepted: 'rule change web" in audit, audit)
            expect("... and refused ones", "refused: 'rule add x proto tcpx" in audit, audit)
        finally:
            stop_daemon(daemon)
        expect("the daemon stopped cleanly", daemon.returncode == 0, daemon.returncode)
        expect("its socket file is removed", not os.path.exists(sock))
        code, _, err = ctl(sock, "ping")
        expect("no daemon: exit 3, said why", code == 3 and "is it running?" in err, (code, err))
        save_checks(workdir)
    finish()


if __name__ == "__main__":
    main()
