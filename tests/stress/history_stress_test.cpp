// tests/stress/history_stress_test.cpp — a recorded history of concurrent transactions, checked
// for lost updates, aborted reads (G1a) and intermediate reads (G1b) by history.h.
//
// 5 documents {"w": token, "n": count}. 4 threads run, through Database::Run on a store that
// injects rare transient failures (so attempts roll back after writing): read-modify-write
// transactions over 1-3 documents (some serializable; some write a document twice, so there is
// an intermediate token, and read it back in between; some abort voluntarily after writing),
// serializable read-only transactions, and plain Database::Read calls. Every attempt is
// recorded with its reads (token, version) and writes (a token unique to the attempt); the
// attempt that Run reports committed is marked so, every other attempt aborted. The checker runs
// in strict mode: reads of aborted attempts must see committed, final data too. In addition
// each document's final "n" must equal the number of committed transactions that wrote it, and
// its final token must be the last write of a committed transaction.
// 3 s in CI; LITETX_LONG=1 runs 40 rounds of 3 s, each on a fresh store and checked alone
// (a history of minutes would not fit in memory).
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "history.h"
#include "stress_util.h"

namespace {

using namespace std::chrono_literals;
using litetx::Code;
using litetx::Status;
using litetx::TxnContext;
using stress::history::Op;
using stress::history::OpKind;
using stress::history::Txn;
using stress::history::TxnStatus;

constexpr int kKeys = 5;
const std::string kColl = "stress.hist";
std::string Key(int i) { return "h" + std::to_string(i); }

std::string TokenOf(const litetx::ReadResult& r) {
  const boost::json::value* w = r.doc.if_contains("w");
  if (r.state != litetx::DocumentState::kFound) return std::string("<") + litetx::DocumentStateName(r.state) + ">";
  return w != nullptr && w->is_string() ? std::string(w->get_string()) : "<no token>";
}
std::int64_t CountOf(const litetx::ReadResult& r) {
  const boost::json::value* n = r.doc.if_contains("n");
  return n != nullptr && n->is_int64() ? n->get_int64() : 0;
}

// Records the token ("w") of every document write that reached the store, to show which
// writes of aborted attempts and which intermediate writes were ever stored.
class TokenSpy final : public litetx::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  litetx::Result<litetx::Revision> Create(const litetx::Key& key, const boost::json::object& value) override {
    auto r = ForwardingStore::Create(key, value);
    Note(key, value, r.code());
    return r;
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& key, litetx::Revision expected,
                                           const boost::json::object& value) override {
    auto r = ForwardingStore::Replace(key, expected, value);
    Note(key, value, r.code());
    return r;
  }
  std::set<std::string> tokens() {
    std::lock_guard<std::mutex> l(mu_);
    return tokens_;
  }

 private:
  void Note(const litetx::Key& key, const boost::json::object& value, Code code) {
    const boost::json::value* w = value.if_contains("w");
    if (key.collection != kColl || code != Code::kOk || w == nullptr || !w->is_string()) return;
    std::lock_guard<std::mutex> l(mu_);
    tokens_.insert(std::string(w->get_string()));
  }
  std::mutex mu_;
  std::set<std::string> tokens_;
};

struct ThreadLog {
  std::vector<Txn> txns;
  std::map<std::string, std::uint64_t> outcomes;  // Run/Read outcome -> count
  std::uint64_t unexpected = 0;                    // outcomes no correct engine reports here
  std::string first_unexpected;

  void Expect(bool ok, const litetx::Status& s) {
    if (ok) return;
    ++unexpected;
    if (first_unexpected.empty()) first_unexpected = s.ToString();
  }
};

