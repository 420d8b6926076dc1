"""A stand-in for `tierlab exec` that does nothing but honour its contract, so the `daemon`
guest scenario can be checked on its own (tl.impl=fake):

    fake_exec.py exec --policy P --alloc A --interval 1s --out DIR -- CMD [ARGS...]

- starts CMD (stdout/stderr passed through), applies --alloc as the child's memory policy
  (dram-* = default, pm-preferred = MPOL_PREFERRED node 1, pm-always = MPOL_BIND node 1);
- every interval prints one JSON object line about the child (what the real command prints
  is free-form; JSON lines are reported as exec-interval results);
- forwards SIGTERM/SIGINT to the child; when the child exits, writes DIR/results.json
  (a list of records) and exits with the child's exit status.
Moves nothing: the policy is ignored.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time


def _seconds(s: str) -> float:
    s = s.strip()
    for suf, k in (("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
        if s.endswith(suf):
            return float(s[: -len(suf)]) * k
    return float(s)


def _mempolicy(alloc: str):
    mode = {"pm-preferred": 1, "pm-always": 2}.get(alloc)
    if mode is None:
        return None

    def apply():
        libc = ctypes.CDLL(None, use_errno=True)
        mask = ctypes.c_ulong(1 << 1)
        if libc.syscall(238, mode, ctypes.byref(mask), 64 + 1) != 0:  # set_mempolicy
            os.write(2, b"fake_exec: set_mempolicy failed\n")
    return apply


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        sys.exit("usage: fake_exec.py exec --policy P --alloc A --interval I --out DIR -- CMD...")
    i = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["exec"])
    ap.add_argument("--policy", required=True)
    ap.add_argument("--alloc", default="dram-preferred")
    ap.add_argument("--interval", default="1s")
    ap.add_argument("--out")
    a = ap.parse_args(argv[:i])
    cmd = argv[i + 1:]
    t0 = time.monotonic()
    child = subprocess.Popen(cmd, preexec_fn=_mempolicy(a.alloc))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: child.send_signal(s))
    period, n = _seconds(a.interval), 0
    while True:
        try:
            rc = child.wait(timeout=period)
            break
        except subprocess.TimeoutExpired:
            n += 1
            rss = 0
            try:
                with open(f"/proc/{child.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            rss = int(line.split()[1]) // 4
            except OSError:
                pass
            print(json.dumps({"t": round(time.monotonic() - t0, 3), "interval": n,
                              "policy": a.policy, "rss_pages": rss, "promoted": 0,
                              "demoted": 0}), flush=True)
    rc = rc if rc >= 0 else 128 - rc
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump([{"policy": a.policy, "alloc": a.alloc, "command": cmd, "exit_code": rc,
                        "intervals": n, "wall_s": round(time.monotonic() - t0, 3),
                        "fake": True}], f)
    return rc


if __name__ == "__main__":
    sys.exit(main())
