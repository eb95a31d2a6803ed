// tests/batch/step_test.cpp — RunStep: options validation, counts over restarts, the skip
// limit, item-by-item isolation of a failing write, completion, takeover by a second
// execution, listeners, exceptions, commits whose reply was lost, and ReadStepStatus.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "batch_util.h"

namespace {

using namespace bt;
using litetx::batch::Counts;
using litetx::batch::Phase;
using litetx::batch::ReadStepStatus;
using litetx::batch::RetryEvent;
using litetx::batch::RunStep;
using litetx::batch::SkipEvent;
using litetx::batch::StepFunctions;
using litetx::batch::StepOptions;
using litetx::batch::StepReport;
using litetx::batch::VectorReader;

struct Rig {
  ltxtest::World w;
  std::unique_ptr<Database> db = Db(w, w.mem);
};

StepFunctions PlainFunctions() {
  StepFunctions fns;
  fns.write = CountingWriter();
  return fns;
}

std::string LastWriter(Database& db, std::string_view c, std::string_view id) {
  auto r = db.Read(c, id);
  EXPECT_TRUE(r.ok() && r->state == litetx::DocumentState::kFound) << c << "/" << id;
  return r.ok() ? r->last_writer : std::string();
}

// The ids of the skip records of a step.
std::set<std::uint64_t> SkipRecords(Database& db, const StepOptions& o) {
  std::set<std::uint64_t> out;
  const std::string prefix = StepId(o) + "/skip/";
  for (const auto& [id, doc] : CommittedAll(db, o.state_collection)) {
    if (id.rfind(prefix, 0) == 0) out.insert(std::stoull(id.substr(prefix.size())));
  }
  return out;
}

// read = written + filtered + process_skips + write_skips + recovered.
void ExpectBalanced(const Counts& c, const std::string& what) {
  EXPECT_EQ(c.read, c.written + c.filtered + c.process_skips + c.write_skips + c.recovered)
      << what << ": " << json::serialize(c.ToJson());
}

void ExpectSameCounts(const Counts& a, const Counts& b, const std::string& what) {
  EXPECT_EQ(json::serialize(a.ToJson()), json::serialize(b.ToJson())) << what;
}

TEST(BatchStepTest, InvalidOptionsAreRefusedBeforeAnythingRuns) {
  Rig rig;
  struct Case {
    std::string what;
    std::function<void(StepOptions&, StepFunctions&)> change;
  };
  const std::vector<Case> cases = {
      {"empty job", [](StepOptions& o, StepFunctions&) { o.job = ""; }},
      {"job with '/'", [](StepOptions& o, StepFunctions&) { o.job = "a/b"; }},
      {"job with a control character", [](StepOptions& o, StepFunctions&) { o.job = "a\x01" "b"; }},
      {"job with DEL", [](StepOptions& o, StepFunctions&) { o.job = "a\x7f"; }},
      {"job of 129 bytes", [](StepOptions& o, StepFunctions&) { o.job = std::string(129, 'j'); }},
      {"job not UTF-8", [](StepOptions& o, StepFunctions&) { o.job = "caf\xe9"; }},
      {"empty step", [](StepOptions& o, StepFunctions&) { o.step = ""; }},
      {"step with '/'", [](StepOptions& o, StepFunctions&) { o.step = "s/t"; }},
      {"step with a newline", [](StepOptions& o, StepFunctions&) { o.step = "s\n"; }},
      {"step of 129 bytes", [](StepOptions& o, StepFunctions&) { o.step = std::string(129, 's'); }},
      {"empty state collection", [](StepOptions& o, StepFunctions&) { o.state_collection = ""; }},
      {"reserved state collection",
       [](StepOptions& o, StepFunctions&) { o.state_collection = "__litetx_batch"; }},
      {"no write", [](StepOptions&, StepFunctions& f) { f.write = nullptr; }},
      {"commit_interval 0", [](StepOptions& o, StepFunctions&) { o.commit_interval = 0; }},
      {"concurrency 0", [](StepOptions& o, StepFunctions&) { o.concurrency = 0; }},
      {"concurrency 1025", [](StepOptions& o, StepFunctions&) { o.concurrency = 1025; }},
      {"retry.max_attempts 0", [](StepOptions& o, StepFunctions&) { o.retry.max_attempts = 0; }},
      {"retry.max_attempts -1", [](StepOptions& o, StepFunctions&) { o.retry.max_attempts = -1; }},
  };
  for (const Case& c : cases) {
    StepOptions o = Opts("valid", 5);
    StepFunctions f = PlainFunctions();
    c.change(o, f);
    ScriptedReader reader(Items(3));
    auto rep = RunStep(*rig.db, reader, f, o);
    EXPECT_EQ(rep.code(), Code::kInvalidArgument) << c.what;
    EXPECT_EQ(reader.reads + reader.restores, 0) << c.what;
  }
  // Nothing was written anywhere.
  EXPECT_TRUE(ltxtest::ScanAll(*rig.w.mem, "litetx_batch").empty());
  EXPECT_TRUE(ltxtest::ScanAll(*rig.w.mem, litetx::kTransactionsCollection).empty());
  EXPECT_TRUE(ltxtest::ScanAll(*rig.w.mem, "out").empty());
  // The limits themselves are valid.
  StepOptions o = Opts(std::string(128, 'j'), 5);
  o.step = std::string(128, 's');
  o.retry.max_attempts = 1;
  VectorReader reader(Items(3));
  auto rep = RunStep(*rig.db, reader, PlainFunctions(), o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->status.ok()) << rep->status.ToString();
  // ReadStepStatus checks the names too, and says kNotFound for a step that never ran.
  StepOptions bad = Opts("a/b", 5);
  EXPECT_EQ(ReadStepStatus(*rig.db, bad).code(), Code::kInvalidArgument);
  bad = Opts("never-ran", 5);
  EXPECT_EQ(ReadStepStatus(*rig.db, bad).code(), Code::kNotFound);
}

// Every kind of outcome in one step, over two executions (the first ends with an exception):
// the counts balance, each execution's committed counts add up to the totals, the stored
// totals equal the report's, and there is a skip record for each skip and recovery.
TEST(BatchStepTest, CountsBalanceOverRestarts) {
  Rig rig;
  constexpr std::uint64_t kItems = 40;
  // Positions 3 and 17 are unreadable; 4, 14, 24, 34 are filtered out; 22 fails processing
  // and its recovery fails (skipped); 27 fails processing every time, retryably (recovered);
  // 33 fails in the write and its recovery fails too (skipped in the write phase); 31 throws,
  // on the first run only.
  const std::set<std::uint64_t> unreadable = {3, 17};
  bool throw_at_31 = true;
  StepOptions o = Opts("counts", 5);
  o.retry.max_attempts = 2;
  o.skip.skip_limit = 10;
  StepFunctions fns;
  fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
    const std::uint64_t i = IndexOf(item.value);
    if (i % 10 == 4) return std::optional<json::value>{};
    if (i == 22) return Status::InvalidArgument("bad item 22");
    if (i == 27) return Status::Conflict("item 27 always loses");
    if (i == 31 && throw_at_31) throw std::runtime_error("processor crashed at 31");
    return std::optional<json::value>(item.value);
  };
  auto counting = CountingWriter();
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    for (const Output& out : outs) {
      if (IndexOf(out.value) == 33) return Status::InvalidArgument("item 33 does not fit");
    }
    return counting(tx, outs);
  };
  fns.recover = [&](TxnContext& tx, const Item& item, const Status&) -> Status {
    const std::uint64_t i = IndexOf(item.value);
    if (i == 22 || i == 33) return Status::FailedPrecondition("cannot recover " + item.key);
    return tx.Insert("dead", item.key, item.value.as_object());
  };

  ScriptedReader first(Items(kItems), unreadable);
  EXPECT_THROW((void)RunStep(*rig.db, first, fns, o), std::runtime_error);
  auto st = ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "running");  // an exception records nothing
  EXPECT_EQ(st->chunks, 6u);         // positions 0..29
  const Counts after_first = st->total;
  ExpectBalanced(after_first, "after the first execution");
  EXPECT_EQ(after_first.read + after_first.read_skips, 30u);

  throw_at_31 = false;
  ScriptedReader second(Items(kItems), unreadable);
  auto rep = RunStep(*rig.db, second, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(rep->execution, 2u);
  EXPECT_EQ(second.first_restored, std::optional<std::uint64_t>(30));
  const Counts& t = rep->total;
  EXPECT_EQ(t.read, kItems - 2);
  EXPECT_EQ(t.read_skips, 2u);
  EXPECT_EQ(t.filtered, 4u);
  EXPECT_EQ(t.process_skips, 1u);
  EXPECT_EQ(t.recovered, 1u);
  EXPECT_EQ(t.write_skips, 1u);
  EXPECT_EQ(t.written, kItems - 2 - 4 - 1 - 1 - 1);
  ExpectBalanced(t, "total");
  ExpectBalanced(rep->this_run, "second execution");
  // What each execution committed adds up to the totals.
  EXPECT_EQ(after_first.read + rep->this_run.read, t.read);
  EXPECT_EQ(after_first.written + rep->this_run.written, t.written);
  EXPECT_EQ(after_first.skips() + rep->this_run.skips(), t.skips());
  EXPECT_EQ(after_first.commits + rep->this_run.commits, t.commits);
  // The stored totals are the report's.
  st = ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "completed");
  EXPECT_EQ(st->execution, 2u);
  EXPECT_EQ(st->chunks, rep->chunks);
  EXPECT_EQ(rep->chunks, 8u);
  ExpectSameCounts(st->total, t, "stored totals");
  // The outputs and the skip records.
  ExpectOutputsExactlyOnce(*rig.db, kItems, {3, 17, 4, 14, 24, 34, 22, 27, 33});
  EXPECT_EQ(SkipRecords(*rig.db, o), (std::set<std::uint64_t>{3, 17, 22, 27, 33}));
  const std::map<std::uint64_t, std::pair<std::string, bool>> phases = {
      {3, {"read", false}},     {17, {"read", false}}, {22, {"process", false}},
      {27, {"process", true}}, {33, {"write", false}}};
  for (const auto& [p, want] : phases) {
    auto rec = Committed(*rig.db, "litetx_batch", SkipDocId(o, p));
    ASSERT_TRUE(rec.has_value()) << p;
    EXPECT_EQ(rec->at("phase"), json::value(want.first)) << p;
    EXPECT_EQ(rec->at("recovered"), want.second) << p;
  }
  EXPECT_TRUE(Committed(*rig.db, "dead", Key(27)).has_value());
  EXPECT_FALSE(Committed(*rig.db, "dead", Key(33)).has_value());
  // The skips of both executions are in the reports.
  std::set<std::uint64_t> reported;
  for (const SkipEvent& e : rep->skipped) reported.insert(e.position);
  EXPECT_EQ(reported, (std::set<std::uint64_t>{33}));  // 31..39 ran in the second execution
}

