#pragma once
// Text that `asgd sweep submit` writes into its sbatch scripts. Every value
// that comes from outside (the --results folder, the site file, the suite
// file, the executable's path) is checked for control characters and quoted:
// for bash in the script body, and for sbatch's own parser on #SBATCH lines.
#include <string>
#include <vector>

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

// Per-site settings: slurm/sites/<site>.yaml. Written into the scripts:
// partition, account and each `sbatch:` entry as one #SBATCH argument, each
// module as one `module load` argument, mpi as the value of srun --mpi=.
struct Site {
  std::string partition, account, mpi = "pmi2";
  std::vector<std::string> modules, sbatch;  // `module load` arguments, extra #SBATCH options (one each)
  int gpus_per_node = 0;
  bool exclusive = false;      // every job on whole nodes (#SBATCH --exclusive)
  int max_parallel_tasks = 0;  // timing suites: tasks of an array at once (0: no limit)
};

// Reads <dir>/<name>.yaml. Throws asgd::Error naming file:line: key for an
// unknown key, a value of the wrong type, a control character in a value (it
// would end a script line) or a negative max_parallel_tasks; a missing file
// names the folder. (What `asgd sweep submit --site NAME` reads.)
Site load_site(const std::string& dir, const std::string& name);

}  // namespace asgd::sweep
