// tests/numbers_test.cpp — numbers keep their exact value (kind and bits) through the exact
// JSON parser (engine/json_text.h), the LMDB store's JSON text, the transaction record,
// commits and rollbacks (the coordinator's own and the collector's); numbers that JSON text
// cannot hold (NaN, infinities) are refused as bad input before anything is written. The store-level round trip of every backend is in
// store_contract.cpp (NumbersRoundTripBitExact).
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/json_text.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::ActionType;
using litetx::Transaction;
using litetx::engine::DecodeRecord;
using litetx::engine::EncodeRecord;
using litetx::engine::Prior;
using litetx::engine::TxnRecord;
using litetx::engine::TxnState;
using litetx::engine::WorkAction;

constexpr std::size_t kPerDocument = 100;

// `all` cut into arrays of kPerDocument numbers.
std::vector<json::array> Chunks(const json::array& all) {
  std::vector<json::array> out;
  for (std::size_t i = 0; i < all.size(); i += kPerDocument) {
    out.emplace_back(all.begin() + i, all.begin() + std::min(all.size(), i + kPerDocument));
  }
  return out;
}

// The numbers of field `field` of c/`id` as read committed through `db` that differ from
// `want` (all of them if the document or field is missing).
std::size_t ChangedIn(litetx::Database& db, const std::string& id, const std::string& field,
                      const json::array& want) {
  auto r = db.Read("c", id);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || r->state != litetx::DocumentState::kFound) return want.size();
  const json::value* v = r->doc.if_contains(field);
  return v == nullptr ? want.size() : CountChanged(want, *v);
}

// The value ParseJson gives for `text` (a test failure, and null, if it fails).
json::value Parsed(std::string_view text) {
  json::error_code ec;
  json::value v = litetx::engine::ParseJson(text, ec, json::parse_options{});
  EXPECT_FALSE(ec) << text << ": " << ec.message();
  return v;
}

TEST(ExactNumbersTest, ParseJsonReadsEveryPrintedDoubleBack) {
  const json::array doubles = HardDoubles(20000, 99);
  json::value back = Parsed(json::serialize(doubles));
  EXPECT_EQ(CountChanged(doubles, back), 0u) << "of " << doubles.size();
  // Boost's own parser, for comparison: it is the reason ParseJson exists. If this starts to
  // hold, a newer Boost reads doubles exactly.
  EXPECT_GT(CountChanged(doubles, json::parse(json::serialize(doubles))), 0u);
}

TEST(ExactNumbersTest, ParseJsonAtTheEdges) {
  using L = std::numeric_limits<double>;
  struct Case {
    const char* text;
    json::value want;
  } cases[] = {
      {"2.4703282292062328e-324", L::denorm_min()},  // just over half of it: rounds up
      {"2.4703282292062327e-324", 0.0},              // just under: rounds to zero
      {"-2.4703282292062327e-324", -0.0},
      {"4.9406564584124654E-324", L::denorm_min()},
      {"2.2250738585072011e-308", std::nextafter(L::min(), 0.0)},
      {"1.7976931348623157e308", L::max()},
      {"1.7976931348623158e308", L::max()},          // rounds down to the largest double
      {"1.7976931348623159e308", L::infinity()},     // beyond it: too large
      {"1e400", L::infinity()},
      {"-1e400", -L::infinity()},
      {"1e-400", 0.0},
      {"-1e-400", -0.0},
      {"-0.0", -0.0},
      {"-0E0", -0.0},
      {"0.0", 0.0},
      {"-0", std::int64_t{0}},
      {"1E+2", 100.0},
      {"1e-2", 0.01},
      {"0.1", 0.1},
      {"123456789012345678901234567890", 1.2345678901234568e29},
      {"18446744073709551615", std::numeric_limits<std::uint64_t>::max()},
      {"18446744073709551616", 18446744073709551616.0},
      {"9223372036854775807", std::numeric_limits<std::int64_t>::max()},
      {"9223372036854775808", std::uint64_t{1} << 63},
      {"-9223372036854775808", std::numeric_limits<std::int64_t>::min()},
      {"-9223372036854775809", -9223372036854775808.0},
  };
  for (const Case& c : cases) {
    json::value got = Parsed(c.text);
    EXPECT_TRUE(SameBits(got, c.want)) << c.text << " read as " << json::serialize(got)
                                       << ", want " << json::serialize(c.want);
    json::value in_object = Parsed(std::string(R"({"k":[)") + c.text + "]}");
    EXPECT_TRUE(SameBits(in_object, json::object{{"k", json::array{c.want}}})) << c.text;
  }
  EXPECT_TRUE(SameBits(Parsed(json::serialize(ExtremeIntegers())), ExtremeIntegers()));
}

