#!/usr/bin/env python3
"""What an installation holds, and that it runs (issue 25, part 2):

- `meson install --destdir` of this build installs exactly the programs, the man pages, the unit, its
  options file, the example policy and the completion, where this build's prefix puts them; nothing else.
- The Debian package (`./dev package`: dpkg-buildpackage, lintian): `dpkg-deb -c` lists the same files,
  laid out for Debian 12 (/usr, /etc, /lib/systemd/system, compressed man pages, copyright and
  changelog); its version is the project's; its control file depends on what the programs link; the
  options file and the policy are conffiles. Unpacked into a scratch root (`dpkg-deb -x`), its
  programs are the ones run below. Without a .deb (a `meson test` before `./dev package`) the
  installed tree is run instead and this says so; under CI a missing .deb fails.
- The installed tricolord, started as the unit starts it (its ExecStart, with the options from the
  installed /etc/default/tricolord and the installed example policy; the test's own net_pcap ports,
  socket and $NOTIFY_SOCKET added), polices a capture; the installed tricolorctl reads its stats and
  version and reloads it; SIGHUP (the unit's ExecReload) reloads an edited policy with RELOADING=1 and
  READY=1; the installed tricolor-replay runs the same policy over the same capture; every installed
  man page renders without a warning; the installed completion completes; systemd-analyze verify
  accepts the installed unit.

Run by meson: package_test.py BUILD_ROOT SOURCE_ROOT.
"""
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "control"))
import ctl_support  # noqa: E402
import daemon_capture  # noqa: E402
from ctl_support import NotifyListener, ctl, expect, file_prefix, finish, stop_daemon, wait_for  # noqa: E402

build_root = ctl_support.build_root
source_root = os.path.abspath(sys.argv[2])
PROGRAMS = ("tricolord", "tricolorctl", "tricolor-replay", "tricolor-plot")
MAN_PAGES = (("man8", "tricolord.8"), ("man8", "tricolorctl.8"), ("man1", "tricolor-replay.1"),
             ("man1", "tricolor-plot.1"), ("man5", "tricolor-policy.5"))


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, **kwargs)


def project_version():
    return re.search(r"^\s*version:\s*'([^']+)'", open(os.path.join(source_root, "meson.build")).read(), re.M).group(1)


def build_options():
    """This build's install directories, as meson has them (absolute)."""
    options = {o["name"]: o["value"] for o in json.loads(run(["meson", "introspect", "--buildoptions", build_root]).stdout)}
    prefix = options["prefix"]

    def under(name):
        return os.path.join(prefix, options[name])  # an absolute value (sysconfdir /etc) stays as it is
    return {"bin": under("bindir"), "man": under("mandir"), "etc": under("sysconfdir"), "data": under("datadir"),
            "unit": options["systemdsystemunitdir"] or os.path.join(prefix, "lib", "systemd", "system")}


def expected_files(dirs, man_suffix=""):
    """The files an installation holds, by absolute path, for the given install directories."""
    files = [os.path.join(dirs["bin"], p) for p in PROGRAMS]
    files += [os.path.join(dirs["man"], section, page + man_suffix) for section, page in MAN_PAGES]
    files += [os.path.join(dirs["etc"], "default", "tricolord"), os.path.join(dirs["etc"], "tricolor", "policy"),
              os.path.join(dirs["unit"], "tricolord.service")]
    files += [os.path.join(dirs["data"], "bash-completion", "completions", p) for p in ("tricolorctl", "tricolord")]
    return sorted(files)


