// Uses the backend components of an installed litetx: commits and reads on an LmdbStore in
// the directory given as argv[1]; with WITH_REDIS, opens a RedisStore on a port where nothing
// listens (argv[2]) and prints the code it gets, which exercises hiredis through the library.
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <string>

#include <boost/json.hpp>

#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"
#ifdef WITH_REDIS
#include "litetx/redis_store.h"
#endif

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto store = litetx::LmdbStore::Open(argv[1]);
  if (!store.ok()) {
    std::printf("lmdb open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  litetx::Database db(*store);
  auto done = db.Commit(litetx::Transaction().Insert("c", "k", {{"n", 7}}));
  if (!done.ok()) return 1;
  auto read = db.Read("c", "k");
  if (!read.ok() || read->state != litetx::DocumentState::kFound) return 1;
  std::printf("lmdb %s\n", boost::json::serialize(read->doc).c_str());
#ifdef WITH_REDIS
  if (argc < 3) return 2;
  litetx::RedisOptions options;
  options.port = std::atoi(argv[2]);
  options.connect_timeout = std::chrono::milliseconds(500);
  auto redis = litetx::RedisStore::Open(options);
  std::printf("redis %s\n", redis.ok() ? "open" : std::string(litetx::CodeName(redis.code())).c_str());
#endif
}
