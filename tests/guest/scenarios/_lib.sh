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
# {"N0":{"cpus":"0-1","total_mib":..,"free_mib":..},...}
nodes_json() {
  _o=; for n in /sys/devices/system/node/node[0-9]*; do
    _id=${n##*/node}
    _t=$(awk '/MemTotal/ {print int($4/1024)}' $n/meminfo); _f=$(awk '/MemFree/ {print int($4/1024)}' $n/meminfo)
    _o="$_o${_o:+,}\"N$_id\":{\"cpus\":$(jstr "$(cat $n/cpulist)"),\"total_mib\":$_t,\"free_mib\":$_f}"
  done; echo "{$_o}"
}
node_free_mib() { awk '/MemFree/ {print int($4/1024)}' /sys/devices/system/node/node$1/meminfo; }
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
