// tests/read_test.cpp — Database::Read: read committed in every intermediate state of a commit
// and of a rollback (always the full before- or after-image of every document, never a mix,
// never back), read uncommitted (the raw document with holder and deleting flag), documents
// held by pending / committed / aborted transactions, and Read's error outcomes.
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::DocumentState;
using litetx::Isolation;
using litetx::Transaction;
using litetx::engine::TxnRecord;
using litetx::engine::TxnState;

struct Watched {
  Key key;
  Image before;
  Image after;
  Image rolled_back;  // the before-image with the version a rollback gives it
};

struct Observation {
  std::vector<Image> committed;                // per watched document
  std::vector<litetx::ReadResult> uncommitted;  // per watched document
  bool any_held = false;
};

// After every successful write the engine makes, reads every watched document through a second
// Database on the inner store and checks the images.
class ProbeTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    MustCommit(*reader, Transaction()
                            .Insert("c", "upd", Obj(R"({"a":1,"b":2})"))
                            .Insert("c", "adj", Obj(R"({"n":10})"), 3)
                            .Insert("c", "del", Obj(R"({"z":"keep"})")));
    hook->after = [this](const Call& c, const Status& s) -> std::optional<Status> {
      if (s.ok() && c.is_write()) Probe(c);
      return std::nullopt;
    };
    watched = {
        {{"c", "new"}, NotFoundImage(), Found(V(1), Obj(R"({"fresh":1})"), 2), NotFoundImage()},
        {{"c", "upd"}, Found(V(1), Obj(R"({"a":1,"b":2})")), Found(V(2), Obj(R"({"a":5,"c":3})"), 4),
         Found(V(3), Obj(R"({"a":1,"b":2})"))},
        {{"c", "adj"}, Found(V(1), Obj(R"({"n":10})"), 3), Found(V(2), Obj(R"({"n":3})"), 3),
         Found(V(3), Obj(R"({"n":10})"), 3)},
        {{"c", "del"}, Found(V(1), Obj(R"({"z":"keep"})")), DeletedImage(V(3)),
         Found(V(3), Obj(R"({"z":"keep"})"))},
    };
  }

  Transaction Mixed() const {
    return Transaction()
        .Insert("c", "new", Obj(R"({"fresh":1})"), 2)
        .Update("c", "upd", Obj(R"({"a":5,"c":3})"), {"b"}, V(1), 4)
        .Adjust("c", "adj", Obj(R"({"n":-7})"), V(1))
        .Delete("c", "del", V(1));
  }

  void Probe(const Call& c) {
    std::string where = std::string(OpName(c.op)) + " " + c.key.collection + "/" + c.key.id +
                        " (write " + std::to_string(obs.size() + 1) + ")";
    Observation o;
    int n_after = 0, n_before = 0;
    for (const auto& w : watched) {
      Image img = ReadImage(*reader, w.key.collection, w.key.id);
      if (img == w.after) {
        ++n_after;
      } else if (img == w.before || img == w.rolled_back) {
        ++n_before;
      } else {
        ADD_FAILURE() << "after " << where << ": " << w.key.id << " reads " << img
                      << ", neither before " << w.before << " nor after " << w.after;
      }
      o.committed.push_back(img);
      // Read uncommitted shows the raw document.
      auto u = reader->Read(w.key.collection, w.key.id, {Isolation::kReadUncommitted});
      EXPECT_TRUE(u.ok()) << u.status().ToString();
      auto raw = Raw(*mem, w.key);
      if (u.ok() && raw) {
        auto m = litetx::engine::DecodeMeta(*raw);
        EXPECT_EQ(u->txn, m->txn) << where;
        EXPECT_EQ(u->deleting, m->deleting) << where;
        o.any_held = o.any_held || !m->txn.empty();
        if (m->live()) {
          EXPECT_EQ(u->state, DocumentState::kFound) << where;
          EXPECT_EQ(u->version, m->version) << where;
          EXPECT_EQ(u->doc, litetx::engine::UserFields(*raw)) << where;
        }
      }
      if (u.ok()) o.uncommitted.push_back(*u);
    }
    EXPECT_FALSE(n_after > 0 && n_before > 0)
        << "after " << where << ": " << n_after << " documents read new and " << n_before << " old";
    if (n_after > 0) {
      seen_after = true;
    } else if (seen_after) {
      ADD_FAILURE() << "after " << where << ": back to the old images after the new ones showed";
    }
    obs.push_back(std::move(o));
  }

  std::shared_ptr<HookStore> hook = std::make_shared<HookStore>(mem);
  litetx::Database db{hook, Opts()};
  std::unique_ptr<litetx::Database> reader = Direct();
  std::vector<Watched> watched;
  std::vector<Observation> obs;
  bool seen_after = false;
};

