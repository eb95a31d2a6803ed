// tools/cmd_apply.cpp — placeholder, replaced by the real subcommand.
#include "tools/cli.h"

namespace litetx::cli {
void AddApply(CLI::App&, Context&) {}
}  // namespace litetx::cli
