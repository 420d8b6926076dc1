#!/bin/bash
# Build the guest initramfs (called by setup.sh; needs the kernel and C programs already built).
# Contents: static busybox, /init, /guest/{scenarios,placement.py,damon_view.py}, /bin/{hotcold,movetest,replay,tick},
# numactl, the venv's python interpreter + trimmed stdlib at their host paths, the site-packages
# that tierlab imports at runtime under /opt/tierlab/site, src/tierlab under /opt/tierlab/src.
# Env: GUEST_PY (python), TIERLAB_GUEST_CACHE (output dir), GUEST_SITE_EXTRA (more packages),
#      GUEST_NO_PYTHON=1 (busybox + C programs only: a tiny image for kernel-only scenarios)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
C=${TIERLAB_GUEST_CACHE:-$REPO/.cache/guest}
PY=${GUEST_PY:-$REPO/.venv/bin/python}
OUT=${GUEST_INITRAMFS:-$C/initramfs.cpio}
R=$C/root
T0=$(date +%s.%N)
rm -rf "$R"; mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,guest,boot,lib64,opt/tierlab/src,opt/tierlab/site}

# copy a file to the same absolute path inside the image, dereferencing symlinks
put() { mkdir -p "$R$(dirname "$1")"; [ -e "$R$1" ] || cp -L "$1" "$R$1"; }
# shared libraries of an ELF file (ldd), skipping those under $1 (shipped with their package)
put_libs() {
  local skip=$1; shift
  for f in "$@"; do
    { ldd "$f" 2>/dev/null || true; } | { grep -oE '/[^ ]+\.so[^ ]*' || true; } | while read -r l; do
      case "$l" in "$skip"/*) continue;; esac
      put "$l"
    done
  done
}

# --- busybox, init, guest scripts, C programs
cp /bin/busybox "$R/bin/busybox"
for a in $("$R/bin/busybox" --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
cp "$HERE/init" "$R/init"; chmod 755 "$R/init"
cp -r "$HERE/scenarios" "$R/guest/scenarios"
cp "$HERE/placement.py" "$HERE/fake_exec.py" "$HERE/damon_view.py" "$R/guest/"
cp "$C/bin/hotcold" "$C/bin/movetest" "$C/bin/replay" "$C/bin/tick" "$R/bin/"
# the repository's recorded traces, laid out for replay (replay_export.py: the simulator's
# own layout of trace:PATH, one copy)
mkdir -p "$R/guest/traces"
for t in "$HERE"/../data/traces/*.npz; do
  PYTHONPATH="$REPO/src" "$PY" "$HERE/replay_export.py" "$t" \
    "$R/guest/traces/$(basename "$t" .npz).rpl" > /dev/null
done
cp "$C/kernel/config" "$R/boot/config-$(cat "$C/kernel/KVER")"
for b in numactl migratepages; do
  p=$(command -v $b || true); [ -n "$p" ] || continue
  cp -L "$p" "$R/bin/"; put_libs /nonexistent "$p"
done
echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"
echo "root:x:0:" > "$R/etc/group"

if [ "${GUEST_NO_PYTHON:-0}" != 1 ]; then
  # --- python: where the interpreter, stdlib and site-packages are, and what tierlab imports
  pyinfo=$("$PY" - "$REPO/src" <<'PYEOF'
import importlib, os, pkgutil, shlex, sys, sysconfig
src = sys.argv[1]
sys.path.insert(0, src)
site = os.path.realpath(sysconfig.get_paths()["purelib"])
import tierlab, tierlab.cli  # noqa: E401
# every tierlab module the guest may run, except the optional front-ends (matplotlib, gymnasium)
skip = ("tierlab.gym", "tierlab.reports.plots", "tierlab.reports.reproduce", "tierlab.__main__")
for m in pkgutil.walk_packages(tierlab.__path__, "tierlab."):
    if not m.name.startswith(skip):
        try:
            importlib.import_module(m.name)
        except Exception as e:  # noqa: BLE001 - a broken optional module must not stop the build
            print(f"echo '[guest-setup] note: import {m.name} failed on the host: {type(e).__name__}' >&2")
tops = set()
for name, mod in list(sys.modules.items()):
    f = getattr(mod, "__file__", None)
    if f and os.path.realpath(f).startswith(site + os.sep):
        tops.add(os.path.relpath(os.path.realpath(f), site).split(os.sep)[0])
tops -= {"__editable__", "_distutils_hack"}  # the latter comes from a .pth, not from tierlab
print("PYREAL=" + shlex.quote(os.path.realpath(sys._base_executable)))
print("STDLIB=" + shlex.quote(os.path.realpath(sysconfig.get_paths()["stdlib"])))
print("SITE=" + shlex.quote(site))
print("SITEPKGS=" + shlex.quote(" ".join(sorted(tops))))
PYEOF
  ) || { echo "[guest-setup] $PY could not import tierlab" >&2; exit 1; }
  eval "$pyinfo"
  SITEPKGS="$SITEPKGS ${GUEST_SITE_EXTRA:-}"
  echo "[guest-setup] python $PYREAL, stdlib $STDLIB, site-packages: $SITEPKGS"
  put "$PYREAL"; put_libs /nonexistent "$PYREAL"
  ln -sf "$PYREAL" "$R/bin/python3"; ln -sf python3 "$R/bin/python"
  # stdlib without tests, GUI, installers, build config, docs; only the default-level .pyc
  mkdir -p "$R$STDLIB"
  ( cd "$STDLIB" && tar -cf - --exclude=./test --exclude=./idlelib --exclude=./tkinter \
      --exclude=./turtledemo --exclude=./ensurepip --exclude=./lib2to3 --exclude='./config-*' \
      --exclude=./pydoc_data --exclude=./site-packages --exclude=./dist-packages \
      --exclude='*/tests' --exclude='*.opt-1.pyc' --exclude='*.opt-2.pyc' --exclude='*.exe' \
      --exclude='./lib-dynload/_test*' --exclude='./lib-dynload/xx*' \
      --exclude='./lib-dynload/_tkinter*' --exclude='./lib-dynload/_ctypes_test*' . ) | tar -xf - -C "$R$STDLIB"
  put_libs /nonexistent "$R$STDLIB"/lib-dynload/*.so
  # runtime site-packages (no tests, stubs, headers)
  for t in $SITEPKGS; do
    [ -e "$SITE/$t" ] || { echo "[guest-setup] note: $t not in $SITE" >&2; continue; }
    ( cd "$SITE" && tar -cf - --exclude='tests' --exclude='__pycache__' --exclude='*.pyi' \
        --exclude='*.pxd' --exclude='*.h' --exclude='*.c' --exclude='*.f' --exclude='*.f90' "$t" ) \
      | tar -xf - -C "$R/opt/tierlab/site"
  done
  # libraries those packages ship (numpy.libs/...) keep their relative place; others at host path
  sos=$(find "$R/opt/tierlab/site" -name '*.so*' -type f)
  for so in $sos; do
    hs=$SITE/${so#"$R"/opt/tierlab/site/}
    { ldd "$hs" 2>/dev/null || true; } | { grep -oE '/[^ ]+\.so[^ ]*' || true; } | while read -r l; do
      case "$l" in
        "$SITE"/*) rel=${l#"$SITE"/}; mkdir -p "$R/opt/tierlab/site/$(dirname "$rel")"
                   [ -e "$R/opt/tierlab/site/$rel" ] || cp -L "$l" "$R/opt/tierlab/site/$rel";;
        *) put "$l";;
      esac
    done
  done
  # the repo's current tierlab sources
  ( cd "$REPO/src" && tar -cf - --exclude='__pycache__' --exclude='*.pyc' tierlab ) | tar -xf - -C "$R/opt/tierlab/src"
  # debug info is most of libpython and lib-dynload; the wheels' own libraries stay untouched
  # (auditwheel/patchelf-repaired files do not always survive strip)
  if command -v strip >/dev/null; then
    find "$R" -path "$R/opt" -prune -o -type f \( -name '*.so' -o -name '*.so.*' -o -path "$R$PYREAL" \) \
      -print0 | xargs -0 -r strip --strip-debug 2>/dev/null || true
  fi
  # byte-compile what we ship (unchecked-hash: valid regardless of file times), so the guest
  # does not compile numpy under TCG at every boot
  "$PY" -m compileall -q -j0 --invalidation-mode unchecked-hash "$R/opt/tierlab/site" "$R/opt/tierlab/src" >/dev/null
fi

rm -f "$OUT.tmp"
(cd "$R" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet -R 0:0) > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "[guest-setup] initramfs $(du -m "$OUT" | cut -f1) MiB ($(find "$R" -type f | wc -l) files) in $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
