// property-tests/harness.cpp — see harness.h.
#include "harness.h"

#include <sstream>

#include "engine/meta.h"
#include "engine/record.h"

namespace ptest {
namespace json = boost::json;
using litetx::ActionType;
using litetx::Code;
using litetx::Key;

namespace {

const char* InitName(Init i) {
  switch (i) {
    case Init::kAbsent: return "absent";
    case Init::kLive: return "live";
    case Init::kDeleted: return "deleted";
    case Init::kGone: return "gone";
  }
  return "?";
}

}  // namespace

std::string Id(int doc) { return "d" + std::to_string(doc); }

std::string Scenario::Describe() const {
  std::ostringstream out;
  out << "docs[";
  for (std::size_t i = 0; i < docs.size(); ++i) {
    out << (i ? " " : "") << Id(static_cast<int>(i)) << "=" << InitName(docs[i].init) << ":" << docs[i].n;
  }
  out << "] txn[";
  for (std::size_t i = 0; i < acts.size(); ++i) {
    const ActSpec& a = acts[i];
    out << (i ? " " : "") << litetx::ActionTypeName(a.type) << " " << Id(a.doc) << " " << a.value
        << (a.version == VersionMode::kRight ? " v=ok" : a.version == VersionMode::kWrong ? " v=bad" : "");
  }
  out << "]";
  return out.str();
}

litetx::Options TestOptions(std::shared_ptr<litetx::Clock> clock) {
  litetx::Options o;
  o.clock = std::move(clock);
  o.lease = kLease;
  o.busy_timeout = std::chrono::milliseconds{0};
  o.retry_backoff = {std::chrono::milliseconds{10}, std::chrono::milliseconds{1000}};
  o.renew_leases = false;  // no background writes: crash points count only the coordinator's
  return o;
}

litetx::CollectorOptions TestCollectorOptions(std::shared_ptr<litetx::Clock> clock) {
  litetx::CollectorOptions o;
  o.engine = TestOptions(std::move(clock));
  o.name = "gc-test";
  return o;
}

void SeedStore(litetx::Store& store, const Scenario& s, std::shared_ptr<litetx::Clock> clock) {
  for (std::size_t i = 0; i < s.docs.size(); ++i) {
    const DocSpec& d = s.docs[i];
    Key key{kColl, Id(static_cast<int>(i))};
    litetx::engine::Meta m;
    m.version = 3;
    m.schema_version = 1;
    switch (d.init) {
      case Init::kAbsent: continue;
      case Init::kLive: {
        m.last_writer = "seed";
        (void)store.Create(key, litetx::engine::MakeStored({{"n", d.n}, {"s", "init"}, {"old", true}}, m));
        continue;
      }
      case Init::kDeleted: m.deleted = true; break;
      case Init::kGone: m.gone = true; break;
    }
    m.at_ms = clock->NowMillis();
    (void)store.Create(key, litetx::engine::MakeStored({}, m));
  }
}

litetx::Transaction BuildTxn(litetx::Store& store, const Scenario& s) {
  litetx::Transaction t;
  for (const ActSpec& a : s.acts) {
    std::string id = Id(a.doc);
    std::uint64_t version = 0;
    auto g = store.Get(Key{kColl, id});
    if (g.ok() && g->has_value()) {
      auto m = litetx::engine::DecodeMeta((*g)->value);
      if (m.ok()) version = m->version;
    }
    std::optional<std::uint64_t> expected;
    if (a.version == VersionMode::kRight || a.type == ActionType::kCheck) expected = version;
    if (a.version == VersionMode::kWrong) expected = version + 7;
    switch (a.type) {
      case ActionType::kInsert: t.Insert(kColl, id, {{"n", a.value}, {"s", "ins"}}); break;
      case ActionType::kUpdate:
        t.Update(kColl, id, {{"s", "u" + std::to_string(a.value)}, {"m", a.value}}, {"old"}, expected);
        break;
      case ActionType::kAdjust: t.Adjust(kColl, id, {{"n", a.value}}, expected); break;
      case ActionType::kDelete: t.Delete(kColl, id, expected); break;
      case ActionType::kCheck: t.Check(kColl, id, *expected); break;
    }
  }
  return t;
}

std::optional<Contents> ReadContents(litetx::Store& store, std::size_t n, std::string* error) {
  // A Database over a shared_ptr that does not own the store.
  litetx::Database db(std::shared_ptr<litetx::Store>(&store, [](litetx::Store*) {}),
                      TestOptions(std::make_shared<litetx::ManualClock>()));
  Contents out;
  for (std::size_t i = 0; i < n; ++i) {
    auto r = db.Read(kColl, Id(static_cast<int>(i)));
    if (!r.ok()) {
      if (error) *error = Id(static_cast<int>(i)) + ": " + r.status().ToString();
      return std::nullopt;
    }
    out.push_back(Content{r->state, r->schema_version, r->doc});
  }
  return out;
}

std::vector<std::uint64_t> RawVersions(litetx::Store& store, std::size_t n) {
  std::vector<std::uint64_t> v;
  for (std::size_t i = 0; i < n; ++i) {
    auto g = store.Get(Key{kColl, Id(static_cast<int>(i))});
    std::uint64_t version = 0;
    if (g.ok() && g->has_value()) {
      auto m = litetx::engine::DecodeMeta((*g)->value);
      if (m.ok()) version = m->version;
    }
    v.push_back(version);
  }
  return v;
}

std::string CheckClean(litetx::Store& store) {
  std::ostringstream bad;
  for (const char* c : {kColl, litetx::kTransactionsCollection.data()}) {
    std::string cursor;
    do {
      auto page = store.Scan(c, cursor, 1000);
      if (!page.ok()) return "scan failed: " + page.status().ToString();
      for (const auto& [id, doc] : page->documents) {
        if (c == std::string(kColl)) {
          auto m = litetx::engine::DecodeMeta(doc.value);
          if (!m.ok()) bad << id << " undecodable; ";
          else if (!m->txn.empty() || m->deleting) bad << id << " still held by " << m->txn << "; ";
        } else {
          auto r = litetx::engine::DecodeRecord(doc.value);
          if (!r.ok()) bad << "record " << id << " undecodable; ";
          else if (!r->done) bad << "record " << id << " still " << litetx::engine::TxnStateName(r->state) << "; ";
        }
      }
      cursor = page->next_cursor;
    } while (!cursor.empty());
  }
  return bad.str();
}

bool LastWrittenBy(litetx::Store& store, std::size_t n, const std::string& txn_id) {
  for (std::size_t i = 0; i < n; ++i) {
    auto g = store.Get(Key{kColl, Id(static_cast<int>(i))});
    if (!g.ok() || !g->has_value()) continue;
    auto m = litetx::engine::DecodeMeta((*g)->value);
    if (m.ok() && !txn_id.empty() && m->last_writer == txn_id) return true;
  }
  return false;
}

std::string Show(const Contents& c) {
  std::ostringstream out;
  for (std::size_t i = 0; i < c.size(); ++i) {
    out << (i ? " " : "") << Id(static_cast<int>(i)) << "=" << litetx::DocumentStateName(c[i].state);
    if (c[i].state == litetx::DocumentState::kFound) out << json::serialize(c[i].doc);
  }
  return out.str();
}

Oracle RunOracle(const Scenario& s) {
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  Oracle o;
  std::string err;
  o.before = ReadContents(*mem, s.docs.size(), &err).value();
  o.before_versions = RawVersions(*mem, s.docs.size());
  auto counting = std::make_shared<litetx::CountingStore>(mem);
  litetx::Database db(counting, TestOptions(clock));
  auto r = db.Commit(BuildTxn(*mem, s));
  o.code = r.code();
  o.writes = counting->counts().writes();
  o.after = ReadContents(*mem, s.docs.size(), &err).value();
  o.after_versions = RawVersions(*mem, s.docs.size());
  return o;
}

std::string CheckFinal(litetx::Store& store, const Oracle& o, std::size_t n, char must) {
  std::string err;
  auto final = ReadContents(store, n, &err);
  if (!final) return "read failed: " + err;
  bool is_before = *final == o.before;
  bool is_after = o.code == Code::kOk && *final == o.after;
  if (must == 'a' && !is_after) return "expected the after state " + Show(o.after) + ", got " + Show(*final);
  if (must == 'b' && !is_before) return "expected the before state " + Show(o.before) + ", got " + Show(*final);
  if (!is_before && !is_after) {
    return "mixed state " + Show(*final) + " (before " + Show(o.before) + ", after " + Show(o.after) + ")";
  }
  auto versions = RawVersions(store, n);
  for (std::size_t i = 0; i < n; ++i) {
    if (versions[i] < o.before_versions[i]) return Id(static_cast<int>(i)) + " version went down";
    if (!is_after || is_before) continue;
    // An insert of an absent document starts at the clock in microseconds, read when the
    // commit evaluated it; retries' backoff moves the virtual clock, so it may be later than
    // the oracle's. Written once and never bumped, it is still a whole number of milliseconds.
    const bool first_version = o.before_versions[i] == 0 && o.after_versions[i] != 0;
    if (first_version ? versions[i] < o.after_versions[i] || versions[i] % 1000 != 0
                      : versions[i] != o.after_versions[i]) {
      return Id(static_cast<int>(i)) + " committed at version " + std::to_string(versions[i]) +
             ", oracle says " + std::to_string(o.after_versions[i]);
    }
  }
  if (std::string dirty = CheckClean(store); !dirty.empty()) return "not clean: " + dirty;
  return "";
}

std::string RunCrashCase(const Scenario& s, const Oracle& o, std::uint64_t crash_k,
                         std::uint64_t gc_crash_j, bool* coordinator_crashed) {
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  litetx::FaultOptions f;
  f.crash_after_writes = crash_k;
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, f);
  litetx::Transaction txn = BuildTxn(*mem, s);
  bool crashed = false;
  Code code = Code::kOk;
  {
    litetx::Database db(faulty, TestOptions(clock));
    try {
      code = db.Commit(txn).code();
    } catch (const litetx::SimulatedCrash&) {
      crashed = true;
    }
  }
  if (coordinator_crashed) *coordinator_crashed = crashed;
  if (!crashed && code != o.code) {
    return std::string("outcome ") + std::string(litetx::CodeName(code)) + ", oracle says " +
           std::string(litetx::CodeName(o.code));
  }
  clock->Advance(std::chrono::milliseconds(kLease) + std::chrono::milliseconds(1));
  if (gc_crash_j > 0) {
    litetx::FaultOptions g;
    g.crash_after_writes = gc_crash_j;
    litetx::Collector gc(std::make_shared<litetx::FaultInjectingStore>(mem, g),
                         TestCollectorOptions(clock));
    try {
      (void)gc.RunOnce();
    } catch (const litetx::SimulatedCrash&) {
    }
  }
  litetx::Collector gc(mem, TestCollectorOptions(clock));
  if (litetx::Status st = gc.RunOnce(); !st.ok()) return "collector failed: " + st.ToString();
  char must = crashed ? 0 : (code == Code::kOk ? 'a' : 'b');
  return CheckFinal(*mem, o, s.docs.size(), must);
}

}  // namespace ptest
