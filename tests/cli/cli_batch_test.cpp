// tests/cli/cli_batch_test.cpp — `litetx batch JOB.json` on LMDB: a job over an NDJSON file
// completes and its outputs, totals and summary agree; poison lines are skipped and listed;
// a dead-letter collection gets the items that fail for good; a completed job reruns as
// already complete and writes nothing; bad job files exit 2 and write nothing; SIGINT and
// SIGTERM stop after the chunk in flight (130/143) and a rerun completes; kill -9 at random
// points, a crash in the middle of a chunk's commit and a commit whose outcome is unknown, then
// reruns: every output exactly once.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

class CliBatch : public CliTest {
 protected:
  std::string WriteFile(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // `collections count NAME`: live, deleted, held, stored.
  json::object Count(const std::string& collection) const {
    RunResult r = Cli({"collections", "count", collection, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.Json();
  }
  std::int64_t Live(const std::string& collection) const {
    return Count(collection)["live"].to_number<std::int64_t>();
  }
  // A field of a document, or -1 when the document is missing.
  std::int64_t Field(const std::string& collection, const std::string& id,
                     const std::string& field) const {
    json::object g = Get(collection, id);
    if (g["status"] != "found") return -1;
    return g["doc"].as_object()[field].to_number<std::int64_t>();
  }
  // Every stored document of `collections` (versions included) and the transaction records:
  // equal before and after a command that must write nothing.
  std::string Snapshot(const std::vector<std::string>& collections) const {
    std::string all;
    for (const std::string& c : collections) all += ScanText(c);
    RunResult txns = Cli({"collections", "count", "__litetx.txn", "--format", "json"});
    EXPECT_EQ(txns.code, 0) << txns.err;
    return all + txns.out;
  }
  // Snapshot(...) taken before equals the one after; else where they first differ.
  static void ExpectUnchanged(const std::string& before, const std::string& after) {
    if (before == after) return;
    std::size_t at = 0;
    while (at < before.size() && at < after.size() && before[at] == after[at]) ++at;
    const std::size_t from = at < 200 ? 0 : at - 200;
    ADD_FAILURE() << "the store changed; first difference at byte " << at << ":\nbefore: ..."
                  << before.substr(from, 400) << "\nafter:  ..." << after.substr(from, 400);
  }
  void Gc() const {
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
    ASSERT_EQ(gc.code, 0) << gc.err << gc.out;
  }
};

// n lines {"id": "o<i>", "amount": i}, i = 1..n.
std::string Orders(int n) {
  std::string out;
  for (int i = 1; i <= n; ++i) {
    out += R"({"id":"o)" + std::to_string(i) + R"(","amount":)" + std::to_string(i) + "}\n";
  }
  return out;
}

json::object Counts(json::object& summary, const char* which) {
  json::value* v = summary.if_contains(which);
  if (v == nullptr || !v->is_object()) {
    ADD_FAILURE() << "no \"" << which << "\" in " << json::serialize(summary);
    return {};
  }
  return v->as_object();
}

// ---------------------------------------------------------------------------------------------

TEST_F(CliBatch, CompletesWritesEachOutputAndListsPoisonLines) {
  // 60 lines: 5 void orders filtered out, 5 poison lines of four kinds.
  std::string in;
  std::int64_t expected_sum = 0;
  int expected_written = 0;
  for (int i = 1; i <= 60; ++i) {
    if (i == 7) {
      in += "{not json\n";
    } else if (i == 13) {
      in += "[1, 2]\n";
    } else if (i == 21) {
      in += R"({"amount": 5})" "\n";  // no id
    } else if (i == 30) {
      in += R"({"id": "o30", "status": "ok"})" "\n";  // no amount: fails "require"
    } else if (i == 44) {
      in += R"({"id": "o44", "amount": "lots", "status": "ok"})" "\n";  // not a number
    } else if (i % 12 == 0) {
      in += R"({"id": "o)" + std::to_string(i) + R"(", "amount": 1, "status": "void"})" "\n";
    } else {
      // Every third amount is written as a string: to_number converts it.
      const std::string amount = i % 3 == 0 ? "\"" + std::to_string(i) + "\"" : std::to_string(i);
      in += R"({"id": "o)" + std::to_string(i) + R"(", "amount": )" + amount +
            R"(, "status": "ok", "tmp": true})" "\n";
      expected_sum += i;
      ++expected_written;
    }
    if (i == 40) in += "\n";  // a blank line is not an item
  }
  ASSERT_EQ(expected_written, 50);
  const std::string input = WriteFile("orders.ndjson", in);
  const std::string job = WriteFile("job.json", R"({
    "job": "orders-1", "input": "orders.ndjson", "output": "orders", "id_field": "id",
    "commit_interval": 8, "skip": {"limit": 10},
    "transform": [
      {"op": "filter", "field": "status", "equals": "void"},
      {"op": "require", "fields": ["amount"]},
      {"op": "to_number", "field": "amount"},
      {"op": "drop", "fields": ["tmp"]},
      {"op": "rename", "from": "status", "to": "state"},
      {"op": "set", "field": "source", "value": {"by": "batch"}},
      {"op": "add_to", "collection": "totals", "id": "orders", "field": "amount", "from": "amount"},
      {"op": "add_to", "collection": "totals", "id": "orders", "field": "count", "by": 1}
    ]})");

  // Before the store exists --status is a store error, like every read-only command.
  RunResult status0 = Cli({"batch", job, "--status"});
  EXPECT_EQ(status0.code, 3) << status0.err;

  RunResult r = Cli({"batch", job});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  json::object s = r.Json();
  EXPECT_EQ(s["status"], "completed");
  EXPECT_EQ(s["execution"], 1);
  json::object run = Counts(s, "this_run");
  EXPECT_EQ(run["read"], 57);  // 60 lines, 3 of them unreadable
  EXPECT_EQ(run["written"], 50);
  EXPECT_EQ(run["filtered"], 5);
  EXPECT_EQ(run["read_skips"], 3);
  EXPECT_EQ(run["process_skips"], 2);
  EXPECT_EQ(run["recovered"], 0);
  EXPECT_EQ(json::value(run), s["total"]);
  EXPECT_EQ(s["chunks"], 8);  // 60 positions in chunks of 8
  EXPECT_EQ(s["chunks_this_run"], 8);
  // The skipped items, in input order, with where and why.
  const json::array& skipped = s["skipped"].as_array();
  ASSERT_EQ(skipped.size(), 5u) << json::serialize(skipped);
  const struct {
    int position;
    const char* key;
    const char* phase;
    const char* message;
  } want[] = {{6, "", "read", "orders.ndjson:7: not valid JSON"},
              {12, "", "read", "orders.ndjson:13: not a JSON object"},
              {20, "", "read", "orders.ndjson:21: no field \"id\""},
              {29, "o30", "process", "required field \"amount\" is missing"},
              {43, "o44", "process", "field \"amount\" is \"lots\", not a number"}};
  for (std::size_t i = 0; i < 5; ++i) {
    json::object e = skipped[i].as_object();
    SCOPED_TRACE(json::serialize(e));
    EXPECT_EQ(e["position"], want[i].position);
    EXPECT_EQ(e["key"], want[i].key);
    EXPECT_EQ(e["phase"], want[i].phase);
    EXPECT_EQ(e["code"], "invalid_argument");
    EXPECT_EQ(e["recovered"], false);
    EXPECT_NE(std::string(e["message"].as_string()).find(want[i].message), std::string::npos);
  }
  EXPECT_EQ(s["skipped_more"], 0);

  // The outputs: one per written item, transformed; the totals committed with them.
  EXPECT_EQ(Live("orders"), 50);
  json::object o3 = Get("orders", "o3");
  EXPECT_EQ(json::serialize(o3["doc"]),
            R"({"id":"o3","amount":3,"state":"ok","source":{"by":"batch"}})");
  EXPECT_EQ(Get("orders", "o12")["status"], "not_found");  // filtered
  EXPECT_EQ(Get("orders", "o30")["status"], "not_found");  // skipped
  EXPECT_EQ(Field("totals", "orders", "amount"), expected_sum);
  EXPECT_EQ(Field("totals", "orders", "count"), 50);
  std::printf("CliBatch: 60 lines -> 50 written, 5 filtered, 5 skipped in 8 chunks; sum %lld\n",
              static_cast<long long>(expected_sum));

  // --status reads the stored state.
  RunResult st = Cli({"batch", job, "--status"});
  ASSERT_EQ(st.code, 0) << st.err;
  json::object so = st.Json();
  EXPECT_EQ(so["status"], "completed");
  EXPECT_EQ(so["execution"], 1);
  EXPECT_EQ(so["chunks"], 8);
  EXPECT_EQ(so["total"], s["total"]);

  // A rerun: already complete, nothing read, nothing written.
  const std::vector<std::string> colls = {"orders", "totals", "litetx_batch"};
  const std::string before = Snapshot(colls);
  RunResult again = Cli({"batch", job});
  ASSERT_EQ(again.code, 0) << again.err;
  json::object a = again.Json();
  EXPECT_EQ(a["status"], "already_complete");
  EXPECT_EQ(Counts(a, "this_run")["read"], 0);
  EXPECT_EQ(a["total"], s["total"]);
  ExpectUnchanged(before, Snapshot(colls));

  // A job that never ran, on a store that exists.
  const std::string other = WriteFile("other.json", R"({"job": "never", "output": "x"})");
  RunResult st2 = Cli({"batch", other, "--status"});
  ASSERT_EQ(st2.code, 0) << st2.err;
  EXPECT_EQ(st2.Json()["status"], "not_started");
}

TEST_F(CliBatch, SkipLimitFailsTheStepAndARerunWithAHigherLimitResumes) {
  // Poison lines 5, 25 and 45 of 60; a limit of 1 fails the step at the second.
  std::string in;
  for (int i = 1; i <= 60; ++i) {
    in += i % 20 == 5 ? std::string("garbage\n")
                      : R"({"id":"o)" + std::to_string(i) + R"(","amount":)" + std::to_string(i) + "}\n";
  }
  const std::string input = WriteFile("in.ndjson", in);
  const std::string base = R"("job": "limits", "output": "out", "id_field": "id", "commit_interval": 10,
      "transform": [{"op": "add_to", "collection": "totals", "id": "t", "field": "n", "by": 1}])";
  const std::string strict = WriteFile("strict.json", "{" + base + R"(, "skip": {"limit": 1}})");
  RunResult r = Cli({"batch", strict, "--input", input, "--quiet"});
  EXPECT_EQ(r.code, 1) << r.err;
  json::object s = r.Json();
  EXPECT_EQ(s["status"], "failed");
  EXPECT_EQ(s["code"], "failed_precondition");
  EXPECT_NE(std::string(s["message"].as_string()).find("skip limit 1 exceeded"), std::string::npos)
      << s["message"];
  EXPECT_NE(r.err.find("step failed (failed_precondition)"), std::string::npos) << r.err;
  // Chunks 0 and 1 committed (positions 0-19); chunk 2 held the second poison line.
  EXPECT_EQ(s["chunks"], 2);
  EXPECT_EQ(Live("out"), 19);
  EXPECT_EQ(Field("totals", "t", "n"), 19);
  RunResult st = Cli({"batch", strict, "--status"});
  ASSERT_EQ(st.code, 0) << st.err;
  EXPECT_EQ(st.Json()["status"], "failed");

  // Another chunking is refused: the job's chunks would no longer be the same.
  const std::string rechunked =
      WriteFile("rechunked.json", "{" + std::string(base).replace(base.find("10"), 2, "15") +
                                      R"(, "skip": {"limit": 5}})");
  const std::vector<std::string> colls = {"out", "totals", "litetx_batch"};
  const std::string before = Snapshot(colls);
  RunResult changed = Cli({"batch", rechunked, "--input", input});
  EXPECT_EQ(changed.code, 2) << changed.err;
  EXPECT_NE(changed.err.find("was started with \"commit_interval\" 10, now 15"), std::string::npos)
      << changed.err;
  EXPECT_EQ(changed.out, "");
  ExpectUnchanged(before, Snapshot(colls));

  // A higher skip limit may be given to the same job: it resumes after chunk 1.
  const std::string lenient = WriteFile("lenient.json", "{" + base + R"(, "skip": {"limit": 5}})");
  RunResult again = Cli({"batch", lenient, "--input", input});
  ASSERT_EQ(again.code, 0) << again.err;
  json::object a = again.Json();
  EXPECT_EQ(a["status"], "completed");
  EXPECT_EQ(a["execution"], 2);
  EXPECT_EQ(Counts(a, "this_run")["read"], 38);
  EXPECT_EQ(Counts(a, "total")["written"], 57);
  EXPECT_EQ(Counts(a, "total")["read_skips"], 3);
  EXPECT_EQ(Live("out"), 57);
  EXPECT_EQ(Field("totals", "t", "n"), 57);
}

TEST_F(CliBatch, DeadLetterGetsTheItemsThatFailForGood) {
  const std::string input = WriteFile("in.ndjson",
                                      R"({"id":"a","qty":"3"})" "\n"
                                      R"({"id":"b","qty":"three"})" "\n"
                                      "oops\n"
                                      R"({"id":"c"})" "\n"
                                      R"({"id":"d","qty":4})" "\n");
  const std::string job = WriteFile("job.json", R"({
    "job": "dl", "input": "in.ndjson", "output": "items", "id_field": "id", "mode": "upsert",
    "dead_letter": "dead", "skip": {"limit": 1}, "commit_interval": 2,
    "transform": [{"op": "require", "fields": ["qty"]}, {"op": "to_number", "field": "qty"}]})");
  RunResult r = Cli({"batch", job});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object s = r.Json();
  json::object total = Counts(s, "total");
  EXPECT_EQ(total["written"], 2);
  EXPECT_EQ(total["recovered"], 2);    // b and c: to the dead-letter collection
  EXPECT_EQ(total["read_skips"], 1);   // the unreadable line cannot be dead-lettered: skipped
  EXPECT_EQ(total["process_skips"], 0);
  EXPECT_EQ(Live("items"), 2);
  EXPECT_EQ(Field("items", "a", "qty"), 3);
  EXPECT_EQ(Live("dead"), 2);
  json::object b = Get("dead", "dl/step/1")["doc"].as_object();
  EXPECT_EQ(b["key"], "b");
  EXPECT_EQ(b["position"], 1);
  EXPECT_EQ(b["code"], "invalid_argument");
  EXPECT_NE(std::string(b["message"].as_string()).find("not a number"), std::string::npos);
  EXPECT_EQ(json::serialize(b["item"]), R"({"id":"b","qty":"three"})");
  json::object c = Get("dead", "dl/step/3")["doc"].as_object();
  EXPECT_EQ(c["key"], "c");
  EXPECT_NE(std::string(c["message"].as_string()).find("required field \"qty\""), std::string::npos);
  const json::array& skipped = s["skipped"].as_array();
  ASSERT_EQ(skipped.size(), 3u) << json::serialize(skipped);
  EXPECT_EQ(skipped[0].as_object().at("recovered"), true);
  EXPECT_EQ(skipped[1].as_object().at("phase"), "read");
  EXPECT_EQ(skipped[1].as_object().at("recovered"), false);
  EXPECT_EQ(skipped[2].as_object().at("recovered"), true);
}

