// tests/batch/seed_patterns_test.cpp — the batch plans of Spring Batch's appendix A ("Batch
// processing and transactions"), one test each, named after the section: A.1 a simple batch,
// A.2 stateless retry around a remote call, A.3 stateful retry with skip and recover, A.4
// asynchronous chunks, A.5 asynchronous items, A.6 retry and transaction propagation (NESTED),
// A.8 stateless retry with recovery. Every step runs on a memory store with a virtual clock.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "batch_util.h"

namespace {

using namespace bt;
using litetx::batch::BackoffPolicy;
using litetx::batch::Phase;
using litetx::batch::RetryEvent;
using litetx::batch::RetryPolicy;
using litetx::batch::RunStep;
using litetx::batch::SkipEvent;
using litetx::batch::StepFunctions;
using litetx::batch::StepOptions;
using litetx::batch::VectorReader;

struct Rig {
  ltxtest::World w;
  std::unique_ptr<Database> db = Db(w, w.mem);
};

std::string LastWriter(Database& db, std::string_view c, std::string_view id) {
  auto r = db.Read(c, id);
  EXPECT_TRUE(r.ok() && r->state == litetx::DocumentState::kFound) << c << "/" << id;
  return r.ok() ? r->last_writer : std::string();
}

// A.1: REPEAT(until=exhausted) { TX { REPEAT(size=5) { input; output; } } }. A chunk whose
// output fails rolls back whole; the step stops there, and a restart completes it.
TEST(BatchSeedTest, SeedA1_SimpleBatchNoRetry) {
  Rig rig;
  StepOptions o = Opts("a1", 5);
  o.retry.max_attempts = 1;
  o.skip.skip_limit = 10;  // a skip limit, but the failure below is not of a skippable kind
  bool broken = true;
  std::vector<std::size_t> write_sizes;
  std::vector<std::uint64_t> begun;
  o.listener.before_chunk = [&](std::uint64_t k) { begun.push_back(k); };
  StepFunctions fns;
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    write_sizes.push_back(outs.size());
    for (const Output& out : outs) {
      // Items 10 and 11 are written before item 12 fails: the rollback must take them too.
      if (broken && IndexOf(out.value) == 12) return Status::Corruption("database exception at item 12");
      if (Status s = WriteCounted(tx, "out", out.item->key, out.value.as_object()); !s.ok()) return s;
    }
    return Status::Ok();
  };

  VectorReader first(Items(20));
  auto rep = RunStep(*rig.db, first, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->status.code(), Code::kCorruption) << rep->status.ToString();
  EXPECT_NE(rep->status.message().find("item 12"), std::string::npos);
  EXPECT_EQ(write_sizes, (std::vector<std::size_t>{5, 5, 5}));  // chunks of 5; chunk 3 once
  EXPECT_EQ(begun, (std::vector<std::uint64_t>{0, 1, 2}));       // nothing after the failure
  EXPECT_EQ(rep->chunks, 2u);
  EXPECT_EQ(rep->total.read, 10u);
  EXPECT_EQ(rep->total.written, 10u);
  EXPECT_EQ(rep->total.commits, 2u);
  EXPECT_EQ(rep->this_run.rollbacks, 1u);
  EXPECT_EQ(rep->this_run.retries, 0u);
  // Chunks 1 and 2 stay; nothing of chunk 3 (items 10..14) exists, nor of chunk 4.
  ExpectOutputsExactlyOnce(*rig.db, 10);
  EXPECT_TRUE(Committed(*rig.db, "litetx_batch", ChunkDocId(o, 1)).has_value());
  EXPECT_FALSE(Committed(*rig.db, "litetx_batch", ChunkDocId(o, 2)).has_value());
  auto st = litetx::batch::ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->status, "failed");
  EXPECT_NE(st->last_error.find("item 12"), std::string::npos) << st->last_error;
  EXPECT_EQ(st->chunks, 2u);
  EXPECT_EQ(st->total.written, 10u);

  // Restart with the writer fixed, from a new reader (as a new process would).
  broken = false;
  write_sizes.clear();
  begun.clear();
  ScriptedReader second(Items(20));
  rep = RunStep(*rig.db, second, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(rep->execution, 2u);
  EXPECT_EQ(second.first_restored, std::optional<std::uint64_t>(10));  // resumed after chunk 2
  EXPECT_EQ(write_sizes, (std::vector<std::size_t>{5, 5}));
  EXPECT_EQ(begun, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(rep->this_run.read, 10u);
  EXPECT_EQ(rep->total.read, 20u);
  EXPECT_EQ(rep->total.written, 20u);
  EXPECT_EQ(rep->total.commits, 4u);
  EXPECT_EQ(rep->chunks, 4u);
  ExpectOutputsExactlyOnce(*rig.db, 20);
  st = litetx::batch::ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "completed");
  EXPECT_EQ(st->total.written, 20u);
}

