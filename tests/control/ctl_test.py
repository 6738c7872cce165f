#!/usr/bin/env python3
"""The real daemon and the real CLI over the control socket (issue 11, first part): commands applied
whole or not at all, errors with the token and a caret, load of a file with an error changing
nothing, save that loads back, peers that may not use the socket, clients that vanish mid-request or
send too much, 100 clients at once, the audit log, and the daemon that is not running.

tricolord runs on net_null ports (no packets needed here), --no-huge, lcores 0,1, its own
--file-prefix and socket; it ends by itself (--duration) if this test dies.

Run by meson: ctl_test.py BUILD_ROOT.
"""
import concurrent.futures
import json
import os
import socket
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_support import POLICY, ctl, expect, finish, start_daemon, stop_daemon, wait_for  # noqa: E402



def frame(payload: bytes) -> bytes:
    return struct.pack("!I", len(payload)) + payload


def raw_reply(conn):
    header = b""
    while len(header) < 4:
        chunk = conn.recv(4 - len(header))
        if not chunk:
            return None
        header += chunk
    (length,) = struct.unpack("!I", header)
    body = b""
    while len(body) < length:
        body += conn.recv(length - len(body))
    return json.loads(body)


def start(workdir, sock, name):
    return start_daemon(f"ctl-{name}", os.path.join(workdir, "p.policy"), sock,
                        extra=["--audit-log", os.path.join(workdir, "audit.log")])


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
            expect("save writes the running policy", code == 0 and open(saved).read() == before, (out, err))
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
    finish()


if __name__ == "__main__":
    main()