// The skip limit counts every skip of the step, restarts included; one more fails the step and
// rolls back the chunk that would have gone over it.
TEST(BatchStepTest, SkipLimitExceededFailsTheStepAndRollsBackTheChunk) {
  Rig rig;
  StepOptions o = Opts("limit", 5);
  o.skip.skip_limit = 2;
  std::vector<SkipEvent> notified;
  std::vector<Status> errors;
  o.listener.on_skip = [&](const SkipEvent& e) { notified.push_back(e); };
  o.listener.on_error = [&](const Status& s) { errors.push_back(s); };
  StepFunctions fns = PlainFunctions();
  fns.process = [](TxnContext&, const Item& item) -> ProcessResult {
    const std::uint64_t i = IndexOf(item.value);
    if (i == 1 || i == 6 || i == 8) return Status::InvalidArgument("poison");
    return std::optional<json::value>(item.value);
  };
  VectorReader reader(Items(10));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->status.code(), Code::kFailedPrecondition) << rep->status.ToString();
  EXPECT_NE(rep->status.message().find("skip limit 2 exceeded"), std::string::npos);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), Code::kFailedPrecondition);
  EXPECT_EQ(rep->chunks, 1u);
  EXPECT_EQ(rep->total.process_skips, 1u);
  ExpectOutputsExactlyOnce(*rig.db, 5, {1});  // nothing of chunk 2 (items 5..9)
  EXPECT_EQ(SkipRecords(*rig.db, o), (std::set<std::uint64_t>{1}));
  ASSERT_EQ(notified.size(), 1u);
  EXPECT_EQ(notified[0].position, 1u);
  auto st = ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "failed");
  EXPECT_NE(st->last_error.find("skip limit"), std::string::npos);

  // A restart with the same limit fails at the same chunk: the first run's skip still counts.
  VectorReader again(Items(10));
  rep = RunStep(*rig.db, again, fns, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->status.code(), Code::kFailedPrecondition);
  EXPECT_EQ(rep->chunks, 1u);
  // With room for the three, it completes.
  o.skip.skip_limit = 3;
  VectorReader third(Items(10));
  rep = RunStep(*rig.db, third, fns, o);
  ASSERT_TRUE(rep.ok());
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(rep->total.process_skips, 3u);
  EXPECT_EQ(rep->execution, 3u);
  ExpectOutputsExactlyOnce(*rig.db, 10, {1, 6, 8});
  EXPECT_EQ(SkipRecords(*rig.db, o), (std::set<std::uint64_t>{1, 6, 8}));
}

