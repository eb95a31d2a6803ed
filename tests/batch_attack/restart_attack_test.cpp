// Restarts under conditions the crash loop does not reach: an execution that stops inside an
// item-by-item write after the scan marker's commit was left unknown, a restart that changes
// the transaction boundary or the chunking, a skip limit met across a restart inside an
// item-by-item write, listeners that throw on worker threads, and checkpoints near the
// document size limit.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <stdexcept>

#include "attack_util.h"
#include "engine/meta.h"

namespace battack {
namespace {

using litetx::SimulatedCrash;
using ltxtest::Call;
using ltxtest::HookStore;
using ltxtest::Op;

// Chunk 3 ([12,14)) cannot be written whole by the first execution (a sink that refuses bulk
// writes, kUnavailable, each of its attempts), so the step writes it item by item after its
// scan marker. The scan marker's commit point is lost — landed with its reply lost, or on its
// way — and the record cannot be read back for a while, so that its transaction ends kUnknown.
// If the execution goes on item by item it dies inside item 13's write, after item 12. The
// restart's sink takes bulk writes again. Item 12 must be written once: a restart writes the
// chunk whole only if no scan marker committed, so the first execution may write items one by
// one only once its marker is known to have committed.
TEST(BatchRestartAttack, ScanMarkerCommitUnknownThenDeathInsideTheScan) {
  int died_in_scan = 0, stopped_before_scan = 0;
  for (bool parallel : {true, false}) {
    for (bool landed : {true, false}) {
      SCOPED_TRACE(std::string(parallel ? "parallel" : "classic") +
                   (landed ? ", flip landed, reply lost" : ", flip lost on its way"));
      Rig rig;
      rig.parallel = parallel;
      auto hook = std::make_shared<HookStore>(rig.mem);
      std::mutex mu;
      std::string scan_txn;
      bool flip_lost = false;
      int record_reads_failed = 0;
      hook->before = [&](const Call& c) -> std::optional<Status> {
        std::lock_guard<std::mutex> lock(mu);
        if (scan_txn.empty()) return std::nullopt;
        if (!landed && !flip_lost && c.is_commit_point() && c.key.id == scan_txn) {
          flip_lost = true;
          return Status::Unknown("flip lost on its way");
        }
        if (flip_lost && c.op == Op::kGet && c.key == ltxtest::TxnKey(scan_txn) &&
            record_reads_failed < 16) {
          ++record_reads_failed;
          return Status::Unavailable("record unreadable for a while");
        }
        return std::nullopt;
      };
      hook->after = [&](const Call& c, const Status& result) -> std::optional<Status> {
        if (!result.ok()) return std::nullopt;
        std::lock_guard<std::mutex> lock(mu);
        if (c.op == Op::kCreate && c.key.collection == kState && c.key.id == ScanId(3)) {
          auto m = litetx::engine::DecodeMeta(*c.value);
          if (m.ok()) scan_txn = m->txn;
        }
        if (landed && !flip_lost && !scan_txn.empty() && c.is_commit_point() &&
            c.key.id == scan_txn) {
          flip_lost = true;
          return Status::Unknown("flip reply lost");
        }
        return std::nullopt;
      };
      auto ex = std::make_shared<Exec>();
      ex->fail_write = [](const std::vector<lb::Output>& outs) -> std::optional<Status> {
        if (outs.size() > 1 && ChunkOf(*outs.front().item) == 3) {
          return Status::Unavailable("the sink refuses bulk writes");
        }
        return std::nullopt;
      };
      ex->on_write = [](const std::vector<lb::Output>& outs) {
        if (outs.size() == 1 && outs.front().item->key == "i13") throw SimulatedCrash(0);
      };
      {
        auto db = rig.Db(hook);
        try {
          auto r = RunExec(*db, Mode::kSequential, ex);
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          EXPECT_FALSE(r->status.ok());
          ++stopped_before_scan;
        } catch (const SimulatedCrash&) {
          ++died_in_scan;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ASSERT_TRUE(flip_lost) << "the scan marker's commit point was never met";
      }
      ASSERT_TRUE(rig.Settle().ok());
      auto db = rig.Db();
      auto r = RunExec(*db, Mode::kSequential);
      ASSERT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->status : r.status()).ToString();
      auto bad = Verify(rig, Mode::kSequential, &*r);
      EXPECT_TRUE(bad.empty()) << Join(bad);
    }
  }
  std::printf("[ restart  ] scan marker unknown: %d executions died inside the scan, %d "
              "stopped before it\n", died_in_scan, stopped_before_scan);
  EXPECT_GT(died_in_scan, 0);  // the landed marker was learned and the scan went on
}

// A step run a transaction per item dies inside chunk 3 after item 12 committed; the restart
// runs a transaction per chunk. Item 12 must still be written once.
TEST(BatchRestartAttack, TransactionPerItemThenPerChunkAfterADeathInsideAChunk) {
  Rig rig;
  auto ex = std::make_shared<Exec>();
  ex->on_write = [](const std::vector<lb::Output>& outs) {
    if (outs.front().item->key == "i13") throw SimulatedCrash(0);
  };
  lb::StepOptions per_item = StepOpts(Mode::kPerItem);
  per_item.concurrency = 1;  // items one after another: item 12 before item 13
  {
    auto db = rig.Db();
    EXPECT_THROW((void)RunExec(*db, Mode::kPerItem, ex, &per_item), SimulatedCrash);
  }
  ASSERT_TRUE(rig.Settle().ok());
  auto db = rig.Db();
  auto item12 = db->Read(kState, ItemMarkerId(12));
  ASSERT_TRUE(item12.ok());
  ASSERT_EQ(item12->state, litetx::DocumentState::kFound);
  auto r = RunExec(*db, Mode::kSequential);
  ASSERT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->status : r.status()).ToString();
  auto bad = Verify(rig, Mode::kSequential, &*r);
  EXPECT_TRUE(bad.empty()) << Join(bad);
}

// Three chunks at once: chunks 1 and 2 commit, chunk 0 fails the step. The restart (a hostile
// user) changes commit_interval from 4 to 2, so that chunks formed the new way would not line
// up with the stored chunk 1, which begins at position 4. The restart must either refuse
// (kFailedPrecondition) before writing anything, or form the chunks below chunk 1 so that they
// end where it begins; it must never pass over positions 2 and 3 or write an item twice. Then
// the step ends exactly once (after a restart with the original chunking, if it refused).
TEST(BatchRestartAttack, ChunkingChangedWhileCommittedChunksLieAboveTheWatermark) {
  Rig rig;
  auto ex = std::make_shared<Exec>();
  std::mutex mu;
  std::condition_variable cv;
  int committed = 0;
  lb::StepOptions o = StepOpts(Mode::kConcurrent);
  o.listener.after_chunk = [&](std::uint64_t, const lb::Counts&) {
    std::lock_guard<std::mutex> lock(mu);
    ++committed;
    cv.notify_all();
  };
  ex->fail_process = [&](const lb::Item& item) -> std::optional<Status> {
    if (N(item) != 0) return std::nullopt;
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return committed >= 2; }));
    return Status::Corruption("item 0 cannot be read");
  };
  {
    auto db = rig.Db();
    auto r = RunExec(*db, Mode::kConcurrent, ex, &o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->status.code(), Code::kCorruption) << r->status.ToString();
    EXPECT_EQ(r->chunks, 2u);
  }
  const Seen before = SeenOf(rig);
  std::optional<lb::StepReport> done;
  {
    lb::StepOptions two = StepOpts(Mode::kSequential);
    two.commit_interval = 2;
    auto db = rig.Db();
    auto r = RunExec(*db, Mode::kSequential, nullptr, &two);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->status.ok()) {
      done = *r;
    } else {
      EXPECT_EQ(r->status.code(), Code::kFailedPrecondition) << r->status.ToString();
      // Nothing but the step document (its owner and status) changed.
      Seen after = SeenOf(rig);
      after.erase(std::string(kState) + "/" + StepId());
      Seen before_wo = before;
      before_wo.erase(std::string(kState) + "/" + StepId());
      EXPECT_TRUE(before_wo == after) << SeenDiff(before_wo, after);
    }
  }
  if (!done) {
    auto db = rig.Db();
    auto r = RunExec(*db, Mode::kSequential);
    ASSERT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->status : r.status()).ToString();
    done = *r;
  }
  auto bad = Verify(rig, Mode::kSequential, &*done);
  EXPECT_TRUE(bad.empty()) << Join(bad);
}