TEST_F(CliBatch, BadJobFilesExitTwoNamingTheProblemAndWriteNothing) {
  WriteFile("in.ndjson", Orders(3));
  const struct {
    const char* job;
    const char* message;
  } cases[] = {
      {R"({"job":"j","output":"o","input":"in.ndjson","comit_interval":5})",
       R"("comit_interval" is not a known key)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","retry":{"max_attempts":3,"bakoff":{}}})",
       R"("retry.bakoff" is not a known key)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","transform":[{"op":"upcase","field":"x"}]})",
       R"("transform[0].op" is "upcase", not one of)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","transform":[{"op":"set","field":"x","value":1,"vlaue":2}]})",
       R"("transform[0].vlaue" is not a known key)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","transform":[{"op":"set","field":"x"}]})",
       R"("transform[0].value" is required)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","transform":[{"op":"add_to","collection":"t","id":"i","field":"f","from":"a","by":1}]})",
       R"(needs exactly one of "from")"},
      {R"({"job":"j","output":"o","input":"in.ndjson","transform":[{"op":"rename","from":"a","to":"_ltx_x"}]})",
       "reserved"},
      {R"({"job":"j","output":"o","input":"in.ndjson","transform":{"op":"drop"}})",
       R"("transform" must be an array)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","commit_interval":0})",
       R"("commit_interval" must be a whole number from 1 to 100000, not 0)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","commit_interval":2.5})",
       R"("commit_interval" must be a whole number)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","commit_interval":"10"})",
       R"("commit_interval" must be a whole number)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","commit_interval":600,"dead_letter":"d"})",
       "at most 499 items fit in one here"},
      {R"({"job":"j","output":"o","input":"in.ndjson","concurrency":0})",
       R"("concurrency" must be a whole number from 1 to 256)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","retry":{"max_attempts":-1}})",
       R"("retry.max_attempts" must be a whole number from 1 to 100, not -1)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","retry":{"backoff":{"kind":"exponential","initial_ms":50,"max_ms":5}}})",
       "is below initial_ms"},
      {R"({"job":"j","output":"o","input":"in.ndjson","retry":{"backoff":{"kind":"exponential","multiplier":0.5}}})",
       R"("retry.backoff.multiplier" must be a number from 1 to 100)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","retry":{"backoff":{"kind":"none","initial_ms":5}}})",
       "has no effect with kind \"none\""},
      {R"({"job":"j","output":"o","input":"in.ndjson","retry":{"backoff":{"kind":"linear"}}})",
       R"("retry.backoff.kind" is "linear")"},
      {R"({"job":"j","output":"o","input":"in.ndjson","retry":{"codes":["conflict","unknown"]}})",
       R"("retry.codes" holds "unknown")"},
      {R"({"job":"j","output":"o","input":"in.ndjson","skip":{"limit":-3}})",
       R"("skip.limit" must be a whole number)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","mode":"merge"})", R"("mode" is "merge")"},
      {R"({"job":"a/b","output":"o","input":"in.ndjson"})", R"("job" contains '/')"},
      {R"({"output":"o","input":"in.ndjson"})", R"("job" is required)"},
      {R"({"job":"j","output":"o","input":"in.ndjson","dead_letter":"o"})",
       R"("dead_letter" is the output collection)"},
      {R"({"job":"j","output":"__litetx.txn","input":"in.ndjson"})", "reserved"},
      {R"({"job":"j","job":"k","output":"o","input":"in.ndjson"})", R"(key "job" appears twice)"},
      {R"({"job":"j","output":"o"})", R"(no "input", and no --input given)"},
      {R"({"job":"j","output":"o","input":"missing.ndjson"})", "cannot read"},
      {R"({"job":"j","output":"o","input":"in.ndjson",)", "malformed JSON"},
      {R"(["job"])", "must be a JSON object"},
  };
  int k = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.job);
    const std::string job = WriteFile("bad" + std::to_string(k++) + ".json", c.job);
    RunResult r = Cli({"batch", job});
    EXPECT_EQ(r.code, 2) << r.err << r.out;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // Nothing was written: not even the store was created.
  struct stat st {};
  EXPECT_NE(::stat(path_.c_str(), &st), 0) << "a bad job file created the store";
  std::printf("CliBatch: %d bad job files refused with exit 2\n", k);

  // On a store that holds a job, a bad job file changes nothing either.
  const std::string good = WriteFile("good.json", R"({"job":"j","output":"o","input":"in.ndjson"})");
  ASSERT_EQ(Cli({"batch", good}).code, 0);
  const std::string before = Snapshot({"o", "litetx_batch"});
  RunResult r = Cli({"batch", WriteFile("bad.json", R"({"job":"j","output":"o","input":"in.ndjson","mode":1})")});
  EXPECT_EQ(r.code, 2) << r.err;
  ExpectUnchanged(before, Snapshot({"o", "litetx_batch"}));
}