// A.2: TX { input; output; RETRY { remote access; } }. batch::Retry repeats the remote call in
// place: the chunk's transaction commits once the call succeeds, and rolls back (with the
// chunk's other writes) when it never does.
TEST(BatchSeedTest, SeedA2_StatelessRetryRemoteCall) {
  struct Remote {
    std::map<std::string, int> fail_first;  // calls to fail per key
    std::map<std::string, std::vector<int>> attempts;
    std::map<std::string, int> calls;
  };
  auto functions = [](Remote& remote) {
    StepFunctions fns;
    fns.process = [&remote](TxnContext& tx, const Item& item) -> ProcessResult {
      // Database access before the remote call, in the chunk's transaction.
      if (Status s = tx.Insert("audit", item.key, {{"i", IndexOf(item.value)}}); !s.ok()) return s;
      int rate = 0;
      Status s = litetx::batch::Retry(Attempts(4), BackoffPolicy::None(),
                                      [&](int attempt) -> Status {
                                        remote.attempts[item.key].push_back(attempt);
                                        if (remote.calls[item.key]++ < remote.fail_first[item.key]) {
                                          return Status::Unavailable("remote service down");
                                        }
                                        rate = 42;
                                        return Status::Ok();
                                      });
      if (!s.ok()) return s;
      json::object out = item.value.as_object();
      out["rate"] = rate;
      return std::optional<json::value>(json::value(std::move(out)));
    };
    fns.write = CountingWriter();
    return fns;
  };

  {  // The remote call eventually succeeds.
    Rig rig;
    Remote remote;
    remote.fail_first = {{Key(3), 2}, {Key(7), 3}};
    StepOptions o = Opts("a2-ok", 5);
    VectorReader reader(Items(10));
    auto rep = RunStep(*rig.db, reader, functions(remote), o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
    EXPECT_EQ(remote.calls[Key(3)], 3);
    EXPECT_EQ(remote.calls[Key(7)], 4);
    EXPECT_EQ(remote.attempts[Key(7)], (std::vector<int>{1, 2, 3, 4}));
    EXPECT_EQ(remote.calls[Key(0)], 1);
    // Retried in place: no chunk was rolled back or attempted again.
    EXPECT_EQ(rep->this_run.rollbacks, 0u);
    EXPECT_EQ(rep->this_run.retries, 0u);
    EXPECT_EQ(rep->total.commits, 2u);
    ExpectOutputsExactlyOnce(*rig.db, 10);
    for (const auto& [id, doc] : CommittedAll(*rig.db, "out")) EXPECT_EQ(doc.at("rate"), 42) << id;
    EXPECT_EQ(CommittedAll(*rig.db, "audit").size(), 10u);
  }
  {  // The remote call never succeeds for item 7: its chunk's transaction rolls back.
    Rig rig;
    Remote remote;
    remote.fail_first = {{Key(7), 1'000}};
    StepOptions o = Opts("a2-never", 5);
    o.retry.max_attempts = 1;  // no stateful retry of the chunk on top of the stateless one
    VectorReader reader(Items(10));
    auto rep = RunStep(*rig.db, reader, functions(remote), o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    EXPECT_EQ(rep->status.code(), Code::kUnavailable) << rep->status.ToString();
    EXPECT_EQ(remote.calls[Key(7)], 4);  // the policy's four attempts, then it gave up
    EXPECT_EQ(rep->this_run.rollbacks, 1u);
    EXPECT_EQ(rep->chunks, 1u);
    // Chunk 1 (items 0..4) committed; nothing of chunk 2: neither outputs nor the audit
    // documents its processor wrote before the remote call.
    ExpectOutputsExactlyOnce(*rig.db, 5);
    auto audit = CommittedAll(*rig.db, "audit");
    EXPECT_EQ(audit.size(), 5u);
    for (std::uint64_t i = 5; i < 10; ++i) EXPECT_FALSE(audit.contains(Key(i))) << Key(i);
    EXPECT_FALSE(Committed(*rig.db, "litetx_batch", ChunkDocId(o, 1)).has_value());
  }
}

// What an A.3 run observed.
struct A3Log {
  std::map<std::string, int> process_calls;
  std::map<std::string, int> recover_calls;
  std::map<std::string, std::vector<int>> retry_attempts;  // on_retry, per key
  std::vector<SkipEvent> skips;                            // on_skip
};

StepFunctions A3Functions(A3Log& log, std::map<std::string, std::function<Status(int call)>> fail,
                          bool with_recover) {
  StepFunctions fns;
  fns.process = [&log, fail](TxnContext& tx, const Item& item) -> ProcessResult {
    const int call = ++log.process_calls[item.key];
    // A write of the processor's own, undone with it when it fails.
    if (Status s = tx.Insert("touched", item.key + "-" + std::to_string(call), {{"call", call}});
        !s.ok()) {
      return s;
    }
    if (auto it = fail.find(item.key); it != fail.end()) {
      if (Status s = it->second(call); !s.ok()) return s;
    }
    return std::optional<json::value>(item.value);
  };
  fns.write = CountingWriter();
  if (with_recover) {
    fns.recover = [&log](TxnContext& tx, const Item& item, const Status& why) -> Status {
      ++log.recover_calls[item.key];
      json::object dead = item.value.as_object();
      dead["code"] = std::string(litetx::CodeName(why.code()));
      return WriteCounted(tx, "dead", item.key, dead);
    };
  }
  return fns;
}

void Listen(StepOptions& o, A3Log& log) {
  o.listener.on_retry = [&log](const RetryEvent& e) {
    if (e.phase == Phase::kProcess) log.retry_attempts[e.key].push_back(e.attempt);
  };
  o.listener.on_skip = [&log](const SkipEvent& e) { log.skips.push_back(e); };
}

// A.3: RETRY(stateful) { input } PROCESS { output } SKIP and RECOVER { notify }. An item whose
// processing fails retryably rolls its chunk back and comes back with it; on_retry sees attempts
// 1..max-1; the last failed attempt takes the RECOVER path at once (the processor's writes of
// that attempt are undone by its nested scope), and the recoverer's dead-letter document
// commits in the same transaction as the rest of the chunk.
TEST(BatchSeedTest, SeedA3_StatefulRetrySkipRecover) {
  Rig rig;
  A3Log log;
  StepOptions o = Opts("a3", 5);
  o.retry.max_attempts = 3;
  Listen(o, log);
  auto fns = A3Functions(
      log, {{Key(2), [](int) { return Status::Conflict("deadlock loser"); }}}, true);
  VectorReader reader(Items(10));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(log.process_calls[Key(2)], 3);
  EXPECT_EQ(log.process_calls[Key(0)], 3);  // the chunk came back twice
  EXPECT_EQ(log.process_calls[Key(4)], 1);  // after item 2: reached by the last attempt only
  EXPECT_EQ(log.retry_attempts[Key(2)], (std::vector<int>{1, 2}));
  EXPECT_EQ(log.recover_calls[Key(2)], 1);
  EXPECT_EQ(log.recover_calls.size(), 1u);
  EXPECT_EQ(rep->total.recovered, 1u);
  EXPECT_EQ(rep->total.written, 9u);
  EXPECT_EQ(rep->total.read, 10u);
  EXPECT_EQ(rep->total.skips(), 0u);
  EXPECT_EQ(rep->total.rollbacks, 2u);
  EXPECT_EQ(rep->total.retries, 2u);
  EXPECT_EQ(rep->total.commits, 2u);
  ExpectOutputsExactlyOnce(*rig.db, 10, {2});
  auto dead = Committed(*rig.db, "dead", Key(2));
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->at("writes"), 1);
  EXPECT_EQ(dead->at("code"), "conflict");
  // The dead letter, the chunk's outputs and its chunk document: one transaction.
  const std::string txn = LastWriter(*rig.db, "dead", Key(2));
  EXPECT_FALSE(txn.empty());
  EXPECT_EQ(LastWriter(*rig.db, "out", Key(0)), txn);
  EXPECT_EQ(LastWriter(*rig.db, "out", Key(4)), txn);
  EXPECT_EQ(LastWriter(*rig.db, "litetx_batch", ChunkDocId(o, 0)), txn);
  // Only the committed attempt's processor writes remain: item 2's failed calls left nothing.
  auto touched = CommittedAll(*rig.db, "touched");
  EXPECT_TRUE(touched.contains(Key(0) + "-3"));
  EXPECT_FALSE(touched.contains(Key(0) + "-1"));
  for (int call = 1; call <= 3; ++call) {
    EXPECT_FALSE(touched.contains(Key(2) + "-" + std::to_string(call))) << call;
  }
  EXPECT_EQ(touched.size(), 9u);
  // The skip record of the recovery, and its notification after the commit.
  auto rec = Committed(*rig.db, "litetx_batch", SkipDocId(o, 2));
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->at("recovered"), true);
  EXPECT_EQ(rec->at("phase"), "process");
  EXPECT_EQ(rec->at("code"), "conflict");
  EXPECT_EQ(rec->at("key"), json::value(Key(2)));
  ASSERT_EQ(log.skips.size(), 1u);
  EXPECT_TRUE(log.skips[0].recovered);
  EXPECT_EQ(log.skips[0].key, Key(2));
  ASSERT_EQ(rep->skipped.size(), 1u);
  EXPECT_EQ(rep->skipped[0].position, 2u);
}

// A.3, the item presented again with its retries already used up: item 1 fails every time;
// its third failure is recovered at once, but then item 3 fails (retryably) in that same
// attempt and the chunk rolls back, recovery included. On the next presentation item 1 goes
// down the RECOVER path without being processed again.
TEST(BatchSeedTest, SeedA3_RetriesUsedUpBeforePresentationRecoverWithoutProcessing) {
  Rig rig;
  A3Log log;
  StepOptions o = Opts("a3-used-up", 5);
  o.retry.max_attempts = 3;
  Listen(o, log);
  auto fns = A3Functions(log,
                         {{Key(1), [](int) { return Status::Busy("deadlock loser"); }},
                          {Key(3), [](int call) {
                             return call == 1 ? Status::Conflict("once") : Status::Ok();
                           }}},
                         true);
  VectorReader reader(Items(5));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(log.process_calls[Key(1)], 3);  // not called on its fourth presentation
  EXPECT_EQ(log.process_calls[Key(3)], 2);
  EXPECT_EQ(log.recover_calls[Key(1)], 2);  // once rolled back with its chunk, once committed
  EXPECT_EQ(log.retry_attempts[Key(1)], (std::vector<int>{1, 2}));
  EXPECT_EQ(log.retry_attempts[Key(3)], (std::vector<int>{1}));
  EXPECT_EQ(rep->total.recovered, 1u);
  EXPECT_EQ(rep->total.written, 4u);
  EXPECT_EQ(rep->total.rollbacks, 3u);
  EXPECT_EQ(rep->total.commits, 1u);
  auto dead = Committed(*rig.db, "dead", Key(1));
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->at("writes"), 1);  // the rolled-back recovery left nothing
  EXPECT_EQ(dead->at("code"), "busy");
  EXPECT_EQ(LastWriter(*rig.db, "dead", Key(1)), LastWriter(*rig.db, "out", Key(3)));
  ExpectOutputsExactlyOnce(*rig.db, 5, {1});
  ASSERT_EQ(log.skips.size(), 1u);
  EXPECT_TRUE(log.skips[0].recovered);
}

// A.3 without a recoverer: a failure of a skippable kind skips the item at once (a skip record
// with its code and phase, in the chunk's transaction); a retryable failure whose retries are
// used up and that may not be skipped fails the step with the chunk rolled back; made
// skippable by a predicate, it is skipped after its retries.
TEST(BatchSeedTest, SeedA3_SkipWithoutRecoverer) {
  {
    Rig rig;
    A3Log log;
    StepOptions o = Opts("a3-skip", 5);
    o.skip.skip_limit = 1;
    Listen(o, log);
    auto fns = A3Functions(
        log, {{Key(6), [](int) { return Status::InvalidArgument("malformed order"); }}}, false);
    VectorReader reader(Items(10));
    auto rep = RunStep(*rig.db, reader, fns, o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
    EXPECT_EQ(log.process_calls[Key(6)], 1);  // not retryable: skipped on its first failure
    EXPECT_TRUE(log.retry_attempts.empty());
    EXPECT_EQ(rep->total.process_skips, 1u);
    EXPECT_EQ(rep->total.written, 9u);
    EXPECT_EQ(rep->total.rollbacks, 0u);
    ExpectOutputsExactlyOnce(*rig.db, 10, {6});
    auto rec = Committed(*rig.db, "litetx_batch", SkipDocId(o, 6));
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->at("code"), "invalid_argument");
    EXPECT_EQ(rec->at("phase"), "process");
    EXPECT_EQ(rec->at("recovered"), false);
    EXPECT_EQ(rec->at("key"), json::value(Key(6)));
    EXPECT_EQ(rec->at("message"), "malformed order");
    EXPECT_EQ(rec->at("item"), Items(10)[6].value);
    EXPECT_EQ(LastWriter(*rig.db, "litetx_batch", SkipDocId(o, 6)),
              LastWriter(*rig.db, "out", Key(5)));
    ASSERT_EQ(log.skips.size(), 1u);
    EXPECT_FALSE(log.skips[0].recovered);
    EXPECT_EQ(log.skips[0].phase, Phase::kProcess);
  }
  {  // Retryable, used up, not skippable: the step fails and the chunk rolls back.
    Rig rig;
    A3Log log;
    StepOptions o = Opts("a3-fail", 5);
    o.retry.max_attempts = 2;
    o.skip.skip_limit = 5;
    Listen(o, log);
    auto fns = A3Functions(log, {{Key(7), [](int) { return Status::Busy("deadlock loser"); }}},
                           false);
    VectorReader reader(Items(10));
    auto rep = RunStep(*rig.db, reader, fns, o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    EXPECT_EQ(rep->status.code(), Code::kBusy) << rep->status.ToString();
    EXPECT_EQ(log.process_calls[Key(7)], 2);
    EXPECT_EQ(log.retry_attempts[Key(7)], (std::vector<int>{1}));
    ExpectOutputsExactlyOnce(*rig.db, 5);
    EXPECT_FALSE(Committed(*rig.db, "litetx_batch", SkipDocId(o, 7)).has_value());
    EXPECT_TRUE(log.skips.empty());
  }
  {  // The same failure, skippable by a predicate of the caller's.
    Rig rig;
    A3Log log;
    StepOptions o = Opts("a3-pred", 5);
    o.retry.max_attempts = 2;
    o.skip.skip_limit = 5;
    o.skip.also_skippable = [](const Status& s) { return s.message() == "deadlock loser"; };
    Listen(o, log);
    auto fns = A3Functions(log, {{Key(7), [](int) { return Status::Busy("deadlock loser"); }}},
                           false);
    VectorReader reader(Items(10));
    auto rep = RunStep(*rig.db, reader, fns, o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
    EXPECT_EQ(log.process_calls[Key(7)], 2);
    EXPECT_EQ(rep->total.process_skips, 1u);
    ExpectOutputsExactlyOnce(*rig.db, 10, {7});
    auto rec = Committed(*rig.db, "litetx_batch", SkipDocId(o, 7));
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->at("code"), "busy");
    EXPECT_EQ(rec->at("recovered"), false);
  }
}

// A reader that records the threads it is called from.
class ThreadRecordingReader final : public litetx::batch::ItemReader {
 public:
  explicit ThreadRecordingReader(std::vector<Item> items) : inner_(std::move(items)) {}
  Result<std::optional<Item>> Read() override {
    Note();
    return inner_.Read();
  }
  json::value Checkpoint() const override {
    Note();
    return inner_.Checkpoint();
  }
  Status Restore(const json::value& c) override {
    Note();
    return inner_.Restore(c);
  }
  std::set<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }

 private:
  void Note() const {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.insert(std::this_thread::get_id());
  }
  VectorReader inner_;
  mutable std::mutex mu_;
  mutable std::set<std::thread::id> threads_;
};

// Waits (at most 10 s) until `n` parties have arrived; each caller counts as one.
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n) {}
  bool Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_;
    cv_.notify_all();
    return cv_.wait_for(lock, 10s, [&] { return arrived_ >= n_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
};

// A.4: REPEAT(until=exhausted, concurrent) { TX { REPEAT(size=5) {...} } }. Four chunks at a
// time: every output exactly once, a chunk document for every chunk, the reader called from
// the calling thread only, and a chunk started only once every chunk 4 or more before it has
// committed.
TEST(BatchSeedTest, SeedA4_AsyncChunks) {
  Rig rig;
  StepOptions o = Opts("a4", 5);
  o.concurrency = 4;
  constexpr std::uint64_t kItems = 200, kChunks = 40;
  std::mutex mu;
  std::set<std::uint64_t> committed;
  std::set<std::thread::id> writer_threads;
  int window_violations = 0;
  o.listener.after_chunk = [&](std::uint64_t k, const litetx::batch::Counts&) {
    std::lock_guard<std::mutex> lock(mu);
    committed.insert(k);
  };
  o.listener.before_chunk = [&](std::uint64_t k) {
    std::lock_guard<std::mutex> lock(mu);
    for (std::uint64_t j = 0; j + 4 <= k; ++j) {
      if (!committed.contains(j)) ++window_violations;
    }
  };
  // The first two chunk writes wait for each other: two chunks are in their transactions at
  // once, or the rendezvous times out.
  Rendezvous both(2);
  std::atomic<int> writes{0};
  std::atomic<bool> met{false};
  StepFunctions fns;
  auto counting = CountingWriter();
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    {
      std::lock_guard<std::mutex> lock(mu);
      writer_threads.insert(std::this_thread::get_id());
    }
    if (writes.fetch_add(1) < 2 && both.Arrive()) met = true;
    return counting(tx, outs);
  };
  ThreadRecordingReader reader(Items(kItems));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_TRUE(met) << "two chunks never ran at once";
  EXPECT_EQ(reader.threads(), (std::set<std::thread::id>{std::this_thread::get_id()}));
  EXPECT_GT(writer_threads.size(), 1u);
  EXPECT_FALSE(writer_threads.contains(std::this_thread::get_id()));
  EXPECT_EQ(window_violations, 0);
  EXPECT_EQ(committed.size(), kChunks);
  EXPECT_EQ(rep->chunks, kChunks);
  EXPECT_EQ(rep->total.commits, kChunks);
  EXPECT_EQ(rep->total.read, kItems);
  EXPECT_EQ(rep->total.written, kItems);
  ExpectOutputsExactlyOnce(*rig.db, kItems);
  for (std::uint64_t k = 0; k < kChunks; ++k) {
    auto c = Committed(*rig.db, "litetx_batch", ChunkDocId(o, k));
    ASSERT_TRUE(c.has_value()) << "chunk " << k;
    EXPECT_EQ(c->at("begin"), 5 * k);
    EXPECT_EQ(c->at("end"), 5 * k + 5);
    EXPECT_EQ(c->at("checkpoint"), 5 * k + 5);
  }
  auto st = litetx::batch::ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "completed");
  EXPECT_EQ(st->chunks, kChunks);
  EXPECT_EQ(st->total.written, kItems);
}

