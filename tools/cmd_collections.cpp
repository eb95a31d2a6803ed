// tools/cmd_collections.cpp — `collections list`, `collections count NAME` and
// `collections drop NAME`.
//
// list and count only read (like get/scan/txns: they never create the store). drop deletes
// through the engine, in transactions of at most --batch deletes, so that transactions running
// at the same time stay correct; it leaves tombstones, which the collector purges
// (`litetx gc --once --collection NAME --tombstone-retention D`). The engine's own collections
// ("__litetx" prefix) are listed only with --all and dropped only with --force, under the rules
// of RunDropEngine. Output shapes and exit codes: docs/cli.md.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "tools/cli.h"
#include "tools/signals.h"

namespace litetx::cli {
namespace {
namespace json = boost::json;

constexpr std::size_t kPage = 256;

struct ListArgs {
  bool all = false;
  bool counts = false;
  OutputFormat format;
};

struct CountArgs {
  std::string name;
  OutputFormat format;
};

struct DropArgs {
  std::string name;
  bool yes = false;
  bool force = false;
  std::size_t batch = 100;
  std::string timeout = "10s";
  std::string busy_timeout = "2s";
};

bool IsEngineCollection(std::string_view name) {
  return name.substr(0, kReservedCollectionPrefix.size()) == kReservedCollectionPrefix;
}

// OK, or kInvalidArgument: the name rules of ValidateCollection, except that the engine's own
// prefix is allowed (these commands name such collections on purpose).
Status ValidateName(const std::string& name) {
  if (!IsEngineCollection(name)) return ValidateCollection(name);
  if (name.size() > kMaxCollectionBytes) return ValidateCollection(name);  // too long
  // The same text checks on the part after the prefix ("x" stands for the prefix).
  return ValidateCollection("x" + name.substr(kReservedCollectionPrefix.size()));
}

int ReadFailure(const std::string& what, const Status& s) {
  return Fail(OutcomeExit(s), what + ": " + s.ToString());
}

// What a collection holds, document by document.
struct Tally {
  std::size_t stored = 0;   // documents in the store, whatever their state
  std::size_t live = 0;     // committed view: found
  std::size_t deleted = 0;  // committed view: tombstones
  std::size_t held = 0;     // tagged by a transaction that has not cleared its tag yet
};

// Counts `name` (a user collection): one raw scan, two reads per document (committed view,
// then the stored image with its holder). `with_held` false skips the second read.
Result<Tally> CountUser(Database& db, Store& store, const std::string& name, bool with_held) {
  Tally t;
  std::string cursor;
  do {
    auto page = store.Scan(name, cursor, kPage);
    if (!page.ok()) return page.status();
    for (const auto& entry : page->documents) {
      ++t.stored;
      auto r = db.Read(name, entry.first);
      if (!r.ok()) return r.status();
      if (r->state == DocumentState::kFound) ++t.live;
      if (r->state == DocumentState::kDeleted) ++t.deleted;
      if (!with_held) continue;
      ReadOptions raw;
      raw.isolation = Isolation::kReadUncommitted;
      auto u = db.Read(name, entry.first, raw);
      if (!u.ok()) return u.status();
      if (!u->txn.empty()) ++t.held;
    }
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty());
  return t;
}

// Documents stored in `name`, raw.
Result<std::size_t> CountStored(Store& store, const std::string& name) {
  std::size_t n = 0;
  std::string cursor;
  do {
    auto page = store.Scan(name, cursor, kPage);
    if (!page.ok()) return page.status();
    n += page->documents.size();
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty());
  return n;
}

Result<std::vector<std::string>> AllCollections(Store& store) {
  std::vector<std::string> names;
  std::string cursor;
  do {
    auto page = store.ListCollections(cursor, kPage);
    if (!page.ok()) return page.status();
    for (auto& n : page->names) names.push_back(std::move(n));
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty());
  return names;
}

int RunList(Context& ctx, const ListArgs& args) {
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Database db(store, EngineOptions(ctx));
  auto names = AllCollections(*store);
  if (!names.ok()) return ReadFailure("collections list", names.status());
  json::array out;
  for (const std::string& name : *names) {
    const bool engine = IsEngineCollection(name);
    if (engine && !args.all) continue;
    json::object o;
    o["name"] = name;
    if (args.all) o["engine"] = engine;
    if (args.counts) {
      if (engine) {
        auto n = CountStored(*store, name);
        if (!n.ok()) return ReadFailure("collections list: " + name, n.status());
        o["stored"] = *n;
      } else {
        auto t = CountUser(db, *store, name, /*with_held=*/false);
        if (!t.ok()) return ReadFailure("collections list: " + name, t.status());
        o["live"] = t->live;
      }
    }
    out.emplace_back(std::move(o));
  }
  json::object result;
  result["count"] = out.size();
  result["collections"] = std::move(out);
  Print(result, args.format);
  return kExitOk;
}

int RunCount(Context& ctx, const CountArgs& args) {
  if (Status s = ValidateName(args.name); !s.ok()) return Fail(kExitUsage, s.message());
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Database db(store, EngineOptions(ctx));
  json::object o;
  o["collection"] = args.name;
  if (args.name == kTransactionsCollection) {
    auto list = db.ListTransactions();
    if (!list.ok()) return ReadFailure("collections count " + args.name, list.status());
    std::size_t settled = 0;
    for (const TxnSummary& t : *list) settled += (!t.corrupt && t.done) ? 1 : 0;
    o["stored"] = list->size();
    o["settled"] = settled;
    o["unsettled"] = list->size() - settled;
  } else if (IsEngineCollection(args.name)) {
    auto n = CountStored(*store, args.name);
    if (!n.ok()) return ReadFailure("collections count " + args.name, n.status());
    o["stored"] = *n;
  } else {
    auto t = CountUser(db, *store, args.name, /*with_held=*/true);
    if (!t.ok()) return ReadFailure("collections count " + args.name, t.status());
    o["live"] = t->live;
    o["deleted"] = t->deleted;
    o["held"] = t->held;
    o["stored"] = t->stored;
  }
  Print(o, args.format);
  return kExitOk;
}

// --force on kTransactionsCollection: erases the outcome markers (records of transactions that
// are over and whose documents are all settled), as the collector does after
// outcome_retention, and only if no record is unsettled. A marker never becomes unsettled
// again, and each erase is conditional on the revision just read, so no live transaction's
// record is ever erased, even one started meanwhile.
int RunDropEngine(Context& ctx, const DropArgs& args) {
  if (args.name != kTransactionsCollection) {
    return Fail(kExitUsage, "'" + args.name + "' is not a collection this version of litetx "
                            "knows how to drop (only " + std::string(kTransactionsCollection) +
                            "); nothing done");
  }
  CatchSignals();
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Database db(store, EngineOptions(ctx));
  auto list = db.ListTransactions();
  if (!list.ok()) return ReadFailure("collections drop " + args.name, list.status());
  std::size_t unsettled = 0;
  std::string example;
  for (const TxnSummary& t : *list) {
    if (t.corrupt || !t.done) {
      if (unsettled++ == 0) example = t.id;
    }
  }
  if (unsettled != 0) {
    return Fail(kExitFailed,
                "refusing to drop " + args.name + " even with --force: " +
                    std::to_string(unsettled) + " transaction record(s) are not settled (e.g. " +
                    example + "); settle them first (`litetx gc --once`, and `litetx txns "
                    "--state pending` to see them); nothing erased");
  }
  std::size_t erased = 0;
  for (const TxnSummary& t : *list) {
    if (Interrupted() != 0) break;
    Key key{std::string(kTransactionsCollection), t.id};
    auto g = store->Get(key);
    if (!g.ok()) return ReadFailure("collections drop " + args.name, g.status());
    if (!g->has_value()) continue;  // purged meanwhile
    Status s = store->Erase(key, (*g)->revision);
    if (s.ok()) {
      ++erased;
    } else if (s.code() != Code::kConflict) {  // kConflict: changed or purged meanwhile
      return ReadFailure("collections drop " + args.name + "/" + t.id, s);
    }
  }
  json::object o;
  o["collection"] = args.name;
  o["erased"] = erased;
  if (Interrupted() != 0) o["interrupted"] = InterruptedName();
  PrintJson(o);
  return ExitAfterSignal(kExitOk);
}

int RunDrop(Context& ctx, const DropArgs& args) {
  if (Status s = ValidateName(args.name); !s.ok()) return Fail(kExitUsage, s.message());
  const bool engine = IsEngineCollection(args.name);
  if (engine && !args.force) {
    return Fail(kExitUsage, "'" + args.name + "' is the engine's own collection (names starting "
                            "with __litetx); refusing to drop it without --force; nothing done");
  }
  if (!args.yes) {
    return Fail(kExitUsage,
                engine ? "drop " + args.name + " --force would erase every settled transaction "
                                               "record (outcome marker); pass --yes to do it"
                       : "drop would delete every live document of collection '" + args.name +
                             "' (in transactions of at most " + std::to_string(args.batch) +
                             " deletes, leaving tombstones); pass --yes to do it");
  }
  if (engine) return RunDropEngine(ctx, args);
  auto timeout = ParseDuration(args.timeout);
  if (!timeout.ok()) return Fail(kExitUsage, "--timeout: " + timeout.status().message());
  auto busy_timeout = ParseDuration(args.busy_timeout);
  if (!busy_timeout.ok()) {
    return Fail(kExitUsage, "--busy-timeout: " + busy_timeout.status().message());
  }
  CatchSignals();  // before OpenStore and the Database start any thread
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Options options = EngineOptions(ctx);
  options.busy_timeout = *busy_timeout;
  options.finish_in_background = false;  // each batch is settled before the next (and a signal)
  Database db(store, options);
  RunOptions ro;
  ro.timeout = *timeout;

  std::size_t deleted = 0;
  std::size_t transactions = 0;
  json::array busy;
  Status failure = Status::Ok();
  const Status nothing = Status::FailedPrecondition("nothing left to delete in this batch");

  // Deletes the live documents among `ids` in one transaction (re-run on contention until
  // --timeout). If it ends busy, each id is tried alone so that only the held ones are left.
  std::function<void(const std::vector<std::string>&)> run_batch =
      [&](const std::vector<std::string>& ids) {
        std::size_t staged = 0;
        auto r = db.Run(
            [&](TxnContext& tx) -> Status {
              staged = 0;
              for (const std::string& id : ids) {
                auto g = tx.Get(args.name, id);
                if (!g.ok()) return g.status();
                if (g->state != DocumentState::kFound) continue;  // gone meanwhile
                if (Status s = tx.Delete(args.name, id); !s.ok()) return s;
                ++staged;
              }
              return staged == 0 ? nothing : Status::Ok();
            },
            ro);
        if (r.ok()) {
          deleted += staged;
          ++transactions;
          return;
        }
        if (staged == 0 && r.status().code() == nothing.code() &&
            r.status().message() == nothing.message()) {
          return;
        }
        if (r.status().code() == Code::kBusy) {
          if (ids.size() > 1) {
            for (const std::string& id : ids) {
              if (Interrupted() != 0 || !failure.ok()) return;
              run_batch({id});
            }
            return;
          }
          json::object b;
          b["id"] = ids.front();
          b["message"] = r.status().message();
          busy.emplace_back(std::move(b));
          return;
        }
        failure = r.status();
      };

  std::vector<std::string> batch;
  std::string cursor;
  do {
    auto page = store->Scan(args.name, cursor, kPage);
    if (!page.ok()) {
      failure = page.status();
      break;
    }
    for (const auto& entry : page->documents) {
      auto r = db.Read(args.name, entry.first);
      if (!r.ok()) {
        failure = r.status();
        break;
      }
      if (r->state != DocumentState::kFound) continue;
      batch.push_back(entry.first);
      if (batch.size() == args.batch) {
        if (Interrupted() != 0) break;  // the transaction in progress has ended
        run_batch(batch);
        batch.clear();
        if (!failure.ok()) break;
      }
    }
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty() && failure.ok() && Interrupted() == 0);
  if (!batch.empty() && failure.ok() && Interrupted() == 0) run_batch(batch);

  json::object o;
  o["collection"] = args.name;
  o["deleted"] = deleted;
  o["transactions"] = transactions;
  o["busy"] = busy;
  if (Interrupted() != 0) o["interrupted"] = InterruptedName();
  if (!failure.ok()) o["error"] = failure.ToString();
  PrintJson(o);
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(kExitOk),
                std::string("interrupted (") + InterruptedName() + "): " +
                    std::to_string(deleted) + " document(s) deleted before the signal; the "
                    "rest of '" + args.name + "' is untouched");
  }
  if (!failure.ok()) {
    return Fail(OutcomeExit(failure), "drop " + args.name + " stopped after deleting " +
                                          std::to_string(deleted) + " document(s): " +
                                          failure.ToString());
  }
  if (!busy.empty()) {
    return Fail(kExitBusy, std::to_string(busy.size()) +
                               " document(s) stayed held by other transactions and were not "
                               "deleted (see \"busy\"); run drop again later, or settle the "
                               "holders (`litetx gc --once`)");
  }
  return kExitOk;
}

}  // namespace

