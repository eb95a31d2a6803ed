// A reported outcome never changes afterwards. After RunStep reports the step completed, no
// other execution — the same step again, another reader, other functions, other options, two at
// once — changes what is stored. Two executions started at the same moment: at most one reports
// that it completed the step, and the stored totals are its totals. After RunStep reports a
// failure, its totals are those of the committed chunks, and a restart's totals include exactly
// those chunks (not redone) and the rest.
#include <chrono>
#include <cstdio>
#include <thread>

#include "attack_util.h"

namespace battack {
namespace {

using ltxtest::Async;

class BatchOutcome : public ::testing::TestWithParam<Mode> {};

TEST_P(BatchOutcome, CompletedStepIsNeverChangedByLaterExecutions) {
  const Mode mode = GetParam();
  Rig rig;
  auto db = rig.Db();
  auto first = RunExec(*db, mode);
  ASSERT_TRUE(first.ok() && first->status.ok());
  auto bad = Verify(rig, mode, &*first);
  ASSERT_TRUE(bad.empty()) << Join(bad);
  const Seen seen = SeenOf(rig);
  auto st = lb::ReadStepStatus(*db, StepOpts(mode));
  ASSERT_TRUE(st.ok());
  auto unchanged = [&](const char* what) {
    SCOPED_TRACE(what);
    const Seen now = SeenOf(rig);
    EXPECT_TRUE(now == seen) << SeenDiff(seen, now);
    auto s = lb::ReadStepStatus(*db, StepOpts(mode));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->status, "completed");
    EXPECT_EQ(s->execution, st->execution);
    EXPECT_EQ(s->chunks, st->chunks);
    EXPECT_EQ(CountsText(s->total), CountsText(st->total));
  };
  auto check_report = [&](const litetx::Result<lb::StepReport>& r) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->status.ok());
    EXPECT_TRUE(r->already_complete);
    EXPECT_EQ(r->execution, first->execution);
    EXPECT_EQ(r->chunks, first->chunks);
    EXPECT_EQ(CountsText(r->total), CountsText(first->total));
    EXPECT_EQ(CountsText(r->this_run), CountsText(lb::Counts{}));
  };
  // The same step again.
  check_report(RunExec(*db, mode));
  unchanged("the same step again");
  // Another reader (more items, and it must not even be read), functions that would write
  // garbage, other options.
  {
    int reads = 0;
    class Counting : public lb::ItemReader {
     public:
      explicit Counting(int& reads) : inner_(Items(40)), reads_(reads) {}
      litetx::Result<std::optional<lb::Item>> Read() override {
        ++reads_;
        return inner_.Read();
      }
      json::value Checkpoint() const override { return inner_.Checkpoint(); }
      Status Restore(const json::value& c) override {
        ++reads_;
        return inner_.Restore(c);
      }

     private:
      lb::VectorReader inner_;
      int& reads_;
    } reader(reads);
    lb::StepFunctions garbage;
    garbage.write = [](litetx::TxnContext& tx, const std::vector<lb::Output>& outs) -> Status {
      for (const auto& o : outs) {
        if (Status s = tx.Update(kOut, o.item->key, json::object{{"times", 99}}); !s.ok()) return s;
      }
      return Status::Ok();
    };
    for (int variant = 0; variant < 3; ++variant) {
      lb::StepOptions o = StepOpts(mode);
      if (variant == 1) {
        o.commit_interval = 1;
        o.concurrency = 5;
      }
      if (variant == 2) o.transaction_per_item = !o.transaction_per_item;
      check_report(lb::RunStep(*db, reader, garbage, o));
    }
    EXPECT_EQ(reads, 0);
    unchanged("another reader, other functions, other options");
  }
  // Two at once.
  {
    litetx::Result<lb::StepReport> a = Status::Aborted("not run"), b = Status::Aborted("not run");
    {
      auto db_a = rig.Db(), db_b = rig.Db();
      Async ta([&] { a = RunExec(*db_a, mode); });
      Async tb([&] { b = RunExec(*db_b, mode); });
      ASSERT_TRUE(ta.Wait(std::chrono::seconds(20)));
      ASSERT_TRUE(tb.Wait(std::chrono::seconds(20)));
    }
    check_report(a);
    check_report(b);
    unchanged("two at once");
  }
}