// A signal while chunk 0's commit is held: the chunk commits whole, no other starts, the exit
// code is 128 + the signal; a rerun completes, every output exactly once. SIGTERM reads stdin,
// whose rerun cannot seek: it reads forward to the checkpoint.
TEST_F(CliBatch, ASignalStopsAfterTheChunkInFlightAndARerunCompletes) {
  const std::string fifo = dir_ + "/hold.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  constexpr int kItems = 200;  // 9 KB: fits in the stdin pipe
  const std::string orders = Orders(kItems);
  const std::string input = WriteFile("orders.ndjson", orders);
  const struct {
    int number;
    const char* name;
    int code;
    bool stdin_input;
  } runs[] = {{SIGINT, "SIGINT", 130, false}, {SIGTERM, "SIGTERM", 143, true}};
  for (const auto& run : runs) {
    SCOPED_TRACE(run.name);
    const std::string name = std::string("sig-") + run.name;
    const std::string job = WriteFile(name + ".json", R"({"job": ")" + name + R"(", "output": ")" +
                                                          name + R"(", "id_field": "id",
        "commit_interval": 20, "input": "orders.ndjson",
        "transform": [{"op": "add_to", "collection": "totals", "id": ")" + name +
                                                          R"(", "field": "amount", "from": "amount"}]})");
    std::vector<std::string> args = {"batch", job};
    if (run.stdin_input) args.insert(args.end(), {"--input", "-"});
    // Write 1 stores the job description, write 2 the step document; chunk 0's commit sends
    // its record and documents as one batch from write 3 on: held before any of it is sent.
    Child c = Start(With(args), "hold-write:5:" + fifo, run.stdin_input ? orders : "");
    ASSERT_TRUE(WaitForStderr(c, "holding before write 5", seconds(30))) << c.err_read;
    ASSERT_EQ(::kill(c.pid, run.number), 0);
    ASSERT_TRUE(WaitForStderr(c, std::string(run.name) + " received", seconds(30))) << c.err_read;
    std::ofstream(fifo) << "x";
    RunResult r = Finish(std::move(c));
    EXPECT_EQ(r.code, run.code) << r.err;
    json::object s = r.Json();
    EXPECT_EQ(s["status"], "interrupted");
    EXPECT_EQ(s["interrupted"], run.name);
    EXPECT_EQ(s["chunks_this_run"], 1);
    EXPECT_EQ(s["chunks"], 1);
    EXPECT_EQ(Counts(s, "this_run")["written"], 20);
    EXPECT_NE(r.err.find("run the same job again to resume"), std::string::npos) << r.err;
    // The chunk in flight committed whole, with its total; nothing of later chunks; no
    // transaction left open.
    EXPECT_EQ(Live(name), 20);
    EXPECT_EQ(Field("totals", name, "amount"), 20 * 21 / 2);
    EXPECT_EQ(Unsettled(), 0);
    RunResult st = Cli({"batch", job, "--status"});
    ASSERT_EQ(st.code, 0) << st.err;
    EXPECT_EQ(st.Json()["status"], "running");  // stopped without finishing: resumable

    RunResult again = run.stdin_input ? Cli(args, "", orders) : Cli(args);
    ASSERT_EQ(again.code, 0) << again.err;
    json::object a = again.Json();
    EXPECT_EQ(a["status"], "completed");
    EXPECT_EQ(a["execution"], 2);
    EXPECT_EQ(Counts(a, "this_run")["read"], kItems - 20);
    EXPECT_EQ(Counts(a, "total")["written"], kItems);
    EXPECT_EQ(Live(name), kItems);
    EXPECT_EQ(Field("totals", name, "amount"), kItems * (kItems + 1) / 2);
  }
}

