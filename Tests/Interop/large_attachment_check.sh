#!/usr/bin/env bash
# A 200 MB attachment through `docstore serve` and `docstore replicate`: a streamed PUT, a GET back,
# server -> local -> another server, each byte-exact; the first server's resident memory may grow by
# less than 64 MB, and each `docstore replicate` process may peak under 160 MB.
#
# Usage: large_attachment_check.sh PATH_TO_DOCSTORE_BINARY
# Prints one line per check and "N passed, M failed"; exits non-zero if any failed. Needs curl and
# about 1.2 GB of free disk in $TMPDIR.
set -u
binary=$(realpath "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/docstore-large-XXXXXX")
trap 'kill -INT $serverA $serverB 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
passed=0
failed=0
check() {  # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}
kib() { awk -v field="$2:" '$1 == field { print $2 }' "/proc/$1/status"; }
start_server() {  # start_server NAME -> prints the port
    "$binary" serve --data "$work/$1" --port 0 --admin admin:secret > "$work/$1.log" 2>&1 &
    echo $! > "$work/$1.pid"
    for _ in $(seq 100); do
        port=$(grep -o 'http://127.0.0.1:[0-9]*/' "$work/$1.log" | head -1 | sed 's/.*:\([0-9]*\)\//\1/')
        [ -n "$port" ] && { echo "$port"; return; }
        sleep 0.1
    done
}

head -c 209715200 /dev/urandom > "$work/original.bin"
original=$(md5sum < "$work/original.bin")
portA=$(start_server a); serverA=$(cat "$work/a.pid")
portB=$(start_server b); serverB=$(cat "$work/b.pid")
A="http://admin:secret@127.0.0.1:$portA"
B="http://admin:secret@127.0.0.1:$portB"
curl -sf -X PUT "$A/big" > /dev/null && curl -sf -X PUT "$B/big" > /dev/null
before=$(kib "$serverA" VmRSS)

put=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Content-Type: application/octet-stream" \
    --data-binary @"$work/original.bin" "$A/big/video/video.bin")
check "streamed PUT of 200 MB answers 201 (got $put)" test "$put" = 201
curl -sf -o "$work/back.bin" "$A/big/video/video.bin"
check "GET gives the 200 MB back byte-exact" test "$(md5sum < "$work/back.bin")" = "$original"
growth=$(( ($(kib "$serverA" VmHWM) - before) / 1024 ))
check "the server's resident memory grew by $growth MB (< 64 MB)" test "$growth" -lt 64

replicate() {  # replicate SOURCE TARGET -> prints the peak RSS in MB, or FAIL
    /usr/bin/time -f "%M" -o "$work/time.txt" "$binary" replicate "$1" "$2" --create-target > "$work/replicate.log" 2>&1 \
        && echo $(( $(tail -1 "$work/time.txt") / 1024 )) || echo FAIL
}
pull=$(replicate "$A/big" "$work/local/big")
check "docstore replicate server -> local peaked at $pull MB (< 160 MB)" test "$pull" != FAIL -a "${pull/FAIL/999}" -lt 160
push=$(replicate "$work/local/big" "$B/big")
check "docstore replicate local -> server peaked at $push MB (< 160 MB)" test "$push" != FAIL -a "${push/FAIL/999}" -lt 160
curl -sf -o "$work/other.bin" "$B/big/video/video.bin"
check "the other server gives the 200 MB back byte-exact" test "$(md5sum < "$work/other.bin")" = "$original"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
