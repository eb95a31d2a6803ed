// examples/batch_snippets.cpp — the C++ snippets of docs/batch.md, compiled and run.
//
// tests/docs checks that every ```cpp block of docs/batch.md is a verbatim copy of lines here,
// and runs this program: it exits 0 only if each snippet did what the document says.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>
#include <optional>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include "litetx/batch.h"  // CMake: target_link_libraries(app PRIVATE litetx::batch)
#include "litetx/litetx.h"

using namespace std::chrono_literals;

namespace {

int failures = 0;

void Expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "batch snippet: %s\n", what);
    ++failures;
  }
}

bool Exists(litetx::Database& db, const char* collection, const std::string& id) {
  auto r = db.Read(collection, id);
  return r.ok() && r->state == litetx::DocumentState::kFound;
}

// A remote service that fails twice, then answers.
int rate_calls = 0;
litetx::Status FetchExchangeRate(const litetx::batch::Item&, boost::json::value& rate) {
  if (++rate_calls % 3 != 0) return litetx::Status::Unavailable("rate service timed out");
  rate = 1.1;
  return litetx::Status::Ok();
}

// A supplier that refuses the first reservation.
int supplier_calls = 0;
litetx::Status ReserveWithSupplier(const std::string&, int) {
  if (++supplier_calls == 1) return litetx::Status::Busy("supplier busy");
  return litetx::Status::Ok();
}

// Reads orders.ndjson in the current directory.
litetx::Status FirstStep(litetx::Database& db) {
  auto reader = litetx::batch::NdjsonReader::Open("orders.ndjson", {.key_field = "id"});
  if (!reader) return reader.status();

  litetx::batch::StepFunctions fns;
  fns.process = [](litetx::TxnContext&, const litetx::batch::Item& item)
      -> litetx::Result<std::optional<boost::json::value>> {
    const auto& o = item.value.as_object();
    if (!o.contains("amount")) return litetx::Status::InvalidArgument("no amount");
    if (o.at("status") == "void") return std::optional<boost::json::value>{};  // filtered out
    return std::optional<boost::json::value>{item.value};
  };
  fns.write = [](litetx::TxnContext& tx, const std::vector<litetx::batch::Output>& out) {
    for (const auto& o : out) {
      if (auto s = tx.Insert("orders", o.item->key, o.value.as_object()); !s.ok()) return s;
    }
    return litetx::Status::Ok();
  };

  litetx::batch::StepOptions options;
  options.job = "orders-2026-11-24";     // names the run: the same name resumes it
  options.commit_interval = 100;         // items per chunk (per transaction)
  options.skip.skip_limit = 50;          // bad items to skip before the step fails
  auto report = litetx::batch::RunStep(db, **reader, fns, options);
  if (!report) return report.status();   // bad options, or the stored state is unusable
  if (!report->status.ok()) {
    // Failed; committed chunks stay. Fix the cause and call RunStep again with the same job.
    return report->status;
  }
  Expect(report->total.read == 4 && report->total.written == 2, "first step: 2 of 4 written");
  Expect(report->total.filtered == 1 && report->total.process_skips == 1,
         "first step: one filtered, one skipped");
  return litetx::Status::Ok();
}

litetx::Status StatelessRetry(litetx::Database& db) {
  litetx::batch::StepFunctions fns;
  fns.process = [&](litetx::TxnContext&, const litetx::batch::Item& item)
      -> litetx::Result<std::optional<boost::json::value>> {
    boost::json::value rate;
    litetx::Status s = litetx::batch::Retry(
        {.max_attempts = 5}, litetx::batch::BackoffPolicy::Exponential(1ms, 10ms),
        [&](int /*attempt*/) { return FetchExchangeRate(item, rate); });
    if (!s.ok()) return s;
    boost::json::object out = item.value.as_object();
    out["rate"] = rate;
    return std::optional<boost::json::value>{std::move(out)};
  };
  fns.write = [](litetx::TxnContext& tx, const std::vector<litetx::batch::Output>& out) {
    for (const auto& o : out) {
      if (auto s = tx.Insert("priced", o.item->key, o.value.as_object()); !s.ok()) return s;
    }
    return litetx::Status::Ok();
  };
  litetx::batch::VectorReader reader({{0, "p1", boost::json::object{{"amount", 5}}}});
  litetx::batch::StepOptions options;
  options.job = "prices";
  auto report = litetx::batch::RunStep(db, reader, fns, options);
  if (!report) return report.status();
  Expect(report->status.ok() && rate_calls == 3, "stateless retry: third call succeeds");
  Expect(Exists(db, "priced", "p1"), "stateless retry: the item is written");
  return report->status;
}

litetx::Status NestedRetry(litetx::Database& db, const std::string& sku, int qty) {
  auto committed = db.Run([&](litetx::TxnContext& tx) -> litetx::Status {
    litetx::Status s = litetx::batch::RetryNested(
        tx, {.max_attempts = 3}, litetx::batch::BackoffPolicy::Fixed(5ms),
        [&](litetx::TxnContext& t, int /*attempt*/) {
          if (auto s = t.Adjust("stock", sku, {{"on_hand", -qty}}); !s.ok()) return s;
          return ReserveWithSupplier(sku, qty);   // may fail: the adjust above is undone
        });
    return s;
  });
  if (!committed) return committed.status();
  auto stock = db.Read("stock", sku);
  Expect(stock.ok() && stock->doc.at("on_hand").as_int64() == 10 - qty,
         "nested retry: one adjust committed, the failed attempt's undone");
  return litetx::Status::Ok();
}

}  // namespace

int main() {
  litetx::Options o;
  o.logger = std::make_shared<spdlog::logger>("batch-snippets",
                                              std::make_shared<spdlog::sinks::null_sink_mt>());
  litetx::Database db(std::make_shared<litetx::MemoryStore>(), o);

  const auto dir = std::filesystem::temp_directory_path() /
                   ("litetx-batch-snippets-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  {
    std::ofstream f("orders.ndjson");
    f << R"({"id": "o1", "amount": 30, "status": "new"})" << "\n"
      << R"({"id": "o2", "status": "new"})" << "\n"
      << R"({"id": "o3", "amount": 12, "status": "void"})" << "\n"
      << R"({"id": "o4", "amount": 7, "status": "new"})" << "\n";
  }
  Expect(FirstStep(db).ok(), "first step completes");
  std::filesystem::current_path(cwd);
  Expect(Exists(db, "orders", "o1") && Exists(db, "orders", "o4"), "first step: o1, o4 written");
  Expect(!Exists(db, "orders", "o2") && !Exists(db, "orders", "o3"),
         "first step: o2 skipped, o3 filtered");
  Expect(Exists(db, "litetx_batch", "orders-2026-11-24/step/skip/00000000000000000001"),
         "first step: a skip record for o2");

  Expect(StatelessRetry(db).ok(), "stateless retry completes");

  Expect(db.Commit(litetx::Transaction().Insert("stock", "sku-1", {{"on_hand", 10}})).ok(),
         "stock seeded");
  Expect(NestedRetry(db, "sku-1", 3).ok(), "nested retry commits");
  Expect(supplier_calls == 2, "nested retry: second attempt succeeds");

  std::filesystem::remove_all(dir);
  if (failures == 0) std::printf("every batch snippet did what docs/batch.md says\n");
  return failures == 0 ? 0 : 1;
}
