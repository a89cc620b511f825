#!/bin/bash
# Apache CouchDB 3.3.3's own HTTP test suite (test/elixir) against any CouchDB-compatible server — a real
# CouchDB or `docstore serve` — one module at a time, with a table of passed/failed/skipped per module.
#
# Usage: couchdb_elixir_suite.sh BASE_URL [TEST ...]
#   BASE_URL  e.g. http://127.0.0.1:5984 or http://admin:admin@127.0.0.1:8080
#             credentials in the URL win; otherwise EX_USERNAME/EX_PASSWORD, default admin/admin.
#   TEST      module file name with or without _test / .exs / path / glob, e.g. view_test, 'view_*',
#             reduce. Default: all test/elixir/test/*_test.exs.
# Env: COUCH_DIR (default /opt/couchdb-build/couchdb: a CouchDB 3.3.3 source checkout built with
#      `make release`), MIRRORS (default /work/.mirror: a folder holding git copies of myfreeweb/httpotion
#      and victorolinasc/junit-formatter, as owner+name), LOG_PREFIX (default /tmp/elixir-<label>-, label = couchdb for
#      127.0.0.1:5984, else host_port), EXUNIT_OPTS (extra `mix test` args, e.g. "--seed 0"), TIMEOUT
#      (seconds per module, default 900).
# One `mix test` per module; full output in ${LOG_PREFIX}<module>.log; prints a table and a TOTAL row.
#
# Setup, done once on the first run and nothing of it committed here: the suite's two Hex-only mix
# dependencies (offline here) become `path:` dependencies exported from the mirrors (httpotion 3.1.3,
# junit_formatter 3.0.0) into $COUCH_DIR/../elixir-deps; CouchDB's own Erlang apps, already built by
# `make release`, are linked without recompiling; the hard-coded http://127.0.0.1:15984 of three modules
# becomes EX_COUCH_URL and config_test's node name `_local`. The suite reads EX_COUCH_URL / EX_USERNAME /
# EX_PASSWORD. Don't run two instances at once (they share COUCH_DIR/_build).
set -u
[ $# -ge 1 ] || { sed -n '2,16p' "$0"; exit 2; }
URL=$1; shift
COUCH_DIR=${COUCH_DIR:-/opt/couchdb-build/couchdb}
TESTDIR=$COUCH_DIR/test/elixir/test

# split credentials out of the URL
proto=${URL%%://*}; rest=${URL#*://}
user=${EX_USERNAME:-admin}; pass=${EX_PASSWORD:-admin}
if [[ $rest == *@* ]]; then
  cred=${rest%%@*}; rest=${rest#*@}
  user=${cred%%:*}; [[ $cred == *:* ]] && pass=${cred#*:}
fi
rest=${rest%/}
export EX_COUCH_URL="$proto://$rest" EX_USERNAME="$user" EX_PASSWORD="$pass"
export MIX_ENV=integration
if [ "$rest" = "127.0.0.1:5984" ] || [ "$rest" = "localhost:5984" ]; then label=couchdb; else label=${rest//[:\/]/_}; fi
LOG_PREFIX=${LOG_PREFIX:-/tmp/elixir-$label-}

code=$(curl -s -o /dev/null -w '%{http_code}' -u "$user:$pass" "$EX_COUCH_URL/_session")
[ "$code" = 200 ] || echo "WARNING: GET $EX_COUCH_URL/_session as $user returned HTTP $code" >&2

setup() {
  local deps=$COUCH_DIR/../elixir-deps mirrors=${MIRRORS:-/work/.mirror}
  export_dep() { # name mirror ref
    [ -f "$deps/$1/mix.exs" ] && return 0
    local git=$mirrors/$2/repo; [ -d "$git/.git" ] && git=$git/.git
    [ -d "$git" ] || { echo "setup: $2 is not in $mirrors; fetch github:${2/+//} first" >&2; exit 2; }
    mkdir -p "$deps/$1" && git --git-dir="$git" archive "$3" | tar -x -C "$deps/$1" || exit 2
    # Their own dependencies are dev/test tools from Hex, or ibrowse, which CouchDB's tree provides.
    perl -0pi -e 's/(defp deps do).*?(\n\s*end)/$1\n    []$2/s' "$deps/$1/mix.exs"
  }
  export_dep httpotion myfreeweb+httpotion e181c38
  export_dep junit_formatter victorolinasc+junit-formatter v3.0.0
  deps=$(cd "$deps" && pwd)
  cd "$COUCH_DIR" || exit 2
  if ! grep -q 'elixir-deps' mix.exs; then
    cp -n mix.exs mix.exs.orig
    DEPS=$deps perl -0pi -e '
      s{\{:junit_formatter, "~> 3.0",}{\{:junit_formatter, path: "$ENV{DEPS}/junit_formatter",};
      s{\{:httpotion, ">= 3.1.3",}{\{:httpotion, path: "$ENV{DEPS}/httpotion",};
      s{\s*\{:excoveralls, [^\n]*}{};
      s{,\s*\{:credo, [^\n]*\}}{};
      s{(\{:(?:b64url|jiffy|jwtf|ibrowse), path: path\("\w+"\)(?:, override: true)?)\}}{$1, compile: "true"\}}g;
    ' mix.exs
    grep -q "$deps/httpotion" mix.exs || { echo "setup: could not rewrite $COUCH_DIR/mix.exs" >&2; exit 2; }
  fi
  for f in replication form_submit attachments; do
    sed -i 's|"http://127.0.0.1:15984/"|((System.get_env("EX_COUCH_URL") \|\| "http://127.0.0.1:15984") <> "/")|g;
            s|Referer: "http://127.0.0.1:15984"|Referer: (System.get_env("EX_COUCH_URL") \|\| "http://127.0.0.1:15984")|' \
      "test/elixir/test/${f}_test.exs"
  done
  sed -i 's|/_node/node1@127.0.0.1/_config|/_node/_local/_config|' test/elixir/test/config_test.exs
}
setup

files=()
[ $# -eq 0 ] && set -- '*_test'
for t in "$@"; do
  t=${t##*/}; t=${t%.exs}
  matched=0
  for f in "$TESTDIR"/$t.exs "$TESTDIR"/${t}_test.exs; do [ -f "$f" ] && { files+=("$f"); matched=1; }; done
  [ $matched = 1 ] || echo "WARNING: no test file matches $t" >&2
done
[ ${#files[@]} -gt 0 ] || exit 2

cd "$COUCH_DIR" || exit 2
mix compile >/dev/null 2>&1 || { echo "mix compile failed in $COUCH_DIR" >&2; mix compile; exit 2; }

# The suite's own server settings (test/elixir/test/config/test-config.ini, which `make elixir`
# gives the CouchDB it starts: the authentication handlers, proxy among them), applied to the server
# under test through its configuration API (persisted: the suite reloads the configuration).
python3 - "$EX_COUCH_URL" "$EX_USERNAME" "$EX_PASSWORD" "$TESTDIR/config/test-config.ini" <<'PY'
import base64, configparser, json, sys, urllib.parse, urllib.request
url, user, password, ini = sys.argv[1:5]
parser = configparser.RawConfigParser(); parser.optionxform = str; parser.read(ini)
auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
for section in parser.sections():
    for key, value in parser.items(section):
        path = f"{url}/_node/_local/_config/{urllib.parse.quote(section)}/{urllib.parse.quote(key)}"
        request = urllib.request.Request(path, data=json.dumps(value).encode(), method="PUT",
                                         headers={"Authorization": auth})
        urllib.request.urlopen(request).read()
PY
echo "server: $EX_COUCH_URL (user $EX_USERNAME)   logs: ${LOG_PREFIX}<module>.log"
printf '%-34s %6s %6s %6s %7s %8s %s\n' MODULE TESTS PASSED FAILED SKIPPED EXCLUDED TIME
T=0 P=0 F=0 S=0 X=0 rc=0
for f in "${files[@]}"; do
  m=$(basename "$f" .exs); log=$LOG_PREFIX$m.log
  start=$(date +%s)
  # same flags as `make elixir`, minus dev/run (server is external)
  timeout "${TIMEOUT:-900}" mix test --trace --exclude without_quorum_test --exclude with_quorum_test \
    ${EXUNIT_OPTS:-} "$f" >"$log" 2>&1
  st=$?
  secs=$(( $(date +%s) - start ))
  line=$(grep -E '^[0-9]+ (tests?|propert|doctest)' "$log" | tail -1)
  if [ -z "$line" ]; then
    printf '%-34s %6s %6s %6s %7s %8s %4ss  %s\n' "$m" - - - - - "$secs" "ERROR (exit $st, see log)"
    rc=1; continue
  fi
  n() { echo "$line" | grep -oE "[0-9]+ $1" | head -1 | grep -oE '^[0-9]+' || echo 0; }
  tests=$(n 'tests?'); fail=$(n 'failures?'); skip=$(n skipped); excl=$(n excluded); inval=$(n invalid)
  fail=$((fail + inval)); pass=$((tests - fail - skip - excl))
  T=$((T+tests)) P=$((P+pass)) F=$((F+fail)) S=$((S+skip)) X=$((X+excl))
  note=""; [ $st = 124 ] && note="TIMEOUT"; [ $inval -gt 0 ] && note="$note ($inval invalid: setup_all failed)"
  [ $fail -gt 0 ] && rc=1
  printf '%-34s %6s %6s %6s %7s %8s %4ss %s\n' "$m" "$tests" "$pass" "$fail" "$skip" "$excl" "$secs" "$note"
done
printf '%-34s %6s %6s %6s %7s %8s\n' TOTAL "$T" "$P" "$F" "$S" "$X"
echo "(EXCLUDED = tagged :pending / quorum tests, not run; SKIPPED = @tag :skip)"
exit $rc
