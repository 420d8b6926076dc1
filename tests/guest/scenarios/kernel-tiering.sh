# kernel-tiering: Linux's own tiering (NUMA balancing mode 2 promotion + kswapd demotion)
# moves a hot range from the CPU-less node 1 to node 0 while cold data fills node 0.
# Args (tl.KEY=VALUE): hot_mib=128 cold_mib=auto (node 0 free - headroom_mib) headroom_mib=16
#   seconds=240 (a cap: the run stops at an event, below) interval_ms=1000 (hotcold
#   progress) sample_ms=1000 (placement) write_share=0.2 most=0.9 after=5
#   scan_delay_ms=100 scan_period_min_ms=100 scan_period_max_ms=1000 scan_size_mb=1024
#   (debugfs sched/numa_balancing; 1024 MiB scans hot+cold in one pass: 90% promoted in
#   4.5-5 s instead of 6.5-10 s with the kernel's 256)
# Sequence: demotion on, NUMA balancing off while hotcold fills (hot bound to node 1, cold to
# node 0, then both policies reset to default); one "placement-initial" sample; NUMA balancing
# mode 2 on ("tiering-on" result with its uptime); placement samples until `most` of the
# hot range is on node 0 and `after` more samples are taken (an event: under TCG guest
# progress stretches with the host's load), then SIGTERM to hotcold (it stops, verifies
# its pages and reports); hotcold exiting at the cap ends the samples too.
. /guest/scenarios/_lib.sh
HOT=${TL_hot_mib:-128}; SECS=${TL_seconds:-240}; IV=${TL_interval_ms:-1000}
SAMPLE=${TL_sample_ms:-1000}; WS=${TL_write_share:-0.2}
res nodes-before nodes "$(nodes_json)" uptime "$(uptime_s)"
TL_scan_size_mb=${TL_scan_size_mb:-1024}
set_kernel_tiering 0 true
free0=$(node_free_mib 0)
COLD=${TL_cold_mib:-auto}
# fill node 0 up to a little headroom: promotions then need room that only demotion makes
[ "$COLD" = auto ] && COLD=$((free0 - ${TL_headroom_mib:-16}))
res sizes hot_mib "$HOT" cold_mib "$COLD" node0_free_mib "$free0" seconds "$SECS"
t_start=$(uptime_s)
/bin/hotcold --hot-mib "$HOT" --cold-mib "$COLD" --hot-node 1 --cold-node 0 --seconds "$SECS" \
  --interval-ms "$IV" --write-share "$WS" --ready-file /tmp/hc.ready > /tmp/hc.out 2>/tmp/hc.err &
hc=$!
if wait_file /tmp/hc.ready 300 $hc; then
  python3 /guest/placement.py --ready /tmp/hc.ready --count 1 --kind placement-initial \
    --prefix "TIERLAB-RESULT "
  # the page allocator's watermarks per node (summed over zones), for the simulator's
  # machine that mirrors this guest (scripts/sim_vs_kernel.py)
  res zoneinfo nodes "$(awk '/^Node/{n=$2; sub(",","",n)} /^ +managed/{m[n]+=$2} /^ +min /{a[n]+=$2} /^ +low /{b[n]+=$2} /^ +high /{c[n]+=$2} END{printf "{"; s=""; for (k in m) {printf "%s\"%s\":{\"managed\":%d,\"min\":%d,\"low\":%d,\"high\":%d}", s, k, m[k], a[k], b[k], c[k]; s=","} printf "}"}' /proc/zoneinfo)"
  echo 2 > /proc/sys/kernel/numa_balancing
  res tiering-on numa_balancing "$(cat /proc/sys/kernel/numa_balancing)" uptime "$(uptime_s)"
  python3 /guest/placement.py --ready /tmp/hc.ready --interval-ms "$SAMPLE" --kind placement \
    --prefix "TIERLAB-RESULT " --until-hot-on N0 --until-fraction "${TL_most:-0.9}" \
    --after "${TL_after:-5}"
  kill -TERM $hc 2>/dev/null
else
  echo "hotcold did not get ready"
fi
wait $hc; hrc=$?
emit_hotcold /tmp/hc.out; cat /tmp/hc.err
res hotcold-exit rc $hrc seconds "$(awk -v a=$t_start -v b=$(uptime_s) 'BEGIN{printf "%.2f", b-a}')"
res nodes-after nodes "$(nodes_json)" vmstat "$(vmstat_json)" \
  hot_threshold_ms "$(cat /sys/kernel/debug/sched/numa_balancing/hot_threshold_ms 2>/dev/null || echo null)"
dmesg | grep -E 'oom|Out of memory|BUG:|WARNING:' | head -5
exit $hrc