// Two executions of a fresh step started at the same moment. Either may take the step over
// from the other, or lose the race to start it; at most one reports that it completed the step,
// and the stored totals are that report's. If neither completed it, a third does. Exactly once.
TEST_P(BatchOutcome, TwoExecutionsStartedAtOnce) {
  const Mode mode = GetParam();
  const int rounds = LongRun() ? 2000 : 100;
  int completed_by_one = 0, none_completed = 0, refused_at_start = 0, taken_over = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(std::string(ModeName(mode)) + ", round " + std::to_string(round));
    Rig rig;
    litetx::Result<lb::StepReport> res[2] = {Status::Aborted("not run"),
                                              Status::Aborted("not run")};
    {
      std::mutex mu;
      std::condition_variable cv;
      int ready = 0;
      auto dbs = std::make_pair(rig.Db(), rig.Db());
      auto go = [&](int i, litetx::Database& db) {
        {
          std::unique_lock<std::mutex> lock(mu);
          ++ready;
          cv.notify_all();
          cv.wait(lock, [&] { return ready == 2; });
        }
        // A small, varying head start, so that every order of the two starts occurs.
        if (i == round % 2) std::this_thread::sleep_for(std::chrono::microseconds(50 * (round % 7)));
        res[i] = RunExec(db, mode);
      };
      Async t0([&] { go(0, *dbs.first); });
      Async t1([&] { go(1, *dbs.second); });
      ASSERT_TRUE(t0.Wait(std::chrono::seconds(20)));
      ASSERT_TRUE(t1.Wait(std::chrono::seconds(20)));
    }
    const lb::StepReport* completer = nullptr;
    int completers = 0;
    for (const auto& r : res) {
      // The loser of a race fails as a transaction does: the other took the step over or
      // committed first (kFailedPrecondition, kConflict), or held a document it needed (kBusy).
      auto lost_race = [](const Status& s) {
        return s.code() == Code::kFailedPrecondition || s.code() == Code::kConflict ||
               s.code() == Code::kBusy;
      };
      if (!r.ok()) {
        // Lost the race to start the step.
        EXPECT_TRUE(lost_race(r.status())) << r.status().ToString();
        ++refused_at_start;
        continue;
      }
      if (r->status.ok() && !r->already_complete) {
        ++completers;
        completer = &*r;
      } else if (!r->status.ok()) {
        EXPECT_TRUE(lost_race(r->status)) << r->status.ToString();
        ++taken_over;
      }
    }
    EXPECT_LE(completers, 1);
    std::optional<lb::StepReport> third;
    if (completer == nullptr) {
      ++none_completed;
      auto db = rig.Db();
      auto r = RunExec(*db, mode);
      ASSERT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->status : r.status()).ToString();
      third = *r;
      completer = &*third;
    } else {
      ++completed_by_one;
    }
    auto bad = Verify(rig, mode, completer);
    ASSERT_TRUE(bad.empty()) << Join(bad);
  }
  std::printf("[ outcome  ] %s, two at once: %d rounds, completed by one of them %d, by a third "
              "%d; %d refused at the start, %d lost the race later\n",
              ModeName(mode), rounds, completed_by_one, none_completed, refused_at_start,
              taken_over);
}

// A step that fails at chunk 2 (a failure neither retried, skipped nor recovered). Its report's
// totals are the sum of the chunk documents that committed, ReadStepStatus says the same, and a
// restart keeps those chunks as they are and ends exactly once.
TEST_P(BatchOutcome, FailedStepTotalsAreItsCommittedChunks) {
  const Mode mode = GetParam();
  Rig rig;
  auto ex = std::make_shared<Exec>();
  ex->fail_process = [](const lb::Item& item) -> std::optional<Status> {
    if (N(item) == 9) return Status::Corruption("item 9 unreadable");
    return std::nullopt;
  };
  auto db = rig.Db();
  auto failed = RunExec(*db, mode, ex);
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  ASSERT_EQ(failed->status.code(), Code::kCorruption) << failed->status.ToString();
  // The committed chunks, as stored.
  lb::Counts sum;
  std::uint64_t chunks = 0;
  Seen committed;
  for (const auto& [id, d] : FoundDocs(*rig.mem, *db, kState)) {
    if (id.find("/chunk/") == std::string::npos) continue;
    auto c = lb::Counts::FromJson(d.at("counts").as_object());
    ASSERT_TRUE(c.ok());
    sum += *c;
    ++chunks;
    committed[id] = {litetx::DocumentState::kFound, d};
  }
  EXPECT_GE(chunks, 2u);  // chunks 0 and 1 commit before chunk 2 fails
  EXPECT_EQ(failed->chunks, chunks);
  EXPECT_EQ(CountsText(failed->total), CountsText(sum));
  auto st = lb::ReadStepStatus(*db, StepOpts(mode));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "failed");
  EXPECT_NE(st->last_error.find("item 9 unreadable"), std::string::npos) << st->last_error;
  EXPECT_EQ(st->chunks, chunks);
  EXPECT_EQ(CountsText(st->total), CountsText(sum));
  // The restart.
  auto done = RunExec(*db, mode);
  ASSERT_TRUE(done.ok() && done->status.ok())
      << (done.ok() ? done->status : done.status()).ToString();
  EXPECT_EQ(done->execution, 2u);
  auto bad = Verify(rig, mode, &*done);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  for (const auto& [id, v] : committed) {
    auto r = db->Read(kState, id);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->doc, v.second) << id << " changed";
  }
  // The restart's own counts: what the committed chunks did not cover.
  lb::Counts rest = done->total;
  EXPECT_EQ(rest.read - sum.read, done->this_run.read);
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchOutcome, ::testing::ValuesIn(kModes),
                         [](const ::testing::TestParamInfo<Mode>& i) {
                           return std::string(ModeName(i.param));
                         });

}  // namespace
}  // namespace battack
