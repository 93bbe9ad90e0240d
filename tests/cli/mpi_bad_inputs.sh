#!/usr/bin/env bash
# Bad input under mpiexec: every rank finds it, exactly one line says so (the
# launcher's rank 0 before MPI starts, the lowest failing rank after), exit 2,
# nothing written. Flags, values, --config, a truncated data file, a config
# problem found by validation, a rank count that does not fit.
#   usage: mpi_bad_inputs.sh ASGD_BINARY MPIEXEC
set -uo pipefail
asgd=${1:?usage: mpi_bad_inputs.sh ASGD_BINARY MPIEXEC}
mpiexec=${2:-mpiexec}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
syn=(--model mlp --dataset synthetic --synthetic-size 8 --synthetic-train 256 --synthetic-test 64
     --epochs 1 -q --results "$work/r")
mkdir -p "$work/trunc"
# an IDX image file that promises 60000 28x28 images and holds 5 bytes
printf '\x00\x00\x08\x03\x00\x00\xea\x60\x00\x00\x00\x1c\x00\x00\x00\x1cshort' >"$work/trunc/train-images-idx3-ubyte"
# labels: a valid header and 60000 labels; test set: 1 image and label
{ printf '\x00\x00\x08\x01\x00\x00\xea\x60'; head -c 60000 /dev/zero; } >"$work/trunc/train-labels-idx1-ubyte"
{ printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c'; head -c 784 /dev/zero; } >"$work/trunc/t10k-images-idx3-ubyte"
{ printf '\x00\x00\x08\x01\x00\x00\x00\x01'; head -c 1 /dev/zero; } >"$work/trunc/t10k-labels-idx1-ubyte"
echo '{"learners": 2, "bogus_key": 1}' >"$work/bad.json"
check() {  # check NAME ARGS...: exit 2, one stderr line, no results file (CHECK_ENV: VAR=VALUE for the ranks)
  local name=$1; shift
  env ${CHECK_ENV:+"$CHECK_ENV"} timeout 120 "$mpiexec" -n "${NP:-3}" "$asgd" train "$@" >"$work/out" 2>"$work/err"
  local rc=$? lines
  lines=$(grep -c . "$work/err")
  if [[ $rc == 2 && $lines == 1 ]] && ! compgen -G "$work/r/*/runs/*.h5" >/dev/null; then
    echo "ok: $name: $(cat "$work/err")"; passes=$((passes + 1))
  else
    echo "FAIL: $name: exit $rc, $lines lines:"; cat "$work/err"; fails=$((fails + 1))
  fi
}
check "negative seed" "${syn[@]}" --learners 2 --seed -1
check "NaN stall timeout" "${syn[@]}" --learners 2 --stall-timeout nan
check "unknown flag" "${syn[@]}" --learners 2 --lerners 2
check "unknown --config key" --config "$work/bad.json" "${syn[@]}"
check "truncated data file" --model mlp --dataset mnist --data-dir "$work/trunc" --learners 2 --results "$work/r"
grep -q "truncated" "$work/err" || { echo "FAIL: the truncation is not what was reported: $(cat "$work/err")"; fails=$((fails + 1)); }
check "n above learners" "${syn[@]}" --learners 2 --protocol softsync --n 3
check "rank count" "${syn[@]}" --learners 3
check "unsafe suite name" "${syn[@]}" --learners 2 --suite ..
# fault injection or the wait policy set wrong: every rank parses it before any work (once said two lines: MPICH's abort too)
for bad in ASGD_INJECT_DELAY=x ASGD_INJECT_DELAY=1:5x ASGD_INJECT_STALL=0:5x ASGD_INJECT_SERVER=x ASGD_WAIT=busy ASGD_DOORBELL=yes ASGD_SHM=off ASGD_IN_PLACE=yes ASGD_CUDA_AWARE=2; do
  CHECK_ENV=$bad check "$bad" "${syn[@]}" --learners 2
done
# A resume checkpoint whose clock/epochs lie past the run's end (each shard's),
# and one of another shard layout: refused naming the file, exit 2, nothing written.
ck=(--model mlp --dataset synthetic --synthetic-size 8 --synthetic-train 512 --synthetic-test 64
    --epochs 1 -q --learners 2 --servers 2 --checkpoint-every 5 --results "$work/ck" --run-id r)
"$mpiexec" -n 4 "$asgd" train "${ck[@]}" >/dev/null 2>&1 || { echo "FAIL: the checkpointed run failed"; fails=$((fails + 1)); }
rm -f "$work/ck/adhoc/runs/r.h5"
cp "$work/ck/adhoc/checkpoints/r.shard1.h5" "$work/shard1.h5"
/usr/bin/python3 - "$work/ck/adhoc/checkpoints/r.shard1.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs["epochs"] = 6.2e10
    f.attrs["clock"] = 10**12
PY
NP=4 check "MPI resume: shard checkpoint past the run's end" "${ck[@]}"
grep -q "r.shard1.h5" "$work/err" || { echo "FAIL: the shard checkpoint is not named"; fails=$((fails + 1)); }
[[ -e $work/ck/adhoc/runs/r.h5 ]] && { echo "FAIL: a results file was written"; fails=$((fails + 1)); }
echo "$passes passed, $fails failed"
[[ $fails == 0 ]]