// Number texts of every shape (1 to 20 significant digits, leading and trailing zeros, a point
// anywhere, exponents near and far) read as exactly what std::from_chars reads.
TEST(ExactNumbersTest, ParseJsonAgreesWithFromChars) {
  std::mt19937_64 rng(5);
  std::size_t differ = 0, total = 0;
  std::string example;
  for (int i = 0; i < 200'000; ++i) {
    std::string digits = std::to_string(rng() % 10);  // may give a leading zero; fixed below
    const std::size_t n = 1 + rng() % 20;
    while (digits.size() < n) digits += static_cast<char>('0' + rng() % 10);
    if (rng() % 4 == 0) digits.append(rng() % 6, '0');  // trailing zeros
    std::string text = rng() % 2 ? "-" : "";
    const std::size_t point = rng() % (digits.size() + 1);
    if (point == 0 || digits[0] == '0') {
      text += "0." + std::string(rng() % 4, '0') + digits;  // 0.000ddd
    } else {
      text += digits.substr(0, point);
      if (point < digits.size()) text += "." + digits.substr(point);
    }
    if (rng() % 3 != 0) {
      const int range = rng() % 5 == 0 ? 700 : 30;
      const int e = static_cast<int>(rng() % (2 * range + 1)) - range;
      text += (rng() % 2 ? "e" : "E") + std::string(e >= 0 && rng() % 2 ? "+" : "") +
              std::to_string(e);
    } else if (point == digits.size() && text.find('.') == std::string::npos) {
      text += ".0";  // keep it a double
    }
    double want = 0.0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), want);
    if (err != std::errc() || end != text.data() + text.size()) continue;  // out of range
    ++total;
    json::value got = Parsed(text);
    if (!SameBits(got, json::value(want))) {
      if (++differ == 1) example = text + " read as " + json::serialize(got);
    }
  }
  EXPECT_GT(total, 150'000u);
  EXPECT_EQ(differ, 0u) << "of " << total << ", e.g. " << example;
}

TEST(ExactNumbersTest, ParseJsonErrors) {
  struct Case {
    std::string text;
    json::error want;
    std::size_t consumed;
  } cases[] = {
      {R"({"a": tru)", json::error::incomplete, 9},
      {R"({"a":1} x)", json::error::extra_data, 8},
      {R"([1,,2])", json::error::syntax, 3},
      {"[[[1]]]", json::error::too_deep, 2},  // max_depth 2 below
  };
  json::parse_options opt;
  opt.max_depth = 2;
  for (const Case& c : cases) {
    json::error_code ec;
    std::size_t consumed = 0;
    json::value v = litetx::engine::ParseJson(c.text, ec, opt, &consumed);
    EXPECT_EQ(ec, c.want) << c.text << ": " << ec.message();
    EXPECT_EQ(consumed, c.consumed) << c.text;
    EXPECT_TRUE(v.is_null());
  }
  json::error_code ec;
  EXPECT_EQ(litetx::engine::ParseJson("[[1]]", ec, opt), (json::array{json::array{1}}));
  EXPECT_FALSE(ec);
}

