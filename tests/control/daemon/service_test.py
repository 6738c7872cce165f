#!/usr/bin/env python3
"""tricolord as a system service (issue 25, part 1), the real daemon and CLI on a net_null port:

- --version: tricolord, tricolorctl, tricolor-replay and tricolor-plot each say their name and the
  project's version, the same for all four; `tricolorctl version` says the client's and the daemon's.
- The notify protocol, through a datagram socket this test owns as $NOTIFY_SOCKET: READY=1 with a
  STATUS= once the socket answers, WATCHDOG=1 about every WATCHDOG_USEC/2, RELOADING=1 (with
  MONOTONIC_USEC=) then READY=1 around each SIGHUP reload, STOPPING=1 at SIGTERM.
- SIGHUP reloads the policy file whole or not at all: a rate change is installed (a new generation,
  the new rate shown); a file with an error changes nothing, its line and token are said on stderr and
  in the STATUS= line, and the daemon goes on; `tricolorctl reload` does the same and says so.
- A FIFO, a link to a device or a directory in the policy file's place: a reload refuses it at once (the
  control loop never blocks on it) and nothing changes.
- A start that fails after making its socket (a port that does not exist) removes the socket file.
- Bash completion (control/ctl/tricolor.bash-completion): tricolorctl's commands, and the running
  daemon's rule and profile names where a command takes one; tricolord's own options after `--`.
- The unit (control/daemon/systemd/tricolord.service.in, as meson configures it): `systemd-analyze
  verify` finds nothing to say about it, with ExecStart pointed at the built tricolord; its reload
  sends SIGHUP and it is Type=notify.

Run by meson: service_test.py BUILD_ROOT.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ctl_support import (NotifyListener, build_root, ctl, expect, file_prefix, finish, start_daemon,  # noqa: E402
                         stop_daemon, tricolor_replay, tricolorctl, tricolord, wait_for)

source_root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
POLICY = "profile add p 1r2c cir 1mbit cbs 10k\nrule add all dst 10.0.0.0/8 profile p\n"


def versions():
    said = {}
    for name, argv in (("tricolord", [tricolord, "--version"]), ("tricolorctl", [tricolorctl, "--version"]),
                       ("tricolor-replay", [tricolor_replay, "--version"]),
                       ("tricolor-plot", [sys.executable, os.path.join(source_root, "control", "replay", "tricolor_plot.py"),
                                          "--version"])):
        run = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        match = re.fullmatch(re.escape(name) + r" (\d+\.\d+\.\d+)\n", run.stdout)
        expect(f"{name} --version says its name and version, status 0", run.returncode == 0 and match,
               (run.returncode, run.stdout, run.stderr))
        said[name] = match.group(1) if match else None
    meson_build = open(os.path.join(source_root, "meson.build")).read()
    project = re.search(r"version: '([^']+)'", meson_build).group(1)
    expect("every program's version is meson.build's", set(said.values()) == {project}, (said, project))
    return project


def profile_line(sock):
    code, out, _ = ctl(sock, "profile", "list")
    return out.strip() if code == 0 else f"(exit {code})"


def generation(sock):
    code, out, _ = ctl(sock, "version")
    match = re.search(r"rule set generation (\d+)", out)
    return int(match.group(1)) if match else None


def complete(*words):
    """What bash's completion offers for the last of `words` (the cursor's, "" for a new word)."""
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
              'if [[ $1 == *tricolord ]]; then _tricolord; else _tricolorctl; fi; printf "%s\\n" "${COMPREPLY[@]}"')
    run = subprocess.run(["bash", "-c", script, "_", os.path.join(source_root, "control", "ctl", "tricolor.bash-completion"),
                          *words], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return sorted(line for line in run.stdout.splitlines() if line)


def completion(sock):
    ctl_words = [tricolorctl, "--socket", sock]
    expect("completion: tricolorctl's commands", complete(*ctl_words, "re") == ["reload", "reset"], complete(*ctl_words, "re"))
    expect("completion: rule change NAME from the daemon", complete(*ctl_words, "rule", "change", "") == ["all"],
           complete(*ctl_words, "rule", "change", ""))
    expect("completion: a profile's name after `profile` in a rule",
           complete(*ctl_words, "rule", "add", "x", "dst", "1.2.3.4", "profile", "") == ["p"])
    expect("completion: stats' blocks", complete(*ctl_words, "stats", "") == ["default", "ports", "rule", "rules", "workers"])
    expect("completion: without a daemon, the commands still", complete(tricolorctl, "--socket", sock + ".none", "rule", "") ==
           ["add", "change", "delete", "list", "show"])
    expect("completion: no names without a daemon", complete(tricolorctl, "--socket", sock + ".none", "rule", "show", "") == [])
    expect("completion: tricolord's options after --", complete(tricolord, "-l", "0,1", "--", "--pol") == ["--policy"])
    expect("completion: EAL options before --", "--vdev" in complete(tricolord, "--vd"))


def service(workdir, version):
    policy = os.path.join(workdir, "policy")
    open(policy, "w").write(POLICY)
    sock = os.path.join(workdir, "ctl.sock")
    notify = NotifyListener(os.path.join(workdir, "notify.sock"))
    daemon = start_daemon("service", policy, sock, env={"NOTIFY_SOCKET": os.path.join(workdir, "notify.sock"),
                                                        "WATCHDOG_USEC": "200000"})
    stderr = ""
    try:
        ready = notify.wait("READY")
        expect("READY=1 is sent", ready is not None)
        expect("once ready, the socket answers at once", ready is not None and ctl(sock, "ping")[0] == 0)
        expect("READY=1 comes with a STATUS= line saying it forwards",
               ready is not None and ready[1].get("STATUS", "").startswith("forwarding: 1 rules (generation 1), 1 worker"),
               ready)
        wait_for(sock, daemon)
        completion(sock)
        code, out, err = ctl(sock, "version")
        expect("tricolorctl version: the client's version, then the daemon's",
               code == 0 and out.startswith(f"tricolorctl {version}\ntricolord {version}; policy from file "), (code, out, err))

        # The watchdog: pinged at about half of WATCHDOG_USEC (0.2 s) while the control loop turns.
        expect("WATCHDOG=1 is sent", notify.wait("WATCHDOG") is not None)
        window_start = time.monotonic()
        time.sleep(1.0)
        pings = [t for t, _ in notify.having("WATCHDOG", window_start) if t < window_start + 1.0]
        expect("WATCHDOG=1 about every 0.1 s (5 to 15 in a second)", 5 <= len(pings) <= 15, len(pings))

        # SIGHUP: a rate change in the file is installed.
        open(policy, "w").write(POLICY.replace("1mbit", "3mbit"))
        before = time.monotonic()
        daemon.send_signal(signal.SIGHUP)
        reloading = notify.wait("RELOADING", before)
        expect("SIGHUP: RELOADING=1 with MONOTONIC_USEC=", reloading is not None and
               reloading[1].get("MONOTONIC_USEC", "").isdigit(), reloading)
        again = notify.wait("READY", reloading[0] if reloading else before)
        expect("SIGHUP: READY=1 after the reload, its STATUS= at generation 2",
               again is not None and "(generation 2)" in again[1].get("STATUS", ""), again)
        expect("SIGHUP: the new rate runs", profile_line(sock) == "profile add p 1r2c cir 3mbit cbs 10k", profile_line(sock))

        # SIGHUP with an error in the file: nothing changes, the daemon goes on and says where.
        open(policy, "w").write(POLICY.replace("1mbit", "5mbit") + "rule add x dst 1.2.3.4 profile nosuch\n")
        before = time.monotonic()
        daemon.send_signal(signal.SIGHUP)
        refused = notify.wait("READY", before)
        expect("SIGHUP, a bad file: READY=1 again, STATUS= says the reload was refused and why",
               refused is not None and "the last reload was refused" in refused[1].get("STATUS", "")
               and "line 3" in refused[1].get("STATUS", ""), refused)
        expect("SIGHUP, a bad file: the running policy is unchanged",
               profile_line(sock) == "profile add p 1r2c cir 3mbit cbs 10k" and generation(sock) == 2,
               (profile_line(sock), generation(sock)))
        expect("SIGHUP, a bad file: the daemon still runs", daemon.poll() is None and ctl(sock, "ping")[0] == 0)

        # tricolorctl reload: the same, through the socket.
        code, out, err = ctl(sock, "reload")
        expect("tricolorctl reload, a bad file: refused (status 2) naming the line and token",
               code == 2 and "line 3: 'nosuch': no such profile; the running policy is unchanged" in err, (code, out, err))
        open(policy, "w").write(POLICY.replace("1mbit", "5mbit"))
        code, out, err = ctl(sock, "reload")
        expect("tricolorctl reload: installed, a new generation", code == 0 and "installed, rule set generation 3" in out,
               (code, out, err))
        expect("tricolorctl reload: the new rate runs", profile_line(sock) == "profile add p 1r2c cir 5mbit cbs 10k")
        code, out, err = ctl(sock, "reload")
        expect("tricolorctl reload of the same file: nothing to change, no new generation",
               code == 0 and "the same policy as running" in out and generation(sock) == 3, (code, out, err))
        # Hostile files where the policy was: a FIFO (no writer: opening it must not block the control
        # loop), a link to a device, a directory. Each refused at once, nothing changed.
        for kind in ("fifo", "device", "directory"):
            os.rename(policy, policy + ".kept")
            if kind == "fifo":
                os.mkfifo(policy)
            elif kind == "device":
                os.symlink("/dev/zero", policy)
            else:
                os.mkdir(policy)
            started = time.monotonic()
            code, out, err = ctl(sock, "reload", timeout=10)
            took = time.monotonic() - started
            (os.rmdir if kind == "directory" else os.remove)(policy)
            os.rename(policy + ".kept", policy)
            expect(f"tricolorctl reload of a {kind} in the policy's place: refused at once, saying what it is",
                   code == 2 and "not a policy file" in err and took < 5, (code, err, took))
            expect(f"after the {kind}: the daemon runs the same policy", generation(sock) == 3 and
                   profile_line(sock) == "profile add p 1r2c cir 5mbit cbs 10k")
        code, out, err = ctl(sock, "reload", "now")
        expect("tricolorctl reload now: refused, it takes no word", code == 2 and "takes nothing after it" in err, err)

        before = time.monotonic()
    finally:
        stderr = stop_daemon(daemon)
    stopping = notify.wait("STOPPING", before, limit_s=2)
    expect("SIGTERM: STOPPING=1", stopping is not None)
    notify.close()
    expect("the daemon stops cleanly", daemon.returncode == 0, (daemon.returncode, stderr[-1500:]))
    expect("SIGHUP's reloads are said on stderr",
           "SIGHUP: file '" in stderr and ": installed, rule set generation 2" in stderr
           and "SIGHUP: reload refused: file '" in stderr and "line 3: 'nosuch'" in stderr, stderr[-2000:])
    expect("the audit log has the reloads, by SIGHUP and by the client",
           "SIGHUP: accepted: 'reload " in stderr and "SIGHUP: refused: 'reload " in stderr
           and re.search(r"uid \d+ pid \d+: accepted: 'reload ", stderr) is not None, stderr[-2000:])


def failed_start(workdir):
    """A port that does not exist: the start fails after the socket was made; the file goes with it."""
    policy = os.path.join(workdir, "policy")
    sock = os.path.join(workdir, "failed.sock")
    args = [tricolord, "-l", "0,1", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
            f"--file-prefix={file_prefix('failed')}", "--log-level=lib.eal:error", "--vdev=net_null0",
            "--", "--policy", policy, "--socket", sock, "--pair", "0:5"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    expect("a start with a missing port fails (status 3) saying so", run.returncode == 3 and "port 5 does not exist" in run.stderr,
           (run.returncode, run.stderr[-800:]))
    expect("the failed start removed its socket file", not os.path.exists(sock), os.listdir(workdir))


def unit(workdir):
    """The unit as meson configured it, its ExecStart pointed at the built daemon (verify checks it)."""
    configured = os.path.join(build_root, "control", "daemon", "tricolord.service")
    text = open(configured).read()
    expect("the unit is Type=notify, reloads with SIGHUP, keeps its socket's folder, restarts on failure",
           all(line in text.splitlines() for line in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID",
                                                      "RuntimeDirectory=tricolor", "Restart=on-failure")), text)
    exec_start = re.search(r"^ExecStart=(\S+) ", text, re.M)
    expect("ExecStart runs tricolord with the policy file", exec_start is not None and "-- --policy " in text)
    local = os.path.join(workdir, "tricolord.service")
    open(local, "w").write(text.replace(f"ExecStart={exec_start.group(1)} ", f"ExecStart={tricolord} "))
    run = subprocess.run(["systemd-analyze", "verify", "--man=no", local], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, cwd=workdir)
    said = [line for line in (run.stdout + run.stderr).splitlines() if "tricolord.service" in line]
    expect("systemd-analyze verify: nothing to say about the unit", run.returncode == 0 and not said,
           (run.returncode, run.stdout, run.stderr))
    # The check can fail: a unit with a mistake in it is reported.
    broken = os.path.join(workdir, "broken", "tricolord.service")
    os.makedirs(os.path.dirname(broken))
    open(broken, "w").write(open(local).read().replace("Type=notify", "Type=notifyy"))
    run = subprocess.run(["systemd-analyze", "verify", "--man=no", broken], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, cwd=workdir)
    expect("systemd-analyze verify reports a broken unit (the check can fail)", "notifyy" in run.stdout + run.stderr,
           (run.stdout, run.stderr))


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-service-") as workdir:
        version = versions()
        service(workdir, version)
        failed_start(workdir)
        unit(workdir)
    finish()


if __name__ == "__main__":
    main()
