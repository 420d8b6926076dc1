#!/bin/bash
# Build everything the QEMU guest tests need; idempotent and quick when already built.
#   1. Debian packages (apt-get, only those missing; exit 3 if missing and not root)
#   2. newest linux-image-6.12.*-cloud-amd64-unsigned (apt-get download) -> uncompressed vmlinux
#   3. static C programs (hotcold, movetest, replay, tick)
#   4. initramfs (busybox + C programs + the venv's python, stdlib, runtime site-packages,
#      src/tierlab); rebuilt when the stamp (hash of src/tierlab, the guest files of tests/guest,
#      python, kernel) changes.
# All artifacts go to $TIERLAB_GUEST_CACHE (default: <repo>/.cache/guest).
# Env: GUEST_PY=<python whose interpreter/site-packages go into the guest> (default .venv/bin/python)
#      GUEST_KPKG=<exact kernel package name> (pin)   GUEST_KERNEL_REFRESH=1 (look for a newer kernel)
#      GUEST_SITE_EXTRA="scipy ..." (extra top-level site-packages for the guest)
# Exit: 0 ok, 3 environment cannot run the guest (reason on the last line), other: build error.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
C=${TIERLAB_GUEST_CACHE:-$REPO/.cache/guest}
PY=${GUEST_PY:-$REPO/.venv/bin/python}
export DEBIAN_FRONTEND=noninteractive
log() { echo "[guest-setup] $*"; }
unavailable() { echo "GUEST-UNAVAILABLE: $*"; exit 3; }
T0=$(date +%s.%N)
mkdir -p "$C"/{debs,kernel,bin,logs}

[ "$(uname -m)" = x86_64 ] || unavailable "host is $(uname -m); the guest runs the host's x86_64 python"
[ -x "$PY" ] || unavailable "no python at $PY (run 'make test' or create .venv first)"

# ---- 1. Debian packages ------------------------------------------------------------------
PKGS="qemu-system-x86 busybox-static cpio zstd gcc libc6-dev numactl"
missing=
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    unavailable "missing Debian packages:$missing (not root; run: apt-get install$missing)"
  fi
  log "apt-get install$missing"
  apt-get update -qq || unavailable "apt-get update failed (no network to the Debian mirror?)"
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >"$C/logs/apt-install.log" 2>&1 \
    || { tail -5 "$C/logs/apt-install.log"; unavailable "apt-get install$missing failed"; }
fi
command -v qemu-system-x86_64 >/dev/null || unavailable "qemu-system-x86_64 not found"
[ -f /usr/share/qemu/qboot.rom ] || log "note: no qboot.rom, the guest will boot with SeaBIOS (slower)"

# ---- 2. kernel ---------------------------------------------------------------------------
KDIR=$C/kernel
if [ -z "${GUEST_KPKG:-}" ] && [ -s "$KDIR/vmlinux" ] && [ -s "$KDIR/KVER" ] && [ "${GUEST_KERNEL_REFRESH:-0}" != 1 ]; then
  log "kernel: $(cat "$KDIR/KVER") (cached)"
