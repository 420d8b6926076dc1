# real: the allocation policies under `tierlab exec` (static), and the daemon killed.
#   For each allocation policy: tierlab exec --policy static --alloc A -- hotcold (16 + 32
#   MiB, until sampled); one placement sample after hotcold's first touch (kind
#   alloc-A), then SIGTERM to hotcold and alloc-exec (rc, checksum). Then hotcold (hot
#   32 MiB on node 1, 40 s) under `tierlab daemon --policy idt`: SIGKILL 3 s after its
#   first report (kill-test: the workload's rc and checksum, the kdamond left running),
#   and again with SIGTERM (term-test: the daemon's rc, the kdamond stopped).
. /guest/scenarios/_lib.sh
set_kernel_tiering 0 false
HC="/bin/hotcold --interval-ms 1000 --write-share 0.2"
for A in dram-preferred dram-always pm-preferred pm-always; do
  rm -f /tmp/hc.ready /tmp/hc.done
  # shellcheck disable=SC2086
  python3 -m tierlab exec --policy static --alloc $A --interval 5s -- $HC --hot-mib 16 \
    --cold-mib 32 --seconds 600 --ready-file /tmp/hc.ready --done-file /tmp/hc.done \
    > /tmp/ex.$A 2>&1 &
  ex=$!
  if wait_file /tmp/hc.ready 120 $ex; then
    python3 /guest/placement.py --ready /tmp/hc.ready --count 1 --kind "alloc-$A" \
      --prefix "TIERLAB-RESULT "
    # hotcold runs until sampled (SIGTERM: it stops, verifies and reports), not for a
    # fixed time that a slow guest's python start-up may outlast
    kill -TERM "$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' /tmp/hc.ready)" 2>/dev/null
  fi
  wait $ex; rc=$?
  res alloc-exec alloc "$A" rc $rc \
    checksum "$(sed -n 's/.*"checksum":"\([a-z]*\)".*/\1/p' /tmp/hc.done 2>/dev/null)" \
    output "$(tail -3 /tmp/ex.$A)"
done
kdamond_states() { cat /sys/kernel/mm/damon/admin/kdamonds/*/state 2>/dev/null | tr '\n' ' '; }
for SIG in KILL TERM; do
  rm -f /tmp/k.ready /tmp/k.done /tmp/d.out  # the wait below reads the new one only
  # shellcheck disable=SC2086
  $HC --hot-mib 32 --cold-mib 64 --hot-node 1 --seconds 40 --ready-file /tmp/k.ready \
    --done-file /tmp/k.done > /tmp/k.out 2>&1 &
  hc=$!
  wait_file /tmp/k.ready 60 $hc
  python3 -m tierlab daemon --pid $hc --policy idt --interval 1s > /tmp/d.out 2>&1 &
  d=$!
  # kill it once it is at work (its first report line), however slow the host is
  _i=0
  while ! grep -q "t=" /tmp/d.out 2>/dev/null && [ $_i -lt 1800 ]; do sleep 0.1; _i=$((_i + 1)); done
  sleep 3
  kill -$SIG $d; wait $d; drc=$?
  states="$(kdamond_states)"
  wait $hc; hrc=$?
  res "$(echo $SIG | tr A-Z a-z)-test" daemon_rc $drc hotcold_rc $hrc \
    checksum "$(sed -n 's/.*"checksum":"\([a-z]*\)".*/\1/p' /tmp/k.done)" \
    kdamonds "$states" daemon_output "$(tail -4 /tmp/d.out)"
  for k in /sys/kernel/mm/damon/admin/kdamonds/*; do   # leave none running for the next
    [ "$(cat $k/state 2>/dev/null)" = on ] && echo off > $k/state
  done
done
exit 0
