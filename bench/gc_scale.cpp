// bench/gc_scale.cpp — `litetx gc --bench` (bench/gc_scale.h).
#include "bench/gc_scale.h"

#include <atomic>
#include <chrono>
#include <map>
#include <cstdio>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <boost/json/serialize.hpp>

#include "engine/meta.h"
#include "engine/outcomes.h"
#include "engine/tombstones.h"
#include "engine/record.h"
#include "engine/txn_id.h"
#include "litetx/collector.h"
#include "litetx/database.h"
#include "litetx/document.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/forwarding_store.h"

namespace litetx::bench {

namespace json = boost::json;

namespace {

// Counts the documents read through it: every Get (found or not) and every document a Scan
// returned; batches count per operation.
class ReadCountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Result<std::optional<StoredDocument>> Get(const Key& key) override {
    reads_.fetch_add(1);
    return ForwardingStore::Get(key);
  }
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override {
    auto page = ForwardingStore::Scan(collection, cursor, limit);
    if (page.ok()) reads_.fetch_add(page->documents.size());
    return page;
  }
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override {
    for (const BatchOp& op : ops) {
      if (op.type == BatchOp::Type::kGet) reads_.fetch_add(1);
    }
    // The store's own batch (one LMDB transaction, one Redis pipeline), not the single calls
    // (which would count each read twice).
    return ForwardBatch(ops);
  }
  std::uint64_t Take() { return reads_.exchange(0); }

 private:
  std::atomic<std::uint64_t> reads_{0};
};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// A current-format transaction id made at `ms` (engine/txn_id.h's layout).
std::string IdAt(std::int64_t ms, std::mt19937_64& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(engine::kTxnIdDigits, '0');
  std::uint64_t a = rng();
  std::uint64_t t = static_cast<std::uint64_t>(ms);
  id[0] = kHex[a & 0xf];
  a >>= 4;
  for (std::size_t i = engine::kTxnIdTimeDigits; i >= 1; --i, t >>= 4) id[i] = kHex[t & 0xf];
  for (std::size_t i = engine::kTxnIdDigits - 1; i > engine::kTxnIdTimeDigits; --i, a >>= 4) {
    id[i] = kHex[a & 0xf];
  }
  return id;
}

// Writes `ops` values in batches; returns the first error.
Status WriteAll(Store& store, std::vector<std::pair<Key, json::object>>& items) {
  std::vector<BatchOp> ops;
  ops.reserve(items.size());
  for (auto& [k, v] : items) ops.push_back(BatchOp::Create(k, v));
  for (const BatchResult& r : store.Batch(ops)) {
    if (!r.status.ok()) return r.status;
  }
  items.clear();
  return Status::Ok();
}

// Logical bytes of a collection: ids and serialized JSON values; and the document count.
Result<std::pair<std::uint64_t, std::uint64_t>> CollectionBytes(Store& store,
                                                                std::string_view collection) {
  std::uint64_t bytes = 0, docs = 0;
  std::string cursor;
  do {
    auto page = store.Scan(collection, cursor, 1024);
    if (!page.ok()) return page.status();
    for (const auto& [id, doc] : page->documents) {
      bytes += id.size() + json::serialize(doc.value).size();
      ++docs;
    }
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty());
  return std::make_pair(bytes, docs);
}

// `n` transactions of two inserts whose coordinator dies after its record and both applies
// (classic commit: a pending record, both documents held).
Status Abandon(const std::shared_ptr<Store>& store, std::uint64_t n, const std::string& collection,
               std::uint64_t* serial) {
  Options o;
  o.parallel_commit = false;
  o.finish_in_background = false;
  o.renew_leases = false;
  for (std::uint64_t i = 0; i < n; ++i, ++*serial) {
    FaultOptions f;
    f.crash_after_writes = 3;
    Database db(std::make_shared<FaultInjectingStore>(store, f), o);
    try {
      auto r = db.Commit(Transaction()
                             .Insert(collection, "a" + std::to_string(*serial), json::object{{"n", 1}})
                             .Insert(collection, "b" + std::to_string(*serial), json::object{{"n", 2}}));
      if (!r.ok()) return r.status();
      return Status::FailedPrecondition("an abandoned transaction committed");
    } catch (const SimulatedCrash&) {
      // died after its applies, as intended
    }
  }
  // A collector counts a record as abandoned once it is older than its older_than (1 ms here):
  // the last ones were made within this millisecond.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return Status::Ok();
}

// Tombstones written in setup: `count` of them, ids `prefix` and a number, made at `at_ms`.
struct TombSpec {
  const char* prefix;
  std::uint64_t count;
  std::int64_t at_ms;
};

std::string TombId(const char* prefix, std::uint64_t i) {
  char id[32];
  std::snprintf(id, sizeof id, "%s%010llu", prefix, static_cast<unsigned long long>(i));
  return id;
}

// The tombstone index entries of `tombs` in `collection`, one per tombstone (as one-write
// deletes leave them).
Status WriteTombIndex(Store& store, const std::string& collection,
                      const std::vector<TombSpec>& tombs) {
  std::vector<std::pair<Key, json::object>> items;
  items.reserve(1000);
  for (const TombSpec& t : tombs) {
    for (std::uint64_t i = 0; i < t.count; ++i) {
      Key doc{collection, TombId(t.prefix, i)};
      items.emplace_back(engine::TombEntryForDoc(t.at_ms, doc), engine::TombEntryValue({doc}));
      if (items.size() == 1000) {
        if (Status s = WriteAll(store, items); !s.ok()) return s;
      }
    }
  }
  return WriteAll(store, items);
}

json::object PassReport(const char* what, double seconds, std::uint64_t reads,
                        const CollectorPass& p, const CollectorStats& s) {
  json::object o;
  o["pass"] = what;
  o["ms"] = seconds * 1000.0;
  o["documents_read"] = reads;
  o["records_read"] = p.records_read;
  o["abandoned_settled"] = p.abandoned.done;
  o["markers_folded"] = p.markers.done;
  o["expired_erased"] = p.expired.done;  // unfoldable markers and outcome pages past retention
  o["pages_read"] = p.pages_read;
  o["tombstones_due"] = p.tombstones.due;
  o["tombstones_purged"] = p.tombstones.done;
  o["index_read"] = p.index_read;  // tombstone index entries and the documents they name
  o["swept"] = s.swept;
  o["failed"] = s.failed;
  return o;
}

}  // namespace