def files_under(root):
    return sorted("/" + os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def meson_install(workdir):
    """The build installed into a scratch folder; returns (its root, the install directories)."""
    destdir = os.path.join(workdir, "destdir")
    done = run(["meson", "install", "-C", build_root, "--destdir", destdir, "--no-rebuild", "--quiet"])
    expect("meson install --destdir succeeds", done.returncode == 0, done.stderr[-1500:])
    dirs = build_options()
    expect("meson install: the programs, man pages, unit, options file, policy and completion, nothing else",
           files_under(destdir) == expected_files(dirs), (files_under(destdir), expected_files(dirs)))
    return destdir, dirs


DEBIAN_DIRS = {"bin": "/usr/bin", "man": "/usr/share/man", "etc": "/etc", "data": "/usr/share", "unit": "/lib/systemd/system"}


def the_package(workdir):
    """The .deb ./dev package built, checked and unpacked; returns its root, or None without one."""
    package_dir = os.environ.get("TRICOLOR_PACKAGE_DIR", os.path.join(source_root, "build-deb"))
    version = project_version()
    changelog = open(os.path.join(source_root, "debian", "changelog")).readline()
    expect("debian/changelog's version is the project's (meson.build)", f"tricolor ({version})" in changelog, changelog)
    debs = glob.glob(os.path.join(package_dir, f"tricolor_{version}_*.deb"))
    if not debs:
        print(f"note: no tricolor_{version}_*.deb in {package_dir} (./dev package builds it): the meson install tree is run instead")
        expect("under CI the package was built (./dev test builds it)", os.environ.get("CI") != "true")
        return None
    deb = max(debs, key=os.path.getmtime)
    listing = run(["dpkg-deb", "-c", deb]).stdout
    listed = sorted(line.split()[-1][1:] for line in listing.splitlines() if not line.startswith("d"))
    # debian/tricolor.docs: the README and the reference pages (dh_installdocs compresses the large ones).
    docs = [line.strip() for line in open(os.path.join(source_root, "debian", "tricolor.docs")) if line.strip()]
    expect("debian/tricolor.docs: the README and every reference page in doc/",
           sorted(docs) == sorted(["README.md"] + ["doc/" + p for p in os.listdir(os.path.join(source_root, "doc"))
                                                   if p.endswith(".md") and p != "README.md"]), docs)
    doc_files = [re.sub(r"\.gz$", "", f) for f in listed if f.startswith("/usr/share/doc/tricolor/")]
    wanted = sorted(expected_files(DEBIAN_DIRS, man_suffix=".gz") +
                    ["/usr/share/doc/tricolor/changelog.gz", "/usr/share/doc/tricolor/copyright"] +
                    [f for f in listed if f.startswith("/usr/share/doc/tricolor/") and f.endswith((".md", ".md.gz"))])
    expect("the package holds the README and the reference pages in /usr/share/doc/tricolor",
           sorted(os.path.basename(f) for f in doc_files if f.endswith(".md")) == sorted(os.path.basename(d) for d in docs),
           doc_files)
    expect(f"dpkg-deb -c {os.path.basename(deb)}: the files laid out for Debian 12, nothing else", listed == wanted, (listed, wanted))
    fields = dict(re.findall(r"^(\S+): (.*)$", run(["dpkg-deb", "-f", deb]).stdout, re.M))
    expect("the package's version is the project's", fields.get("Version") == version, fields)
    depends = fields.get("Depends", "")
    expect("it depends on the DPDK libraries and libpcap the programs link", all(
        lib in depends for lib in ("librte-eal23", "librte-ethdev23", "librte-acl23", "libpcap0.8", "python3")), depends)
    conffiles = run(["dpkg-deb", "-I", deb, "conffiles"]).stdout.split()
    expect("the options file and the policy are conffiles (an upgrade keeps the operator's)",
           sorted(conffiles) == ["/etc/default/tricolord", "/etc/tricolor/policy"], conffiles)
    postinst = run(["dpkg-deb", "-I", deb, "postinst"]).stdout
    # dh_installsystemd --no-enable --no-start: enabled again only where the operator had enabled it.
    expect("installing it neither enables nor starts the service (the ports are the operator's to name first)",
           "deb-systemd-helper update-state 'tricolord.service'" in postinst and "deb-systemd-invoke" not in postinst
           and postinst.count("deb-systemd-helper enable") == postinst.count("deb-systemd-helper --quiet was-enabled"),
           postinst)
    root = os.path.join(workdir, "root")
    unpacked = run(["dpkg-deb", "-x", deb, root])
    expect("dpkg-deb -x unpacks it into a scratch root", unpacked.returncode == 0, unpacked.stderr)
    return root


def unit_argv(root, dirs, eal_options, options):
    """tricolord's command line as the installed unit builds it: its ExecStart with $TRICOLORD_EAL_OPTIONS
    and $TRICOLORD_OPTIONS from the installed options file, then what the test adds to each."""
    unit = open(root + os.path.join(dirs["unit"], "tricolord.service")).read()
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1)
    defaults_path = re.search(r"^EnvironmentFile=-?(.*)$", unit, re.M).group(1)
    expect("the unit reads the installed options file", defaults_path == os.path.join(dirs["etc"], "default", "tricolord"),
           defaults_path)
    defaults = dict(re.findall(r'^(\w+)="(.*)"$', open(root + defaults_path).read(), re.M))
    expect("the options file sets the EAL's and tricolord's options", set(defaults) == {"TRICOLORD_EAL_OPTIONS", "TRICOLORD_OPTIONS"},
           defaults)
    words = []
    for word in shlex.split(exec_start):
        if word == "$TRICOLORD_EAL_OPTIONS":
            words += shlex.split(defaults["TRICOLORD_EAL_OPTIONS"]) + eal_options
        elif word == "$TRICOLORD_OPTIONS":
            words += shlex.split(defaults["TRICOLORD_OPTIONS"]) + options
        else:
            words.append(root + word if word.startswith("/") else word)  # the binary and the policy, in the scratch root
    return words


