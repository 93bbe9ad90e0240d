#!/usr/bin/env bash
# tools/measure.py on a copy of docs/MEASUREMENTS.md: a per-CPU section run on a
# CPU the page has no block for adds one after the section's other blocks, and
# a second run replaces it; the hand-written text around the blocks and other
# CPUs' blocks stay as they were; a section that fails keeps its block and the
# script exits 1; an unknown section or a bad tag is refused with one line
# (exit 2) before anything runs; --check names a missing block and a block
# whose tag does not fit its section.
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

blk() { sed -n "/^<!-- measure:$1 -->\$/,/^<!-- \/measure:$1 -->\$/p" "$2"; }
nblocks() { grep -c '^<!-- measure:' "$1"; }
before=$(nblocks "$page")
intel=$(blk machine@intel-xeon "$page")
[[ -n $intel ]] || fail "the page has no machine@intel-xeon block"
last=$(grep -o '^<!-- /measure:machine@[a-z0-9-]* -->$' "$page" | tail -1 | sed 's/^<!-- \/measure://; s/ -->$//')
# A CPU the page has no block for: a block is added after the section's others.
"$py" "$src/tools/measure.py" --page "$page" --only machine --tag test-cpu --build "$build" --work "$work/w" 2>"$work/err" ||
  { cat "$work/err"; fail "the machine section did not run"; }
block=$(blk machine@test-cpu "$page")
grep -qE '^Measured with `<build>/asgd info` \([0-9]+ s\) on .+, BLAS kernel .+, commit [0-9a-f]{7}.*, [0-9]{4}-[0-9]{2}-[0-9]{2}\.$' \
  <<<"$block" || fail "no header line in the new machine block: $block"
grep -q '^asgd-bench ' <<<"$block" || fail "the machine block lacks asgd info's output"
[[ $(nblocks "$page") == $((before + 1)) ]] || fail "a new CPU's run did not add exactly one block"
[[ $(blk machine@intel-xeon "$page") == "$intel" ]] || fail "another CPU's block changed"
grep -A1 "^<!-- /measure:$last -->\$" "$page" | grep -q '^<!-- measure:machine@test-cpu -->$' ||
  fail "the new block is not right after the section's last block ($last)"
outside "$page" | cmp -s - "$work/outside.before" || fail "text outside the blocks changed"
# The same CPU again: its block is replaced, none added.
"$py" "$src/tools/measure.py" --page "$page" --only machine --tag test-cpu --build "$build" --work "$work/w" 2>"$work/err" ||
  { cat "$work/err"; fail "the machine section did not run twice"; }
[[ $(nblocks "$page") == $((before + 1)) ]] || fail "a second run on the same CPU added a block"
"$py" "$src/tools/measure.py" --page "$page" --check || fail "--check refused the page just written"
cp "$page" "$work/good.md"

mkdir -p "$work/bad"
printf '#!/bin/sh\nexit 3\n' >"$work/bad/asgd"
chmod +x "$work/bad/asgd"
"$py" "$src/tools/measure.py" --page "$page" --only machine --tag test-cpu --build "$work/bad" --work "$work/w" 2>"$work/err"
rc=$?
[[ $rc == 1 ]] || fail "a failing section exited $rc, want 1"
grep -q "machine: .*exited 3.*its block is left as it was" "$work/err" || fail "no line naming the failure: $(cat "$work/err")"
cmp -s "$page" "$work/good.md" || fail "a failing section changed the page"

"$py" "$src/tools/measure.py" --page "$page" --only machine,nosuch --build "$build" 2>"$work/err"
rc=$?
[[ $rc == 2 && $(wc -l <"$work/err") == 1 ]] || fail "--only nosuch: exit $rc, $(cat "$work/err")"
grep -q "no section 'nosuch'" "$work/err" || fail "--only nosuch: $(cat "$work/err")"
cmp -s "$page" "$work/good.md" || fail "a refused command changed the page"

"$py" "$src/tools/measure.py" --page "$page" --only machine --tag 'Bad Tag' --build "$build" 2>"$work/err"
rc=$?
[[ $rc == 2 && $(wc -l <"$work/err") == 1 ]] || fail "--tag 'Bad Tag': exit $rc, $(cat "$work/err")"
grep -q -- "--tag 'Bad Tag'" "$work/err" || fail "--tag: $(cat "$work/err")"
cmp -s "$page" "$work/good.md" || fail "a refused tag changed the page"

sed '/^<!-- measure:suites -->/,/^<!-- \/measure:suites -->/d' "$page" >"$work/missing.md"
"$py" "$src/tools/measure.py" --page "$work/missing.md" --check 2>"$work/err" && fail "--check passed a page without a block"
grep -q "no block for section 'suites'" "$work/err" || fail "--check: $(cat "$work/err")"
sed 's/measure:micro@intel-xeon -->/measure:micro -->/' "$page" >"$work/untagged.md"
"$py" "$src/tools/measure.py" --page "$work/untagged.md" --check 2>"$work/err" && fail "--check passed a per-CPU block without its tag"
grep -q "block 'micro': section 'micro' keeps one block per CPU" "$work/err" || fail "--check: $(cat "$work/err")"
sed 's/measure:transport -->/measure:transport@intel-xeon -->/' "$page" >"$work/tagged.md"
"$py" "$src/tools/measure.py" --page "$work/tagged.md" --check 2>"$work/err" && fail "--check passed a tag on a one-block section"
grep -q "block 'transport@intel-xeon'" "$work/err" || fail "--check: $(cat "$work/err")"
# The default tag: the model name's first two words, '-avx2' for a CPU without AVX-512.
PYTHONDONTWRITEBYTECODE=1 "$py" - "$src/tools" <<'PY' || fail "cpu_tag"
import sys
sys.path.insert(0, sys.argv[1])
from measure import cpu_tag
cases = [("AMD EPYC", {"avx2", "avx512f"}, "amd-epyc"), ("AMD EPYC", {"avx2"}, "amd-epyc-avx2"),
         ("Intel(R) Xeon(R) Processor", {"avx512f"}, "intel-xeon"),
         ("AMD EPYC 7763 64-Core Processor", {"avx2"}, "amd-epyc-avx2")]
for cpu, flags, want in cases:
    got = cpu_tag(cpu, flags)
    assert got == want, f"cpu_tag({cpu!r}, {sorted(flags)}) = {got!r}, want {want!r}"
PY
echo "measure.py: per-CPU block added then replaced, failure kept the page, bad section and tag refused, check ok, the default tags"
