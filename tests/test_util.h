// tests/test_util.h — shared helpers of the litetx GoogleTest suite.
//
//   * JSON shorthands (Obj) and raw access to what a store holds (Raw, MetaOf, Dump, Seed...).
//   * HookStore: a ForwardingStore whose calls can be failed, observed or interfered with
//     (fail the k-th Replace of a key, lose a reply after the write landed, run a check after
//     every write...).
//   * World: a MemoryStore, a ManualClock and Options suited to tests (instant sleeps, small
//     busy timeout).
//   * Image: the comparable part of a ReadResult.
//   * Exact numbers: bit-for-bit comparison of JSON values and doubles that are hard to
//     convert to text and back.
//   * Deep nesting: documents nested many levels deep, built and torn down without recursion.
//   * LmdbScratch: an LMDB store in a temporary directory.
#pragma once

#include <condition_variable>
#include <stdlib.h>

#include <bit>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include "engine/meta.h"
#include "engine/outcomes.h"
#include "engine/record.h"
#include "litetx/litetx.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/lmdb_store.h"

namespace ltxtest {

namespace json = boost::json;
using namespace std::chrono_literals;
using litetx::Code;
using litetx::Key;
using litetx::Revision;
using litetx::Status;
using litetx::StoredDocument;

// Parses a JSON object literal.
inline json::object Obj(std::string_view text) { return json::parse(text).as_object(); }

inline const Key kNoKey{};

inline Key TxnKey(std::string id) {
  return Key{std::string(litetx::kTransactionsCollection), std::move(id)};
}

// ---------------------------------------------------------------------------------------------
// HookStore

enum class Op { kGet, kCreate, kReplace, kErase, kScan };

inline const char* OpName(Op op) {
  switch (op) {
    case Op::kGet: return "get";
    case Op::kCreate: return "create";
    case Op::kReplace: return "replace";
    case Op::kErase: return "erase";
    case Op::kScan: return "scan";
  }
  return "?";
}

struct Call {
  Op op = Op::kGet;
  Key key;                                // scan: {collection, ""}
  const json::object* value = nullptr;    // create / replace
  Revision expected = 0;                  // replace / erase
  int nth = 0;  // 1-based: this is the nth call of `op` on `key` (counting this one)

  bool is_write() const { return op == Op::kCreate || op == Op::kReplace || op == Op::kErase; }
  bool on_record() const { return key.collection == litetx::kTransactionsCollection; }
  // The "state" a record write stores ("" if not a record create/replace).
  std::string record_state() const {
    if (!on_record() || value == nullptr) return "";
    const json::value* s = value->if_contains("state");
    return s != nullptr && s->is_string() ? std::string(s->get_string()) : "";
  }
  // An outcome marker write: the record replaced by {"done": true, ...}.
  bool is_marker() const {
    return on_record() && value != nullptr && value->if_contains("done") != nullptr;
  }
  bool is_commit_point() const {
    return op == Op::kReplace && record_state() == "committed" && !is_marker();
  }
  bool is_abort_flip() const {
    return op == Op::kReplace && record_state() == "aborted" && !is_marker();
  }
};

// A ForwardingStore with two hooks:
//   before(call): return a Status to fail the call with it without forwarding; std::nullopt to
//                 forward. May touch target() (the inner store) directly to interfere.
//   after(call, result): runs after a forwarded call; return a Status to report it instead of
//                 the real result (e.g. kUnknown: "the write landed but the reply was lost").
// Hooks must be set before the store is used concurrently.
class HookStore : public litetx::ForwardingStore {
 public:
  using Before = std::function<std::optional<Status>(const Call&)>;
  using After = std::function<std::optional<Status>(const Call&, const Status&)>;

  explicit HookStore(std::shared_ptr<litetx::Store> target)
      : ForwardingStore(std::move(target)) {}

  Before before;
  After after;

