"""`tierlab trace record`: trace a real program's page accesses with pagegrind.

pagegrind (tools/pagegrind/ in the repository) is a Valgrind tool that counts data
reads and writes per 4 KiB page in windows of N data accesses and writes the pagegrind
``.pg`` format (docs/trace-format.md). `build_recorder` builds it with ``make`` against
the installed Valgrind (Debian package ``valgrind``); `record` runs a command under it
and converts the result to a tierlab ``.npz`` trace (`tierlab.workloads.trace`).
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import TierlabError, write_error

DEFAULT_WINDOW = 10_000_000
TOOL = "pagegrind"
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_NEED_VALGRIND = "install the Debian package `valgrind` (apt-get install valgrind)"


def tool_dir() -> Path:
    """The pagegrind source directory (tools/pagegrind/ of the repository checkout)."""
    return Path(__file__).resolve().parents[3] / "tools" / TOOL


def _platform() -> str:
    arch = _ARCH.get(platform.machine().lower())
    if arch is None or not sys.platform.startswith("linux"):
        raise TierlabError(f"pagegrind runs on x86_64 or aarch64 Linux only (this is "
                           f"{sys.platform} {platform.machine()})")
    return f"{arch}-linux"


def _valgrind() -> str:
    """The Valgrind launcher; Debian's ``valgrind`` is a shell wrapper around
    ``valgrind.bin`` that changes the client's environment, so that is preferred."""
    v = shutil.which("valgrind")
    if v is None:
        raise TierlabError(f"valgrind not found on PATH: {_NEED_VALGRIND}")
    real = Path(v).resolve()
    binary = real.with_name(real.name + ".bin")
    return str(binary) if binary.is_file() and os.access(binary, os.X_OK) else v


def _make_error(proc: subprocess.CompletedProcess) -> str:
    lines = [x.strip() for x in (proc.stderr + "\n" + proc.stdout).splitlines() if x.strip()]
    own = [x for x in lines if x.startswith(f"{TOOL}:")]
    if own:
        return own[0]
    rest = [x for x in lines if not x.startswith("make: ***")]
    errs = [x for x in rest if any(k in x.lower() for k in ("error", "not found",
                                                             "no such file"))]
    detail = (errs or rest or lines or [f"exit status {proc.returncode}"])[0]
    return f"building pagegrind failed (make -C {tool_dir()}): {detail}"


def build_recorder(force: bool = False) -> Path:
    """Build pagegrind with ``make`` (a no-op when up to date; `force` rebuilds) and
    return the tool binary's path; its directory is the VALGRIND_LIB to run it with."""
    src = tool_dir()
    if not (src / "Makefile").is_file() or not (src / "pagegrind.c").is_file():
        raise TierlabError(f"pagegrind sources not found at {src}: `trace record` needs a "
                           f"tierlab source checkout (pip install -e .), not an installed "
                           f"package")
    exe = src / "build" / "lib" / f"{TOOL}-{_platform()}"
    _valgrind()
    make = shutil.which("make")
    if make is None:
        if exe.is_file() and not force:
            return exe
        raise TierlabError("make not found: building pagegrind needs make and gcc "
                           "(apt-get install make gcc)")
    args = [make, "-s", "-C", str(src)] + (["-B"] if force else [])
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise TierlabError(_make_error(proc))
    if not exe.is_file():
        raise TierlabError(f"building pagegrind did not produce {exe}")
    return exe


def _check_command(cmd: list[str]) -> None:
    if not cmd:
        raise TierlabError("trace record needs a command: tierlab trace record "
                           "[--window N] [--out FILE] -- CMD ARGS")
    prog = cmd[0]
    if "/" in prog:
        p = Path(prog)
        if not p.is_file() or not os.access(p, os.X_OK):
            raise TierlabError(f"trace record: {prog!r} is not an executable file")
    elif shutil.which(prog) is None:
        raise TierlabError(f"trace record: command {prog!r} not found on PATH")


def _check_window(window) -> int:
    try:
        w = int(window)
    except (TypeError, ValueError):
        w = 0
    if isinstance(window, bool) or w != window or w < 1:
        raise TierlabError(f"bad window {window!r}: must be a whole number of accesses "
                           f">= 1")
    return w


def _run(argv: list[str], env: dict) -> int:
    """Run and wait. On a first Ctrl-C the command (in our process group) got SIGINT
    too: wait for it to write its trace and exit; a second Ctrl-C kills it."""
    proc = subprocess.Popen(argv, env=env)
    try:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            return proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise TierlabError("trace record: interrupted twice; no trace written") from None


