// tests/ergonomics_test.cpp — the conveniences around the engine: Result's operator bool,
// value_or and the exception its value() throws on an error; the default logger (stderr at
// warn level when the options name none, silenced by a logger of one's own); and an exception
// thrown by a Run callback or hook, which propagates after the attempt rolled back.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::BadResultAccess;
using litetx::DocumentState;
using litetx::LockMode;
using litetx::Result;
using litetx::RunOptions;
using litetx::Transaction;
using litetx::TxnContext;

// ---------------------------------------------------------------------------------------------
// Result

static_assert(std::is_constructible_v<bool, Result<int>>, "Result has operator bool");
static_assert(!std::is_convertible_v<Result<int>, bool>, "operator bool is explicit");

TEST(ResultTest, OperatorBoolIsOk) {
  Result<int> good = 5;
  Result<int> bad = Status::NotFound("alice");
  EXPECT_TRUE(static_cast<bool>(good));
  EXPECT_FALSE(static_cast<bool>(bad));
  if (!good) ADD_FAILURE() << "a value reads as false";
  if (bad) ADD_FAILURE() << "an error reads as true";
  // For Result<bool> it is ok(), not the value held.
  Result<bool> holds_false = false;
  EXPECT_TRUE(static_cast<bool>(holds_false));
  EXPECT_FALSE(*holds_false);
}

TEST(ResultTest, ValueOrGivesTheValueOrTheFallback) {
  Result<int> good = 5;
  Result<int> bad = Status::Conflict("x");
  EXPECT_EQ(good.value_or(7), 5);
  EXPECT_EQ(bad.value_or(7), 7);
  const Result<std::string> cgood = std::string("held");
  const Result<std::string> cbad = Status::Busy("x");
  EXPECT_EQ(cgood.value_or("fallback"), "held");
  EXPECT_EQ(cbad.value_or("fallback"), "fallback");
  Result<std::string> moved = std::string(100, 'a');
  EXPECT_EQ(std::move(moved).value_or("fallback"), std::string(100, 'a'));
  EXPECT_EQ(Result<std::string>(Status::Unavailable("x")).value_or("fallback"), "fallback");
}

// Like std::optional::value_or, the fallback must convert implicitly: an explicit constructor
// (a vector of 5 elements, 7 seconds from a bare 7) is not a fallback.
template <typename T, typename U>
concept HasValueOr = requires(const Result<T>& r, U u) { r.value_or(u); };
static_assert(HasValueOr<int, int>);
static_assert(HasValueOr<std::string, const char*>);
static_assert(HasValueOr<std::chrono::milliseconds, std::chrono::seconds>);
static_assert(!HasValueOr<std::vector<int>, int>);
static_assert(!HasValueOr<std::chrono::seconds, int>);
static_assert(!HasValueOr<std::string, int>);

// Calls `access` and returns the BadResultAccess it throws (a test failure if it throws
// anything else, or nothing).
template <typename F>
std::optional<BadResultAccess> Thrown(F access) {
  try {
    access();
  } catch (const BadResultAccess& e) {
    return e;
  } catch (const std::bad_variant_access& e) {
    ADD_FAILURE() << "std::bad_variant_access: " << e.what();
    return std::nullopt;
  } catch (...) {
    ADD_FAILURE() << "another exception";
    return std::nullopt;
  }
  ADD_FAILURE() << "nothing thrown";
  return std::nullopt;
}

TEST(ResultTest, ValueOfAnErrorThrowsBadResultAccessNamingTheStatus) {
  World w;
  auto db = w.Direct();
  auto r = db->Read("__litetx_mine", "alice");  // a reserved collection name
  ASSERT_EQ(r.code(), Code::kInvalidArgument);
  const std::string expected = "litetx::Result::value() called on error: " + r.status().ToString();
  const auto& cr = r;
  std::vector<std::optional<BadResultAccess>> thrown = {
      Thrown([&] { (void)r.value(); }),
      Thrown([&] { (void)cr.value(); }),
      Thrown([&] { (void)std::move(r).value(); }),
      Thrown([&] { (void)*r; }),
      Thrown([&] { (void)*cr; }),
      Thrown([&] { (void)r->doc; }),
      Thrown([&] { (void)cr->state; }),
  };
  for (std::size_t i = 0; i < thrown.size(); ++i) {
    ASSERT_TRUE(thrown[i].has_value()) << "access " << i;
    EXPECT_EQ(std::string(thrown[i]->what()), expected) << "access " << i;
    EXPECT_EQ(thrown[i]->status().code(), Code::kInvalidArgument);
    EXPECT_EQ(thrown[i]->status().message(), r.status().message());
  }
  EXPECT_NE(expected.find("invalid_argument: "), std::string::npos) << expected;
  EXPECT_THROW((void)r.value(), std::logic_error);  // catchable as a logic error
  // A value is read without any of this.
  Result<int> good = 3;
  EXPECT_EQ(good.value(), 3);
  EXPECT_EQ(*good, 3);
}

