#!/usr/bin/env bash
# Hostile values in the scripts of `asgd sweep submit`, without a real Slurm:
# sbatch, srun, scontrol, squeue and module are stubs on PATH that only log
# their arguments (sbatch also splits the #SBATCH lines of the script it is
# given the way sbatch does, and logs those arguments too).
#  1. --results and every site-file value hold $(...), backticks, ;, &&, ',
#     ", #, % and spaces: submit works (through the sbatch stub and with
#     --dry-run), running every generated script with bash creates no marker
#     file, and srun / module / sbatch receive each hostile string as one
#     literal argument.
#  2. A control character (newline, carriage return, tab, 0x7f) in --results
#     or in a site value is refused: exit 2, one line naming the flag or
#     file:line: key, and no script written.
#   usage: injection.sh ASGD_BINARY
set -uo pipefail
asgd=${1:?usage: injection.sh ASGD_BINARY}
asgd=$(realpath "$asgd")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; passed=$((passed + 1)); }

# ---- stubs: each call writes its argv, NUL-separated, to log/<name>.<n>
mkdir -p "$work/bin" "$work/log" "$work/cwd"
export STUB_LOG=$work/log
stub_common='
n=$(ls "$STUB_LOG" | grep -c "^$name\.")
out=$STUB_LOG/$name.$n
: >"$out"
for a in "$@"; do printf "%s\0" "$a" >>"$out"; done'
for name in srun scontrol squeue module; do
  printf '#!/usr/bin/env bash\nname=%s\n%s\nexit 0\n' "$name" "$stub_common" >"$work/bin/$name"
