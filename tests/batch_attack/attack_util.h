// tests/batch_attack/attack_util.h — the step the attacks run, and the checks of its outcome.
//
// The step: 14 items {"n": i} with keys "i00".."i13", four to a chunk (chunks [0,4), [4,8),
// [8,12), [12,14)). Item 2 fails retryably (kUnavailable) every time: its retries are used up
// and the recoverer writes a dead-letter document for it. Item 5 is poison (kInvalidArgument):
// the recoverer declines it and it is skipped. Item 7 is filtered out. Item 9 fails retryably
// (kConflict) the first time each execution processes it. Every other item is written to
// collection "out" as {"n": i, "sq": i*i, "times": 1}. The recoverer also declines kCorruption,
// which the skip policy does not skip either: a test fails the step with it. The writer and the recoverer count in
// "times" how often a document was written (an update adds one), so an output written twice
// shows as times 2 even where an insert would have refused it.
//
// Modes: sequential chunks; three chunks at once; a transaction per item (three items of a
// chunk at once); and sequential chunks whose writer refuses item 10 (kInvalidArgument), which
// makes the step write chunk 2 item by item (the scan) and skip item 10 in the write phase.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "litetx/batch.h"
#include "litetx/collector.h"
#include "litetx/litetx.h"
#include "test_util.h"

#ifndef LITETX_LONG_TESTS
#define LITETX_LONG_TESTS 0
#endif

namespace battack {

namespace json = boost::json;
namespace lb = litetx::batch;
using litetx::Code;
using litetx::Status;

inline bool LongRun() {
  const char* e = std::getenv("LITETX_LONG");
  return LITETX_LONG_TESTS != 0 || (e != nullptr && std::string(e) == "1");
}

inline constexpr int kItems = 14;
inline constexpr const char* kOut = "out";
inline constexpr const char* kDead = "dead";
inline constexpr const char* kState = "litetx_batch";
inline constexpr const char* kJob = "job-1";

enum class Mode { kSequential, kConcurrent, kPerItem, kScan };
inline const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kSequential: return "sequential";
    case Mode::kConcurrent: return "concurrency3";
    case Mode::kPerItem: return "per_item";
    case Mode::kScan: return "scan";
  }
  return "?";
}
inline const Mode kModes[] = {Mode::kSequential, Mode::kConcurrent, Mode::kPerItem, Mode::kScan};

inline std::string ItemKey(int i) {
  char b[16];
  std::snprintf(b, sizeof b, "i%02d", i);
  return b;
}

inline std::vector<lb::Item> Items(int n = kItems) {
  std::vector<lb::Item> v;
  for (int i = 0; i < n; ++i) v.push_back(lb::Item{0, ItemKey(i), json::object{{"n", i}}});
  return v;
}

inline int N(const lb::Item& item) { return static_cast<int>(item.value.at("n").to_number<int>()); }

// The ids the step keeps for `job`/`step`.
inline std::string Pad(std::uint64_t n) {
  char b[32];
  std::snprintf(b, sizeof b, "%020llu", static_cast<unsigned long long>(n));
  return b;
}
inline std::string StepId(const std::string& job = kJob, const std::string& step = "step") {
  return job + "/" + step;
}
inline std::string ChunkId(std::uint64_t k, const std::string& job = kJob) {
  return StepId(job) + "/chunk/" + Pad(k);
}
inline std::string SkipId(std::uint64_t p, const std::string& job = kJob) {
  return StepId(job) + "/skip/" + Pad(p);
}
inline std::string ItemMarkerId(std::uint64_t p, const std::string& job = kJob) {
  return StepId(job) + "/item/" + Pad(p);
}
inline std::string ScanId(std::uint64_t k, const std::string& job = kJob) {
  return StepId(job) + "/scan/" + Pad(k);
}

// Inserts `id` with `body` and times 1, or adds one to the times of the document there.
inline Status Upsert(litetx::TxnContext& tx, const char* c, const std::string& id,
                     json::object body) {
  auto g = tx.Get(c, id);
  if (!g.ok()) return g.status();
  if (g->state == litetx::DocumentState::kFound) {
    const json::value* t = g->doc.if_contains("times");
    const std::int64_t times = t != nullptr && t->is_int64() ? t->as_int64() : 0;
    return tx.Update(c, id, json::object{{"times", times + 1}});
  }
  body["times"] = 1;
  return tx.Insert(c, id, std::move(body));
}