// kill -9 at random points, each followed by `litetx gc`: what is visible is whole chunks, each
// with its share of the running total; then reruns (alternately with 1 and 3 chunks at once)
// until the job completes: every output exactly once.
TEST_F(CliBatch, KilledAtRandomPointsThenRerunWritesEveryOutputOnce) {
  constexpr int kItems = 4000;
  constexpr int kInterval = 25;
  WriteFile("orders.ndjson", Orders(kItems));
  const std::string common = R"("output": "orders", "id_field": "id", "input": "orders.ndjson",
      "commit_interval": 25,
      "retry": {"max_attempts": 20, "backoff": {"kind": "exponential", "initial_ms": 1, "max_ms": 20}},
      "transform": [
        {"op": "add_to", "collection": "totals", "id": "sum", "field": "amount", "from": "amount"},
        {"op": "add_to", "collection": "totals", "id": "sum", "field": "n", "by": 1}]})";
  const std::string jobs[] = {WriteFile("one.json", R"({"job": "kill", "concurrency": 1, )" + common),
                              WriteFile("three.json", R"({"job": "kill", "concurrency": 3, )" + common)};
  const char* env_seed = std::getenv("LITETX_SEED");
  const std::uint64_t seed =
      env_seed != nullptr ? std::strtoull(env_seed, nullptr, 10) : std::random_device{}();
  std::printf("CliBatch kill seed %llu (replay: LITETX_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);

  // One whole run of the same shape on another job gives the span the kills are spread over.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string probe = WriteFile("probe.json", R"({"job": "probe", "output": "probe", "id_field": "id",
      "input": "orders.ndjson", "commit_interval": 25,
      "transform": [{"op": "add_to", "collection": "totals", "id": "probe", "field": "n", "by": 1}]})");
  ASSERT_EQ(Cli({"batch", probe, "--quiet"}).code, 0);
  const auto span =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);

  int killed = 0, rounds = 0, midway = 0;
  std::string progress;  // outputs after each round
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  for (int round = 0; round < 6 && std::chrono::steady_clock::now() < deadline; ++round) {
    ++rounds;
    // Within the first third of a whole run: a run resumes where the last one stopped, so
    // most rounds end killed and the job is finished by the reruns below.
    const auto delay = milliseconds(std::uniform_int_distribution<long>(
        0, std::max<long>(1, static_cast<long>(span.count() / 3)))(rng));
    Child child = Start(With({"batch", jobs[round % 2], "--quiet"}));
    ASSERT_GT(child.pid, 0);
    std::this_thread::sleep_for(delay);
    ::kill(child.pid, SIGKILL);
    RunResult r = Finish(std::move(child));
    SCOPED_TRACE("round " + std::to_string(round) + ", killed after " +
                 std::to_string(delay.count()) + " ms, exit " + std::to_string(r.code));
    if (r.code == 128 + SIGKILL) ++killed;
    Gc();
    // Whole chunks only, and the total moved with them.
    const std::int64_t n = Live("orders");
    EXPECT_EQ(n % kInterval, 0) << n << " outputs: part of a chunk is visible";
    EXPECT_EQ(std::max<std::int64_t>(0, Field("totals", "sum", "n")), n);
    progress += (progress.empty() ? "" : ", ") + std::to_string(n);
    if (r.code == 128 + SIGKILL && n > 0 && n < kItems) ++midway;
    if (r.code == 0) break;  // the job completed before the kill
  }
  // Reruns until complete (a rerun may fail restartably, e.g. after many conflicts).
  json::object done;
  for (int i = 0; i < 3; ++i) {
    RunResult r = Cli({"batch", jobs[i % 2], "--quiet"});
    ASSERT_TRUE(r.code == 0 || r.code == 1) << r.code << " " << r.err;
    done = r.Json();
    if (r.code == 0) break;
  }
  EXPECT_TRUE(done["status"] == "completed" || done["status"] == "already_complete")
      << json::serialize(done);
  EXPECT_EQ(Counts(done, "total")["written"], kItems);
  EXPECT_EQ(Counts(done, "total")["read"], kItems);
  EXPECT_EQ(Live("orders"), kItems);
  EXPECT_EQ(Field("totals", "sum", "n"), kItems);
  EXPECT_EQ(Field("totals", "sum", "amount"), std::int64_t{kItems} * (kItems + 1) / 2);
  std::printf("CliBatch kill: %d rounds, %d killed by SIGKILL (%d with part of the job done); "
              "outputs after each: %s; one whole run %lld ms\n",
              rounds, killed, midway, progress.c_str(), static_cast<long long>(span.count()));
  EXPECT_GT(midway, 0) << "no run was killed with part of the job done";
}

