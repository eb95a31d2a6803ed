// A hostile user: bad and edge names, readers that repeat items, fail to restore or throw,
// checkpoints near the document size limit, items that are not objects or cannot be stored,
// writers that write into the step's own state, deeply nested scopes, chunks larger than a
// transaction may be, and 1024 workers.
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "attack_util.h"

namespace battack {
namespace {

// A reader over `items` whose hooks can interfere.
class HookReader : public lb::ItemReader {
 public:
  explicit HookReader(std::vector<lb::Item> items) : inner_(std::move(items)) {}
  litetx::Result<std::optional<lb::Item>> Read() override {
    if (on_read) on_read(reads_);
    ++reads_;
    auto r = inner_.Read();
    if (r.ok() && r->has_value() && position_override) (*r)->position = *position_override;
    return r;
  }
  json::value Checkpoint() const override {
    json::value c = inner_.Checkpoint();
    if (nest_levels > 0) return json::object{{"i", c}, {"deep", ltxtest::Nested(nest_levels)}};
    if (pad_bytes == 0) return c;
    return json::object{{"i", c}, {"pad", std::string(pad_bytes, 'p')}};
  }
  Status Restore(const json::value& checkpoint) override {
    ++restores;
    if (restore_failure) return *restore_failure;
    if (checkpoint.is_object()) return inner_.Restore(checkpoint.at("i"));
    return inner_.Restore(checkpoint);
  }

  std::function<void(int reads)> on_read;        // before each Read
  std::optional<std::uint64_t> position_override;  // a position the reader makes up
  std::size_t pad_bytes = 0;                     // checkpoint padding
  std::size_t nest_levels = 0;                   // checkpoint nesting (beside the index)
  std::optional<Status> restore_failure;
  int restores = 0;