// The state of one execution's step functions, and hooks the attacks use.
struct Exec {
  Mode mode = Mode::kSequential;
  std::mutex mu;
  std::set<std::string> failed_once;  // item 9's first failure in this execution
  // Called at the start of each write call (e.g. to hold an execution inside write()).
  std::function<void(const std::vector<lb::Output>&)> on_write;
  // Called at the start of each process call.
  std::function<void(const lb::Item&)> on_process;
  // If set and it returns a status, write fails with it (after on_write).
  std::function<std::optional<Status>(const std::vector<lb::Output>&)> fail_write;
  // If set and it returns a status, process fails with it (after on_process).
  std::function<std::optional<Status>(const lb::Item&)> fail_process;
};

inline lb::StepFunctions Functions(std::shared_ptr<Exec> ex) {
  lb::StepFunctions f;
  f.process = [ex](litetx::TxnContext&, const lb::Item& item)
      -> litetx::Result<std::optional<json::value>> {
    if (ex->on_process) ex->on_process(item);
    if (ex->fail_process) {
      if (auto s = ex->fail_process(item)) return *s;
    }
    const int n = N(item);
    if (n == 2) return Status::Unavailable("remote service down");
    if (n == 5) return Status::InvalidArgument("poison item");
    if (n == 7) return std::optional<json::value>{};
    if (n == 9) {
      std::lock_guard<std::mutex> lock(ex->mu);
      if (ex->failed_once.insert(item.key).second) return Status::Conflict("deadlock loser");
    }
    return std::optional<json::value>(json::object{{"n", n}, {"sq", n * n}});
  };
  f.write = [ex](litetx::TxnContext& tx, const std::vector<lb::Output>& outs) -> Status {
    if (ex->on_write) ex->on_write(outs);
    if (ex->fail_write) {
      if (auto s = ex->fail_write(outs)) return *s;
    }
    if (ex->mode == Mode::kScan) {
      for (const auto& o : outs) {
        if (o.item->key == "i10") return Status::InvalidArgument("output i10 rejected");
      }
    }
    for (const auto& o : outs) {
      if (Status s = Upsert(tx, kOut, o.item->key, o.value.as_object()); !s.ok()) return s;
    }
    return Status::Ok();
  };
  f.recover = [](litetx::TxnContext& tx, const lb::Item& item, const Status& failure) -> Status {
    // Poison is skipped instead; a failure of the data itself stops the step.
    if (failure.code() == Code::kInvalidArgument || failure.code() == Code::kCorruption) {
      return failure;
    }
    return Upsert(tx, kDead, item.key,
                  json::object{{"n", N(item)}, {"code", litetx::CodeName(failure.code())}});
  };
  return f;
}

// The chunk of `item` (four items to a chunk).
inline int ChunkOf(const lb::Item& item) { return N(item) / 4; }

inline lb::StepOptions StepOpts(Mode mode, const std::string& job = kJob) {
  lb::StepOptions o;
  o.job = job;
  o.state_collection = kState;
  o.commit_interval = 4;
  o.skip.skip_limit = 3;
  o.retry.max_attempts = 3;
  o.backoff = lb::BackoffPolicy::None();
  if (mode == Mode::kConcurrent) o.concurrency = 3;
  if (mode == Mode::kPerItem) {
    o.transaction_per_item = true;
    o.concurrency = 3;
  }
  return o;
}

// A store, a clock and the options of the databases on them.
struct Rig {
  std::shared_ptr<litetx::ManualClock> clock = std::make_shared<litetx::ManualClock>();
  std::shared_ptr<litetx::MemoryStore> mem = std::make_shared<litetx::MemoryStore>();
  bool parallel = true;