// A.5: REPEAT { REPEAT(size=6, concurrent) { TX {...} } }. A transaction per item, the items of
// a chunk on four threads: every item commits on its own (plus one completion per chunk),
// every output exactly once, and a poison item is skipped alone.
TEST(BatchSeedTest, SeedA5_AsyncItems) {
  Rig rig;
  StepOptions o = Opts("a5", 6);
  o.concurrency = 4;
  o.transaction_per_item = true;
  o.skip.skip_limit = 3;
  constexpr std::uint64_t kItems = 60, kChunks = 10, kPoison = 13;
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::map<std::string, int> calls;
  Rendezvous both(2);
  std::atomic<int> started{0};
  std::atomic<bool> met{false};
  std::vector<SkipEvent> skips;
  o.listener.on_skip = [&](const SkipEvent& e) { skips.push_back(e); };
  StepFunctions fns;
  fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
      ++calls[item.key];
    }
    if (started.fetch_add(1) < 2 && both.Arrive()) met = true;
    if (IndexOf(item.value) == kPoison) return Status::InvalidArgument("poison");
    return std::optional<json::value>(item.value);
  };
  fns.write = CountingWriter();
  ThreadRecordingReader reader(Items(kItems));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_TRUE(met) << "two items never ran at once";
  EXPECT_GT(threads.size(), 1u);
  EXPECT_EQ(reader.threads(), (std::set<std::thread::id>{std::this_thread::get_id()}));
  EXPECT_EQ(rep->total.commits, kItems + kChunks);
  EXPECT_EQ(rep->total.read, kItems);
  EXPECT_EQ(rep->total.written, kItems - 1);
  EXPECT_EQ(rep->total.process_skips, 1u);
  EXPECT_EQ(rep->total.rollbacks, 1u);  // the poison item's first attempt
  EXPECT_EQ(rep->chunks, kChunks);
  EXPECT_EQ(calls[Key(kPoison)], 1);
  ExpectOutputsExactlyOnce(*rig.db, kItems, {kPoison});
  // Each item's own transaction left its marker; each output was written by its own.
  std::set<std::string> writers;
  for (std::uint64_t p = 0; p < kItems; ++p) {
    auto m = Committed(*rig.db, "litetx_batch", ItemDocId(o, p));
    ASSERT_TRUE(m.has_value()) << p;
    EXPECT_EQ(m->at("outcome"), p == kPoison ? "skipped" : "written") << p;
    EXPECT_EQ(m->at("chunk"), p / 6);
    if (p != kPoison) {
      const std::string w = LastWriter(*rig.db, "out", Key(p));
      EXPECT_EQ(LastWriter(*rig.db, "litetx_batch", ItemDocId(o, p)), w);
      writers.insert(w);
    }
  }
  EXPECT_EQ(writers.size(), kItems - 1);
  auto rec = Committed(*rig.db, "litetx_batch", SkipDocId(o, kPoison));
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->at("code"), "invalid_argument");
  ASSERT_EQ(skips.size(), 1u);
  EXPECT_EQ(skips[0].position, kPoison);
}

