// tests/batch/batch_util.h — shared helpers of the litetx::batch tests.
//
//   * Items(n): a vector of items "k00000".. with value {"i": i}.
//   * A writer that counts: each output document out/<key> carries "writes", raised by one
//     every time a committed transaction wrote the item (read, then insert or adjust), so that
//     an item written twice reads writes == 2 instead of hiding behind a failed insert.
//   * Ids of the step's stored documents (step, chunk, item, skip, scan), as step.cpp names them.
//   * Reads of what a collection holds, through a Database (committed images only).
#pragma once

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "litetx/batch.h"
#include "test_util.h"

namespace bt {

namespace json = boost::json;
using namespace std::chrono_literals;
using litetx::Code;
using litetx::Database;
using litetx::Result;
using litetx::Status;
using litetx::TxnContext;
using litetx::batch::Item;
using litetx::batch::Output;
using ProcessResult = litetx::Result<std::optional<json::value>>;

inline std::string Key(std::uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "k%05llu", static_cast<unsigned long long>(i));
  return buf;
}

// Items k00000.. with value {"i": i} (keys set; positions are the step's to set).
inline std::vector<Item> Items(std::uint64_t n) {
  std::vector<Item> v;
  v.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    Item it;
    it.key = Key(i);
    it.value = json::object{{"i", i}};
    v.push_back(std::move(it));
  }
  return v;
}

// The item number of a value {"i": i}.
inline std::uint64_t IndexOf(const json::value& v) { return v.at("i").to_number<std::uint64_t>(); }

// Writes one output: out/<key> gets {"i": i, "writes": 1} the first time, and "writes" raised
// by one on every later write (a duplicate). Fields of `extra` are set too.
inline Status WriteCounted(TxnContext& tx, const std::string& collection, const std::string& id,
                           const json::object& value) {
  auto r = tx.Get(collection, id);
  if (!r.ok()) return r.status();
  if (r->state == litetx::DocumentState::kFound) return tx.Adjust(collection, id, {{"writes", 1}});
  json::object doc = value;
  doc["writes"] = 1;
  return tx.Insert(collection, id, std::move(doc));
}

// A writer of out/<key> (WriteCounted) for every output.
inline std::function<Status(TxnContext&, const std::vector<Output>&)> CountingWriter(
    std::string collection = "out") {
  return [collection](TxnContext& tx, const std::vector<Output>& outs) -> Status {
    for (const Output& o : outs) {
      if (Status s = WriteCounted(tx, collection, o.item->key, o.value.as_object()); !s.ok()) {
        return s;
      }
    }
    return Status::Ok();
  };
}

// A retry policy of `n` attempts with the default retryable codes.
inline litetx::batch::RetryPolicy Attempts(int n) {
  litetx::batch::RetryPolicy p;
  p.max_attempts = n;
  return p;
}

// Ids of the step's stored documents (batch/step.cpp).
inline std::string Pad(std::uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(n));
  return buf;
}
inline std::string StepId(const litetx::batch::StepOptions& o) { return o.job + "/" + o.step; }
inline std::string ChunkDocId(const litetx::batch::StepOptions& o, std::uint64_t k) {
  return StepId(o) + "/chunk/" + Pad(k);
}
inline std::string SkipDocId(const litetx::batch::StepOptions& o, std::uint64_t position) {
  return StepId(o) + "/skip/" + Pad(position);
}
inline std::string ItemDocId(const litetx::batch::StepOptions& o, std::uint64_t position) {
  return StepId(o) + "/item/" + Pad(position);
}
inline std::string ScanDocId(const litetx::batch::StepOptions& o, std::uint64_t k) {
  return StepId(o) + "/scan/" + Pad(k);
}

// The committed user fields of collection/id, or std::nullopt if not found (a test failure if
// the read fails).
inline std::optional<json::object> Committed(Database& db, std::string_view collection,
                                             std::string_view id) {
  auto r = db.Read(collection, id);
  EXPECT_TRUE(r.ok()) << collection << "/" << id << ": " << r.status().ToString();
  if (!r.ok() || r->state != litetx::DocumentState::kFound) return std::nullopt;
  return r->doc;
}