  litetx::Options Opts() const {
    litetx::Options o;
    o.logger = ltxtest::QuietLogger();
    o.clock = clock;
    o.busy_timeout = std::chrono::milliseconds(50);
    o.lease = std::chrono::seconds(120);
    o.renew_leases = false;
    o.parallel_commit = parallel;
    o.finish_in_background = false;
    return o;
  }
  std::unique_ptr<litetx::Database> Db(std::shared_ptr<litetx::Store> s = nullptr) const {
    return std::make_unique<litetx::Database>(s ? std::move(s) : mem, Opts());
  }
  // Moves the clock past the lease and runs a collector over the store: what a crashed
  // execution left in flight is finished or rolled back.
  Status Settle() const {
    clock->Advance(std::chrono::seconds(121));
    litetx::CollectorOptions co;
    co.engine = Opts();
    co.name = "gc-attack";
    co.collections = {kOut, kDead, kState};
    co.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
    litetx::Collector gc(mem, co);
    return gc.RunOnce();
  }
};

// One execution of the step on `db` (a new reader and new step functions).
inline litetx::Result<lb::StepReport> RunExec(litetx::Database& db, Mode mode,
                                              std::shared_ptr<Exec> ex = nullptr,
                                              const lb::StepOptions* opts = nullptr) {
  if (!ex) ex = std::make_shared<Exec>();
  ex->mode = mode;
  lb::VectorReader reader(Items());
  lb::StepFunctions fns = Functions(ex);
  const lb::StepOptions o = opts != nullptr ? *opts : StepOpts(mode);
  return lb::RunStep(db, reader, fns, o);
}

// What the step must end with.
struct Expected {
  std::set<int> outputs;
  std::uint64_t filtered = 1, process_skips = 1, write_skips = 0, recovered = 1;
  // position -> {phase, recovered}
  std::map<std::uint64_t, std::pair<std::string, bool>> skips;
};
inline Expected ExpectedOf(Mode mode) {
  Expected e;
  for (int i = 0; i < kItems; ++i) {
    if (i == 2 || i == 5 || i == 7 || (mode == Mode::kScan && i == 10)) continue;
    e.outputs.insert(i);
  }
  e.skips[2] = {"process", true};
  e.skips[5] = {"process", false};
  if (mode == Mode::kScan) {
    e.write_skips = 1;
    e.skips[10] = {"write", false};
  }
  return e;
}

// Every document of `c` that reads as found through `db`, by id (the user fields).
inline std::map<std::string, json::object> FoundDocs(litetx::Store& store, litetx::Database& db,
                                                     const std::string& c) {
  std::map<std::string, json::object> out;
  for (const auto& [id, doc] : ltxtest::ScanAll(store, c, 64)) {
    auto r = db.Read(c, id);
    if (r.ok() && r->state == litetx::DocumentState::kFound) out[id] = r->doc;
  }
  return out;
}

inline std::string CountsText(const lb::Counts& c) { return json::serialize(c.ToJson()); }