// A chunk whose write fails with a skippable error is written again item by item: only the
// failing item is skipped, the others are written, each in a transaction of its own.
TEST(BatchStepTest, FailingWriteIsIsolatedItemByItem) {
  Rig rig;
  StepOptions o = Opts("scan", 5);
  o.skip.skip_limit = 5;
  std::vector<std::size_t> write_sizes;
  StepFunctions fns;
  auto counting = CountingWriter();
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    write_sizes.push_back(outs.size());
    for (const Output& out : outs) {
      if (IndexOf(out.value) == 7) return Status::InvalidArgument("item 7 violates a constraint");
    }
    return counting(tx, outs);
  };
  std::vector<SkipEvent> notified;
  o.listener.on_skip = [&](const SkipEvent& e) { notified.push_back(e); };
  VectorReader reader(Items(15));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  // Chunk 1 whole (failed), then its five items one by one, then chunk 2 whole.
  EXPECT_EQ(write_sizes, (std::vector<std::size_t>{5, 5, 1, 1, 1, 1, 1, 5}));
  EXPECT_EQ(rep->total.write_skips, 1u);
  EXPECT_EQ(rep->total.written, 14u);
  EXPECT_EQ(rep->total.commits, 1u + 5u + 1u + 1u);  // chunk 0, 5 items and chunk 1's close, chunk 2
  EXPECT_EQ(rep->total.rollbacks, 2u);  // chunk 1 whole, then item 7 alone
  ExpectBalanced(rep->total, "total");
  ExpectOutputsExactlyOnce(*rig.db, 15, {7});
  auto rec = Committed(*rig.db, "litetx_batch", SkipDocId(o, 7));
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->at("phase"), "write");
  EXPECT_EQ(rec->at("code"), "invalid_argument");
  ASSERT_EQ(notified.size(), 1u);
  EXPECT_EQ(notified[0].phase, Phase::kWrite);
  EXPECT_TRUE(Committed(*rig.db, "litetx_batch", ScanDocId(o, 1)).has_value());
  EXPECT_FALSE(Committed(*rig.db, "litetx_batch", ScanDocId(o, 0)).has_value());
  for (std::uint64_t p = 5; p < 10; ++p) {
    auto m = Committed(*rig.db, "litetx_batch", ItemDocId(o, p));
    ASSERT_TRUE(m.has_value()) << p;
    EXPECT_EQ(m->at("outcome"), p == 7 ? "skipped" : "written") << p;
  }
  EXPECT_NE(LastWriter(*rig.db, "out", Key(5)), LastWriter(*rig.db, "out", Key(6)));
  EXPECT_EQ(LastWriter(*rig.db, "out", Key(10)), LastWriter(*rig.db, "out", Key(14)));
  EXPECT_FALSE(Committed(*rig.db, "litetx_batch", ItemDocId(o, 10)).has_value());
}

// The item-by-item pass of a chunk is cut short (the writer throws at item 8, after items 5
// and 6 were written and 7 skipped, each in its own transaction). On the restart nothing fails
// any more, but the chunk is marked as being written item by item: it is not written whole
// (5 and 6 would be written twice); the outcomes of 5, 6 and 7 come from their item markers
// (7 stays skipped), and 8 and 9 are written.
TEST(BatchStepTest, InterruptedItemByItemPassResumesFromTheItemMarkers) {
  Rig rig;
  StepOptions o = Opts("scan-restart", 5);
  o.skip.skip_limit = 5;
  bool throwing = true;
  std::vector<std::uint64_t> written_alone;
  StepFunctions fns;
  auto counting = CountingWriter();
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    for (const Output& out : outs) {
      const std::uint64_t i = IndexOf(out.value);
      if (i == 7 && throwing) return Status::InvalidArgument("item 7 violates a constraint");
      if (i == 8 && throwing) throw std::runtime_error("writer crashed at 8");
    }
    if (outs.size() == 1) written_alone.push_back(IndexOf(outs.front().value));
    return counting(tx, outs);
  };
  std::vector<SkipEvent> notified;
  o.listener.on_skip = [&](const SkipEvent& e) { notified.push_back(e); };
  VectorReader first(Items(15));
  EXPECT_THROW((void)RunStep(*rig.db, first, fns, o), std::runtime_error);
  EXPECT_EQ(written_alone, (std::vector<std::uint64_t>{5, 6}));
  EXPECT_TRUE(notified.empty());  // chunk 1 never completed
  EXPECT_TRUE(Committed(*rig.db, "litetx_batch", ScanDocId(o, 1)).has_value());
  EXPECT_TRUE(Committed(*rig.db, "litetx_batch", SkipDocId(o, 7)).has_value());
  EXPECT_FALSE(Committed(*rig.db, "litetx_batch", ChunkDocId(o, 1)).has_value());
  ExpectOutputsExactlyOnce(*rig.db, 7);  // items 0..6

  throwing = false;
  written_alone.clear();
  ScriptedReader second(Items(15));
  auto rep = RunStep(*rig.db, second, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(second.restored, (std::vector<std::uint64_t>{5}));
  EXPECT_EQ(written_alone, (std::vector<std::uint64_t>{8, 9}));  // 5 and 6 not again
  EXPECT_EQ(rep->total.read, 15u);
  EXPECT_EQ(rep->total.written, 14u);
  EXPECT_EQ(rep->total.write_skips, 1u);
  ExpectBalanced(rep->total, "total");
  ExpectOutputsExactlyOnce(*rig.db, 15, {7});
  EXPECT_EQ(SkipRecords(*rig.db, o), (std::set<std::uint64_t>{7}));
  EXPECT_EQ(Committed(*rig.db, "litetx_batch", SkipDocId(o, 7))->at("execution"), 1);
  ASSERT_EQ(notified.size(), 1u);
  EXPECT_EQ(notified[0].position, 7u);
  EXPECT_EQ(notified[0].phase, Phase::kWrite);
  for (std::uint64_t p = 5; p < 10; ++p) {
    auto m = Committed(*rig.db, "litetx_batch", ItemDocId(o, p));
    ASSERT_TRUE(m.has_value()) << p;
    EXPECT_EQ(m->at("outcome"), p == 7 ? "skipped" : "written") << p;
  }
}

