// tests/kill9/large_worker.cpp — the child process of the kill -9 test of large transactions
// (kill9_large_test.cpp).
//
// Opens the LMDB store given on the command line, prints "ready", then runs large transactions
// one after another until it is killed. Transaction <round>.<n> inserts --rows rows
// "<round>.<n>.<i>" {"tag": "<round>.<n>", "i": i} into collection kl.rows.<round>, adjusts
// each of the --hot documents kl.hot/h<j> by {"n": 1}, and puts kl.hot/last {"tag": ...}: an
// insert, an adjust and a put (an update of a live document) in every transaction, in chunks
// of a random 4..32 actions (seeded), the hot documents first, in the middle or last. Before
// each transaction it prints "begin <tag>", after BeginLarge "txn <tag> <txn id>", then after
// Commit "ack <tag>" (OK), "unknown <tag>" (kUnknown) or "fail <tag>" (any other error: rolled
// back); each line is one write(2) of less than PIPE_BUF bytes, so a kill never leaves half a
// line. With --gc-older-than-ms N > 0 a Collector also runs in the worker (every 5 ms, treating
// transactions older than N ms as abandoned), racing the live coordinator.
//
// Exit codes (the test expects none: it kills the worker first): 2 bad arguments, 3 the store
// cannot be opened, 4 an unexpected error, 5 never killed (60 s).
//
// Usage: litetx_large_crash_worker --store DIR --sync nosync|nometasync|durable --round R
//          --rows N --hot H --seed S --lease-ms L [--gc-older-than-ms N]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"

namespace {

void Say(const std::string& line) {
  std::string s = line + "\n";
  while (::write(STDOUT_FILENO, s.data(), s.size()) < 0) {
  }
}

[[noreturn]] void Die(int code, const std::string& message) {
  std::fprintf(stderr, "litetx_large_crash_worker: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* required :
       {"--store", "--sync", "--round", "--rows", "--hot", "--seed", "--lease-ms"}) {
    if (!args.contains(required)) Die(2, std::string("missing ") + required);
  }
  litetx::LmdbOptions lo;
  const std::string& sync = args["--sync"];
  if (sync == "nosync") {
    lo.durability = litetx::LmdbDurability::kNoSync;
  } else if (sync == "nometasync") {
    lo.durability = litetx::LmdbDurability::kNoMetaSync;
  } else if (sync != "durable") {
    Die(2, "bad --sync " + sync);
  }
  lo.create_if_missing = false;
  auto opened = litetx::LmdbStore::Open(args["--store"], lo);
  if (!opened.ok()) Die(3, "cannot open the store: " + opened.status().ToString());
  std::shared_ptr<litetx::Store> store = *opened;

  const std::string round = args["--round"];
  const int rows = std::atoi(args["--rows"].c_str());
  const int hot = std::atoi(args["--hot"].c_str());
  const int lease_ms = std::atoi(args["--lease-ms"].c_str());
  const int gc_older_than =
      args.contains("--gc-older-than-ms") ? std::atoi(args["--gc-older-than-ms"].c_str()) : 0;
  if (rows < 1 || hot < 1 || lease_ms < 1) Die(2, "bad --rows, --hot or --lease-ms");
  std::mt19937_64 rng(std::strtoull(args["--seed"].c_str(), nullptr, 10));

  litetx::Options dbo;
  dbo.lease = std::chrono::milliseconds(lease_ms);
  litetx::Database db(store, dbo);
  std::unique_ptr<litetx::Collector> gc;
  if (gc_older_than > 0) {
    litetx::CollectorOptions go;
    go.interval = std::chrono::milliseconds(5);
    go.older_than = std::chrono::milliseconds(gc_older_than);
    gc = std::make_unique<litetx::Collector>(store, go);
    gc->Start();
  }
  const std::string rows_collection = "kl.rows." + round;
  Say("ready");
  const auto started = std::chrono::steady_clock::now();
  for (int n = 1; std::chrono::steady_clock::now() - started < std::chrono::seconds(60); ++n) {
    const std::string tag = round + "." + std::to_string(n);
    litetx::LargeTransactionOptions o;
    o.chunk_actions = std::uniform_int_distribution<std::size_t>(4, 32)(rng);
    const int hot_at = std::uniform_int_distribution<int>(0, rows)(rng);  // where the hot ones go
    Say("begin " + tag);
    auto t = db.BeginLarge(o);
    if (!t.ok()) {
      Say((t.code() == litetx::Code::kUnknown ? "unknown " : "fail ") + tag);
      continue;
    }
    Say("txn " + tag + " " + (*t)->id());
    litetx::Status s;
    for (int i = 0; i <= rows && s.ok(); ++i) {
      if (i == hot_at) {
        for (int j = 0; j < hot && s.ok(); ++j) {
          s = (*t)->Adjust("kl.hot", "h" + std::to_string(j), {{"n", 1}});
        }
        if (s.ok()) s = (*t)->Put("kl.hot", "last", {{"tag", tag}});
      }
      if (i < rows && s.ok()) {
        s = (*t)->Insert(rows_collection, tag + "." + std::to_string(i), {{"tag", tag}, {"i", i}});
      }
    }
    if (s.ok()) s = (*t)->Commit().status();
    if (s.ok()) {
      Say("ack " + tag);
    } else if (s.code() == litetx::Code::kUnknown) {
      Say("unknown " + tag);
    } else if (s.code() == litetx::Code::kAborted || s.code() == litetx::Code::kUnavailable ||
               s.code() == litetx::Code::kBusy || s.code() == litetx::Code::kConflict) {
      Say("fail " + tag);
    } else {
      Die(4, "transaction " + tag + ": " + s.ToString());
    }
  }
  Die(5, "not killed within 60 s");
}