TEST(ExactNumbersTest, RecordKeepsExactBitsThroughLmdb) {
  LmdbScratch lmdb;
  ASSERT_NE(lmdb.store(), nullptr);
  const json::array doubles = HardDoubles(2000);
  json::array reversed(doubles.rbegin(), doubles.rend());
  TxnRecord rec;
  rec.state = TxnState::kPending;
  rec.created_ms = 1'700'000'000'000;
  rec.gc_at_ms = rec.created_ms + 120'000;
  rec.priority_ms = rec.created_ms;
  WorkAction w;
  w.type = ActionType::kUpdate;
  w.key = Key{"c", "x"};
  w.prior = Prior::kLive;
  w.prior_version = 1;
  w.prior_schema = 1;
  w.fields = json::object{{"x", doubles}, {"ints", ExtremeIntegers()}};
  w.restore = json::object{{"x", reversed}, {"ints", ExtremeIntegers()}};
  w.existed = true;
  w.read_revision = 7;
  rec.actions.push_back(w);
  const Key key = TxnKey("00000000000000000000000a");
  ASSERT_TRUE(lmdb.store()->Create(key, EncodeRecord(rec)).ok());
  auto g = lmdb.store()->Get(key);
  ASSERT_TRUE(g.ok() && g->has_value()) << g.status().ToString();
  auto back = DecodeRecord((*g)->value);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->actions.size(), 1u);
  EXPECT_EQ(CountChanged(doubles, back->actions[0].fields.at("x")), 0u)
      << "of " << doubles.size() << " doubles in the record's fields";
  EXPECT_EQ(CountChanged(reversed, back->actions[0].restore.at("x")), 0u)
      << "of " << reversed.size() << " doubles in the record's restore data";
  EXPECT_TRUE(SameBits(back->actions[0].fields.at("ints"), ExtremeIntegers()))
      << json::serialize(back->actions[0].fields.at("ints"));
  EXPECT_TRUE(SameBits(back->actions[0].restore.at("ints"), ExtremeIntegers()));
}

// Inserts (through a record), then updates of other fields (each rewrites the whole stored
// document from what was read): every number stays exact.
TEST(ExactNumbersTest, CommittedDocumentsKeepExactBitsOnLmdb) {
  World w;
  LmdbScratch lmdb;
  ASSERT_NE(lmdb.store(), nullptr);
  litetx::Database db(lmdb.store(), w.Opts());
  const std::vector<json::array> chunks = Chunks(HardDoubles(2000));
  Transaction insert;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    insert.Insert("c", std::to_string(i),
                  json::object{{"x", chunks[i]}, {"ints", ExtremeIntegers()}, {"tag", 0}});
  }
  MustCommit(db, insert);
  for (int round = 1; round <= 3; ++round) {
    for (std::size_t i = 0; i < chunks.size(); ++i) {  // one-action commits
      MustCommit(db, Transaction().Update("c", std::to_string(i), {{"tag", round}}));
    }
    MustCommit(db, Transaction()  // through a record
                       .Update("c", "0", {{"tag", -round}})
                       .Adjust("c", "1", {{"tag", 1}}));
  }
  std::size_t changed = 0, total = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    changed += ChangedIn(db, std::to_string(i), "x", chunks[i]);
    changed += ChangedIn(db, std::to_string(i), "ints", ExtremeIntegers());
    total += chunks[i].size() + ExtremeIntegers().size();
  }
  EXPECT_EQ(changed, 0u) << changed << " of " << total << " numbers changed";
}

// An update of double fields applied, then a forced failure: the coordinator's rollback puts
// back the exact bits, of the updated fields and of the untouched ones.
TEST(ExactNumbersTest, RollbackRestoresExactBitsOnLmdb) {
  World w;
  LmdbScratch lmdb;
  ASSERT_NE(lmdb.store(), nullptr);
  const std::vector<json::array> chunks = Chunks(HardDoubles(1200));
  ASSERT_GE(chunks.size(), 6u);
  litetx::Database seed(lmdb.store(), w.Opts());
  for (std::size_t i = 0; i < 3; ++i) {
    MustCommit(seed, Transaction().Insert("c", std::to_string(i),
                                          json::object{{"x", chunks[i]}, {"keep", chunks[i + 3]}}));
  }
  MustCommit(seed, Transaction().Insert("c", "last", {{"n", 1}}));
  auto hook = std::make_shared<HookStore>(lmdb.store());
  hook->before = FailCalls(Op::kReplace, Key{"c", "last"}, 1, Code::kUnavailable);
  litetx::Database db(hook, w.Opts());
  Transaction t;
  for (std::size_t i = 0; i < 3; ++i) {
    t.Update("c", std::to_string(i), json::object{{"x", chunks[5 - i]}, {"y", chunks[0][i]}});
  }
  t.Update("c", "last", {{"n", 2}});  // applied last, and fails
  auto r = db.Commit(t);
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  ExpectClean(*lmdb.store(), {"c"});
  std::size_t changed = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    changed += ChangedIn(seed, std::to_string(i), "x", chunks[i]);
    changed += ChangedIn(seed, std::to_string(i), "keep", chunks[i + 3]);
    auto now = seed.Read("c", std::to_string(i));
    ASSERT_TRUE(now.ok());
    EXPECT_FALSE(now->doc.contains("y")) << "a field the update added survived the rollback";
  }
  EXPECT_EQ(changed, 0u) << changed << " of " << 6 * kPerDocument << " doubles changed";
}