// A write failure that is retryable: the chunk is retried whole while the policy allows, then
// item by item, and the failing item, its retries used up, goes to the recoverer.
TEST(BatchStepTest, RetryableWriteFailureIsRetriedThenIsolatedAndRecovered) {
  Rig rig;
  StepOptions o = Opts("scan-retry", 5);
  o.retry.max_attempts = 2;
  std::vector<std::size_t> write_sizes;
  std::vector<RetryEvent> retries;
  o.listener.on_retry = [&](const RetryEvent& e) { retries.push_back(e); };
  StepFunctions fns;
  auto counting = CountingWriter();
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    write_sizes.push_back(outs.size());
    for (const Output& out : outs) {
      if (IndexOf(out.value) == 3) return Status::Busy("row 3 is locked");
    }
    return counting(tx, outs);
  };
  fns.recover = [](TxnContext& tx, const Item& item, const Status& why) -> Status {
    return tx.Insert("dead", item.key, {{"why", why.message()}});
  };
  VectorReader reader(Items(5));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  // Twice whole, then items 0, 1, 2, then 3 twice (its retries), then 4.
  EXPECT_EQ(write_sizes, (std::vector<std::size_t>{5, 5, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(rep->total.recovered, 1u);
  EXPECT_EQ(rep->total.written, 4u);
  ExpectOutputsExactlyOnce(*rig.db, 5, {3});
  EXPECT_EQ(Committed(*rig.db, "dead", Key(3))->at("why"), "row 3 is locked");
  ASSERT_EQ(retries.size(), 2u);
  EXPECT_EQ(retries[0].phase, Phase::kWrite);
  EXPECT_EQ(retries[0].key, "");  // the whole chunk
  EXPECT_EQ(retries[1].key, Key(3));
  EXPECT_EQ(retries[1].attempt, 1);
}

TEST(BatchStepTest, CompletedStepIsNotRunAgain) {
  Rig rig;
  StepOptions o = Opts("done", 4);
  VectorReader reader(Items(10));
  auto rep = RunStep(*rig.db, reader, PlainFunctions(), o);
  ASSERT_TRUE(rep.ok() && rep->status.ok());
  EXPECT_FALSE(rep->already_complete);
  const auto before = ltxtest::DumpStore(*rig.w.mem, {"out", "litetx_batch"});
  ScriptedReader again(Items(10));
  int processed = 0;
  StepFunctions fns = PlainFunctions();
  fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
    ++processed;
    return std::optional<json::value>(item.value);
  };
  auto rep2 = RunStep(*rig.db, again, fns, o);
  ASSERT_TRUE(rep2.ok()) << rep2.status().ToString();
  EXPECT_TRUE(rep2->status.ok());
  EXPECT_TRUE(rep2->already_complete);
  EXPECT_EQ(rep2->execution, 1u);
  EXPECT_EQ(rep2->chunks, 3u);
  ExpectSameCounts(rep2->total, rep->total, "totals");
  EXPECT_EQ(again.reads + again.restores, 0);
  EXPECT_EQ(processed, 0);
  EXPECT_TRUE(ltxtest::SameDump(before, ltxtest::DumpStore(*rig.w.mem, {"out", "litetx_batch"})))
      << "a completed step wrote something";
}

// A second RunStep of the same step while the first is held inside its writer (chunk 1): the
// second takes the step over. Two orders:
//   * the second is held in its own write of chunk 1 while the first resumes: the first's
//     commit fails, it finds the step taken over (kFailedPrecondition "taken over") and stops;
//   * the second completes the step before the first resumes: the first's commit fails on the
//     chunk document the second committed (kFailedPrecondition, "committed by another
//     execution").
// Either way none of the first's later chunks is begun, every output is written once, and the
// second's completion stands.
TEST(BatchStepTest, SecondExecutionTakesOverAndTheFirstStops) {
  for (bool second_finishes_first : {false, true}) {
    SCOPED_TRACE(second_finishes_first ? "the second completes first" : "the second is held too");
    Rig rig;
    StepOptions o = Opts("takeover", 5);
    ltxtest::Gate gate1, gate2;
    std::vector<std::uint64_t> first_chunks;
    std::vector<Status> first_errors;
    StepOptions o1 = o;
    o1.listener.before_chunk = [&](std::uint64_t k) { first_chunks.push_back(k); };
    o1.listener.on_error = [&](const Status& s) { first_errors.push_back(s); };
    int first_writes = 0;
    auto writer = [](std::string by, ltxtest::Gate* gate, int* calls) {
      return [by, gate, calls](TxnContext& tx, const std::vector<Output>& outs) -> Status {
        if (calls != nullptr) ++*calls;
        if (gate != nullptr && IndexOf(outs.front().value) == 5) gate->Hold();  // chunk 1
        for (const Output& out : outs) {
          json::object v = out.value.as_object();
          v["by"] = by;
          if (Status s = WriteCounted(tx, "out", out.item->key, v); !s.ok()) return s;
        }
        return Status::Ok();
      };
    };
    StepFunctions fns1, fns2;
    fns1.write = writer("first", &gate1, &first_writes);
    fns2.write = writer("second", second_finishes_first ? nullptr : &gate2, nullptr);
    Result<StepReport> rep1 = Status::Unknown("not run");
    Result<StepReport> rep2 = Status::Unknown("not run");
    std::thread first([&] {
      VectorReader reader(Items(20));
      rep1 = RunStep(*rig.db, reader, fns1, o1);
    });
    ASSERT_TRUE(gate1.WaitHeld(1));
    std::thread second([&] {
      VectorReader reader(Items(20));
      rep2 = RunStep(*rig.db, reader, fns2, o);
    });
    if (second_finishes_first) {
      second.join();
      gate1.Open();
      first.join();
    } else {
      const bool held = gate2.WaitHeld(1);
      gate1.Open();
      first.join();
      gate2.Open();
      second.join();
      ASSERT_TRUE(held);
    }
    ASSERT_TRUE(rep2.ok()) << rep2.status().ToString();
    ASSERT_TRUE(rep2->status.ok()) << rep2->status.ToString();
    EXPECT_EQ(rep2->execution, 2u);
    ASSERT_TRUE(rep1.ok()) << rep1.status().ToString();
    EXPECT_EQ(rep1->status.code(), Code::kFailedPrecondition) << rep1->status.ToString();
    EXPECT_NE(rep1->status.message().find(second_finishes_first ? "committed by another execution"
                                                                : "taken over"),
              std::string::npos)
        << rep1->status.ToString();
    ASSERT_EQ(first_errors.size(), 1u);
    EXPECT_EQ(first_chunks, (std::vector<std::uint64_t>{0, 1}));  // it began nothing more
    // Chunk 0, then chunk 1 once: the attempt after the failed commit stopped before writing.
    EXPECT_EQ(first_writes, 2);
    EXPECT_EQ(rep1->chunks, 1u);
    ExpectOutputsExactlyOnce(*rig.db, 20);
    for (const auto& [id, doc] : CommittedAll(*rig.db, "out")) {
      EXPECT_EQ(doc.at("by"), IndexOf(doc) < 5 ? "first" : "second") << id;
    }
    for (std::uint64_t k = 0; k < 4; ++k) {
      auto c = Committed(*rig.db, "litetx_batch", ChunkDocId(o, k));
      ASSERT_TRUE(c.has_value()) << k;
      EXPECT_EQ(c->at("execution"), k == 0 ? 1 : 2) << k;
    }
    auto st = ReadStepStatus(*rig.db, o);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->status, "completed");  // the first's failure did not overwrite it
    EXPECT_EQ(st->execution, 2u);
    EXPECT_EQ(st->total.written, 20u);
    EXPECT_EQ(st->chunks, 4u);
  }
}

