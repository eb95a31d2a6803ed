// tests/clock_test.cpp — durations are measured on monotonic time: a step of the wall clock
// (backwards or forwards) during a busy wait, a Run or a retry loop neither stretches nor
// shrinks Options::busy_timeout, RunOptions::timeout or a retry timeout. Wall time still moves
// what other processes compare (leases), which the ManualClock's StepWall shows.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "engine/env.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::RunOptions;
using litetx::Transaction;
using litetx::TxnContext;

constexpr auto kHour = std::chrono::microseconds(std::chrono::hours(1));

TEST(ManualClockTest, StepWallMovesWallTimeOnly) {
  litetx::ManualClock clock(1'000);
  EXPECT_EQ(clock.NowMillis(), 1'000);
  EXPECT_EQ(clock.MonotonicMicros(), 1'000'000);
  clock.StepWall(-500ms);
  EXPECT_EQ(clock.NowMillis(), 500);
  EXPECT_EQ(clock.MonotonicMicros(), 1'000'000);
  clock.SleepFor(20ms);
  clock.Advance(10ms);
  EXPECT_EQ(clock.NowMillis(), 530);
  EXPECT_EQ(clock.MonotonicMicros(), 1'030'000);
}

TEST(SystemClockTest, MonotonicTimeMovesWithSleeps) {
  auto clock = litetx::SystemClock();
  const std::int64_t m0 = clock->MonotonicMicros();
  const std::int64_t w0 = clock->NowMillis();
  clock->SleepFor(2ms);
  EXPECT_GE(clock->MonotonicMicros() - m0, 2'000);
  EXPECT_GT(w0, 1'600'000'000'000);  // the Unix epoch, in ms
}

class MonotonicWaitTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    db = Direct();
    MustCommit(*db, Transaction().Insert("c", "x", {{"n", 1}}).Insert("c", "y", {{"n", 1}}));
    // A live transaction (within its lease) holds c/x: its coordinator stopped after the apply.
    auto hook = std::make_shared<HookStore>(mem);
    int writes = 0;
    hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
      if (c.is_write() && s.ok() && ++writes == 2) throw std::runtime_error("coordinator stops");
      return std::nullopt;
    };
    litetx::Database holder(hook, Opts());
    EXPECT_THROW((void)holder.Commit(
                     Transaction().Update("c", "x", {{"n", 7}}).Update("c", "y", {{"n", 7}})),
                 std::runtime_error);
    ASSERT_FALSE(MetaOf(*mem, "c", "x").txn.empty());
  }

  // Commits an adjust of c/x through a store that steps the wall clock by `step` at the
  // waiter's second look at c/x (in the middle of its busy wait). Returns the status and the
  // monotonic time the commit took, in ms.
  std::pair<Code, std::int64_t> WaitWithWallStep(std::chrono::microseconds step) {
    auto hook = std::make_shared<HookStore>(mem);
    hook->before = [&, step](const Call& c) -> std::optional<Status> {
      if (c.op == Op::kGet && c.key == Key{"c", "x"} && c.nth == 2) clock->StepWall(step);
      return std::nullopt;
    };
    litetx::Database waiter(hook, Opts());
    const std::int64_t m0 = clock->MonotonicMicros();
    auto r = waiter.Commit(Transaction().Adjust("c", "x", {{"n", 1}}));
    return {r.code(), (clock->MonotonicMicros() - m0) / 1000};
  }

  std::unique_ptr<litetx::Database> db;
};

TEST_F(MonotonicWaitTest, WallStepBackDoesNotStretchABusyWait) {
  const auto busy = Opts().busy_timeout.count();
  const auto max_step = Opts().busy_backoff.max.count();
  auto [code, waited_ms] = WaitWithWallStep(-kHour);
  EXPECT_EQ(code, Code::kBusy);
  EXPECT_GE(waited_ms, busy);
  EXPECT_LE(waited_ms, busy + max_step) << "the wait followed the wall clock back";
}

TEST_F(MonotonicWaitTest, WallStepForwardDoesNotShrinkABusyWait) {
  // Forward by less than the holder's lease: the holder is still live.
  const auto busy = Opts().busy_timeout.count();
  const auto max_step = Opts().busy_backoff.max.count();
  auto [code, waited_ms] = WaitWithWallStep(std::chrono::seconds(10));
  EXPECT_EQ(code, Code::kBusy);
  EXPECT_GE(waited_ms, busy) << "the wait ended early because the wall clock jumped";
  EXPECT_LE(waited_ms, busy + max_step);
}

TEST_F(MonotonicWaitTest, WallStepPastTheLeaseStillSettlesTheHolder) {
  // Leases are wall time, compared across processes: a holder whose GC timestamp the wall
  // clock has passed is rolled back on the spot, whatever monotonic time did.
  auto [code, waited_ms] = WaitWithWallStep(std::chrono::microseconds(Opts().lease) + 1s);
  EXPECT_EQ(code, Code::kOk);
  EXPECT_LT(waited_ms, Opts().busy_timeout.count());
  EXPECT_EQ(ReadImage(*db, "c", "x").doc, Obj(R"({"n":2})"));
}

TEST(MonotonicRunTest, RunTimeoutIgnoresWallSteps) {
  for (auto step : {-kHour, kHour}) {
    SCOPED_TRACE(step.count());
    World w;
    auto db = w.Direct();
    RunOptions o;
    o.timeout = 200ms;
    int runs = 0;
    auto r = db->Run([&](TxnContext&) -> Status {
      if (++runs == 1) w.clock->StepWall(step);
      w.clock->Advance(60ms);
      return Status::Busy("always");
    }, o);
    EXPECT_EQ(r.code(), Code::kBusy);
    EXPECT_GE(runs, 2) << "the run ended early because the wall clock jumped";
    EXPECT_LE(runs, 4) << "the run followed the wall clock back";
  }
}

TEST(MonotonicRetryTest, RetryTimeoutIgnoresWallSteps) {
  for (auto step : {-kHour, kHour}) {
    SCOPED_TRACE(step.count());
    World w;
    litetx::Options opts = w.Opts();  // retry_backoff: 100 ms doubling
    spdlog::logger quiet("t", std::make_shared<spdlog::sinks::null_sink_mt>());
    litetx::engine::Env env{*w.mem, opts, *w.clock, quiet};
    litetx::engine::Retry retry(env, /*max_attempts=*/0, /*timeout=*/1000ms);
    int waits = 0;
    while (retry.Next()) {
      if (++waits == 1) w.clock->StepWall(step);
      ASSERT_LT(waits, 100) << "the retry followed the wall clock back";
    }
    // Waits of 100, 200, 400, 800 ms: the fourth starts at 700 ms, under the timeout.
    EXPECT_EQ(waits, 4);
  }
}

}  // namespace
}  // namespace ltxtest
