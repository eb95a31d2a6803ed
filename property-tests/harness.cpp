// property-tests/harness.cpp — see harness.h.
#include "harness.h"

#include <sstream>
#include <stdexcept>

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "engine/meta.h"
#include "engine/outcomes.h"
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

std::shared_ptr<litetx::Store> NewMemoryStore() { return std::make_shared<litetx::MemoryStore>(); }

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
  if (interference) {
    const char* kind = interference->kind == Interference::Kind::kLive        ? "live"
                       : interference->kind == Interference::Kind::kTombstone ? "tombstone"
                                                                              : "bump";
    out << " interference[" << kind << " " << Id(interference->target) << " before the write of "
        << Id(interference->trigger) << "]";
  }
  return out.str();
}

litetx::Options TestOptions(std::shared_ptr<litetx::Clock> clock) {
  litetx::Options o;
  o.clock = std::move(clock);
  o.lease = kLease;
  o.busy_timeout = std::chrono::milliseconds{0};
  o.retry_backoff = {std::chrono::milliseconds{10}, std::chrono::milliseconds{1000}};
  o.renew_leases = false;  // no background writes: crash points count only the coordinator's
  // The faults injected on purpose would each log a warning: keep the output readable.
  static const std::shared_ptr<spdlog::logger> quiet = std::make_shared<spdlog::logger>(
      "ptest-quiet", std::make_shared<spdlog::sinks::null_sink_mt>());
  o.logger = quiet;
  return o;
}

