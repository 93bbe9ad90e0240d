#!/usr/bin/env bash
# docs/OPTIONS.md: every subcommand's options, their domains and defaults, as
# `asgd --help-all` prints them (made from the same
# field table and validators that check them).
#   tools/gen_options.sh [--check] [ASGD]   ASGD: default build/ci/asgd
# --check: exit 1 with a diff when docs/OPTIONS.md differs from what ASGD prints
# (CI runs this as cli.options_doc); without it, rewrite the page.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
(( $# <= 1 )) || { echo "gen_options.sh: [--check] [ASGD]" >&2; exit 2; }
asgd=${1:-$root/build/ci/asgd}
[[ -x $asgd ]] || { echo "gen_options.sh: $asgd is not built" >&2; exit 2; }
page() {
  echo "# Options of every subcommand"
  echo
  echo "Written by \`tools/gen_options.sh\` from what \`asgd\` prints; CI checks that the two agree."
  echo "A number's domain follows its type (\`INT >= 1\`, \`NUMBER in [0, 1)\`), its default in"
  echo "brackets or after \`=\`; a domain that names another option (\`in 1..learners\`) is checked"
  echo "with it."
  echo
  echo '```'
  "$asgd" --help-all | sed "s#$asgd#asgd#g"
  echo '```'
}
out="$root/docs/OPTIONS.md"
if (( check )); then
  if ! diff -u "$out" <(page) >&2; then
    echo "gen_options.sh: docs/OPTIONS.md differs from what $asgd prints: run tools/gen_options.sh" >&2
    exit 1
  fi
  echo "gen_options.sh: docs/OPTIONS.md matches $asgd"
  exit 0
fi
page > "$out.tmp" && mv "$out.tmp" "$out"
echo "gen_options.sh: wrote $out"
