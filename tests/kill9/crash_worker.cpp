// tests/kill9/crash_worker.cpp — the child process of the kill -9 crash test (kill9_test.cpp).
//
// Opens the LMDB store given on the command line, prints "ready", then runs bank transfers
// (tools/demo_bank.h) on --threads threads until it is killed: each transfer is one transaction
// (adjust the payer, adjust the payee, insert a ledger document). Before each attempt it prints
// "begin <ledger id>", after Commit returned OK "ack <ledger id>", after a rolled-back attempt
// "fail <ledger id>"; each line is one write(2)
// of less than PIPE_BUF bytes on stdout, so a kill never leaves half a line, and a line is in
// the pipe before the worker goes on. Retryable outcomes (conflict, busy, aborted, unavailable)
// retry the transfer under a fresh ledger id. With --gc-older-than-ms N > 0 a Collector also
// runs in the worker (every 5 ms, treating transactions older than N ms as abandoned), so the
// kill can land in the middle of a repair and the collector races the live coordinators.
//
// Exit codes (the test expects none of them: it kills the worker first): 2 bad arguments,
// 3 the store cannot be opened, 4 an unexpected transfer outcome, 5 never killed (60 s).
//
// Usage: litetx_crash_worker --store DIR --sync nosync|nometasync|durable --prefix P
//          --round N --threads T --accounts N --seed S [--gc-older-than-ms N]
// Thread safety: the workers share one Database; stdout lines are single write(2) calls.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"
#include "tools/demo_bank.h"

namespace {

void Say(const std::string& line) {
  std::string s = line + "\n";
  // One write of a short line on a pipe is atomic; retry only on EINTR.
  while (::write(STDOUT_FILENO, s.data(), s.size()) < 0) {
  }
}

[[noreturn]] void Die(int code, const std::string& message) {
  std::fprintf(stderr, "litetx_crash_worker: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

void Transfers(litetx::Database& db, const litetx::bank::BankConfig& cfg, const std::string& round,
               int thread, std::uint64_t seed) {
  using litetx::Code;
  std::mt19937_64 rng(seed);
  std::uint64_t seq = 0;
  auto next_id = [&] {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s.t%d.%06llu", round.c_str(), thread,
                  static_cast<unsigned long long>(++seq));
    return std::string(buf);
  };
  for (;;) {
    auto plan = litetx::bank::PlanTransfer(db, cfg, rng, next_id());
    if (!plan.ok()) {
      if (plan.code() == Code::kUnavailable || plan.code() == Code::kBusy) continue;
      Die(4, "planning a transfer: " + plan.status().ToString());
    }
    litetx::bank::Transfer t = std::move(*plan);
    for (;;) {
      Say("begin " + t.ledger_id);
      auto r = db.Commit(litetx::bank::TransferTxn(cfg, t));
      if (r.ok()) {
        Say("ack " + t.ledger_id);
        break;
      }
      if (!r.status().IsRetryableTransaction() && !r.status().IsRetryableCall()) {
        Die(4, "transfer " + t.ledger_id + ": " + r.status().ToString());
      }
      Say("fail " + t.ledger_id);  // rolled back: certainly not applied
      t.ledger_id = next_id();
      litetx::Status s = litetx::bank::RefreshTransfer(db, cfg, t);
      if (s.code() == Code::kFailedPrecondition || s.code() == Code::kUnavailable) break;
      if (!s.ok()) Die(4, "re-reading a payer: " + s.ToString());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* required : {"--store", "--sync", "--prefix", "--round", "--threads",
                               "--accounts", "--seed"}) {
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

  litetx::bank::BankConfig cfg;
  cfg.accounts_collection = "kill9.accounts";
  cfg.ledger_collection = "kill9.ledger";
  cfg.prefix = args["--prefix"];
  cfg.accounts = std::atoi(args["--accounts"].c_str());
  const int threads = std::atoi(args["--threads"].c_str());
  const std::uint64_t seed = std::strtoull(args["--seed"].c_str(), nullptr, 10);
  const int gc_older_than = args.contains("--gc-older-than-ms")
                                ? std::atoi(args["--gc-older-than-ms"].c_str())
                                : 0;
  if (cfg.accounts < 2 || threads < 1) Die(2, "bad --accounts or --threads");

  litetx::Options dbo;
  dbo.parallel_commit = !(args.contains("--parallel") && args["--parallel"] == "off");
  litetx::Database db(store, dbo);
  std::unique_ptr<litetx::Collector> gc;
  if (gc_older_than > 0) {
    litetx::CollectorOptions go;
    go.interval = std::chrono::milliseconds(5);
    go.older_than = std::chrono::milliseconds(gc_older_than);
    gc = std::make_unique<litetx::Collector>(store, go);
    gc->Start();
  }
  Say("ready");
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back(Transfers, std::ref(db), std::cref(cfg), args["--round"], i,
                         seed + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL);
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
  Die(5, "not killed within 60 s");
}
