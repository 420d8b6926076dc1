# daemon: run a tierlab policy for real on hotcold and watch placement. mode=exec (default):
#   python3 -m tierlab exec --policy P --alloc A --interval I --out /tmp/out -- /bin/hotcold ...
# mode=daemon: hotcold started here, then
#   python3 -m tierlab daemon --pid PID --policy P --interval I --out /tmp/out
#   (expected to exit by itself, rc 0, once PID has exited; SIGTERM after grace_s otherwise)
# Args (tl.KEY=VALUE): mode=exec policy=autonuma-tiering alloc=dram-preferred interval=1s hot_mib=64
#   cold_mib=256 (auto: node 0's free memory - headroom_mib, 16) seconds=30 hot_node= cold_node= (initial placement, default: the alloc decides)
#   write_share=0.2 progress_ms=1000 sample_ms=1000 numa_balancing=0 demotion=false
#   windows=1 move_ms=10000 (windows=K: hotcold's hot range is K windows of hot_mib each, the
#   hot one moving every move_ms) grace_s=60 (exec gets seconds+grace_s, then SIGTERM) exec_args= (extra exec args, comma-separated)
#   until_hot_on= (e.g. N0: stop at an event, not a time: once until_fraction (0.9) of the hot
#   range is on that node and `after` (3) more samples are taken, SIGTERM the workload, which
#   stops, verifies its pages and exits; `seconds` is then only a cap)
#   impl=tierlab|fake (fake: /guest/fake_exec.py, a stand-in that only honours the exec contract)
#   ticker_us=T (off by default): start_tickers (_lib.sh) before the workload starts
# Results: exec-command, exec-line (stdout/stderr lines of exec, as text), exec-interval (its
#   lines that are JSON objects), placement (1/sample), hotcold (ready/progress/done),
#   exec-results (OUT/results.json), exec (rc, whether the workload started, rc == child's rc).
. /guest/scenarios/_lib.sh
P=${TL_policy:-autonuma-tiering}; A=${TL_alloc:-dram-preferred}; I=${TL_interval:-1s}
HOT=${TL_hot_mib:-64}; COLD=${TL_cold_mib:-256}; SECS=${TL_seconds:-30}
OUT=/tmp/out
set_kernel_tiering "${TL_numa_balancing:-0}" "${TL_demotion:-false}"
res nodes-before nodes "$(nodes_json)" uptime "$(uptime_s)"
res zoneinfo nodes "$(zoneinfo_json)"
start_tickers
free0=$(node_free_mib 0)
# cold_mib=auto: fill node 0 up to headroom_mib (16) of its free memory
[ "$COLD" = auto ] && COLD=$((free0 - ${TL_headroom_mib:-16}))
res sizes hot_mib "$HOT" cold_mib "$COLD" node0_free_mib "$free0" seconds "$SECS" \
  windows "${TL_windows:-1}" move_ms "${TL_move_ms:-0}"
hc_args="--hot-mib $HOT --cold-mib $COLD --seconds $SECS --interval-ms ${TL_progress_ms:-1000}"
hc_args="$hc_args --write-share ${TL_write_share:-0.2} --ready-file /tmp/hc.ready --done-file /tmp/hc.done"
[ -n "${TL_hot_node:-}" ] && hc_args="$hc_args --hot-node $TL_hot_node"
[ -n "${TL_cold_node:-}" ] && hc_args="$hc_args --cold-node $TL_cold_node"
if [ "${TL_windows:-1}" -gt 1 ]; then
  hc_args=$(echo "$hc_args" | sed "s/--hot-mib $HOT /--hot-mib $((HOT * TL_windows)) /")
  hc_args="$hc_args --hot-windows $TL_windows --move-ms ${TL_move_ms:-10000}"
fi
extra=$(echo "${TL_exec_args:-}" | tr ',' ' ')
MODE=${TL_mode:-exec}
TIERLAB="python3 -m tierlab"; [ "${TL_impl:-tierlab}" = fake ] && TIERLAB="python3 /guest/fake_exec.py"
t0=$(uptime_s)
hc=
if [ "$MODE" = daemon ]; then
  # shellcheck disable=SC2086
  /bin/hotcold $hc_args > /tmp/hc.out 2>&1 &
  hc=$!
  wait_file /tmp/hc.ready 300 $hc || echo "DAEMON-FAIL hotcold did not get ready"
  # shellcheck disable=SC2086
  set -- $TIERLAB daemon --pid $hc --policy "$P" --interval "$I" --out "$OUT" $extra
else
  # shellcheck disable=SC2086
  set -- $TIERLAB exec --policy "$P" --alloc "$A" --interval "$I" --out "$OUT" $extra \
    -- /bin/hotcold $hc_args
fi
res exec-command mode "$MODE" argv "$(printf '%s ' "$@")" policy "$P" alloc "$A" interval "$I" \
  uptime "$(uptime_s)"
