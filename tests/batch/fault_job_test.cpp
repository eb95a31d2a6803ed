// tests/batch/fault_job_test.cpp — the acceptance test of litetx::batch: a job of 100,000 items
// (chunks of 100) on the memory store through a FaultInjectingStore (transient store errors
// and lost replies), with
//   * a concurrent writer on its own thread and Database, which raises a counter document the
//     step's writer reads and rewrites in every chunk: once per 20 chunks it commits between
//     the chunk's read and its commit (kConflict), once per 20 chunks (with one chunk at a
//     time) it holds a write lock on the counter over the chunk's commit (kBusy), and after
//     every fourth chunk it commits a
//     touch of the counter and of an output already written;
//   * poison items (about 0.1%) the processor rejects (skipped), and items (about 0.1%) that
//     fail retryably once per process (the chunk is rolled back and retried);
//   * a crash (SimulatedCrash, CrashMode::kThrow) a random number of writes after a random
//     chunk. After it, the clock moves past the lease, a collector settles the abandoned
//     transactions, and RunStep runs again with a new Database on the same underlying store,
//     until the step completes.
// At the end: every good item's output exists exactly once with the right content, every
// poison item has a skip record and no output, the counter equals the outputs written (each
// counted once) and the writer's committed touches, the counts balance, agree with the input,
// with the sum of the chunk documents and with what each execution reported, ReadStepStatus
// says completed, and no transaction is left open. The figures are printed. A second test runs
// 20,000 items with four concurrent chunks (the counter is contended among them too).
//
// Seeded: the seed is printed; LITETX_BATCH_FAULT_SEED=N replays its choices (faults, poison
// items, crash point; thread interleavings still vary). LITETX_LONG_TESTS=ON or LITETX_LONG=1
// adds longer runs (500,000 items with three crashes; 100,000 in concurrent chunks with three).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "batch_util.h"

#ifndef LITETX_LONG_TESTS
#define LITETX_LONG_TESTS 0
#endif

