// tools/cmd_bench.cpp — placeholder, replaced by the real subcommand.
#include "tools/cli.h"

namespace litetx::cli {
void AddBench(CLI::App&, Context&) {}
}  // namespace litetx::cli