TEST_F(ProbeTest, CommitShowsBeforeThenAfterAndNothingElse) {
  auto info = MustCommit(db, Mixed());
  // record, 4 applies, commit point, 4 finishes, erase
  ASSERT_EQ(obs.size(), 11u);
  for (std::size_t i = 0; i < obs.size(); ++i) {
    for (std::size_t d = 0; d < watched.size(); ++d) {
      const Image& want = i < 5 ? watched[d].before : watched[d].after;
      EXPECT_EQ(obs[i].committed[d], want) << "write " << i + 1 << ", " << watched[d].key.id;
    }
  }
  // After the four applies (write 5): everything held, still pending.
  const Observation& pending = obs[4];
  ASSERT_EQ(pending.uncommitted.size(), 4u);
  for (const auto& u : pending.uncommitted) EXPECT_EQ(u.txn, info.txn_id);
  EXPECT_EQ(ImageOf(pending.uncommitted[0]), Found(V(1), Obj(R"({"fresh":1})"), 2));
  EXPECT_EQ(ImageOf(pending.uncommitted[1]), Found(V(2), Obj(R"({"a":5,"c":3})"), 4));
  EXPECT_EQ(ImageOf(pending.uncommitted[2]), Found(V(2), Obj(R"({"n":3})"), 3));
  EXPECT_EQ(ImageOf(pending.uncommitted[3]), Found(V(2), Obj(R"({"z":"keep"})")));
  EXPECT_TRUE(pending.uncommitted[3].deleting);
  EXPECT_FALSE(pending.uncommitted[1].deleting);
  // After the commit point (write 6): still held, now read as committed.
  EXPECT_TRUE(obs[5].any_held);
  EXPECT_EQ(obs[5].uncommitted[3].txn, info.txn_id);
  // At the end nothing is held; the tombstone reads deleted uncommitted too.
  EXPECT_FALSE(obs.back().any_held);
  EXPECT_EQ(obs.back().uncommitted[3].state, DocumentState::kDeleted);
  EXPECT_EQ(obs.back().uncommitted[3].version, V(3));
  ExpectClean(*mem, {"c"});
}

TEST_F(ProbeTest, RollbackNeverShowsTheNewImages) {
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point()) return Status::Unavailable("injected");
    return std::nullopt;
  };
  auto r = db.Commit(Mixed());
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  // record, 4 applies, abort flip, 4 reverses, erase
  ASSERT_EQ(obs.size(), 11u);
  EXPECT_FALSE(seen_after);
  EXPECT_TRUE(obs[5].any_held);  // aborted but not yet reversed: pre-images from the worklist
  for (std::size_t d = 0; d < watched.size(); ++d) {
    EXPECT_EQ(obs[5].committed[d], watched[d].before) << watched[d].key.id;
    EXPECT_EQ(obs.back().committed[d], watched[d].rolled_back) << watched[d].key.id;
  }
  ExpectClean(*mem, {"c"});
}

class ReadTest : public ::testing::Test, public World {
 protected:
  std::unique_ptr<litetx::Database> db = Direct();
};

TEST_F(ReadTest, AbsentDeletedAndGoneDocuments) {
  auto r = db->Read("c", "none");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ImageOf(*r), NotFoundImage());
  EXPECT_EQ(r->txn, "");
  MustCommit(*db, Transaction().Insert("c", "t", {{"x", 1}}));
  MustCommit(*db, Transaction().Delete("c", "t"));
  EXPECT_EQ(ReadImage(*db, "c", "t"), DeletedImage(V(3)));
  EXPECT_EQ(ReadImage(*db, "c", "t", Isolation::kReadUncommitted), DeletedImage(V(3)));
  litetx::engine::Meta gone = LiveMeta(4, 0);
  gone.gone = true;
  PutMeta(*mem, {"c", "g"}, {}, gone);
  EXPECT_EQ(ReadImage(*db, "c", "g"), NotFoundImage());
  EXPECT_EQ(ReadImage(*db, "c", "g", Isolation::kReadUncommitted), NotFoundImage());
}