// The inner "database access" of A.6: an insert and an adjust, then an update whose expected
// version is stale when `stale` (as if another writer had moved the document): a real write
// that fails with kConflict after the attempt's first two writes.
Status InnerAccess(TxnContext& t, const std::string& key, int attempt, bool stale) {
  if (Status s = t.Insert("attempts", key + "-" + std::to_string(attempt), {{"attempt", attempt}});
      !s.ok()) {
    return s;
  }
  if (Status s = t.Adjust("side", "ctr", {{"n", 1}}); !s.ok()) return s;
  auto g = t.Get("side", "guard");
  if (!g.ok()) return g.status();
  const std::uint64_t expected = stale ? g->version - 1 : g->version;
  return t.Update("side", "guard", {{"by", key}}, {}, expected);
}

void SeedSide(Database& db) {
  ltxtest::MustCommit(db, litetx::Transaction()
                              .Insert("side", "ctr", {{"n", 0}})
                              .Insert("side", "guard", {{"by", ""}}));
}

// A.6: TX { REPEAT(size=5) { input; database access; RETRY { TX(NESTED) { database access } } } }.
// With RetryNested each attempt is a nested scope: the two failed attempts leave nothing, the
// third one's writes commit, and the outer transaction commits. The contrast: the same inner
// access under batch::Retry (no nested scope) leaks the failed attempts' writes into the outer
// transaction, which commits them: the pollution A.6 describes, and why RetryNested exists.
TEST(BatchSeedTest, SeedA6_NestedPropagation) {
  const std::string x = Key(2);
  auto run = [&](bool nested, Rig& rig, std::map<std::string, int>& attempts) {
    SeedSide(*rig.db);
    StepFunctions fns;
    fns.process = [&, nested](TxnContext& tx, const Item& item) -> ProcessResult {
      if (item.key == x) {
        auto inner = [&](TxnContext& t, int attempt) {
          ++attempts[item.key];
          return InnerAccess(t, item.key, attempt, /*stale=*/attempt <= 2);  // fails twice
        };
        Status s = nested ? litetx::batch::RetryNested(tx, Attempts(5),
                                                       BackoffPolicy::None(), inner)
                          : litetx::batch::Retry(Attempts(5),
                                                 BackoffPolicy::None(),
                                                 [&](int attempt) { return inner(tx, attempt); });
        if (!s.ok()) return s;
      }
      return std::optional<json::value>(item.value);
    };
    fns.write = CountingWriter();
    StepOptions o = Opts(nested ? "a6-nested" : "a6-plain", 5);
    VectorReader reader(Items(5));
    return RunStep(*rig.db, reader, fns, o);
  };
  {
    Rig rig;
    std::map<std::string, int> attempts;
    auto rep = run(true, rig, attempts);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
    EXPECT_EQ(attempts[x], 3);
    EXPECT_EQ(rep->this_run.rollbacks, 0u);  // the outer transaction never rolled back
    EXPECT_EQ(rep->total.commits, 1u);
    auto a = CommittedAll(*rig.db, "attempts");
    EXPECT_EQ(a.size(), 1u);
    EXPECT_TRUE(a.contains(x + "-3"));
    EXPECT_EQ(Committed(*rig.db, "side", "ctr")->at("n"), 1);
    EXPECT_EQ(Committed(*rig.db, "side", "guard")->at("by"), json::value(x));
    ExpectOutputsExactlyOnce(*rig.db, 5);
  }
  {
    Rig rig;
    std::map<std::string, int> attempts;
    auto rep = run(false, rig, attempts);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
    EXPECT_EQ(attempts[x], 3);
    // Every attempt's writes were kept: the failed ones polluted the outer transaction.
    auto a = CommittedAll(*rig.db, "attempts");
    EXPECT_EQ(a.size(), 3u);
    EXPECT_TRUE(a.contains(x + "-1"));
    EXPECT_TRUE(a.contains(x + "-2"));
    EXPECT_EQ(Committed(*rig.db, "side", "ctr")->at("n"), 3);
    ExpectOutputsExactlyOnce(*rig.db, 5);
  }
}