// Listener callbacks are never concurrent (with four chunk threads, retries, skips and
// rollbacks), on_skip comes once per skipped item and only once its transaction committed
// (even when an earlier attempt that skipped it was rolled back), and on_chunk_error comes
// once per rolled-back attempt.
TEST(BatchStepTest, ListenersAreSerialisedAndSkipsNotifiedAfterCommit) {
  Rig rig;
  auto checker = Db(rig.w, rig.w.mem);  // reads what is committed, beside the step
  StepOptions o = Opts("listeners", 3);
  o.concurrency = 4;
  o.retry.max_attempts = 3;
  o.skip.skip_limit = 20;
  constexpr std::uint64_t kItems = 60;
  std::atomic<int> active{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> calls{0};
  auto enter = [&] {
    ++calls;
    if (active.fetch_add(1) != 0) ++overlaps;
    std::this_thread::sleep_for(50us);  // widens any overlap; not a synchronisation
  };
  auto leave = [&] { active.fetch_sub(1); };
  std::map<std::uint64_t, int> skip_notes;
  int not_committed = 0;
  int chunk_errors = 0, retry_events = 0, befores = 0, afters = 0;
  o.listener.before_chunk = [&](std::uint64_t) { enter(); ++befores; leave(); };
  o.listener.after_chunk = [&](std::uint64_t k, const Counts&) {
    enter();
    ++afters;
    if (!Committed(*checker, "litetx_batch", ChunkDocId(o, k))) ++not_committed;
    leave();
  };
  o.listener.on_chunk_error = [&](std::uint64_t, const Status&) { enter(); ++chunk_errors; leave(); };
  o.listener.on_retry = [&](const RetryEvent&) { enter(); ++retry_events; leave(); };
  o.listener.on_skip = [&](const SkipEvent& e) {
    enter();
    ++skip_notes[e.position];
    if (!Committed(*checker, "litetx_batch", SkipDocId(o, e.position))) ++not_committed;
    if (!Committed(*checker, "litetx_batch", ChunkDocId(o, e.position / 3))) ++not_committed;
    leave();
  };
  o.listener.on_error = [&](const Status&) { enter(); leave(); };
  std::mutex mu;
  std::map<std::string, int> failures;
  StepFunctions fns = PlainFunctions();
  fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
    const std::uint64_t i = IndexOf(item.value);
    int n;
    {
      std::lock_guard<std::mutex> lock(mu);
      n = ++failures[item.key];
    }
    // Skipped: 3, 10, 17, ..., 59. Failing once, retryably: 4, 15, 26, 37, 48, which rolls
    // their chunk back once; in chunks 1 (3..5) and 8 (24..26) the rolled-back attempt had
    // already skipped 3 and 24, which must be notified once, after the commit that keeps them.
    if (i % 7 == 3) return Status::InvalidArgument("skip me");
    if (i % 11 == 4 && n == 1) return Status::Conflict("retry me");
    return std::optional<json::value>(item.value);
  };
  VectorReader reader(Items(kItems));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(overlaps.load(), 0) << "of " << calls.load() << " callbacks";
  EXPECT_EQ(not_committed, 0);
  std::set<std::uint64_t> want_skips;
  for (std::uint64_t i = 0; i < kItems; ++i) {
    if (i % 7 == 3) want_skips.insert(i);
  }
  std::set<std::uint64_t> got_skips;
  for (const auto& [p, n] : skip_notes) {
    EXPECT_EQ(n, 1) << "position " << p << " notified " << n << " times";
    got_skips.insert(p);
  }
  EXPECT_EQ(got_skips, want_skips);
  EXPECT_EQ(rep->total.process_skips, want_skips.size());
  EXPECT_EQ(befores, 20);
  EXPECT_EQ(afters, 20);
  EXPECT_EQ(retry_events, 5);  // items 4, 15, 26, 37, 48 (59 is skipped first)
  EXPECT_EQ(chunk_errors, 5);
  EXPECT_EQ(static_cast<std::uint64_t>(chunk_errors), rep->this_run.rollbacks);
  ExpectBalanced(rep->total, "total");

  // A failing step: on_error once, with the failure.
  StepOptions f = Opts("listeners-fail", 3);
  std::vector<Status> errors;
  f.listener.on_error = [&](const Status& s) { errors.push_back(s); };
  StepFunctions bad = PlainFunctions();
  bad.process = [](TxnContext&, const Item& item) -> ProcessResult {
    if (IndexOf(item.value) == 4) return Status::Corruption("cannot process 4");
    return std::optional<json::value>(item.value);
  };
  VectorReader r2(Items(9));
  auto rep2 = RunStep(*rig.db, r2, bad, f);
  ASSERT_TRUE(rep2.ok());
  EXPECT_EQ(rep2->status.code(), Code::kCorruption);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message(), "cannot process 4");
}

