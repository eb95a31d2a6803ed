// tools/cmd_inspect.cpp — placeholder, replaced by the real subcommand.
#include "tools/cli.h"

namespace litetx::cli {
void AddInspect(CLI::App&, Context&) {}
}  // namespace litetx::cli
