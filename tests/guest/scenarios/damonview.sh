# damonview: what the kernel's DAMON sees of a hot range under this emulator, nothing moving.
# hotcold (hot_mib=64 first touched on node 1, cold_mib=128 on node 0, write_share=0.2)
# runs until the views are read (SIGTERM then; it prints its done line), `seconds` (20) of
# them from its ready line; no tiering (NUMA balancing off, demotion off). Once it is ready,
# kdamond 0 watches its virtual addresses (vaddr) and kdamond 1 node 1's physical
# addresses (paddr), each with the sample/aggregation intervals of tiering's DAMON
# (TL_damon_sample_ms 5, TL_damon_aggr_ms 100), 10-1000 regions and one `stat` scheme over
# every region; damon_view.py prints each context's regions summed over the hot and cold
# ranges every interval_ms (1000). hotcold's progress lines give the hot pages' access rate.
# ticker_us=T: start_tickers (_lib.sh) first.
# Results: zoneinfo, sizes, tickers, damon-view-config, damon-view (one per read), hotcold,
#   nodes-after.
. /guest/scenarios/_lib.sh
SECS=${TL_seconds:-20}; HOT=${TL_hot_mib:-64}; COLD=${TL_cold_mib:-128}
set_kernel_tiering 0 false
start_tickers
res zoneinfo nodes "$(zoneinfo_json)"
res sizes hot_mib "$HOT" cold_mib "$COLD" seconds "$SECS"
/bin/hotcold --hot-mib "$HOT" --cold-mib "$COLD" --hot-node 1 --cold-node 0 \
  --seconds $((SECS + 600)) --interval-ms 1000 --write-share "${TL_write_share:-0.2}" \
  --ready-file /tmp/w.ready > /tmp/w.out 2>/tmp/w.err &
wl=$!
# damon_view_on PID: kdamond 0 vaddr on PID, kdamond 1 paddr on node 1, a stat scheme each
damon_view_on() {
  K=/sys/kernel/mm/damon/admin/kdamonds
  [ -d $K ] || { res damon-fail why "no $K (CONFIG_DAMON_SYSFS)"; return 1; }
  echo 2 > $K/nr_kdamonds
  for k in 0 1; do
    C=$K/$k/contexts/0
    if [ $k = 0 ]; then
      damon_context $K/$k vaddr || return 1
      echo "$1" > $C/targets/0/pid_target
    else
      damon_context $K/$k paddr || return 1
      damon_node_target $C 1
    fi
    echo 1 > $C/schemes/nr_schemes; S=$C/schemes/0
    echo stat > $S/action
    echo 0 > $S/access_pattern/nr_accesses/min; echo 4294967295 > $S/access_pattern/nr_accesses/max
    echo 0 > $S/access_pattern/age/min; echo 4294967295 > $S/access_pattern/age/max
    echo 0 > $S/access_pattern/sz/min; echo 18446744073709551615 > $S/access_pattern/sz/max
  done
  for k in 0 1; do echo on > $K/$k/state || { res damon-fail why "kdamond $k refused 'on'"; return 1; }; done
  res damon-view-config sample_ms "${TL_damon_sample_ms:-5}" aggr_ms "${TL_damon_aggr_ms:-100}" \
    node1 "$(node_range 1 | tr ' ' '-')" uptime "$(uptime_s)"
}
ok=false
if wait_file /tmp/w.ready 300 $wl && damon_view_on $wl; then
  ok=true
  python3 /guest/damon_view.py --ready /tmp/w.ready --seconds "$SECS" --views "${TL_views:-4}" \
    --interval-ms "${TL_interval_ms:-1000}" --prefix "TIERLAB-RESULT "
fi
kill -TERM $wl 2>/dev/null; wait $wl
stop_tickers
emit_hotcold /tmp/w.out; cat /tmp/w.err
res nodes-after nodes "$(nodes_json)" vmstat "$(vmstat_json)"
$ok || exit 3