// An exception thrown by process propagates out of RunStep after the chunk in progress is
// rolled back; a restart resumes after the committed chunks. With concurrent chunks, chunks
// past the failed one may have committed: the restart skips them.
TEST(BatchStepTest, ExceptionPropagatesAndARestartResumes) {
  {
    Rig rig;
    StepOptions o = Opts("throw", 5);
    bool throwing = true;
    StepFunctions fns = PlainFunctions();
    fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
      if (throwing && IndexOf(item.value) == 12) throw std::runtime_error("bug at 12");
      return std::optional<json::value>(item.value);
    };
    VectorReader first(Items(20));
    EXPECT_THROW((void)RunStep(*rig.db, first, fns, o), std::runtime_error);
    ExpectOutputsExactlyOnce(*rig.db, 10);
    EXPECT_EQ(ltxtest::RecordCount(*rig.w.mem), 0u) << "an open transaction record was left";
    throwing = false;
    ScriptedReader second(Items(20));
    auto rep = RunStep(*rig.db, second, fns, o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
    EXPECT_EQ(second.restored, (std::vector<std::uint64_t>{10}));
    EXPECT_EQ(second.reads, 11);  // items 10..19, then the end
    EXPECT_EQ(rep->total.read, 20u);
    EXPECT_EQ(rep->chunks, 4u);
    ExpectOutputsExactlyOnce(*rig.db, 20);
  }
  {
    Rig rig;
    StepOptions o = Opts("throw-async", 5);
    o.concurrency = 3;
    std::mutex mu;
    std::condition_variable cv;
    std::set<std::uint64_t> committed;
    o.listener.after_chunk = [&](std::uint64_t k, const Counts&) {
      std::lock_guard<std::mutex> lock(mu);
      committed.insert(k);
      cv.notify_all();
    };
    bool throwing = true;
    bool saw_later_chunks = false;
    StepFunctions fns = PlainFunctions();
    fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
      if (throwing && IndexOf(item.value) == 12) {
        // Chunk 2 throws once chunks 3 and 4 (inside its window) have committed.
        std::unique_lock<std::mutex> lock(mu);
        saw_later_chunks = cv.wait_for(lock, 10s, [&] {
          return committed.contains(3) && committed.contains(4);
        });
        throw std::runtime_error("bug at 12");
      }
      return std::optional<json::value>(item.value);
    };
    VectorReader first(Items(40));
    EXPECT_THROW((void)RunStep(*rig.db, first, fns, o), std::runtime_error);
    ASSERT_TRUE(saw_later_chunks);
    EXPECT_FALSE(committed.contains(2));
    EXPECT_FALSE(committed.contains(5));  // outside the window of the unfinished chunk 2
    ExpectOutputsExactlyOnce(*rig.db, 25, {10, 11, 12, 13, 14});
    throwing = false;
    ScriptedReader second(Items(40));
    auto rep = RunStep(*rig.db, second, fns, o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
    // Resumed at chunk 2, then moved past the committed chunks 3 and 4.
    EXPECT_EQ(second.restored, (std::vector<std::uint64_t>{10, 20, 25}));
    EXPECT_EQ(second.reads, 5 + 15 + 1);
    EXPECT_EQ(rep->this_run.read, 20u);
    EXPECT_EQ(rep->total.read, 40u);
    EXPECT_EQ(rep->total.commits, 8u);
    EXPECT_EQ(rep->chunks, 8u);
    ExpectOutputsExactlyOnce(*rig.db, 40);
    auto st = ReadStepStatus(*rig.db, o);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->chunks, 8u);
    EXPECT_EQ(st->total.read, 40u);
  }
}

// A restart whose commit_interval differs from the run that left committed chunks above the
// watermark (concurrent chunks, one of them failed): the new chunks stop at the first position
// of a committed chunk, the chunk right below one ends exactly where it begins, and an index
// left with no positions is committed empty. Every item is written once, whether the interval
// shrank or grew.
TEST(BatchStepTest, RestartWithAnotherIntervalNeverOverlapsCommittedChunks) {
  for (std::size_t interval : {std::size_t{2}, std::size_t{3}, std::size_t{8}, std::size_t{5}}) {
    SCOPED_TRACE("second interval " + std::to_string(interval));
    Rig rig;
    StepOptions o = Opts("interval-" + std::to_string(interval), 5);
    o.concurrency = 3;
    std::mutex mu;
    std::condition_variable cv;
    std::set<std::uint64_t> committed;
    o.listener.after_chunk = [&](std::uint64_t k, const Counts&) {
      std::lock_guard<std::mutex> lock(mu);
      committed.insert(k);
      cv.notify_all();
    };
    bool failing = true;
    StepFunctions fns = PlainFunctions();
    fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
      if (failing && IndexOf(item.value) == 12) {
        // Chunk 2 fails for good once chunks 3 and 4 have committed.
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, 10s, [&] { return committed.contains(3) && committed.contains(4); });
        return Status::Corruption("item 12 cannot be processed yet");
      }
      return std::optional<json::value>(item.value);
    };
    VectorReader first(Items(40));
    auto a = RunStep(*rig.db, first, fns, o);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_EQ(a->status.code(), Code::kCorruption) << a->status.ToString();
    ASSERT_TRUE(committed.contains(3) && committed.contains(4) && !committed.contains(2));
    ExpectOutputsExactlyOnce(*rig.db, 25, {10, 11, 12, 13, 14});

    failing = false;
    o.commit_interval = interval;
    o.concurrency = 1;
    VectorReader second(Items(40));
    auto b = RunStep(*rig.db, second, fns, o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_TRUE(b->status.ok()) << b->status.ToString();
    EXPECT_EQ(b->total.read, 40u);
    EXPECT_EQ(b->total.written, 40u);
    EXPECT_EQ(b->this_run.read, 20u);  // 10..14 and 25..39
    ExpectBalanced(b->total, "after the restart");
    ExpectOutputsExactlyOnce(*rig.db, 40);
    // Chunk 2 (positions 10..14) was formed again as one chunk ending where chunk 3 begins.
    auto c2 = Committed(*rig.db, o.state_collection, ChunkDocId(o, 2));
    ASSERT_TRUE(c2.has_value());
    EXPECT_EQ(c2->at("begin").to_number<std::uint64_t>(), 10u);
    EXPECT_EQ(c2->at("end").to_number<std::uint64_t>(), 15u);
  }
}