// A.8: RETRY(stateless) { TX(NESTED) { input; database access } } RECOVER { skip }. Spring Batch
// leaves this out for want of NESTED; RetryNested with a recoverer does it: the attempts all
// fail and leave nothing, the recoverer's writes (in a nested scope of their own) commit with
// the chunk.
TEST(BatchSeedTest, SeedA8_StatelessRetryRecoverNested) {
  Rig rig;
  SeedSide(*rig.db);
  const std::string x = Key(1);
  int attempts = 0, recovers = 0;
  StepFunctions fns;
  fns.process = [&](TxnContext& tx, const Item& item) -> ProcessResult {
    bool recovered = false;
    if (item.key == x) {
      Status s = litetx::batch::RetryNested(
          tx, Attempts(3), BackoffPolicy::None(),
          [&](TxnContext& t, int attempt) {
            ++attempts;
            return InnerAccess(t, item.key, attempt, /*stale=*/true);  // never succeeds
          },
          [&](TxnContext& t, const Status& last) -> Status {
            ++recovers;
            recovered = true;
            return t.Insert("dead", item.key, {{"code", std::string(litetx::CodeName(last.code()))}});
          });
      if (!s.ok()) return s;
    }
    json::object out = item.value.as_object();
    out["recovered"] = recovered;
    return std::optional<json::value>(json::value(std::move(out)));
  };
  fns.write = CountingWriter();
  StepOptions o = Opts("a8", 5);
  VectorReader reader(Items(5));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(recovers, 1);
  EXPECT_EQ(rep->this_run.rollbacks, 0u);
  EXPECT_TRUE(CommittedAll(*rig.db, "attempts").empty());
  EXPECT_EQ(Committed(*rig.db, "side", "ctr")->at("n"), 0);
  auto dead = Committed(*rig.db, "dead", x);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->at("code"), "conflict");
  ExpectOutputsExactlyOnce(*rig.db, 5);
  EXPECT_EQ(Committed(*rig.db, "out", x)->at("recovered"), true);
  EXPECT_EQ(Committed(*rig.db, "out", Key(0))->at("recovered"), false);
  EXPECT_EQ(LastWriter(*rig.db, "dead", x), LastWriter(*rig.db, "out", x));
}

}  // namespace