Result<json::object> RunGcScale(const std::shared_ptr<Store>& store,
                                const GcScaleOptions& options) {
  for (std::string_view c : {kTransactionsCollection, kOutcomesCollection}) {
    auto page = store->Scan(c, "", 1);
    if (!page.ok()) return page.status();
    if (!page->documents.empty()) {
      return Status::InvalidArgument("gc --bench needs a store whose " + std::string(c) +
                                     " collection is empty (it writes markers there)");
    }
  }
  auto note = [&](const std::string& line) {
    if (!options.progress) return;
    std::fprintf(stderr, "litetx gc --bench: %s\n", line.c_str());
    std::fflush(stderr);
  };
  const std::string tomb = options.prefix + ".tomb";
  const std::string live = options.prefix + ".live";
  std::mt19937_64 rng(20261129);
  const std::int64_t now = SystemClock()->NowMillis();
  json::object report;
  report["markers"] = options.markers;
  report["tombstones"] = options.tombstones;
  report["tombstones_due"] = options.tombstones_due;
  report["abandoned"] = options.abandoned;

  // The tombstones: younger than the retention ("t" ids), and past it ("u" ids, which sort
  // after the others: a budgeted sweep from the start meets them last).
  const std::vector<TombSpec> tombs = {
      {"t", options.tombstones, now},
      {"u", options.tombstones_due, now - 25 * 3'600'000}};

  // 1. Setup.
  auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<std::pair<Key, json::object>> items;
    items.reserve(1000);
    const std::int64_t span = std::max<std::int64_t>(1, options.span.count());
    // folded_setup: page id -> (entries, at), written once every id is made.
    std::map<std::string, std::pair<std::string, std::int64_t>> pages;
    for (std::uint64_t i = 0; i < options.markers && options.folded_setup; ++i) {
      const std::int64_t ms = now - span + static_cast<std::int64_t>(rng() % span);
      const std::string id = IdAt(ms, rng);
      auto& [entries, at] = pages[id.substr(0, engine::kOutcomePageIdChars)];
      entries.append(id, engine::kOutcomePageIdChars, std::string::npos);
      entries.push_back(rng() % 10 == 0 ? 'a' : 'c');
      at = std::max(at, ms + 5);
    }
    for (auto& [page_id, page] : pages) {
      json::object v;
      v["e"] = page.first;
      v["at"] = page.second;
      items.emplace_back(Key{std::string(kOutcomesCollection), page_id}, std::move(v));
      if (items.size() == 1000) {
        if (Status s = WriteAll(*store, items); !s.ok()) return s;
      }
    }
    pages.clear();
    for (std::uint64_t i = 0; i < options.markers && !options.folded_setup; ++i) {
      const std::int64_t ms = now - span + static_cast<std::int64_t>(rng() % span);
      engine::TxnRecord m;
      m.state = rng() % 10 == 0 ? engine::TxnState::kAborted : engine::TxnState::kCommitted;
      m.created_ms = m.priority_ms = ms;
      m.gc_at_ms = ms + 30'000;
      m.done = true;
      m.done_at_ms = ms + 5;
      items.emplace_back(Key{std::string(kTransactionsCollection), IdAt(ms, rng)},
                         engine::EncodeRecord(m));
      if (items.size() == 1000) {
        if (Status s = WriteAll(*store, items); !s.ok()) return s;
      }
      if (options.progress && i % 1'000'000 == 999'999) note(std::to_string(i + 1) + " markers");
    }
    if (Status s = WriteAll(*store, items); !s.ok()) return s;
    for (const TombSpec& t : tombs) {
      for (std::uint64_t i = 0; i < t.count; ++i) {
        engine::Meta meta;
        meta.version = 2;
        meta.deleted = true;
        meta.at_ms = t.at_ms;
        items.emplace_back(Key{tomb, TombId(t.prefix, i)},
                           engine::MakeStored(json::object{}, meta));
        if (items.size() == 1000) {
          if (Status s = WriteAll(*store, items); !s.ok()) return s;
        }
      }
    }
    if (Status s = WriteAll(*store, items); !s.ok()) return s;
    // A store kept by this release has its tombstones in the tombstone index; one upgraded
    // from an earlier one has not (the "before" pass): their entries are written after it.
    if (options.folded_setup) {
      if (Status s = WriteTombIndex(*store, tomb, tombs); !s.ok()) return s;
    }
  }
  std::uint64_t serial = 0;
  if (!options.folded_setup) {  // for the "before" pass
    if (Status s = Abandon(store, options.abandoned, live, &serial); !s.ok()) return s;
  }
  report["setup_s"] = Seconds(std::chrono::steady_clock::now() - t0);
  if (!options.folded_setup) {
    auto b = CollectionBytes(*store, kTransactionsCollection);
    if (!b.ok()) return b.status();
    report["marker_bytes_before"] = b->first;
    report["marker_bytes_per_txn_before"] =
        options.markers == 0 ? 0.0 : static_cast<double>(b->first) / options.markers;
  }
  note("setup done");

  auto counting = std::make_shared<ReadCountingStore>(store);
  CollectorOptions base;
  base.older_than = std::chrono::milliseconds(1);  // no live transaction: all of them abandoned
  base.name = "gc-bench";
  // The outcomes span the last `span`; kept 10 minutes longer, none expires while the passes
  // run, so a pass shows the work it was given, not the expiry of what setup's own duration aged
  // (which costs about one read per page due, at a service's steady rate a few per second).
  base.outcome_retention = options.span + std::chrono::minutes(10);
  report["outcome_retention_s"] = static_cast<double>(base.outcome_retention.count()) / 1000.0;
  json::array passes;
  auto run = [&](const char* what, CollectorOptions o) -> Status {
    Collector gc(counting, std::move(o));
    counting->Take();
    auto start = std::chrono::steady_clock::now();
    Status s = gc.RunOnce();
    const double secs = Seconds(std::chrono::steady_clock::now() - start);
    passes.push_back(PassReport(what, secs, counting->Take(), gc.last_pass(), gc.stats()));
    note(std::string(what) + ": " + json::serialize(passes.back()));
    return s;
  };

  // 2. Before: markers in the record collection, the sweep over the tombstones.
  if (!options.folded_setup) {
    CollectorOptions o = base;
    o.fold_outcomes = false;
    o.collections = {tomb};
    if (Status s = run("before: markers unfolded, sweep on", o); !s.ok()) return s;
  }

  if (!options.migrate) {
    report["passes"] = std::move(passes);
    return report;
  }
  // 3. Migration: fold every marker.
  if (!options.folded_setup) {
    CollectorOptions o = base;
    Collector gc(counting, o);
    counting->Take();
    auto start = std::chrono::steady_clock::now();
    std::uint64_t rounds = 0;
    for (;;) {
      Status s = gc.RunOnce();
      if (!s.ok()) return s;
      ++rounds;
      if (gc.last_pass().markers.due == 0) break;
    }
    json::object m;
    m["passes"] = rounds;
    m["s"] = Seconds(std::chrono::steady_clock::now() - start);
    m["documents_read"] = counting->Take();
    m["folded"] = gc.stats().folded;
    report["migration"] = std::move(m);
    note("migration: " + std::to_string(gc.stats().folded) + " markers folded");
  }
  {
    auto b = CollectionBytes(*store, kOutcomesCollection);
    if (!b.ok()) return b.status();
    report["page_bytes_after"] = b->first;
    report["pages"] = b->second;
    report["marker_bytes_per_txn_after"] =
        options.markers == 0 ? 0.0 : static_cast<double>(b->first) / options.markers;
  }

  if (!options.folded_setup) {
    auto start = std::chrono::steady_clock::now();
    if (Status s = WriteTombIndex(*store, tomb, tombs); !s.ok()) return s;
    report["index_setup_s"] = Seconds(std::chrono::steady_clock::now() - start);
    note("tombstone index written");
  }

  // 4. After: new abandoned transactions; a pass without the sweep, one with it, one idle.
  if (Status s = Abandon(store, options.abandoned, live, &serial); !s.ok()) return s;
  if (Status s = run("after: folded, no sweep", base); !s.ok()) return s;
  if (Status s = Abandon(store, options.abandoned, live, &serial); !s.ok()) return s;
  {
    CollectorOptions o = base;
    o.collections = {tomb};
    if (Status s = run("after: folded, sweep on", o); !s.ok()) return s;
  }
  if (Status s = run("after: nothing to do", base); !s.ok()) return s;
  report["passes"] = std::move(passes);

  // 5. A backlog of abandoned transactions settled by one collector, then by several at once.
  if (options.backlog > 0 && options.run_collectors) {
    json::array runs;
    for (int n : {1, options.collectors}) {
      if (Status s = Abandon(store, options.backlog, live, &serial); !s.ok()) return s;
      note("backlog of " + std::to_string(options.backlog) + " made; " + std::to_string(n) +
           " collector(s)");
      auto secs = options.run_collectors(n);
      if (!secs.ok()) return secs.status();
      // Whatever is left (nothing, if the collectors did their work) would show here.
      std::uint64_t left = 0;
      std::string cursor;
      do {
        auto page = store->Scan(kTransactionsCollection, cursor, 1024);
        if (!page.ok()) return page.status();
        for (const auto& [id, doc] : page->documents) {
          auto rec = engine::DecodeRecord(doc.value);
          if (rec.ok() && !rec->done) ++left;
        }
        cursor = std::move(page->next_cursor);
      } while (!cursor.empty());
      json::object r;
      r["collectors"] = n;
      r["s"] = *secs;
      r["tx_per_s"] = *secs > 0 ? static_cast<double>(options.backlog) / *secs : 0.0;
      r["left_unsettled"] = left;
      runs.push_back(std::move(r));
      note("backlog settled: " + json::serialize(runs.back()));
    }
    const double one = runs[0].as_object().at("s").to_number<double>();
    const double many = runs[1].as_object().at("s").to_number<double>();
    json::object b;
    b["transactions"] = options.backlog;
    b["runs"] = std::move(runs);
    b["speedup"] = many > 0 ? one / many : 0.0;
    report["backlog"] = std::move(b);
  }
  return report;
}

}  // namespace litetx::bench
