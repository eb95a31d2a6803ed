// tests/batch/kill9_batch_worker.cpp — the child process of the kill -9 test of litetx::batch
// (kill9_batch_test.cpp).
//
// Opens the LMDB store given on the command line, prints "ready", then runs (or resumes) the
// step --job over the NDJSON file --input (key field "id") until it ends, unless it is killed
// first. process rejects an item whose "poison" field is true (kInvalidArgument: skipped);
// write inserts each output as out/<id> {"i", "v", "writes": 1} (an output written again would
// read writes 2) and adds the chunk's output count to stats/counter.items (read, then written).
// After each committed chunk it prints "chunk <k>"; at the end "done <report as JSON>" (the
// step completed) or "failed <status>". Each line is one write(2) of less than PIPE_BUF bytes,
// so a kill never leaves half a line.
//
// Exit codes: 0 completed, 1 the step failed (status printed), 2 bad arguments, 3 the store
// cannot be opened, 4 RunStep refused to run (printed).
//
// Usage: litetx_batch_kill9_worker --store DIR --input FILE --job JOB --lease-ms L
//          --commit-interval N --concurrency C
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include <boost/json.hpp>

#include "litetx/batch.h"
#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"

namespace {

namespace json = boost::json;

void Say(const std::string& line) {
  std::string s = line + "\n";
  while (::write(STDOUT_FILENO, s.data(), s.size()) < 0) {
  }
}

[[noreturn]] void Die(int code, const std::string& message) {
  std::fprintf(stderr, "litetx_batch_kill9_worker: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* required :
       {"--store", "--input", "--job", "--lease-ms", "--commit-interval", "--concurrency"}) {
    if (!args.contains(required)) Die(2, std::string("missing ") + required);
  }
  const int lease_ms = std::atoi(args["--lease-ms"].c_str());
  const int interval = std::atoi(args["--commit-interval"].c_str());
  const int concurrency = std::atoi(args["--concurrency"].c_str());
  if (lease_ms < 1 || interval < 1 || concurrency < 1) Die(2, "bad numbers");

  litetx::LmdbOptions lo;
  lo.durability = litetx::LmdbDurability::kNoSync;  // a process crash loses nothing written
  lo.create_if_missing = false;
  auto opened = litetx::LmdbStore::Open(args["--store"], lo);
  if (!opened.ok()) Die(3, "cannot open the store: " + opened.status().ToString());
  litetx::Options dbo;
  dbo.lease = std::chrono::milliseconds(lease_ms);
  litetx::Database db(*opened, dbo);

  litetx::batch::NdjsonReaderOptions ro;
  ro.key_field = "id";
  auto reader = litetx::batch::NdjsonReader::Open(args["--input"], ro);
  if (!reader.ok()) Die(3, "cannot open the input: " + reader.status().ToString());

  litetx::batch::StepFunctions fns;
  fns.process = [](litetx::TxnContext&, const litetx::batch::Item& item)
      -> litetx::Result<std::optional<json::value>> {
    const json::object& o = item.value.as_object();
    if (const json::value* p = o.if_contains("poison"); p != nullptr && p->is_bool() && p->get_bool()) {
      return litetx::Status::InvalidArgument("poison item " + item.key);
    }
    return std::optional<json::value>(json::object{{"i", o.at("i")}, {"v", o.at("v")}});
  };
  fns.write = [](litetx::TxnContext& tx, const std::vector<litetx::batch::Output>& outs) {
    for (const auto& out : outs) {
      auto r = tx.Get("out", out.item->key);
      if (!r.ok()) return r.status();
      litetx::Status s;
      if (r->state == litetx::DocumentState::kFound) {
        s = tx.Adjust("out", out.item->key, {{"writes", 1}});
      } else {
        json::object doc = out.value.as_object();
        doc["writes"] = 1;
        s = tx.Insert("out", out.item->key, std::move(doc));
      }
      if (!s.ok()) return s;
    }
    auto c = tx.Get("stats", "counter");
    if (!c.ok()) return c.status();
    if (c->state != litetx::DocumentState::kFound) return litetx::Status::Corruption("no counter");
    const std::int64_t items = c->doc.at("items").to_number<std::int64_t>();
    return tx.Update("stats", "counter",
                     {{"items", items + static_cast<std::int64_t>(outs.size())}});
  };

  litetx::batch::StepOptions o;
  o.job = args["--job"];
  o.commit_interval = static_cast<std::size_t>(interval);
  o.concurrency = static_cast<std::size_t>(concurrency);
  o.skip.skip_limit = 100'000;
  o.retry.max_attempts = 10;
  o.backoff = litetx::batch::BackoffPolicy::Exponential(std::chrono::milliseconds{1},
                                                        std::chrono::milliseconds{50});
  o.listener.after_chunk = [](std::uint64_t k, const litetx::batch::Counts&) {
    Say("chunk " + std::to_string(k));
  };
  Say("ready");
  auto report = litetx::batch::RunStep(db, **reader, fns, o);
  if (!report.ok()) {
    Say("refused " + report.status().ToString());
    Die(4, report.status().ToString());
  }
  if (!report->status.ok()) {
    Say("failed " + report->status.ToString());
    return 1;
  }
  json::object r{{"execution", report->execution},
                 {"chunks", report->chunks},
                 {"already_complete", report->already_complete},
                 {"total", report->total.ToJson()},
                 {"this_run", report->this_run.ToJson()}};
  Say("done " + json::serialize(r));
  return 0;
}