namespace {

using namespace bt;
using litetx::batch::Counts;
using litetx::batch::RunStep;
using litetx::batch::StepFunctions;
using litetx::batch::StepOptions;
using litetx::batch::VectorReader;

std::uint64_t EnvU64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

bool LongRun() { return LITETX_LONG_TESTS != 0 || EnvU64("LITETX_LONG", 0) == 1; }

struct JobConfig {
  const char* name;
  std::uint64_t items = 100'000;
  std::size_t commit_interval = 100;
  std::size_t concurrency = 1;
  int crashes = 1;                    // executions that crash, one after another
  double transient = 0.002;           // per store call
  double lost_reply = 0.0005;         // per write
  double poison = 0.001;              // share of items the processor rejects
  double flaky = 0.001;               // share of items that fail retryably, once per process
};

// The output of item i: its number and a value derived from it.
std::int64_t ValueOf(std::uint64_t i) { return static_cast<std::int64_t>((i * 2654435761u) % 1'000'003); }

// The counts of every committed chunk document of the step, summed, and how many there are.
std::pair<Counts, std::uint64_t> SumOfChunkDocuments(Database& db, const StepOptions& o) {
  Counts sum;
  std::uint64_t n = 0;
  const std::string prefix = StepId(o) + "/chunk/";
  for (const auto& [id, doc] : CommittedAll(db, o.state_collection)) {
    if (id.rfind(prefix, 0) != 0) continue;
    auto c = Counts::FromJson(doc.at("counts").as_object());
    EXPECT_TRUE(c.ok()) << id;
    if (c.ok()) sum += *c;
    ++n;
  }
  return {sum, n};
}

// Once nothing is held (ExpectNothingHeld), the committed documents of a collection are its
// live stored documents: id -> user fields, from one scan (faster than a read of each).
std::map<std::string, json::object> LiveDocuments(litetx::Store& store, std::string_view collection) {
  std::map<std::string, json::object> out;
  for (const auto& [id, doc] : ltxtest::ScanAll(store, collection, std::size_t{1} << 22)) {
    auto m = litetx::engine::DecodeMeta(doc.value);
    EXPECT_TRUE(m.ok()) << collection << "/" << id;
    if (m.ok() && m->live()) out.emplace(id, litetx::engine::UserFields(doc.value));
  }
  return out;
}

// No document of `collections` is held by a transaction or pending a delete, and no
// transaction record is open (ltxtest::ExpectClean, with one scan per collection).
void ExpectNothingHeld(litetx::Store& store, const std::vector<std::string>& collections) {
  std::uint64_t held = 0, open = 0;
  for (const auto& c : collections) {
    for (const auto& [id, doc] : ltxtest::ScanAll(store, c, std::size_t{1} << 22)) {
      auto m = litetx::engine::DecodeMeta(doc.value);
      ASSERT_TRUE(m.ok()) << c << "/" << id;
      if (!m->txn.empty() || m->deleting) {
        if (++held <= 5) ADD_FAILURE() << c << "/" << id << " is still held by " << m->txn;
      }
    }
  }
  for (const auto& [id, doc] : ltxtest::ScanAll(store, litetx::kTransactionsCollection, 1 << 22)) {
    const json::value* done = doc.value.if_contains("done");
    if (done == nullptr || !done->is_bool() || !done->get_bool()) ++open;
  }
  EXPECT_EQ(held, 0u);
  EXPECT_EQ(open, 0u) << "transaction records left open";
}

// The concurrent writer: its own Database on the underlying store (no faults injected on its
// path), serving requests one at a time on its own thread. Each request is a transaction that
// raises stats/counter.touches (the document the step's writer adjusts too) and marks an output
// already written ("touched"):
//   Touch()    queued, not waited for (background load);
//   TouchNow() the caller waits until it committed: a transaction of the caller's that read the
//              counter before meets a newer version at its commit (kConflict);
//   Hold()     the transaction write-locks the counter first and keeps the lock until Release():
//              the caller's commit meets the lock (kBusy). The caller waits until the lock is
//              held (or the attempt failed).
class Toucher {
 public:
  Toucher(std::shared_ptr<litetx::Store> store, litetx::Options options, std::uint64_t seed)
      : db_(std::make_unique<Database>(std::move(store), std::move(options))), rng_(seed),
        thread_([this] { Loop(); }) {}
  ~Toucher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      released_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  // Items below `below` are in committed chunks (roughly): the outputs a touch picks from.
  void SetWatermark(std::uint64_t below) { below_ = std::max<std::uint64_t>(below_.load(), below); }
  void Touch() { Enqueue(kTouch); }
  bool TouchNow() { return EnqueueAndWait(kTouchNow); }
  bool Hold() { return EnqueueAndWait(kHold); }
  // Lets a held lock go, and waits (up to 10 s) until the transaction holding it has ended, so
  // that the caller's retry does not race the toucher's thread for it (on a loaded machine
  // that thread may not run before all retries, which take no real time, are spent).
  void Release() {
    std::unique_lock<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] { return !holding_ || stop_; });
  }
  std::uint64_t committed() const { return committed_; }
  std::uint64_t failed() const { return failed_; }
  std::uint64_t holds() const { return holds_; }

 private:
  enum Kind { kTouch, kTouchNow, kHold };
  void Enqueue(Kind k) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({k, ++next_id_});
    cv_.notify_all();
  }
  // True once the request was served (the touch committed, or the lock is held); false if it
  // failed or 10 s passed.
  bool EnqueueAndWait(Kind k) {
    std::unique_lock<std::mutex> lock(mu_);
    const std::uint64_t id = ++next_id_;
    if (k == kHold) released_ = false;
    queue_.push_back({k, id});
    cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] { return served_.contains(id) || stop_; });
    auto it = served_.find(id);
    const bool ok = it != served_.end() && it->second;
    if (it != served_.end()) served_.erase(it);
    return ok;
  }
  void Serve(std::uint64_t id, bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    served_[id] = ok;
    cv_.notify_all();
  }
  void Loop() {
    for (int guard = 0; guard < 10'000'000; ++guard) {
      std::pair<Kind, std::uint64_t> req;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, 2s, [&] { return !queue_.empty() || stop_; });
        if (stop_) return;
        if (queue_.empty()) continue;
        req = queue_.front();
        queue_.pop_front();
      }
      const std::uint64_t below = below_.load();
      const std::uint64_t j = below == 0 ? 0 : rng_() % below;
      bool held = false;
      litetx::RunOptions ro;
      ro.timeout = 1s;  // virtual
      auto r = db_->Run(
          [&](TxnContext& tx) -> Status {
            if (req.first == kHold && !held) {
              if (Status s = tx.Lock("stats", "counter", litetx::LockMode::kWrite); !s.ok()) return s;
              held = true;
              ++holds_;
              {
                std::lock_guard<std::mutex> lock(mu_);
                holding_ = true;
              }
              Serve(req.second, true);
              std::unique_lock<std::mutex> lock(mu_);
              cv_.wait_for(lock, 10s, [&] { return released_; });
            }
            if (Status s = tx.Adjust("stats", "counter", {{"touches", 1}}); !s.ok()) return s;
            auto g = tx.Get("out", Key(j));
            if (!g.ok()) return g.status();
            if (g->state != litetx::DocumentState::kFound) return Status::Ok();
            return tx.Update("out", Key(j), {{"touched", true}});
          },
          ro);
      EXPECT_NE(r.code(), Code::kUnknown) << r.status().ToString();  // no faults on its path
      if (r.ok()) {
        ++committed_;
      } else {
        ++failed_;
      }
      if (!held) Serve(req.second, r.ok());
      if (held) {
        std::lock_guard<std::mutex> lock(mu_);
        holding_ = false;  // the lock is gone with the transaction
        cv_.notify_all();
      }
    }
  }

  std::unique_ptr<Database> db_;
  std::mt19937_64 rng_;
  std::atomic<std::uint64_t> below_{0};
  std::atomic<std::uint64_t> committed_{0}, failed_{0}, holds_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Kind, std::uint64_t>> queue_;
  std::map<std::uint64_t, bool> served_;
  std::uint64_t next_id_ = 0;
  bool released_ = true;
  bool holding_ = false;  // a kHold request's transaction holds the lock (guarded by mu_)
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is built
};