 private:
  lb::VectorReader inner_;
  int reads_ = 0;
};

// Inserts {"v": value} into "out" under the item's key.
Status InsertWrite(litetx::TxnContext& tx, const std::vector<lb::Output>& outs) {
  for (const auto& o : outs) {
    if (Status s = tx.Insert(kOut, o.item->key, json::object{{"v", o.value}}); !s.ok()) return s;
  }
  return Status::Ok();
}

bool StoreEmpty(Rig& rig) {
  return ltxtest::ScanAll(*rig.mem, kState).empty() &&
         ltxtest::ScanAll(*rig.mem, litetx::kTransactionsCollection).empty() &&
         ltxtest::ScanAll(*rig.mem, kOut).empty();
}

// Names the step refuses, before it writes anything, and the edges it accepts.
TEST(BatchHostileInput, JobAndStepNames) {
  const std::vector<std::pair<std::string, std::string>> refused{
      {"", "empty"},
      {"a/b", "slash"},
      {"/", "only a slash"},
      {"a\nb", "newline"},
      {std::string("a\0b", 3), "NUL"},
      {"a\x01", "control character"},
      {"a\x1f", "unit separator"},
      {"a\x7f", "DEL"},
      {std::string(129, 'j'), "129 bytes"},
      {"\xff\xfe", "not UTF-8"},
      {"a\xc3", "truncated UTF-8"},
  };
  for (const auto& [name, why] : refused) {
    for (bool as_step : {false, true}) {
      SCOPED_TRACE(std::string(as_step ? "step" : "job") + " name: " + why);
      Rig rig;
      auto db = rig.Db();
      lb::StepOptions o = StepOpts(Mode::kSequential);
      (as_step ? o.step : o.job) = name;
      lb::VectorReader reader(Items());
      auto ex = std::make_shared<Exec>();
      auto r = lb::RunStep(*db, reader, Functions(ex), o);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
      auto st = lb::ReadStepStatus(*db, o);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.status().code(), Code::kInvalidArgument);
      EXPECT_TRUE(StoreEmpty(rig));
    }
  }
  for (const std::string& coll :
       {std::string(), std::string(litetx::kTransactionsCollection), std::string("__litetx.x"),
        std::string(129, 'c')}) {
    SCOPED_TRACE("state collection \"" + coll + "\"");
    Rig rig;
    auto db = rig.Db();
    lb::StepOptions o = StepOpts(Mode::kSequential);
    o.state_collection = coll;
    lb::VectorReader reader(Items());
    auto r = lb::RunStep(*db, reader, Functions(std::make_shared<Exec>()), o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
    EXPECT_TRUE(StoreEmpty(rig));
  }
  // Accepted edges: 128 bytes each, multibyte UTF-8, dots, spaces. Each runs to the end on its
  // own state; two names that differ only in a trailing space are two steps.
  const std::vector<std::pair<std::string, std::string>> accepted{
      {std::string(128, 'j'), std::string(128, 's')},
      {"\xe6\x89\xb9\xe5\xa4\x84\xe7\x90\x86", "\xf0\x9f\x93\xa6"},
      {"..", "."},
      {"job 1", "step"},
      {"job 1 ", "step"},
  };
  Rig rig;
  for (const auto& [job, step] : accepted) {
    SCOPED_TRACE("job \"" + job + "\" step \"" + step + "\"");
    auto db = rig.Db();
    lb::StepOptions o = StepOpts(Mode::kSequential, job);
    o.step = step;
    lb::VectorReader reader(Items(5));
    lb::StepFunctions fns;
    fns.write = [&](litetx::TxnContext& tx, const std::vector<lb::Output>& outs) -> Status {
      for (const auto& out : outs) {
        if (Status s = Upsert(tx, kOut, out.item->key, json::object{}); !s.ok()) return s;
      }
      return Status::Ok();
    };
    auto r = lb::RunStep(*db, reader, fns, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->status.ok()) << r->status.ToString();
    EXPECT_FALSE(r->already_complete);
    EXPECT_EQ(r->total.written, 5u);
    auto st = lb::ReadStepStatus(*db, o);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->status, "completed");
  }
  // Every step wrote every item once more: five steps, times 5.
  auto db = rig.Db();
  auto outs = FoundDocs(*rig.mem, *db, kOut);
  ASSERT_EQ(outs.size(), 5u);
  for (const auto& [id, d] : outs) EXPECT_EQ(d.at("times").as_int64(), 5) << id;
}

// A reader that returns one item twice (the same key) and makes up the positions. The step
// numbers positions itself; the duplicate's insert conflicts, and after the retries it is
// recovered into a dead letter; every other item is written once.
TEST(BatchHostileInput, ReaderReturnsAnItemTwiceWithMadeUpPositions) {
  Rig rig;
  std::vector<lb::Item> items;
  for (int i = 0; i < 6; ++i) {
    items.push_back(lb::Item{0, ItemKey(i), json::object{{"n", i}}});
    if (i == 3) items.push_back(lb::Item{0, ItemKey(i), json::object{{"n", i}}});
  }
  HookReader reader(items);
  reader.position_override = 42;
  lb::StepFunctions fns;
  fns.write = InsertWrite;
  fns.recover = [](litetx::TxnContext& tx, const lb::Item& item, const Status& why) -> Status {
    return tx.Insert(kDead, item.key + "@" + std::to_string(item.position),
                     json::object{{"code", litetx::CodeName(why.code())}});
  };
  lb::StepOptions o = StepOpts(Mode::kSequential);
  auto db = rig.Db();
  auto r = lb::RunStep(*db, reader, fns, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->status.ok()) << r->status.ToString();
  EXPECT_EQ(r->total.read, 7u);
  EXPECT_EQ(r->total.written, 6u);
  EXPECT_EQ(r->total.recovered, 1u);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_EQ(r->skipped[0].position, 4u);  // the step's position, not the reader's 42
  EXPECT_EQ(r->skipped[0].key, "i03");
  auto outs = FoundDocs(*rig.mem, *db, kOut);
  EXPECT_EQ(outs.size(), 6u);
  auto dead = FoundDocs(*rig.mem, *db, kDead);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead.begin()->first, "i03@4");
  auto skip = db->Read(kState, SkipId(4));
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(skip->state, litetx::DocumentState::kFound);
}