mkfifo /tmp/exec.fifo
# every exec output line goes to the console as it comes: hotcold's own JSON lines (if exec
# passes the child's output through) as kind hotcold, exec's JSON objects as exec-interval,
# other text as exec-line
( while IFS= read -r l; do
    echo "$l" >> /tmp/exec.log
    case "$l" in
      '{"event":'*) echo "TIERLAB-RESULT {\"kind\":\"hotcold\",\"via\":\"exec\",${l#\{}"; touch /tmp/exec.saw_hotcold ;;
      \{*\}) echo "TIERLAB-RESULT {\"kind\":\"exec-interval\",\"uptime\":$(uptime_s),\"data\":$l}" ;;
      *) res exec-line line "$l" uptime "$(uptime_s)" ;;
    esac
  done < /tmp/exec.fifo ) &
reader=$!
"$@" > /tmp/exec.fifo 2>&1 &
ex=$!
pl=
if wait_file /tmp/hc.ready 120 $ex; then
  if [ -n "${TL_until_hot_on:-}" ]; then
    ( python3 /guest/placement.py --ready /tmp/hc.ready --interval-ms "${TL_sample_ms:-1000}" \
        --kind placement --prefix "TIERLAB-RESULT " --until-hot-on "$TL_until_hot_on" \
        --until-fraction "${TL_until_fraction:-0.9}" --after "${TL_after:-3}"
      kill -TERM "$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' /tmp/hc.ready)" 2>/dev/null ) &
  else
    python3 /guest/placement.py --ready /tmp/hc.ready --interval-ms "${TL_sample_ms:-1000}" \
      --kind placement --prefix "TIERLAB-RESULT " &
  fi
  pl=$!
fi
# watchdog: exec must finish within seconds + grace
( sleep $((SECS + ${TL_grace_s:-60})); kill -0 $ex 2>/dev/null && { echo "daemon scenario: exec timed out"; \
   touch /tmp/exec.timeout; kill -TERM $ex; sleep 5; kill -KILL $ex; } ) 2>/dev/null &
wd=$!
if [ -n "$hc" ]; then   # daemon mode: the workload ends on its own; the daemon follows
  wait $hc
  ( sleep "${TL_grace_s:-60}"; kill -0 $ex 2>/dev/null && { touch /tmp/exec.timeout; kill -TERM $ex; } ) &
fi
wait $ex; erc=$?
stop_tickers
kill $wd 2>/dev/null
[ -n "$pl" ] && wait $pl
wait $reader
t1=$(uptime_s)
started=false; [ -s /tmp/hc.ready ] && started=true
if [ -n "$hc" ]; then emit_hotcold /tmp/hc.out
elif [ ! -f /tmp/exec.saw_hotcold ]; then emit_hotcold /tmp/hc.ready; emit_hotcold /tmp/hc.done
fi
child_rc=null; checksum=null
if [ -s /tmp/hc.done ]; then
  checksum=$(sed -n 's/.*"checksum":"\([a-z]*\)".*/\1/p' /tmp/hc.done)
  [ "$checksum" = ok ] && child_rc=0 || child_rc=1
fi
if [ -f $OUT/results.json ]; then
  python3 - $OUT/results.json <<'PY'
import json, sys
try:
    data = json.load(open(sys.argv[1]))
    print("TIERLAB-RESULT " + json.dumps({"kind": "exec-results", "data": data}, separators=(",", ":")))
except ValueError as e:
    print("TIERLAB-RESULT " + json.dumps({"kind": "exec-results", "invalid": str(e),
          "head": open(sys.argv[1], errors="replace").read(500)}))
PY
else
  res exec-results missing true
fi
ls -la $OUT 2>/dev/null
error=""
if ! $started; then
  error="tierlab exec exited (rc=$erc) before the workload was ready: $(tail -5 /tmp/exec.log 2>/dev/null | tr '\n' ' ')"
  echo "DAEMON-FAIL $error"
elif [ -f /tmp/exec.timeout ]; then error="tierlab exec did not finish within seconds+grace_s"
elif [ "$child_rc" = null ]; then error="the workload wrote no done line (killed?)"
elif [ "$MODE" = exec ] && [ "$erc" != "$child_rc" ]; then error="tierlab exec rc=$erc but the workload's rc=$child_rc"
elif [ "$MODE" = daemon ] && [ "$erc" != 0 ]; then error="tierlab daemon rc=$erc"
fi
res exec mode "$MODE" rc "$erc" ok "$([ -z "$error" ] && [ "$erc" = 0 ] && echo true || echo false)" \
  workload_started $started child_rc "$child_rc" checksum "${checksum:-null}" \
  rc_matches_child "$([ "$erc" = "$child_rc" ] && echo true || echo false)" \
  seconds "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')" lines "$(wc -l < /tmp/exec.log 2>/dev/null || echo 0)" \
  error "$error"
res nodes-after nodes "$(nodes_json)" vmstat "$(vmstat_json)"
dmesg | grep -E 'oom|Out of memory|BUG:|WARNING:' | head -5
[ -n "$error" ] && exit 2
[ "$child_rc" = 0 ] || exit 1
exit "$erc"
