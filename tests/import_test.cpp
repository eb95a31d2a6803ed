// Import (litetx/importer.h, import/): NDJSON and array input, ids, modes, every bad row and
// bad input rolled back or skipped, and the outcomes that are failures of the import itself.
// Chunks of 3 rows, so that every multi-row case crosses chunk boundaries and a rollback has
// chunks to undo.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "import/rows.h"
#include "litetx/collector.h"
#include "litetx/importer.h"
#include "test_util.h"

namespace litetx {
namespace {

using namespace std::chrono_literals;
using namespace ltxtest;

constexpr const char* kC = "people";

ImportOptions Opts(std::string id_field = "id") {
  ImportOptions o;
  o.collection = kC;
  o.id_field = std::move(id_field);
  o.chunk_rows = 3;
  return o;
}

Result<ImportSummary> ImportText(Database& db, const std::string& text, const ImportOptions& o) {
  std::istringstream in(text);
  return Import(db, in, o);
}

// NDJSON rows {"id": "p<i>", "n": i} for i in [from, to].
std::string Rows(int from, int to) {
  std::string out;
  for (int i = from; i <= to; ++i) {
    out += R"({"id":"p)" + std::to_string(i) + R"(","n":)" + std::to_string(i) + "}\n";
  }
  return out;
}

// The committed image of p<i> has "n": i (present) or is not found (absent).
void ExpectRows(Database& db, int from, int to, bool present) {
  for (int i = from; i <= to; ++i) {
    auto r = db.Read(kC, "p" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (present) {
      ASSERT_EQ(r->state, DocumentState::kFound) << "p" << i;
      EXPECT_EQ(r->doc.at("n").as_int64(), i);
    } else {
      EXPECT_EQ(r->state, DocumentState::kNotFound) << "p" << i;
    }
  }
}

// No document of the collection carries transaction `txn` (a rolled-back import leaves none
// held), and the transaction's outcome is `outcome`.
void ExpectUntouchedBy(World& w, Database& db, const std::string& txn, TxnOutcome outcome) {
  ASSERT_FALSE(txn.empty());
  for (const auto& [id, doc] : ScanAll(*w.mem, kC)) {
    auto m = engine::DecodeMeta(doc.value);
    ASSERT_TRUE(m.ok()) << id;
    EXPECT_NE(m->txn, txn) << id << " still carries the import's reference";
  }
  EXPECT_EQ(OutcomeOf(db, txn), outcome);
}

TEST(Import, NdjsonWithBlankLinesAndCrlfCommitsInChunks) {
  World w;
  auto db = w.Direct();
  const std::string text = "\n" + Rows(1, 4) + "   \n\r\n" + R"({"id":"p5","n":5})" + "\r\n" +
                           Rows(6, 8) + R"({"id":"p9","n":9})";  // no newline at the end
  auto r = ImportText(*db, text, Opts());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->committed);
  EXPECT_TRUE(r->outcome.ok());
  EXPECT_EQ(r->rows_read, 9u);
  EXPECT_EQ(r->imported, 9u);
  EXPECT_EQ(r->skipped, 0u);
  EXPECT_TRUE(r->bad_rows.empty());
  EXPECT_EQ(r->chunks, 3u);
  EXPECT_EQ(r->bytes_read, text.size());
  EXPECT_TRUE(r->settled);
  EXPECT_GT(r->acknowledged.count(), 0);
  EXPECT_LE(r->acknowledged, r->settled_at);
  EXPECT_LE(r->settled_at, r->total);
  ExpectRows(*db, 1, 9, true);
  ExpectClean(*w.mem, {kC});
  EXPECT_EQ(OutcomeOf(*db, r->txn_id), TxnOutcome::kCommitted);
}

TEST(Import, ArrayOverManyLinesWithTrickyStrings) {
  World w;
  auto db = w.Direct();
  // Strings holding the splitter's own characters, escapes, nested containers, a BOM.
  const std::string text = "\xEF\xBB\xBF  [\n"
                           R"({"id":"a","s":"x, y ] } [ {","q":"say \"hi\", ]"},)" "\n"
                           R"(  {"id":"b","nest":{"l":[1,[2,{"k":"]"}]]},"e":"\\"} ,)" "\n"
                           R"({"id":"c"},{"id":"d","u":"\u00e9\ud83d\ude00"},{"id":"f","t":"\"], {"})" "\n"
                           "  ,\n"
                           R"({"id":"e","n":1.5e300})" "\n]\n\n";
  auto r = ImportText(*db, text, Opts());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->committed) << r->outcome.ToString();
  EXPECT_EQ(r->rows_read, 6u);
  EXPECT_EQ(r->imported, 6u);
  auto a = db->Read(kC, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->doc.at("s").as_string(), "x, y ] } [ {");
  EXPECT_EQ(a->doc.at("q").as_string(), "say \"hi\", ]");
  auto b = db->Read(kC, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(json::serialize(b->doc), R"({"id":"b","nest":{"l":[1,[2,{"k":"]"}]]},"e":"\\"})");
  auto d = db->Read(kC, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->doc.at("u").as_string(), "\xC3\xA9\xF0\x9F\x98\x80");
  auto f = db->Read(kC, "f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->doc.at("t").as_string(), "\"], {");
  auto e = db->Read(kC, "e");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->doc.at("n").as_double(), 1.5e300);
  ExpectClean(*w.mem, {kC});
}