// Every committed document of `collection` (id -> user fields), read through `db`: the store is
// scanned for ids and each is read (a rolled-back insert leaves a placeholder, not a document).
inline std::map<std::string, json::object> CommittedAll(Database& db, std::string_view collection) {
  std::map<std::string, json::object> out;
  // One page: a memory store copies up to a page per shard for every page it returns.
  for (const auto& [id, doc] : ltxtest::ScanAll(db.store(), collection, std::size_t{1} << 22)) {
    if (auto d = Committed(db, collection, id)) out.emplace(id, std::move(*d));
  }
  return out;
}

// A reader over a VectorReader that counts its calls and can fail reads at given positions
// (each failing position is a read failure of its own: the item there is not returned).
class ScriptedReader final : public litetx::batch::ItemReader {
 public:
  explicit ScriptedReader(std::vector<Item> items, std::set<std::uint64_t> failing = {},
                          Code failure = Code::kInvalidArgument)
      : items_(std::move(items)), failing_(std::move(failing)), failure_(failure) {}
  Result<std::optional<Item>> Read() override {
    ++reads;
    if (next_ >= items_.size()) return std::optional<Item>{};
    const std::size_t at = next_++;
    if (failing_.contains(at)) {
      return Status(failure_, "unreadable input at " + std::to_string(at));
    }
    return std::optional<Item>{items_[at]};
  }
  json::value Checkpoint() const override { return json::value(static_cast<std::uint64_t>(next_)); }
  Status Restore(const json::value& checkpoint) override {
    ++restores;
    if (!checkpoint.is_uint64() && !checkpoint.is_int64()) {
      return Status::InvalidArgument("not an index");
    }
    const auto i = checkpoint.to_number<std::uint64_t>();
    if (i > items_.size()) return Status::InvalidArgument("past the end");
    next_ = i;
    if (!first_restored) first_restored = i;
    restored.push_back(i);
    return Status::Ok();
  }

  int reads = 0;
  int restores = 0;
  std::optional<std::uint64_t> first_restored;
  std::vector<std::uint64_t> restored;  // every index restored to, in order

 private:
  std::vector<Item> items_;
  std::set<std::uint64_t> failing_;
  Code failure_;
  std::size_t next_ = 0;
};

// A database on `store` with the test World's options (virtual clock, quiet logger).
inline std::unique_ptr<Database> Db(const ltxtest::World& w, std::shared_ptr<litetx::Store> store) {
  return std::make_unique<Database>(std::move(store), w.Opts());
}

// Step options with a job name and no waits between attempts.
inline litetx::batch::StepOptions Opts(std::string job, std::size_t commit_interval) {
  litetx::batch::StepOptions o;
  o.job = std::move(job);
  o.commit_interval = commit_interval;
  o.backoff = litetx::batch::BackoffPolicy::None();
  return o;
}

// Asserts that each of items [0, n) except `absent` has exactly one committed output with
// writes == 1 and the right "i", and that nothing else is in `collection`.
inline void ExpectOutputsExactlyOnce(Database& db, std::uint64_t n,
                                     const std::set<std::uint64_t>& absent = {},
                                     std::string_view collection = "out") {
  auto all = CommittedAll(db, collection);
  EXPECT_EQ(all.size(), n - absent.size());
  for (std::uint64_t i = 0; i < n; ++i) {
    auto it = all.find(Key(i));
    if (absent.contains(i)) {
      EXPECT_TRUE(it == all.end()) << Key(i) << " must have no output";
      continue;
    }
    if (it == all.end()) {
      ADD_FAILURE() << Key(i) << " has no output";
      continue;
    }
    EXPECT_EQ(it->second.at("writes").to_number<std::int64_t>(), 1) << Key(i) << " written twice";
    EXPECT_EQ(IndexOf(it->second), i) << Key(i);
  }
}

}  // namespace bt