  litetx::Result<std::optional<StoredDocument>> Get(const Key& key) override {
    Call c = MakeCall(Op::kGet, key, nullptr, 0);
    if (auto s = RunBefore(c)) return *s;
    auto r = ForwardingStore::Get(key);
    if (auto s = RunAfter(c, r.status())) return *s;
    return r;
  }
  litetx::Result<Revision> Create(const Key& key, const json::object& value) override {
    Call c = MakeCall(Op::kCreate, key, &value, 0);
    if (auto s = RunBefore(c)) return *s;
    auto r = ForwardingStore::Create(key, value);
    if (auto s = RunAfter(c, r.status())) return *s;
    return r;
  }
  litetx::Result<Revision> Replace(const Key& key, Revision expected,
                                   const json::object& value) override {
    Call c = MakeCall(Op::kReplace, key, &value, expected);
    if (auto s = RunBefore(c)) return *s;
    auto r = ForwardingStore::Replace(key, expected, value);
    if (auto s = RunAfter(c, r.status())) return *s;
    return r;
  }
  Status Erase(const Key& key, Revision expected) override {
    Call c = MakeCall(Op::kErase, key, nullptr, expected);
    if (auto s = RunBefore(c)) return *s;
    Status r = ForwardingStore::Erase(key, expected);
    if (auto s = RunAfter(c, r)) return *s;
    return r;
  }
  litetx::Result<litetx::ScanPage> Scan(std::string_view collection, std::string_view cursor,
                                        std::size_t limit) override {
    Call c = MakeCall(Op::kScan, Key{std::string(collection), ""}, nullptr, 0);
    if (auto s = RunBefore(c)) return *s;
    auto r = ForwardingStore::Scan(collection, cursor, limit);
    if (auto s = RunAfter(c, r.status())) return *s;
    return r;
  }

  // How many calls of `op` on `key` were made so far.
  int calls(Op op, const Key& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counts_.find({op, key});
    return it == counts_.end() ? 0 : it->second;
  }
  // How many calls of `op` on any key of `collection` were made so far.
  int calls_in(Op op, std::string_view collection) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [k, v] : counts_) {
      if (k.first == op && k.second.collection == collection) n += v;
    }
    return n;
  }

 private:
  Call MakeCall(Op op, const Key& key, const json::object* value, Revision expected) {
    std::lock_guard<std::mutex> lock(mu_);
    return Call{op, key, value, expected, ++counts_[{op, key}]};
  }
  std::optional<Status> RunBefore(const Call& c) {
    if (!before) return std::nullopt;
    auto s = before(c);
    if (s && s->ok()) ADD_FAILURE() << "a before hook returned an OK status";
    return s;
  }
  std::optional<Status> RunAfter(const Call& c, const Status& result) {
    if (!after) return std::nullopt;
    auto s = after(c, result);
    if (s && s->ok()) ADD_FAILURE() << "an after hook returned an OK status";
    return s;
  }

  mutable std::mutex mu_;
  std::map<std::pair<Op, Key>, int> counts_;
};

// The decoded record (or outcome marker) of transaction `id`; std::nullopt if absent.
// The record of transaction `id` as Database::Outcome sees it (engine::GetRecordDoc): the
// document at its record key, or, when that is absent or a fence and the outcome was folded
// into its outcome page (engine/outcomes.h), a marker made from the page entry.
inline litetx::Result<std::optional<litetx::StoredDocument>> EffectiveRecord(litetx::Store& store,
                                                                             const std::string& id) {
  litetx::Options o;
  o.clock = litetx::SystemClock();
  o.logger = litetx::engine::DefaultLogger();
  o.max_attempts = 1;
  const litetx::engine::Env env{store, o, *o.clock, *o.logger};
  return litetx::engine::GetRecordDoc(env, id);
}