TEST(Import, IntegerIdsAndGeneratedIds) {
  World w;
  auto db = w.Direct();
  auto r = ImportText(*db, "{\"k\":42}\n{\"k\":-7}\n{\"k\":18446744073709551615}\n{\"k\":\"s\"}\n",
               Opts("k"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->committed) << r->outcome.ToString();
  for (const char* id : {"42", "-7", "18446744073709551615", "s"}) {
    auto g = db->Read(kC, id);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->state, DocumentState::kFound) << id;
  }
  EXPECT_EQ(db->Read(kC, "42")->doc.at("k").as_int64(), 42);  // the id field stays

  // No id field: "<txn id>-<row number>", the rows unchanged.
  ImportOptions o = Opts("");
  o.collection = "gen";
  auto g = ImportText(*db, "[{\"v\":1},{\"v\":2},\n{\"v\":3},{\"v\":4}]", o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(g->committed) << g->outcome.ToString();
  auto all = ScanAll(*w.mem, "gen");
  ASSERT_EQ(all.size(), 4u);
  for (int i = 1; i <= 4; ++i) {
    auto d = db->Read("gen", g->txn_id + "-" + std::to_string(i));
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->state, DocumentState::kFound) << i;
    EXPECT_EQ(json::serialize(d->doc), "{\"v\":" + std::to_string(i) + "}");
  }
}

TEST(Import, UpsertReplacesFieldsAndBumpsTheVersion) {
  World w;
  auto db = w.Direct();
  Transaction seed;
  seed.Insert(kC, "p1", {{"id", "p1"}, {"n", 100}, {"old", true}});
  seed.Insert(kC, "p2", {{"id", "p2"}, {"n", 200}});
  const CommitInfo before = MustCommit(*db, seed);
  ImportOptions o = Opts();
  o.mode = ImportMode::kUpsert;
  auto r = ImportText(*db, Rows(1, 5), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->committed) << r->outcome.ToString();
  EXPECT_EQ(r->imported, 5u);
  ExpectRows(*db, 1, 5, true);
  auto p1 = db->Read(kC, "p1");
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(json::serialize(p1->doc), R"({"id":"p1","n":1})");  // "old" removed
  EXPECT_EQ(p1->version, before.versions[0] + 1);
  EXPECT_EQ(db->Read(kC, "p2")->version, before.versions[1] + 1);
  ExpectClean(*w.mem, {kC});

  // The same input again without upsert: p1 exists, so the import is rolled back.
  auto again = ImportText(*db, Rows(1, 5), Opts());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->committed);
  EXPECT_EQ(again->outcome.code(), Code::kConflict);
}

struct BadCase {
  const char* name;
  std::string text;        // rows p1..p7 around one bad row
  std::uint64_t line;       // the bad row's line
  Code code;
  const char* reason_part;  // in the reason
};

// Rows p1..p4, then `bad` on line 5, then p6..p8: the bad row comes after a full chunk.
std::string Around(const std::string& bad) { return Rows(1, 4) + bad + "\n" + Rows(6, 8); }