// A crash in the middle of chunk 0's commit leaves a pending transaction holding some of its
// documents, the step document among them. A rerun right away, with no collector, waits until
// that transaction's lease has passed, rolls it back and completes: every output once.
TEST_F(CliBatch, ARerunRightAfterACrashInAChunkCommitCompletes) {
  constexpr int kItems = 100;
  WriteFile("orders.ndjson", Orders(kItems));
  const std::string job = WriteFile("job.json", R"({"job": "crash", "output": "orders",
      "id_field": "id", "input": "orders.ndjson", "commit_interval": 25,
      "transform": [{"op": "add_to", "collection": "totals", "id": "sum", "field": "n", "by": 1}]})");
  // Writes 1 and 2: the job description and the step document; chunk 0's batch from write 3.
  RunResult crash = Cli({"batch", job, "--quiet"}, "crash-after-writes:10");
  ASSERT_EQ(crash.code, 86) << crash.err;
  EXPECT_EQ(Live("orders"), 0);
  EXPECT_GT(Count("orders")["held"].to_number<std::int64_t>(), 0);
  EXPECT_EQ(Unsettled(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = Cli({"batch", job, "--quiet"});
  const auto took =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  json::object s = r.Json();
  EXPECT_EQ(s["status"], "completed");
  EXPECT_EQ(Counts(s, "total")["written"], kItems);
  EXPECT_EQ(Live("orders"), kItems);
  EXPECT_EQ(Field("totals", "sum", "n"), kItems);
  EXPECT_EQ(Count("orders")["held"], 0);
  std::printf("CliBatch: the rerun after a crash in a chunk's commit took %lld ms\n",
              static_cast<long long>(took.count()));
}

// The reply of the last write of chunk 0's commit is lost and every later store call fails:
// the outcome cannot be learned within unknown_timeout_ms, so the run exits 15. The writes had
// all landed (the chunk committed): the rerun finds that out and resumes after it.
TEST_F(CliBatch, AnUnknownCommitOutcomeExits15AndARerunResumesAfterIt) {
  constexpr int kItems = 100;
  WriteFile("orders.ndjson", Orders(kItems));
  const std::string job = WriteFile("job.json", R"({"job": "unknown", "output": "orders",
      "id_field": "id", "input": "orders.ndjson", "commit_interval": 10, "unknown_timeout_ms": 200,
      "transform": [{"op": "add_to", "collection": "totals", "id": "sum", "field": "n", "by": 1}]})");
  // Writes 1 and 2: the job description and the step document. Chunk 0's commit: its record
  // and its 13 documents (10 outputs, the total, the chunk and step documents), writes 3-16.
  RunResult r = Cli({"batch", job, "--quiet"}, "partition-after-writes:16");
  ASSERT_EQ(r.code, 15) << r.err << r.out;
  json::object s = r.Json();
  EXPECT_EQ(s["status"], "unknown");
  EXPECT_EQ(s["code"], "unknown");
  EXPECT_NE(std::string(s["message"].as_string()).find("is not known"), std::string::npos);
  EXPECT_NE(r.err.find("step outcome unknown"), std::string::npos) << r.err;
  RunResult again = Cli({"batch", job, "--quiet"});
  ASSERT_EQ(again.code, 0) << again.err << again.out;
  json::object a = again.Json();
  EXPECT_EQ(a["status"], "completed");
  EXPECT_EQ(a["execution"], 2);
  EXPECT_EQ(Counts(a, "this_run")["read"], kItems - 10);  // chunk 0 had committed
  EXPECT_EQ(Counts(a, "total")["written"], kItems);
  EXPECT_EQ(Live("orders"), kItems);
  EXPECT_EQ(Field("totals", "sum", "n"), kItems);
}

}  // namespace
}  // namespace litetx::clitest