// c/h held by transaction "t1" whose record is in each state: an update {"n":1} -> {"n":2}
// and c/d held by a pending delete.
class HeldReadTest : public ReadTest, public ::testing::WithParamInterface<TxnState> {
 protected:
  void SetUp() override {
    litetx::engine::WorkAction upd;
    upd.type = litetx::ActionType::kUpdate;
    upd.key = {"c", "h"};
    upd.prior = litetx::engine::Prior::kLive;
    upd.prior_version = 4;
    upd.prior_schema = 1;
    upd.fields = Obj(R"({"n":2,"m":1})");
    upd.restore = Obj(R"({"n":1})");
    upd.remove = {"m"};
    litetx::engine::WorkAction del;
    del.type = litetx::ActionType::kDelete;
    del.key = {"c", "d"};
    del.prior = litetx::engine::Prior::kLive;
    del.prior_version = 7;
    del.prior_schema = 2;
    TxnRecord rec;
    rec.state = GetParam();
    rec.actions = {upd, del};
    PutRaw(*mem, TxnKey("t1"), litetx::engine::EncodeRecord(rec));
    auto mh = LiveMeta(5);
    mh.txn = "t1";
    PutMeta(*mem, {"c", "h"}, Obj(R"({"n":2,"m":1,"k":0})"), mh);
    auto md = LiveMeta(8, 2);
    md.txn = "t1";
    md.deleting = true;
    PutMeta(*mem, {"c", "d"}, Obj(R"({"q":1})"), md);
  }
};

TEST_P(HeldReadTest, ReadCommittedResolvesThroughTheRecord) {
  bool committed = GetParam() == TxnState::kCommitted;
  EXPECT_EQ(ReadImage(*db, "c", "h"), committed ? Found(5, Obj(R"({"n":2,"m":1,"k":0})"))
                                                 : Found(4, Obj(R"({"n":1,"k":0})")));
  EXPECT_EQ(ReadImage(*db, "c", "d"), committed ? DeletedImage(9) : Found(7, Obj(R"({"q":1})"), 2));
  auto u = db->Read("c", "d", {Isolation::kReadUncommitted});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(ImageOf(*u), Found(8, Obj(R"({"q":1})"), 2));
  EXPECT_EQ(u->txn, "t1");
  EXPECT_TRUE(u->deleting);
  auto uh = db->Read("c", "h", {Isolation::kReadUncommitted});
  ASSERT_TRUE(uh.ok());
  EXPECT_EQ(ImageOf(*uh), Found(5, Obj(R"({"n":2,"m":1,"k":0})")));
  EXPECT_EQ(uh->txn, "t1");
  EXPECT_FALSE(uh->deleting);
}

INSTANTIATE_TEST_SUITE_P(States, HeldReadTest,
                         ::testing::Values(TxnState::kPending, TxnState::kCommitted,
                                           TxnState::kAborted),
                         [](const ::testing::TestParamInfo<TxnState>& i) {
                           return std::string(litetx::engine::TxnStateName(i.param));
                         });

TEST_F(ReadTest, HolderFinishingBetweenTheTwoReadsIsReadAgain) {
  auto hook = std::make_shared<HookStore>(mem);
  litetx::Database hdb(hook, Opts());
  auto m = LiveMeta(2);
  m.txn = "t2";
  PutMeta(*mem, {"c", "x"}, Obj(R"({"v":"new"})"), m);
  // No record: the holder finished the document and erased its record just before our look.
  hook->before = [this](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kGet && c.on_record() && c.nth == 1) {
      PutMeta(*mem, {"c", "x"}, Obj(R"({"v":"new"})"), LiveMeta(2));
    }
    return std::nullopt;
  };
  EXPECT_EQ(ReadImage(hdb, "c", "x"), Found(2, Obj(R"({"v":"new"})")));
  EXPECT_EQ(hook->calls(Op::kGet, {"c", "x"}), 2);
}

// The holder's record is an outcome marker and the document still carries the hold when read
// again: a dangling hold (a write that landed after its transaction was over), read through
// its own undo data, whatever the outcome; the document is read twice. (A committed holder
// gone by the second read gives the first read's image: FinisherBatchTest.CommittedMarker...)
TEST_F(ReadTest, HolderWhoseRecordIsAnOutcomeMarkerIsResolvedByIt) {
  struct Case {
    TxnState state;
    bool fence;
    Image want;
    int gets;
  };
  const Case cases[] = {{TxnState::kCommitted, false, Found(4, Obj(R"({"n":2})")), 2},
                        {TxnState::kAborted, false, Found(4, Obj(R"({"n":2})")), 2},
                        {TxnState::kAborted, true, Found(4, Obj(R"({"n":2})")), 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(litetx::engine::TxnStateName(c.state)) + (c.fence ? " fence" : ""));
    const std::string txn = "0123456789abcdef0123456" + std::to_string(c.state == TxnState::kCommitted) +
                            std::to_string(c.fence);
    HoldLive(*mem, {"c", "m"}, Obj(R"({"n":2})"), 5, txn, 0);
    TxnRecord marker;
    marker.state = c.state;
    marker.done = true;
    marker.done_at_ms = 1;
    marker.fence = c.fence;
    PutRaw(*mem, TxnKey(txn), litetx::engine::EncodeRecord(marker));
    auto hook = std::make_shared<HookStore>(mem);
    litetx::Database hdb(hook, Opts());
    EXPECT_EQ(ReadImage(hdb, "c", "m"), c.want);
    EXPECT_EQ(hook->calls(Op::kGet, {"c", "m"}), c.gets);
    EXPECT_EQ(MetaOf(*mem, "c", "m").txn, txn);  // reads never write
  }
}

