// tools/cmd_demo.cpp — placeholder, replaced by the real subcommand.
#include "tools/cli.h"

namespace litetx::cli {
void AddDemo(CLI::App&, Context&) {}
}  // namespace litetx::cli