// A reader that cannot restore: at the start (RunStep refuses, the stored progress stays), and
// at a chunk committed above the watermark (the step fails; the chunk before it stays
// committed). A restart with a working reader then ends exactly once.
TEST(BatchHostileInput, ReaderWhoseRestoreFails) {
  {
    SCOPED_TRACE("at the watermark");
    Rig rig;
    auto ex = std::make_shared<Exec>();
    ex->fail_process = [](const lb::Item& item) -> std::optional<Status> {
      if (N(item) == 9) return Status::Corruption("item 9 unreadable");
      return std::nullopt;
    };
    auto db = rig.Db();
    auto first = RunExec(*db, Mode::kSequential, ex);
    ASSERT_TRUE(first.ok());
    ASSERT_EQ(first->status.code(), Code::kCorruption);
    EXPECT_EQ(first->chunks, 2u);
    auto before = lb::ReadStepStatus(*db, StepOpts(Mode::kSequential));
    ASSERT_TRUE(before.ok());
    EXPECT_EQ(before->status, "failed");
    EXPECT_EQ(CountsText(before->total), CountsText(first->total));
    HookReader reader(Items());
    reader.restore_failure = Status::Unavailable("the input cannot be opened");
    auto r = lb::RunStep(*db, reader, Functions(std::make_shared<Exec>()),
                         StepOpts(Mode::kSequential));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
    EXPECT_EQ(reader.restores, 1);
    auto after = lb::ReadStepStatus(*db, StepOpts(Mode::kSequential));
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(CountsText(after->total), CountsText(before->total));
    EXPECT_EQ(after->chunks, before->chunks);
    auto done = RunExec(*db, Mode::kSequential);
    ASSERT_TRUE(done.ok() && done->status.ok());
    auto bad = Verify(rig, Mode::kSequential, &*done);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
  {
    SCOPED_TRACE("at a chunk committed above the watermark");
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
      return Status::Corruption("item 0 unreadable");
    };
    auto db = rig.Db();
    auto first = RunExec(*db, Mode::kConcurrent, ex, &o);
    ASSERT_TRUE(first.ok());
    ASSERT_EQ(first->status.code(), Code::kCorruption);
    HookReader reader(Items());
    reader.restore_failure = Status::Unavailable("the input cannot be opened");
    auto r = lb::RunStep(*db, reader, Functions(std::make_shared<Exec>()),
                         StepOpts(Mode::kSequential));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status.code(), Code::kFailedPrecondition) << r->status.ToString();
    EXPECT_EQ(r->chunks, 3u);  // its chunk 0, and chunks 1 and 2 of the first execution
    auto st = lb::ReadStepStatus(*db, StepOpts(Mode::kSequential));
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->status, "failed");
    EXPECT_NE(st->last_error.find("cannot resume"), std::string::npos) << st->last_error;
    auto done = RunExec(*db, Mode::kSequential);
    ASSERT_TRUE(done.ok() && done->status.ok());
    auto bad = Verify(rig, Mode::kSequential, &*done);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
}

// Exceptions from the reader (on the step's thread) and from the processor and writer (on
// worker threads): they propagate out of RunStep after the workers are joined; a restart ends
// exactly once.
TEST(BatchHostileInput, ReaderProcessorAndWriterThatThrow) {
  for (Mode mode : kModes) {
    for (const char* where : {"reader", "processor", "writer"}) {
      SCOPED_TRACE(std::string(ModeName(mode)) + ", " + where + " throws");
      Rig rig;
      {
        auto db = rig.Db();
        HookReader reader(Items());
        auto ex = std::make_shared<Exec>();
        ex->mode = mode;
        if (std::string(where) == "reader") {
          reader.on_read = [](int reads) {
            if (reads == 9) throw std::runtime_error("reader failed");
          };
        } else if (std::string(where) == "processor") {
          ex->on_process = [](const lb::Item& item) {
            if (N(item) == 10) throw std::runtime_error("processor failed");
          };
        } else {
          ex->on_write = [](const std::vector<lb::Output>& outs) {
            for (const auto& o : outs) {
              if (N(*o.item) == 11) throw std::runtime_error("writer failed");
            }
          };
        }
        EXPECT_THROW((void)lb::RunStep(*db, reader, Functions(ex), StepOpts(mode)),
                     std::runtime_error);
      }
      ASSERT_TRUE(rig.Settle().ok());
      auto db = rig.Db();
      auto r = RunExec(*db, mode);
      ASSERT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->status : r.status()).ToString();
      auto bad = Verify(rig, mode, &*r);
      EXPECT_TRUE(bad.empty()) << Join(bad);
    }
  }
}

