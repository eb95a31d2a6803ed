// tools/docgen.h — the manual page and the bash completion of the `litetx` tool, generated from
// the same CLI11 definitions that print `--help`, so that neither can drift from the options
// the tool really takes.
//
// `litetx completion bash` prints the completion script and `litetx man` the roff manual page;
// the build writes both next to the binary (litetx.bash, litetx.1) and `cmake --install`
// installs them (share/bash-completion/completions/litetx, share/man/man1/litetx.1).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace litetx::cli {

// A roff (man(7)) page for `app`: NAME, SYNOPSIS, DESCRIPTION, the global options, one
// subsection per command (and per subcommand of a command) with its positionals and options
// as `--help` describes them, ENVIRONMENT, EXIT STATUS (the Exit enum of tools/cli.h, plus
// 130/143 for signals) and SEE ALSO. `version` goes into the page's header.
std::string ManPage(const CLI::App& app, const std::string& version);

// A bash completion script for `app` defining the function _litetx, registered with
// `complete -F _litetx litetx`. It completes command names, the options of the command on the
// line (and the global ones), the choices of options that have them (--format pretty|json,
// --log-level ...), store URI schemes after --store, and file names for positionals that
// name a file. Needs bash 4 (associative arrays).
std::string BashCompletion(const CLI::App& app);

// Adds `completion` (prints BashCompletion for the shell named, only bash) and `man` (prints
// ManPage) to `app`, both generated from `app` as it is when they run. Call after every other
// command has been added.
void AddDocgen(CLI::App& app, std::function<int()>* run);

}  // namespace litetx::cli
