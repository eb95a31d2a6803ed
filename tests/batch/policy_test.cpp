// tests/batch/policy_test.cpp — RetryPolicy and SkipPolicy classification, BackoffPolicy
// delays, and the attempts and recovery of batch::Retry and batch::RetryNested.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "batch_util.h"

namespace {

using namespace bt;
using litetx::batch::BackoffPolicy;
using litetx::batch::RetryPolicy;
using litetx::batch::SkipPolicy;
using std::chrono::microseconds;
using std::chrono::milliseconds;

const std::vector<Code> kAllFailures = {
    Code::kConflict,        Code::kDeleted,     Code::kBusy,
    Code::kNotFound,        Code::kAborted,     Code::kUnknown,
    Code::kUnavailable,     Code::kInvalidArgument, Code::kFailedPrecondition,
    Code::kCorruption};

Status Failure(Code c, std::string message = "x") { return Status(c, std::move(message)); }

TEST(BatchPolicyTest, RetryPolicyDefaultCodes) {
  RetryPolicy p;
  for (Code c : kAllFailures) {
    const bool want = c == Code::kConflict || c == Code::kBusy || c == Code::kAborted ||
                      c == Code::kUnavailable;
    EXPECT_EQ(p.Retryable(Failure(c)), want) << litetx::CodeName(c);
  }
  EXPECT_FALSE(p.Retryable(Status::Ok()));
}

TEST(BatchPolicyTest, RetryPolicyCodesAndPredicate) {
  RetryPolicy p;
  p.retryable = {Code::kFailedPrecondition};
  int asked = 0;
  std::vector<Code> asked_about;
  p.also_retryable = [&](const Status& s) {
    ++asked;
    asked_about.push_back(s.code());
    return s.message().rfind("transient:", 0) == 0;
  };
  EXPECT_TRUE(p.Retryable(Failure(Code::kFailedPrecondition)));  // listed: no predicate
  EXPECT_EQ(asked, 0);
  EXPECT_FALSE(p.Retryable(Failure(Code::kConflict)));  // no longer listed; predicate says no
  EXPECT_TRUE(p.Retryable(Failure(Code::kInvalidArgument, "transient: try again")));
  EXPECT_FALSE(p.Retryable(Failure(Code::kInvalidArgument, "permanent")));
  EXPECT_EQ(asked_about, (std::vector<Code>{Code::kConflict, Code::kInvalidArgument,
                                            Code::kInvalidArgument}));
  // kUnknown never: not even listed, nor when the predicate would say yes.
  p.retryable.push_back(Code::kUnknown);
  p.also_retryable = [](const Status&) { return true; };
  EXPECT_FALSE(p.Retryable(Failure(Code::kUnknown, "transient: lost reply")));
  EXPECT_FALSE(p.Retryable(Status::Ok()));
  EXPECT_TRUE(p.Retryable(Failure(Code::kCorruption)));
}

TEST(BatchPolicyTest, SkipPolicyDefaultCodes) {
  SkipPolicy p;
  for (Code c : kAllFailures) {
    const bool want = c == Code::kInvalidArgument || c == Code::kFailedPrecondition ||
                      c == Code::kNotFound || c == Code::kDeleted;
    EXPECT_EQ(p.Skippable(Failure(c)), want) << litetx::CodeName(c);
  }
  EXPECT_FALSE(p.Skippable(Status::Ok()));
  EXPECT_EQ(p.skip_limit, 0u);
}

TEST(BatchPolicyTest, SkipPolicyCodesAndPredicate) {
  SkipPolicy p;
  p.skippable = {};
  p.also_skippable = [](const Status& s) { return s.message() == "bad row"; };
  EXPECT_FALSE(p.Skippable(Failure(Code::kInvalidArgument)));
  EXPECT_TRUE(p.Skippable(Failure(Code::kConflict, "bad row")));
  EXPECT_FALSE(p.Skippable(Failure(Code::kConflict, "good row")));
  p.skippable = {Code::kUnknown};
  p.also_skippable = [](const Status&) { return true; };
  EXPECT_FALSE(p.Skippable(Failure(Code::kUnknown, "bad row")));
  EXPECT_FALSE(p.Skippable(Status::Ok()));
}

TEST(BatchPolicyTest, BackoffNoneAndFixed) {
  std::mt19937_64 rng(7);
  const BackoffPolicy none = BackoffPolicy::None();
  for (int a = 2; a < 40; ++a) EXPECT_EQ(none.Delay(a, rng), microseconds{0}) << a;
  const BackoffPolicy fixed = BackoffPolicy::Fixed(milliseconds{5});
  for (int a = 2; a < 40; ++a) EXPECT_EQ(fixed.Delay(a, rng), microseconds{5'000}) << a;
  // Fixed with jitter: within [0, 5 ms], spread over it.
  const BackoffPolicy jittered = BackoffPolicy::Fixed(milliseconds{5}, /*jitter=*/true);
  std::int64_t lo = 1'000'000, hi = -1;
  for (int i = 0; i < 2'000; ++i) {
    const auto d = jittered.Delay(2 + i % 5, rng).count();
    ASSERT_GE(d, 0);
    ASSERT_LE(d, 5'000);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_LT(lo, 500);
  EXPECT_GT(hi, 4'500);
  // A zero wait stays zero.
  EXPECT_EQ(BackoffPolicy::Fixed(milliseconds{0}, true).Delay(3, rng), microseconds{0});
}

TEST(BatchPolicyTest, BackoffExponentialWithCap) {
  std::mt19937_64 rng(11);
  const BackoffPolicy e =
      BackoffPolicy::Exponential(milliseconds{10}, milliseconds{100}, 2.0, /*jitter=*/false);
  const std::vector<std::int64_t> want = {10'000, 20'000, 40'000, 80'000, 100'000, 100'000};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(e.Delay(static_cast<int>(i) + 2, rng).count(), want[i]) << "attempt " << i + 2;
  }
  EXPECT_EQ(e.Delay(200, rng).count(), 100'000);  // far past the cap: no overflow
  EXPECT_EQ(e.Delay(1, rng).count(), 10'000);     // before the first retry: the initial wait
  // multiplier 3; below 1 counts as 1 (no shrinking waits).
  const BackoffPolicy three =
      BackoffPolicy::Exponential(milliseconds{1}, milliseconds{1'000}, 3.0, false);
  EXPECT_EQ(three.Delay(4, rng).count(), 9'000);
  const BackoffPolicy half =
      BackoffPolicy::Exponential(milliseconds{8}, milliseconds{1'000}, 0.5, false);
  EXPECT_EQ(half.Delay(6, rng).count(), 8'000);
  // The default policy is exponential with jitter: within [0, the computed wait].
  const BackoffPolicy def;
  EXPECT_EQ(def.kind, BackoffPolicy::Kind::kExponential);
  EXPECT_TRUE(def.jitter);
  for (int a = 2; a < 12; ++a) {
    const std::int64_t cap = std::min<std::int64_t>(10'000LL << (a - 2), 1'000'000);
    std::int64_t hi = -1;
    for (int i = 0; i < 500; ++i) {
      const auto d = def.Delay(a, rng).count();
      ASSERT_GE(d, 0) << a;
      ASSERT_LE(d, cap) << a;
      hi = std::max(hi, d);
    }
    EXPECT_GT(hi, cap / 2) << "attempt " << a << ": the jitter never came near the wait";
  }
}

TEST(BatchPolicyTest, RetryCountsAttempts) {
  const BackoffPolicy none = BackoffPolicy::None();
  {  // Succeeds on the third attempt.
    std::vector<int> seen;
    Status s = litetx::batch::Retry(Attempts(5), none, [&](int a) {
      seen.push_back(a);
      return a < 3 ? Status::Unavailable("down") : Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  }
  {  // A failure the policy does not retry ends it at once, returned as is.
    int calls = 0, recovers = 0;
    Status s = litetx::batch::Retry(
        Attempts(5), none,
        [&](int) {
          ++calls;
          return Status::InvalidArgument("bad request");
        },
        [&](const Status&) {
          ++recovers;
          return Status::Ok();
        });
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_EQ(s.message(), "bad request");
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(recovers, 0);
  }
  {  // Always failing: max_attempts calls, the last status returned.
    std::vector<int> seen;
    Status s = litetx::batch::Retry(Attempts(4), none, [&](int a) {
      seen.push_back(a);
      return Status::Busy("busy " + std::to_string(a));
    });
    EXPECT_EQ(s.code(), Code::kBusy);
    EXPECT_EQ(s.message(), "busy 4");
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4}));
  }
  {  // Used up: the recoverer gets the last failure, and its status is returned.
    int calls = 0;
    std::vector<std::string> recovered;
    Status s = litetx::batch::Retry(
        Attempts(3), none,
        [&](int a) {
          ++calls;
          return Status::Conflict("c" + std::to_string(a));
        },
        [&](const Status& last) {
          recovered.push_back(last.message());
          return Status::FailedPrecondition("recovered badly");
        });
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(recovered, (std::vector<std::string>{"c3"}));
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  }
  {  // max_attempts below 1 acts as 1.
    for (int m : {0, -3}) {
      int calls = 0;
      Status s = litetx::batch::Retry(Attempts(m), none, [&](int) {
        ++calls;
        return Status::Unavailable("down");
      });
      EXPECT_EQ(s.code(), Code::kUnavailable);
      EXPECT_EQ(calls, 1) << m;
    }
  }
  {  // A custom policy: only the predicate's failures are retried.
    RetryPolicy p = Attempts(3);
    p.retryable.clear();
    p.also_retryable = [](const Status& s) { return s.message() == "again"; };
    int calls = 0;
    Status s = litetx::batch::Retry(p, none, [&](int) {
      ++calls;
      return Status::Unavailable("down");
    });
    EXPECT_EQ(calls, 1);
    calls = 0;
    s = litetx::batch::Retry(p, none, [&](int a) {
      ++calls;
      return a < 3 ? Status::FailedPrecondition("again") : Status::Ok();
    });
    EXPECT_TRUE(s.ok());
    EXPECT_EQ(calls, 3);
  }
}

TEST(BatchPolicyTest, RetryWaitsPerBackoff) {
  // Two retries with a fixed 20 ms wait: at least 40 ms pass (the real clock: Retry sleeps).
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  Status s = litetx::batch::Retry(Attempts(3), BackoffPolicy::Fixed(milliseconds{20}), [&](int) {
    ++calls;
    return Status::Unavailable("down");
  });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_GE(took, milliseconds{40});
}

TEST(BatchPolicyTest, RetryNestedUndoesFailedAttemptsAndRecovers) {
  ltxtest::World w;
  auto db = Db(w, w.mem);
  ltxtest::MustCommit(*db, litetx::Transaction().Insert("c", "n", {{"n", 0}}));
  const BackoffPolicy none = BackoffPolicy::None();
  {  // Two failed attempts, the third succeeds: only its writes commit.
    std::vector<int> seen;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      seen.clear();
      if (Status s = tx.Insert("c", "outer", {{"v", 1}}); !s.ok()) return s;
      return litetx::batch::RetryNested(tx, Attempts(5), none, [&](TxnContext& t, int a) {
        seen.push_back(a);
        if (Status s = t.Adjust("c", "n", {{"n", 1}}); !s.ok()) return s;
        if (Status s = t.Insert("c", "a" + std::to_string(a), {{"a", a}}); !s.ok()) return s;
        // The attempt sees its own writes, not those of the undone attempts.
        auto n = t.Get("c", "n");
        if (!n.ok()) return n.status();
        if (n->doc.at("n") != 1) return Status::Corruption("saw an undone attempt's adjust");
        return a < 3 ? Status::Unavailable("flaky") : Status::Ok();
      });
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(Committed(*db, "c", "n")->at("n"), 1);
    EXPECT_FALSE(Committed(*db, "c", "a1").has_value());
    EXPECT_FALSE(Committed(*db, "c", "a2").has_value());
    EXPECT_TRUE(Committed(*db, "c", "a3").has_value());
    EXPECT_TRUE(Committed(*db, "c", "outer").has_value());
  }
  {  // Attempts used up: the recoverer's writes commit, none of the attempts'.
    int calls = 0;
    std::string last_seen;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      return litetx::batch::RetryNested(
          tx, Attempts(2), none,
          [&](TxnContext& t, int a) {
            ++calls;
            if (Status s = t.Insert("c", "b" + std::to_string(a), {{"a", a}}); !s.ok()) return s;
            return Status::Busy("busy " + std::to_string(a));
          },
          [&](TxnContext& t, const Status& last) {
            last_seen = last.message();
            return t.Insert("c", "dead", {{"why", last.message()}});
          });
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(last_seen, "busy 2");
    EXPECT_FALSE(Committed(*db, "c", "b1").has_value());
    EXPECT_FALSE(Committed(*db, "c", "b2").has_value());
    EXPECT_EQ(Committed(*db, "c", "dead")->at("why"), "busy 2");
  }
  {  // A failing recoverer: its writes are undone too, its status returned; the caller may
     // still commit the rest.
    Status inner;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      inner = litetx::batch::RetryNested(
          tx, Attempts(2), none,
          [&](TxnContext& t, int a) {
            if (Status s = t.Insert("c", "d" + std::to_string(a), {{"a", a}}); !s.ok()) return s;
            return Status::Unavailable("down");
          },
          [&](TxnContext& t, const Status&) {
            if (Status s = t.Insert("c", "dead2", {{"x", 1}}); !s.ok()) return s;
            return Status::FailedPrecondition("no dead-letter queue");
          });
      return tx.Insert("c", "after", {{"x", 1}});
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(inner.code(), Code::kFailedPrecondition);
    EXPECT_FALSE(Committed(*db, "c", "dead2").has_value());
    EXPECT_FALSE(Committed(*db, "c", "d1").has_value());
    EXPECT_FALSE(Committed(*db, "c", "d2").has_value());
    EXPECT_TRUE(Committed(*db, "c", "after").has_value());
  }
  {  // A failure that is not retried: one attempt, undone, returned.
    int calls = 0;
    Status inner;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      inner = litetx::batch::RetryNested(tx, Attempts(5), none, [&](TxnContext& t, int) {
        ++calls;
        if (Status s = t.Insert("c", "e", {{"x", 1}}); !s.ok()) return s;
        return Status::InvalidArgument("bad");
      });
      return tx.Insert("c", "after2", {{"x", 1}});
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(inner.code(), Code::kInvalidArgument);
    EXPECT_FALSE(Committed(*db, "c", "e").has_value());
  }
}

}  // namespace