// A chunk commit whose reply is lost after the commit point landed: the step learns that it
// committed (its chunk document is there, written by this execution) and goes on, counting it
// once. Injected with FaultInjectingStore: the first record replace (the commit flip) of the
// second chunk transaction loses its reply, and the record cannot be read for a while, so
// that the engine reports kUnknown.
TEST(BatchStepTest, LostCommitReplyThatLandedIsCountedOnce) {
  ltxtest::World w;
  std::mutex mu;
  std::set<std::string> records_seen;
  std::string lost_record;
  int unreadable = 0;  // Gets of the lost record still to fail
  int lost = 0;
  litetx::FaultOptions fo;
  fo.rule = [&](litetx::StoreOp op, const litetx::Key& key, std::uint64_t) {
    std::lock_guard<std::mutex> lock(mu);
    if (key.collection != litetx::kTransactionsCollection) return litetx::Fault::kNone;
    if (op == litetx::StoreOp::kReplace && key.id != lost_record &&
        records_seen.insert(key.id).second && records_seen.size() == 2) {
      lost_record = key.id;
      unreadable = 12;
      ++lost;
      return litetx::Fault::kLostReply;
    }
    if (op == litetx::StoreOp::kGet && key.id == lost_record && unreadable > 0) {
      --unreadable;
      return litetx::Fault::kTransient;
    }
    return litetx::Fault::kNone;
  };
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
  auto db = Db(w, faulty);
  StepOptions o = Opts("lost-landed", 5);
  VectorReader reader(Items(20));
  auto rep = RunStep(*db, reader, PlainFunctions(), o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(faulty->lost_replies(), 1u);
  EXPECT_EQ(unreadable, 0);  // every injected read failure was met
  EXPECT_EQ(rep->this_run.rollbacks, 0u);  // resolved as committed, not attempted again
  EXPECT_EQ(rep->total.commits, 4u);
  EXPECT_EQ(rep->total.written, 20u);
  EXPECT_EQ(rep->chunks, 4u);
  ExpectOutputsExactlyOnce(*db, 20);
  auto st = ReadStepStatus(*db, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "completed");
  EXPECT_EQ(st->total.written, 20u);
}

// The same, but the flip never reached the store (the request was lost): the chunk's fate is
// unknown until the transaction is settled, so the step stops with kUnknown after
// unknown_timeout; once a collector has rolled the abandoned transaction back, a restart
// writes the chunk (once).
TEST(BatchStepTest, LostCommitRequestEndsUnknownAndARestartWritesTheChunkOnce) {
  ltxtest::World w;
  auto hook = std::make_shared<ltxtest::HookStore>(w.mem);
  std::mutex mu;
  int commit_points = 0;
  std::optional<litetx::Key> lost_record;
  int unreadable = 0;
  hook->before = [&](const ltxtest::Call& c) -> std::optional<Status> {
    std::lock_guard<std::mutex> lock(mu);
    if (c.is_commit_point() && ++commit_points == 2) {
      lost_record = c.key;
      unreadable = 12;
      return Status::Unknown("request lost on its way");  // never forwarded
    }
    if (c.op == ltxtest::Op::kGet && lost_record && c.key == *lost_record && unreadable > 0) {
      --unreadable;
      return Status::Unavailable("record unreadable");
    }
    return std::nullopt;
  };
  StepOptions o = Opts("lost-request", 5);
  o.unknown_timeout = 2s;  // virtual time
  {
    auto db = Db(w, hook);
    VectorReader reader(Items(20));
    auto rep = RunStep(*db, reader, PlainFunctions(), o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    EXPECT_EQ(rep->status.code(), Code::kUnknown) << rep->status.ToString();
    EXPECT_EQ(rep->chunks, 1u);
    EXPECT_EQ(commit_points, 2);
  }
  auto direct = w.Direct();
  ExpectOutputsExactlyOnce(*direct, 5);  // chunk 2 is not committed
  auto st = ReadStepStatus(*direct, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "running");  // a kUnknown records no failure
  // The writer is gone: past its lease a collector settles its transaction.
  w.clock->Advance(121s);
  litetx::CollectorOptions go;
  go.engine = w.Opts();
  litetx::Collector gc(w.mem, go);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  auto db = Db(w, w.mem);
  VectorReader reader(Items(20));
  auto rep = RunStep(*db, reader, PlainFunctions(), o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(rep->execution, 2u);
  EXPECT_EQ(rep->this_run.read, 15u);
  EXPECT_EQ(rep->total.commits, 4u);
  EXPECT_EQ(rep->total.written, 20u);
  ExpectOutputsExactlyOnce(*db, 20);
}

TEST(BatchStepTest, ReadStepStatusFollowsTheStep) {
  Rig rig;
  auto monitor = Db(rig.w, rig.w.mem);
  StepOptions o = Opts("status", 4);
  EXPECT_EQ(ReadStepStatus(*monitor, o).code(), Code::kNotFound);
  std::vector<std::string> seen;
  std::vector<std::uint64_t> chunks_seen;
  o.listener.after_chunk = [&](std::uint64_t, const Counts&) {
    auto st = ReadStepStatus(*monitor, o);
    ASSERT_TRUE(st.ok());
    seen.push_back(st->status);
    chunks_seen.push_back(st->chunks);
    EXPECT_EQ(st->execution, 1u);
  };
  bool broken = true;
  StepFunctions fns = PlainFunctions();
  fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
    if (broken && IndexOf(item.value) == 9) return Status::Corruption("disk on fire");
    return std::optional<json::value>(item.value);
  };
  VectorReader reader(Items(12));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->status.code(), Code::kCorruption);
  EXPECT_EQ(seen, (std::vector<std::string>{"running", "running"}));
  EXPECT_EQ(chunks_seen, (std::vector<std::uint64_t>{1, 2}));  // the watermark moves per chunk
  auto st = ReadStepStatus(*monitor, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "failed");
  EXPECT_EQ(st->execution, 1u);
  EXPECT_EQ(st->chunks, 2u);
  EXPECT_EQ(st->total.read, 8u);
  EXPECT_EQ(st->last_error, "corruption: disk on fire");
  broken = false;
  seen.clear();
  chunks_seen.clear();
  o.listener.after_chunk = nullptr;
  VectorReader again(Items(12));
  rep = RunStep(*rig.db, again, fns, o);
  ASSERT_TRUE(rep.ok() && rep->status.ok());
  st = ReadStepStatus(*monitor, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "completed");
  EXPECT_EQ(st->execution, 2u);
  EXPECT_EQ(st->chunks, 3u);
  EXPECT_EQ(st->last_error, "");
  ExpectSameCounts(st->total, rep->total, "stored totals");
}

// complete_chunk ends a chunk early; a restart forms the same chunks again.
TEST(BatchStepTest, CompletionPolicyEndsChunksEarly) {
  Rig rig;
  StepOptions o = Opts("complete", 10);
  // A chunk ends after an item whose number is 3 modulo 4: chunks of 4 items, not 10.
  o.complete_chunk = [](const std::vector<Item>& chunk) {
    return IndexOf(chunk.back().value) % 4 == 3;
  };
  bool broken = true;
  std::vector<std::size_t> sizes;
  StepFunctions fns;
  auto counting = CountingWriter();
  fns.write = [&](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    sizes.push_back(outs.size());
    if (broken && IndexOf(outs.front().value) == 8) return Status::Corruption("stop");
    return counting(tx, outs);
  };
  VectorReader r1(Items(14));
  auto rep = RunStep(*rig.db, r1, fns, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->status.code(), Code::kCorruption);
  EXPECT_EQ(sizes, (std::vector<std::size_t>{4, 4, 4}));
  broken = false;
  sizes.clear();
  ScriptedReader r2(Items(14));
  rep = RunStep(*rig.db, r2, fns, o);
  ASSERT_TRUE(rep.ok() && rep->status.ok());
  EXPECT_EQ(r2.restored, (std::vector<std::uint64_t>{8}));
  EXPECT_EQ(sizes, (std::vector<std::size_t>{4, 2}));
  EXPECT_EQ(rep->chunks, 4u);
  ExpectOutputsExactlyOnce(*rig.db, 14);
}

}  // namespace

