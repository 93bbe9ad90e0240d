# Sourced by the bad-input scripts: a scratch folder ($work, removed on exit),
# counters and expect_error / pass / fail. Needs $asgd set.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passed=0 skipped=0
export OPENBLAS_NUM_THREADS=1

# expect_error NAME PATTERN -- COMMAND...: exit 2 (bad input), one stderr line
# of at most 2000 bytes matching PATTERN, within 60 s (a busy loop fails).
expect_error() {
  local name=$1 pattern=$2
  shift 3
  timeout 60 "$@" >"$work/out" 2>"$work/err"
  local rc=$? lines bytes
  lines=$(wc -l <"$work/err")
  bytes=$(wc -c <"$work/err")
  # one line of UTF-8 text, whatever bytes the input held
  if (( rc != 2 )) || (( lines != 1 )) || (( bytes > 2000 )) || ! grep -qE -- "$pattern" "$work/err" ||
     ! iconv -f UTF-8 -t UTF-8 "$work/err" >/dev/null 2>&1; then
    echo "FAIL $name: rc=$rc (want 2), $lines stderr lines, $bytes bytes, want /$pattern/ in UTF-8:"
    head -c 600 "$work/err"; echo
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
    passed=$((passed + 1))
  fi
}
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
pass() { echo "ok   $*"; passed=$((passed + 1)); }
have_h5py() { /usr/bin/python3 -c "import h5py, numpy" 2>/dev/null; }
