// tests/store_contract_test.cpp — runs the Store contract (store_contract.cpp) on the memory
// store, bare and behind the forwarding wrappers the engine's tests rely on.
#include "store_contract.h"

#include <memory>
#include <vector>

#include "litetx/counting_store.h"
#include "litetx/forwarding_store.h"
#include "litetx/memory_store.h"

namespace ltxtest {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Memory, StoreContractTest,
    ::testing::Values(
        StoreFactoryParam{"MemoryStore",
                          [] { return std::make_shared<litetx::MemoryStore>(); }},
        StoreFactoryParam{"ForwardingOverMemory",
                          [] {
                            return std::make_shared<litetx::ForwardingStore>(
                                std::make_shared<litetx::MemoryStore>());
                          }},
        StoreFactoryParam{"CountingOverMemory",
                          [] {
                            return std::make_shared<litetx::CountingStore>(
                                std::make_shared<litetx::MemoryStore>());
                          }}),
    StoreFactoryName);

TEST(MemoryStoreTest, SizeCountsDocumentsOfAllCollections) {
  litetx::MemoryStore s;
  EXPECT_EQ(s.Size(), 0u);
  auto a = s.Create({"a", "1"}, {{"x", 1}});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(s.Create({"b", "1"}, {{"x", 1}}).ok());
  ASSERT_TRUE(s.Create({"b", "2"}, {{"x", 1}}).ok());
  EXPECT_EQ(s.Size(), 3u);
  ASSERT_TRUE(s.Erase({"a", "1"}, *a).ok());
  EXPECT_EQ(s.Size(), 2u);
}

TEST(CountingStoreTest, CountsEveryCallWhateverItsOutcome) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::CountingStore s(mem);
  auto r = s.Create({"c", "k"}, {{"x", 1}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(s.Create({"c", "k"}, {{"x", 1}}).code(), litetx::Code::kConflict);
  EXPECT_EQ(s.Replace({"c", "k"}, *r + 999, {{"x", 2}}).code(), litetx::Code::kConflict);
  ASSERT_TRUE(s.Get({"c", "k"}).ok());
  ASSERT_TRUE(s.Scan("c", "", 5).ok());
  ASSERT_TRUE(s.ListCollections("", 0).code() == litetx::Code::kInvalidArgument);
  EXPECT_EQ(s.Erase({"c", "nope"}, 1).code(), litetx::Code::kConflict);
  auto c = s.counts();
  EXPECT_EQ(c.creates, 2u);
  EXPECT_EQ(c.replaces, 1u);
  EXPECT_EQ(c.erases, 1u);
  EXPECT_EQ(c.gets, 1u);
  EXPECT_EQ(c.scans, 1u);
  EXPECT_EQ(c.list_collections, 1u);
  EXPECT_EQ(c.writes(), 4u);
  s.Reset();
  EXPECT_EQ(s.counts().writes(), 0u);
  EXPECT_EQ(s.counts().gets, 0u);
  EXPECT_EQ(s.counts().list_collections, 0u);
}

TEST(CountingStoreTest, ABatchIsOneRoundTripAndEachOperationIsCounted) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::CountingStore s(mem);
  const boost::json::object v{{"x", 1}};
  using litetx::BatchOp;
  std::vector<BatchOp> ops{BatchOp::Get({"c", "a"}),      BatchOp::Create({"c", "a"}, v),
                           BatchOp::Create({"c", "b"}, v), BatchOp::Replace({"c", "z"}, 1, v),
                           BatchOp::Erase({"c", "z"}, 1),  BatchOp::Get({"c", "b"})};
  auto res = s.Batch(ops);
  ASSERT_EQ(res.size(), ops.size());
  auto c = s.counts();
  EXPECT_EQ(c.gets, 2u);
  EXPECT_EQ(c.creates, 2u);
  EXPECT_EQ(c.replaces, 1u);
  EXPECT_EQ(c.erases, 1u);
  EXPECT_EQ(c.batches, 1u);
  EXPECT_EQ(c.round_trips, 1u);
  EXPECT_TRUE(s.Batch({}).empty());
  EXPECT_EQ(s.counts().batches, 1u) << "an empty batch is no round trip";
  EXPECT_EQ(s.counts().round_trips, 1u);
  ASSERT_TRUE(s.Get({"c", "a"}).ok());
  ASSERT_TRUE(s.Scan("c", "", 5).ok());
  EXPECT_EQ(s.counts().round_trips, 3u);
  EXPECT_EQ(s.counts().batches, 1u);
  s.Reset();
  EXPECT_EQ(s.counts().round_trips, 0u);
  EXPECT_EQ(s.counts().batches, 0u);
}

// A wrapper that changes one single call sees the operations of a batch through it.
TEST(ForwardingStoreTest, BatchGoesThroughTheOverriddenSingleCalls) {
  struct RefuseReplace final : litetx::ForwardingStore {
    using ForwardingStore::ForwardingStore;
    litetx::Result<litetx::Revision> Replace(const litetx::Key&, litetx::Revision,
                                             const boost::json::object&) override {
      ++replaces;
      return litetx::Status::Unavailable("refused");
    }
    int replaces = 0;
  };
  auto mem = std::make_shared<litetx::MemoryStore>();
  RefuseReplace s(mem);
  const boost::json::object v{{"x", 1}};
  auto r = mem->Create({"c", "a"}, v);
  ASSERT_TRUE(r.ok());
  using litetx::BatchOp;
  auto res = s.Batch(std::vector<BatchOp>{BatchOp::Replace({"c", "a"}, *r, v),
                                          BatchOp::Create({"c", "b"}, v)});
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].status.code(), litetx::Code::kUnavailable);
  EXPECT_TRUE(res[1].status.ok());
  EXPECT_EQ(s.replaces, 1);
}

}  // namespace
}  // namespace ltxtest