// A record folded into its outcome page reads as its marker (EffectiveRecord).
inline std::optional<litetx::engine::TxnRecord> RecordOf(litetx::Store& store,
                                                         const std::string& id) {
  auto raw = EffectiveRecord(store, id);
  EXPECT_TRUE(raw.ok()) << raw.status().ToString();
  if (!raw.ok() || !raw->has_value()) return std::nullopt;
  auto rec = litetx::engine::DecodeRecord((*raw)->value);
  EXPECT_TRUE(rec.ok()) << rec.status().ToString();
  if (!rec.ok()) return std::nullopt;
  return *rec;
}

// Database::Outcome, expected to succeed.
inline litetx::TxnOutcome OutcomeOf(litetx::Database& db, const std::string& id) {
  auto r = db.Outcome(id);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : litetx::TxnOutcome::kNotFound;
}

// Runs `fn` on its own thread; Wait tells whether it ended within a real-time bound.
class Async {
 public:
  explicit Async(std::function<void()> fn)
      : thread_([this, fn = std::move(fn)] {
          fn();
          std::lock_guard<std::mutex> lock(mu_);
          done_ = true;
          cv_.notify_all();
        }) {}
  ~Async() { thread_.join(); }
  bool Wait(std::chrono::milliseconds bound) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, bound, [this] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Holds the threads that call Hold (from store hooks) until Open.
class Gate {
 public:
  void Hold() {
    std::unique_lock<std::mutex> lock(mu_);
    ++held_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  // Waits (at most 10 s) until `n` threads have reached Hold; false on timeout.
  bool WaitHeld(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int held_ = 0;
  bool open_ = false;
};

inline constexpr int kForever = INT_MAX;

// A before hook: calls of `op` on `key` numbered from `from` (1-based) on, `times` of them,
// fail with `code` without reaching the store.
inline HookStore::Before FailCalls(Op op, Key key, int from, Code code, int times = kForever) {
  return [=](const Call& c) -> std::optional<Status> {
    if (c.op == op && c.key == key && c.nth >= from &&
        (times == kForever || c.nth < from + times)) {
      return Status(code, std::string("injected ") + OpName(op) + " failure");
    }
    return std::nullopt;
  };
}

// ---------------------------------------------------------------------------------------------
// Raw store access

// The stored document (whole object with metadata), or std::nullopt if absent.
inline std::optional<json::object> Raw(litetx::Store& store, const Key& key) {
  auto r = store.Get(key);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->has_value()) return std::nullopt;
  return (*r)->value;
}
inline std::optional<json::object> Raw(litetx::Store& store, std::string c, std::string id) {
  return Raw(store, Key{std::move(c), std::move(id)});
}

inline Revision RevisionOf(litetx::Store& store, const Key& key) {
  auto r = store.Get(key);
  EXPECT_TRUE(r.ok() && r->has_value()) << "no document " << key.collection << "/" << key.id;
  return r.ok() && r->has_value() ? (*r)->revision : 0;
}

// The decoded metadata of a stored document (a test failure if absent or undecodable).
inline litetx::engine::Meta MetaOf(litetx::Store& store, const Key& key) {
  auto raw = Raw(store, key);
  EXPECT_TRUE(raw.has_value()) << "no document " << key.collection << "/" << key.id;
  if (!raw) return {};
  auto m = litetx::engine::DecodeMeta(*raw);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : litetx::engine::Meta{};
}
inline litetx::engine::Meta MetaOf(litetx::Store& store, std::string c, std::string id) {
  return MetaOf(store, Key{std::move(c), std::move(id)});
}

// The user fields of a stored document (empty if absent).
inline json::object BodyOf(litetx::Store& store, const Key& key) {
  auto raw = Raw(store, key);
  return raw ? litetx::engine::UserFields(*raw) : json::object{};
}
inline json::object BodyOf(litetx::Store& store, std::string c, std::string id) {
  return BodyOf(store, Key{std::move(c), std::move(id)});
}

// Every document of `collection`, in scan order.
inline std::vector<std::pair<std::string, StoredDocument>> ScanAll(litetx::Store& store,
                                                                   std::string_view collection,
                                                                   std::size_t page = 16) {
  std::vector<std::pair<std::string, StoredDocument>> out;
  std::string cursor;
  for (int guard = 0; guard < 100000; ++guard) {
    auto p = store.Scan(collection, cursor, page);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) break;
    for (auto& d : p->documents) out.push_back(std::move(d));
    if (p->next_cursor.empty()) break;
    cursor = p->next_cursor;
  }
  return out;
}

// Every document of the given collections plus the transaction records, with revisions: two
// equal dumps mean nothing was written in between (revisions change on every write).
using Dump = std::map<Key, StoredDocument>;
inline Dump DumpStore(litetx::Store& store, const std::vector<std::string>& collections) {
  Dump d;
  std::vector<std::string> all = collections;
  all.emplace_back(litetx::kTransactionsCollection);
  for (const auto& c : all) {
    for (auto& [id, doc] : ScanAll(store, c)) d[Key{c, id}] = std::move(doc);
  }
  return d;
}
inline bool SameDump(const Dump& a, const Dump& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.revision != ib->second.revision ||
        ia->second.value != ib->second.value) {
      return false;
    }
  }
  return true;
}

