# tiering: a tiering mechanism of the kernel on one workload, for scripts/sim_vs_kernel.py.
# Args (tl.KEY=VALUE):
#   tiering=kernel (NUMA balancing mode 2 + kswapd demotion) | damon (DAMOS migrate_hot /
#     migrate_cold on paddr, as samples/damon/mtier.c: damon_tiering_on in _lib.sh; kswapd
#     demotion stays on)
#   workload=hotcold: hot_mib=128 cold_mib=auto (node 0 free - its min watermark - headroom_mib=16)
#     write_share=0.2 windows=1 move_ms=0 (windows=K, move_ms=T: the hot range is K times
#     hot_mib and its hot window moves to the next every T ms, as gups:dynamic). The hot
#     range is first touched on node 1, the cold range on node 0, then both policies reset.
#     The mechanism goes on once hotcold is ready. A static hot range (windows=1) ends at an
#     event: once `most` (0.9) of it is on node 0 and `after` (5) more samples are taken; a
#     moving one runs `seconds`.
#   workload=replay: trace=NAME (/guest/traces/NAME.rpl) copies=1 per_window=100000
#     hot_pages=1024 loop=0: the mechanism goes on first, then the replay first-touches
#     its pages as it goes (the kernel's default policy: node 0, then node 1).
#   seconds=240 (a cap) interval_ms=500 (the workload's progress lines, with its hot pages'
#   nodes) sample_ms=500 (vmstat) and the kernel-tiering knobs of _lib.sh. tick_ms=T (off by
#   default): every T ms from before the mechanism goes on, a vmstat-tick result with the
#   promotion, demotion and scan counters (a shell loop: no sampler's start-up delay).
#   ticker_us=T (off by default): start_tickers (_lib.sh) before the workload starts.
# Results: nodes-before, sizes, zoneinfo, kernel-tiering-knobs, damon-goal, damon-config,
#   tiering-on (uptime), placement / placement-initial (vmstat; hot/cold pages for hotcold),
#   hotcold or replay (ready/progress/done), damon-stats, workload-exit, nodes-after.
. /guest/scenarios/_lib.sh
T=${TL_tiering:-kernel}; W=${TL_workload:-hotcold}; SECS=${TL_seconds:-240}
IV=${TL_interval_ms:-500}; SAMPLE=${TL_sample_ms:-500}
DAMOS=; [ "$T" = damon ] && DAMOS=--damos
res nodes-before nodes "$(nodes_json)" uptime "$(uptime_s)"
TL_scan_size_mb=${TL_scan_size_mb:-1024}
set_kernel_tiering 0 true
res zoneinfo nodes "$(zoneinfo_json)"
start_tickers
tiering_on() {
  if [ "$T" = damon ]; then damon_tiering_on || return 1
  else echo 2 > /proc/sys/kernel/numa_balancing; fi
  res tiering-on tiering "$T" numa_balancing "$(cat /proc/sys/kernel/numa_balancing)" uptime "$(uptime_s)"
}
free0=$(node_free_mib 0)
ok=true
if [ "$W" = replay ]; then
  RPL=/guest/traces/${TL_trace:-redis-ycsb-zipfian}.rpl
  res sizes node0_free_mib "$free0" seconds "$SECS" trace "$RPL" copies "${TL_copies:-1}" \
    per_window "${TL_per_window:-100000}" hot_pages "${TL_hot_pages:-1024}"
  args="--trace $RPL --copies ${TL_copies:-1} --per-window ${TL_per_window:-100000}"
  args="$args --hot-pages ${TL_hot_pages:-1024} --seconds $SECS --interval-ms $IV"
  [ "${TL_loop:-0}" = 1 ] && args="$args --loop"
  tiering_on || ok=false
  # shellcheck disable=SC2086
  $ok && { /bin/replay $args --ready-file /tmp/w.ready > /tmp/w.out 2>/tmp/w.err & }
  wl=$!; kind=replay
else
  HOT=${TL_hot_mib:-128}; K=${TL_windows:-1}; COLD=${TL_cold_mib:-auto}
  # fill node 0 up to a little headroom above its min watermark: promotions then need
  # room only demotion makes. Filling below the min watermark leaves the bound cold range
  # to direct reclaim, which under TCG OOM-killed hotcold in 2 of ~25 fills (2026-12-06)
  [ "$COLD" = auto ] && COLD=$((free0 - $(node_min_mib 0) - ${TL_headroom_mib:-16}))
  res sizes hot_mib "$HOT" cold_mib "$COLD" node0_free_mib "$free0" seconds "$SECS" \
    windows "$K" move_ms "${TL_move_ms:-0}"
  args="--hot-mib $((HOT * K)) --cold-mib $COLD --hot-node 1 --cold-node 0 --seconds $SECS"
  args="$args --interval-ms $IV --write-share ${TL_write_share:-0.2}"
  [ "$K" -gt 1 ] && args="$args --hot-windows $K --move-ms ${TL_move_ms:-10000}"
  # shellcheck disable=SC2086
  /bin/hotcold $args --ready-file /tmp/w.ready > /tmp/w.out 2>/tmp/w.err &
  wl=$!; kind=hotcold
fi
if $ok && wait_file /tmp/w.ready 300 $wl; then
  python3 /guest/placement.py --ready /tmp/w.ready --count 1 --kind placement-initial \
    --prefix "TIERLAB-RESULT "
  ticks=
  if [ -n "${TL_tick_ms:-}" ]; then vmstat_ticks "$TL_tick_ms" & ticks=$!; fi
  if [ "$W" = hotcold ]; then tiering_on || ok=false; fi
  if ! $ok; then kill -TERM $wl 2>/dev/null
  elif [ "$W" = hotcold ] && [ "${TL_windows:-1}" = 1 ]; then
    python3 /guest/placement.py --ready /tmp/w.ready --interval-ms "$SAMPLE" --kind placement \
      --prefix "TIERLAB-RESULT " $DAMOS --until-hot-on N0 --until-fraction "${TL_most:-0.9}" \
      --after "${TL_after:-5}"
    kill -TERM $wl 2>/dev/null
  else
    python3 /guest/placement.py --ready /tmp/w.ready --interval-ms "$SAMPLE" --kind placement \
      --prefix "TIERLAB-RESULT " $DAMOS
  fi
else
  $ok && echo "the workload did not get ready"
fi
wait $wl; wrc=$?
[ -n "${ticks:-}" ] && kill "$ticks" 2>/dev/null
stop_tickers
sed -n "s/^{\"event\":/TIERLAB-RESULT {\"kind\":\"$kind\",\"event\":/p" /tmp/w.out; cat /tmp/w.err
[ "$T" = damon ] && res damon-stats schemes "$(damon_stats)"
res workload-exit rc $wrc
res nodes-after nodes "$(nodes_json)" vmstat "$(vmstat_json)"
dmesg | grep -E 'oom|Out of memory|BUG:|WARNING:' | head -5
$ok || exit 3
exit $wrc
