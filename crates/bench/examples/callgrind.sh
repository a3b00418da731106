#!/usr/bin/env bash
# Instructions inside redis-server for one contender on 20,000 seeded jobs (BENCHMARKS.md,
# "Instructions per job"). Usage, from the repository's root after
# `cargo build -p bullsweep && cargo build -p bullsweep-bench --example cg_seed`:
#   crates/bench/examples/callgrind.sh <label> seed|bullsweep|sweep:<budget µs>|clean250|clean0 [jobs] [job bytes]
# Writes callgrind files in target/cg: <label>.out.1 the seeding, <label>.out.2 the contender
# (from the end of the seeding to the end of the contender; for `seed`, the same idle moment),
# <label>.out the listing of the keys left (<label>.keys) and the shutdown. Prints the totals.
set -euo pipefail
label=$1 what=$2 jobs=${3:-20000} bytes=${4:-1500}
root=$(pwd) out=$(pwd)/target/cg
mkdir -p "$out"
rm -f "$out/$label".out*
port=$((20000 + RANDOM % 20000))
while redis-cli -p "$port" ping >/dev/null 2>&1; do port=$((20000 + RANDOM % 20000)); done
dir=$(mktemp -d)
valgrind --tool=callgrind --dump-instr=no --callgrind-out-file="$out/$label.out" \
  /usr/bin/redis-server --port "$port" --save '' --appendonly no --dir "$dir" \
  >"$dir/valgrind.log" 2>&1 &
pid=$!
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.5; done
url="redis://127.0.0.1:$port"
"$root/target/debug/examples/cg_seed" "$url" "$jobs" "$bytes"
callgrind_control --dump=seeded "$pid" >/dev/null 2>&1
case $what in
  seed) ;;
  bullsweep)
    cat >"$dir/policy.yaml" <<'YAML'
version: 1
policies:
  - { name: bench, queueNamePattern: bench, rules: { completed: { maxAge: 1ms } } }
YAML
    "$root/target/debug/bullsweep" run --redis "$url" --config "$dir/policy.yaml" --queue bench \
      >"$dir/run.log" 2>&1 || { cat "$dir/run.log"; exit 1; } ;;
  sweep:*)
    # The same sweep with a budget of N microseconds per call (examples/cg_sweep.rs says why).
    "${CG_SWEEP:-$root/target/debug/examples/cg_sweep}" "$url" "${what#sweep:}" >"$dir/run.log" 2>&1 \
      || { cat "$dir/run.log"; exit 1; } ;;
  clean250|clean0)
    limit=${what#clean}
    (cd "$root/tests/compat" && { sleep 1; echo go; } | node bench/clean.js 127.0.0.1 "$port" 0 bench "$limit") ;;
  *) echo "unknown contender $what" >&2; exit 2 ;;
esac
callgrind_control --dump=contender "$pid" >/dev/null 2>&1
redis-cli -p "$port" --scan | sort >"$out/$label.keys"
echo "$label: $(wc -l <"$out/$label.keys") keys left, completed set $(redis-cli -p "$port" zcard bull:bench:completed)"
echo "$label: $(redis-cli -p "$port" info commandstats | grep -E '^cmdstat_evalsha:' | tr -d '\r')"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" || true
rm -rf "$dir"
total() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
seeded=$(total "$out/$label.out.1") ran=$(total "$out/$label.out.2") rest=$(total "$out/$label.out")
echo "$label: seeding $seeded, contender $ran, listing and shutdown $rest Ir"