// ActiveTransaction documents still in play (outcome markers — "done" — not counted).
inline std::size_t RecordCount(litetx::Store& store) {
  std::size_t n = 0;
  for (const auto& [id, doc] : ScanAll(store, litetx::kTransactionsCollection)) {
    const json::value* done = doc.value.if_contains("done");
    if (done == nullptr || !done->is_bool() || !done->get_bool()) ++n;
  }
  return n;
}
// Outcome markers: records of transactions that are over, kept for Database::Outcome, whether
// still in the record collection or folded into an outcome page (one entry each).
// The tombstone index (engine/tombstones.h): entry id -> the keys ("collection/id") its
// well-formed entries name (malformed entries and keys are left out).
inline std::map<std::string, std::set<std::string>> TombstoneIndexOf(litetx::Store& store) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [id, doc] : ScanAll(store, litetx::kTombstoneIndexCollection)) {
    const json::value* list = doc.value.if_contains("k");
    if (list == nullptr || !list->is_array()) continue;
    bool ok = true;
    for (const auto& k : list->get_array()) {
      ok = ok && k.is_array() && k.get_array().size() == 2 && k.get_array()[0].is_string() &&
           k.get_array()[1].is_string();
    }
    if (!ok) continue;
    auto& keys = out[id];
    for (const auto& k : list->get_array()) {
      keys.insert(std::string(k.get_array()[0].get_string()) + "/" +
                  std::string(k.get_array()[1].get_string()));
    }
  }
  return out;
}

// True if c/id is a tombstone or placeholder that no transaction holds.
inline bool IsDeadDoc(litetx::Store& store, const std::string& c, const std::string& id) {
  auto raw = Raw(store, c, id);
  if (!raw) return false;
  auto m = litetx::engine::DecodeMeta(*raw);
  return m.ok() && !m->live() && m->txn.empty();
}

inline std::size_t MarkerCount(litetx::Store& store) {
  std::size_t folded = 0;
  for (const auto& [id, doc] : ScanAll(store, litetx::kOutcomesCollection)) {
    const json::value* e = doc.value.if_contains("e");
    if (e != nullptr && e->is_string()) folded += e->get_string().size() / litetx::engine::kOutcomeEntryChars;
  }
  return ScanAll(store, litetx::kTransactionsCollection).size() - RecordCount(store) + folded;
}