std::vector<BadCase> BadCases() {
  return {
      {"malformed JSON", Around(R"({"id":"p5","n":)"), 5, Code::kInvalidArgument,
       "malformed JSON"},
      {"not an object", Around(R"(["p5",5])"), 5, Code::kInvalidArgument, "not a JSON object"},
      {"oversize", Around(R"({"id":"p5","pad":")" + std::string(300, 'x') + "\"}"), 5,
       Code::kInvalidArgument, "more than the limit of 200"},
      {"missing id", Around(R"({"n":5})"), 5, Code::kInvalidArgument, "no \"id\" field"},
      {"id of another type", Around(R"({"id":5.5,"n":5})"), 5, Code::kInvalidArgument,
       "must be a string or an integer"},
      {"empty id", Around(R"({"id":"","n":5})"), 5, Code::kInvalidArgument, "is empty"},
      {"invalid UTF-8", Around("{\"id\":\"p5\",\"s\":\"\xff\"}"), 5, Code::kInvalidArgument,
       "not valid UTF-8"},
      {"key twice", Around(R"({"id":"p5","n":5,"n":6})"), 5, Code::kInvalidArgument,
       "key \"n\" appears twice"},
      {"reserved field (refused by the engine)", Around(R"({"id":"p5","_ltx":1})"), 5,
       Code::kInvalidArgument, "reserved"},
      // p2 again, in the second chunk: the engine finds the document named twice.
      {"duplicate id", Around(R"({"id":"p2","n":5})"), 5, Code::kInvalidArgument,
       "named twice"},
      // p0 exists before the import: an insert over a live document.
      {"insert over an existing document", Around(R"({"id":"p0","n":5})"), 5, Code::kConflict,
       "exists"},
      // The last chunk (written by Commit) holds the bad row.
      {"duplicate id in the last chunk", Rows(1, 7) + R"({"id":"p6"})" "\n", 8,
       Code::kInvalidArgument, "named twice"},
  };
}

class ImportBad : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = w_.Direct();
    Transaction seed;
    seed.Insert(kC, "p0", {{"id", "p0"}, {"n", 0}});
    MustCommit(*db_, seed);
  }
  World w_;
  std::unique_ptr<Database> db_;
};

TEST_F(ImportBad, EachBadRowRollsTheImportBackWithItsLine) {
  for (const BadCase& c : BadCases()) {
    SCOPED_TRACE(c.name);
    ImportOptions o = Opts();
    o.max_row_bytes = 200;
    auto r = ImportText(*db_, c.text, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->committed);
    EXPECT_FALSE(r->cancelled);
    EXPECT_EQ(r->outcome.code(), c.code) << r->outcome.ToString();
    EXPECT_EQ(r->outcome.message().rfind("line " + std::to_string(c.line) + ": ", 0), 0u)
        << r->outcome.message();
    ASSERT_EQ(r->bad_rows.size(), 1u);
    EXPECT_EQ(r->bad_rows[0].line, c.line);
    EXPECT_NE(r->bad_rows[0].reason.find(c.reason_part), std::string::npos)
        << r->bad_rows[0].reason;
    EXPECT_EQ(r->imported, 0u);
    EXPECT_EQ(r->skipped, 0u);
    EXPECT_TRUE(r->rollback.ok()) << r->rollback.ToString();
    EXPECT_GT(r->rolled_back_at.count(), 0);
    EXPECT_EQ(r->acknowledged.count(), 0);
    // None of the rows is visible, and none of the documents is held by the import.
    ExpectRows(*db_, 1, 8, false);
    ExpectUntouchedBy(w_, *db_, r->txn_id, TxnOutcome::kAborted);
    auto p0 = db_->Read(kC, "p0");
    ASSERT_TRUE(p0.ok());
    EXPECT_EQ(p0->doc.at("n").as_int64(), 0);
  }
  ExpectClean(*w_.mem, {kC});
}