// Checks the step's end state; returns what is wrong (empty: all right). `report`, if given,
// is the report of the execution that completed the step.
inline std::vector<std::string> Verify(Rig& rig, Mode mode,
                                       const lb::StepReport* report = nullptr,
                                       const std::string& job = kJob) {
  std::vector<std::string> bad;
  auto db = rig.Db();
  const Expected e = ExpectedOf(mode);
  // Outputs: each expected one exactly once, with the right content; nothing else.
  auto outs = FoundDocs(*rig.mem, *db, kOut);
  for (int i : e.outputs) {
    auto it = outs.find(ItemKey(i));
    if (it == outs.end()) {
      bad.push_back("output " + ItemKey(i) + " missing");
      continue;
    }
    const json::object want{{"n", i}, {"sq", i * i}, {"times", 1}};
    if (it->second != want) {
      bad.push_back("output " + ItemKey(i) + " is " + json::serialize(it->second));
    }
  }
  for (const auto& [id, doc] : outs) {
    if (id.size() != 3 || !e.outputs.count(std::atoi(id.c_str() + 1))) {
      bad.push_back("unexpected output " + id + " " + json::serialize(doc));
    }
  }
  // The dead letter of item 2, once.
  auto dead = FoundDocs(*rig.mem, *db, kDead);
  const json::object want_dead{{"n", 2}, {"code", "unavailable"}, {"times", 1}};
  if (dead.size() != 1 || !dead.count("i02") || dead["i02"] != want_dead) {
    std::string s;
    for (const auto& [id, d] : dead) s += id + "=" + json::serialize(d) + " ";
    bad.push_back("dead letters: " + s);
  }
  // Skip records, chunk documents.
  auto state = FoundDocs(*rig.mem, *db, kState);
  const std::string skip_prefix = StepId(job) + "/skip/";
  const std::string chunk_prefix = StepId(job) + "/chunk/";
  std::map<std::uint64_t, std::pair<std::string, bool>> skips;
  lb::Counts chunk_sum;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [id, d] : state) {
    if (id.rfind(skip_prefix, 0) == 0) {
      skips[d.at("position").to_number<std::uint64_t>()] = {
          std::string(d.at("phase").as_string()), d.at("recovered").as_bool()};
    } else if (id.rfind(chunk_prefix, 0) == 0) {
      auto c = lb::Counts::FromJson(d.at("counts").as_object());
      if (!c.ok()) {
        bad.push_back("chunk document " + id + " has bad counts");
        continue;
      }
      chunk_sum += *c;
      ranges.emplace_back(d.at("begin").to_number<std::uint64_t>(),
                          d.at("end").to_number<std::uint64_t>());
    }
  }
  if (skips != e.skips) {
    std::string s;
    for (const auto& [p, v] : skips) {
      s += std::to_string(p) + ":" + v.first + (v.second ? "/recovered " : "/skipped ");
    }
    bad.push_back("skip records: " + s);
  }
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> want_ranges{
      {0, 4}, {4, 8}, {8, 12}, {12, 14}};
  if (ranges != want_ranges) bad.push_back("chunk documents: " + std::to_string(ranges.size()));
  // The counts: of the chunk documents, stored, and reported.
  auto check_counts = [&](const char* what, const lb::Counts& c) {
    if (c.read != kItems || c.written != e.outputs.size() || c.filtered != e.filtered ||
        c.process_skips != e.process_skips || c.write_skips != e.write_skips ||
        c.read_skips != 0 || c.recovered != e.recovered ||
        c.read != c.written + c.filtered + c.skips() + c.recovered || c.commits < 4) {
      bad.push_back(std::string(what) + " counts " + CountsText(c));
    }
  };
  check_counts("chunk documents'", chunk_sum);
  lb::StepOptions so = StepOpts(mode, job);
  auto st = lb::ReadStepStatus(*db, so);
  if (!st.ok()) {
    bad.push_back("ReadStepStatus: " + st.status().ToString());
  } else {
    if (st->status != "completed") bad.push_back("stored status " + st->status);
    if (st->chunks != 4) bad.push_back("stored chunks " + std::to_string(st->chunks));
    check_counts("stored", st->total);
    if (json::serialize(st->total.ToJson()) != json::serialize(chunk_sum.ToJson())) {
      bad.push_back("stored totals " + CountsText(st->total) + " != chunk documents " +
                    CountsText(chunk_sum));
    }
    if (report != nullptr) {
      if (!report->status.ok()) bad.push_back("report status " + report->status.ToString());
      if (report->chunks != 4) bad.push_back("report chunks " + std::to_string(report->chunks));
      if (json::serialize(report->total.ToJson()) != json::serialize(st->total.ToJson())) {
        bad.push_back("report totals " + CountsText(report->total) + " != stored " +
                      CountsText(st->total));
      }
    }
  }
  return bad;
}

inline std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

// What reads see in `collections`: id -> (state, user fields). Versions are left out: a
// rolled-back attempt moves a document's version without changing what it holds.
using Seen = std::map<std::string, std::pair<litetx::DocumentState, json::object>>;
inline Seen SeenOf(Rig& rig, const std::vector<std::string>& collections = {kOut, kDead, kState}) {
  Seen s;
  auto db = rig.Db();
  for (const auto& c : collections) {
    for (const auto& [id, doc] : ltxtest::ScanAll(*rig.mem, c, 64)) {
      auto r = db->Read(c, id);
      if (!r.ok()) continue;
      if (r->state == litetx::DocumentState::kNotFound) continue;
      s[c + "/" + id] = {r->state, r->doc};
    }
  }
  return s;
}

inline std::string SeenDiff(const Seen& a, const Seen& b) {
  std::string out;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) {
      out += "\n  gone: " + k;
    } else if (it->second != v) {
      out += "\n  changed: " + k + " " + json::serialize(v.second) + " -> " +
             json::serialize(it->second.second);
    }
  }
  for (const auto& [k, v] : b) {
    if (!a.count(k)) out += "\n  new: " + k + " " + json::serialize(v.second);
  }
  return out;
}

}  // namespace battack
