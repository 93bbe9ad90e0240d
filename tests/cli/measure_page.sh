#!/usr/bin/env bash
# tools/measure.py on a copy of docs/MEASUREMENTS.md: a section's block is
# replaced by its commands' output under the header line and the hand-written
# text around the blocks stays as it was; a section that fails keeps its
# block and the script exits 1; an unknown section is refused with one line
# (exit 2) before anything runs; --check names a missing block.
#   usage: measure_page.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=${1:?usage: measure_page.sh BUILD_DIR SOURCE_DIR}
src=${2:?source dir}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
page=$work/page.md
cp "$src/docs/MEASUREMENTS.md" "$page"
outside() { sed '/^<!-- measure:/,/^<!-- \/measure:/d' "$1"; }
outside "$page" >"$work/outside.before"

"$py" "$src/tools/measure.py" --page "$page" --only machine --build "$build" --work "$work/w" 2>"$work/err" ||
  { cat "$work/err"; fail "the machine section did not run"; }
block=$(sed -n '/^<!-- measure:machine -->/,/^<!-- \/measure:machine -->/p' "$page")
grep -qE '^Measured with `<build>/asgd info` \([0-9]+ s\) on .+, BLAS kernel .+, commit [0-9a-f]{7}.*, [0-9]{4}-[0-9]{2}-[0-9]{2}\.$' \
  <<<"$block" || fail "no header line in the machine block: $block"
grep -q '^asgd-bench ' <<<"$block" || fail "the machine block lacks asgd info's output"
outside "$page" | cmp -s - "$work/outside.before" || fail "text outside the blocks changed"
"$py" "$src/tools/measure.py" --page "$page" --check || fail "--check refused the page just written"
cp "$page" "$work/good.md"

mkdir -p "$work/bad"
printf '#!/bin/sh\nexit 3\n' >"$work/bad/asgd"
chmod +x "$work/bad/asgd"
"$py" "$src/tools/measure.py" --page "$page" --only machine --build "$work/bad" --work "$work/w" 2>"$work/err"
rc=$?
[[ $rc == 1 ]] || fail "a failing section exited $rc, want 1"
grep -q "machine: .*exited 3.*its block is left as it was" "$work/err" || fail "no line naming the failure: $(cat "$work/err")"
cmp -s "$page" "$work/good.md" || fail "a failing section changed the page"

"$py" "$src/tools/measure.py" --page "$page" --only machine,nosuch --build "$build" 2>"$work/err"
rc=$?
[[ $rc == 2 && $(wc -l <"$work/err") == 1 ]] || fail "--only nosuch: exit $rc, $(cat "$work/err")"
grep -q "no section 'nosuch'" "$work/err" || fail "--only nosuch: $(cat "$work/err")"
cmp -s "$page" "$work/good.md" || fail "a refused command changed the page"

sed '/^<!-- measure:suites -->/,/^<!-- \/measure:suites -->/d' "$page" >"$work/missing.md"
"$py" "$src/tools/measure.py" --page "$work/missing.md" --check 2>"$work/err" && fail "--check passed a page without a block"
grep -q "no block for section 'suites'" "$work/err" || fail "--check: $(cat "$work/err")"
echo "measure.py: block written, failure kept the page, bad section refused, check ok"