TEST_F(ImportBad, SkipBadRowsListsThemAndCommitsTheRest) {
  for (const BadCase& c : BadCases()) {
    SCOPED_TRACE(c.name);
    ImportOptions o = Opts();
    o.max_row_bytes = 200;
    o.skip_bad_rows = true;
    auto r = ImportText(*db_, c.text, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->committed) << r->outcome.ToString();
    EXPECT_EQ(r->skipped, 1u);
    ASSERT_EQ(r->bad_rows.size(), 1u);
    EXPECT_EQ(r->bad_rows[0].line, c.line);
    EXPECT_NE(r->bad_rows[0].reason.find(c.reason_part), std::string::npos)
        << r->bad_rows[0].reason;
    EXPECT_EQ(r->imported + r->skipped, r->rows_read);
    EXPECT_EQ(r->imported, 7u);
    const int last = c.line == 8 ? 7 : 8;
    ExpectRows(*db_, 1, 4, true);
    ExpectRows(*db_, 6, last, true);
    ExpectClean(*w_.mem, {kC});
    // The next case imports the same ids again: remove them (p0 stays).
    Transaction del;
    for (int i = 1; i <= 8; ++i) {
      if (db_->Read(kC, "p" + std::to_string(i))->state == DocumentState::kFound) {
        del.Delete(kC, "p" + std::to_string(i));
      }
    }
    MustCommit(*db_, del);
  }
}

TEST_F(ImportBad, SkippedRowsAreCountedExactlyAndListedUpToTheCap) {
  std::string text;
  for (int i = 1; i <= 10; ++i) text += R"({"id":"q)" + std::to_string(i) + "\"}\nnot json\n";
  ImportOptions o = Opts();
  o.skip_bad_rows = true;
  o.max_listed_bad_rows = 3;
  auto r = ImportText(*db_, text, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->committed);
  EXPECT_EQ(r->rows_read, 20u);
  EXPECT_EQ(r->imported, 10u);
  EXPECT_EQ(r->skipped, 10u);
  ASSERT_EQ(r->bad_rows.size(), 3u);
  EXPECT_EQ(r->bad_rows[0].line, 2u);
  EXPECT_EQ(r->bad_rows[2].line, 6u);

  // Every row bad: the import commits nothing.
  auto none = ImportText(*db_, "1\n2\n", o);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->committed);
  EXPECT_EQ(none->imported, 0u);
  EXPECT_EQ(none->skipped, 2u);
}

TEST_F(ImportBad, ArrayElementLinesAreTheLinesTheyStartOn) {
  const std::string text = "[\n{\"id\":\"p1\",\"n\":1},\n{\"id\":\"p2\",\n\"n\":2}, {\"id\":\"p3\",\n"
                           "\"n\":}, {\"id\":\"p4\",\"n\":4}]";
  auto r = ImportText(*db_, text, Opts());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->committed);
  ASSERT_EQ(r->bad_rows.size(), 1u);
  EXPECT_EQ(r->bad_rows[0].line, 4u);  // p3 starts on line 4, its error is on line 5
  ExpectRows(*db_, 1, 4, false);
  ExpectUntouchedBy(w_, *db_, r->txn_id, TxnOutcome::kAborted);
}

TEST_F(ImportBad, BrokenFramingRollsBackEvenWhenSkipping) {
  struct Framing {
    const char* name;
    std::string text;
    std::uint64_t line;
    const char* reason_part;
  };
  const Framing cases[] = {
      {"text after the array", "[" R"({"id":"p1","n":1},{"id":"p2","n":2},)" "\n"
                               R"({"id":"p3","n":3},{"id":"p4","n":4}])" "\n x\n", 3,
       "after the array"},
      {"a second array", R"([{"id":"p1","n":1}] [{"id":"p2","n":2}])", 1, "after the array"},
      {"the array never closed", "[" R"({"id":"p1","n":1},{"id":"p2","n":2},)" "\n"
                                 R"({"id":"p3","n":3},{"id":"p4")", 2, "ends inside the array"},
      {"a comma before the closing bracket", "[" R"({"id":"p1","n":1},{"id":"p2","n":2},)"
                                             R"({"id":"p3","n":3},{"id":"p4","n":4},)" "\n]", 2,
       "right before"},
  };
  for (bool skip : {false, true}) {
    for (const Framing& c : cases) {
      SCOPED_TRACE(std::string(c.name) + (skip ? ", skipping bad rows" : ""));
      ImportOptions o = Opts();
      o.skip_bad_rows = skip;
      auto r = ImportText(*db_, c.text, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_FALSE(r->committed);
      EXPECT_EQ(r->outcome.code(), Code::kInvalidArgument);
      EXPECT_EQ(r->outcome.message().rfind("line " + std::to_string(c.line) + ": ", 0), 0u)
          << r->outcome.message();
      EXPECT_NE(r->outcome.message().find(c.reason_part), std::string::npos)
          << r->outcome.message();
      EXPECT_GE(r->rows_read, 1u);
      ExpectRows(*db_, 1, 4, false);
      ExpectUntouchedBy(w_, *db_, r->txn_id, TxnOutcome::kAborted);
    }
  }
  ExpectClean(*w_.mem, {kC});
}

TEST(Import, EmptyInputWritesNothing) {
  World w;
  auto db = w.Direct();
  for (const char* text : {"", "\n\n  \r\n\t\n", "[]", " \n [ \n ] \n", "\xEF\xBB\xBF"}) {
    SCOPED_TRACE(std::string("input '") + text + "'");
    auto r = ImportText(*db, text, Opts());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("no rows"), std::string::npos);
  }
  EXPECT_EQ(RecordCount(*w.mem), 0u);
  EXPECT_EQ(MarkerCount(*w.mem), 0u);
  EXPECT_TRUE(ScanAll(*w.mem, kC).empty());
}

