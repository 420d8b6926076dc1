#!/usr/bin/env bash
# Record RocksDB's db_bench (Debian rocksdb-tools): fill a database in random key order,
# then read it with random keys, all in one process under `tierlab trace record`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    cat <<'EOF'
usage: rocksdb-dbbench.sh [--exp-range X] [--size small|eval] [--out FILE.npz]
                          [--window N] [-- DB_BENCH_FLAGS...]

Runs db_bench --benchmarks=fillrandom,readrandom on a fresh database in a temporary
directory: NUM keys of 16 bytes with 100-byte values (no compression, no WAL), then
READS random reads through a block cache large enough for the data. Reads are uniform
unless --exp-range X > 0 skews them (db_bench's read_random_exp_range: key =
NUM x exp(-r), r uniform in [0, X]). Flags after -- go to db_bench unchanged.
db_bench's background flush and compaction threads are traced too (Valgrind runs the
threads one at a time); file reads the kernel does for it (pread into the block
cache) are not.

  --size   eval: 2,000,000 keys, 2,000,000 reads, windows of 100 M accesses (about
           54 G accesses in all: Debian's db_bench is built with assertions);
           small: 20,000 keys, 40,000 reads, windows of 1 M accesses
Environment: TIERLAB. Needs the Debian packages rocksdb-tools and valgrind.
EOF
}

EXP=0
EXTRA=()
parse_common "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"
while [ $# -gt 0 ]; do
    case "$1" in
        --exp-range) EXP="${2:-}"; shift 2 || die "--exp-range needs a value" ;;
        --exp-range=*) EXP="${1#*=}"; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
python3 -c "import sys; sys.exit(not float(sys.argv[1]) >= 0)" "$EXP" 2>/dev/null ||
    die "bad --exp-range '$EXP': a number >= 0"
if [ "$SIZE" = eval ]; then
    NUM=2000000 READS=2000000 CACHE=$((512 << 20)) WINDOW="${WINDOW:-100000000}"
else
    NUM=20000 READS=40000 CACHE=$((16 << 20)) WINDOW="${WINDOW:-1000000}"
fi
OUT="${OUT:-$(default_out rocksdb-dbbench)}"

DB_BENCH="$(command -v db_bench || true)"
[ -n "$DB_BENCH" ] || die "db_bench not found: install the Debian package rocksdb-tools (apt-get install -y rocksdb-tools)"
need_tierlab

make_work
note "db_bench under pagegrind: fillrandom $NUM keys, readrandom $READS reads (exp range $EXP)"
start_record "$OUT" "$WINDOW" "$DB_BENCH" --benchmarks=fillrandom,readrandom \
    --db="$WORK/db" --num="$NUM" --reads="$READS" --key_size=16 --value_size=100 \
    --compression_type=none --disable_wal=1 --cache_size="$CACHE" \
    --read_random_exp_range="$EXP" --threads=1 --seed=1 --histogram=0 --progress_reports=0 \
    "${EXTRA[@]+"${EXTRA[@]}"}"
wait_record 0
finish