def run_installed(root, dirs, workdir):
    """The installed programs against each other, tricolord as the unit starts it."""
    bindir = root + dirs["bin"]
    version = project_version()
    for program in PROGRAMS:
        said = run([os.path.join(bindir, program), "--version"])
        expect(f"installed {program} --version says {version}", said.returncode == 0 and version in said.stdout,
               (said.returncode, said.stdout, said.stderr))
    ctl_support.tricolorctl = os.path.join(bindir, "tricolorctl")

    capture = os.path.join(workdir, "in.pcap")
    frames = [(i * 100, daemon_capture.ether(daemon_capture.ipv4([10, 0, 0, 1], [10, 1, 0, i % 200 + 1], 17, 0,
                                                                 daemon_capture.l4(17, 1000, 53, 200)), 0x0800))
              for i in range(2000)]
    daemon_capture.write_pcap(capture, frames)
    out = os.path.join(workdir, "out.pcap")
    sock = os.path.join(workdir, "tricolor.sock")
    prefix = file_prefix("package")
    # The installed options say `-l 0,1 --file-prefix=tricolord`: the test's own prefix comes after and wins.
    argv = unit_argv(root, dirs, ["--no-huge", "-m", "512", "--no-pci", "--no-telemetry", f"--file-prefix={prefix}",
                                  "--log-level=lib.eal:warning", f"--vdev=net_pcap0,rx_pcap={capture},tx_pcap={out}"],
                     ["--socket", sock, "--duration", "120"])
    installed_policy = root + os.path.join(dirs["etc"], "tricolor", "policy")
    expect("the unit runs the installed tricolord on the installed policy",
           argv[0] == os.path.join(bindir, "tricolord") and installed_policy in argv, argv)
    # The policy is the operator's to edit: the test edits a copy.
    policy = os.path.join(workdir, "policy")
    open(policy, "w").write(open(installed_policy).read())
    argv[argv.index(installed_policy)] = policy
    notify = NotifyListener(os.path.join(workdir, "notify.sock"))
    daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              env=dict(os.environ, NOTIFY_SOCKET=os.path.join(workdir, "notify.sock")))
    try:
        expect("the installed tricolord starts and says READY=1", notify.wait("READY") is not None and wait_for(sock, daemon),
               daemon.poll())
        deadline = time.monotonic() + 30
        metered = 0
        while time.monotonic() < deadline and metered < len(frames):
            status, text, _ = ctl(sock, "--json", "stats")
            if status == 0:
                rules = json.loads(text)["result"]["rules"]
                metered = sum(r["green_packets"] + r["yellow_packets"] + r["red_packets"] for r in rules)
            time.sleep(0.2)
        expect("installed tricolorctl: the example policy's rule metered every packet of the capture", metered == len(frames),
               metered)
        status, text, _ = ctl(sock, "version")
        expect("installed tricolorctl version: the client's and the daemon's", status == 0 and text.count(version) >= 2, text)

        # systemctl reload sends SIGHUP (ExecReload): an edited policy is read again, whole.
        text = open(policy).read()
        expect("the example policy has a 1 Gbit/s profile to edit", "cir 1gbit" in text, text)
        open(policy, "w").write(text.replace("cir 1gbit", "cir 500mbit"))
        since = time.monotonic()
        daemon.send_signal(signal.SIGHUP)
        reloading = notify.wait("RELOADING", since)
        ready = notify.wait("READY", since)
        expect("SIGHUP: RELOADING=1, then READY=1", reloading is not None and ready is not None and reloading[0] <= ready[0],
               (reloading, ready))
        status, text, _ = ctl(sock, "profile", "show", "line")
        expect("SIGHUP: the edited rate is installed", status == 0 and "500" in text, text)
        status, text, err = ctl(sock, "reload")
        expect("installed tricolorctl reload: the file read again", status == 0, (text, err))
    finally:
        errors = stop_daemon(daemon)
        notify.close()
    expect("the installed tricolord exits 0 at SIGTERM", daemon.returncode == 0, errors[-1500:])
    expect("it forwarded the green packets to its TX port", len(daemon_capture.read_pcap_frames(out)) > 0)

    replay = run([os.path.join(bindir, "tricolor-replay"), "--policy", installed_policy, "--in", capture,
                  "--json", os.path.join(workdir, "replay.json")])
    expect("the installed tricolor-replay runs the installed policy over the capture", replay.returncode == 0,
           (replay.returncode, replay.stderr[-1000:]))

    for section, page in MAN_PAGES:
        path = root + os.path.join(dirs["man"], section, page)
        path = path if os.path.exists(path) else path + ".gz"
        shown = run(["man", "--warnings", "-l", path], env=dict(os.environ, MANPAGER="cat", MANWIDTH="100", LC_ALL="C.UTF-8"))
        expect(f"man -l {os.path.basename(path)}: renders without a warning",
               shown.returncode == 0 and not shown.stderr.strip() and len(shown.stdout) > 500, shown.stderr[-800:])

    completion = root + os.path.join(dirs["data"], "bash-completion", "completions", "tricolorctl")
    script = ('source "$1"; COMP_WORDS=(tricolorctl --socket /nonexistent rel); COMP_CWORD=3; _tricolorctl; '
              'printf "%s\\n" "${COMPREPLY[@]}"; complete -p tricolorctl tricolord')
    done = run(["bash", "-c", script, "_", completion])
    expect("the installed completion completes tricolorctl's commands and is bound to both programs",
           "reload" in done.stdout.split() and "_tricolorctl tricolorctl" in done.stdout and "tricolord" in done.stdout,
           (done.stdout, done.stderr))

    unit = open(root + os.path.join(dirs["unit"], "tricolord.service")).read()
    local = os.path.join(workdir, "unit", "tricolord.service")
    os.makedirs(os.path.dirname(local))
    daemon_path = os.path.join(dirs["bin"], "tricolord")
    open(local, "w").write(unit.replace(f"ExecStart={daemon_path} ", f"ExecStart={root + daemon_path} "))
    verified = run(["systemd-analyze", "verify", "--man=no", local], cwd=workdir)
    expect("systemd-analyze verify accepts the installed unit (ExecStart in the scratch root)",
           verified.returncode == 0 and "tricolord.service" not in verified.stdout + verified.stderr,
           (verified.stdout, verified.stderr))


def main():
    with tempfile.TemporaryDirectory(prefix="tricolor-package-") as workdir:
        destdir, dirs = meson_install(workdir)
        root = the_package(workdir)
        if root is not None:
            run_installed(root, DEBIAN_DIRS, workdir)
        else:
            run_installed(destdir, dirs, workdir)
    finish()


if __name__ == "__main__":
    main()