else
  find_kpkg() { apt-cache search --names-only '^linux-image-6\.12\..*-cloud-amd64-unsigned$' 2>/dev/null \
                  | awk '{print $1}' | sort -V | tail -1; }
  KPKG=${GUEST_KPKG:-$(find_kpkg)}
  if [ -z "$KPKG" ]; then
    if [ "$(id -u)" = 0 ]; then log "apt-get update (no 6.12 cloud kernel in the package lists)"; apt-get update -qq || true; fi
    KPKG=$(find_kpkg)
  fi
  [ -n "$KPKG" ] || unavailable "no linux-image-6.12.*-cloud-amd64-unsigned in apt (Debian 12 bookworm with updates needed)"
  K=${KPKG#linux-image-}; K=${K%-unsigned}
  if [ -s "$KDIR/vmlinux" ] && [ "$(cat "$KDIR/KVER" 2>/dev/null)" = "$K" ]; then
    log "kernel: $K (cached, newest)"
  else
    deb=$(ls "$C/debs/${KPKG}"_*.deb 2>/dev/null | tail -1 || true)
    if [ -z "$deb" ]; then
      log "apt-get download $KPKG"
      # apt's _apt sandbox user cannot write to root-owned dirs: download into a world-writable tmp dir
      tmpd=$(mktemp -d); chmod 777 "$tmpd"
      ( cd "$tmpd" && apt-get download -q "$KPKG" 2>&1 | grep -v -i unsandboxed ) || true
      mv "$tmpd"/*.deb "$C/debs/" 2>/dev/null || true; rm -rf "$tmpd"
      deb=$(ls "$C/debs/${KPKG}"_*.deb 2>/dev/null | tail -1 || true)
      [ -n "$deb" ] || unavailable "apt-get download $KPKG failed (no network to the Debian mirror?)"
    fi
    log "extracting $(basename "$deb")"
    rm -rf "$KDIR/pkg" "$KDIR/vmlinux" "$KDIR/KVER"; mkdir -p "$KDIR/pkg"
    dpkg-deb -x "$deb" "$KDIR/pkg"
    cp "$KDIR/pkg/boot/config-$K" "$KDIR/config"
    # uncompressed ELF vmlinux (PVH entry): qemu -kernel boots it directly, skipping the
    # decompressor (slow under TCG). vmlinuz carries it as a zstd frame.
    "$PY" - "$KDIR/pkg/boot/vmlinuz-$K" "$KDIR/vmlinux" <<'PYEOF'
import subprocess, sys
d = open(sys.argv[1], "rb").read()
i = d.find(b"\x28\xb5\x2f\xfd")
if i < 0:
    sys.exit("no zstd frame in " + sys.argv[1])
out = subprocess.run(["zstd", "-dcq"], input=d[i:], capture_output=True).stdout
if out[:4] != b"\x7fELF":
    sys.exit("decompressed kernel is not an ELF vmlinux")
open(sys.argv[2], "wb").write(out)
print("[guest-setup] vmlinux %.1f MiB" % (len(out) / 2**20))
PYEOF
    rm -rf "$KDIR/pkg/lib/modules"   # no modules needed (initramfs has none); keeps the cache small
    echo "$K" > "$KDIR/KVER"
  fi
fi
K=$(cat "$KDIR/KVER")

# ---- 3. static C programs ----------------------------------------------------------------
for prog in hotcold movetest replay tick; do
  src=$HERE/$prog.c; out=$C/bin/$prog
  if [ ! -x "$out" ] || [ "$src" -nt "$out" ] || [ "$HERE/pagenode.h" -nt "$out" ] ||
     [ "$HERE/guest.h" -nt "$out" ]; then
    log "gcc -static $prog"
    gcc -O2 -Wall -Wextra -static -o "$out.tmp" "$src" && mv "$out.tmp" "$out"
  fi
done

# ---- 4. initramfs ------------------------------------------------------------------------
PYREAL=$("$PY" -c 'import os,sys; print(os.path.realpath(sys._base_executable))')
stamp=$( {
  echo "K=$K PY=$PYREAL SITE_EXTRA=${GUEST_SITE_EXTRA:-}"
  sha256sum "$C/bin/hotcold" "$C/bin/movetest" "$C/bin/replay" "$C/bin/tick" /bin/busybox "$PYREAL" | cut -d' ' -f1
  # the interpreter and what is installed next to tierlab (names carry versions: *.dist-info)
  "$PY" -c 'import os, sys, sysconfig; print(sys.version, sorted(os.listdir(sysconfig.get_paths()["purelib"])))' 2>/dev/null || true
  # everything that goes into the guest: the tierlab sources and the guest-side files here
  ( cd "$REPO" && find src/tierlab tests/guest tests/data/traces -type f \
      ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name 'test_*.py' ! -name conftest.py \
      ! -name harness.py ! -name '*.md' -print0 | sort -z | xargs -0 sha256sum )
} | sha256sum | cut -d' ' -f1)
if [ -s "$C/initramfs.cpio" ] && [ "$(cat "$C/initramfs.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "initramfs: up to date ($(du -m "$C/initramfs.cpio" | cut -f1) MiB)"
else
  log "building initramfs (sources or python changed)"
  GUEST_PY=$PY TIERLAB_GUEST_CACHE=$C bash "$HERE/mkinitramfs.sh"
  echo "$stamp" > "$C/initramfs.stamp"
fi
log "ready in $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s: kernel $K, $C"
