// BatchZombie executions: execution A is paused while execution B takes the step over and completes
// it; then A is let go. A must fail (taken over), and nothing A does after it is let go may land:
// the outputs stay exactly once, B's stored totals and status do not change, and what reads see
// is the same as before A went on.
//
//   * A paused inside write() for chunk k (its chunk transaction buffered, nothing stored);
//   * A paused right after its chunk document's write landed, before the commit point, past
//     the lease (a collector rolls A's transaction back; B redoes the chunk), then the reply
//     lost;
//   * A paused right after its commit point landed, past the lease (a collector finishes A's
//     transaction; B must not redo the chunk), then the reply lost.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <thread>

#include "attack_util.h"
#include "engine/meta.h"

namespace battack {
namespace {

using ltxtest::Async;
using ltxtest::Call;
using ltxtest::Gate;
using ltxtest::HookStore;
using ltxtest::Op;

// Opens a gate when the scope ends, so that a test that stops early never leaves a thread
// held (the Async joining it would wait forever).
struct OpenOnExit {
  Gate& gate;
  ~OpenOnExit() { gate.Open(); }
};

struct ZombieTally {
  int cases = 0, b_retries = 0, redone = 0, not_redone = 0, a_committed = 0;
};

// Runs B (new Database, new reader) until the step completes; returns its report. In the
// concurrent mode A's other workers may still commit chunks while B starts, so B may lose a
// race (kConflict; kBusy: a chunk document held by A's chunk transaction past B's busy timeout
// and B's retries, which a loaded machine can stretch; or a chunk committed by A first) and is
// run again.
std::optional<lb::StepReport> RunB(Rig& rig, Mode mode, ZombieTally& t) {
  for (int i = 0; i < 5; ++i) {
    auto db = rig.Db();
    auto r = RunExec(*db, mode);
    if (r.ok() && r->status.ok()) return *r;
    const Status s = r.ok() ? r->status : r.status();
    const bool race = s.code() == Code::kConflict || s.code() == Code::kBusy ||
                      s.code() == Code::kFailedPrecondition;
    EXPECT_TRUE(mode == Mode::kConcurrent && race) << "B failed: " << s.ToString();
    if (!(mode == Mode::kConcurrent && race)) return std::nullopt;
    ++t.b_retries;
  }
  ADD_FAILURE() << "B did not complete in 5 executions";
  return std::nullopt;
}

// Lets A go, waits for it and checks that it failed and changed nothing.
void ReleaseAndCheck(Rig& rig, Mode mode, Gate& gate, Async& a_thread,
                     const litetx::Result<lb::StepReport>& a_result) {
  const Seen before = SeenOf(rig);
  auto db = rig.Db();
  auto st_before = lb::ReadStepStatus(*db, StepOpts(mode));
  ASSERT_TRUE(st_before.ok());
  gate.Open();
  ASSERT_TRUE(a_thread.Wait(std::chrono::seconds(20))) << "A did not end after it was let go";
  // A failed: taken over, or its chunk committed by another execution.
  if (a_result.ok()) {
    EXPECT_FALSE(a_result->status.ok()) << "A reported success after B completed the step";
    EXPECT_EQ(a_result->status.code(), Code::kFailedPrecondition) << a_result->status.ToString();
  } else {
    EXPECT_EQ(a_result.status().code(), Code::kFailedPrecondition) << a_result.status().ToString();
  }
  // Nothing A did after it was let go landed.
  Status s = rig.Settle();
  EXPECT_TRUE(s.ok()) << s.ToString();
  const Seen after = SeenOf(rig);
  EXPECT_TRUE(before == after) << "A changed what reads see:" << SeenDiff(before, after);
  auto st_after = lb::ReadStepStatus(*db, StepOpts(mode));
  ASSERT_TRUE(st_after.ok());
  EXPECT_EQ(st_after->status, "completed");
  EXPECT_EQ(st_after->execution, st_before->execution);
  EXPECT_EQ(st_after->chunks, st_before->chunks);
  EXPECT_EQ(CountsText(st_after->total), CountsText(st_before->total));
  EXPECT_EQ(st_after->last_error, st_before->last_error);
  auto bad = Verify(rig, mode);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  // A third execution finds the step complete and changes nothing.
  auto c = RunExec(*db, mode);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->already_complete);
  EXPECT_TRUE(SeenOf(rig) == after);
}

class BatchZombie : public ::testing::TestWithParam<Mode> {};

// A paused inside write() for chunk k while B takes over and completes.
TEST_P(BatchZombie, PausedInsideWriteWhileAnotherExecutionCompletes) {
  const Mode mode = GetParam();
  ZombieTally t;
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(std::string(ModeName(mode)) + ", A paused in write() of chunk " +
                 std::to_string(k));
    Rig rig;
    Gate gate;
    auto ex = std::make_shared<Exec>();
    std::atomic<bool> held{false};
    ex->on_write = [&](const std::vector<lb::Output>& outs) {
      if (outs.empty() || ChunkOf(*outs.front().item) != k) return;
      if (!held.exchange(true)) gate.Hold();
    };
    litetx::Result<lb::StepReport> a_result = Status::Aborted("A did not run");
    auto a_db = rig.Db();
    Async a_thread([&] { a_result = RunExec(*a_db, mode, ex); });
    OpenOnExit open_on_exit{gate};
    ASSERT_TRUE(gate.WaitHeld(1)) << "A never reached write() of chunk " << k;
    ++t.cases;
    auto b = RunB(rig, mode, t);
    ASSERT_TRUE(b.has_value());
    auto bad = Verify(rig, mode, &*b);
    EXPECT_TRUE(bad.empty()) << Join(bad);
    ReleaseAndCheck(rig, mode, gate, a_thread, a_result);
    if (HasFailure()) return;
  }
  std::printf("[ zombie   ] %s, paused in write(): %d cases, B run again %d times\n",
              ModeName(mode), t.cases, t.b_retries);
}