TEST_F(ReadTest, DanglingOrMalformedHolderIsCorruption) {
  auto m = LiveMeta(2);
  m.txn = "missing";
  PutMeta(*mem, {"c", "dangling"}, {}, m);
  EXPECT_EQ(db->Read("c", "dangling").code(), Code::kCorruption);
  // Read uncommitted does not look at the record.
  EXPECT_TRUE(db->Read("c", "dangling", {Isolation::kReadUncommitted}).ok());

  TxnRecord other;  // names no document
  PutRaw(*mem, TxnKey("other"), litetx::engine::EncodeRecord(other));
  m.txn = "other";
  PutMeta(*mem, {"c", "unnamed"}, {}, m);
  EXPECT_EQ(db->Read("c", "unnamed").code(), Code::kCorruption);

  PutRaw(*mem, TxnKey("bad"), Obj(R"({"state":"maybe","created":1,"gc_at":2,"actions":[]})"));
  m.txn = "bad";
  PutMeta(*mem, {"c", "badrec"}, {}, m);
  EXPECT_EQ(db->Read("c", "badrec").code(), Code::kCorruption);
}

TEST_F(ReadTest, StoreFailuresAreUnavailableOrRetried) {
  MustCommit(*db, Transaction().Insert("c", "a", {{"x", 1}}));
  auto hook = std::make_shared<HookStore>(mem);
  litetx::Database hdb(hook, Opts());
  hook->before = FailCalls(Op::kGet, {"c", "a"}, 1, Code::kUnavailable, 2);
  EXPECT_EQ(ReadImage(hdb, "c", "a"), Found(V(1), Obj(R"({"x":1})")));
  hook->before = FailCalls(Op::kGet, {"c", "a"}, 1, Code::kUnavailable);
  auto r = hdb.Read("c", "a");
  EXPECT_EQ(r.code(), Code::kUnavailable);
  EXPECT_TRUE(r.status().IsRetryableCall());
  // The record read of a held document fails too.
  auto m = LiveMeta(2);
  m.txn = "t3";
  PutMeta(*mem, {"c", "h"}, {}, m);
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.on_record()) return Status::Unavailable("down");
    return std::nullopt;
  };
  EXPECT_EQ(hdb.Read("c", "h").code(), Code::kUnavailable);
}

TEST_F(ReadTest, BadNamesAreInvalidArgument) {
  const std::string long_coll(litetx::kMaxCollectionBytes + 1, 'c');
  const std::string long_id(litetx::kMaxIdBytes + 1, 'i');
  for (std::string c : {std::string(), long_coll, std::string("a\nb"), std::string("a\x7f"),
                        std::string("\xff\xfe"), std::string("caf\xc3"), std::string("__litetx"),
                        std::string("__litetx.txn"), std::string("__litetxfoo")}) {
    EXPECT_EQ(db->Read(c, "id").code(), Code::kInvalidArgument) << json::serialize(json::string(c));
  }
  for (std::string id : {std::string(), long_id, std::string("a\tb"), std::string(1, '\0'),
                         std::string("\x80"), std::string("\xe2\x82")}) {
    EXPECT_EQ(db->Read("c", id).code(), Code::kInvalidArgument) << json::serialize(json::string(id));
  }
  // Limits are inclusive; a "__litetx" id is only a name.
  EXPECT_TRUE(db->Read(std::string(litetx::kMaxCollectionBytes, 'c'), "id").ok());
  EXPECT_TRUE(db->Read("c", std::string(litetx::kMaxIdBytes, 'i')).ok());
  EXPECT_TRUE(db->Read("c", "__litetx").ok());
  EXPECT_TRUE(db->Read("_litetx", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80").ok());
}

}  // namespace
}  // namespace ltxtest
