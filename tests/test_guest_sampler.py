"""tests/guest/placement.py's readers of the kernel's state, on crafted texts in the
formats the 6.12 kernel prints: /proc/PID/sched (kernel/sched/debug.c
proc_sched_show_task), /sys/kernel/debug/lru_gen (mm/vmscan.c lru_gen_seq_show) and
numa_maps."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "guest_placement", Path(__file__).parent / "guest" / "placement.py")
pl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pl)


def test_sched_fields():
    text = ("replay (369, #threads: 1)\n" + "-" * 60 + "\n"
            "se.exec_start                                :         40113.225612\n"
            "se.sum_exec_runtime                          :         36904.118020\n"
            "mm->numa_scan_seq                            :                   17\n"
            "numa_pages_migrated                          :                    0\n")
    assert pl.parse_sched(text) == {"numa_scan_seq": 17, "runtime_ms": 36904.118020}
    assert pl.parse_sched("nothing: here\n") == {}


def test_lru_gen_generations_by_node():
    text = ("memcg     1 /\n"
            " node     0\n"
            "          5      12040      20224         96 \n"
            "          6       3004      31000         12 \n"
            "          7        101       9000          0 \n"
            " node     1\n"
            "          3      40000       1200          0 \n"
            "          4      40000      15000          0 \n"
            "memcg     2 /a\n"
            " node     0\n"
            "          7         90        100          0 \n")
    got = pl.parse_lru_gen(text)
    assert got == {"N0": [[5, 12040, 20224], [6, 3004, 31000], [7, 101, 9100]],
                   "N1": [[3, 40000, 1200], [4, 40000, 15000]]}


def test_node_totals_sum_every_vma():
    text = ("7f0000000000 default anon=3 dirty=3 N0=2 N1=1 kernelpagesize_kB=4\n"
            "7f0000100000 default anon=5 dirty=5 N1=5 kernelpagesize_kB=4\n"
            "7fff00000000 default stack anon=1 dirty=1 N0=1 kernelpagesize_kB=4\n")
    assert pl.node_totals(text, [0, 1, 2]) == {"N0": 3, "N1": 6, "N2": 0}


def test_vmstat_ticks_print_one_result_per_tick(tmp_path):
    """scenarios/_lib.sh vmstat_ticks (tiering.sh tick_ms=): each tick is one
    TIERLAB-RESULT line of JSON holding the uptime and the tiering counters present in
    /proc/vmstat (a crafted one here: the function reads the file it is given)."""
    import json
    import subprocess
    lib = Path(__file__).parent / "guest" / "scenarios" / "_lib.sh"
    vm = tmp_path / "vmstat"
    vm.write_text("nr_free_pages 100\npgpromote_success 7\npgdemote_kswapd 11\n"
                  "numa_hint_faults 3\npgpromote_candidate_nrl 5\n")
    script = f'. "{lib}"; VMSTAT_FILE="{vm}" vmstat_ticks 5'
    p = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        lines = [p.stdout.readline(), p.stdout.readline()]  # two ticks: events, not time
    finally:
        p.kill()
        p.wait()
    for line in lines:
        assert line.startswith("TIERLAB-RESULT {")
        d = json.loads(line[len("TIERLAB-RESULT "):])
        assert d.pop("kind") == "vmstat-tick" and d.pop("uptime") >= 0
        assert d == {"pgpromote_success": 7, "pgdemote_kswapd": 11, "numa_hint_faults": 3}
