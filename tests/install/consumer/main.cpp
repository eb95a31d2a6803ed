// The README's example, built against an installed litetx's core through find_package and
// through pkg-config (see tests/install/install_check.cmake); it prints the library version
// first.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <boost/json.hpp>
#include "litetx/litetx.h"

int main() {
  std::printf("litetx %s\n", litetx::Version());
  auto store = std::make_shared<litetx::MemoryStore>();  // durable: LmdbStore::Open (litetx/lmdb_store.h)
  litetx::Database db(store);                             // default Options: 120 s lease
  litetx::Collector gc(store);                            // repairs what crashed commits leave behind
  gc.Start();                                             // RunOnce() every second

  auto opened = db.Commit(litetx::Transaction()
                              .Insert("accounts", "alice", {{"balance", 100}})
                              .Insert("accounts", "bob", {{"balance", 50}}));
  if (!opened.ok()) return 1;
  const std::uint64_t alice_version = opened->versions[0];  // what the insert gave alice

  auto moved = db.Commit(litetx::Transaction()
                             .Adjust("accounts", "alice", {{"balance", -30}}, alice_version)
                             .Adjust("accounts", "bob", {{"balance", 30}}));
  if (moved.code() == litetx::Code::kUnknown) {           // never guess: ask the store
    auto outcome = db.Outcome(moved.status().txn_id());
    if (outcome.ok()) std::printf("outcome: %s\n", litetx::TxnOutcomeName(*outcome));
  } else if (!moved.ok()) {
    std::printf("%s\n", moved.status().ToString().c_str());
  }

  auto alice = db.Read("accounts", "alice");              // read committed
  if (alice.ok() && alice->state == litetx::DocumentState::kFound)
    std::printf("alice v%llu %s\n", static_cast<unsigned long long>(alice->version),
                boost::json::serialize(alice->doc).c_str());   // alice v1763000000000001 {"balance":70}
  gc.Stop();
}