// ---------------------------------------------------------------------------------------------
// Default logger

// A store over `w.mem` that lets the first write of c/x land and fails every later one, so
// that a lock taken on c/x can never be released: the run logs a warning about it.
std::shared_ptr<litetx::FaultInjectingStore> UnreleasableLock(const World& w) {
  litetx::FaultOptions fo;
  fo.clock = w.clock;
  auto locked = std::make_shared<std::atomic<bool>>(false);
  fo.rule = [=](litetx::StoreOp op, const Key& key, std::uint64_t) {
    if (key != Key{"c", "x"} || op != litetx::StoreOp::kReplace) return litetx::Fault::kNone;
    return locked->exchange(true) ? litetx::Fault::kTransient : litetx::Fault::kNone;
  };
  return std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
}

// Runs a transaction that is re-run once (a debug message) and then takes a lock on c/x that
// `db` cannot release (a warning). Returns what it printed on stderr; `out` gets stdout.
std::string RunLeavingALock(litetx::Database& db, std::string* out) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  RunOptions o;
  o.max_attempts = 2;
  auto r = db.Run([&](TxnContext& tx) -> Status {
    if (tx.attempt() == 1) return Status::Busy("once more");
    if (Status s = tx.Lock("c", "x", LockMode::kWrite); !s.ok()) return s;
    return Status::FailedPrecondition("changed my mind");
  }, o);
  std::string err = testing::internal::GetCapturedStderr();
  *out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(r.code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "changed my mind");
  return err;
}

class DefaultLoggerTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    MustCommit(*Direct(), Transaction().Insert("c", "x", {{"n", 1}}));
    default_level = spdlog::default_logger()->level();
  }
  void TearDown() override {
    // The engine's logger is not registered with spdlog and left spdlog's default alone.
    EXPECT_EQ(spdlog::get("litetx"), nullptr);
    EXPECT_EQ(spdlog::default_logger()->level(), default_level);
  }
  spdlog::level::level_enum default_level{};
};

TEST_F(DefaultLoggerTest, DatabaseWithoutALoggerWarnsOnStderrAtWarnLevel) {
  litetx::Options o = Opts();
  o.logger = nullptr;  // the default
  litetx::Database db(UnreleasableLock(*this), o);
  std::string out;
  const std::string err = RunLeavingALock(db, &out);
  std::printf("stderr of a run leaving a lock: %s", err.c_str());
  EXPECT_NE(err.find("could not release its lock on c/x"), std::string::npos) << err;
  EXPECT_NE(err.find("[litetx]"), std::string::npos) << err;
  EXPECT_NE(err.find("warn"), std::string::npos) << err;
  // The debug message of the re-run is below warn level.
  EXPECT_EQ(err.find("running again"), std::string::npos) << err;
  EXPECT_EQ(out.find("could not release"), std::string::npos) << "on stdout: " << out;
}

TEST_F(DefaultLoggerTest, ALoggerThatDropsEverythingSilencesIt) {
  litetx::Options o = Opts();
  o.logger = std::make_shared<spdlog::logger>("mine",
                                              std::make_shared<spdlog::sinks::null_sink_mt>());
  litetx::Database db(UnreleasableLock(*this), o);
  std::string out;
  EXPECT_EQ(RunLeavingALock(db, &out), "");
  EXPECT_EQ(out, "");
}

TEST_F(DefaultLoggerTest, CollectorWithoutALoggerWarnsOnStderr) {
  litetx::FaultOptions fo;
  fo.rule = [](litetx::StoreOp op, const Key&, std::uint64_t) {
    return op == litetx::StoreOp::kScan ? litetx::Fault::kTransient : litetx::Fault::kNone;
  };
  litetx::CollectorOptions co;
  co.engine = Opts();
  co.engine.logger = nullptr;  // the default
  co.name = "gc-test";
  litetx::Collector gc(std::make_shared<litetx::FaultInjectingStore>(mem, fo), co);
  testing::internal::CaptureStderr();
  Status s = gc.RunOnce();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(err.find("gc gc-test: cannot list transactions"), std::string::npos) << err;
  EXPECT_NE(err.find("[litetx]"), std::string::npos) << err;
}

// ---------------------------------------------------------------------------------------------
// Exceptions thrown by a Run callback or its hooks

