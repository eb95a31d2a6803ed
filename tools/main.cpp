// tools/main.cpp — the `litetx` command-line tool. See docs/cli.md.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "tools/cli.h"
#include "tools/docgen.h"
#include "tools/signals.h"

int main(int argc, char** argv) {
  // A standard descriptor the caller closed must not be taken by a file the tool opens (the
  // store's): it would read its input from, or write its output into, that file.
  for (int fd = 0; fd <= 2; ++fd) {
    // open() takes the lowest free descriptor: this one.
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) (void)::open("/dev/null", O_RDWR);
  }
  // SIGINT and SIGTERM: noted by a watcher thread (tools/signals.h); before that is installed
  // no other thread may start.
  litetx::cli::InstallSignalHandling();
  using namespace litetx::cli;
  Context ctx;
  ctx.store_uri = std::string("lmdb:") + kDefaultLmdbPath;
  CLI::App app{"litetx — multi-document transactions over single-document-atomic stores"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("litetx ") + litetx::Version());
  app.option_defaults()->always_capture_default();
  app.add_option("--store", ctx.store_uri,
                 std::string("Store URI: ") + kStoreSchemes +
                     ". Redis OPTIONS: prefix=P&buckets=N&pool=N&timeout=MS&connect_timeout=MS"
                     "&wait=N&wait_timeout=MS (docs/cli.md)")
      ->capture_default_str()
      ->envname("LITETX_STORE");
  app.add_option("--log-level", ctx.log_level, "Engine log level on stderr")
      ->check(CLI::IsMember({"off", "error", "warn", "info", "debug"}));
  app.add_option("--sync", ctx.lmdb_sync,
                 "LMDB durability: durable (fsync every write), nometasync, nosync "
                 "(both survive a process crash, not an OS crash)")
      ->check(CLI::IsMember({"durable", "nometasync", "nosync"}));
  AddApply(app, ctx);
  AddInspect(app, ctx);
  AddGc(app, ctx);
  AddDemo(app, ctx);
  AddBench(app, ctx);
  AddCollections(app, ctx);
  AddImport(app, ctx);
  AddBatch(app, ctx);
  AddDocgen(app, &ctx.run);  // last: it describes the commands above
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "litetx: %s (see --help)\n", e.what());
    return kExitUsage;
  }
  if (!ctx.run) return Fail(kExitUsage, "no command given (see --help)");
  return ctx.run();
}