def record(cmd: list[str], window: int = DEFAULT_WINDOW, out: Path | str = "trace.npz",
           fmt: str = "npz") -> int:
    """Run `cmd` under pagegrind and write its trace to `out`; return its exit status.

    `fmt` is ``"npz"`` (tierlab trace format) or ``"pg"`` (pagegrind's raw format).
    The command's stdin, stdout and stderr are this process's. The status is the
    command's exit code, or -SIGNAL if a signal killed it (as `subprocess`). The raw
    trace goes to a temporary directory beside `out`, removed afterwards.
    """
    if fmt not in ("npz", "pg"):
        raise TierlabError(f"unknown trace format {fmt!r}; valid: npz, pg")
    window = _check_window(window)
    cmd = [str(c) for c in cmd]
    _check_command(cmd)
    from ..api import writable_file
    out = writable_file(out, "trace record --out")
    exe = build_recorder()
    env = dict(os.environ, VALGRIND_LIB=str(exe.parent))
    with tempfile.TemporaryDirectory(prefix=".tierlab-trace-", dir=out.parent) as tmp:
        pg = Path(tmp) / "trace.pg"
        argv = [_valgrind(), f"--tool={TOOL}", "-q", f"--window={window}",
                "--out=" + str(pg).replace("%", "%%"), *cmd]  # %% is a literal %
        rc = _run(argv, env)
        if not pg.is_file() or pg.stat().st_size == 0:
            raise TierlabError(f"trace record: pagegrind wrote no trace (valgrind exit "
                               f"status {rc}); see its messages above")
        try:
            if fmt == "pg":
                shutil.move(str(pg), out)
            else:
                from ..workloads.trace import from_pagegrind, write_trace
                write_trace(out, from_pagegrind(pg), window=window,
                            source=f"pagegrind: {shlex.join(cmd)}")
        except OSError as e:
            raise write_error(out, e) from None
    return rc


HELP = """\
Run CMD ARGS under pagegrind, a Valgrind tool in tools/pagegrind/ (built with make on
first use; needs the Debian package `valgrind`, gcc and make), counting every data
read and write per 4 KiB page in windows of N data accesses. Writes a tierlab trace
(.npz, docs/trace-format.md; or pagegrind's raw .pg when FILE ends in .pg) to replay
with `--workload trace:FILE`.

CMD's stdin, stdout and stderr pass through; tierlab exits with CMD's exit status
(128 + N if signal N killed it). CMD runs slower than natively: about 4x on
memory-bound code, up to 30x on code that makes an access every few instructions
(Valgrind alone: 2-10x; pagegrind adds about 2 ns per access).

Counted: loads and stores by CMD's instructions, cache hits included (an access that
straddles two pages counts on the first). Not counted: instruction fetches, accesses
made by the kernel (read(2) into a buffer, ...). Threads are serialised by Valgrind
and share one trace. Programs CMD starts with exec run natively, untraced, and a
forked child is not traced: record the program itself, not a shell script around it.

example:  tierlab trace record --window 1000000 --out pr.npz -- ./pr -g 16
"""


def _window_arg(text: str) -> int:
    try:
        v = int(text.replace("_", ""))
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"bad window {text!r}: a whole number of "
                                         f"accesses >= 1")
    return v


def _is_script(prog: str) -> bool:
    path = prog if "/" in prog else shutil.which(prog)
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except (OSError, TypeError):
        return False


def cmd_trace_record(a) -> int:
    """Handler of `tierlab trace record`."""
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    _check_command(cmd)
    if _is_script(cmd[0]):
        print(f"tierlab: note: {cmd[0]} is a script: pagegrind traces its interpreter, "
              f"and programs it execs run untraced", file=sys.stderr)
    out = Path(a.out) if a.out else Path(f"{Path(cmd[0]).name}.npz")
    fmt = "pg" if out.suffix == ".pg" else "npz"
    rc = record(cmd, a.window, out, fmt)
    from ..workloads.trace import read_trace
    s = read_trace(out).summary()
    print(f"tierlab: wrote {out}: {s['windows']} windows of {a.window} accesses, "
          f"{s['accesses']} accesses ({s['reads']} reads, {s['writes']} writes), "
          f"{s['touched']} touched", file=sys.stderr)
    return 128 - rc if rc < 0 else rc


def add_parser(sub) -> argparse.ArgumentParser:
    """Register `trace record` on the CLI's subparsers `sub`; returns the trace parser.
    (`tierlab.tracing.add_parser` registers record, import, info and plot.)"""
    tr = sub.add_parser("trace", help="record a real program's page accesses (Valgrind)",
                        description="Page-level traces of real programs.")
    tsub = tr.add_subparsers(dest="trace_cmd", metavar="ACTION", required=True)
    add_record_parser(tsub)
    return tr


def add_record_parser(tsub) -> argparse.ArgumentParser:
    """Register the `record` action on the trace group's subparsers `tsub`."""
    r = tsub.add_parser("record", help="run a command under pagegrind and write its trace",
                        description="Record a program's per-page reads and writes.",
                        epilog=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--window", type=_window_arg, default=DEFAULT_WINDOW, metavar="N",
                   help=f"data accesses per window (default: {DEFAULT_WINDOW}); each "
                   "window becomes one change of the replayed workload")
    r.add_argument("--out", metavar="FILE", default=None,
                   help="trace file: .npz (tierlab format) or .pg (pagegrind raw) "
                   "(default: ./CMD.npz)")
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                   help="the program to trace and its arguments")
    r.set_defaults(fn=cmd_trace_record)
    return r
