# Helpers for the guest scenarios (sourced; busybox sh). Results go to the serial console as
#   TIERLAB-RESULT {"kind":KIND,...}     (one JSON object per line, parsed by harness.py)
uptime_s() { cut -d' ' -f1 /proc/uptime; }
jstr() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n\t\r' '   ')"; }
isnum() { echo "$1" | grep -qE '^-?(0|[1-9][0-9]*)(\.[0-9]+)?$'; }
# res KIND key value ...: numbers, true/false/null and {..}/[..] are written raw, the rest quoted
res() {
  _o="{\"kind\":$(jstr "$1")"; shift
  while [ $# -ge 2 ]; do
    _v=$2
    if ! isnum "$_v"; then case "$_v" in true|false|null|\{*\}|\[*\]) ;; *) _v=$(jstr "$_v");; esac; fi
    _o="$_o,$(jstr "$1"):$_v"; shift 2
  done
  echo "TIERLAB-RESULT $_o}"
}
# raw JSON object (one line) as a result of KIND: res_json KIND '{"a":1}'
res_json() { echo "TIERLAB-RESULT {\"kind\":$(jstr "$1"),\"data\":$2}"; }
VMKEYS='pgpromote_success|pgpromote_candidate|pgdemote_kswapd|pgdemote_direct|pgdemote_khugepaged|pgmigrate_success|pgmigrate_fail|numa_pages_migrated|numa_hint_faults|numa_pte_updates'
vmstat_json() {
  awk -v re="^($VMKEYS)\$" 'BEGIN{printf "{"; n=0} $1 ~ re {printf "%s\"%s\":%s", (n++?",":""), $1, $2} END{printf "}"}' /proc/vmstat
}
# {"N0":{"cpus":"0-1","total_mib":..,"free_mib":..,"lru_kb":{"anon":..,"file":..,
# "unevictable":..,"shmem":..}},...}: lru_kb from the node's meminfo (Active+Inactive)
nodes_json() {
  _o=; for n in /sys/devices/system/node/node[0-9]*; do
    _id=${n##*/node}
    _t=$(awk '/MemTotal/ {print int($4/1024)}' $n/meminfo); _f=$(awk '/MemFree/ {print int($4/1024)}' $n/meminfo)
    _l=$(awk '$3 ~ /^(Active|Inactive)\(anon\):$/ {a+=$4} $3 ~ /^(Active|Inactive)\(file\):$/ {f+=$4}
      $3 == "Unevictable:" {u=$4} $3 == "Shmem:" {s=$4}
      END {printf "{\"anon\":%d,\"file\":%d,\"unevictable\":%d,\"shmem\":%d}", a, f, u, s}' $n/meminfo)
    _o="$_o${_o:+,}\"N$_id\":{\"cpus\":$(jstr "$(cat $n/cpulist)"),\"total_mib\":$_t,\"free_mib\":$_f,\"lru_kb\":$_l}"
  done; echo "{$_o}"
}
# {"0":{"managed":pages,"min":..,"low":..,"high":..},...}: each node's watermarks summed over
# its zones (/proc/zoneinfo), for the simulator's machine that mirrors the guest
zoneinfo_json() {
  awk '/^Node/{n=$2; sub(",","",n)} /^ +managed/{m[n]+=$2} /^ +min /{a[n]+=$2} /^ +low /{b[n]+=$2} /^ +high /{c[n]+=$2} END{printf "{"; s=""; for (k in m) {printf "%s\"%s\":{\"managed\":%d,\"min\":%d,\"low\":%d,\"high\":%d}", s, k, m[k], a[k], b[k], c[k]; s=","} printf "}"}' /proc/zoneinfo
}
node_free_mib() { awk '/MemFree/ {print int($4/1024)}' /sys/devices/system/node/node$1/meminfo; }
# node_min_mib N: node N's min watermark in MiB, rounded up (summed over its zones)
node_min_mib() {
  awk -v want="$1" '/^Node/{n=$2; sub(",","",n)} n==want && /^ +min /{m+=$2}
    END{printf "%d\n", (m + 255) / 256}' /proc/zoneinfo
}
# kernel tiering knobs: set_kernel_tiering NUMA_BALANCING_MODE DEMOTION(true|false)
set_kernel_tiering() {
  echo "$1" > /proc/sys/kernel/numa_balancing
  echo "$2" > /sys/kernel/mm/numa/demotion_enabled
  D=/sys/kernel/debug/sched/numa_balancing
  if [ -d $D ]; then   # scan faster than the defaults (1 s delay, 1-60 s period) for short runs
    echo "${TL_scan_delay_ms:-100}" > $D/scan_delay_ms
    echo "${TL_scan_period_min_ms:-100}" > $D/scan_period_min_ms
    echo "${TL_scan_period_max_ms:-1000}" > $D/scan_period_max_ms
    [ -n "${TL_scan_size_mb:-}" ] && echo "$TL_scan_size_mb" > $D/scan_size_mb
  fi
  res kernel-tiering-knobs numa_balancing "$(cat /proc/sys/kernel/numa_balancing)" \
    demotion_enabled "$(cat /sys/kernel/mm/numa/demotion_enabled)" \
    scan_delay_ms "$(cat $D/scan_delay_ms 2>/dev/null || echo null)" \
    scan_period_min_ms "$(cat $D/scan_period_min_ms 2>/dev/null || echo null)" \
    scan_period_max_ms "$(cat $D/scan_period_max_ms 2>/dev/null || echo null)" \
    scan_size_mb "$(cat $D/scan_size_mb 2>/dev/null || echo null)" \
    hot_threshold_ms "$(cat $D/hot_threshold_ms 2>/dev/null || echo null)" \
    promote_rate_limit_MBps "$(cat /proc/sys/kernel/numa_balancing_promote_rate_limit_MBps 2>/dev/null || echo null)"
}
# start_tickers: with TL_ticker_us=T, one /bin/tick T pinned to each CPU (pids in TICKERS),
# so that every CPU switches address space every T us: under TCG a PTE accessed bit cleared
# without a TLB flush is set again only once the vCPU's TLB is flushed (tests/guest/README.md,
# "The emulator's TLB"). Reports tickers. stop_tickers ends them.
start_tickers() {
  TICKERS=; [ -n "${TL_ticker_us:-}" ] || return 0
  for _c in $(seq 0 $(($(nproc) - 1))); do
    taskset -c "$_c" /bin/tick "$TL_ticker_us" & TICKERS="$TICKERS $!"
  done
  res tickers ticker_us "$TL_ticker_us" cpus "$(nproc)"
}
stop_tickers() { [ -n "${TICKERS:-}" ] && kill $TICKERS 2>/dev/null; TICKERS=; }
# wait_file PATH SECONDS [PID]: until PATH exists (0), SECONDS pass or PID exits (1)
wait_file() {
  _i=0
  while [ ! -s "$1" ]; do
    [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && { [ -s "$1" ]; return $?; }
    _i=$((_i + 1)); [ $_i -gt $(($2 * 20)) ] && return 1
    sleep 0.05
  done
}
# hotcold JSON lines (a file) as results of kind "hotcold" (event: ready/progress/done)
emit_hotcold() { [ -f "$1" ] && sed -n 's/^{"event":/TIERLAB-RESULT {"kind":"hotcold","event":/p' "$1"; }
# node_range N: "START END" physical bytes of node N's spanned page frames (/proc/zoneinfo)
node_range() {
  awk -v want="$1" '/^Node/{n=$2; sub(",","",n)} n==want && /start_pfn:/{s=$2}
    n==want && /spanned/{sp=$2} n==want && s!="" && sp!="" {
      e=s+sp; if (lo=="" || s<lo) lo=s; if (e>hi) hi=e; s=""; sp=""}
    END{printf "%d %d\n", lo*4096, hi*4096}' /proc/zoneinfo
}
# damon_scheme DIR ACTION TARGET_NID MIN_NR MAX_NR YOUNG_MATCHING GOAL_METRIC GOAL_BP GOAL_NID:
#   one DAMOS scheme as samples/damon/mtier.c sets it (quota TL_damon_quota_mib per
#   TL_damon_reset_ms, weights nr 100 / age 100 / size 0, one young filter); the goal is
#   tried and, when this kernel refuses its metric, left out (reported as damon-goal)
damon_scheme() {
  S=$1; echo "$2" > $S/action; echo "$3" > $S/target_nid
  echo "$4" > $S/access_pattern/nr_accesses/min; echo "$5" > $S/access_pattern/nr_accesses/max
  echo 0 > $S/access_pattern/age/min; echo 4294967295 > $S/access_pattern/age/max
  echo 4096 > $S/access_pattern/sz/min; echo 18446744073709551615 > $S/access_pattern/sz/max
  echo $((${TL_damon_quota_mib:-200} * 1048576)) > $S/quotas/bytes
  echo "${TL_damon_reset_ms:-1000}" > $S/quotas/reset_interval_ms; echo 0 > $S/quotas/ms
  echo 0 > $S/quotas/weights/sz_permil; echo 100 > $S/quotas/weights/nr_accesses_permil
  echo 100 > $S/quotas/weights/age_permil
  [ -f $S/apply_interval_us ] && echo $((${TL_damon_apply_ms:-1000} * 1000)) > $S/apply_interval_us
  echo none > $S/watermarks/metric
  echo 1 > $S/filters/nr_filters; echo young > $S/filters/0/type; echo "$6" > $S/filters/0/matching
  echo 1 > $S/quotas/goals/nr_goals
  if echo "$7" > $S/quotas/goals/0/target_metric 2>/dev/null; then
    echo "$8" > $S/quotas/goals/0/target_value
    [ -f $S/quotas/goals/0/nid ] && echo "$9" > $S/quotas/goals/0/nid
    res damon-goal scheme "$2" metric "$7" accepted true
  else
    echo 0 > $S/quotas/goals/nr_goals
    res damon-goal scheme "$2" metric "$7" accepted false \
      why "this kernel's quotas/goals/0/target_metric refuses $7"
  fi
}
# damon_context KDAMOND OPS: the kdamond's one context on OPS (vaddr|paddr), sample / aggregation /
#   update intervals TL_damon_sample_ms (5), TL_damon_aggr_ms (100), TL_damon_update_ms (1000),
#   TL_damon_min_nr (10) to TL_damon_max_nr (1000) regions, one target; damon-fail if refused
damon_context() {
  _C=$1/contexts; echo 1 > $_C/nr_contexts; _C=$_C/0
  if ! echo "$2" > $_C/operations 2>/dev/null; then
    res damon-fail why "operations $2 refused: avail $(cat $_C/avail_operations 2>/dev/null)"
    return 1
  fi
  _I=$_C/monitoring_attrs
  echo $((${TL_damon_sample_ms:-5} * 1000)) > $_I/intervals/sample_us
  echo $((${TL_damon_aggr_ms:-100} * 1000)) > $_I/intervals/aggr_us
  echo $((${TL_damon_update_ms:-1000} * 1000)) > $_I/intervals/update_us
  echo "${TL_damon_min_nr:-10}" > $_I/nr_regions/min; echo "${TL_damon_max_nr:-1000}" > $_I/nr_regions/max
  echo 1 > $_C/targets/nr_targets
}
# damon_node_target CONTEXT N: the context's target is node N's physical range (node_range)
damon_node_target() {
  echo 1 > $1/targets/0/regions/nr_regions
  set -- "$1" $(node_range "$2")
  echo "$3" > $1/targets/0/regions/0/end; echo "$2" > $1/targets/0/regions/0/start
}
# damon_tiering_on: DAMON-based tiering as samples/damon/mtier.c: one paddr kdamond per
# node; node 0 migrate_cold -> 1 (nr_accesses 0, young pages filtered out, goal node 0
# free 0.5%), node 1 migrate_hot -> 0 (nr_accesses >= TL_damon_hot_nr of 20, only young
# pages, goal node 0 used 99.7%); sample 5 ms, aggregation 100 ms, update 1 s, 10-1000
# regions (TL_damon_* override). Reports damon-config, or damon-fail with the reason.
damon_tiering_on() {
  K=/sys/kernel/mm/damon/admin/kdamonds
  [ -d $K ] || { res damon-fail why "no $K (CONFIG_DAMON_SYSFS)"; return 1; }
  echo 2 > $K/nr_kdamonds || { res damon-fail why "nr_kdamonds refused"; return 1; }
  for n in 0 1; do
    damon_context $K/$n paddr || return 1
    C=$K/$n/contexts/0
    damon_node_target $C $n
    echo 1 > $C/schemes/nr_schemes
    if [ $n = 0 ]; then
      damon_scheme $C/schemes/0 migrate_cold 1 0 0 Y node_mem_free_bp 50 0
    else
      damon_scheme $C/schemes/0 migrate_hot 0 "${TL_damon_hot_nr:-1}" 4294967295 N node_mem_used_bp 9970 0
    fi
  done
  for n in 0 1; do
    echo on > $K/$n/state || { res damon-fail why "kdamond $n refused 'on'"; return 1; }
  done
  res damon-config ops paddr node0 "$(node_range 0 | tr ' ' '-')" node1 "$(node_range 1 | tr ' ' '-')" \
    sample_ms "${TL_damon_sample_ms:-5}" aggr_ms "${TL_damon_aggr_ms:-100}" \
    update_ms "${TL_damon_update_ms:-1000}" quota_mib "${TL_damon_quota_mib:-200}" \
    reset_ms "${TL_damon_reset_ms:-1000}" apply_ms "${TL_damon_apply_ms:-1000}" \
    hot_nr "${TL_damon_hot_nr:-1}" uptime "$(uptime_s)"
}
# damon_stats: each kdamond's scheme stats (nr_tried sz_tried nr_applied sz_applied qt_exceeds)
damon_stats() {
  K=/sys/kernel/mm/damon/admin/kdamonds
  for n in 0 1; do echo update_schemes_stats > $K/$n/state 2>/dev/null; done
  _o=; for n in 0 1; do
    S=$K/$n/contexts/0/schemes/0/stats
    _o="$_o${_o:+,}\"$n\":{\"state\":\"$(cat $K/$n/state)\",\"pid\":$(cat $K/$n/pid),\"nr_tried\":$(cat $S/nr_tried),\"sz_tried\":$(cat $S/sz_tried),\"nr_applied\":$(cat $S/nr_applied),\"sz_applied\":$(cat $S/sz_applied),\"qt_exceeds\":$(cat $S/qt_exceeds)}"
  done; echo "{$_o}"
}

# vmstat_ticks MS: until killed, every MS ms one vmstat-tick result (uptime and the
# counters of NUMA-balancing tiering), read in one awk pass over /proc/vmstat (or
# $VMSTAT_FILE)
vmstat_ticks() {
  _s=$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')
  while :; do
    awk -v up="$(cut -d' ' -f1 /proc/uptime)" '
      BEGIN { printf "TIERLAB-RESULT {\"kind\":\"vmstat-tick\",\"uptime\":%s", up }
      $1 ~ /^(pgpromote_success|pgpromote_candidate|pgdemote_kswapd|pgdemote_direct|numa_hint_faults|numa_pte_updates)$/ {
        printf ",\"%s\":%s", $1, $2 }
      END { print "}" }' "${VMSTAT_FILE:-/proc/vmstat}"
    sleep "$_s"
  done
}