TEST(Import, BadOptionsWriteNothing) {
  World w;
  auto db = w.Direct();
  ImportOptions o = Opts();
  for (const char* c : {"", "__litetx.mine", "a\nb"}) {
    o.collection = c;
    auto r = ImportText(*db, Rows(1, 2), o);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << c;
  }
  o = Opts("_ltxid");
  auto r = ImportText(*db, Rows(1, 2), o);
  EXPECT_EQ(r.code(), Code::kInvalidArgument);
  EXPECT_EQ(RecordCount(*w.mem), 0u);
  EXPECT_EQ(MarkerCount(*w.mem), 0u);
}

TEST(Import, ProgressIsReportedAndCancelRollsBack) {
  World w;
  auto db = w.Direct();
  ImportOptions o = Opts();
  o.progress_interval = 0ms;  // every row
  std::vector<ImportProgress> seen;
  o.on_progress = [&](const ImportProgress& p) { seen.push_back(p); };
  auto r = ImportText(*db, Rows(1, 7), o);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->committed);
  ASSERT_EQ(seen.size(), 8u);
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(seen[i].rows_read, i + 1);
    EXPECT_FALSE(seen[i].reading_done);
    if (i > 0) {
      EXPECT_GT(seen[i].bytes_read, seen[i - 1].bytes_read);
    }
  }
  EXPECT_TRUE(seen.back().reading_done);
  EXPECT_EQ(seen.back().bytes_read, Rows(1, 7).size());

  // Cancelled after five rows (the first chunk written): rolled back.
  ImportOptions c = Opts();
  c.collection = "other";
  std::uint64_t rows_seen = 0;
  c.progress_interval = std::chrono::milliseconds(0);
  c.on_progress = [&](const ImportProgress& p) { rows_seen = p.rows_read; };
  c.cancel = [&] { return rows_seen >= 5; };
  auto x = ImportText(*db, Rows(1, 7), c);
  ASSERT_TRUE(x.ok());
  EXPECT_FALSE(x->committed);
  EXPECT_TRUE(x->cancelled);
  EXPECT_EQ(x->outcome.code(), Code::kAborted);
  EXPECT_EQ(x->rows_read, 5u);
  EXPECT_TRUE(x->rollback.ok());
  for (int i = 1; i <= 5; ++i) {
    EXPECT_EQ(db->Read("other", "p" + std::to_string(i))->state, DocumentState::kNotFound);
  }
  EXPECT_FALSE(ScanAll(*w.mem, "other").empty());  // the first chunk had been written
  EXPECT_EQ(OutcomeOf(*db, x->txn_id), TxnOutcome::kAborted);
  ExpectClean(*w.mem, {kC, "other"});
}

TEST(Import, WithoutSettlingTheRowsAreVisibleAndStillHeld) {
  World w;
  auto db = w.Direct();
  ImportOptions o = Opts();
  o.settle = false;
  auto r = ImportText(*db, Rows(1, 5), o);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->committed);
  EXPECT_FALSE(r->settled);
  EXPECT_GT(r->acknowledged.count(), 0);
  EXPECT_EQ(r->settled_at.count(), 0);
  ExpectRows(*db, 1, 5, true);
  EXPECT_EQ(MetaOf(*w.mem, kC, "p3").txn, r->txn_id);
}

