#!/usr/bin/env bash
# Record every real workload of scripts/traces/ (`make traces` runs this at eval size).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
    cat <<'EOF'
usage: record-all.sh [--size small|eval] [--out DIR] [--window N] [--only NAME,...]

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

source "$HERE/common.sh"
NAME="record-all"
parse_common "$@"
OUT="${OUT:-$REPO/traces-out}"
ONLY=""
set -- "${ARGS[@]}"
while [ $# -gt 0 ]; do
    case "$1" in
        --only) ONLY="${2:-}"; shift 2 || die "--only needs a value" ;;
        --only=*) ONLY="${1#*=}"; shift ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

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
            die "unknown recording '$w'; valid: ${NAMES[*]}"
    done
fi

mkdir -p "$OUT"
if [ "$OUT" -ef "$REPO/traces-out" ] && [ ! -e "$OUT/.gitignore" ]; then
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
    if "$HERE/${cmd[0]}" "${cmd[@]:1}" --size "$SIZE" --out "$OUT/$name.npz" \
            ${WINDOW:+--window "$WINDOW"}; then
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