// A reader whose input changed between runs (a hostile user: a shorter file): the restart
// reaches the end of its input below a chunk an earlier execution committed. It must not
// report the step complete with that chunk's items counted but their positions never formed.
TEST(BatchRestartAttack, InputShorterThanTheCommittedChunks) {
  Rig rig;
  auto ex = std::make_shared<Exec>();
  std::mutex mu;
  std::condition_variable cv;
  int committed = 0;
  lb::StepOptions o = StepOpts(Mode::kConcurrent);
  o.listener.after_chunk = [&](std::uint64_t, const lb::Counts&) {
    std::lock_guard<std::mutex> lock(mu);
    ++committed;
    cv.notify_all();
  };
  ex->fail_process = [&](const lb::Item& item) -> std::optional<Status> {
    if (N(item) != 0) return std::nullopt;
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return committed >= 2; }));
    return Status::Corruption("item 0 cannot be read");
  };
  {
    auto db = rig.Db();
    auto r = RunExec(*db, Mode::kConcurrent, ex, &o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->status.code(), Code::kCorruption) << r->status.ToString();
  }
  auto db = rig.Db();
  auto short_ex = std::make_shared<Exec>();
  short_ex->mode = Mode::kSequential;
  lb::VectorReader reader(Items(3));  // positions 0..2: chunks 1 and 2 lie beyond its end
  lb::StepFunctions fns = Functions(short_ex);
  auto r = lb::RunStep(*db, reader, fns, StepOpts(Mode::kSequential));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status.code(), Code::kFailedPrecondition) << r->status.ToString();
  auto st = lb::ReadStepStatus(*db, StepOpts(Mode::kSequential));
  ASSERT_TRUE(st.ok());
  EXPECT_NE(st->status, "completed");
}