// A paused past the lease right after a write of its chunk k transaction landed — the chunk
// document's (before the commit point) or the commit point itself — with the reply then lost.
TEST_P(BatchZombie, PausedPastTheLeaseAfterAWriteLandedThenReplyLost) {
  const Mode mode = GetParam();
  for (bool after_commit : {false, true}) {
    ZombieTally t;
    for (bool parallel : {true, false}) {
      for (int k = 0; k < 4; ++k) {
        SCOPED_TRACE(std::string(ModeName(mode)) + (parallel ? " parallel" : " classic") +
                     ", A paused after " +
                     (after_commit ? "the commit point" : "the chunk document's write") +
                     " of chunk " + std::to_string(k));
        Rig rig;
        rig.parallel = parallel;
        Gate gate;
        std::mutex mu;
        std::string txn;  // chunk k's transaction
        std::atomic<bool> held{false};
        auto hook = std::make_shared<HookStore>(rig.mem);
        hook->after = [&](const Call& c, const Status& result) -> std::optional<Status> {
          if (!result.ok() || held.load()) return std::nullopt;
          if (c.op == Op::kCreate && c.key.collection == kState && c.key.id == ChunkId(k)) {
            auto m = litetx::engine::DecodeMeta(*c.value);
            if (!m.ok()) return std::nullopt;
            {
              std::lock_guard<std::mutex> lock(mu);
              txn = m->txn;
            }
            if (!after_commit && !held.exchange(true)) {
              gate.Hold();
              return Status::Unknown("reply lost while paused");
            }
            return std::nullopt;
          }
          if (after_commit && c.is_commit_point()) {
            {
              std::lock_guard<std::mutex> lock(mu);
              if (txn.empty() || c.key.id != txn) return std::nullopt;
            }
            if (!held.exchange(true)) {
              gate.Hold();
              return Status::Unknown("reply lost while paused");
            }
          }
          return std::nullopt;
        };
        litetx::Result<lb::StepReport> a_result = Status::Aborted("A did not run");
        auto a_db = rig.Db(hook);
        Async a_thread([&] { a_result = RunExec(*a_db, mode); });
        OpenOnExit open_on_exit{gate};
        ASSERT_TRUE(gate.WaitHeld(1)) << "A never reached the pause";
        ++t.cases;
        // Past A's lease: a collector settles A's transaction (rolls it back before its commit
        // point, finishes it after).
        Status s = rig.Settle();
        EXPECT_TRUE(s.ok()) << s.ToString();
        auto b = RunB(rig, mode, t);
        ASSERT_TRUE(b.has_value());
        auto bad = Verify(rig, mode, &*b);
        EXPECT_TRUE(bad.empty()) << Join(bad);
        // Did B write chunk k again? Its chunk document says which execution committed it.
        auto db = rig.Db();
        auto cd = db->Read(kState, ChunkId(k));
        ASSERT_TRUE(cd.ok() && cd->state == litetx::DocumentState::kFound);
        const auto exec_no = cd->doc.at("execution").to_number<std::uint64_t>();
        if (exec_no == 1) {
          ++t.not_redone;
        } else {
          ++t.redone;
        }
        // B redid the chunk exactly when A's transaction did not commit. (On the parallel path
        // the chunk document's write may be the last of the transaction's writes, and so its
        // commit point.)
        std::string id;
        {
          std::lock_guard<std::mutex> lock(mu);
          id = txn;
        }
        const litetx::TxnOutcome outcome = ltxtest::OutcomeOf(*db, id);
        EXPECT_TRUE(outcome == litetx::TxnOutcome::kCommitted ||
                    outcome == litetx::TxnOutcome::kAborted)
            << litetx::TxnOutcomeName(outcome);
        if (after_commit) {
          EXPECT_EQ(outcome, litetx::TxnOutcome::kCommitted);
        }
        if (outcome == litetx::TxnOutcome::kCommitted) ++t.a_committed;
        EXPECT_EQ(exec_no == 1, outcome == litetx::TxnOutcome::kCommitted)
            << "chunk " << k << " committed by execution " << exec_no << ", A's transaction "
            << litetx::TxnOutcomeName(outcome);
        ReleaseAndCheck(rig, mode, gate, a_thread, a_result);
        if (HasFailure()) return;
      }
    }
    std::printf("[ zombie   ] %s, paused past the lease after %s: %d cases, chunk redone by B "
                "%d, kept from A %d (A's transaction committed in %d), B run again %d times\n",
                ModeName(mode), after_commit ? "the commit point" : "the chunk document's write",
                t.cases, t.redone, t.not_redone, t.a_committed, t.b_retries);
    if (after_commit) {
      EXPECT_EQ(t.not_redone, t.cases);
    } else {
      EXPECT_GT(t.redone, 0);  // at least every case on the classic path
    }
  }
}