// Asserts the quiescent invariants: no document of `collections` is held by a transaction or
// carries a pending delete, and no transaction record is left.
inline void ExpectClean(litetx::Store& store, const std::vector<std::string>& collections) {
  for (const auto& c : collections) {
    for (const auto& [id, doc] : ScanAll(store, c)) {
      auto m = litetx::engine::DecodeMeta(doc.value);
      ASSERT_TRUE(m.ok()) << c << "/" << id << ": " << m.status().ToString();
      EXPECT_EQ(m->txn, "") << c << "/" << id << " still carries a transaction reference";
      EXPECT_FALSE(m->deleting) << c << "/" << id << " still carries the deleting flag";
    }
  }
  EXPECT_EQ(RecordCount(store), 0u) << "transaction records left behind";
}

// Writes a document with hand-made metadata straight into `store`, replacing what is there.
inline void PutRaw(litetx::Store& store, const Key& key, const json::object& stored) {
  auto g = store.Get(key);
  ASSERT_TRUE(g.ok());
  if (g->has_value()) {
    ASSERT_TRUE(store.Replace(key, (*g)->revision, stored).ok());
  } else {
    ASSERT_TRUE(store.Create(key, stored).ok());
  }
}
inline void PutMeta(litetx::Store& store, const Key& key, json::object body,
                    const litetx::engine::Meta& meta) {
  PutRaw(store, key, litetx::engine::MakeStored(std::move(body), meta));
}
// Makes `key` a live document at `version` held by a live (pending, lease far ahead) transaction
// `txn` that updates it: its record names the document, as a running coordinator's would.
inline void HoldLive(litetx::Store& store, const Key& key, json::object body,
                     std::uint64_t version, const std::string& txn, std::int64_t now_ms) {
  litetx::engine::Meta m;
  m.version = version;
  m.schema_version = 1;
  m.txn = txn;
  m.last_writer = txn;
  json::object doc = litetx::engine::MakeStored(std::move(body), m);
  doc["_ltx"].as_object()["u"] = json::object{{"p", "live"}, {"pv", version - 1}, {"psv", 1}};
  PutRaw(store, key, doc);
  json::object rec{{"state", "pending"}, {"created", now_ms}, {"gc_at", now_ms + 3'600'000},
                   {"actions", json::array{json::object{{"op", "update"}, {"c", key.collection},
                                                        {"id", key.id}, {"prior", "live"},
                                                        {"pv", version - 1}, {"psv", 1}}}}};
  PutRaw(store, TxnKey(txn), rec);
}

inline litetx::engine::Meta LiveMeta(std::uint64_t version, std::uint32_t schema = 1) {
  litetx::engine::Meta m;
  m.version = version;
  m.schema_version = schema;
  return m;
}

// ---------------------------------------------------------------------------------------------
// Versions

// An insert of an id that has no stored version (absent, or a placeholder at version 0) starts
// at the inserting Database's clock in microseconds (docs/protocol.md §1.1). World's
// ManualClock starts at 1'700'000'000'000 ms, so an insert made before the clock moves gets
// kFirstVersion, and V(n) is the n-th version of such a document: V(1) the insert, V(2) after
// one more write (update, adjust, pending delete, rollback), and so on.
inline constexpr std::uint64_t kFirstVersion = 1'700'000'000'000'000;
inline constexpr std::uint64_t V(std::uint64_t n) { return kFirstVersion + n - 1; }
// The first version of an insert made now, on `clock`.
inline std::uint64_t FirstVersionAt(litetx::Clock& clock) {
  return static_cast<std::uint64_t>(clock.NowMillis()) * 1000;
}

// ---------------------------------------------------------------------------------------------
// Images

// The comparable content of a ReadResult: state, version, schema version, user fields.
struct Image {
  litetx::DocumentState state = litetx::DocumentState::kNotFound;
  std::uint64_t version = 0;
  std::uint32_t schema_version = 0;
  json::object doc;

  friend bool operator==(const Image& a, const Image& b) {
    return a.state == b.state && a.version == b.version && a.schema_version == b.schema_version &&
           a.doc == b.doc;
  }
  friend void PrintTo(const Image& i, std::ostream* os) {
    *os << litetx::DocumentStateName(i.state) << " v" << i.version << " sv" << i.schema_version
        << " " << json::serialize(i.doc);
  }
};
inline std::ostream& operator<<(std::ostream& os, const Image& i) {
  PrintTo(i, &os);
  return os;
}

