#!/usr/bin/env bash
# Every file of tests/data/bad_suites is refused by `asgd sweep plan`: exit 2
# (bad input), stderr starting with "asgd: error: <file>:" and holding every
# `# expect:` text of the file, and nothing planned. The corpus must hold
# exactly as many files as BadSuites.Corpus (tests/unit/test_suite.cpp) says.
#   usage: bad_suites.sh ASGD_BINARY
set -uo pipefail
asgd=${1:?usage: bad_suites.sh ASGD_BINARY}
dir=$(cd "$(dirname "$0")/../data/bad_suites" && pwd)
want=35
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passed=0
shopt -s nullglob
files=("$dir"/*.yaml)
if (( ${#files[@]} != want )); then
  echo "FAIL: ${#files[@]} files in $dir, want $want"; failures=$((failures + 1))
fi
for f in "${files[@]}"; do
  name=$(basename "$f")
  timeout 60 "$asgd" sweep plan "$f" --results "$work/r" >"$work/out" 2>"$work/err"
  rc=$?
  problems=()
  (( rc == 2 )) || problems+=("exit $rc, want 2")
  grep -qF -- "asgd: error: $f:" "$work/err" || problems+=("stderr does not name the file")
  while IFS= read -r x; do
    grep -qF -- "$x" "$work/err" || problems+=("missing '$x'")
  done < <(sed -n 's/^# expect: //p' "$f")
  [[ -e $work/r ]] && problems+=("it wrote $work/r")
  if (( ${#problems[@]} )); then
    echo "FAIL $name: ${problems[*]}"; head -c 800 "$work/err"; echo
    failures=$((failures + 1))
  else
    echo "ok   $name (exit $rc)"
    passed=$((passed + 1))
  fi
done
echo "$passed passed, $failures failed"
(( failures == 0 ))