void Worker(litetx::Database& db, int thread, std::uint64_t seed, const std::atomic<bool>& stop, ThreadLog& log) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> key_of(0, kKeys - 1), pct(0, 99);
  litetx::RunOptions ro;
  ro.timeout = 2s;
  for (std::uint64_t seq = 0; !stop; ++seq) {
    const std::string base = "T" + std::to_string(thread) + "." + std::to_string(seq);
    const int kind = pct(rng);
    if (kind < 15) {  // a plain read-committed read: a one-read committed transaction
      const std::string k = Key(key_of(rng));
      auto r = db.Read(kColl, k);
      ++log.outcomes[r.ok() ? "read ok" : std::string("read ") + std::string(litetx::CodeName(r.code()))];
      log.Expect(r.ok() || r.code() == Code::kUnavailable, r.status());
      if (r.ok()) log.txns.push_back(Txn{base + ".read", TxnStatus::kCommitted, {Op{OpKind::kRead, k, TokenOf(*r), r->version}}});
      continue;
    }
    // The plan of this logical transaction (the same for every attempt).
    std::vector<std::string> keys;
    const int nkeys = 1 + static_cast<int>(rng() % 3);
    while (static_cast<int>(keys.size()) < nkeys) {
      std::string k = Key(key_of(rng));
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
    const bool read_only = kind < 30;
    ro.serializable = read_only || pct(rng) < 50;
    std::vector<bool> twice;
    for (std::size_t i = 0; i < keys.size(); ++i) twice.push_back(pct(rng) < 30);
    const bool voluntary_abort = !read_only && pct(rng) < 10;

    std::vector<Txn> attempts;
    auto r = db.Run(
        [&](TxnContext& tx) -> Status {
          attempts.push_back(Txn{base + ".a" + std::to_string(attempts.size() + 1), TxnStatus::kAborted, {}});
          Txn& me = attempts.back();
          int writes = 0;
          std::vector<std::int64_t> counts;
          for (const auto& k : keys) {
            auto d = tx.Get(kColl, k);
            if (!d.ok()) return d.status();
            me.ops.push_back(Op{OpKind::kRead, k, TokenOf(*d), d->version});
            counts.push_back(CountOf(*d));
          }
          if (read_only) return Status::Ok();
          for (std::size_t i = 0; i < keys.size(); ++i) {
            const int copies = twice[i] ? 2 : 1;
            for (int c = 0; c < copies; ++c) {
              const std::string tok = me.id + "/" + keys[i] + "/" + std::to_string(++writes);
              if (Status s = tx.Update(kColl, keys[i], {{"w", tok}, {"n", counts[i] + 1}}); !s.ok()) return s;
              me.ops.push_back(Op{OpKind::kWrite, keys[i], tok, 0});
              if (c + 1 < copies) {  // read the intermediate value back: own writes must show
                auto d = tx.Get(kColl, keys[i]);
                if (!d.ok()) return d.status();
                me.ops.push_back(Op{OpKind::kRead, keys[i], TokenOf(*d), d->version});
              }
            }
          }
          return voluntary_abort ? Status::FailedPrecondition("voluntary abort") : Status::Ok();
        },
        ro);
    ++log.outcomes[std::string(read_only ? "read-only run " : "rmw run ") + std::string(litetx::CodeName(r.code()))];
    log.Expect(r.ok() || r.status().IsRetryableTransaction() || r.status().IsRetryableCall() ||
                   r.code() == Code::kUnknown || (voluntary_abort && r.code() == Code::kFailedPrecondition),
               r.status());
    if (!attempts.empty()) {
      if (r.ok()) attempts.back().status = TxnStatus::kCommitted;
      if (r.code() == Code::kUnknown) attempts.back().status = TxnStatus::kUnknown;
    }
    for (auto& a : attempts) log.txns.push_back(std::move(a));
  }
}

