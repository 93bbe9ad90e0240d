#!/usr/bin/env bash
# A fatal signal ends every command within seconds, with one line naming the
# signal (ASGD_INJECT_SIGNAL plants it: a single-learner run, an MPI learner,
# an MPI server, a virtual run, compare and the other subcommands; a real
# stack overflow too); under mpiexec the whole job ends. Input nested past 64
# levels, options given with the value that once meant "not given", and the
# readers' raw library errors: one line naming the file, key or line and the
# value, exit 2, before any work.
#   usage: reliability.sh ASGD_BINARY MPIEXEC
set -uo pipefail
asgd=${1:?usage: reliability.sh ASGD_BINARY MPIEXEC}
mpiexec=${2:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/expect_lib.sh"
export LC_ALL=C  # grep matches the bytes of values that are not UTF-8

syn=(--model mlp --dataset synthetic --synthetic-size 8 --synthetic-classes 4 --synthetic-train 512
     --synthetic-test 64 --batch 16 --epochs 2 -q --results "$work/results" --suite s)

# expect_fatal NAME SIGNAL CODE -- COMMAND...: ends within 15 s with exit CODE
# ("any": non-zero, what mpiexec passes on) and exactly one stderr line
# "asgd: fatal: signal SIG<SIGNAL>".
expect_fatal() {
  local name=$1 sig=$2 code=$3
  shift 4
  local start=$SECONDS rc
  timeout -k 5 20 "$@" >"$work/out" 2>"$work/err"
  rc=$?
  local took=$((SECONDS - start)) n
  n=$(grep -c "asgd: fatal: signal SIG$sig " "$work/err")
  if (( took > 15 )) || (( rc == 124 || rc == 137 )) || [[ $code == any && $rc == 0 ]] ||
     [[ $code != any && $rc != "$code" ]] || (( n != 1 )) || grep -q "Caught signal" "$work/err"; then
    fail "$name: rc=$rc (want $code) after ${took}s, $n fatal lines; stderr:"
    head -c 800 "$work/err"; echo
  else
    pass "$name: exit $rc after ${took}s: $(grep "asgd: fatal" "$work/err")"
  fi
}

# ------------------------------------------------------------ fatal signals
printf '{"benchmarks": [{"name": "BM_A", "real_time": 10, "time_unit": "ns"}]}' >"$work/a.json"
expect_fatal "single learner, SIGSEGV" SEGV 139 -- \
  env ASGD_INJECT_SIGNAL=SEGV:train "$asgd" train "${syn[@]}" --run-id single
expect_fatal "virtual run, SIGBUS" BUS 135 -- \
  env ASGD_INJECT_SIGNAL=BUS:train "$asgd" train "${syn[@]}" --virtual --learners 4 --timing fixed \
  --compute-s 0.01 --comm-s 0.001 --run-id virt
expect_fatal "compare, SIGABRT" ABRT 134 -- env ASGD_INJECT_SIGNAL=ABRT:main "$asgd" compare "$work/a.json" "$work/a.json"
expect_fatal "compare, a real stack overflow" SEGV 139 -- \
  env ASGD_INJECT_SIGNAL=STACK:main "$asgd" compare "$work/a.json" "$work/a.json"
expect_fatal "models, SIGFPE" FPE 136 -- env ASGD_INJECT_SIGNAL=FPE:main "$asgd" models mlp
expect_fatal "info, SIGILL" ILL 132 -- env ASGD_INJECT_SIGNAL=ILL:main "$asgd" info
expect_fatal "single learner, a real stack overflow" SEGV 139 -- \
  env ASGD_INJECT_SIGNAL=STACK:train "$asgd" train "${syn[@]}" --run-id stack
# under mpiexec: one rank faults, the job ends within seconds (not at --stall-timeout)
mpi=(--learners 2 --servers 1 --stall-timeout 600 --run-id mpi)
expect_fatal "MPI learner, SIGSEGV" SEGV any -- \
  env ASGD_INJECT_SIGNAL=SEGV:learner "$mpiexec" -n 3 "$asgd" train "${syn[@]}" "${mpi[@]}"
expect_fatal "MPI server, SIGABRT" ABRT any -- \
  env ASGD_INJECT_SIGNAL=ABRT:server "$mpiexec" -n 3 "$asgd" train "${syn[@]}" "${mpi[@]}"
expect_fatal "MPI server, a real stack overflow" SEGV any -- \
  env ASGD_INJECT_SIGNAL=STACK:server "$mpiexec" -n 3 "$asgd" train "${syn[@]}" "${mpi[@]}"
expect_fatal "MPI, two shards, learner SIGFPE" FPE any -- \
  env ASGD_INJECT_SIGNAL=FPE:learner "$mpiexec" -n 4 "$asgd" train "${syn[@]}" --learners 2 --servers 2 \
  --stall-timeout 600 --run-id mpi2
pgrep -f "$work/results" >/dev/null && fail "a rank of a faulted MPI job is still running"
for bad in SEGV x SEGV:nowhere KILL:main; do
  expect_error "ASGD_INJECT_SIGNAL=$bad" "ASGD_INJECT_SIGNAL='$bad': want SIGNAL:POINT" -- \
    env ASGD_INJECT_SIGNAL="$bad" "$asgd" models mlp
done

# ------------------------------------------------------------ nesting depth
deep_json() {  # deep_json LEVELS: a Google Benchmark file whose real_time nests LEVELS arrays
  python3 -c "import sys; n=int(sys.argv[1]); print('{\"benchmarks\": [{\"name\": \"BM_A\", \"real_time\": ' + '['*n + ']'*n + '}]}')" "$1"
}
deep_json 200000 >"$work/deep.json"
expect_error "compare: 200,000 nested arrays" "deep.json: nested deeper than 64 levels \(line 1\)" -- \
  "$asgd" compare "$work/a.json" "$work/deep.json"
expect_error "history: 200,000 nested arrays" "deep.json: nested deeper than 64 levels" -- \
  "$asgd" history "$work/deep.json" --out "$work/h" --no-plots
deep_json 61 >"$work/deep62.json"
expect_error "compare: 64 levels is no benchmark row, but not too deep" "benchmark BM_A: real_time is not a number" -- \
  "$asgd" compare "$work/a.json" "$work/deep62.json"
python3 -c "print('{\"batch\": ' + '['*100000 + ']'*100000 + '}')" >"$work/deep_config.json"
expect_error "--config: nested too deep" "deep_config.json: nested deeper than 64 levels" -- \
  "$asgd" train --config "$work/deep_config.json" "${syn[@]}"
{ echo "name: deep"; echo "mode: real"; python3 -c "print('base: {model: ' + '['*100000 + ']'*100000 + '}')"; } >"$work/deep_suite.yaml"
expect_error "suite: flow lists nested too deep" "deep_suite.yaml: nested deeper than 64 levels \(line 3\)" -- \
  "$asgd" sweep plan "$work/deep_suite.yaml"
{ echo "name: deep"; echo "base:"; python3 -c "print('- '*100000 + 'x')"; } >"$work/deep_block.yaml"
expect_error "suite: block lists nested too deep" "deep_block.yaml: nested deeper than 64 levels" -- \
  "$asgd" sweep plan "$work/deep_block.yaml"
python3 -c "print('name: ' + '['*70 + ']'*70)" >"$work/deep_profile.yaml"
expect_error "profile: nested too deep" "deep_profile.yaml: nested deeper than 64 levels" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --profile "$work/deep_profile.yaml"

# ------------------------------------------ "not given" is not a value to type
expect_error "--lambda-dc -1 under hardsync" "--lambda-dc is an option of protocol dcasgd, not of hardsync" -- \
  "$asgd" train "${syn[@]}" --protocol hardsync --lambda-dc -1
expect_error "--staleness -1 under ssp" "--staleness -1 must be in 0..1000000" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol ssp --staleness -1
expect_error "--tau -1 under easgd" "--tau -1 must be in 1..1000000" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol easgd --tau -1
expect_error "--alpha -1 under easgd" "--alpha -1 must be in \(0, 1\)" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol easgd --alpha -1
expect_error "--lambda-dc -1 under dcasgd" "--lambda-dc -1 must be a number in \[0, 1e6\]" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol dcasgd --lambda-dc -1
expect_error "--server-lr -1" "--server-lr -1 must be in \(0, 1e6\)" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol nsync --merge server-sgd --server-lr -1
expect_error "--server-momentum -1" "--server-momentum -1 must be in \[0, 1\)" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol nsync --merge server-sgd --server-momentum -1
expect_error "--server-lr -1 under merge sum" "--server-lr is an option of merge server-sgd or adagrad, not of merge sum" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol nsync --server-lr -1
expect_error "--merge sum under allreduce" "--merge is an option of protocol nsync, not of allreduce" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol allreduce --merge sum
expect_error "--staleness 3 (the default) under hardsync" "--staleness is an option of protocol ssp, not of hardsync" -- \
  "$asgd" train "${syn[@]}" --staleness 3
echo '{"protocol": "hardsync", "lambda_dc": -1}' >"$work/ldc.json"
expect_error "--config: lambda_dc -1 under hardsync" "--lambda-dc is an option of protocol dcasgd" -- \
  "$asgd" train --config "$work/ldc.json" "${syn[@]}"
echo '{"protocol": "allreduce", "learners": 2, "merge": "sum"}' >"$work/merge.json"
expect_error "--config: merge sum under allreduce" "--merge is an option of protocol nsync, not of allreduce" -- \
  "$asgd" train --config "$work/merge.json" "${syn[@]}"
printf 'name: t\nmode: real\nbase: {model: mlp, dataset: synthetic, protocol: ssp, learners: 2, staleness: -1}\n' >"$work/st.yaml"
expect_error "suite: staleness -1" "st.yaml.*--staleness -1 must be in 0..1000000" -- "$asgd" sweep plan "$work/st.yaml"
printf 'name: t\nmode: real\nbase: {model: mlp, dataset: synthetic, protocol: allreduce, learners: 2, merge: sum}\n' >"$work/mg.yaml"
expect_error "suite: merge sum under allreduce" "mg.yaml.*--merge is an option of protocol nsync" -- "$asgd" sweep plan "$work/mg.yaml"
# merge sum given under nsync is the run without it: the same run id (results keep their ids)
a=$("$asgd" train "${syn[@]}" --learners 2 --protocol nsync --dry-run | tail -1)
b=$("$asgd" train "${syn[@]}" --learners 2 --protocol nsync --merge sum --dry-run | tail -1)
[[ -n $a && $a == "$b" ]] && pass "merge sum given keeps the run id ($a)" || fail "run ids differ: '$a' '$b'"

# ------------------------------------------------ readers' raw library text
mkdir -p "$work/sites"
printf 'name: t\nmode: real\nbase: {model: mlp, dataset: synthetic, epochs: 0.1}\n' >"$work/ok.yaml"
site() { printf '%b' "$2" >"$work/sites/$1.yaml"; }
site dup 'partition: a\nmpi: pmi2\npartition: b\n'
site text_int 'partition: a\nmax_parallel_tasks: "x"\n'
site big 'partition: a\nmax_parallel_tasks: 1e12\n'
site yes 'partition: a\nexclusive: "yes"\n'
site gpus 'gpus_per_node: [1]\n'
submit=("$asgd" sweep submit "$work/ok.yaml" --results "$work/sub" --sites-dir "$work/sites" --dry-run --site)
expect_error "site: key given twice" "dup.yaml:3: partition: given twice \(first at line 1\)" -- "${submit[@]}" dup
expect_error "site: text for a number" "text_int.yaml:2: max_parallel_tasks: expected a whole number from 0 to [0-9]+, got the text \"x\"" -- "${submit[@]}" text_int
expect_error "site: 1e12 tasks" "big.yaml:2: max_parallel_tasks: expected a whole number .*got '1e12'" -- "${submit[@]}" big
expect_error "site: quoted yes" "yes.yaml:2: exclusive: expected true or false, got the text \"yes\"" -- "${submit[@]}" yes
expect_error "site: a list for a number" "gpus.yaml:1: gpus_per_node: expected a whole number .*got a list" -- "${submit[@]}" gpus
ln -s "$work/loop_b" "$work/loop_a"
ln -s "$work/loop_a" "$work/loop_b"
expect_error "--profile: a link loop" "loop_a.*Too many levels of symbolic links" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --profile "$work/loop_a"
expect_error "calibrate --out: a link loop" "loop_a.*Too many levels of symbolic links" -- \
  "$asgd" calibrate --out "$work/loop_a" --models mlp --batch 16 --steps 2
expect_error "calibrate --name ''" "--name: must not be empty" -- \
  "$asgd" calibrate --out "$work/p.yaml" --name "" --models mlp --batch 16 --steps 2
expect_error "calibrate --name not UTF-8" "--name .*not valid UTF-8" -- \
  "$asgd" calibrate --out "$work/p.yaml" --name $'\xff\xfe' --models mlp --batch 16 --steps 2
[[ -e $work/p.yaml ]] && fail "calibrate wrote a profile after a bad --name"
profile='compute:\n  - {gflops: {value: 10, assumed: "x"}, cv: {value: 0.1, assumed: "x"}}
link:\n  learner: {latency_s: {value: 1e-6, assumed: "x"}, bandwidth_Bps: {value: 1e9, assumed: "x"}}
  server: {latency_s: {value: 1e-6, assumed: "x"}, bandwidth_Bps: {value: 1e9, assumed: "x"}}
server:\n  accumulate_s_per_param: {value: 1e-9, assumed: "x"}\n  update_s_per_param: {value: 1e-9, assumed: "x"}\n'
printf "name: good\n$profile" >"$work/good.yaml"
"$asgd" train "${syn[@]}" --virtual --learners 2 --profile "$work/good.yaml" --dry-run >/dev/null 2>"$work/err" \
  && pass "a good profile is taken" || fail "a good profile is refused: $(cat "$work/err")"
printf "name: good\n${profile}description: \"never closed\n" >"$work/quote.yaml"
expect_error "profile: a quote never closed" "quote.yaml: line 10: a quote opened here is never closed" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --profile "$work/quote.yaml"
printf "name: \"\xff\xfe\"\n$profile" >"$work/utf8.yaml"
expect_error "profile: a name not UTF-8" "utf8.yaml: name: .*not valid UTF-8" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --profile "$work/utf8.yaml"
printf '{"benchmarks": [{"name": "BM_F", "GFLOP/s": 1.0}]}' >"$work/f1.json"
printf '{"benchmarks": [{"name": "BM_F", "GFLOP/s": 1.7e308}]}' >"$work/fbig.json"
expect_error "compare: GFLOP/s 1.7e308" "fbig.json: benchmark BM_F: GFLOP/s 1.7e\+?308 is not a positive finite number up to 1e\+?18" -- \
  "$asgd" compare "$work/f1.json" "$work/fbig.json"

# ------------------------------------------------- a running asgd's name
# The name ps, pkill and top show is asgd's own, also where it re-executes itself
# to pick OpenBLAS's kernel for a CPU that OpenBLAS does not know (a name taken
# from /proc/self/exe would be "exe").
"$asgd" train "${syn[@]}" --epochs 1000 >/dev/null 2>&1 &
run=$!
sleep 1  # the re-execution, where there is one, is over within milliseconds
name=$(cat "/proc/$run/comm" 2>/dev/null)
kill "$run" 2>/dev/null; wait "$run" 2>/dev/null
want=$(basename "$asgd")
[[ $name == "$want" ]] && pass "a running asgd is named $want (OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset} here)" \
  || fail "a running asgd is named '$name', not $want"

echo "$passed passed, $failures failed"
(( failures == 0 ))