inline Image ImageOf(const litetx::ReadResult& r) {
  return Image{r.state, r.version, r.schema_version, r.doc};
}
inline Image Found(std::uint64_t v, json::object doc, std::uint32_t sv = 1) {
  return Image{litetx::DocumentState::kFound, v, sv, std::move(doc)};
}
inline Image DeletedImage(std::uint64_t v) {
  return Image{litetx::DocumentState::kDeleted, v, 0, {}};
}
inline Image NotFoundImage() { return Image{}; }

// Reads through `db` and returns the image; a test failure (and a not-found image) if the
// read fails.
inline Image ReadImage(litetx::Database& db, std::string_view c, std::string_view id,
                       litetx::Isolation iso = litetx::Isolation::kReadCommitted) {
  auto r = db.Read(c, id, litetx::ReadOptions{iso});
  EXPECT_TRUE(r.ok()) << c << "/" << id << ": " << r.status().ToString();
  return r.ok() ? ImageOf(*r) : Image{};
}

// ---------------------------------------------------------------------------------------------
// World: the usual test set-up.

// A logger that drops everything.
inline std::shared_ptr<spdlog::logger> QuietLogger() {
  static const auto logger = std::make_shared<spdlog::logger>(
      "quiet", std::make_shared<spdlog::sinks::null_sink_mt>());
  return logger;
}

struct World {
  std::shared_ptr<litetx::ManualClock> clock = std::make_shared<litetx::ManualClock>();
  std::shared_ptr<litetx::MemoryStore> mem = std::make_shared<litetx::MemoryStore>();

  litetx::Options Opts() const {
    litetx::Options o;
    // The engine's warnings about the faults tests inject on purpose are not printed; a test
    // of the default logger sets the logger back to null.
    o.logger = QuietLogger();
    o.clock = clock;
    o.busy_timeout = 50ms;
    o.lease = 120s;            // tests move the virtual clock past leases explicitly
    o.renew_leases = false;    // no background writes: write counts and races stay exact
    // The unit tests drive the classic path step by step (record, applies, flip), which every
    // transaction with checks and every fallback still takes; the parallel commit has its own
    // tests (parallel_commit_test.cpp) and runs in the hostile, property, crash and stress suites.
    o.parallel_commit = false;
    // Commit finishes before it returns: these tests look at the store right after a commit
    // and script the order of store calls. The background finisher has tests of its own
    // (finisher_test.cpp), and the crash, race and stress suites run with it on.
    o.finish_in_background = false;
    return o;
  }
  // A database straight on the memory store (for seeding and for checking).
  std::unique_ptr<litetx::Database> Direct() const {
    return std::make_unique<litetx::Database>(mem, Opts());
  }
};

// A World whose database under test goes through a HookStore and a CountingStore and finishes
// in the background (the tests of the finisher).
struct FinisherWorld : World {
  std::shared_ptr<HookStore> hook = std::make_shared<HookStore>(mem);
  std::shared_ptr<litetx::CountingStore> counting = std::make_shared<litetx::CountingStore>(hook);
  std::unique_ptr<litetx::Database> direct = Direct();

  // The default configuration: background finishing and the parallel commit.
  litetx::Options Background() const {
    litetx::Options o = Opts();
    o.finish_in_background = true;
    o.parallel_commit = true;
    return o;
  }
  litetx::CollectorOptions Gc() const {
    litetx::CollectorOptions o;
    o.engine = Opts();
    o.name = "gc-test";
    return o;
  }
};

// Commits `txn` and requires it to succeed.
// Thrown by CommitDyingAfterWrite's store hook: the coordinator's process died there.
struct CoordinatorDied {};

