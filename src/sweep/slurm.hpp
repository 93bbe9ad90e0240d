#pragma once
// Text that `asgd sweep submit` writes into its sbatch scripts. Every value
// that comes from outside (the --results folder, the site file, the suite
// file, the executable's path) is checked for control characters and quoted:
// for bash in the script body, and for sbatch's own parser on #SBATCH lines.
#include <string>

namespace asgd::sweep {

// A bash word that stands for s literally: 'text', each ' written '\''.
// Nothing inside single quotes is special to bash ($(...), `...`, ;, &&,
// spaces, globs, backslashes), so any string without NUL is safe.
std::string shell_quote(const std::string& s);

// One argument on a #SBATCH line. sbatch (not bash) splits these lines: ' and
// " group characters, a backslash takes the next character literally even
// inside quotes, and an unquoted # starts a comment. So: 'text', each '
// written '\'' and each backslash '\\' -- sbatch reads back exactly s. Bash
// never runs these lines (they are comments to it).
std::string sbatch_quote(const std::string& s);

// A literal piece of an sbatch file name pattern (--output): each % written
// %% so that Slurm's %j, %x, ... substitutions cannot come from the value.
std::string sbatch_filename_literal(const std::string& s);

// Throws asgd::Error when s holds a control character (a byte below 0x20, or
// 0x7f: newline, carriage return, tab, escape, ...). A newline in a value
// written into a script would end its line and start a new command (or a new
// #SBATCH line). The message is one line: what (a flag or file:line: key),
// the first offending byte and its offset, and the value with control
// characters shown as \xHH.
void check_script_value(const std::string& what, const std::string& s);

}  // namespace asgd::sweep
