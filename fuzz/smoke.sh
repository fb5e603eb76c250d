#!/usr/bin/env bash
# Fuzz smoke test for CI: build every fuzz target and run each for a few seconds (about a
# minute and a quarter in all, plus the build), after replaying the inputs that once failed.
# Exits non-zero if a target fails to build or finds anything; a finding's reproducer is left
# under fuzz/artifacts/<target>/.
#
# Needs the nightly toolchain (cargo-fuzz builds with sanitizers); installs cargo-fuzz when
# it is missing. FUZZ_SECONDS overrides the time per target (default 15).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-15}"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz smoke: the nightly toolchain is required (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo +nightly fuzz --help >/dev/null 2>&1; then
    cargo install --locked cargo-fuzz
fi

cargo +nightly fuzz build

# A scratch corpus per target, so a CI run neither reads nor grows fuzz/corpus/.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

failed=()
for target in $(cargo +nightly fuzz list); do
    mkdir -p "$scratch/$target"
    # Inputs that once failed (fuzz/regressions/<target>/) run first: libFuzzer reads every
    # corpus directory given and writes new inputs to the first one only.
    corpora=("$scratch/$target")
    if [[ -d "fuzz/regressions/$target" ]]; then
        corpora+=("fuzz/regressions/$target")
    fi
    echo "fuzz smoke: $target for ${seconds}s"
    if ! cargo +nightly fuzz run "$target" "${corpora[@]}" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        >"$scratch/$target.log" 2>&1; then
        failed+=("$target")
        tail -n 60 "$scratch/$target.log" >&2
    fi
    grep -E '^stat::number_of_executed_units' "$scratch/$target.log" || true
done

if ((${#failed[@]})); then
    echo "fuzz smoke: findings or failures in: ${failed[*]} (reproducers under fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz smoke: all targets ran clean"