// The coordinator dies with its update applied; the collector reverses it from the record's
// restore data as stored (parsed back from LMDB): the exact bits come back.
TEST(ExactNumbersTest, CollectorRollbackRestoresExactBitsOnLmdb) {
  World w;
  LmdbScratch lmdb;
  ASSERT_NE(lmdb.store(), nullptr);
  const std::vector<json::array> chunks = Chunks(HardDoubles(600));
  litetx::Database seed(lmdb.store(), w.Opts());
  MustCommit(seed, Transaction()
                       .Insert("c", "a", json::object{{"x", chunks[0]}, {"keep", chunks[1]}})
                       .Insert("c", "b", json::object{{"x", chunks[2]}}));
  struct Crash {};
  auto hook = std::make_shared<HookStore>(lmdb.store());
  int writes = 0;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.is_write() && s.ok() && ++writes == 3) throw Crash{};  // record, a, b written
    return std::nullopt;
  };
  litetx::Options o = w.Opts();
  o.lease = 10s;
  {
    litetx::Database db(hook, o);
    EXPECT_THROW((void)db.Commit(Transaction()
                                     .Update("c", "a", json::object{{"x", chunks[3]}})
                                     .Update("c", "b", json::object{{"x", chunks[4]}})),
                 Crash);
  }
  w.clock->Advance(11s);
  litetx::CollectorOptions gc_options;
  gc_options.engine = o;
  litetx::Collector gc(lmdb.store(), gc_options);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  ExpectClean(*lmdb.store(), {"c"});
  std::size_t changed = ChangedIn(seed, "a", "x", chunks[0]) +
                        ChangedIn(seed, "a", "keep", chunks[1]) +
                        ChangedIn(seed, "b", "x", chunks[2]);
  EXPECT_EQ(changed, 0u) << changed << " of " << 3 * kPerDocument << " doubles changed";
}

// NaN and the infinities have no JSON text: a document or field holding one, at any depth, is
// refused with kInvalidArgument and nothing is written, on either store.
TEST(ExactNumbersTest, NonFiniteNumbersAreInvalidAndWriteNothing) {
  World w;
  LmdbScratch lmdb;
  ASSERT_NE(lmdb.store(), nullptr);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::shared_ptr<litetx::Store>& store :
       {std::shared_ptr<litetx::Store>(w.mem), std::shared_ptr<litetx::Store>(lmdb.store())}) {
    litetx::Database seed(store, w.Opts());
    MustCommit(seed, Transaction().Insert("c", "a", {{"n", 1.5}}).Insert("c", "b", {{"n", 2}}));
    const Dump before = DumpStore(*store, {"c"});
    for (double bad : {inf, -inf, nan}) {
      const json::value where[] = {
          json::value(bad),
          json::array{1, json::array{2.5, bad}},
          json::object{{"deep", json::object{{"er", json::array{bad}}}}},
      };
      for (const json::value& v : where) {
        SCOPED_TRACE(json::serialize(v) + " (" + std::to_string(bad) + ")");
        auto counting = std::make_shared<litetx::CountingStore>(store);
        litetx::Database db(counting, w.Opts());
        for (const Transaction& t :
             {Transaction().Insert("c", "new", {{"v", v}}),
              Transaction().Insert("c", "new", {{"v", v}}).Update("c", "b", {{"n", 3}}),
              Transaction().Update("c", "a", {{"v", v}}),
              Transaction().Update("c", "b", {{"n", 3}}).Update("c", "a", {{"v", v}})}) {
          auto r = db.Commit(t);
          EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
          EXPECT_NE(r.status().message().find("finite"), std::string::npos)
              << r.status().ToString();
        }
        EXPECT_EQ(counting->counts().writes(), 0u);
      }
    }
    EXPECT_TRUE(SameDump(before, DumpStore(*store, {"c"}))) << "a refused commit wrote";
  }
}

}  // namespace
}  // namespace ltxtest