// Chunks run at once commit without changing the step document. Execution A (three chunks at
// once) is held inside write() of chunks 1 and 3; execution B starts, looks for committed
// chunks, and right before its take-over lands A's chunk 1 commits. B must find chunk 1
// (committed before its take-over) and not write it again: it completes the step with A's
// chunk 1 as A committed it. A, let go, fails and changes nothing.
TEST(BatchZombieRace, ChunkCommittedBetweenTheLookAndTheTakeOver) {
  Rig rig;
  Gate gate1, gate3;
  std::mutex mu;
  std::condition_variable cv;
  bool chunk1_committed = false;
  auto ex = std::make_shared<Exec>();
  std::atomic<bool> held1{false}, held3{false};
  ex->on_write = [&](const std::vector<lb::Output>& outs) {
    const int k = ChunkOf(*outs.front().item);
    if (k == 1 && !held1.exchange(true)) gate1.Hold();
    if (k == 3 && !held3.exchange(true)) gate3.Hold();
  };
  lb::StepOptions o = StepOpts(Mode::kConcurrent);
  o.listener.after_chunk = [&](std::uint64_t k, const lb::Counts&) {
    if (k != 1) return;
    std::lock_guard<std::mutex> lock(mu);
    chunk1_committed = true;
    cv.notify_all();
  };
  litetx::Result<lb::StepReport> a_result = Status::Aborted("A did not run");
  auto a_db = rig.Db();
  Async a_thread([&] { a_result = RunExec(*a_db, Mode::kConcurrent, ex, &o); });
  OpenOnExit open1{gate1}, open3{gate3};
  ASSERT_TRUE(gate1.WaitHeld(1));
  ASSERT_TRUE(gate3.WaitHeld(1));
  // B: right before its take-over (the write of the step document), A's chunk 1 commits.
  auto hook = std::make_shared<HookStore>(rig.mem);
  std::atomic<bool> raced{false};
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.is_write() && c.key.collection == kState && c.key.id == StepId() &&
        !raced.exchange(true)) {
      gate1.Open();
      std::unique_lock<std::mutex> lock(mu);
      EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return chunk1_committed; }));
    }
    return std::nullopt;
  };
  auto b_db = rig.Db(hook);
  auto b = RunExec(*b_db, Mode::kConcurrent);
  ASSERT_TRUE(raced.load());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(b->status.ok()) << b->status.ToString();
  EXPECT_FALSE(b->already_complete);
  auto bad = Verify(rig, Mode::kConcurrent, &*b);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  auto db = rig.Db();
  auto cd = db->Read(kState, ChunkId(1));
  ASSERT_TRUE(cd.ok() && cd->state == litetx::DocumentState::kFound);
  EXPECT_EQ(cd->doc.at("execution").to_number<std::uint64_t>(), 1u);
  ReleaseAndCheck(rig, Mode::kConcurrent, gate3, a_thread, a_result);
}

