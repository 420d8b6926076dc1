# smoke: the guest has what the tierlab tests need.
#   two nodes, node 1 CPU-less; two memory tiers; demotion + tiering NUMA balancing knobs;
#   DAMON sysfs with vaddr; move_pages works; hotcold starts on the node it is asked for and
#   verifies; python3 -m tierlab list policies runs from the repo's sources.
. /guest/scenarios/_lib.sh
rc=0
fail() { echo "SMOKE-FAIL $*"; rc=1; }

res nodes nodes "$(nodes_json)" has_cpu "$(cat /sys/devices/system/node/has_cpu)" \
  has_memory "$(cat /sys/devices/system/node/has_memory)" uptime "$(uptime_s)"

tiers=; for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
  [ -d "$t" ] && tiers="$tiers${tiers:+,}{\"name\":$(jstr "${t##*/}"),\"nodes\":$(jstr "$(cat $t/nodelist)")}"
done
res tiers tiers "[$tiers]"

nb_ok=false; echo 2 > /proc/sys/kernel/numa_balancing 2>/dev/null && [ "$(cat /proc/sys/kernel/numa_balancing)" = 2 ] && nb_ok=true
echo 0 > /proc/sys/kernel/numa_balancing
dm=null; [ -f /sys/kernel/mm/numa/demotion_enabled ] && dm=$(cat /sys/kernel/mm/numa/demotion_enabled)
lg=null; [ -f /sys/kernel/mm/lru_gen/enabled ] && lg=$(cat /sys/kernel/mm/lru_gen/enabled)
res knobs numa_balancing_2 $nb_ok demotion_enabled "$dm" lru_gen "$lg" \
  debugfs_numa_balancing "$([ -d /sys/kernel/debug/sched/numa_balancing ] && echo true || echo false)"

K=/sys/kernel/mm/damon/admin/kdamonds
if [ -d $K ]; then
  echo 1 > $K/nr_kdamonds; echo 1 > $K/0/contexts/nr_contexts
  ops=$(cat $K/0/contexts/0/avail_operations 2>/dev/null | tr '\n' ' ')
  echo 0 > $K/0/contexts/nr_contexts; echo 0 > $K/nr_kdamonds
  res damon sysfs true avail_operations "$ops"
else
  res damon sysfs false avail_operations ""
fi

out=$(/bin/movetest 64 1 2>&1); mrc=$?
echo "$out"
after=$(echo "$out" | grep '^\[after\]')
res movetest rc $mrc pages "$(echo "$after" | sed -n 's/.*pages=\([0-9]*\).*/\1/p')" \
  node0 "$(echo "$after" | sed -n 's/.*\] pages=[0-9]* node0=\([0-9]*\).*/\1/p')" \
  node1 "$(echo "$after" | sed -n 's/.*\] pages=[0-9]* node0=[0-9]* node1=\([0-9]*\).*/\1/p')"

# the PTE scan's cost here (mprotect over 64 MiB of present PTEs, the change_protection
# walk NUMA balancing's scan does): the simulator's pte_walk + pte_update calibration
out=$(/bin/movetest -s 64 -t -1 -P 10 2>&1); echo "$out"
res ptecost ns_per_pte "$(echo "$out" | sed -n 's/^mprotect:.*ns_per_pte=\([0-9.]*\).*/\1/p')"

# hotcold: hot starts on node 1, cold on node 0, contents verify; placement.py sees it.
# hotcold runs until placement.py has taken its sample and hotcold has reported progress
# (events: python's start in a loaded TCG guest can outlast a fixed run), then SIGTERM
# stops it and it verifies its pages; 120 s is only a cap
/bin/hotcold --hot-mib 16 --cold-mib 16 --hot-node 1 --cold-node 0 --seconds 120 --interval-ms 200 \
  --ready-file /tmp/hc.ready > /tmp/hc.out 2>/tmp/hc.err &
hc=$!
if wait_file /tmp/hc.ready 60 $hc; then
  python3 /guest/placement.py --ready /tmp/hc.ready --interval-ms 1000 --count 1 --kind placement \
    --prefix "TIERLAB-RESULT " || fail "placement.py rc=$?"
  _i=0
  until grep -q '"event":"progress"' /tmp/hc.out 2>/dev/null || ! kill -0 $hc 2>/dev/null; do
    _i=$((_i + 1)); [ $_i -gt 2400 ] && break
    sleep 0.05
  done
  kill -TERM $hc 2>/dev/null
else fail "hotcold not ready"; fi
wait $hc; hrc=$?
emit_hotcold /tmp/hc.out; cat /tmp/hc.err
res hotcold-exit rc $hrc

# python: interpreter start, tierlab import, the CLI
t0=$(uptime_s)
python3 -c 'import sys; print("python", sys.version.split()[0], sys.executable)'; prc=$?
t1=$(uptime_s)
python3 -X importtime -c 'import tierlab.cli' 2>/tmp/imp.log; irc=$?
t2=$(uptime_s)
tail -1 /tmp/imp.log
python3 -m tierlab list policies > /tmp/pol.txt 2>&1; lrc=$?
t3=$(uptime_s)
head -5 /tmp/pol.txt; [ $lrc = 0 ] || cat /tmp/pol.txt
np=$(python3 -c 'import numpy; print(numpy.__version__)' 2>&1)
res python rc $prc import_rc $irc list_rc $lrc first_python_uptime "$t1" \
  python_s "$(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')" \
  import_tierlab_cli_s "$(awk -v a=$t1 -v b=$t2 'BEGIN{printf "%.2f", b-a}')" \
  list_policies_s "$(awk -v a=$t2 -v b=$t3 'BEGIN{printf "%.2f", b-a}')" \
  policies "$(grep -cE "^[^ ]+ [a-z0-9]" /tmp/pol.txt)" \
  has_autonuma_tiering "$(grep -q 'autonuma-tiering' /tmp/pol.txt && echo true || echo false)" \
  numpy "$np"
res memory nodes "$(nodes_json)" rootfs_mib "$(du -sm / -x 2>/dev/null | cut -f1)" uptime "$(uptime_s)"
exit $rc