// A checkpoint near the document size limit. The chunk document and the step document each
// hold a copy, and while a transaction holds the step document its prior checkpoint is kept
// beside the new one, so a checkpoint must fit in about half a document. One that does runs to
// the end; larger ones fail the step with the engine's kInvalidArgument naming the size (at the
// second chunk, or at the first one when even the chunk document cannot hold it); a restart
// with a reader whose checkpoints are small ends exactly once.
TEST(BatchHostileInput, CheckpointNearTheDocumentSizeLimit) {
  const std::size_t limit = litetx::Options{}.max_document_bytes;
  {
    SCOPED_TRACE("a checkpoint of 0.45 of the limit");
    Rig rig;
    auto db = rig.Db();
    HookReader reader(Items());
    reader.pad_bytes = limit * 45 / 100;
    auto r = lb::RunStep(*db, reader, Functions(std::make_shared<Exec>()),
                         StepOpts(Mode::kSequential));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->status.ok()) << r->status.ToString();
    auto bad = Verify(rig, Mode::kSequential, &*r);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
  for (const auto& [pad, chunks] : {std::pair<std::size_t, std::uint64_t>{limit * 6 / 10, 1},
                                    std::pair<std::size_t, std::uint64_t>{limit + 1, 0}}) {
    SCOPED_TRACE("a checkpoint of " + std::to_string(pad) + " bytes");
    Rig rig;
    auto db = rig.Db();
    HookReader reader(Items());
    reader.pad_bytes = pad;
    auto r = lb::RunStep(*db, reader, Functions(std::make_shared<Exec>()),
                         StepOpts(Mode::kSequential));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status.code(), Code::kInvalidArgument) << r->status.ToString();
    EXPECT_NE(r->status.message().find("over the limit"), std::string::npos)
        << r->status.ToString();
    EXPECT_EQ(r->status.message().find("another execution"), std::string::npos)
        << r->status.ToString();
    EXPECT_EQ(r->chunks, chunks);
    auto st = lb::ReadStepStatus(*db, StepOpts(Mode::kSequential));
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->status, "failed");
    // The same step with small checkpoints (in the same form) then runs to the end.
    HookReader sane(Items());
    sane.pad_bytes = 1;
    auto done = lb::RunStep(*db, sane, Functions(std::make_shared<Exec>()),
                            StepOpts(Mode::kSequential));
    ASSERT_TRUE(done.ok() && done->status.ok())
        << (done.ok() ? done->status : done.status()).ToString();
    auto bad = Verify(rig, Mode::kSequential, &*done);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
}

// A checkpoint nested deeper than a document may be: the step fails with the engine's
// kInvalidArgument, not with a chunk "committed by another execution".
TEST(BatchHostileInput, CheckpointNestedTooDeep) {
  for (Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    Rig rig;
    auto db = rig.Db();
    HookReader reader(Items());
    reader.nest_levels = litetx::Options{}.max_nesting_depth + 10;
    auto ex = std::make_shared<Exec>();
    ex->mode = mode;
    auto r = lb::RunStep(*db, reader, Functions(ex), StepOpts(mode));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status.code(), Code::kInvalidArgument) << r->status.ToString();
    EXPECT_EQ(r->status.message().find("another execution"), std::string::npos)
        << r->status.ToString();
    EXPECT_EQ(r->chunks, 0u);
    HookReader sane(Items());
    sane.pad_bytes = 1;
    auto done = lb::RunStep(*db, sane, Functions(ex), StepOpts(mode));
    ASSERT_TRUE(done.ok() && done->status.ok())
        << (done.ok() ? done->status : done.status()).ToString();
    auto bad = Verify(rig, mode, &*done);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
}

