#!/usr/bin/env bash
# Runs every fuzz target (Sources/DocStoreFuzzing) under libFuzzer with AddressSanitizer, each for the
# given time, starting from its seed corpus in Tests/Fixtures/fuzz/<target>. New inputs that widen
# coverage go to a working corpus under .build-fuzz/corpus (not committed); an input that crashes or
# breaks a property is left in .build-fuzz/artifacts/<target>/ — copy it into the target's fixture
# folder as `regression-<what>` so that `swift test` (FuzzCorpusTests) replays it from then on.
#
# Usage: Tests/Fuzz/run.sh [seconds per target, default 60] [target…]
# (`--sanitize=fuzzer` makes SwiftPM link libFuzzer's `main`; it also hands swiftc one `-sanitize=` flag
# per sanitizer, of which swiftc keeps the last, so `--sanitize=address` beside it would drop the
# coverage. `-Xswiftc -sanitize=fuzzer,address`, which comes last, asks for both.)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(json multipart mango full-text revisions query-string http); fi

swift build --product docstore-fuzz --scratch-path .build-fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
binary="$(swift build --product docstore-fuzz --scratch-path .build-fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING --show-bin-path)/docstore-fuzz"

# libFuzzer checks for leaks after inputs that allocate more than they free; the suppressions are the
# suite's (Tests/Sanitizers/lsan.supp: memory live but unseen, and libraries' own leaks).
export LSAN_OPTIONS="suppressions=$PWD/Tests/Sanitizers/lsan.supp:print_suppressions=0"
status=0
for target in "${targets[@]}"; do
    corpus=".build-fuzz/corpus/$target"
    artifacts=".build-fuzz/artifacts/$target/"
    mkdir -p "$corpus" "$artifacts"
    log=".build-fuzz/$target.log"
    if SWIFT_BACKTRACE=enable=no DOCSTORE_FUZZ_TARGET="$target" "$binary" "$corpus" "Tests/Fixtures/fuzz/$target" -max_total_time="$seconds" \
        -rss_limit_mb=4096 -max_len=65536 -timeout=60 -print_final_stats=1 -artifact_prefix="$artifacts" > "$log" 2>&1; then
        result="ok"
    else
        result="FAILED (see $log and $artifacts)"
        status=1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || echo "cov: ?")
    printf '%-10s %s runs in %ss, %s, corpus %s inputs: %s\n' "$target" "$runs" "$seconds" "$coverage" "$(ls "$corpus" | wc -l)" "$result"
done
exit $status
