#!/usr/bin/env bash
# asgd calibrate's cores probe (interleaved rounds, their median) and
# tools/validate_model.py's rounds: lines with one label are rounds of one
# configuration, the row is the round of median ratio, exit 1 when a row is out;
# validate_model.sh -R refuses a folder that is no earlier study, or the -o folder.
# Usage: validate_rounds.sh ASGD MPIEXEC
set -uo pipefail
asgd=$1 mpiexec=$2
source "$(dirname "$0")/expect_lib.sh"
root="$(cd "$(dirname "$0")/../.." && pwd)"

# validate_model.sh -R: an earlier study's folder without its files, or the same folder as -o:
# one line, exit 2, before any run
for bad in "-R $work/none" "-R $work -o $work"; do
  mkdir -p "$work"
  [[ $bad == *"-o"* ]] && { : >"$work/pairs.tsv"; : >"$work/profile.yaml"; }
  # shellcheck disable=SC2086
  ASGD="$asgd" timeout 60 "$root/tools/validate_model.sh" $bad >"$work/out" 2>"$work/err"
  rc=$?
  if (( rc == 2 )) && [[ $(wc -l <"$work/err") == 1 ]] && grep -q -- '-R' "$work/err" && [[ ! -s $work/out ]]; then
    pass "validate_model.sh $bad: refused"
  else
    fail "validate_model.sh $bad: rc=$rc $(cat "$work/err")"
  fi
  rm -f "$work/pairs.tsv" "$work/profile.yaml"
done

have_h5py || { echo "skipped: no h5py for /usr/bin/python3"; exit 77; }

if ! timeout 300 "$asgd" calibrate --out "$work/p1.yaml" --models mlp --batch 16 --steps 4 --mpiexec "$mpiexec" \
    >"$work/cal.log" 2>&1; then
  fail "calibrate: $(tail -3 "$work/cal.log")"
else
  line=$(grep '^waiting_rank_load:' "$work/p1.yaml")
  load=$(sed -n 's/^waiting_rank_load: {value: \([0-9.e+-]*\),.*/\1/p' <<<"$line")
  cores=$(sed -n 's/^cores: {value: \([0-9]*\),.*/\1/p' "$work/p1.yaml")
  # the note's figures are the load's: on CORES ranks, cores x (together / alone - 1)
  # a phase is half --steps minibatches, or as many as take 0.25 s (mlp's are far shorter)
  if grep -q '5 interleaved rounds of [0-9]* minibatches of mlp at batch 16' <<<"$line" &&
     /usr/bin/python3 -c 'import re, sys
line, load, cores = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
m = re.search(r"then on (\d+) ranks at once .* median alone ([0-9.e+-]+) ms, together ([0-9.e+-]+) ms", line)
per = int(re.search(r"rounds of (\d+) minibatches", line).group(1))
want = min(1.0, max(0.0, cores * (float(m.group(3)) / float(m.group(2)) - 1)))
sys.exit(not (int(m.group(1)) == cores and abs(want - load) < 1e-6 + 1e-6 * load and 0 <= load <= 1
              and per > 2 and per * float(m.group(2)) > 100))' \
       "$line" "$load" "$cores"; then
    pass "cores probe: 5 interleaved rounds, load $load"
  else
    fail "cores probe: $line"
  fi
  # compute: 5 rounds of --steps 4 of mlp's sub-millisecond minibatches, or as many as take 0.5 s
  n=$(sed -n 's/^ *seconds: {value: .*: 5 rounds of .* of mlp .*; \([0-9]*\) timed in all,.*/\1/p' "$work/p1.yaml")
  s=$(sed -n 's/^ *seconds: {value: \([0-9.e+-]*\),.*/\1/p' "$work/p1.yaml")
  if [[ $n =~ ^[0-9]+$ ]] && /usr/bin/python3 -c 'import sys; n, s = int(sys.argv[1]), float(sys.argv[2])
sys.exit(not (n > 20 and n * s >= 5 * 0.5 * 0.8))' "$n" "$s"; then
    pass "compute: $n minibatches timed in 5 rounds (at least 0.5 s each)"
  else
    fail "compute: '$n' minibatches of $s s each"
  fi
  # the same profile at twice the compute: a run half as fast
  /usr/bin/python3 -c 'import re, sys
print(re.sub(r"(seconds: \{value: )([0-9.e+-]+)", lambda m: m.group(1) + repr(2 * float(m.group(2))),
             open(sys.argv[1]).read()), end="")' "$work/p1.yaml" >"$work/p2.yaml"
  for k in 1 2; do
    timeout 120 "$asgd" train --model mlp --batch 16 --learners 2 --protocol softsync --max-steps 200 --seed 7 \
      --virtual --timing normal --profile "$work/p$k.yaml" --results "$work/r" --suite "p$k" -q >"$work/v$k.log" 2>&1 ||
      fail "virtual run on p$k: $(tail -2 "$work/v$k.log")"
    eval "v$k=\$(sed -n 's/.*results \(.*\.h5\)$/\1/p' \"\$work/v$k.log\" | tail -1)"
  done
  # rounds of one configuration: ratios r > 1.1, 1 and 1 / r: the median round (1), neither the first nor the last
  printf 'mlp rounds\t%s\t%s\nmlp rounds\t%s\t%s\nmlp rounds\t%s\t%s\n' "$v1" "$v2" "$v1" "$v1" "$v2" "$v1" \
    >"$work/pairs.tsv"
  if /usr/bin/python3 "$root/tools/validate_model.py" "$work/pairs.tsv" >"$work/t.md" 2>&1 &&
     grep -qE '^\| mlp rounds \| [0-9]+ \| [0-9]+ \| 1\.000 \(0\.[0-8][0-9]*\.\.(1\.[1-9]|[2-9]\.)[0-9]*\) \| .* \| yes \|' "$work/t.md" &&
     grep -q 'up to 3 rounds a run' "$work/t.md"; then
    pass "validate_model.py: the median of three rounds"
  else
    fail "validate_model.py rounds: $(cat "$work/t.md")"
  fi
  # one round of ratio r: out of bounds, exit 1
  printf 'mlp once\t%s\t%s\n' "$v1" "$v2" >"$work/pairs.tsv"
  /usr/bin/python3 "$root/tools/validate_model.py" "$work/pairs.tsv" >"$work/t.md" 2>&1
  rc=$?
  if (( rc == 1 )) && grep -qE '^\| mlp once \| [0-9]+ \| [0-9]+ \| (1\.[1-9]|[2-9]\.)[0-9]* \| .* \| NO \|' "$work/t.md" &&
     ! grep -q 'rounds a run' "$work/t.md"; then
    pass "validate_model.py: one round out of bounds, exit 1"
  else
    fail "validate_model.py one round: rc=$rc $(cat "$work/t.md")"
  fi
  # a line without a real run: one line naming it
  printf 'mlp none\t%s\n' "$v1" >"$work/pairs.tsv"
  /usr/bin/python3 "$root/tools/validate_model.py" "$work/pairs.tsv" >"$work/t.md" 2>"$work/err"
  rc=$?
  if (( rc != 0 )) && [[ $(wc -l <"$work/err") == 1 ]] && grep -q "'mlp none' has no real run" "$work/err"; then
    pass "validate_model.py: a line without a real run"
  else
    fail "validate_model.py no real run: rc=$rc $(cat "$work/err")"
  fi
fi
echo "$passed passed, $failures failed"
(( failures == 0 ))