// Items that are not objects: arrays, strings, numbers, null, booleans. The output wraps them;
// the null item is rejected by the processor and skipped, its skip record holding it.
TEST(BatchHostileInput, ItemsThatAreNotObjects) {
  Rig rig;
  const std::vector<json::value> values{json::array{1, 2}, "text", 42, nullptr, true, 3.5,
                                        json::object{}, json::array{}};
  std::vector<lb::Item> items;
  for (std::size_t i = 0; i < values.size(); ++i) items.push_back(lb::Item{0, "", values[i]});
  lb::VectorReader reader(items);
  lb::StepFunctions fns;
  fns.process = [](litetx::TxnContext&, const lb::Item& item)
      -> litetx::Result<std::optional<json::value>> {
    if (item.value.is_null()) return Status::InvalidArgument("null item");
    return std::optional<json::value>(item.value);
  };
  fns.write = InsertWrite;
  lb::StepOptions o = StepOpts(Mode::kSequential);
  auto db = rig.Db();
  auto r = lb::RunStep(*db, reader, fns, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->status.ok()) << r->status.ToString();
  EXPECT_EQ(r->total.written, values.size() - 1);
  EXPECT_EQ(r->total.process_skips, 1u);
  auto outs = FoundDocs(*rig.mem, *db, kOut);
  ASSERT_EQ(outs.size(), values.size() - 1);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_null()) continue;
    auto it = outs.find(std::to_string(i));  // the key is the decimal position
    ASSERT_NE(it, outs.end()) << i;
    EXPECT_EQ(it->second.at("v"), values[i]);
  }
  auto skip = db->Read(kState, SkipId(3));
  ASSERT_TRUE(skip.ok());
  ASSERT_EQ(skip->state, litetx::DocumentState::kFound);
  EXPECT_TRUE(skip->doc.at("item").is_null());
}

// Poison items that cannot be stored in their skip records — nested deeper than a document
// may be, or larger than a document — in a chunk and item by item: each is still skipped (its
// record says why the item is not in it), and the step goes on.
TEST(BatchHostileInput, PoisonItemsTooDeepOrTooLargeForTheirSkipRecords) {
  for (Mode mode : {Mode::kSequential, Mode::kPerItem}) {
    SCOPED_TRACE(ModeName(mode));
    Rig rig;
    ltxtest::DeepStorage deep;
    std::vector<lb::Item> items = Items(6);
    items[2].value = json::object{
        {"n", 2},
        {"payload", json::value(ltxtest::Nested(litetx::kMaxNestingDepth + 20, false, deep.ptr()))}};
    items[4].value = json::object{
        {"n", 4}, {"payload", std::string(litetx::Options{}.max_document_bytes + 10, 'x')}};
    lb::VectorReader reader(items);
    lb::StepFunctions fns;
    fns.process = [](litetx::TxnContext&, const lb::Item& item)
        -> litetx::Result<std::optional<json::value>> {
      if (item.value.as_object().contains("payload")) return Status::InvalidArgument("poison");
      return std::optional<json::value>(item.value);
    };
    fns.write = InsertWrite;
    auto db = rig.Db();
    auto r = lb::RunStep(*db, reader, fns, StepOpts(mode));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->status.ok()) << r->status.ToString();
    EXPECT_EQ(r->total.process_skips, 2u);
    EXPECT_EQ(FoundDocs(*rig.mem, *db, kOut).size(), 4u);
    for (std::uint64_t p : {2u, 4u}) {
      auto rec = db->Read(kState, SkipId(p));
      ASSERT_TRUE(rec.ok());
      ASSERT_EQ(rec->state, litetx::DocumentState::kFound) << p;
      EXPECT_FALSE(rec->doc.contains("item")) << p;
      EXPECT_TRUE(rec->doc.contains("item_omitted")) << p;
    }
    for (auto& it : items) ltxtest::TearDown(it.value);
  }
}

