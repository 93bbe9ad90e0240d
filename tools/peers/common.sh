# shellcheck shell=bash disable=SC2034  # sets the caller's variables
# Shared by the peer comparison scripts (sourced, not run).
# parse_peer_options NAME ARGS...: -n REPEATS -s STEPS -w WARMUP -d DATA_DIR -h,
# into $repeats $steps $warmup $data_dir (their defaults set by the caller);
# -h calls the caller's usage(). Bad options end the script with exit 2.
parse_peer_options() {
  local name=$1 opt
  shift
  local OPTIND=1
  [[ ${1:-} == --help ]] && { usage; exit 0; }
  while getopts ":n:s:w:d:h" opt; do
    case "$opt" in
      n) repeats="$OPTARG" ;;
      s) steps="$OPTARG" ;;
      w) warmup="$OPTARG" ;;
      d) data_dir="$OPTARG" ;;
      h) usage; exit 0 ;;
      :) echo "$name: -$OPTARG needs a value (see -h)" >&2; exit 2 ;;
      *) echo "$name: unknown option -$OPTARG (see -h)" >&2; exit 2 ;;
    esac
  done
  shift $((OPTIND - 1))
  [[ $# -eq 0 ]] || { echo "$name: unexpected argument '$1' (see -h)" >&2; exit 2; }
  local v
  for v in "$repeats" "$steps"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] ||
      { echo "$name: REPEATS and STEPS must be positive integers" >&2; exit 2; }
  done
}