void AddCollections(CLI::App& app, Context& ctx) {
  CLI::App* cmd = app.add_subcommand("collections", "List, count or drop collections");
  cmd->require_subcommand(1);

  auto list = std::make_shared<ListArgs>();
  CLI::App* l = cmd->add_subcommand("list", "List the collections that hold documents");
  l->add_flag("--all", list->all, "Also list the engine's own collections (__litetx*)");
  l->add_flag("--counts", list->counts,
              "Add each collection's live documents (committed view; engine collections: "
              "stored documents)");
  AddFormatOption(l, &list->format);
  l->callback([&ctx, list] { ctx.run = [&ctx, list] { return RunList(ctx, *list); }; });

  auto count = std::make_shared<CountArgs>();
  CLI::App* c = cmd->add_subcommand(
      "count", "Count a collection's live, deleted and held documents");
  c->add_option("name", count->name, "Collection")->required();
  AddFormatOption(c, &count->format);
  c->callback([&ctx, count] { ctx.run = [&ctx, count] { return RunCount(ctx, *count); }; });

  auto drop = std::make_shared<DropArgs>();
  CLI::App* d = cmd->add_subcommand(
      "drop", "Delete every live document of a collection, through transactions");
  d->add_option("name", drop->name, "Collection")->required();
  d->add_flag("--yes", drop->yes, "Really do it (drop refuses without it)");
  d->add_flag("--force", drop->force,
              "Allow __litetx.txn: erase its outcome markers, only if every record is settled");
  d->add_option("--batch", drop->batch, "Deletes per transaction")
      ->check(WholeNumberCheck(1, 10000));
  d->add_option("--timeout", drop->timeout,
                "How long each transaction is re-run while documents are busy or conflict")
      ->check(DurationCheck());
  d->add_option("--busy-timeout", drop->busy_timeout,
                "Wait this long for a document held by another transaction, per attempt")
      ->check(DurationCheck());
  d->callback([&ctx, drop] { ctx.run = [&ctx, drop] { return RunDrop(ctx, *drop); }; });
}

}  // namespace litetx::cli
