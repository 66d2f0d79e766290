#!/usr/bin/env bash
# Runs every benchmark and budget check, and rewrites benches/RESULTS.md.
#   benches/run.sh          whole-process budgets, the 20,000-pass daemon run, the 200-labeler load
#                           run, micro-benchmarks
#   benches/run.sh --soak   also the 30-minute soak test (ignored in normal test runs)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --workspace
# Budgets (each exits non-zero when missed): one-shot RSS, NVML calls per pass against the derived
# minimum, daemon heap flat, API writes = label changes, CPU per pass.
cargo bench --bench process
cargo bench --bench daemon
# 200 labelers against one mocked API server: idle cost, writes per change, drift repair, relists.
cargo bench --bench load
# Timings for the hot functions (criterion; reports under target/criterion/).
cargo bench --bench micro -- --warm-up-time 1 --measurement-time 3 | tee target/micro.txt
{
  echo
  echo "# Micro-benchmarks"
  echo
  echo '`cargo bench --bench micro` (criterion, median):'
  echo
  awk '/^[a-z]+\// {name = $1} /time:/ {
    match($0, /\[[^]]*\]/); split(substr($0, RSTART + 1, RLENGTH - 2), v, " ")
    printf "- `%s`: %s %s\n", name, v[3], v[4]
  }' target/micro.txt
} >> benches/RESULTS.md

if [[ "${1:-}" == "--soak" ]]; then
  cargo test --release --test local -- soak:: --ignored --nocapture
fi
echo "benches/RESULTS.md updated"