// Commits `txn` through a Database on `store` whose coordinator dies (CoordinatorDied) right
// after its k-th write lands, as a process killed there would. Returns the transaction's id
// (the id of its record create; empty if it died before one).
inline std::string CommitDyingAfterWrite(const std::shared_ptr<litetx::Store>& store,
                                         litetx::Options options, const litetx::Transaction& txn,
                                         int k) {
  auto hook = std::make_shared<HookStore>(store);
  std::string id;
  int writes = 0;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && s.ok() && id.empty()) id = c.key.id;
    if (c.is_write() && s.ok() && ++writes == k) throw CoordinatorDied{};
    return std::nullopt;
  };
  litetx::Database doomed(hook, std::move(options));
  EXPECT_THROW((void)doomed.Commit(txn), CoordinatorDied) << "to die after write " << k;
  return id;
}

inline litetx::CommitInfo MustCommit(litetx::Database& db, const litetx::Transaction& txn) {
  auto r = db.Commit(txn);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : litetx::CommitInfo{};
}

// ---------------------------------------------------------------------------------------------
// Exact numbers

// True if `a` and `b` are the same JSON with every number of the same kind (int64, uint64,
// double) and, for doubles, the same bits (so -0.0 differs from 0.0). Recursive: for the
// shallow values of tests.
inline bool SameBits(const json::value& a, const json::value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case json::kind::double_:
      return std::bit_cast<std::uint64_t>(a.get_double()) ==
             std::bit_cast<std::uint64_t>(b.get_double());
    case json::kind::array: {
      const json::array& x = a.get_array();
      const json::array& y = b.get_array();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!SameBits(x[i], y[i])) return false;
      }
      return true;
    }
    case json::kind::object: {
      const json::object& x = a.get_object();
      const json::object& y = b.get_object();
      if (x.size() != y.size()) return false;
      for (const auto& kv : x) {
        const json::value* other = y.if_contains(kv.key());
        if (other == nullptr || !SameBits(kv.value(), *other)) return false;
      }
      return true;
    }
    default:
      return a == b;
  }
}

// How many numbers of `want` (an array) differ from `got` at the same index, by SameBits; a
// size mismatch counts every number.
inline std::size_t CountChanged(const json::array& want, const json::value& got) {
  if (!got.is_array() || got.get_array().size() != want.size()) return want.size();
  std::size_t n = 0;
  for (std::size_t i = 0; i < want.size(); ++i) n += SameBits(want[i], got.get_array()[i]) ? 0 : 1;
  return n;
}

// A finite double from a random bit pattern (non-finite patterns are drawn again).
inline double RandomDouble(std::mt19937_64& rng) {
  for (;;) {
    double d = std::bit_cast<double>(rng());
    if (std::isfinite(d)) return d;
  }
}

// Finite doubles that are hard to print and read back: both zeros, the ends of the normal and
// subnormal ranges, values next to powers of two and ten, then `random` random bit patterns
// (every fourth one a subnormal).
inline json::array HardDoubles(std::size_t random, std::uint64_t seed = 20240611) {
  using L = std::numeric_limits<double>;
  json::array out;
  for (double d : {0.0, -0.0, L::max(), -L::max(), L::min(), -L::min(), L::denorm_min(),
                   -L::denorm_min(), std::nextafter(L::min(), 0.0), 2 * L::denorm_min(),
                   std::nextafter(L::max(), 0.0), 1.0, std::nextafter(1.0, 2.0),
                   std::nextafter(1.0, 0.0), 0.1, 0.2, 0.3, 1e23, 8.41e21, 5e-324, 9007199254740993.0,
                   2.2250738585072011e-308, 1.7976931348623157e308, 4.9406564584124654e-324,
                   0x1.fffffffffffffp-1022, 123456789012345678.0, -2.5e-310}) {
    out.emplace_back(d);
  }
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < random; ++i) {
    std::uint64_t bits = rng();
    if (i % 4 == 3) bits &= 0x800fffffffffffffULL;  // exponent 0: subnormal (or a zero)
    double d = std::bit_cast<double>(bits);
    out.emplace_back(std::isfinite(d) ? d : RandomDouble(rng));
  }
  return out;
}

