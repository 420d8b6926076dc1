#!/usr/bin/env bash
# Record HPCC RandomAccess (GUPS) from Debian's hpcc, one MPI rank (OpenMPI singleton,
# no mpirun) under `tierlab trace record`, stopped once the RandomAccess tests are done.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    cat <<'EOF'
usage: hpcc-randomaccess.sh [--log2-table K] [--until SECTION] [--size small|eval]
                            [--out FILE.npz] [--window N]

hpcc runs its tests in a fixed order and has no switch to run one alone; RandomAccess
comes first: MPIRandomAccess (the global GUPS algorithm, here on one rank),
StarRandomAccess and SingleRandomAccess (the single-core GUPS kernel; one rank makes
them the same), then the three _LCG variants, then PTRANS, DGEMM, STREAM, FFT and HPL.
This script sizes the table with hpccinf.txt (an HPL order N with 8 N^2 >= 8 x 2^K
bytes makes a table of 2^K 8-byte words, 4 x 2^K updates per test, each test also
verifies its table), makes hpcc's output file hpccoutf.txt a named pipe, reads it,
and when hpcc has written "End of SECTION section." stops it with SIGTERM while it
waits to open the pipe again: the trace ends with that section (the last partial
window is kept: Valgrind finishes the trace when a signal ends hpcc; if hpcc already
had the pipe open again it dies of SIGPIPE writing its next line). HPL never runs, so
N costs nothing but the table size.

  --log2-table K  table of 2^K words (default: eval 26 = 512 MiB, small 18 = 2 MiB)
  --until SECTION last test traced: MPIRandomAccess, StarRandomAccess (default),
                  SingleRandomAccess, MPIRandomAccess_LCG, StarRandomAccess_LCG,
                  SingleRandomAccess_LCG
  --size          eval: K = 26, windows of 100 M accesses (a GUPS window touches
                  every page, so smaller windows make a large file); small: K = 18,
                  windows of 1 M accesses
Environment: TIERLAB. Needs the Debian packages hpcc (with OpenMPI) and valgrind.
EOF
}

K=""
UNTIL=StarRandomAccess
parse_common "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"
while [ $# -gt 0 ]; do
    case "$1" in
        --log2-table) K="${2:-}"; shift 2 || die "--log2-table needs a value" ;;
        --log2-table=*) K="${1#*=}"; shift ;;
        --until) UNTIL="${2:-}"; shift 2 || die "--until needs a value" ;;
        --until=*) UNTIL="${1#*=}"; shift ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
SECTIONS="MPIRandomAccess StarRandomAccess SingleRandomAccess MPIRandomAccess_LCG StarRandomAccess_LCG SingleRandomAccess_LCG"
[[ " $SECTIONS " == *" $UNTIL "* ]] || die "bad --until '$UNTIL'; valid: ${SECTIONS// /, }"
if [ "$SIZE" = eval ]; then
    K="${K:-26}" WINDOW="${WINDOW:-100000000}"
else
    K="${K:-18}" WINDOW="${WINDOW:-1000000}"
fi
[[ "$K" =~ ^[0-9]+$ ]] && [ "$K" -ge 10 ] && [ "$K" -le 34 ] ||
    die "bad --log2-table '$K': a whole number from 10 to 34"
OUT="${OUT:-$(default_out hpcc-randomaccess)}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac

need hpcc hpcc
need_tierlab

make_work
N="$(python3 -c "import math, sys; print(math.isqrt(2 ** int(sys.argv[1]) - 1) + 1)" "$K")"
# hpccinf.txt: HPL's input format; only N (line 6) matters before HPL runs.
cat > "$WORK/hpccinf.txt" <<EOF
HPLinpack benchmark input file
written by tierlab scripts/traces/hpcc-randomaccess.sh
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
$N        Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
1            Ps
1            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200                            values of N
0                               number of additional blocking sizes for PTRANS
40                              values of NB
EOF
FIFO="$WORK/hpccoutf.txt"
mkfifo "$FIFO"
note "hpcc under pagegrind: table 2^$K words (N = $N), tracing up to the end of $UNTIL"
cd "$WORK"
# hwloc's x86 backend cannot work under Valgrind: keep it quiet.
export HWLOC_COMPONENTS=-x86 OMPI_MCA_btl=self
start_record "$OUT" "$WINDOW" hpcc

# If hpcc dies while the loop below waits to open the pipe, open it once to wake it.
( while kill -0 "$REC_PID" 2>/dev/null; do sleep 1; done
  timeout 5 sh -c ': > "$1"' sh "$FIFO" ) 2>/dev/null &
WATCH_PID=$!
done_marker="End of $UNTIL section."
found=0
while [ "$found" = 0 ] && kill -0 "$REC_PID" 2>/dev/null; do
    while IFS= read -r line; do
        case "$line" in
            "Begin of "*|*"GUP/s"*|*"table size"*|"Found "*) note "  hpcc: $line" ;;
        esac
        if [ "$line" = "$done_marker" ]; then
            found=1
            break
        fi
    done < "$FIFO"
done
[ "$found" = 1 ] || die "hpcc exited before the end of $UNTIL (see its messages above)"
# hpcc now waits to open the pipe (SIGTERM), or dies of SIGPIPE on its next line.
pkill -TERM -P "$REC_PID" 2>/dev/null || true
wait_record 143 141 0
wait "$WATCH_PID" 2>/dev/null || true
cd - >/dev/null
finish
