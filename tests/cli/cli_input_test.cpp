// tests/cli/cli_input_test.cpp — bad input, bad flags and bad stores: exit codes 2 and 3, one
// line on stderr, and the store left untouched (not even created).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {

struct BadInput {
  const char* name;
  std::string text;
  const char* error;  // expected in the stderr line
};

std::string Act(const std::string& fields) {
  return R"({"actions":[{"op":"update","collection":"c","id":"x")" + fields + "}]}";
}

// An insert of c/x whose document is `levels` objects deep ({"a":{"a":...{}}}).
std::string DeepInsert(std::size_t levels) {
  std::string doc;
  for (std::size_t i = 1; i < levels; ++i) doc += R"({"a":)";
  doc += "{}";
  doc.append(levels - 1, '}');
  return R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":)" + doc + "}]}";
}

const BadInput kBadInputs[] = {
    {"Empty", "", "malformed JSON"},
    {"Truncated", R"({"actions":[{"op":"insert")", "malformed JSON"},
    {"TrailingGarbage", R"({"actions":[]} x)", "malformed JSON"},
    {"NotAnObject", R"([{"op":"insert"}])", "must be a JSON object"},
    {"InvalidUtf8", "{\"actions\":[{\"op\":\"insert\",\"collection\":\"c\",\"id\":\"\xff\",\"doc\":{}}]}",
     "not valid UTF-8"},
    {"OverlongUtf8", "{\"actions\":[{\"op\":\"insert\",\"collection\":\"c\",\"id\":\"\xc0\xaf\",\"doc\":{}}]}",
     "not valid UTF-8"},
    {"EncodedSurrogate", "{\"actions\":[{\"op\":\"insert\",\"collection\":\"c\",\"id\":\"\xed\xa0\x80\",\"doc\":{}}]}",
     "not valid UTF-8"},
    {"MissingActions", R"({})", "needs \"actions\""},
    {"ActionsNotArray", R"({"actions":{}})", "needs \"actions\""},
    {"EmptyActions", R"({"actions":[]})", "is empty"},
    {"UnknownTopLevelField", R"({"actions":[],"dry_run":true})", "unknown top-level field"},
    {"ActionNotObject", R"({"actions":[1]})", "must be an object"},
    {"MissingOp", R"({"actions":[{"collection":"c","id":"x"}]})", "missing \"op\""},
    {"OpNotString", R"({"actions":[{"op":1,"collection":"c","id":"x"}]})", "\"op\" must be a string"},
    {"UnknownOp", R"({"actions":[{"op":"upsert","collection":"c","id":"x"}]})", "unknown op"},
    {"MissingCollection", R"({"actions":[{"op":"delete","id":"x"}]})", "missing \"collection\""},
    {"MissingId", R"({"actions":[{"op":"delete","collection":"c"}]})", "missing \"id\""},
    {"IdNotString", R"({"actions":[{"op":"delete","collection":"c","id":7}]})", "\"id\" must be a string"},
    {"EmptyId", R"({"actions":[{"op":"delete","collection":"c","id":""}]})", "id"},
    {"ControlCharInId", R"({"actions":[{"op":"delete","collection":"c","id":"a\u0001"}]})", "control"},
    {"ReservedCollection", R"({"actions":[{"op":"delete","collection":"__litetx.txn","id":"x"}]})",
     "reserved"},
    {"UnknownField", Act(R"(,"sett":{"a":1})"), "unknown field \"sett\""},
    {"VersionOnInsert", R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{},"version":1}]})",
     "unknown field \"version\""},
    {"MissingDoc", R"({"actions":[{"op":"insert","collection":"c","id":"x"}]})", "missing \"doc\""},
    {"DocNotObject", R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":[1]}]})",
     "must be an object"},
    {"ReservedFieldInDoc", R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"_ltx":{}}}]})",
     "reserved"},
    {"ReservedFieldInSet", Act(R"(,"set":{"_ltxfoo":1})"), "reserved"},
    {"ReservedFieldInUnset", Act(R"(,"unset":["_ltx"])"), "reserved"},
    {"UnsetNotArray", Act(R"(,"unset":"a")"), "array of field names"},
    {"UnsetItemNotString", Act(R"(,"unset":[1])"), "array of field names"},
    {"SetAndUnsetSameField", Act(R"(,"set":{"a":1},"unset":["a"])"), "both set and unset"},
    {"VersionNegative", Act(R"(,"version":-1)"), "unsigned integer"},
    {"VersionString", Act(R"(,"version":"3")"), "unsigned integer"},
    {"VersionFraction", Act(R"(,"version":1.5)"), "unsigned integer"},
    {"VersionBool", Act(R"(,"version":true)"), "unsigned integer"},
    {"SchemaVersionTooLarge", Act(R"(,"schema_version":4294967296)"), "is out of range: 4294967296"},
    {"AdjustWithoutBy", R"({"actions":[{"op":"adjust","collection":"c","id":"x"}]})", "missing \"by\""},
    {"AdjustNonNumber", R"({"actions":[{"op":"adjust","collection":"c","id":"x","by":{"n":"1"}}]})",
     "not a finite number"},
    {"AdjustEmpty", R"({"actions":[{"op":"adjust","collection":"c","id":"x","by":{}}]})",
     "at least one field"},
    {"CheckWithoutVersion", R"({"actions":[{"op":"check","collection":"c","id":"x"}]})",
     "needs \"version\""},
    {"FieldsOnDelete", R"({"actions":[{"op":"delete","collection":"c","id":"x","doc":{}}]})",
     "unknown field \"doc\""},
    {"DocumentNamedTwice",
     R"({"actions":[{"op":"delete","collection":"c","id":"x"},{"op":"check","collection":"c","id":"x","version":1}]})",
     "named by an earlier action"},
    {"NestedFarTooDeeply", DeepInsert(100'000), "nests deeper than"},
    {"NestedOneLevelTooDeeply", DeepInsert(65), "nests deeper than"},
    {"NumberTooLarge", R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"n":1e400}}]})",
     "not finite"},
    {"NegativeNumberTooLarge", Act(R"(,"set":{"n":[-1e999]})"), "not finite"},
};

