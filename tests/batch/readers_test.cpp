// tests/batch/readers_test.cpp — VectorReader and NdjsonReader: items, read failures, and the
// restart contract (a checkpoint taken after the n-th Read, restored in a NEW reader object as
// a new process would, continues with the (n+1)-th item).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "batch_util.h"

// The largest single allocation made while `g_track_allocations` is set, to check that an
// oversized NDJSON line is passed over without being held in memory. The replacement covers
// the whole test binary; it only records sizes.
namespace {
std::atomic<bool> g_track_allocations{false};
std::atomic<std::size_t> g_largest_allocation{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_track_allocations.load(std::memory_order_relaxed)) {
    std::size_t cur = g_largest_allocation.load(std::memory_order_relaxed);
    while (n > cur && !g_largest_allocation.compare_exchange_weak(cur, n)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The replaced operator new allocates with malloc, so free is the matching release (GCC cannot
// see that through the replacement).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

using namespace bt;
using litetx::batch::NdjsonReader;
using litetx::batch::NdjsonReaderOptions;
using litetx::batch::VectorReader;

// One Read's outcome, comparable: "item <key> <value>", "fail <code> <message>" or "end".
std::string Outcome(const Result<std::optional<Item>>& r) {
  if (!r.ok()) return "fail " + r.status().ToString();
  if (!r->has_value()) return "end";
  return "item " + (*r)->key + " " + json::serialize((*r)->value);
}

// Reads to the end (bounded), returning the outcomes and the checkpoint after each Read.
struct Trace {
  std::vector<std::string> outcomes;
  std::vector<json::value> checkpoints;  // checkpoints[i]: after outcomes[i]
};
Trace ReadAll(litetx::batch::ItemReader& r, int bound = 1000) {
  Trace t;
  for (int i = 0; i < bound; ++i) {
    auto x = r.Read();
    t.outcomes.push_back(Outcome(x));
    t.checkpoints.push_back(r.Checkpoint());
    if (x.ok() && !x->has_value()) break;
  }
  return t;
}

TEST(BatchReadersTest, VectorReaderReadsAndRestoresInANewReader) {
  const auto items = Items(7);
  VectorReader r(items);
  EXPECT_EQ(r.Checkpoint(), json::value(0u));
  Trace all = ReadAll(r);
  ASSERT_EQ(all.outcomes.size(), 8u);
  EXPECT_EQ(all.outcomes.back(), "end");
  EXPECT_EQ(Outcome(r.Read()), "end");  // and on every call after
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(all.outcomes[i], "item " + Key(i) + " {\"i\":" + std::to_string(i) + "}");
    EXPECT_EQ(all.checkpoints[i], json::value(i + 1));
  }
  // Every checkpoint, restored in a new reader, continues with the next item.
  for (std::size_t n = 0; n <= 7; ++n) {
    VectorReader fresh(items);
    json::value cp = n == 0 ? json::value(0u) : all.checkpoints[n - 1];
    ASSERT_TRUE(fresh.Restore(cp).ok()) << n;
    Trace rest = ReadAll(fresh);
    EXPECT_EQ(rest.outcomes,
              std::vector<std::string>(all.outcomes.begin() + static_cast<long>(n), all.outcomes.end()))
        << "restored at " << n;
  }
  // A checkpoint written as a signed integer (as JSON text may come back) is accepted.
  VectorReader fresh(items);
  ASSERT_TRUE(fresh.Restore(json::value(std::int64_t{6})).ok());
  EXPECT_EQ(Outcome(fresh.Read()), all.outcomes[6]);
}

TEST(BatchReadersTest, VectorReaderRejectsBadCheckpoints) {
  VectorReader r(Items(3));
  ASSERT_TRUE(r.Read().ok());
  for (const json::value& bad :
       {json::value(4u), json::value(std::int64_t{-1}), json::value("1"), json::value(1.0),
        json::value(nullptr), json::value(json::object{{"offset", 1}}), json::value(json::array{1})}) {
    Status s = r.Restore(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << json::serialize(bad);
  }
  // A rejected restore left the reader where it was.
  EXPECT_EQ(Outcome(r.Read()), "item " + Key(1) + " {\"i\":1}");
  EXPECT_TRUE(r.Restore(json::value(3u)).ok());  // the end itself is a valid place
  EXPECT_EQ(Outcome(r.Read()), "end");
}

NdjsonReaderOptions KeyField(std::string field, std::size_t max_line_bytes = 1 << 20) {
  NdjsonReaderOptions o;
  o.key_field = std::move(field);
  o.max_line_bytes = max_line_bytes;
  return o;
}

class BatchNdjsonTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_.Sub(name);
    std::ofstream f(path, std::ios::binary);
    f << content;
    return path;
  }
  std::unique_ptr<NdjsonReader> Open(const std::string& path, NdjsonReaderOptions o = {}) {
    auto r = NdjsonReader::Open(path, std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }
  ltxtest::TempDir dir_;
};

// Every kind of line: items, blank lines, CRLF, and each kind of read failure, the last line
// without its newline.
const std::string kMixed =
    "{\"id\":\"a\",\"v\":1}\n"        // 1 item a
    "\n"                              // 2 blank
    "   \t \n"                        // 3 blank (spaces and a tab)
    "{\"id\":\"b\",\"v\":2}\r\n"      // 4 item b (CRLF)
    "{nope\n"                         // 5 not JSON
    "[1,2]\n"                         // 6 not an object
    "{\"v\":3}\n"                     // 7 no key field
    "{\"id\":\"\"}\n"                 // 8 empty key
    "{\"id\":1.5}\n"                  // 9 key not a string or integer
    "{\"id\":true}\n"                 // 10 likewise
    "{\"id\":42,\"v\":4}\n"           // 11 integer key
    "\r\n"                            // 12 blank (CRLF)
    "{\"id\":\"c\",\"v\":5}";         // 13 item c, no final newline

TEST_F(BatchNdjsonTest, ItemsBlankLinesCrlfAndReadFailures) {
  const std::string path = Write("mixed.ndjson", kMixed);
  auto r = Open(path, KeyField("id"));
  ASSERT_TRUE(r);
  Trace t = ReadAll(*r);
  const std::vector<std::string> want_kinds = {
      "item a", "item b", "fail 5", "fail 6", "fail 7", "fail 8", "fail 9", "fail 10",
      "item 42", "item c", "end"};
  ASSERT_EQ(t.outcomes.size(), want_kinds.size());
  EXPECT_EQ(t.outcomes[0], "item a {\"id\":\"a\",\"v\":1}");
  EXPECT_EQ(t.outcomes[1], "item b {\"id\":\"b\",\"v\":2}");  // the CR is not part of it
  EXPECT_EQ(t.outcomes[8], "item 42 {\"id\":42,\"v\":4}");
  EXPECT_EQ(t.outcomes[9], "item c {\"id\":\"c\",\"v\":5}");
  EXPECT_EQ(t.outcomes[10], "end");
  // Each failure is kInvalidArgument naming its line number and what is wrong.
  const std::vector<std::pair<int, std::string>> failures = {
      {5, "not valid JSON"}, {6, "not a JSON object"}, {7, "no field \"id\""},
      {8, "is empty"},       {9, "is not a string or an integer"},
      {10, "is not a string or an integer"}};
  for (std::size_t i = 0; i < failures.size(); ++i) {
    const std::string& o = t.outcomes[2 + i];
    EXPECT_EQ(o.rfind("fail invalid_argument", 0), 0u) << o;
    EXPECT_NE(o.find(path + ":" + std::to_string(failures[i].first) + ":"), std::string::npos) << o;
    EXPECT_NE(o.find(failures[i].second), std::string::npos) << o;
  }
  EXPECT_EQ(Outcome(r->Read()), "end");
  EXPECT_EQ(t.checkpoints.back(),
            json::value(json::object{{"offset", kMixed.size()}, {"line", 14}}));
}

TEST_F(BatchNdjsonTest, KeyIsTheLineNumberWithoutAKeyField) {
  auto r = Open(Write("plain.ndjson", "{\"x\":1}\n\n{\"x\":2}\n"));
  ASSERT_TRUE(r);
  Trace t = ReadAll(*r);
  ASSERT_EQ(t.outcomes.size(), 3u);
  EXPECT_EQ(t.outcomes[0], "item 1 {\"x\":1}");
  EXPECT_EQ(t.outcomes[1], "item 3 {\"x\":2}");  // blank line 2 is counted, not an item
  EXPECT_EQ(t.outcomes[2], "end");
}

TEST_F(BatchNdjsonTest, EveryCheckpointRestoredInANewReaderContinuesWithTheNextLine) {
  const std::string path = Write("mixed.ndjson", kMixed);
  NdjsonReaderOptions o = KeyField("id");
  auto first = Open(path, o);
  ASSERT_TRUE(first);
  Trace all = ReadAll(*first);
  ASSERT_EQ(all.outcomes.size(), 11u);
  for (std::size_t n = 1; n <= all.checkpoints.size(); ++n) {
    auto fresh = Open(path, o);
    ASSERT_TRUE(fresh);
    // Through JSON text and back, as the step stores it.
    json::value cp = json::parse(json::serialize(all.checkpoints[n - 1]));
    ASSERT_TRUE(fresh->Restore(cp).ok()) << json::serialize(cp);
    Trace rest = ReadAll(*fresh);
    std::vector<std::string> want(all.outcomes.begin() + static_cast<long>(n), all.outcomes.end());
    if (want.empty()) want.push_back("end");
    EXPECT_EQ(rest.outcomes, want) << "restored after read " << n;
  }
  // The reader also restores backwards (to an earlier checkpoint) on the same object.
  ASSERT_TRUE(first->Restore(all.checkpoints[0]).ok());
  EXPECT_EQ(Outcome(first->Read()), all.outcomes[1]);
}

TEST_F(BatchNdjsonTest, RestoreRejectsGarbageAndPastTheEnd) {
  const std::string content = "{\"id\":\"a\"}\n{\"id\":\"b\"}\n";
  const std::string path = Write("two.ndjson", content);
  auto r = Open(path, KeyField("id"));
  ASSERT_TRUE(r);
  ASSERT_EQ(Outcome(r->Read()), "item a {\"id\":\"a\"}");
  const std::vector<json::value> garbage = {
      json::value(nullptr),
      json::value(11u),
      json::value("offset"),
      json::value(json::array{11, 2}),
      json::value(json::object{{"offset", 11}}),
      json::value(json::object{{"line", 2}}),
      json::value(json::object{{"offset", 11}, {"line", 0}}),
      json::value(json::object{{"offset", -1}, {"line", 2}}),
      json::value(json::object{{"offset", 11}, {"line", -2}}),
      json::value(json::object{{"offset", "11"}, {"line", 2}}),
      json::value(json::object{{"offset", 11.0}, {"line", 2}}),
  };
  for (const auto& g : garbage) {
    EXPECT_EQ(r->Restore(g).code(), Code::kInvalidArgument) << json::serialize(g);
  }
  // Past the end of the file: not the same input.
  Status past = r->Restore(json::object{{"offset", content.size() + 1}, {"line", 3}});
  EXPECT_EQ(past.code(), Code::kInvalidArgument);
  EXPECT_NE(past.message().find("past the end"), std::string::npos) << past.ToString();
  // At the end exactly: valid, and exhausted.
  ASSERT_TRUE(r->Restore(json::object{{"offset", content.size()}, {"line", 3}}).ok());
  EXPECT_EQ(Outcome(r->Read()), "end");
  // A restore after a rejected one works.
  ASSERT_TRUE(r->Restore(json::object{{"offset", 11}, {"line", 2}}).ok());
  EXPECT_EQ(Outcome(r->Read()), "item b {\"id\":\"b\"}");
}

TEST_F(BatchNdjsonTest, OpenMissingFileIsUnavailable) {
  auto r = NdjsonReader::Open(dir_.Sub("absent.ndjson"));
  EXPECT_EQ(r.code(), Code::kUnavailable);
}

TEST_F(BatchNdjsonTest, OversizeLineIsAFailurePassedOverWithoutHoldingIt) {
  constexpr std::size_t kHuge = 8u << 20;  // 8 MiB on one line
  std::string content = "{\"id\":\"a\"}\n{\"id\":\"big\",\"pad\":\"";
  content.append(kHuge, 'x');
  content += "\"}\n{\"id\":\"b\"}\n";
  const std::string path = Write("big.ndjson", content);
  auto r = Open(path, KeyField("id", 4096));
  ASSERT_TRUE(r);
  ASSERT_EQ(Outcome(r->Read()), "item a {\"id\":\"a\"}");
  g_largest_allocation = 0;
  g_track_allocations = true;
  auto big = r->Read();
  g_track_allocations = false;
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.code(), Code::kInvalidArgument);
  EXPECT_NE(big.status().message().find(":2: line longer than 4096 bytes"), std::string::npos)
      << big.status().ToString();
  // Nothing near the line's size was allocated while passing over it.
  EXPECT_LT(g_largest_allocation.load(), std::size_t{256} << 10)
      << "largest allocation while reading an 8 MiB line: " << g_largest_allocation.load();
  EXPECT_EQ(Outcome(r->Read()), "item b {\"id\":\"b\"}");
  EXPECT_EQ(Outcome(r->Read()), "end");
  // A line of exactly max_line_bytes is accepted; one byte more is not.
  std::string exact = "{\"id\":\"e\",\"p\":\"";
  exact.append(64 - exact.size() - 2, 'y');
  exact += "\"}";
  ASSERT_EQ(exact.size(), 64u);
  auto e = Open(Write("exact.ndjson", exact + "\n" + exact + "z\n"), KeyField("id", 64));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->Read().ok());
  auto over = e->Read();
  EXPECT_EQ(over.code(), Code::kInvalidArgument);
  EXPECT_NE(over.status().message().find("longer than 64 bytes"), std::string::npos);
  EXPECT_EQ(Outcome(e->Read()), "end");
}

}  // namespace