// A writer that writes into the step's own state, inside the chunk's transaction: the chunk
// document's id, the step document's owner. The chunk rolls back whole (none of its outputs
// land), the step fails, and a restart with a sane writer ends exactly once.
TEST(BatchHostileInput, WriterWritesIntoTheStepsOwnState) {
  struct Case {
    const char* name;
    std::function<Status(litetx::TxnContext&, int chunk)> sabotage;
  };
  const std::vector<Case> cases{
      {"inserts the chunk document",
       [](litetx::TxnContext& tx, int k) {
         return tx.Insert(kState, ChunkId(static_cast<std::uint64_t>(k)),
                          json::object{{"k", k}, {"begin", 0}, {"end", 100}});
       }},
      {"takes the step document over",
       [](litetx::TxnContext& tx, int) {
         return tx.Update(kState, StepId(), json::object{{"owner", "someone-else"}});
       }},
      {"rewrites the step's totals",
       [](litetx::TxnContext& tx, int) {
         return tx.Update(kState, StepId(),
                          json::object{{"totals", json::object{{"read", "lots"}}}});
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Rig rig;
    {
      auto ex = std::make_shared<Exec>();
      ex->mode = Mode::kSequential;
      lb::StepFunctions fns = Functions(ex);
      auto inner = fns.write;
      fns.write = [&, inner](litetx::TxnContext& tx, const std::vector<lb::Output>& outs) {
        if (Status s = inner(tx, outs); !s.ok()) return s;
        const int k = ChunkOf(*outs.front().item);
        if (k == 1) return c.sabotage(tx, k);
        return Status::Ok();
      };
      auto db = rig.Db();
      lb::VectorReader reader(Items());
      auto r = lb::RunStep(*db, reader, fns, StepOpts(Mode::kSequential));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_FALSE(r->status.ok());
      EXPECT_EQ(r->chunks, 1u);
      auto outs = FoundDocs(*rig.mem, *db, kOut);
      for (const auto& [id, d] : outs) {
        EXPECT_EQ(d.at("n").to_number<int>() / 4, 0) << id << " of chunk 1 landed";
      }
    }
    auto db = rig.Db();
    auto r = RunExec(*db, Mode::kSequential);
    ASSERT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->status : r.status()).ToString();
    auto bad = Verify(rig, Mode::kSequential, &*r);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
}

// A processor that opens nested scopes recursively deep, writes a trail on its way down and a
// document in the innermost scope; for odd items the innermost scope fails, and everything the
// item's scopes wrote is undone (the processor then filters the item out).
TEST(BatchHostileInput, ProcessorNestsScopesRecursivelyDeep) {
  const int depth = LongRun() ? 5'000 : 2'000;
  for (Mode mode : {Mode::kSequential, Mode::kConcurrent, Mode::kPerItem}) {
    SCOPED_TRACE(std::string(ModeName(mode)) + ", depth " + std::to_string(depth));
    Rig rig;
    lb::StepFunctions fns;
    fns.process = [depth](litetx::TxnContext& tx, const lb::Item& item)
        -> litetx::Result<std::optional<json::value>> {
      const int n = N(item);
      std::function<Status(litetx::TxnContext&, int)> dive = [&](litetx::TxnContext& t,
                                                                  int level) -> Status {
        if (level == depth) {
          if (Status s = t.Insert("deep", item.key, json::object{{"n", n}}); !s.ok()) return s;
          return n % 2 == 1 ? Status::FailedPrecondition("odd") : Status::Ok();
        }
        if (level % 100 == 0) {
          if (Status s = t.Insert("trail", item.key + "-" + std::to_string(level),
                                  json::object{{"n", n}});
              !s.ok()) {
            return s;
          }
        }
        return t.Nested([&](litetx::TxnContext& in) { return dive(in, level + 1); });
      };
      if (Status s = tx.Nested([&](litetx::TxnContext& in) { return dive(in, 1); }); !s.ok()) {
        if (s.code() == Code::kFailedPrecondition) return std::optional<json::value>{};
        return s;
      }
      return std::optional<json::value>(item.value);
    };
    fns.write = InsertWrite;
    auto db = rig.Db();
    lb::VectorReader reader(Items(8));
    lb::StepOptions o = StepOpts(mode);
    o.commit_interval = 2;
    auto r = lb::RunStep(*db, reader, fns, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->status.ok()) << r->status.ToString();
    EXPECT_EQ(r->total.written, 4u);
    EXPECT_EQ(r->total.filtered, 4u);
    auto deep_docs = FoundDocs(*rig.mem, *db, "deep");
    auto trail = FoundDocs(*rig.mem, *db, "trail");
    EXPECT_EQ(deep_docs.size(), 4u);
    EXPECT_EQ(trail.size(), static_cast<std::size_t>(4 * ((depth - 1) / 100)));
    for (const auto& [id, d] : deep_docs) EXPECT_EQ(d.at("n").to_number<int>() % 2, 0) << id;
    for (const auto& [id, d] : trail) EXPECT_EQ(d.at("n").to_number<int>() % 2, 0) << id;
  }
}

// commit_interval beyond what one transaction may hold (Options::max_actions): without skip or
// recovery the step fails at once with the engine's kInvalidArgument naming the limit; with
// them it writes each chunk item by item and ends exactly once. Never a hang.
TEST(BatchHostileInput, ChunkLargerThanATransactionMayBe) {
  {
    SCOPED_TRACE("no skip, no recovery");
    Rig rig;
    litetx::Options opts = rig.Opts();
    opts.max_actions = 4;
    litetx::Database db(rig.mem, opts);
    lb::StepOptions o = StepOpts(Mode::kSequential);
    o.skip.skip_limit = 0;
    lb::VectorReader reader(Items());
    lb::StepFunctions fns;
    fns.write = InsertWrite;
    const auto started = std::chrono::steady_clock::now();
    auto r = lb::RunStep(db, reader, fns, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status.code(), Code::kInvalidArgument) << r->status.ToString();
    EXPECT_NE(r->status.message().find("limit"), std::string::npos) << r->status.ToString();
    EXPECT_EQ(r->chunks, 0u);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  }
  {
    SCOPED_TRACE("with skip and recovery: item by item");
    Rig rig;
    litetx::Options opts = rig.Opts();
    opts.max_actions = 4;
    litetx::Database db(rig.mem, opts);
    auto r = RunExec(db, Mode::kSequential);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->status.ok()) << r->status.ToString();
    auto bad = Verify(rig, Mode::kSequential, &*r);
    EXPECT_TRUE(bad.empty()) << Join(bad);
    // Every chunk of four items went item by item (a scan marker each); the last chunk, of two
    // items, fits in a transaction.
    auto check = rig.Db();
    for (std::uint64_t k = 0; k < 4; ++k) {
      auto m = check->Read(kState, ScanId(k));
      ASSERT_TRUE(m.ok());
      EXPECT_EQ(m->state == litetx::DocumentState::kFound, k < 3) << "chunk " << k;
    }
  }
}

// The widest concurrency allowed, and one past it.
TEST(BatchHostileInput, Concurrency1024) {
  for (Mode mode : {Mode::kConcurrent, Mode::kPerItem}) {
    SCOPED_TRACE(ModeName(mode));
    Rig rig;
    lb::StepOptions o = StepOpts(mode);
    o.concurrency = 1024;
    auto db = rig.Db();
    const auto started = std::chrono::steady_clock::now();
    auto r = RunExec(*db, mode, nullptr, &o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->status.ok()) << r->status.ToString();
    auto bad = Verify(rig, mode, &*r);
    EXPECT_TRUE(bad.empty()) << Join(bad);
    std::printf("[ hostile  ] %s, concurrency 1024: %.2f s\n", ModeName(mode),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    o.concurrency = 1025;
    auto refused = RunExec(*db, mode, nullptr, &o);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace battack