void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

class CliBadInput : public CliTest, public ::testing::WithParamInterface<BadInput> {};

TEST_P(CliBadInput, ExitsTwoWithOneLineAndNeverOpensTheStore) {
  RunResult r = Apply(GetParam().text);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("litetx: bad transaction: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(GetParam().error), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(path_)) << "bad input created the store";
}

INSTANTIATE_TEST_SUITE_P(All, CliBadInput, ::testing::ValuesIn(kBadInputs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(CliTest, BadInputLeavesAnExistingStoreUntouched) {
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"a":1}},
                                  {"op":"insert","collection":"c","id":"y","doc":{"b":2}}]})").code, 0);
  std::string scan = ScanText("c");
  boost::json::value count = Cli({"txns"}).Json()["count"];
  EXPECT_EQ(count, 1);
  for (const BadInput& b : kBadInputs) {  // most of them name c/x, which exists
    EXPECT_EQ(Apply(b.text).code, 2) << b.name;
  }
  EXPECT_EQ(ScanText("c"), scan);
  EXPECT_EQ(Cli({"txns"}).Json()["count"], count);
}

TEST_F(CliTest, BadCommandLinesExitTwo) {
  EXPECT_EQ(RunCli({}).code, 2);                      // no command
  EXPECT_EQ(RunCli({"frobnicate"}).code, 2);          // unknown command
  EXPECT_EQ(Cli({"apply"}).code, 2);               // missing FILE
  EXPECT_EQ(Cli({"apply", dir_ + "/none.json"}).code, 2);  // unreadable FILE
  EXPECT_EQ(Cli({"apply", "-", "--busy-timeout", "5"}).code, 2);  // duration without unit
  EXPECT_EQ(Cli({"get", "c"}).code, 2);            // missing ID
  EXPECT_EQ(Cli({"gc", "--interval", "soon"}).code, 2);
  EXPECT_EQ(Cli({"--sync", "sometimes", "txns"}).code, 2);
  RunResult r = RunCli({"--store", "redis:localhost", "txns"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad --store"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(CliTest, BadLitetxFaultsExitsTwo) {
  for (const char* spec : {"bogus:1", "crash-after-writes:0", "transient:2", "lost-reply:x",
                           "stall-write:1", "partition-after-writes:", "hold-write:1",
                           "hold-write:0:/tmp", "hold-write:1:/proc/litetx-nope"}) {
    RunResult r = Cli({"apply", "-"}, spec, R"({"actions":[{"op":"delete","collection":"c","id":"x"}]})");
    EXPECT_EQ(r.code, 2) << spec;
    EXPECT_NE(r.err.find("LITETX_FAULTS"), std::string::npos) << r.err;
  }
}

TEST_F(CliTest, UnusableStorePathsExitThree) {
  const std::string txn = R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{}}]})";
  std::string file = dir_ + "/plain-file";
  std::ofstream(file) << "not a directory";
  std::string garbage = dir_ + "/garbage";
  std::filesystem::create_directory(garbage);
  std::ofstream(garbage + "/data.mdb") << std::string(8192, 'x');
  for (const std::string& store : {std::string("lmdb:/proc/litetx-nope"), "lmdb:" + file,
                                   "lmdb:" + garbage}) {
    RunResult r = RunCli({"--store", store, "apply", "-"}, "", txn);
    EXPECT_EQ(r.code, 3) << store << ": " << r.err;
    EXPECT_EQ(r.err.rfind("litetx: cannot open store", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // The read-only commands never create a store: a missing one is an error.
  for (std::vector<std::string> cmd : {std::vector<std::string>{"get", "c", "x"},
                                       {"scan", "c"}, {"txns"}, {"gc", "--once"}}) {
    EXPECT_EQ(Cli(cmd).code, 3) << cmd[0];
  }
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(CliTest, EveryCommandHasHelp) {
  for (std::vector<std::string> cmd :
       {std::vector<std::string>{"--help"}, {"apply", "--help"}, {"get", "--help"},
        {"scan", "--help"}, {"txns", "--help"}, {"gc", "--help"}}) {
    RunResult r = RunCli(cmd);
    EXPECT_EQ(r.code, 0) << cmd[0];
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace litetx::clitest