class RunExceptionTest : public ::testing::TestWithParam<bool>, public World {
 protected:
  void SetUp() override {
    litetx::Options o = Opts();
    o.renew_leases = GetParam();  // the lock is also registered for background renewal
    db = std::make_unique<litetx::Database>(mem, o);
    other = Direct();
    MustCommit(*other, Transaction().Insert("c", "x", {{"n", 1}}).Insert("c", "y", {{"n", 2}}));
    x_before = *Raw(*mem, "c", "x");
    y_before = *Raw(*mem, "c", "y");
  }

  // A callback that locks c/x, reads and writes c/x, c/y and a new c/z, then returns OK.
  Status Work(TxnContext& tx) {
    ++calls;
    if (Status s = tx.Lock("c", "x", LockMode::kWrite); !s.ok()) return s;
    EXPECT_EQ(MetaOf(*mem, "c", "x").locks.size(), 1u) << "the lock is stored";
    if (Status s = tx.Adjust("c", "x", {{"n", 10}}); !s.ok()) return s;
    if (Status s = tx.Update("c", "y", {{"m", "new"}}); !s.ok()) return s;
    if (Status s = tx.Insert("c", "z", {{"k", true}}); !s.ok()) return s;
    EXPECT_EQ(tx.Get("c", "x")->doc, Obj(R"({"n":11})"));
    return Status::Ok();
  }

  RunOptions Counted() {
    RunOptions o;
    o.hooks.after_commit = [this](const litetx::CommitInfo&) { ++committed; };
    o.hooks.after_rollback = [this](const Status&) { ++rolled_back; };
    return o;
  }

  // Nothing the run staged is in the store, no record is left, the lock is gone, and another
  // writer gets c/x at once.
  void ExpectNothingWritten() {
    EXPECT_EQ(MetaOf(*mem, "c", "x").locks.size(), 0u) << "the lock was left behind";
    EXPECT_EQ(BodyOf(*mem, Key{"c", "x"}), Obj(R"({"n":1})"));
    EXPECT_EQ(MetaOf(*mem, "c", "x").version, litetx::engine::DecodeMeta(x_before)->version);
    EXPECT_EQ(*Raw(*mem, "c", "y"), y_before);
    EXPECT_FALSE(Raw(*mem, "c", "z").has_value());
    ExpectClean(*mem, {"c"});
    const auto t0 = clock->NowMillis();
    auto r = other->Commit(Transaction().Adjust("c", "x", {{"n", 1}}));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(clock->NowMillis(), t0) << "the other writer waited for the lock";
  }

  std::unique_ptr<litetx::Database> db, other;
  json::object x_before, y_before;
  int calls = 0, committed = 0, rolled_back = 0;
};

TEST_P(RunExceptionTest, CallbackExceptionPropagatesAfterARollback) {
  try {
    (void)db->Run([&](TxnContext& tx) -> Status {
      EXPECT_TRUE(Work(tx).ok());
      throw std::runtime_error("callback failed");
    }, Counted());
    ADD_FAILURE() << "Run returned";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "callback failed");
  }
  EXPECT_EQ(calls, 1) << "not re-run";
  EXPECT_EQ(committed, 0);
  EXPECT_EQ(rolled_back, 0) << "after_rollback is not called for an exception";
  ExpectNothingWritten();
}

TEST_P(RunExceptionTest, BeforeCommitExceptionPropagatesAfterARollback) {
  RunOptions o = Counted();
  o.hooks.before_commit = [](TxnContext&) -> Status { throw std::out_of_range("hook failed"); };
  EXPECT_THROW((void)db->Run([&](TxnContext& tx) { return Work(tx); }, o), std::out_of_range);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(committed, 0);
  EXPECT_EQ(rolled_back, 0);
  ExpectNothingWritten();
}

TEST_P(RunExceptionTest, AfterCommitExceptionPropagatesWithTheTransactionCommitted) {
  RunOptions o;
  o.hooks.after_commit = [](const litetx::CommitInfo&) { throw std::length_error("late"); };
  EXPECT_THROW((void)db->Run([&](TxnContext& tx) { return Work(tx); }, o), std::length_error);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(MetaOf(*mem, "c", "x").locks.size(), 0u);
  EXPECT_EQ(BodyOf(*mem, Key{"c", "x"}), Obj(R"({"n":11})"));
  EXPECT_EQ(BodyOf(*mem, Key{"c", "y"}), Obj(R"({"n":2,"m":"new"})"));
  EXPECT_EQ(BodyOf(*mem, Key{"c", "z"}), Obj(R"({"k":true})"));
  ExpectClean(*mem, {"c"});
}

INSTANTIATE_TEST_SUITE_P(Renewal, RunExceptionTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Renewed" : "NotRenewed"; });

}  // namespace
}  // namespace ltxtest
