#!/usr/bin/env bash
# Record every real workload of scripts/traces/ (`make traces` runs this at eval size).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
    cat <<'EOF'
usage: record-all.sh [--size small|eval] [--out DIR] [--only NAME,...]

Records, one after the other, into DIR (default: traces-out/ in the repository):
  redis-ycsb-zipfian, redis-ycsb-latest, redis-ycsb-uniform   (redis-ycsb.sh)
  memcached-memaslap                                           (memcached-memaslap.sh)
  rocksdb-dbbench                                              (rocksdb-dbbench.sh)
  hpcc-randomaccess                                            (hpcc-randomaccess.sh)
and prints each one's wall time and file size. A failing recording (say, a missing
Debian package) is reported and the others still run; the exit status is 1 if any
failed. --size small makes the miniatures kept in tests/data/traces/.
EOF
}

SIZE="eval"
OUT="$(cd "$HERE/../.." && pwd)/traces-out"
ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
        --size) SIZE="${2:-}"; shift 2 || exit 2 ;;
        --size=*) SIZE="${1#*=}"; shift ;;
        --out) OUT="${2:-}"; shift 2 || exit 2 ;;
        --out=*) OUT="${1#*=}"; shift ;;
        --only) ONLY="${2:-}"; shift 2 || exit 2 ;;
        --only=*) ONLY="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "record-all: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$SIZE" in
    small|eval) ;;
    *) echo "record-all: error: bad --size '$SIZE'; valid: small, eval" >&2; exit 2 ;;
esac

# name | script and its arguments
JOBS=(
    "redis-ycsb-zipfian|redis-ycsb.sh --dist zipfian"
    "redis-ycsb-latest|redis-ycsb.sh --dist latest"
    "redis-ycsb-uniform|redis-ycsb.sh --dist uniform"
    "memcached-memaslap|memcached-memaslap.sh"
    "rocksdb-dbbench|rocksdb-dbbench.sh"
    "hpcc-randomaccess|hpcc-randomaccess.sh"
)
NAMES=()
for j in "${JOBS[@]}"; do NAMES+=("${j%%|*}"); done
if [ -n "$ONLY" ]; then
    IFS=, read -r -a WANT <<< "$ONLY"
    for w in "${WANT[@]}"; do
        [[ " ${NAMES[*]} " == *" $w "* ]] ||
            { echo "record-all: error: unknown recording '$w'; valid: ${NAMES[*]}" >&2; exit 2; }
    done
fi

mkdir -p "$OUT"
if [ "$OUT" -ef "$HERE/../../traces-out" ] && [ ! -e "$OUT/.gitignore" ]; then
    printf '*\n' > "$OUT/.gitignore"
fi
SUMMARY=()
FAILED=()
for j in "${JOBS[@]}"; do
    name="${j%%|*}"
    read -r -a cmd <<< "${j#*|}"
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        continue
    fi
    echo "== $name ($SIZE)" >&2
    start=$SECONDS
    if "$HERE/${cmd[0]}" "${cmd[@]:1}" --size "$SIZE" --out "$OUT/$name.npz"; then
        secs=$((SECONDS - start))
        bytes=$(stat -c %s "$OUT/$name.npz")
        SUMMARY+=("$(printf '%-22s ok     %6d s  %10d bytes' "$name" "$secs" "$bytes")")
    else
        secs=$((SECONDS - start))
        SUMMARY+=("$(printf '%-22s FAILED %6d s' "$name" "$secs")")
        FAILED+=("$name")
    fi
done
echo "== recordings in $OUT ($SIZE):"
printf '%s\n' "${SUMMARY[@]}"
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "record-all: failed: ${FAILED[*]}" >&2
    exit 1
fi