TEST(BatchStepTest, EmptyInputCompletesWithNothing) {
  Rig rig;
  StepOptions o = Opts("empty", 5);
  int writes = 0;
  StepFunctions fns;
  fns.write = [&](TxnContext&, const std::vector<Output>&) {
    ++writes;
    return Status::Ok();
  };
  VectorReader reader(Items(0));
  auto rep = RunStep(*rig.db, reader, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(rep->chunks, 0u);
  EXPECT_EQ(rep->total.read, 0u);
  EXPECT_EQ(writes, 0);
  auto st = ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status, "completed");
  VectorReader again(Items(3));
  rep = RunStep(*rig.db, again, fns, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->already_complete);
}

// Stored state a restart cannot use is refused with an error of RunStep itself: a reader that
// cannot resume at the stored checkpoint (another input), a step document of another format,
// totals that are not numbers. Nothing is written for the refused run; with the right input
// the step resumes.
TEST(BatchStepTest, StoredStateThatCannotBeUsedIsRefused) {
  Rig rig;
  StepOptions o = Opts("refuse", 5);
  bool broken = true;
  StepFunctions fns = PlainFunctions();
  fns.process = [&](TxnContext&, const Item& item) -> ProcessResult {
    if (broken && IndexOf(item.value) == 12) return Status::Corruption("stop at 12");
    return std::optional<json::value>(item.value);
  };
  VectorReader first(Items(20));
  auto rep = RunStep(*rig.db, first, fns, o);
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->status.code(), Code::kCorruption);
  broken = false;
  const auto outputs = ltxtest::DumpStore(*rig.w.mem, {"out"});
  // Another input, shorter than the stored checkpoint (10).
  VectorReader shorter(Items(4));
  auto refused = RunStep(*rig.db, shorter, fns, o);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("cannot resume"), std::string::npos);
  EXPECT_TRUE(ltxtest::SameDump(outputs, ltxtest::DumpStore(*rig.w.mem, {"out"})));
  // A step document of another format.
  auto set_field = [&](const std::string& field, json::value v) {
    auto r = rig.db->Run([&](TxnContext& tx) {
      return tx.Update("litetx_batch", StepId(o), {{field, v}});
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  set_field("format", 2);
  VectorReader r2(Items(20));
  refused = RunStep(*rig.db, r2, fns, o);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition) << refused.status().ToString();
  set_field("format", 1);
  // Totals that are not numbers.
  auto st = ReadStepStatus(*rig.db, o);
  ASSERT_TRUE(st.ok());
  json::object bad = st->total.ToJson();
  bad["written"] = "ten";
  set_field("totals", bad);
  VectorReader r3(Items(20));
  refused = RunStep(*rig.db, r3, fns, o);
  EXPECT_EQ(refused.code(), Code::kCorruption) << refused.status().ToString();
  EXPECT_EQ(ReadStepStatus(*rig.db, o).code(), Code::kCorruption);
  set_field("totals", st->total.ToJson());
  EXPECT_TRUE(ltxtest::SameDump(outputs, ltxtest::DumpStore(*rig.w.mem, {"out"})));
  // The right input resumes after chunk 2.
  ScriptedReader right(Items(20));
  rep = RunStep(*rig.db, right, fns, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->status.ok()) << rep->status.ToString();
  EXPECT_EQ(right.restored, (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(rep->total.read, 20u);
  ExpectOutputsExactlyOnce(*rig.db, 20);
}

TEST(BatchStepTest, CountsToAndFromJson) {
  Counts c;
  c.read = 1;
  c.written = 2;
  c.filtered = 3;
  c.read_skips = 4;
  c.process_skips = 5;
  c.write_skips = 6;
  c.recovered = 7;
  c.commits = 8;
  c.rollbacks = 9;
  c.retries = 10;
  EXPECT_EQ(c.skips(), 15u);
  const json::object j = c.ToJson();
  EXPECT_EQ(j.size(), 10u);
  auto back = Counts::FromJson(j);
  ASSERT_TRUE(back.ok());
  ExpectSameCounts(*back, c, "round trip");
  Counts sum = c;
  sum += c;
  EXPECT_EQ(json::serialize(sum.ToJson()),
            R"({"read":2,"written":4,"filtered":6,"read_skips":8,"process_skips":10,"write_skips":12,"recovered":14,"commits":16,"rollbacks":18,"retries":20})");
  auto partial = Counts::FromJson(json::object{{"read", 5}});
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->read, 5u);
  EXPECT_EQ(partial->written, 0u);
  for (const json::value& bad : {json::value(-1), json::value("1"), json::value(1.5), json::value(nullptr)}) {
    EXPECT_EQ(Counts::FromJson(json::object{{"retries", bad}}).code(), Code::kCorruption)
        << json::serialize(bad);
  }
}