// Integers at the ends of the int64 and uint64 ranges, and where doubles stop being exact.
inline json::array ExtremeIntegers() {
  return json::array{std::numeric_limits<std::int64_t>::min(),
                     std::numeric_limits<std::int64_t>::min() + 1,
                     std::numeric_limits<std::int64_t>::max(),
                     std::numeric_limits<std::uint64_t>::max(),
                     std::numeric_limits<std::uint64_t>::max() - 1,
                     std::uint64_t{1} << 63,
                     std::int64_t{9007199254740993},
                     std::int64_t{-9007199254740993},
                     std::int64_t{0},
                     std::int64_t{-1}};
}

// ---------------------------------------------------------------------------------------------
// Deep nesting

// {"a":{"a":...{}}}: `levels` nested objects (the outermost counts as 1; REQUIRES levels >= 1);
// with `arrays`, the even levels are arrays instead ({"a":[{"a":[...]}]}). Built
// without recursion. Destroying a very deep value recurses in Boost.JSON: pass a storage
// whose deallocation is trivial (see DeepStorage) for such a value, or call TearDown.
inline json::object Nested(std::size_t levels, bool arrays = false, json::storage_ptr sp = {}) {
  json::object innermost(sp);  // level `levels`
  json::value v(std::move(innermost));  // (braces would make an array of it)
  for (std::size_t level = levels - 1; level > 0; --level) {  // wrap it in level `level`
    if (arrays && level % 2 == 0) {
      json::array a(sp);
      a.push_back(std::move(v));
      v = std::move(a);
    } else {
      json::object o(sp);
      o.emplace("a", std::move(v));
      v = std::move(o);
    }
  }
  return std::move(v.as_object());
}

// Takes `v` apart from the top down so that no destructor recurses.
inline void TearDown(json::value& v) {
  for (;;) {
    json::value child;
    if (v.is_object() && !v.get_object().empty()) {
      child = std::move(v.get_object().begin()->value());
    } else if (v.is_array() && !v.get_array().empty()) {
      child = std::move(v.get_array().back());
    } else {
      break;
    }
    v = std::move(child);  // the old container is empty of deep values: a shallow destruction
  }
  v = nullptr;
}
inline void TearDown(json::object& o) {
  json::value v(std::move(o));
  TearDown(v);
}

// A memory resource for very deep test values: Boost.JSON skips destroying the elements of
// containers that use it (its deallocation is trivial), so dropping such a value never
// recurses. The resource must outlive every value that uses it.
struct DeepStorage {
  json::monotonic_resource resource;
  json::storage_ptr ptr() { return json::storage_ptr(&resource); }
};

// ---------------------------------------------------------------------------------------------
// LMDB

// A fresh, empty directory under the system temp directory; removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "litetx-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& str() const { return path_; }
  std::string Sub(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }

 private:
  std::string path_;
};

// An LMDB store (no fsync) in a fresh temporary directory, removed afterwards.
class LmdbScratch {
 public:
  LmdbScratch() {
    litetx::LmdbOptions o;
    o.durability = litetx::LmdbDurability::kNoSync;
    auto s = litetx::LmdbStore::Open(dir_.str(), o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) store_ = *s;
  }
  ~LmdbScratch() { store_.reset(); }  // closed before the directory goes
  LmdbScratch(const LmdbScratch&) = delete;
  LmdbScratch& operator=(const LmdbScratch&) = delete;

  const std::shared_ptr<litetx::LmdbStore>& store() const { return store_; }
  const std::string& dir() const { return dir_.str(); }

 private:
  TempDir dir_;
  std::shared_ptr<litetx::LmdbStore> store_;
};

}  // namespace ltxtest
