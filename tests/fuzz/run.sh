#!/usr/bin/env bash
# Runs every libFuzzer target briefly from its seed corpus (a scratch copy: the repository's corpus is
# never written). Fails on the first crash, leak, timeout or broken invariant, leaving the reproducer
# in the scratch folder it names.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET]
set -euo pipefail
build_dir=$1
seconds=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d -t tricolor-fuzz-XXXXXX)
status=0
for target in fuzz_parse fuzz_language fuzz_capture fuzz_protocol fuzz_http; do
  corpus="$scratch/$target"
  mkdir -p "$corpus"
  cp -r "$here/corpus/$target/." "$corpus/"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$scratch/$target-")
  [ -f "$here/$target.dict" ] && args+=(-dict="$here/$target.dict")
  if "$build_dir/tests/fuzz/$target" "${args[@]}" "$corpus" >"$scratch/$target.log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$target.log" | grep -o '[0-9]*$')
    cov=$(grep -o 'cov: [0-9]*' "$scratch/$target.log" | tail -1 | grep -o '[0-9]*')
    echo "fuzz: $target ok, $runs runs in ${seconds}s, coverage $cov"
  else
    echo "fuzz: $target FAILED; log and reproducer in $scratch"
    tail -40 "$scratch/$target.log"
    status=1
  fi
done
[ "$status" -eq 0 ] && rm -rf "$scratch"
exit "$status"
