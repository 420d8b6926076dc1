#!/usr/bin/env bash
# Record memcached (Debian) under memaslap, the load generator of Debian's
# libmemcached-tools (installed as memcaslap; older releases call it memaslap). Only
# the server runs under `tierlab trace record`; memaslap runs natively beside it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    cat <<'EOF'
usage: memcached-memaslap.sh [--get FRACTION] [--size small|eval] [--out FILE.npz]
                             [--window N]

Starts memcached (one worker thread, MEM MiB of item memory) under
`tierlab trace record`, runs memaslap with 16-byte keys, 512-byte values and the
given get share (the rest are sets) for OPS operations over 16 connections, shuts
memcached down (ascii `shutdown`, enabled with -A) and writes its trace. memaslap
picks keys uniformly among those it has set (its task windows).

  --get    share of gets (default 0.9)
  --size   eval: 4,000,000 operations, 1024 MiB, windows of 10 M accesses;
           small: 100,000 operations, 64 MiB, windows of 1 M accesses
Environment: MEMASLAP_CONCURRENCY (default 16), TIERLAB.
Needs the Debian packages memcached, libmemcached-tools and valgrind.
EOF
}

GET=0.9
parse_common "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"
while [ $# -gt 0 ]; do
    case "$1" in
        --get) GET="${2:-}"; shift 2 || die "--get needs a value" ;;
        --get=*) GET="${1#*=}"; shift ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
python3 -c "import sys; g = float(sys.argv[1]); sys.exit(not 0 < g < 1)" "$GET" 2>/dev/null ||
    die "bad --get '$GET': a fraction strictly between 0 and 1"
if [ "$SIZE" = eval ]; then
    OPS=4000000 MEM=1024 WINDOW="${WINDOW:-10000000}"
else
    OPS=100000 MEM=64 WINDOW="${WINDOW:-1000000}"
fi
OUT="${OUT:-$(default_out memcached-memaslap)}"
CONC="${MEMASLAP_CONCURRENCY:-16}"

need memcached memcached
SLAP="$(command -v memcaslap || command -v memaslap || true)"
[ -n "$SLAP" ] || die "memcaslap (memaslap) not found: install the Debian package libmemcached-tools (apt-get install -y libmemcached-tools)"
need_tierlab

make_work
cat > "$WORK/memaslap.cfg" <<EOF
key
16 16 1
value
512 512 1
cmd
0 $(python3 -c "import sys; print(round(1 - float(sys.argv[1]), 6))" "$GET")
1 $GET
EOF
# Valgrind lets a program set RLIMIT_NOFILE only to its own limit (the hard limit less
# the descriptors it keeps), and memcached sets it to its connection limit (-c).
ulimit -n 4096 2>/dev/null || true
MAXCONNS="$(valgrind --tool=none -q sh -c 'ulimit -Hn')"
PORT="$(free_port)"
USER_ARGS=()
[ "$(id -u)" = 0 ] && USER_ARGS=(-u root)
note "memcached on port $PORT under pagegrind; memaslap: $OPS operations, get share $GET"
start_record "$OUT" "$WINDOW" memcached -p "$PORT" -U 0 -l 127.0.0.1 -m "$MEM" -t 1 -c "$MAXCONNS" -A \
    "${USER_ARGS[@]+"${USER_ARGS[@]}"}"
wait_port "$PORT" "$REC_PID" 120

"$SLAP" -s "127.0.0.1:$PORT" -T 1 -c "$CONC" -x "$OPS" -F "$WORK/memaslap.cfg" \
    > "$WORK/memaslap.log" 2>&1 || { tail -20 "$WORK/memaslap.log" >&2; die "memaslap failed"; }
grep -E "^(cmd_get|cmd_set|get_misses|Run time)" "$WORK/memaslap.log" | sed "s/^/  memaslap: /" >&2

send_tcp "$PORT" 'shutdown\r\n' || true
stop_server 120
wait_record 0 143
finish
