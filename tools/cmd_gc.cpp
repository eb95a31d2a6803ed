// tools/cmd_gc.cpp — placeholder, replaced by the real subcommand.
#include "tools/cli.h"

namespace litetx::cli {
void AddGc(CLI::App&, Context&) {}
}  // namespace litetx::cli