// A commit that passed its validation before a take-over still lands after it: the check of
// the step document's version does not lock it. Execution A (three chunks at once) is held
// right before the commit point of chunk 1 (its check already revalidated). B takes over;
// chunk 1's documents are held by A, so B's whole-chunk attempts fail and B writes chunk 1
// item by item. Inside the transaction of item 4, between two of its reads, A's commit lands.
// Item 4 must not be written twice: B's item transaction must see A's chunk and fail, and a
// restart then ends exactly once.
TEST(BatchZombieRace, CommitPastItsValidationLandsAfterTheTakeOver) {
  for (bool parallel : {true, false}) {
    SCOPED_TRACE(parallel ? "parallel" : "classic");
    Rig rig;
    rig.parallel = parallel;
    Gate flip_gate, gate3;
    std::mutex mu;
    std::condition_variable cv;
    bool chunk1_committed = false;
    std::string txn1;
    auto a_hook = std::make_shared<HookStore>(rig.mem);
    a_hook->after = [&](const Call& c, const Status& result) -> std::optional<Status> {
      if (result.ok() && c.op == Op::kCreate && c.key.collection == kState &&
          c.key.id == ChunkId(1)) {
        auto m = litetx::engine::DecodeMeta(*c.value);
        if (m.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          txn1 = m->txn;
        }
      }
      return std::nullopt;
    };
    std::atomic<bool> flip_held{false};
    a_hook->before = [&](const Call& c) -> std::optional<Status> {
      if (!c.is_commit_point()) return std::nullopt;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (txn1.empty() || c.key.id != txn1) return std::nullopt;
      }
      if (!flip_held.exchange(true)) flip_gate.Hold();
      return std::nullopt;
    };
    auto ex = std::make_shared<Exec>();
    std::atomic<bool> held3{false};
    ex->on_write = [&](const std::vector<lb::Output>& outs) {
      if (ChunkOf(*outs.front().item) == 3 && !held3.exchange(true)) gate3.Hold();
    };
    lb::StepOptions o = StepOpts(Mode::kConcurrent);
    o.listener.after_chunk = [&](std::uint64_t k, const lb::Counts&) {
      if (k != 1) return;
      std::lock_guard<std::mutex> lock(mu);
      chunk1_committed = true;
      cv.notify_all();
    };
    litetx::Result<lb::StepReport> a_result = Status::Aborted("A did not run");
    auto a_db = rig.Db(a_hook);
    Async a_thread([&] { a_result = RunExec(*a_db, Mode::kConcurrent, ex, &o); });
    OpenOnExit open_flip{flip_gate}, open3{gate3};
    ASSERT_TRUE(flip_gate.WaitHeld(1));
    ASSERT_TRUE(gate3.WaitHeld(1));
    // B: once it writes chunk 1 item by item, A's commit lands inside item 4's transaction,
    // right before B reads item 4's output.
    auto b_hook = std::make_shared<HookStore>(rig.mem);
    std::atomic<bool> scanning{false}, raced{false};
    b_hook->after = [&](const Call& c, const Status& result) -> std::optional<Status> {
      if (result.ok() && c.op == Op::kCreate && c.key.collection == kState &&
          c.key.id == ScanId(1)) {
        scanning = true;
      }
      return std::nullopt;
    };
    b_hook->before = [&](const Call& c) -> std::optional<Status> {
      if (scanning.load() && c.op == Op::kGet && c.key.collection == kOut && c.key.id == "i04" &&
          !raced.exchange(true)) {
        flip_gate.Open();
        std::unique_lock<std::mutex> lock(mu);
        EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return chunk1_committed; }));
      }
      return std::nullopt;
    };
    {
      auto b_db = rig.Db(b_hook);
      auto b = RunExec(*b_db, Mode::kConcurrent);
      ASSERT_TRUE(raced.load()) << "B never wrote chunk 1 item by item";
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(b->status.code(), Code::kFailedPrecondition) << b->status.ToString();
    }
    gate3.Open();
    ASSERT_TRUE(a_thread.Wait(std::chrono::seconds(20)));
    ASSERT_TRUE(a_result.ok());
    EXPECT_FALSE(a_result->status.ok());
    ASSERT_TRUE(rig.Settle().ok());
    auto db = rig.Db();
    auto c = RunExec(*db, Mode::kConcurrent);
    ASSERT_TRUE(c.ok() && c->status.ok()) << (c.ok() ? c->status : c.status()).ToString();
    auto bad = Verify(rig, Mode::kConcurrent, &*c);
    EXPECT_TRUE(bad.empty()) << Join(bad);
    auto cd = db->Read(kState, ChunkId(1));
    ASSERT_TRUE(cd.ok() && cd->state == litetx::DocumentState::kFound);
    EXPECT_EQ(cd->doc.at("execution").to_number<std::uint64_t>(), 1u);  // A's, after the take-over
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchZombie, ::testing::ValuesIn(kModes),
                         [](const ::testing::TestParamInfo<Mode>& i) {
                           return std::string(ModeName(i.param));
                         });

}  // namespace
}  // namespace battack
