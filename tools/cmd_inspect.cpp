// tools/cmd_inspect.cpp — the read-only commands: `get COLL ID`, `scan COLL` and `txns`.
//
// None of them writes to the store or creates it (a missing LMDB directory is an error,
// kExitStore). Names are validated before the store is opened (kExitUsage). A failed read
// prints one line on stderr and exits with the code of its status (kExitUnavailable,
// kExitCorruption; cli.h). Output shapes: docs/cli.md.
#include <chrono>

#include "engine/env.h"
#include "tools/cli.h"

namespace litetx::cli {
namespace {
namespace json = boost::json;

struct GetArgs {
  std::string collection;
  std::string id;
  bool uncommitted = false;
  OutputFormat format;
};

struct ScanArgs {
  std::string collection;
  bool include_deleted = false;
  OutputFormat format;
};

struct TxnsArgs {
  std::string state;      // "": every record; else pending, committed or aborted
  std::size_t limit = 0;  // 0: no limit
  OutputFormat format;
};

// {"status": ..., "version"?, "schema_version"?, "doc"?, "last_writer"?, "txn"?, "deleting"?}
json::object ReadJson(const ReadResult& r, bool uncommitted) {
  json::object o;
  o["status"] = DocumentStateName(r.state);
  if (r.state != DocumentState::kNotFound) o["version"] = r.version;
  if (r.state == DocumentState::kFound) {
    o["schema_version"] = r.schema_version;
    o["doc"] = r.doc;
  }
  if (!r.last_writer.empty() && r.state != DocumentState::kNotFound) {
    o["last_writer"] = r.last_writer;
  }
  if (uncommitted && !r.txn.empty()) {
    o["txn"] = r.txn;
    o["deleting"] = r.deleting;
  }
  return o;
}

int ReadFailure(const std::string& what, const Status& s) {
  return Fail(OutcomeExit(s), what + ": " + s.ToString());
}

int RunGet(Context& ctx, const GetArgs& args) {
  if (Status s = ValidateCollection(args.collection); !s.ok()) return Fail(kExitUsage, s.message());
  if (Status s = ValidateId(args.id); !s.ok()) return Fail(kExitUsage, s.message());
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Database db(store, EngineOptions(ctx));
  ReadOptions ro;
  if (args.uncommitted) ro.isolation = Isolation::kReadUncommitted;
  auto r = db.Read(args.collection, args.id, ro);
  if (!r.ok()) return ReadFailure("get " + args.collection + "/" + args.id, r.status());
  Print(ReadJson(*r, args.uncommitted), args.format);
  return kExitOk;
}

int RunScan(Context& ctx, const ScanArgs& args) {
  if (Status s = ValidateCollection(args.collection); !s.ok()) return Fail(kExitUsage, s.message());
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Database db(store, EngineOptions(ctx));
  json::array docs;
  std::string cursor;
  do {
    auto page = store->Scan(args.collection, cursor, 256);
    if (!page.ok()) return ReadFailure("scan " + args.collection, page.status());
    for (const auto& entry : page->documents) {
      // The stored document may be held by a transaction: read its committed image.
      auto r = db.Read(args.collection, entry.first);
      if (!r.ok()) return ReadFailure("scan " + args.collection + "/" + entry.first, r.status());
      if (r->state == DocumentState::kNotFound) continue;  // placeholder or fence
      if (r->state == DocumentState::kDeleted && !args.include_deleted) continue;
      json::object o = ReadJson(*r, false);
      o.erase("last_writer");
      json::object e;
      e["id"] = entry.first;
      for (auto& kv : o) e[kv.key()] = std::move(kv.value());
      docs.emplace_back(std::move(e));
    }
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty());
  json::object out;
  out["collection"] = args.collection;
  out["count"] = docs.size();
  out["documents"] = std::move(docs);
  Print(out, args.format);
  return kExitOk;
}

int RunTxns(Context& ctx, const TxnsArgs& args) {
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Database db(store, EngineOptions(ctx));
  auto list = db.ListTransactions();
  if (!list.ok()) return ReadFailure("txns", list.status());
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  json::array txns;
  std::size_t pending = 0;
  bool truncated = false;
  for (const TxnSummary& t : *list) {
    if (!t.corrupt && !t.done) ++pending;
    // A filter by state lists only records that decode and are in that state.
    if (!args.state.empty() && (t.corrupt || args.state != TxnOutcomeName(t.state))) continue;
    if (args.limit != 0 && txns.size() == args.limit) {
      truncated = true;
      continue;
    }
    json::object o;
    o["id"] = t.id;
    if (t.corrupt) {
      o["state"] = "corrupt";
      o["error"] = t.error;
      txns.emplace_back(std::move(o));
      continue;
    }
    o["state"] = TxnOutcomeName(t.state);
    o["done"] = t.done;
    o["age_ms"] = litetx::engine::MillisSince(now, t.created_ms);
    o["gc_at_ms"] = t.gc_at_ms;
    o["lease_remaining_ms"] = t.gc_at_ms - now;  // <= 0: a collector may settle it now
    o["actions"] = t.actions;
    if (!t.aborted_by.empty()) o["aborted_by"] = t.aborted_by;
    if (t.done) o["done_age_ms"] = litetx::engine::MillisSince(now, t.done_at_ms);
    txns.emplace_back(std::move(o));
  }
  json::object out;
  out["count"] = txns.size();
  out["unsettled"] = pending;
  if (truncated) out["truncated"] = true;
  out["transactions"] = std::move(txns);
  Print(out, args.format);
  return kExitOk;
}

}  // namespace

void AddInspect(CLI::App& app, Context& ctx) {
  auto get = std::make_shared<GetArgs>();
  CLI::App* g = app.add_subcommand("get", "Read one document (read committed by default)");
  g->add_option("collection", get->collection, "Collection")->required();
  g->add_option("id", get->id, "Document id")->required();
  g->add_flag("--uncommitted", get->uncommitted,
              "Raw read: the stored image, with the holding transaction (txn, deleting)");
  AddFormatOption(g, &get->format);
  g->callback([&ctx, get] { ctx.run = [&ctx, get] { return RunGet(ctx, *get); }; });

  auto scan = std::make_shared<ScanArgs>();
  CLI::App* s = app.add_subcommand("scan", "List the documents of a collection (committed view)");
  s->add_option("collection", scan->collection, "Collection")->required();
  s->add_flag("--include-deleted", scan->include_deleted, "Also list tombstones");
  AddFormatOption(s, &scan->format);
  s->callback([&ctx, scan] { ctx.run = [&ctx, scan] { return RunScan(ctx, *scan); }; });

  CLI::App* t = app.add_subcommand(
      "txns", "List ActiveTransaction documents and outcome markers (state, age, lease)");
  auto txns = std::make_shared<TxnsArgs>();
  t->add_option("--state", txns->state, "List only records in this state")
      ->check(CLI::IsMember({"pending", "committed", "aborted"}));
  t->add_option("--limit", txns->limit, "List at most N records (0: all)")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 40));
  AddFormatOption(t, &txns->format);
  t->callback([&ctx, txns] { ctx.run = [&ctx, txns] { return RunTxns(ctx, *txns); }; });
}

}  // namespace litetx::cli
