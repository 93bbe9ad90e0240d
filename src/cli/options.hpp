#pragma once
// Command-line pieces every subcommand uses: validators for option values
// CLI11 would take too readily, and `asgd train`'s options, made from the
// configuration's field table (config/fields.hpp).
#include <CLI/CLI.hpp>

#include "config/config.hpp"

namespace asgd::cli {

// A whole number from 0 to 2^64-1 written in digits (no sign, no fraction,
// no wrap-around of -1).
extern const CLI::Validator kUnsigned64;
// A number, read as a double (NaN and inf pass: the configuration names
// them); not empty, no trailing text.
extern const CLI::Validator kNumber;
// A program to run: a path to an executable file, or a name found on PATH
// (--mpiexec, checked before any work).
extern const CLI::Validator kExecutable;
// Given on the command line, a text option must say something.
extern const CLI::Validator kNonEmpty;
// A finite number in [lo, hi] (CLI::Range lets NaN through).
CLI::Validator finite_in(double lo, double hi);
// A whole number in [lo, hi].
CLI::Validator whole_in(long long lo, long long hi);

// One option per field of the table with an option, in table order, writing
// into c; then --config (read before parsing: load_config_arg).
void add_train_options(CLI::App& app, TrainConfig& c);

// `--config FILE` (or --config=FILE) of `asgd train` is applied before CLI11
// parses, so options given on the same command line (which CLI11 writes only
// when present) override it. A missing value is left to CLI11 to refuse.
void load_config_arg(int argc, char** argv, TrainConfig& cfg);

}  // namespace asgd::cli