done
# sbatch: logs its argv, then the #SBATCH arguments of the script (last
# argument) as sbatch's parser splits them, to log/sbatch-args.<n>; prints a
# job id as `sbatch --parsable` does; `--test-only` says a shape fits.
cat >"$work/bin/sbatch" <<EOF
#!/usr/bin/env bash
# --test-only (submit asks whether each shape fits before it makes anything): it fits
[[ \$1 == --test-only ]] && { echo "sbatch: Job 4199 to start at now" >&2; exit 0; }
name=sbatch
$stub_common
bash "$work/bin/sbatch-args" "\${@: -1}" >"\$STUB_LOG/sbatch-args.\$n" || exit 1
echo \$((4200 + n))
EOF
# The #SBATCH parser of sbatch (Slurm 17.11 and later, src/sbatch/opt.c):
# directives are read up to the first line that is not a comment; after
# "#SBATCH", arguments are separated by unquoted whitespace, ' and " quote,
# a backslash makes the next character literal (inside quotes too), an
# unquoted # ends the line, an unmatched quote is fatal.
cat >"$work/bin/sbatch-args" <<'EOF'
#!/usr/bin/env bash
while IFS= read -r line || [[ -n $line ]]; do
  [[ $line =~ ^[[:space:]]*$ ]] && continue
  [[ $line == \#* ]] || break
  [[ $line == '#SBATCH'* ]] || continue
  rest=${line#'#SBATCH'}
  i=0; len=${#rest}
  while :; do
    while ((i < len)) && [[ ${rest:i:1} == [[:space:]] ]]; do i=$((i + 1)); done
    ((i < len)) || break
    arg=""; any=0; quoted=0; q=""; esc=0; comment=0
    while ((i < len)); do
      c=${rest:i:1}
      if ((quoted == 0)) && [[ $c == [[:space:]] ]]; then break; fi
      i=$((i + 1))
      if ((esc)); then esc=0
      elif [[ $c == '\' ]]; then esc=1; continue
      elif ((quoted)); then
        if [[ $c == "$q" ]]; then quoted=0; continue; fi
      elif [[ $c == "'" || $c == '"' ]]; then quoted=1; q=$c; continue
      elif [[ $c == '#' ]]; then comment=1; break
      fi
      arg+=$c; any=1
    done
    ((quoted)) && { echo "sbatch: unmatched $q in [$line]" >&2; exit 1; }
    ((any)) && printf '%s\0' "$arg"
    ((comment || !any)) && break
  done
done <"$1"
EOF
chmod +x "$work/bin/"*
export PATH=$work/bin:$PATH

# args FILE -> the logged arguments, one per array element
args() { mapfile -d '' -t A <"$1"; }
has_arg() {  # has_arg FILE VALUE: VALUE is one whole argument in FILE
  local f=$1 v=$2 a
  args "$f"
  for a in "${A[@]}"; do [[ $a == "$v" ]] && return 0; done
  return 1
}
no_markers() {
  local found
  found=$(find "$work" -name 'PWNED*' 2>/dev/null; find / "$HOME" -maxdepth 1 -name 'PWNED*' 2>/dev/null)
  [[ -z $found ]] || fail "$1: a hostile value ran a command: $found"
}

# ---- the suite and the hostile values
cat >"$work/tiny.yaml" <<'YAML'
name: tiny
mode: real
base:
  model: mlp
  dataset: {kind: synthetic, shape: [8, 8, 1], classes: 4, n_train: 64, n_test: 16}
  batch: 16
  epochs: 1
zip:
  - learners: [1, 2]
    protocol: [hardsync, softsync]
seeds: [1]
resources: {servers: 1, time_limit: "00:05:00"}
YAML
cat >"$work/micro.yaml" <<'YAML'
name: micro
mode: micro
benchmark:
  filter: "BM_$(touch PWNED_f1)`touch PWNED_f2`;touch PWNED_f3 'q' %j"
  repetitions: 1
resources: {time_limit: "00:05:00"}
YAML
# shellcheck disable=SC2016
hostile='res dir $(touch PWNED_r1) `touch PWNED_r2` ; touch PWNED_r3 && touch PWNED_r4 '"'"'q'"'"' "dq" #c %j'
res=$work/$hostile
mkdir -p "$work/sites"
# YAML single-quoted scalars: '' is one quote, nothing else is special.
cat >"$work/sites/evil.yaml" <<'YAML'
description: hostile values in every key
partition: 'gpu $(touch PWNED_p1) ; touch PWNED_p2'
account: 'acct''; touch PWNED_a1; echo '' # x \ y'
mpi: 'pmi2 $(touch PWNED_m1); touch PWNED_m2 `touch PWNED_m3` && touch PWNED_m4 '' "'
modules: ['gcc/12 $(touch PWNED_mod1)', 'x''y; touch PWNED_mod2 #z']
sbatch: ['--comment=a b # c $(touch PWNED_s1) '' " \ end', '--exclusive']
gpus_per_node: 0
YAML
part='gpu $(touch PWNED_p1) ; touch PWNED_p2'
acct="acct'; touch PWNED_a1; echo ' # x \\ y"
mpi='pmi2 $(touch PWNED_m1); touch PWNED_m2 `touch PWNED_m3` && touch PWNED_m4 '"'"' "'
mod1='gcc/12 $(touch PWNED_mod1)'
mod2="x'y; touch PWNED_mod2 #z"
sb1="--comment=a b # c \$(touch PWNED_s1) ' \" \\ end"

# ---- 1. submit through the sbatch stub, then run every script with bash
cd "$work/cwd" || exit 1
out=$("$asgd" sweep submit "$work/tiny.yaml" --results "$res" --sites-dir "$work/sites" --site evil 2>&1) \
  || fail "submit with hostile values: $out"
no_markers "submit"
root=$res/tiny
[[ -d $root/slurm ]] || fail "no slurm folder under the hostile results folder: $(find "$work" -maxdepth 3)"
n_sb=$(ls "$work/log" | grep -c '^sbatch\.')
[[ $n_sb == 3 ]] || fail "expected 3 sbatch calls (2 arrays + report), got $n_sb: $out"
# sbatch got the script path as one argument, and its #SBATCH lines parse to
# the hostile values, each one argument.
for i in 0 1 2; do
  args "$work/log/sbatch.$i"
  script=${A[-1]}
  [[ -f $script && $script == "$root/slurm/"* ]] || fail "sbatch.$i: script path not one argument: ${A[*]}"
  f=$work/log/sbatch-args.$i
  has_arg "$f" "--partition=$part" || { args "$f"; fail "sbatch.$i: partition not one argument: $(printf '[%s]' "${A[@]}")"; }
  has_arg "$f" "--account=$acct" || { args "$f"; fail "sbatch.$i: account: $(printf '[%s]' "${A[@]}")"; }
  has_arg "$f" "$sb1" || { args "$f"; fail "sbatch.$i: sbatch entry: $(printf '[%s]' "${A[@]}")"; }
  has_arg "$f" "--exclusive" || fail "sbatch.$i: --exclusive"
  pct=${root//%/%%}
  if [[ $script == *report* ]]; then
    has_arg "$f" "--output=$pct/logs/%x_%j.out" || { args "$f"; fail "report output: $(printf '[%s]' "${A[@]}")"; }
  else
    has_arg "$f" "--output=$pct/logs/%x_%A_%a.out" || { args "$f"; fail "array output: $(printf '[%s]' "${A[@]}")"; }
    has_arg "$f" "--time=00:05:00" || fail "sbatch.$i: --time"
  fi
done
grep -q -- '--dependency=afterany:4200:4201' <(tr '\0' '\n' <"$work/log/sbatch.2") \
  || fail "report job dependency: $(tr '\0' ' ' <"$work/log/sbatch.2")"
ok "submit with hostile --results and site values: sbatch sees each value as one argument"

for script in "$root"/slurm/*.sbatch; do
  SLURM_ARRAY_TASK_ID=0 bash "$script" >"$work/run.out" 2>&1
  no_markers "bash $(basename "$script")"
done
n_srun=$(ls "$work/log" | grep -c '^srun\.')
[[ $n_srun == 2 ]] || fail "expected 2 srun calls (one per array script), got $n_srun"
for f in "$work"/log/srun.*; do
  args "$f"
  [[ ${A[0]} == "--mpi=$mpi" ]] || fail "srun: --mpi not one literal argument: $(printf '[%s]' "${A[@]}")"
  [[ ${A[1]} == --kill-on-bad-exit=1 ]] || fail "srun: a rank that dies must end the step: $(printf '[%s]' "${A[@]}")"
  [[ ${A[4]} == "$asgd" && ${A[5]} == train && ${A[6]} == --config ]] || fail "srun argv: $(printf '[%s]' "${A[@]}")"
  [[ ${A[7]} == "$root/configs/"*.json && -f ${A[7]} ]] || fail "srun: config path not one argument: [${A[7]}]"
done
for f in "$work"/log/module.*; do
  args "$f"
  [[ ${#A[@]} == 2 && ${A[0]} == load ]] || fail "module argv: $(printf '[%s]' "${A[@]}")"
  [[ ${A[1]} == "$mod1" || ${A[1]} == "$mod2" ]] || fail "module: not one literal argument: [${A[1]}]"
done
ok "bash ran the generated scripts: no marker file; srun and module got each hostile value as one argument"

# the micro suite: the benchmark filter from the suite file
rm -f "$work"/log/*
"$asgd" sweep submit "$work/micro.yaml" --results "$res" --sites-dir "$work/sites" --site evil >/dev/null 2>&1 \
  || fail "submit micro"
for script in "$res"/micro/slurm/*.sbatch; do SLURM_ARRAY_TASK_ID=0 bash "$script" >/dev/null 2>&1; done
no_markers "micro scripts"
has_arg "$work/log/srun.0" "--benchmark_filter=BM_\$(touch PWNED_f1)\`touch PWNED_f2\`;touch PWNED_f3 'q' %j" \
  || { args "$work/log/srun.0"; fail "micro filter: $(printf '[%s]' "${A[@]}")"; }
ok "a micro suite's hostile benchmark filter reaches srun as one argument"

# --dry-run writes the same scripts and calls no sbatch
rm -rf "$work"/log/* "$root/slurm"
"$asgd" sweep submit "$work/tiny.yaml" --results "$res" --sites-dir "$work/sites" --site evil --dry-run \
  >/dev/null 2>&1 || fail "dry run"
[[ -z $(ls "$work/log") ]] || fail "--dry-run called: $(ls "$work/log")"
[[ $(ls "$root"/slurm/*.sbatch | wc -l) == 3 ]] || fail "--dry-run wrote no scripts"
no_markers "dry run"
ok "--dry-run writes the scripts, calls no sbatch"

# ---- 2. control characters: exit 2, one line naming the key, nothing written
refused() {  # refused LABEL EXPECTED_TEXT CMD...
  local label=$1 want=$2
  shift 2
  rm -rf "$work/ctl" "$work/log"/*
  mkdir -p "$work/ctl"
  "$@" >"$work/ctl.out" 2>"$work/ctl.err"
  local rc=$?
  [[ $rc == 2 ]] || fail "$label: exit $rc, expected 2: $(cat "$work/ctl.out" "$work/ctl.err")"
  [[ $(wc -l <"$work/ctl.err") == 1 ]] || fail "$label: not one line: $(cat -A "$work/ctl.err")"
  grep -q -- "$want" "$work/ctl.err" || fail "$label: message lacks '$want': $(cat "$work/ctl.err")"
  grep -q 'control character' "$work/ctl.err" || fail "$label: $(cat "$work/ctl.err")"
  [[ -z $(find "$work/ctl" -name '*.sbatch') && -z $(ls "$work/log") ]] || fail "$label: scripts written or sbatch called"
  no_markers "$label"
}
submit_to() { "$asgd" sweep submit "$work/tiny.yaml" --results "$1" --sites-dir "${2:-$work/sites}" --site "${3:-evil}"; }
refused "newline in --results" "^asgd: error: --results: control character 0x0a" \
  submit_to "$work/ctl/a"$'\n'"touch PWNED_nl"
refused "carriage return in --results" "--results: control character 0x0d" submit_to "$work/ctl/a"$'\r'"b"
refused "tab in --results" "--results: control character 0x09" submit_to "$work/ctl/a"$'\t'"b"
refused "DEL in --results" "--results: control character 0x7f" submit_to "$work/ctl/a"$'\x7f'"b"
mkdir -p "$work/bad"
site_with() {  # site_with NAME KEY: VALUE (YAML double-quoted escapes)
  printf 'partition: debug\ndescription: one bad value\n%s\n' "$2" >"$work/bad/$1.yaml"
}
site_with mpi 'mpi: "pmi2\ntouch PWNED_mpi_nl"'
refused "newline in mpi" "bad/mpi.yaml:3: mpi: control character 0x0a" submit_to "$work/ctl/r" "$work/bad" mpi
site_with sb 'sbatch: ["--exclusive", "--comment=x\ntouch PWNED_sb_nl"]'
refused "newline in an sbatch entry" "bad/sb.yaml:3: sbatch\[1\]: control character 0x0a" \
  submit_to "$work/ctl/r" "$work/bad" sb
site_with part 'account: "a\tb"'
refused "tab in account" "bad/part.yaml:3: account: control character 0x09" submit_to "$work/ctl/r" "$work/bad" part
site_with mod 'modules: ["gcc\x7f"]'
refused "DEL in a module" "bad/mod.yaml:3: modules\[0\]: control character 0x7f" submit_to "$work/ctl/r" "$work/bad" mod
printf 'partition: "gpu\\r"\n' >"$work/bad/cr.yaml"
refused "carriage return in partition" "bad/cr.yaml:1: partition: control character 0x0d" \
  submit_to "$work/ctl/r" "$work/bad" cr
ok "control characters in --results and in partition, account, mpi, modules, sbatch: exit 2, one line"

# A backslash in --results would turn off Slurm's %-patterns in the log names.
rm -rf "$work/log"/*
"$asgd" sweep submit "$work/tiny.yaml" --results "$work/ctl/back\\slash" --sites-dir "$work/sites" --site evil \
  >/dev/null 2>"$work/ctl.err"
rc=$?
[[ $rc == 2 ]] && grep -q 'backslash' "$work/ctl.err" || fail "backslash in --results: exit $rc: $(cat "$work/ctl.err")"
ok "a backslash in --results is refused (exit 2)"

echo "$passed passed, 0 failed"
