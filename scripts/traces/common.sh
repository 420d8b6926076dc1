# Helpers shared by the recording scripts in scripts/traces/ (sourced, not run).
#
# Every script takes --size small|eval (default eval), --out FILE (.npz) and
# --window N (accesses per trace window), records the program under
# `tierlab trace record` and prints how long the recording took.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TIERLAB="${TIERLAB:-}"
if [ -z "$TIERLAB" ]; then
    if [ -x "$REPO/.venv/bin/tierlab" ]; then
        TIERLAB="$REPO/.venv/bin/tierlab"
    else
        TIERLAB="$(command -v tierlab || true)"
    fi
fi

SIZE="eval"
OUT=""
WINDOW=""
NAME="$(basename "$0" .sh)"

die() {
    echo "$NAME: error: $*" >&2
    exit 2
}

note() {
    echo "$NAME: $*" >&2
}

# need CMD PACKAGE: fail with the Debian package to install when CMD is missing.
need() {
    command -v "$1" >/dev/null 2>&1 ||
        die "$1 not found: install the Debian package $2 (apt-get install -y $2)"
}

need_tierlab() {
    [ -n "$TIERLAB" ] && [ -x "$TIERLAB" ] ||
        die "tierlab not found: run 'make demo' or 'pip install -e .' in $REPO, or set TIERLAB"
    need valgrind valgrind
    need make make
    need gcc gcc
}

# parse_common "$@": handles --size/--out/--window/--help; leaves the rest in ARGS.
ARGS=()
parse_common() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --size) SIZE="${2:-}"; shift 2 || die "--size needs a value" ;;
            --size=*) SIZE="${1#*=}"; shift ;;
            --out) OUT="${2:-}"; shift 2 || die "--out needs a value" ;;
            --out=*) OUT="${1#*=}"; shift ;;
            --window) WINDOW="${2:-}"; shift 2 || die "--window needs a value" ;;
            --window=*) WINDOW="${1#*=}"; shift ;;
            -h|--help) usage; exit 0 ;;
            *) ARGS+=("$1"); shift ;;
        esac
    done
    case "$SIZE" in
        small|eval) ;;
        *) die "bad --size '$SIZE'; valid: small, eval" ;;
    esac
    if [ -n "$WINDOW" ] && ! [[ "$WINDOW" =~ ^[1-9][0-9]*$ ]]; then
        die "bad --window '$WINDOW': a whole number of accesses >= 1"
    fi
}

# default_out NAME: $REPO/traces-out/NAME.npz (start_record creates the directory).
default_out() {
    echo "$REPO/traces-out/$1.npz"
}

# A TCP port nobody listens on.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT PID SECONDS: until PORT accepts connections; fails if PID exits first.
wait_port() {
    local port=$1 pid=$2 secs=$3 i
    for ((i = 0; i < secs * 10; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || die "the recorded server exited before listening on port $port"
        sleep 0.1
    done
    die "the recorded server did not listen on port $port within $secs s"
}

# send_tcp PORT BYTES: write BYTES (backslash escapes as in printf %b) to
# 127.0.0.1:PORT.
send_tcp() {
    local port=$1 data=$2
    exec 5<>"/dev/tcp/127.0.0.1/$port" || return 1
    printf '%b' "$data" >&5
    sleep 0.2
    exec 5<&-
}

# stop_server SECS: give the recorded server SECS to exit after its shutdown command,
# then send it SIGTERM (it still writes its trace).
stop_server() {
    local i
    for ((i = 0; i < $1 * 10; i++)); do
        kill -0 "$REC_PID" 2>/dev/null || return 0
        sleep 0.1
    done
    note "the server did not exit within $1 s of its shutdown command: sending SIGTERM"
    pkill -TERM -P "$REC_PID" 2>/dev/null || true
}

# start_record OUT WINDOW CMD...: `tierlab trace record` in the background (REC_PID).
REC_PID=""
start_record() {
    local out=$1 window=$2
    shift 2
    mkdir -p "$(dirname "$out")"
    # traces-out/ in the repository ignores itself in git
    if [ "$(dirname "$out")" -ef "$REPO/traces-out" ] && [ ! -e "$REPO/traces-out/.gitignore" ]; then
        printf '*\n' > "$REPO/traces-out/.gitignore"
    fi
    "$TIERLAB" trace record --window "$window" --out "$out" -- "$@" &
    REC_PID=$!
}

# wait_record [OK_STATUS...]: wait for the recorder; fail unless its status is listed
# (default 0).
wait_record() {
    local rc=0 ok
    wait "$REC_PID" || rc=$?
    REC_PID=""
    for ok in "${@:-0}"; do
        [ "$rc" = "$ok" ] && return 0
    done
    die "tierlab trace record exited with status $rc"
}

# On exit: stop a recorder still running (its server) and remove the work directory.
WORK=""
cleanup() {
    if [ -n "$REC_PID" ] && kill -0 "$REC_PID" 2>/dev/null; then
        pkill -TERM -P "$REC_PID" 2>/dev/null || true
        wait "$REC_PID" 2>/dev/null || true
    fi
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make_work() {
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/tierlab-$NAME.XXXXXX")"
}

START_S=$SECONDS
finish() {
    local secs=$((SECONDS - START_S))
    note "wrote $OUT in ${secs} s (size $SIZE)"
    "$TIERLAB" trace info "$OUT" >&2 || true
}