// Skip limit 1, two items of one chunk refused by the writer (skippable). Without a death the
// step writes the chunk item by item, skips the first and fails at the second (limit
// exceeded). Here the first execution dies inside the second item's write, after the first
// item's skip committed; the restart must not skip the second item as well.
TEST(BatchRestartAttack, SkipLimitHoldsAcrossADeathInsideAnItemByItemWrite) {
  for (bool die : {false, true}) {
    SCOPED_TRACE(die ? "death inside the second refused item" : "no death");
    Rig rig;
    lb::StepOptions o;
    o.job = kJob;
    o.state_collection = kState;
    o.commit_interval = 4;
    o.skip.skip_limit = 1;
    o.backoff = lb::BackoffPolicy::None();
    std::atomic<bool> dying{die};
    lb::StepFunctions fns;
    fns.write = [&](litetx::TxnContext& tx, const std::vector<lb::Output>& outs) -> Status {
      for (const auto& out : outs) {
        const int n = N(*out.item);
        if (outs.size() == 1 && n == 2 && dying.exchange(false)) throw SimulatedCrash(0);
        if (n == 1 || n == 2) return Status::FailedPrecondition("refused by the sink");
        if (Status s = tx.Insert(kOut, out.item->key, out.value.as_object()); !s.ok()) return s;
      }
      return Status::Ok();
    };
    auto run = [&]() -> litetx::Result<lb::StepReport> {
      auto db = rig.Db();
      lb::VectorReader reader(Items(4));
      return lb::RunStep(*db, reader, fns, o);
    };
    if (die) {
      EXPECT_THROW((void)run(), SimulatedCrash);
      ASSERT_TRUE(rig.Settle().ok());
    }
    auto r = run();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status.code(), Code::kFailedPrecondition) << r->status.ToString();
    EXPECT_LE(r->total.skips(), 1u) << CountsText(r->total);
    auto db = rig.Db();
    auto st = lb::ReadStepStatus(*db, o);
    ASSERT_TRUE(st.ok());
    EXPECT_NE(st->status, "completed");
    EXPECT_LE(st->total.skips(), 1u);
  }
}

// Listeners that throw on a worker thread (three chunks at once; a transaction per item): the
// exception propagates out of RunStep like one from a step function, after the workers are
// joined; a restart completes the step exactly once.
TEST(BatchRestartAttack, ListenerThrowingOnAWorkerThreadPropagates) {
  struct Case {
    const char* name;
    Mode mode;
    std::function<void(lb::StepOptions&)> arm;
  };
  const std::vector<Case> cases{
      {"after_chunk, three chunks at once", Mode::kConcurrent,
       [](lb::StepOptions& o) {
         o.listener.after_chunk = [](std::uint64_t k, const lb::Counts&) {
           if (k == 1) throw std::runtime_error("after_chunk listener failed");
         };
       }},
      {"on_skip, three chunks at once", Mode::kConcurrent,
       [](lb::StepOptions& o) {
         o.listener.on_skip = [](const lb::SkipEvent&) {
           throw std::runtime_error("on_skip listener failed");
         };
       }},
      {"on_retry, a transaction per item", Mode::kPerItem,
       [](lb::StepOptions& o) {
         o.listener.on_retry = [](const lb::RetryEvent&) {
           throw std::runtime_error("on_retry listener failed");
         };
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Rig rig;
    lb::StepOptions o = StepOpts(c.mode);
    c.arm(o);
    {
      auto db = rig.Db();
      EXPECT_THROW((void)RunExec(*db, c.mode, nullptr, &o), std::runtime_error);
    }
    ASSERT_TRUE(rig.Settle().ok());
    auto db = rig.Db();
    auto r = RunExec(*db, c.mode);
    ASSERT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->status : r.status()).ToString();
    auto bad = Verify(rig, c.mode, &*r);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
}

}  // namespace
}  // namespace battack
