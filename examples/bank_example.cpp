// A small tour of litetx on the in-memory store: a few transactions and what happened.
// Exits 0 if every step ended the way the comments say.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <boost/json.hpp>

#include "litetx/litetx.h"

namespace json = boost::json;
using litetx::Code;

namespace {

int failures = 0;

void Expect(const char* step, litetx::Code got, litetx::Code want, const std::string& detail) {
  bool ok = got == want;
  failures += ok ? 0 : 1;
  std::printf("%-46s -> %-12s %s%s\n", step, std::string(litetx::CodeName(got)).c_str(),
              detail.c_str(), ok ? "" : "   [UNEXPECTED]");
}

std::string Show(litetx::Database& db, const char* id) {
  auto r = db.Read("accounts", id);
  if (!r.ok()) return r.status().ToString();
  std::string s = std::string(id) + "=" + litetx::DocumentStateName(r->state);
  if (r->state == litetx::DocumentState::kFound) {
    s += " v" + std::to_string(r->version) + " " + json::serialize(r->doc);
  }
  return s;
}

}  // namespace

int main() {
  auto memory = std::make_shared<litetx::MemoryStore>();
  auto counting = std::make_shared<litetx::CountingStore>(memory);
  litetx::Database db(counting);

  auto open = db.Commit(litetx::Transaction()
                            .Insert("accounts", "alice", {{"owner", "Alice"}, {"balance", 100}})
                            .Insert("accounts", "bob", {{"owner", "Bob"}, {"balance", 50}}));
  Expect("open two accounts (2 inserts)", open.code(), Code::kOk,
         Show(db, "alice") + "  " + Show(db, "bob"));
  // A new id's first version comes from the clock (microseconds); each write adds 1.
  const std::uint64_t alice_opened = open.ok() ? open->versions[0] : 0;

  counting->Reset();
  auto transfer = db.Commit(litetx::Transaction()
                                .Adjust("accounts", "alice", {{"balance", -30}})
                                .Adjust("accounts", "bob", {{"balance", 30}}));
  Expect("transfer 30 alice->bob (2 adjusts)", transfer.code(), Code::kOk,
         Show(db, "alice") + "  " + Show(db, "bob") + "  store writes=" +
             std::to_string(counting->counts().writes()));

  auto stale = db.Commit(litetx::Transaction()
                             .Update("accounts", "alice", {{"owner", "Alice B."}}, {}, alice_opened)
                             .Adjust("accounts", "bob", {{"balance", 1}}));
  std::string current = stale.ok() || !stale.status().current_version()
                            ? "?"
                            : std::to_string(*stale.status().current_version());
  Expect("update alice expecting her opening version", stale.code(), Code::kConflict,
         "current version " + current + "; " + Show(db, "bob"));

  auto missing = db.Commit(litetx::Transaction()
                               .Adjust("accounts", "alice", {{"balance", -10}})
                               .Adjust("accounts", "carol", {{"balance", 10}}));
  Expect("transfer to a missing account", missing.code(), Code::kNotFound, Show(db, "alice"));

  counting->Reset();
  auto one = db.Commit(litetx::Transaction().Update("accounts", "bob", {{"vip", true}}));
  Expect("one-action update (fast path)", one.code(), Code::kOk,
         Show(db, "bob") + "  store writes=" + std::to_string(counting->counts().writes()));

  auto close = db.Commit(litetx::Transaction()
                             .Delete("accounts", "alice")
                             .Adjust("accounts", "bob", {{"balance", 70}}));
  Expect("close alice, move her 70 to bob", close.code(), Code::kOk,
         Show(db, "alice") + "  " + Show(db, "bob"));

  auto again = db.Commit(litetx::Transaction().Adjust("accounts", "alice", {{"balance", 1}}));
  Expect("adjust the closed account", again.code(), Code::kDeleted, Show(db, "alice"));

  auto bad = db.Commit(litetx::Transaction().Insert("accounts", "eve", {{"_ltx", 1}}));
  Expect("insert with a reserved field", bad.code(), Code::kInvalidArgument, bad.status().message());

  std::printf("%s\n", failures == 0 ? "all steps ended as expected" : "SOME STEPS WENT WRONG");
  return failures == 0 ? 0 : 1;
}