litetx::CollectorOptions TestCollectorOptions(std::shared_ptr<litetx::Clock> clock) {
  litetx::CollectorOptions o;
  o.engine = TestOptions(std::move(clock));
  o.name = "gc-test";
  // A parallel commit whose record did not land can leave holds without a record: the sweep
  // settles them once their deadline has passed (so do writers that meet them).
  o.collections = {kColl};
  o.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
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
        m.last_writer = kSeedWriter;
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

void Interfere(litetx::Store& store, const Scenario& s, litetx::Clock& clock) {
  if (!s.interference) return;
  const Interference& in = *s.interference;
  Key key{kColl, Id(in.target)};
  auto g = store.Get(key);
  if (!g.ok()) throw std::runtime_error("interference: read failed: " + g.status().ToString());
  litetx::engine::Meta m;
  json::object body;
  if (g->has_value()) {
    auto decoded = litetx::engine::DecodeMeta((*g)->value);
    if (!decoded.ok()) throw std::runtime_error("interference: " + decoded.status().ToString());
    if (!decoded->txn.empty()) throw std::runtime_error("interference: " + key.id + " is held");
    m = std::move(decoded).value();
    body = litetx::engine::UserFields((*g)->value);
  }
  m.version = m.version == 0 ? 5 : m.version + 1;
  m.schema_version = m.schema_version == 0 ? 1 : m.schema_version;
  switch (in.kind) {
    case Interference::Kind::kLive:
      body = {{"n", 99}, {"s", "other"}};
      m.deleted = m.gone = false;
      m.at_ms = 0;
      m.last_writer = kIntruder;
      break;
    case Interference::Kind::kTombstone:
      body = {};
      m.deleted = true;
      m.gone = false;
      m.at_ms = clock.NowMillis();
      m.last_writer = kIntruder;
      break;
    case Interference::Kind::kBump:
      m.last_writer = kIntruder;
      break;
  }
  json::object value = litetx::engine::MakeStored(std::move(body), m);
  auto w = g->has_value() ? store.Replace(key, (*g)->revision, value) : store.Create(key, value);
  if (!w.ok()) throw std::runtime_error("interference: write failed: " + w.status().ToString());
}

InterferingStore::InterferingStore(std::shared_ptr<litetx::Store> target,
                                   std::shared_ptr<litetx::Store> raw, const Scenario& s,
                                   std::shared_ptr<litetx::Clock> clock)
    : ForwardingStore(std::move(target)), raw_(std::move(raw)), s_(s), clock_(std::move(clock)) {}

void InterferingStore::Before(const Key& k) {
  if (s_.interference && k.collection == kColl && k.id == Id(s_.interference->trigger)) {
    InterfereNow();
  }
}

bool InterferingStore::InterfereNow() {
  if (!s_.interference || done_) return false;
  done_ = true;
  Interfere(*raw_, s_, *clock_);
  return true;
}

litetx::Result<litetx::Revision> InterferingStore::Create(const Key& k, const json::object& v) {
  Before(k);
  return ForwardingStore::Create(k, v);
}

litetx::Result<litetx::Revision> InterferingStore::Replace(const Key& k, litetx::Revision e,
                                                           const json::object& v) {
  Before(k);
  return ForwardingStore::Replace(k, e, v);
}

void CommitWatch::Landed(const Key& k, const json::object& v) {
  ++writes_;
  bool commit = false;
  if (k.collection == litetx::kTransactionsCollection) {
    record_created_ = true;
    auto r = litetx::engine::DecodeRecord(v);
    commit = r.ok() && r->state == litetx::engine::TxnState::kCommitted;
    staging_id_.clear();
    listed_.clear();
    if (r.ok() && r->state == litetx::engine::TxnState::kStaging) {
      staging_id_ = k.id;
      for (const auto& a : r->actions) listed_.insert(a.key.id);
    }
  } else if (k.collection == kColl) {
    auto m = litetx::engine::DecodeMeta(v);
    holder_[k.id] = m.ok() ? m->txn : std::string();
    if (!record_created_) commit = m.ok() && m->txn.empty();
  }
  if (!staging_id_.empty() && !listed_.empty()) {
    bool all = true;
    for (const auto& id : listed_) {
      auto it = holder_.find(id);
      all = all && it != holder_.end() && it->second == staging_id_;
    }
    commit = commit || all;
  }
  if (commit && !committed_) {
    committed_ = true;
    commit_write_ = writes_;
  }
}

litetx::Result<litetx::Revision> CommitWatch::Create(const Key& k, const json::object& v) {
  auto r = ForwardingStore::Create(k, v);
  if (r.ok()) Landed(k, v);
  return r;
}

litetx::Result<litetx::Revision> CommitWatch::Replace(const Key& k, litetx::Revision e,
                                                      const json::object& v) {
  auto r = ForwardingStore::Replace(k, e, v);
  if (r.ok()) Landed(k, v);
  return r;
}

const char* RecordSeenName(RecordSeen r) {
  switch (r) {
    case RecordSeen::kNone: return "none";
    case RecordSeen::kPending: return "pending";
    case RecordSeen::kAborted: return "aborted";
    case RecordSeen::kCommitted: return "committed";
    case RecordSeen::kMany: return "several";
    case RecordSeen::kStaging: return "staging";
  }
  return "?";
}

std::map<std::string, litetx::StoredDocument> AllRecords(litetx::Store& store) {
  std::map<std::string, litetx::StoredDocument> out;
  for (std::string_view c : {litetx::kTransactionsCollection, litetx::kOutcomesCollection}) {
    std::string cursor;
    do {
      auto page = store.Scan(c, cursor, 256);
      if (!page.ok()) throw std::runtime_error("record scan failed: " + page.status().ToString());
      for (auto& [id, doc] : page->documents) {
        if (c == litetx::kTransactionsCollection) {
          out[id] = std::move(doc);
          continue;
        }
        const boost::json::value* e = doc.value.if_contains("e");
        const boost::json::value* at = doc.value.if_contains("at");
        if (e == nullptr || !e->is_string() || at == nullptr || !at->is_int64() ||
            e->get_string().size() % litetx::engine::kOutcomeEntryChars != 0) {
          throw std::runtime_error("outcome page " + id + " is not well formed");
        }
        const std::string entries(e->get_string());
        for (std::size_t i = 0; i < entries.size(); i += litetx::engine::kOutcomeEntryChars) {
          litetx::engine::TxnRecord marker;
          marker.state = entries[i + litetx::engine::kOutcomeEntryChars - 1] == 'c'
                             ? litetx::engine::TxnState::kCommitted
                             : litetx::engine::TxnState::kAborted;
          marker.done = true;
          marker.done_at_ms = at->get_int64();
          out[id + entries.substr(i, litetx::engine::kOutcomeEntryChars - 1)] =
              litetx::StoredDocument{litetx::engine::EncodeRecord(marker), 0};
        }
      }
      cursor = std::move(page->next_cursor);
    } while (!cursor.empty());
  }
  return out;
}

RecordSeen ObserveRecord(litetx::Store& store) {
  const auto all = AllRecords(store);  // folded outcomes included
  if (all.empty()) return RecordSeen::kNone;
  if (all.size() > 1) return RecordSeen::kMany;
  const auto& [record_id, record_doc] = *all.begin();
  auto r = litetx::engine::DecodeRecord(record_doc.value);
  if (!r.ok()) throw std::runtime_error("record undecodable: " + r.status().ToString());
  switch (r->state) {
    case litetx::engine::TxnState::kPending: return RecordSeen::kPending;
    case litetx::engine::TxnState::kAborted: return RecordSeen::kAborted;
    case litetx::engine::TxnState::kCommitted: return RecordSeen::kCommitted;
    case litetx::engine::TxnState::kStaging: {
      const std::string& id = record_id;
      for (const auto& a : r->actions) {
        auto g = store.Get(a.key);
        if (!g.ok()) throw std::runtime_error("document read failed: " + g.status().ToString());
        if (!g->has_value()) return RecordSeen::kStaging;
        auto m = litetx::engine::DecodeMeta((*g)->value);
        if (!m.ok() || m->txn != id) return RecordSeen::kStaging;
      }
      return RecordSeen::kCommitted;
    }
  }
  return RecordSeen::kMany;
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
  Oracle o;
  std::string err;
  {
    // The before state: the seeded documents as the interference (if any) leaves them.
    auto clock = std::make_shared<litetx::ManualClock>();
    auto mem = std::make_shared<litetx::MemoryStore>();
    SeedStore(*mem, s, clock);
    Interfere(*mem, s, *clock);
    o.before = ReadContents(*mem, s.docs.size(), &err).value();
    o.before_versions = RawVersions(*mem, s.docs.size());
  }
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  auto watch = std::make_shared<CommitWatch>(mem);
  auto interfering = std::make_shared<InterferingStore>(watch, mem, s, clock);
  litetx::Database db(interfering, TestOptions(clock));
  auto r = db.Commit(BuildTxn(*mem, s));
  db.Flush();  // the finisher's writes are part of the run
  o.interfered = interfering->interfered();
  interfering->InterfereNow();  // if the run never reached the trigger
  o.code = r.code();
  o.writes = watch->writes();
  o.commit_write = watch->commit_write();
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

CrashReport RunCrashCase(const Scenario& s, const Oracle& o, const CrashCase& c) {
  CrashReport rep;
  auto fail = [&](std::string why) {
    rep.failure = std::move(why);
    return rep;
  };
  auto clock = std::make_shared<litetx::ManualClock>();
  std::shared_ptr<litetx::Store> mem = c.store ? c.store() : NewMemoryStore();
  SeedStore(*mem, s, clock);
  // Coordinator -> crash and faults -> interference -> commit watch -> store.
  auto watch = std::make_shared<CommitWatch>(mem);
  auto interfering = std::make_shared<InterferingStore>(watch, mem, s, clock);
  litetx::FaultOptions f;
  f.crash_after_writes = c.crash_k;
  f.rule = c.rule;
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(interfering, f);
  litetx::Transaction txn = BuildTxn(*mem, s);
  {
    litetx::Database db(faulty, TestOptions(clock));
    try {
      rep.code = db.Commit(txn).code();
    } catch (const litetx::SimulatedCrash&) {
      rep.coordinator_crashed = true;
    }
  }  // the Database's destructor waits for its finisher, which may crash too
  // A crash on the finisher thread, after Commit returned, is a crash of the coordinator's
  // process after its commit point: the collector must finish what the finisher left.
  rep.coordinator_crashed = rep.coordinator_crashed || faulty->crashed();
  rep.coordinator_writes = faulty->writes();
  rep.commit_point = watch->committed();
  rep.record = ObserveRecord(*mem);
  bool writes_something = false;
  for (const ActSpec& a : s.acts) writes_something |= a.type != ActionType::kCheck;

  if (rep.record == RecordSeen::kMany) return fail("more than one transaction record");
  if (rep.record != RecordSeen::kNone && rep.commit_point != (rep.record == RecordSeen::kCommitted)) {
    return fail(std::string("the commit flip ") + (rep.commit_point ? "landed" : "never landed") +
                " but the record is " + RecordSeenName(rep.record));
  }
  if (!rep.coordinator_crashed) {
    if (!c.rule && rep.code != o.code) {
      return fail(std::string("outcome ") + std::string(litetx::CodeName(rep.code)) +
                  ", oracle says " + std::string(litetx::CodeName(o.code)));
    }
    if (writes_something && rep.commit_point != (rep.code == Code::kOk)) {
      return fail(std::string("outcome ") + std::string(litetx::CodeName(rep.code)) + " but the commit point " +
                  (rep.commit_point ? "was" : "was not") + " reached");
    }
    // Without a crash the coordinator settles everything itself before it returns.
    if (std::string dirty = CheckClean(*mem); !dirty.empty()) {
      return fail("the coordinator returned " + std::string(litetx::CodeName(rep.code)) +
                  " and left: " + dirty);
    }
  }
  // The other writer, if the coordinator stopped before its trigger write.
  interfering->InterfereNow();
  rep.side = rep.commit_point || (!rep.coordinator_crashed && rep.code == Code::kOk) ? 'a' : 'b';

  clock->Advance(std::chrono::milliseconds(kLease) + std::chrono::milliseconds(1));
  if (c.gc_crash_j > 0) {
    rep.gc_ran = true;
    litetx::FaultOptions g;
    g.crash_after_writes = c.gc_crash_j;
    auto faulty_gc = std::make_shared<litetx::FaultInjectingStore>(mem, g);
    litetx::Collector gc(faulty_gc, TestCollectorOptions(clock));
    try {
      (void)gc.RunOnce();
    } catch (const litetx::SimulatedCrash&) {
      rep.gc_crashed = true;
    }
    rep.gc_writes = faulty_gc->writes();
  }
  auto counting = std::make_shared<litetx::CountingStore>(mem);
  litetx::Collector gc(counting, TestCollectorOptions(clock));
  litetx::Status st = gc.RunOnce();
  rep.healthy_gc_writes = counting->counts().writes();
  if (!st.ok()) return fail("collector failed: " + st.ToString());
  rep.failure = CheckFinal(*mem, o, s.docs.size(), rep.side);
  return rep;
}

}  // namespace ptest
