#!/usr/bin/env bash
# Record redis-server (Debian) under YCSB core (Maven Central site.ycsb:core) with
# tierlab's RESP binding (tools/ycsb-redis). Only the server runs under
# `tierlab trace record`; the YCSB client runs natively beside it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    cat <<'EOF'
usage: redis-ycsb.sh [--dist zipfian|latest|uniform] [--mix a|b|c|d|f]
                     [--size small|eval] [--out FILE.npz] [--window N]

Starts redis-server (no persistence) under `tierlab trace record`, loads RECORDS
records with YCSB (10 fields x 100 bytes each), runs OPS operations with the request
distribution --dist, shuts the server down and writes its trace.

  --dist   zipfian (default), latest or uniform (YCSB requestdistribution)
  --mix    YCSB core mix: a = 50% read 50% update (default), b = 95/5 read/update,
           c = read only, d = 95% read 5% insert (default for --dist latest),
           f = 50% read 50% read-modify-write
  --size   eval: 100,000 records, 200,000 operations, windows of 10 M accesses
           (the shared redis-ycsb-zipf trace's size); small: 5,000 records, 10,000
           operations, windows of 1 M accesses (tests/data/traces/)
Environment: YCSB_RECORDS and YCSB_OPS (override the size's counts), YCSB_THREADS
(client threads, default 4), TIERLAB, JAVA, MVN.
Needs the Debian packages redis-server, default-jdk-headless (java, javac), maven and
valgrind; the first run builds tools/ycsb-redis, downloading YCSB core from Maven
Central.
EOF
}

DIST=zipfian
MIX=""
parse_common "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"
while [ $# -gt 0 ]; do
    case "$1" in
        --dist) DIST="${2:-}"; shift 2 || die "--dist needs a value" ;;
        --dist=*) DIST="${1#*=}"; shift ;;
        --mix) MIX="${2:-}"; shift 2 || die "--mix needs a value" ;;
        --mix=*) MIX="${1#*=}"; shift ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
case "$DIST" in
    zipfian|latest|uniform) ;;
    *) die "bad --dist '$DIST'; valid: zipfian, latest, uniform" ;;
esac
[ -n "$MIX" ] || { [ "$DIST" = latest ] && MIX=d || MIX=a; }
case "$MIX" in
    a) PROPS=(-p readproportion=0.5 -p updateproportion=0.5) ;;
    b) PROPS=(-p readproportion=0.95 -p updateproportion=0.05) ;;
    c) PROPS=(-p readproportion=1.0 -p updateproportion=0) ;;
    d) PROPS=(-p readproportion=0.95 -p updateproportion=0 -p insertproportion=0.05) ;;
    f) PROPS=(-p readproportion=0.5 -p updateproportion=0 -p readmodifywriteproportion=0.5) ;;
    *) die "bad --mix '$MIX'; valid: a, b, c, d, f" ;;
esac
if [ "$SIZE" = eval ]; then
    RECORDS=100000 OPS=200000 WINDOW="${WINDOW:-10000000}"
else
    RECORDS=5000 OPS=10000 WINDOW="${WINDOW:-1000000}"
fi
RECORDS="${YCSB_RECORDS:-$RECORDS}" OPS="${YCSB_OPS:-$OPS}"
[[ "$RECORDS" =~ ^[1-9][0-9]*$ && "$OPS" =~ ^[1-9][0-9]*$ ]] ||
    die "bad YCSB_RECORDS '$RECORDS' or YCSB_OPS '$OPS': whole numbers >= 1"
OUT="${OUT:-$(default_out "redis-ycsb-$DIST")}"
THREADS="${YCSB_THREADS:-4}"

need redis-server redis-server
JAVA="${JAVA:-$(command -v java || true)}"
[ -n "$JAVA" ] || die "java not found: install the Debian package default-jre-headless (apt-get install -y default-jre-headless)"
need_tierlab

YCSB_DIR="$REPO/tools/ycsb-redis"
JAR="$YCSB_DIR/target/ycsb-redis.jar"
if [ ! -f "$JAR" ] || [ -n "$(find "$YCSB_DIR/src" "$YCSB_DIR/pom.xml" -newer "$JAR" 2>/dev/null)" ]; then
    MVN="${MVN:-$(command -v mvn || true)}"
    [ -n "$MVN" ] || die "mvn not found: install the Debian package maven (apt-get install -y maven) to build tools/ycsb-redis"
    need javac default-jdk-headless
    note "building the YCSB Redis binding (tools/ycsb-redis; YCSB core from Maven Central)"
    "$MVN" -q -B -f "$YCSB_DIR/pom.xml" package >&2 || die "building tools/ycsb-redis failed (mvn package)"
fi
CP="$JAR:$YCSB_DIR/target/dependency/*"

make_work
PORT="$(free_port)"
note "redis-server on port $PORT under pagegrind; YCSB $MIX/$DIST: $RECORDS records, $OPS operations"
start_record "$OUT" "$WINDOW" redis-server --port "$PORT" --bind 127.0.0.1 \
    --save "" --appendonly no --daemonize no --protected-mode no --loglevel warning \
    --dir "$WORK" --logfile "$WORK/redis.log"
wait_port "$PORT" "$REC_PID" 120

ycsb() {
    local phase=$1
    shift
    "$JAVA" -cp "$CP" site.ycsb.Client "$phase" -db tierlab.ycsb.RedisClient \
        -p workload=site.ycsb.workloads.CoreWorkload -p redis.port="$PORT" \
        -p recordcount="$RECORDS" -p fieldcount=10 -p fieldlength=100 \
        -threads "$THREADS" "$@" > "$WORK/ycsb$phase.log" 2>&1 ||
        { tail -20 "$WORK/ycsb$phase.log" >&2; die "YCSB $phase failed"; }
    grep -E "^\[OVERALL\]|Return=(ERROR|NOT_FOUND)" "$WORK/ycsb$phase.log" | sed "s/^/  ycsb $phase: /" >&2
}
ycsb -load
ycsb -t -p operationcount="$OPS" -p requestdistribution="$DIST" "${PROPS[@]}"

send_tcp "$PORT" '*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n' || true
stop_server 120
wait_record 0 143
finish
