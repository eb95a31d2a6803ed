// examples/guide_snippets.cpp — every C++ snippet of docs/guide.md, compiled and run.
//
// Each snippet sits between "// [guide] NAME" and "// [/guide]" lines; the guide shows the
// lines in between verbatim (tests/docs/check_guide_snippets.sh checks that). main() runs the
// snippets that need no server on the in-memory store, an LMDB store in a temporary directory
// and the custom store of examples/guide_store.h, checks what they did, and exits 0 only if
// every check held. The Redis snippets are compiled only (they need a server).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "examples/guide_store.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"
#ifdef LITETX_GUIDE_WITH_REDIS
#include "litetx/redis_cluster_store.h"
#include "litetx/redis_store.h"
#endif

using namespace std::chrono_literals;

namespace {

int failures = 0;

void Expect(bool ok, const char* what) {
  std::printf("%-60s %s\n", what, ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

std::int64_t Balance(litetx::Database& db, const char* id) {
  auto r = db.Read("accounts", id);
  if (!r.ok() || r->state != litetx::DocumentState::kFound) return -1;
  return r->doc.at("balance").as_int64();
}

}  // namespace

// Opening a database on each store ---------------------------------------------------------

std::shared_ptr<litetx::Store> OpenMemory() {
  // [guide] open-memory
  auto store = std::make_shared<litetx::MemoryStore>();
  litetx::Database db(store);
  // [/guide]
  return store;
}

std::shared_ptr<litetx::Store> OpenLmdb(const std::string& dir) {
  // [guide] open-lmdb
  litetx::LmdbOptions lmdb;                                  // defaults: fsync every write
  lmdb.durability = litetx::LmdbDurability::kNoMetaSync;     // or kDurable, kNoSync
  auto store = litetx::LmdbStore::Open(dir, lmdb);           // creates the directory
  if (!store.ok()) {
    std::fprintf(stderr, "cannot open %s: %s\n", dir.c_str(), store.status().ToString().c_str());
    return nullptr;
  }
  litetx::Database db(*store);
  // [/guide]
  return *store;
}

#ifdef LITETX_GUIDE_WITH_REDIS
std::shared_ptr<litetx::Store> OpenRedis() {
  // [guide] open-redis
  litetx::RedisOptions redis;
  redis.host = "10.0.0.5";
  redis.port = 6379;
  redis.prefix = "myapp:";                                   // keys start with it
  auto store = litetx::RedisStore::Open(redis);
  if (!store.ok()) return nullptr;                           // unreachable, bad options, ...
  litetx::Database db(*store);
  // [/guide]
  return *store;
}

std::shared_ptr<litetx::Store> OpenRedisCluster() {
  // [guide] open-redis-cluster
  litetx::RedisClusterOptions cluster;
  cluster.seeds = {{"10.0.0.5", 7000}, {"10.0.0.6", 7000}};  // any nodes; the map is read
  cluster.wait_replicas = 1;                                 // WAIT: required for failover
  auto store = litetx::RedisClusterStore::Open(cluster);
  if (!store.ok()) return nullptr;                           // not a cluster, bucket count, ...
  litetx::Database db(*store);
  // [/guide]
  return *store;
}
#endif

// Writing transactions ------------------------------------------------------------------------

void WriteTransactions(litetx::Database& db) {
  // [guide] commit
  auto opened = db.Commit(litetx::Transaction()
                              .Insert("accounts", "alice", {{"balance", 100}})
                              .Insert("accounts", "bob", {{"balance", 50}, {"tier", "basic"}}));
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return;
  }
  std::uint64_t alice_version = opened->versions[0];         // one version per action

  auto moved = db.Commit(litetx::Transaction()
                             .Adjust("accounts", "alice", {{"balance", -30}}, alice_version)
                             .Adjust("accounts", "bob", {{"balance", 30}}));
  if (moved.code() == litetx::Code::kConflict) {
    // alice changed since alice_version (current_version() says to what): re-read, decide again.
  }
  // [/guide]
  Expect(moved.ok(), "transfer with an expected version commits");
  if (!moved.ok()) return;

  // [guide] commit-2
  auto upgraded = db.Commit(litetx::Transaction()
                                .Check("accounts", "alice", moved->versions[0])  // not written
                                .Update("accounts", "bob", {{"tier", "gold"}}, {"trial"}));
  auto closed = db.Commit(litetx::Transaction()
                              .Delete("accounts", "bob")                   // leaves a tombstone
                              .Adjust("accounts", "alice", {{"balance", 80}}));
  auto twice = db.Commit(litetx::Transaction()
                             .Adjust("accounts", "alice", {{"balance", 1}})
                             .Adjust("accounts", "alice", {{"balance", 1}}));
  // twice.code() == kInvalidArgument: one action per document; combine them.
  // [/guide]
  Expect(upgraded.ok(), "check and update commit");
  Expect(closed.ok(), "delete and adjust commit");
  Expect(twice.code() == litetx::Code::kInvalidArgument, "a document named twice is refused");
  Expect(Balance(db, "alice") == 150, "alice has 150");
  auto bob = db.Read("accounts", "bob");
  Expect(bob.ok() && bob->state == litetx::DocumentState::kDeleted, "bob reads deleted");
}

void RunTransfers(litetx::Database& db) {
  (void)db.Commit(litetx::Transaction()
                      .Insert("accounts", "carol", {{"balance", 100}})
                      .Insert("accounts", "dave", {{"balance", 0}}));
  // [guide] run
  litetx::RunOptions run;
  run.timeout = 3s;                                          // give up re-running after 3 s
  run.hooks.after_commit = [](const litetx::CommitInfo& info) {
    std::printf("transfer %s committed after %d attempt(s)\n", info.txn_id.c_str(),
                info.attempts);                              // side effects go here, once
  };
  auto r = db.Run(
      [](litetx::TxnContext& tx) -> litetx::Status {
        auto from = tx.Get("accounts", "carol");
        if (!from.ok()) return from.status();
        if (from->state != litetx::DocumentState::kFound) return litetx::Status::NotFound("carol");
        if (from->doc.at("balance").as_int64() < 25) {
          return litetx::Status::FailedPrecondition("insufficient funds");  // ends the run
        }
        if (auto s = tx.Adjust("accounts", "carol", {{"balance", -25}}); !s.ok()) return s;
        return tx.Adjust("accounts", "dave", {{"balance", 25}});
      },
      run);
  if (!r.ok() && r.status().IsRetryableTransaction()) {
    // Still contended after run.timeout: kConflict, kBusy or kAborted.
  }
  // [/guide]
  Expect(r.ok(), "Run commits the transfer");
  Expect(Balance(db, "carol") == 75 && Balance(db, "dave") == 25, "carol 75, dave 25");
}

// Moves 10 from carol to dave, with carol's bonus as a nested scope that may fail alone.
litetx::Result<litetx::CommitInfo> TransferWithBonus(litetx::Database& db) {
  // [guide] nested
  auto order = db.Run([](litetx::TxnContext& tx) -> litetx::Status {
    if (auto s = tx.Adjust("accounts", "carol", {{"balance", -10}}); !s.ok()) return s;
    if (auto s = tx.Adjust("accounts", "dave", {{"balance", 10}}); !s.ok()) return s;
    // An optional step: if it fails, its own writes are undone and the transfer goes on.
    litetx::Status bonus = tx.Nested([](litetx::TxnContext& step) -> litetx::Status {
      if (auto s = step.Update("accounts", "carol", {{"tier", "gold"}}); !s.ok()) return s;
      return step.Insert("bonuses", "carol", {{"points", 5}});  // kConflict once given
    });
    if (!bonus.ok() && bonus.code() != litetx::Code::kConflict) return bonus;
    return litetx::Status::Ok();
  });
  // [/guide]
  return order;
}

void RunNestedScopes(litetx::Database& db) {
  auto first = TransferWithBonus(db);
  Expect(first.ok(), "a transfer with its bonus commits");
  auto carol = db.Read("accounts", "carol");
  Expect(carol.ok() && carol->doc.contains("tier") && carol->doc.at("tier") == "gold",
         "the bonus step's write commits with it");
  (void)db.Commit(litetx::Transaction().Update("accounts", "carol", {{"tier", "silver"}}));
  auto second = TransferWithBonus(db);  // the bonus exists: the step fails, the transfer not
  Expect(second.ok() && second->attempts == 1, "a transfer whose bonus step fails commits");
  carol = db.Read("accounts", "carol");
  Expect(carol.ok() && carol->doc.at("tier") == "silver", "the failed step's write is undone");
  Expect(Balance(db, "carol") == 55 && Balance(db, "dave") == 45, "carol 55, dave 45");
}

void ReadDocuments(litetx::Database& db) {
  // [guide] read
  auto carol = db.Read("accounts", "carol");                 // read committed
  if (carol.ok() && carol->state == litetx::DocumentState::kFound) {
    std::printf("carol v%llu %s\n", static_cast<unsigned long long>(carol->version),
                boost::json::serialize(carol->doc).c_str());
  }
  litetx::ReadOptions raw;
  raw.isolation = litetx::Isolation::kReadUncommitted;       // the stored image, holder and all
  auto stored = db.Read("accounts", "carol", raw);
  if (stored.ok() && !stored->txn.empty()) {
    std::printf("held by %s%s\n", stored->txn.c_str(), stored->deleting ? " (deleting)" : "");
  }
  // [/guide]
  Expect(carol.ok() && carol->state == litetx::DocumentState::kFound, "carol is found");
  Expect(stored.ok() && stored->txn.empty(), "carol is held by nobody");

  // [guide] serializable
  litetx::RunOptions checked;
  checked.serializable = true;   // documents read but not written are checked at commit too
  auto audit = db.Run(
      [](litetx::TxnContext& tx) -> litetx::Status {
        auto c = tx.Get("accounts", "carol");
        auto d = tx.Get("accounts", "dave");
        if (!c.ok()) return c.status();
        if (!d.ok()) return d.status();
        boost::json::object total{{"total", c->doc.at("balance").as_int64() +
                                                d->doc.at("balance").as_int64()}};
        return tx.Insert("audits", "carol+dave", std::move(total));
      },
      checked);
  // [/guide]
  Expect(audit.ok(), "serializable audit commits");
  auto a = db.Read("audits", "carol+dave");
  Expect(a.ok() && a->state == litetx::DocumentState::kFound &&
             a->doc.at("total").as_int64() == 100,
         "audit total is 100");
}

// Large transactions --------------------------------------------------------------------------

struct Row {
  std::string id;
  boost::json::object doc;
  std::uint64_t line = 0;
};

litetx::Status LoadOrders(litetx::Database& db, const std::vector<Row>& rows) {
  // [guide] large
  auto txn = db.BeginLarge();                         // writes its record
  if (!txn.ok()) return txn.status();
  for (const Row& row : rows) {
    litetx::Status s = (*txn)->Insert("orders", row.id, row.doc, /*tag=*/row.line);
    if (!s.ok()) return s;                            // rolled back already, unless s is a bad action
  }
  auto info = (*txn)->Commit();                       // all or nothing
  // [/guide]
  return info.status();
}

void RunLargeTransaction(litetx::Database& db) {
  std::vector<Row> rows;
  for (int i = 0; i < 1200; ++i) {
    rows.push_back(Row{"o" + std::to_string(i), {{"n", i}}, static_cast<std::uint64_t>(i + 1)});
  }
  Expect(LoadOrders(db, rows).ok(), "a large transaction of 1200 inserts commits");
  auto r = db.Read("orders", "o1199");
  Expect(r.ok() && r->state == litetx::DocumentState::kFound, "its last row is there");
  rows.push_back(Row{"o5", {{"n", 5}}, 9999});  // renamed below to the first row's id
  for (Row& row : rows) row.id = "again-" + row.id;
  rows.back().id = rows.front().id;
  litetx::Status s = LoadOrders(db, rows);
  Expect(s.code() == litetx::Code::kInvalidArgument &&
             s.message().find("action 9999") != std::string::npos,
         "a document named twice fails the large transaction and names its tag");
  auto none = db.Read("orders", "again-o7");
  Expect(none.ok() && none->state != litetx::DocumentState::kFound, "and nothing of it is left");
}

// Settling kUnknown ---------------------------------------------------------------------------

// [guide] unknown
// What became of a commit that returned kUnknown. `key` is a document the transaction wrote,
// for a one-action transaction (which has no record). kPending: ask again later.
litetx::Result<litetx::TxnOutcome> Settle(litetx::Database& db, const litetx::Status& failed,
                                          const litetx::Key& key) {
  auto outcome = db.Outcome(failed.txn_id());
  if (!outcome.ok() || *outcome != litetx::TxnOutcome::kNotFound) return outcome;
  // No record: a one-action commit (it writes none). Its document names its last writer, as
  // long as nothing wrote the document since.
  auto doc = db.Read(key.collection, key.id);
  if (!doc.ok()) return doc.status();
  return doc->last_writer == failed.txn_id() ? litetx::TxnOutcome::kCommitted
                                             : litetx::TxnOutcome::kAborted;
}
// [/guide]

void SettleUnknown() {
  // A partition right after the first create: the one-action commit lands, its reply is lost,
  // and the store stays unreachable until healed.
  std::atomic<bool> cut{false}, healed{false};
  litetx::FaultOptions faults;
  faults.rule = [&](litetx::StoreOp op, const litetx::Key&, std::uint64_t) {
    if (healed) return litetx::Fault::kNone;
    if (cut) return litetx::Fault::kTransient;
    if (op != litetx::StoreOp::kCreate) return litetx::Fault::kNone;
    cut = true;
    return litetx::Fault::kLostReply;
  };
  auto store = std::make_shared<litetx::FaultInjectingStore>(
      std::make_shared<litetx::MemoryStore>(), faults);
  litetx::Options options;
  options.retry_backoff = {1ms, 1ms};
  litetx::Database db(store, options);
  auto r = db.Commit(litetx::Transaction().Insert("accounts", "erin", {{"balance", 1}}));
  Expect(r.code() == litetx::Code::kUnknown, "a lost reply at the commit point is kUnknown");
  healed = true;
  auto settled = Settle(db, r.status(), litetx::Key{"accounts", "erin"});
  Expect(settled.ok() && *settled == litetx::TxnOutcome::kCommitted,
         "Settle finds the one-action commit committed");
}

// Options, the collector ----------------------------------------------------------------------

litetx::Options ChooseOptions() {
  // [guide] options
  litetx::Options options;
  options.lease = 5s;               // a crashed process's documents are free about 5 s later
  options.busy_timeout = 6s;        // longer than the lease: ride out a crashed holder
  options.renew_leases = true;      // the default: a live transaction is never rolled back
  options.logger = spdlog::stderr_color_mt("litetx");        // where warnings go
  // [/guide]
  return options;
}

void RunCollector(std::shared_ptr<litetx::Store> store, const litetx::Options& options) {
  // [guide] collector
  litetx::CollectorOptions gc;
  gc.engine = options;                          // logger, clock, retry backoff
  gc.name = "gc-" + std::to_string(::getpid()); // stored in the records it rolls back
  gc.interval = 1s;                             // pause between passes
  gc.collections = {"accounts", "audits"};      // swept once a minute: dangling holds
  gc.tombstone_retention = 24h;                 // > the longest pause of a coordinator
  gc.outcome_retention = 1h;                    // > how long a caller takes to settle kUnknown
  litetx::Collector collector(store, gc);
  collector.Start();                            // one background thread
  // ... the process serves requests; a metrics thread exports collector.stats() ...
  collector.Stop();                             // before the store goes away
  // [/guide]
  Expect(!collector.running(), "collector stopped");
  Expect(collector.RunOnce().ok(), "a collector pass succeeds");

  // [guide] collector-stats
  litetx::CollectorStats s = collector.stats();
  std::printf("runs=%llu finished=%llu reversed=%llu failed=%llu\n",
              static_cast<unsigned long long>(s.runs), static_cast<unsigned long long>(s.finished),
              static_cast<unsigned long long>(s.reversed),
              static_cast<unsigned long long>(s.failed));
  // [/guide]
  Expect(s.runs >= 1 && s.failed == 0, "collector: a run, no failed repairs");
}

int main() {
  OpenMemory();
  auto dir = std::filesystem::temp_directory_path() /
             ("litetx-guide-" + std::to_string(::getpid()));
  Expect(OpenLmdb(dir.string()) != nullptr, "LMDB store opens in a temporary directory");

  // The same walk through on each store that needs no server.
  auto lmdb = OpenLmdb(dir.string());
  std::shared_ptr<litetx::Store> stores[] = {std::make_shared<litetx::MemoryStore>(), lmdb,
                                             std::make_shared<guide::MapStore>()};
  const char* names[] = {"memory", "lmdb", "custom MapStore"};
  for (int i = 0; i < 3; ++i) {
    if (stores[i] == nullptr) continue;
    std::printf("--- %s\n", names[i]);
    litetx::Options options = ChooseOptions();
    litetx::Database db(stores[i], options);
    WriteTransactions(db);
    RunTransfers(db);
    RunNestedScopes(db);
    RunLargeTransaction(db);
    db.Flush();  // the raw read below expects every committed transaction finished
    ReadDocuments(db);
    RunCollector(stores[i], options);
    spdlog::drop("litetx");
  }
  std::printf("--- kUnknown\n");
  SettleUnknown();
  lmdb.reset();
  std::filesystem::remove_all(dir);
  std::printf("%s\n", failures == 0 ? "every guide snippet did what the guide says"
                                    : "SOME GUIDE SNIPPETS FAILED");
  return failures == 0 ? 0 : 1;
}
