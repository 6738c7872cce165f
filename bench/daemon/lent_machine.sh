#!/usr/bin/env bash
# The daemon benchmark on a lent many-core machine (bare: no DPDK), from what ../shared/devbench/pack.sh
# packed into .devbench/ (tricolord, testpmd, qos_meter, the engine benchmark, their libraries, a copy of
# bench/daemon that takes up to 15 workers). Beside that pack, optionally, .devbench/base/ holds the
# tricolord and tricolor-bench-engine of an older commit: then every tricolord case runs both in the same
# rounds, beside the same testpmd. Run from the project root, there:
#
#   bash bench/daemon/lent_machine.sh scaling   # the engine alternated 3x, then 64 B 4 Ki flows with WORKERS
#                                               # (1,2,4,8): testpmd, qos_meter, aggregate, per-5-tuple,
#                                               # per-5-tuple steered (about 4 minutes with a base)
#   bash bench/daemon/lent_machine.sh swing     # where the per-5-tuple round-to-round swing comes from: the
#                                               # engine in 6 processes of 5 repetitions; one worker for
#                                               # ROUNDS rounds of MEASURE s under huge pages, then --no-huge,
#                                               # and (no base needed) with ASLR off against on; every log kept
#   bash bench/daemon/lent_machine.sh steer     # 1 and 2 workers over ROUNDS rounds, and IMIX with one
#
# Results go to $OUT (the device tool's folder; default /tmp/lent-out), at most 8 files a mode. On a
# machine with DPDK installed (a development machine) the installed DPDK is used, and its PMD folder is
# left alone; on a bare one the packed PMDs are linked where the packed EAL looks for them.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd); D=$ROOT/.devbench
[ -x "$D/bin/tricolord" ] || { echo "no $D/bin/tricolord: run ../shared/devbench/pack.sh build first" >&2; exit 2; }
OUT=${OUT:-/tmp/lent-out}; mkdir -p "$OUT"
if [ ! -e /usr/lib/x86_64-linux-gnu/librte_eal.so.23 ]; then
  P=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0; mkdir -p $P
  for p in net_pcap net_null mempool_ring bus_vdev; do ln -sf $D/lib/librte_$p.so.23 $P/librte_$p.so.23.0; done
  export LD_LIBRARY_PATH=$D/lib
fi
export PYTHONUNBUFFERED=1
CPU=$(( $(nproc) > 6 ? 5 : 1 ))   # the engine benchmark's core: away from the daemons' 0..8
BASE=(); [ -x "$D/base/tricolord" ] && BASE=(--baseline-tricolord "$D/base/tricolord")
BENCH=(python3 "$D/bench/run_bench.py" --tricolord "$D/bin/tricolord" --qos-meter "$D/bin/qos_meter"
       --testpmd "$D/bin/dpdk-testpmd" --frames 64 --flows 4096)
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }

machine() {
  { nproc; lscpu | grep -E "Model name|Socket|Core|Thread|NUMA|L1d|L2|L3"; uname -r; free -g | head -2
    echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"; echo "aslr: $(cat /proc/sys/kernel/randomize_va_space)"
    for c in 0 1 2 3; do echo "cpu$c: siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list 2>/dev/null)"; done
    cat /proc/loadavg; } > "$OUT/machine.txt" 2>&1
}

engine_alternated() {  # both engine benchmarks in turn, 3 times: the rounds' spread is the host's
  local filter='BM_engine_per_key/(1|4096|1048576)$|BM_engine_per_key_daemon_index/4096$|BM_engine_aggregate/4096$'
  for r in 1 2 3; do for bin in ${BASE:+$D/base/tricolor-bench-engine} $D/bin/tricolor-bench-engine; do
    echo "== $bin round $r $(stamp)"
    timeout 40 taskset -c $CPU "$bin" --benchmark_filter="$filter" --benchmark_min_time=0.3 2>&1 | grep -E "^BM"
  done; done > "$OUT/engine.txt" 2>&1
}

case "${1:-}" in
  scaling)
    machine; engine_alternated
    timeout ${LIMIT:-230} "${BENCH[@]}" "${BASE[@]}" --workdir /tmp/lent-scaling --workers ${WORKERS:-1,2,4,8} \
      --rounds 1 --warmup 1.5 --measure 3 \
      --programs testpmd,qos_meter,tricolord-aggregate,tricolord-5tuple,tricolord-5tuple-steered > "$OUT/scaling.txt" 2>&1
    cp /tmp/lent-scaling/results.json "$OUT/scaling.json" 2>/dev/null ;;
  swing)
    machine
    for i in 1 2 3 4 5 6; do echo "== process $i"; timeout 30 taskset -c $CPU "$D/bin/tricolor-bench-engine" \
      --benchmark_filter='BM_engine_per_key/4096$' --benchmark_min_time=0.2 --benchmark_repetitions=5 2>&1 \
      | grep -E "^BM.*ns_per" | grep -v -E "_(mean|median|stddev|cv) "; done > "$OUT/engine-processes.txt"
    # ASLR off for tricolord (every process the same addresses), as the "baseline" beside it as usual.
    printf '#!/bin/sh\nexec setarch "$(uname -m)" -R %s "$@"\n' "$D/bin/tricolord" > /tmp/tricolord-no-aslr
    chmod +x /tmp/tricolord-no-aslr
    for m in auto no-huge; do
      timeout ${LIMIT:-100} "${BENCH[@]}" --workdir /tmp/lent-$m --memory $m --workers 1 --rounds ${ROUNDS:-4} \
        --warmup 1 --measure ${MEASURE:-3} --programs testpmd,tricolord-5tuple "${BASE[@]}" > "$OUT/swing-$m.txt" 2>&1
    done
    timeout ${LIMIT:-230} "${BENCH[@]}" --workdir /tmp/lent-aslr --tricolord /tmp/tricolord-no-aslr \
      --baseline-tricolord "$D/bin/tricolord" --workers 1 --rounds ${ROUNDS:-4} --warmup 1 --measure ${MEASURE:-8} \
      --programs testpmd,tricolord-5tuple > "$OUT/swing-aslr.txt" 2>&1
    tar czf "$OUT/swing-logs.tgz" -C /tmp lent-auto/logs lent-no-huge/logs lent-aslr/logs 2>/dev/null ;;
  steer)
    machine
    timeout ${LIMIT:-115} "${BENCH[@]}" --workdir /tmp/lent-steer --workers ${WORKERS:-1,2} --rounds ${ROUNDS:-2} --warmup 1 \
      --measure 3 --programs testpmd,tricolord-aggregate,tricolord-5tuple,tricolord-5tuple-steered > "$OUT/steer.txt" 2>&1
    timeout ${LIMIT:-55} "${BENCH[@]}" --workdir /tmp/lent-imix --frames imix --workers 1 --rounds 1 --warmup 1 \
      --measure 3 --programs testpmd,tricolord-aggregate,tricolord-5tuple > "$OUT/imix.txt" 2>&1 ;;
  *) echo "usage: OUT=DIR bash bench/daemon/lent_machine.sh scaling|swing|steer" >&2; exit 2 ;;
esac
stamp "$1 done" >> "$OUT/machine.txt"