// One round on a fresh store, checked on its own.
void Round(std::uint64_t seed, stress::Ms duration) {
  auto base = std::make_shared<litetx::MemoryStore>();
  litetx::Options opt;
  opt.lease = 5s;
  opt.retry_backoff = {1ms, 20ms};
  {
    litetx::Database setup(base, opt);
    litetx::Transaction txn;
    for (int i = 0; i < kKeys; ++i) txn.Insert(kColl, Key(i), {{"w", "init/" + Key(i)}, {"n", 0}});
    ASSERT_TRUE(setup.Commit(txn).ok());
  }
  litetx::FaultOptions fo;
  fo.seed = seed;
  fo.transient_probability = 0.003;
  auto spy = std::make_shared<TokenSpy>(base);
  auto store = std::make_shared<litetx::FaultInjectingStore>(spy, fo);
  litetx::Database db(store, opt);
  litetx::CollectorOptions co;
  co.engine = opt;
  co.interval = 50ms;
  litetx::Collector gc(base, co);
  gc.Start();

  constexpr int kThreads = 4;
  std::vector<ThreadLog> logs(kThreads);
  std::atomic<bool> stop{false};
  stress::RunFor(kThreads, [&](int t) { Worker(db, t, seed * 31 + static_cast<std::uint64_t>(t), stop, logs[static_cast<std::size_t>(t)]); },
                 stop, duration, 60s, "history workers");
  gc.Stop();
  EXPECT_EQ(stress::Settle(base), 0u);
  const stress::StoreAudit sa = stress::AuditStore(*base, {kColl});
  EXPECT_TRUE(sa.clean()) << sa.ToString();

  stress::history::Checker checker(stress::history::Checker::Options{/*strict=*/true, 20});
  for (int i = 0; i < kKeys; ++i) checker.AddInitial(Key(i), "init/" + Key(i));
  std::map<std::string, std::uint64_t> outcomes;
  std::uint64_t unexpected = 0;
  std::string first_unexpected;
  std::map<std::string, std::int64_t> committed_writers;  // key -> committed txns that wrote it
  std::map<std::string, std::string> final_tokens;        // token -> key, committed final writes
  const std::set<std::string> stored = spy->tokens();
  std::uint64_t stored_aborted = 0, stored_intermediate = 0;
  for (auto& log : logs) {
    for (const auto& [k, n] : log.outcomes) outcomes[k] += n;
    unexpected += log.unexpected;
    if (first_unexpected.empty()) first_unexpected = log.first_unexpected;
    for (auto& t : log.txns) {
      std::map<std::string, std::string> last_of;  // key -> last token, to spot intermediates
      for (const auto& op : t.ops) if (op.kind == OpKind::kWrite) last_of[op.key] = op.token;
      for (const auto& op : t.ops) {
        if (op.kind != OpKind::kWrite || !stored.contains(op.token)) continue;
        if (t.status == TxnStatus::kAborted) ++stored_aborted;
        if (last_of[op.key] != op.token) ++stored_intermediate;
      }
      if (t.status == TxnStatus::kCommitted) {
        std::map<std::string, std::string> last;
        for (const auto& op : t.ops) if (op.kind == OpKind::kWrite) last[op.key] = op.token;
        for (const auto& [k, tok] : last) {
          ++committed_writers[k];
          final_tokens[tok] = k;
        }
      }
      checker.Add(std::move(t));
    }
  }
  const auto rep = checker.Check();
  std::string outs;
  for (const auto& [k, n] : outcomes) outs += (outs.empty() ? "" : ", ") + k + " " + std::to_string(n);
  std::printf("[stress] history: %zu attempts recorded; %s; writes of aborted attempts that reached the store "
              "%llu, intermediate writes that reached it %llu; transient faults injected %llu; outcomes: %s\n",
              checker.size(), rep.Summary().c_str(), static_cast<unsigned long long>(stored_aborted),
              static_cast<unsigned long long>(stored_intermediate),
              static_cast<unsigned long long>(store->transient_faults()), outs.c_str());
  // Run buffers writes: only a document's combined final value is ever stored.
  EXPECT_EQ(stored_intermediate, 0u) << "an intermediate write reached the store";
  EXPECT_TRUE(rep.ok()) << rep.Summary();
  EXPECT_EQ(unexpected, 0u) << "unexpected outcome, first: " << first_unexpected;
  EXPECT_GT(rep.committed, 0u);
  EXPECT_GT(stored_aborted, 0u) << "no write of an aborted attempt reached the store: G1a was never exercised";

  litetx::Database reader(base, opt);
  for (int i = 0; i < kKeys; ++i) {
    auto r = reader.Read(kColl, Key(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(CountOf(*r), committed_writers[Key(i)]) << Key(i) << ": count differs from the committed writers (lost update?)";
    const std::string tok = TokenOf(*r);
    const bool initial = tok == "init/" + Key(i) && committed_writers[Key(i)] == 0;
    EXPECT_TRUE(initial || final_tokens[tok] == Key(i)) << Key(i) << " ends with token " << tok
                                                        << ", not a committed final write";
  }
}

TEST(HistoryStress, NoLostUpdateG1aOrG1b) {
  const std::uint64_t seed = stress::Seed("history");
  const int rounds = stress::Rounds(40);
  for (int r = 0; r < rounds && !HasFailure(); ++r) Round(seed + static_cast<std::uint64_t>(r), stress::Duration(3s, 3s));
}

}  // namespace