TEST(Import, StoreFailureIsReturnedWithTheTransactionId) {
  World w;
  auto hook = std::make_shared<HookStore>(w.mem);
  Options opts = w.Opts();
  opts.max_attempts = 2;
  opts.retry_backoff = {1ms, 1ms};
  Database db(hook, opts);
  // The writes of the second chunk's rows fail until the import has rolled itself back (the
  // abort flip), so that the rollback can fence them.
  bool aborting = false;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.is_abort_flip()) aborting = true;
    if (!aborting && c.is_write() && c.key.collection == kC && c.key.id >= "p4") {
      return Status::Unavailable("injected");
    }
    return std::nullopt;
  };
  auto r = ImportText(db, Rows(1, 7), Opts());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  ASSERT_FALSE(r.status().txn_id().empty());
  hook->before = nullptr;
  auto direct = w.Direct();
  ExpectRows(*direct, 1, 7, false);
  ExpectUntouchedBy(w, *direct, r.status().txn_id(), TxnOutcome::kAborted);
}

TEST(Import, LostCommitReplyIsUnknownNeverCommittedOrRolledBack) {
  World w;
  auto hook = std::make_shared<HookStore>(w.mem);
  Options opts = w.Opts();
  opts.max_attempts = 2;
  opts.retry_backoff = {1ms, 1ms};
  Database db(hook, opts);
  std::string txn;
  // The commit flip lands but its reply is lost, and the record cannot be read back.
  hook->after = [&](const Call& c, const Status&) -> std::optional<Status> {
    if (c.is_commit_point()) {
      txn = c.key.id;
      return Status::Unknown("reply lost");
    }
    return std::nullopt;
  };
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (!txn.empty() && c.op == Op::kGet && c.key == TxnKey(txn)) {
      return Status::Unavailable("partitioned");
    }
    return std::nullopt;
  };
  auto r = ImportText(db, Rows(1, 5), Opts());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
  EXPECT_EQ(r.status().txn_id(), txn);
  hook->before = nullptr;
  hook->after = nullptr;
  // It did commit (the flip landed): Outcome says so, and readers see the rows.
  auto direct = w.Direct();
  EXPECT_EQ(OutcomeOf(*direct, txn), TxnOutcome::kCommitted);
  ExpectRows(*direct, 1, 5, true);
}

TEST(Import, ACollectorClaimingTheImportEndsItWithAborted) {
  World w;
  auto db = w.Direct();
  CollectorOptions co;
  co.engine = w.Opts();
  Collector gc(w.mem, co);
  ImportOptions o = Opts();
  o.progress_interval = 0ms;
  // After row 4 (one chunk written), the import stalls past its lease and a collector claims it.
  o.on_progress = [&](const ImportProgress& p) {
    if (p.rows_read == 4) {
      w.clock->Advance(co.engine.lease + 1s);
      (void)gc.RunOnce();
    }
  };
  auto r = ImportText(*db, Rows(1, 9), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  ASSERT_FALSE(r.status().txn_id().empty());
  ExpectRows(*db, 1, 9, false);
  ExpectUntouchedBy(w, *db, r.status().txn_id(), TxnOutcome::kAborted);
}

// The reader keeps at most max_row_bytes of a row, however long the row: memory stays flat.
TEST(ImportRows, AnOversizeRowIsNotHeld) {
  for (bool array : {false, true}) {
    SCOPED_TRACE(array ? "array" : "ndjson");
    const std::string big = "{\"s\":\"" + std::string(4 << 20, 'x') + "\"}";
    std::istringstream in(array ? "[" + big + ",{\"a\":1}]" : big + "\n{\"a\":1}\n");
    importing::RowReader reader(in, 1000);
    importing::Row row;
    ASSERT_TRUE(reader.Next(&row));
    EXPECT_TRUE(row.oversize);
    EXPECT_EQ(row.bytes, big.size());
    EXPECT_LE(row.text.capacity(), 4096u);
    ASSERT_TRUE(reader.Next(&row));
    EXPECT_FALSE(row.oversize);
    EXPECT_EQ(row.text, "{\"a\":1}");
    EXPECT_EQ(row.line, array ? 1u : 2u);
    EXPECT_FALSE(reader.Next(&row));
    EXPECT_TRUE(reader.error().ok()) << reader.error().ToString();
  }
}

}  // namespace
}  // namespace litetx