void RunFaultJob(const JobConfig& cfg) {
  const std::uint64_t seed = EnvU64("LITETX_BATCH_FAULT_SEED", std::random_device{}());
  std::printf("[batch fault job %s] seed %llu (replay: LITETX_BATCH_FAULT_SEED=%llu)\n", cfg.name,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  const auto started = std::chrono::steady_clock::now();
  std::mt19937_64 rng(seed);

  // The input, its poison and flaky items.
  std::set<std::uint64_t> poison, flaky;
  {
    std::bernoulli_distribution is_poison(cfg.poison), is_flaky(cfg.flaky);
    for (std::uint64_t i = 0; i < cfg.items; ++i) {
      if (is_poison(rng)) {
        poison.insert(i);
      } else if (is_flaky(rng)) {
        flaky.insert(i);
      }
    }
  }
  const std::uint64_t chunks = (cfg.items + cfg.commit_interval - 1) / cfg.commit_interval;
  std::vector<Item> items;
  items.reserve(cfg.items);
  for (std::uint64_t i = 0; i < cfg.items; ++i) {
    Item it;
    it.key = Key(i);
    it.value = json::object{{"i", i}};
    items.push_back(std::move(it));
  }

  ltxtest::World w;
  litetx::Options dbo = w.Opts();
  dbo.parallel_commit = true;        // the defaults of a real deployment
  dbo.finish_in_background = true;
  {
    auto seed_db = Db(w, w.mem);
    ltxtest::MustCommit(*seed_db, litetx::Transaction().Insert("stats", "counter",
                                                               {{"items", 0}, {"touches", 0}}));
  }

  // The step.
  StepOptions o = Opts(std::string("fault-job-") + cfg.name, cfg.commit_interval);
  o.concurrency = cfg.concurrency;
  o.retry.max_attempts = 8;
  o.skip.skip_limit = poison.size() + 10;
  o.unknown_timeout = 60s;  // virtual
  std::mutex flaky_mu;
  std::set<std::uint64_t> flaky_failed;  // this process's flaky failures so far
  StepFunctions fns;
  fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
    const std::uint64_t i = IndexOf(item.value);
    if (poison.contains(i)) return Status::InvalidArgument("poison item " + item.key);
    if (flaky.contains(i)) {
      std::lock_guard<std::mutex> lock(flaky_mu);
      if (flaky_failed.insert(i).second) return Status::Unavailable("flaky item " + item.key);
    }
    return std::optional<json::value>(json::value(json::object{{"i", i}, {"v", ValueOf(i)}}));
  };
  // The concurrent writer, and the chunks it contends with: every 20th chunk (7, 27, ...) has
  // the counter changed under it (kConflict at its commit), and with one chunk at a time every
  // 20th (13, 33, ...) finds the counter locked at its commit (kBusy); once per chunk and
  // process. Every fourth committed chunk queues a background touch.
  Toucher toucher(w.mem, w.Opts(), seed ^ 0x9e3779b97f4a7c15ULL);
  std::mutex contended_mu;
  std::set<std::uint64_t> contended;  // chunks (by number) contended in this process
  std::atomic<std::uint64_t> conflicts_arranged{0}, holds_arranged{0};
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    const std::uint64_t k = IndexOf(outs.front().value) / cfg.commit_interval;
    bool conflict = false, hold = false;
    if (k % 20 == 7 || (k % 20 == 13 && cfg.concurrency == 1)) {
      std::lock_guard<std::mutex> lock(contended_mu);
      if (contended.insert(k).second) (k % 20 == 7 ? conflict : hold) = true;
    }
    if (hold && toucher.Hold()) ++holds_arranged;
    // The counter first, read and then written: the version read is checked at the commit.
    auto c = tx.Get("stats", "counter");
    if (!c.ok()) return c.status();
    if (c->state != litetx::DocumentState::kFound) return Status::Corruption("no counter");
    const std::int64_t items = c->doc.at("items").to_number<std::int64_t>();
    if (Status s = tx.Update("stats", "counter",
                             {{"items", items + static_cast<std::int64_t>(outs.size())}});
        !s.ok()) {
      return s;
    }
    if (conflict && toucher.TouchNow()) ++conflicts_arranged;
    for (const Output& out : outs) {
      if (Status s = WriteCounted(tx, "out", out.item->key, out.value.as_object()); !s.ok()) return s;
    }
    return Status::Ok();
  };

  // Executions until the step completes (bounded).
  std::atomic<std::uint64_t> chunk_errors{0}, retry_events{0}, busy_errors{0}, conflict_errors{0};
  std::uint64_t transient_faults = 0, lost_replies = 0, executions = 0, crashes = 0;
  std::uint64_t crash_write = 0, crash_after_chunk = 0, gc_reversed = 0, gc_finished = 0;
  std::vector<std::string> crash_points;
  std::optional<Counts> base;  // what the chunk documents held after the last crash
  Counts reported;             // committed counts of the executions after it that returned
  litetx::batch::StepReport final_report;
  bool completed = false;
  for (int exec = 1; exec <= cfg.crashes + 8 && !completed; ++exec) {
    ++executions;
    const bool crash_now = exec <= cfg.crashes;
    litetx::FaultOptions fo;
    fo.seed = rng();
    fo.crash_mode = litetx::CrashMode::kThrow;
    fo.transient_probability = cfg.transient;
    fo.lost_reply_probability = cfg.lost_reply;
    fo.clock = w.clock;
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
    // The crash: armed after a random chunk (seeded) to come a random number of writes later.
    const std::uint64_t arm_after = std::uniform_int_distribution<std::uint64_t>(
        chunks / 8, chunks / 2)(rng) / static_cast<std::uint64_t>(exec);
    const std::uint64_t writes_later = std::uniform_int_distribution<std::uint64_t>(1, 400)(rng);
    std::atomic<bool> armed{false};
    StepOptions eo = o;
    std::uint64_t chunks_seen = 0;
    eo.listener.after_chunk = [&](std::uint64_t k, const Counts&) {
      toucher.SetWatermark((k + 1) * cfg.commit_interval);
      if (k % 4 == 0) toucher.Touch();
      if (crash_now && ++chunks_seen == arm_after + 1 && !armed.exchange(true)) {
        crash_after_chunk = k;
        faulty->ArmCrash(faulty->writes() + writes_later);
      }
    };
    eo.listener.on_chunk_error = [&](std::uint64_t, const Status& s) {
      ++chunk_errors;
      if (s.code() == Code::kBusy) ++busy_errors;
      if (s.code() == Code::kConflict) ++conflict_errors;
      toucher.Release();  // a held lock has done its work
    };
    eo.listener.on_retry = [&](const litetx::batch::RetryEvent&) { ++retry_events; };
    {
      std::lock_guard<std::mutex> lock(flaky_mu);
      flaky_failed.clear();  // a new process: its stateful retry counts start afresh
    }
    auto db = std::make_unique<Database>(faulty, dbo);
    VectorReader reader(items);
    bool crashed = false;
    Result<litetx::batch::StepReport> rep = Status::Unknown("not run");
    try {
      rep = RunStep(*db, reader, fns, eo);
    } catch (const litetx::SimulatedCrash& e) {
      crashed = true;
      crash_write = e.write_index();
    }
    toucher.Release();  // a lock held for a chunk the crash cut short
    {
      std::lock_guard<std::mutex> lock(contended_mu);
      contended.clear();
    }
    db.reset();  // its finisher stops; what the crash left is the collector's
    transient_faults += faulty->transient_faults();
    lost_replies += faulty->lost_replies();
    if (crashed) {
      ++crashes;
      crash_points.push_back("write " + std::to_string(crash_write) + " (after chunk " +
                             std::to_string(crash_after_chunk) + ")");
    } else {
      ASSERT_TRUE(rep.ok()) << "execution " << exec << ": " << rep.status().ToString();
      ASSERT_FALSE(crash_now && armed) << "execution " << exec << ": the armed crash never fired";
      if (base) reported += rep->this_run;
      if (rep->status.ok()) {
        completed = true;
        final_report = *rep;
        break;
      }
      std::printf("[batch fault job %s] execution %d stopped: %s\n", cfg.name, exec,
                  rep->status.ToString().c_str());
    }
    // Past the lease the abandoned transactions are stale: a collector settles them.
    w.clock->Advance(121s);
    litetx::CollectorOptions go;
    go.engine = w.Opts();
    go.name = "gc-fault-job";
    litetx::Collector gc(w.mem, go);
    ASSERT_TRUE(gc.RunOnce().ok());
    gc_reversed += gc.stats().reversed;
    gc_finished += gc.stats().finished;
    if (crashed) {
      auto settled_db = Db(w, w.mem);
      base = SumOfChunkDocuments(*settled_db, o).first;
      reported = Counts{};
    }
  }
  ASSERT_TRUE(completed) << "the step did not complete in " << executions << " executions";
  ASSERT_EQ(crashes, static_cast<std::uint64_t>(cfg.crashes)) << "a crash did not fire";

  // Settle everything, then audit.
  w.clock->Advance(121s);
  {
    litetx::CollectorOptions go;
    go.engine = w.Opts();
    litetx::Collector gc(w.mem, go);
    ASSERT_TRUE(gc.RunOnce().ok());
    gc_reversed += gc.stats().reversed;
    gc_finished += gc.stats().finished;
  }
  ExpectNothingHeld(*w.mem, {"out", "stats", "litetx_batch"});
  auto db = Db(w, w.mem);
  const std::uint64_t good = cfg.items - poison.size();
  const Counts& t = final_report.total;
  EXPECT_EQ(t.read, cfg.items);
  EXPECT_EQ(t.written, good);
  EXPECT_EQ(t.process_skips, poison.size());
  EXPECT_EQ(t.read_skips + t.write_skips + t.filtered + t.recovered, 0u);
  EXPECT_EQ(t.read, t.written + t.filtered + t.process_skips + t.write_skips + t.recovered);
  EXPECT_EQ(final_report.chunks, chunks);
  EXPECT_GE(t.commits, chunks);
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(base->read + reported.read, t.read) << "the executions' reports do not add up";
  EXPECT_EQ(base->written + reported.written, t.written);
  EXPECT_EQ(base->skips() + reported.skips(), t.skips());
  auto st = litetx::batch::ReadStepStatus(*db, o);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->status, "completed");
  EXPECT_EQ(st->execution, executions);
  EXPECT_EQ(st->chunks, chunks);
  EXPECT_EQ(json::serialize(st->total.ToJson()), json::serialize(t.ToJson()));
  // The totals are the sum of the chunk documents, one per chunk.
  auto [sum, chunk_docs] = SumOfChunkDocuments(*db, o);
  EXPECT_EQ(chunk_docs, chunks);
  EXPECT_EQ(json::serialize(sum.ToJson()), json::serialize(t.ToJson()));

  // Every good item's output exactly once, with its content; none for a poison item.
  auto outputs = LiveDocuments(*w.mem, "out");
  EXPECT_EQ(outputs.size(), good);
  std::uint64_t wrong = 0, touched = 0;
  for (std::uint64_t i = 0; i < cfg.items; ++i) {
    auto it = outputs.find(Key(i));
    if (poison.contains(i)) {
      if (it != outputs.end()) ++wrong;
      continue;
    }
    if (it == outputs.end() || it->second.at("writes") != 1 || it->second.at("i") != i ||
        it->second.at("v") != ValueOf(i)) {
      if (++wrong <= 5) {
        ADD_FAILURE() << Key(i) << ": "
                      << (it == outputs.end() ? std::string("missing")
                                              : json::serialize(it->second));
      }
    }
    if (it != outputs.end() && it->second.contains("touched")) ++touched;
  }
  EXPECT_EQ(wrong, 0u);
  // Every poison item in a skip record, and nothing else.
  std::uint64_t skip_records = 0, bad_records = 0;
  const std::string prefix = StepId(o) + "/skip/";
  for (const auto& [id, doc] : CommittedAll(*db, "litetx_batch")) {
    if (id.rfind(prefix, 0) != 0) continue;
    ++skip_records;
    const std::uint64_t p = std::stoull(id.substr(prefix.size()));
    if (!poison.contains(p) || doc.at("code") != "invalid_argument" ||
        doc.at("phase") != "process" || doc.at("key") != json::value(Key(p))) {
      ++bad_records;
    }
  }
  EXPECT_EQ(skip_records, poison.size());
  EXPECT_EQ(bad_records, 0u);
  // The shared counter: each output counted once, and every committed touch.
  auto counter = Committed(*db, "stats", "counter");
  ASSERT_TRUE(counter.has_value());
  EXPECT_EQ(counter->at("items"), good);
  const std::uint64_t touches = toucher.committed();
  EXPECT_EQ(counter->at("touches"), touches);

  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string crash_text;
  for (const auto& c : crash_points) crash_text += (crash_text.empty() ? "" : ", ") + c;
  std::printf(
      "[batch fault job %s] items %llu (poison %zu, flaky %zu), chunks %llu of %zu, concurrency "
      "%zu; executions %llu, crashes %llu at %s; rollbacks %llu, "
      "retries %llu (last execution %llu; on_retry %llu, on_chunk_error %llu); skips %llu; "
      "faults injected: transient %llu, lost replies %llu; collector reversed %llu, finished "
      "%llu; concurrent writer: %llu touches committed (%llu outputs touched), %llu failed, "
      "%llu conflicts and %llu locks arranged; chunk errors kConflict %llu, kBusy %llu; %.1f s\n",
      cfg.name, static_cast<unsigned long long>(cfg.items), poison.size(), flaky.size(),
      static_cast<unsigned long long>(chunks), cfg.commit_interval, cfg.concurrency,
      static_cast<unsigned long long>(executions), static_cast<unsigned long long>(crashes),
      crash_text.c_str(), static_cast<unsigned long long>(t.rollbacks),
      static_cast<unsigned long long>(t.retries),
      static_cast<unsigned long long>(final_report.this_run.retries), static_cast<unsigned long long>(retry_events.load()),
      static_cast<unsigned long long>(chunk_errors.load()),
      static_cast<unsigned long long>(t.skips()), static_cast<unsigned long long>(transient_faults),
      static_cast<unsigned long long>(lost_replies), static_cast<unsigned long long>(gc_reversed),
      static_cast<unsigned long long>(gc_finished), static_cast<unsigned long long>(touches),
      static_cast<unsigned long long>(touched), static_cast<unsigned long long>(toucher.failed()),
      static_cast<unsigned long long>(conflicts_arranged.load()),
      static_cast<unsigned long long>(holds_arranged.load()),
      static_cast<unsigned long long>(conflict_errors.load()),
      static_cast<unsigned long long>(busy_errors.load()),
      secs);
  std::fflush(stdout);
  // The run met what it is about: faults of both kinds, rolled-back attempts, and contention.
  EXPECT_GT(transient_faults, 0u);
  EXPECT_GT(lost_replies, 0u);
  EXPECT_GT(chunk_errors.load(), 0u);
  EXPECT_GT(touches, 0u);
  EXPECT_GT(conflict_errors.load(), 0u);
  EXPECT_GT(conflicts_arranged.load(), 0u);
  if (cfg.concurrency == 1) {
    EXPECT_GT(busy_errors.load(), 0u);
    EXPECT_GT(holds_arranged.load(), 0u);
  }
  EXPECT_GT(touched, 0u);
}

TEST(BatchFaultJobTest, HundredThousandItemsThroughFaultsConflictsPoisonAndACrash) {
  JobConfig cfg;
  cfg.name = "100k";
  RunFaultJob(cfg);
}

TEST(BatchFaultJobTest, ConcurrentChunksThroughFaultsAndACrash) {
  JobConfig cfg;
  cfg.name = "async";
  cfg.items = 20'000;
  cfg.commit_interval = 50;
  cfg.concurrency = 4;
  RunFaultJob(cfg);
}

TEST(BatchFaultJobTest, LongRunsWithSeveralCrashes) {
  if (!LongRun()) GTEST_SKIP() << "LITETX_LONG_TESTS=ON or LITETX_LONG=1 runs it";
  JobConfig big;
  big.name = "long-500k";
  big.items = 500'000;
  big.crashes = 3;
  RunFaultJob(big);
  JobConfig async;
  async.name = "long-async";
  async.items = 100'000;
  async.commit_interval = 50;
  async.concurrency = 4;
  async.crashes = 3;
  RunFaultJob(async);
}

}  // namespace
