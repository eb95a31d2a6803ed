// tests/stress/bank_workload.cpp — see bank_workload.h.
#include "bank_workload.h"

#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include <boost/json.hpp>

#include "stress_util.h"

namespace stress::bank {

using litetx::Code;
using litetx::Database;
using litetx::DocumentState;
using litetx::Status;
using litetx::TxnContext;

namespace {

std::optional<std::int64_t> IntField(const boost::json::object& doc, const char* name) {
  const boost::json::value* b = doc.if_contains(name);
  if (b == nullptr) return std::nullopt;
  if (b->is_int64()) return b->get_int64();
  if (b->is_uint64() && b->get_uint64() <= INT64_MAX) return static_cast<std::int64_t>(b->get_uint64());
  return std::nullopt;
}

struct Account {
  std::int64_t balance = 0, ops = 0;
  std::uint64_t version = 0;
};

// An account as read: its balance, ops and version, or a non-OK status (missing, malformed).
Status Decode(const litetx::ReadResult& r, const std::string& id, Account* out) {
  if (r.state != DocumentState::kFound) {
    return Status::Corruption("account " + id + " is " + litetx::DocumentStateName(r.state));
  }
  auto b = IntField(r.doc, "balance");
  auto n = IntField(r.doc, "ops");
  if (!b || !n) return Status::Corruption("account " + id + " is malformed: " + boost::json::serialize(r.doc));
  *out = Account{*b, *n, r.version};
  return Status::Ok();
}

Status ReadAccount(TxnContext& tx, const Config& cfg, const std::string& id, Account* out) {
  auto r = tx.Get(cfg.collection, id);
  if (!r.ok()) return r.status();
  return Decode(*r, id, out);
}

}  // namespace

std::string AccountId(int i) { return "acct" + std::to_string(i); }
std::int64_t InitialBalance(int i) { return kTotal / kAccounts + (i >= kAccounts / 2 ? 1 : 0); }
std::string ReceiptCollection(const Config& cfg) { return cfg.collection + ".receipts"; }

Status CreateAccounts(Database& db, const Config& cfg) {
  litetx::Transaction txn;
  for (int i = 0; i < kAccounts; ++i) txn.Insert(cfg.collection, AccountId(i), {{"balance", InitialBalance(i)}, {"ops", 0}});
  static_assert(kTotal == (kTotal / kAccounts) * kAccounts + kAccounts / 2);
  auto r = db.Commit(txn);
  return r.status();
}

void Stats::Violation(const std::string& what) {
  ++violations;
  std::lock_guard<std::mutex> l(mu);
  if (first_violation.empty()) first_violation = what;
}

void Stats::Unexpected(const std::string& what) {
  ++unexpected;
  std::lock_guard<std::mutex> l(mu);
  if (first_unexpected.empty()) first_unexpected = what;
}

std::string Stats::Summary(double seconds) const {
  char buf[1536];
  const double c = static_cast<double>(committed.load());
  const double rd = static_cast<double>(reads_ok.load());
  std::snprintf(buf, sizeof buf,
                "transfers %llu: committed %llu (%.0f tx/s, abort rate %.3f retries per commit; adjust %llu, "
                "update %llu, versioned commit %llu), refused %llu, versioned commit conflicts %llu, "
                "crashed %llu of %llu armed, gave up: conflict %llu busy %llu aborted %llu, unavailable %llu, "
                "unknown %llu; serializable reads committed %llu (%.0f/s, abort rate %.3f), failed %llu; "
                "violations %llu, unexpected %llu; read-committed reads %llu, skewed (sum != 100) %llu%s%s",
                static_cast<unsigned long long>(transfers.load()), static_cast<unsigned long long>(committed.load()),
                c / seconds, c > 0 ? static_cast<double>(attempts.load()) / c - 1 : 0.0,
                static_cast<unsigned long long>(by_mode[kAdjust].load()),
                static_cast<unsigned long long>(by_mode[kUpdate].load()),
                static_cast<unsigned long long>(by_mode[kVersioned].load()),
                static_cast<unsigned long long>(refused.load()),
                static_cast<unsigned long long>(versioned_conflict.load()),
                static_cast<unsigned long long>(crashed.load()),
                static_cast<unsigned long long>(crash_armed.load()),
                static_cast<unsigned long long>(conflict.load()),
                static_cast<unsigned long long>(busy.load()),
                static_cast<unsigned long long>(aborted.load()),
                static_cast<unsigned long long>(unavailable.load()),
                static_cast<unsigned long long>(unknown.load()),
                static_cast<unsigned long long>(reads_ok.load()), rd / seconds,
                rd > 0 ? static_cast<double>(read_attempts.load()) / rd - 1 : 0.0,
                static_cast<unsigned long long>(reads_failed.load()),
                static_cast<unsigned long long>(violations.load()),
                static_cast<unsigned long long>(unexpected.load()),
                static_cast<unsigned long long>(rc_reads.load()), static_cast<unsigned long long>(rc_skewed.load()),
                first_read_failure.empty() ? "" : "; first failed read: ", first_read_failure.c_str());
  return buf;
}

void TransferLoop(const std::shared_ptr<litetx::Store>& store, Database& db, const Config& cfg, int worker,
                  std::uint64_t seed, const std::atomic<bool>& stop, Stats& st) {
  struct Running {
    Stats& st;
    ~Running() { --st.writers_running; }
  } running{st};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, kAccounts - 1), mode_of(0, 2);
  std::uniform_int_distribution<std::int64_t> amount_of(1, kMaxAmount);
  // A transfer touches 3 documents (2 accounts and its receipt): 2N+3 = 9 writes.
  std::uniform_int_distribution<std::uint64_t> crash_point(1, 9);
  const std::string receipts = ReceiptCollection(cfg);
  bool crash_due = false;
  for (std::uint64_t seq = 0; !stop.load(); ++seq) {
    if (seq >= cfg.transfers && st.reads_ok.load() >= cfg.min_reads) break;
    ++st.transfers;
    if (cfg.crash_every > 0 && seq % cfg.crash_every == cfg.crash_every - 1 && !crash_due) {
      crash_due = true;
      ++st.crash_armed;
    }
    const int from = pick(rng);
    int to = pick(rng);
    while (to == from) to = pick(rng);
    const std::int64_t amount = amount_of(rng);
    const Mode mode = static_cast<Mode>(mode_of(rng));
    const std::string from_id = AccountId(from), to_id = AccountId(to);
    const std::string receipt = cfg.tag + "." + std::to_string(worker) + "." + std::to_string(seq);
    const boost::json::object receipt_doc{{"from", from}, {"to", to}, {"amount", amount}};
    bool refused = false;
    auto check_read = [&](const Account& a, const Account& b) {
      if (a.balance < 0 || b.balance < 0) {
        st.Violation("transfer read a negative balance: " + from_id + "=" + std::to_string(a.balance) + " " + to_id +
                     "=" + std::to_string(b.balance));
      }
    };
    auto transfer = [&](TxnContext& tx) -> Status {
      refused = false;
      Account a, b;
      if (Status s = ReadAccount(tx, cfg, from_id, &a); !s.ok()) return s;
      if (Status s = ReadAccount(tx, cfg, to_id, &b); !s.ok()) return s;
      check_read(a, b);
      if (a.balance < amount) {
        refused = true;
        return Status::FailedPrecondition("insufficient funds");
      }
      if (mode == kAdjust) {
        if (Status s = tx.Adjust(cfg.collection, from_id, {{"balance", -amount}, {"ops", 1}}); !s.ok()) return s;
        if (Status s = tx.Adjust(cfg.collection, to_id, {{"balance", amount}, {"ops", 1}}); !s.ok()) return s;
      } else {
        if (Status s = tx.Update(cfg.collection, from_id, {{"balance", a.balance - amount}, {"ops", a.ops + 1}}); !s.ok()) return s;
        if (Status s = tx.Update(cfg.collection, to_id, {{"balance", b.balance + amount}, {"ops", b.ops + 1}}); !s.ok()) return s;
      }
      return tx.Insert(receipts, receipt, receipt_doc);
    };
    // The versioned way: read committed, then one Commit guarded by the versions read.
    auto versioned = [&](Database& d) -> litetx::Result<litetx::CommitInfo> {
      refused = false;
      Account a, b;
      for (auto [id, acc] : {std::pair{&from_id, &a}, std::pair{&to_id, &b}}) {
        auto r = d.Read(cfg.collection, *id);
        if (!r.ok()) return r.status();
        if (Status s = Decode(*r, *id, acc); !s.ok()) return s;
      }
      check_read(a, b);
      if (a.balance < amount) {
        refused = true;
        return Status::FailedPrecondition("insufficient funds");
      }
      litetx::Transaction txn;
      txn.Update(cfg.collection, from_id, {{"balance", a.balance - amount}, {"ops", a.ops + 1}}, {}, a.version);
      txn.Update(cfg.collection, to_id, {{"balance", b.balance + amount}, {"ops", b.ops + 1}}, {}, b.version);
      txn.Insert(receipts, receipt, receipt_doc);
      return d.Commit(txn);
    };
    auto attempt = [&](Database& d) {
      return mode == kVersioned ? versioned(d) : d.Run(transfer, cfg.run);
    };

    std::optional<litetx::Result<litetx::CommitInfo>> r;
    if (crash_due) {
      litetx::FaultOptions fo;
      fo.seed = rng();
      fo.crash_mode = litetx::CrashMode::kThrow;
      fo.crash_after_writes = crash_point(rng);
      Database crashing(std::make_shared<litetx::FaultInjectingStore>(store, fo), cfg.options);
      try {
        r = attempt(crashing);
      } catch (const litetx::SimulatedCrash&) {
        ++st.crashed;  // the coordinator is gone; its outcome is unknown
        crash_due = false;
        continue;
      }
      // No crash: the transfer made fewer writes than the crash point (refused, or failed
      // early). The crash stays due for the next transfer.
    } else {
      r = attempt(db);
    }
    if (r->ok()) {
      ++st.committed;
      ++st.by_mode[mode];
      st.attempts += static_cast<std::uint64_t>((*r)->attempts);
      std::lock_guard<std::mutex> l(st.mu);
      st.known_committed.push_back(receipt);
      continue;
    }
    const Status s = r->status();
    if (s.code() != Code::kUnknown) {
      std::lock_guard<std::mutex> l(st.mu);
      st.known_failed.push_back(receipt);
    }
    switch (s.code()) {
      case Code::kFailedPrecondition:
        if (refused) {
          ++st.refused;
        } else {
          st.Unexpected("transfer: " + s.ToString());
        }
        break;
      case Code::kConflict: ++(mode == kVersioned ? st.versioned_conflict : st.conflict); break;
      case Code::kBusy: ++st.busy; break;
      case Code::kAborted: ++st.aborted; break;
      case Code::kUnavailable: ++st.unavailable; break;
      case Code::kUnknown: ++st.unknown; break;
      default: st.Unexpected("transfer: " + s.ToString()); break;
    }
  }
}

void ReaderLoop(Database& db, const Config& cfg, const std::atomic<bool>& stop, Stats& st,
                bool serializable) {
  litetx::RunOptions ro = cfg.run;
  ro.serializable = serializable;
  while (!stop.load() && st.writers_running.load() > 0) {
    std::array<std::int64_t, kAccounts> bal{};
    int runs = 0;
    auto r = db.Run(
        [&](TxnContext& tx) -> Status {
          ++runs;
          for (int i = 0; i < kAccounts; ++i) {
            Account a;
            if (Status s = ReadAccount(tx, cfg, AccountId(i), &a); !s.ok()) return s;
            bal[static_cast<std::size_t>(i)] = a.balance;
          }
          return Status::Ok();
        },
        ro);
    if (!serializable) {
      if (!r.ok()) {
        if (!r.status().IsRetryableTransaction() && !r.status().IsRetryableCall()) {
          st.Unexpected("read-committed read: " + r.status().ToString());
        }
        continue;
      }
      ++st.rc_reads;
      std::int64_t sum = 0;
      for (std::int64_t b : bal) {
        sum += b;
        if (b < 0) st.Violation("read-committed read saw a negative balance " + std::to_string(b));
      }
      if (sum != kTotal) ++st.rc_skewed;
      std::this_thread::sleep_for(std::chrono::microseconds(500));  // leave the CPU to the others
      continue;
    }
    st.read_attempts += static_cast<std::uint64_t>(runs);
    if (!r.ok()) {
      ++st.reads_failed;
      {
        std::lock_guard<std::mutex> l(st.mu);
        if (st.first_read_failure.empty()) {
          st.first_read_failure = r.status().ToString() + " after " + std::to_string(runs) + " attempts";
        }
      }
      if (!r.status().IsRetryableTransaction() && !r.status().IsRetryableCall()) {
        st.Unexpected("serializable read: " + r.status().ToString());
      }
      continue;
    }
    ++st.reads_ok;
    std::int64_t sum = 0;
    bool negative = false;
    std::string all;
    for (std::int64_t b : bal) {
      sum += b;
      negative |= b < 0;
      all += " " + std::to_string(b);
    }
    if (sum != kTotal || negative) {
      st.Violation("committed serializable read (attempt " + std::to_string(runs) + ") saw sum " +
                   std::to_string(sum) + ", balances" + all);
    }
  }
}

std::string CheckKnownOutcomes(Database& db, const Config& cfg, Stats& st, std::uint64_t* checked) {
  std::lock_guard<std::mutex> l(st.mu);
  std::string problems;
  int listed = 0;
  *checked = 0;
  const std::string receipts = ReceiptCollection(cfg);
  for (const auto* list : {&st.known_committed, &st.known_failed}) {
    const bool want = list == &st.known_committed;
    for (const auto& id : *list) {
      ++*checked;
      auto r = db.Read(receipts, id);
      for (int retry = 0; !r.ok() && r.code() == Code::kUnavailable && retry < 5; ++retry) r = db.Read(receipts, id);
      std::string p;
      if (!r.ok()) {
        p = "receipt " + id + ": " + r.status().ToString();
      } else if ((r->state == DocumentState::kFound) != want) {
        p = "receipt " + id + (want ? " missing, but the transfer committed" : " present, but the transfer failed");
      }
      if (p.empty()) continue;
      if (listed++ < 5) problems += (problems.empty() ? "" : "; ") + p;
    }
  }
  if (listed > 5) problems += "; ... " + std::to_string(listed) + " in all";
  return problems;
}

Audit AuditAccounts(Database& db, const Config& cfg) {
  Audit a;
  std::array<Account, kAccounts> acc{};
  for (int i = 0; i < kAccounts; ++i) {
    auto r = db.Read(cfg.collection, AccountId(i));
    Status s = r.ok() ? Decode(*r, AccountId(i), &acc[static_cast<std::size_t>(i)]) : r.status();
    if (!s.ok()) {
      a.error = "account " + AccountId(i) + ": " + s.ToString();
      return a;
    }
    const std::int64_t b = acc[static_cast<std::size_t>(i)].balance;
    a.total += b;
    a.negative += b < 0 ? 1 : 0;
    a.balances += (i ? " " : "") + std::to_string(b);
  }
  // What the receipts say each account must hold.
  std::array<std::int64_t, kAccounts> want_balance{}, want_ops{};
  for (int i = 0; i < kAccounts; ++i) want_balance[static_cast<std::size_t>(i)] = InitialBalance(i);
  std::vector<std::string> ids;
  std::string error;
  const std::string receipts = ReceiptCollection(cfg);
  if (!ScanAll(db.store(), receipts, [&](const std::string& id, const boost::json::object&) { ids.push_back(id); }, &error)) {
    a.error = error;
    return a;
  }
  for (const auto& id : ids) {
    auto r = db.Read(receipts, id);  // a rolled-back insert leaves a placeholder: not found
    if (!r.ok()) {
      a.error = "receipt " + id + ": " + r.status().ToString();
      return a;
    }
    if (r->state != DocumentState::kFound) continue;
    ++a.receipts;
    auto from = IntField(r->doc, "from"), to = IntField(r->doc, "to"), amount = IntField(r->doc, "amount");
    if (!from || !to || !amount || *from < 0 || *from >= kAccounts || *to < 0 || *to >= kAccounts) {
      a.error = "receipt " + id + " is malformed: " + boost::json::serialize(r->doc);
      return a;
    }
    want_balance[static_cast<std::size_t>(*from)] -= *amount;
    want_balance[static_cast<std::size_t>(*to)] += *amount;
    ++want_ops[static_cast<std::size_t>(*from)];
    ++want_ops[static_cast<std::size_t>(*to)];
  }
  for (int i = 0; i < kAccounts; ++i) {
    const auto& have = acc[static_cast<std::size_t>(i)];
    const std::int64_t wb = want_balance[static_cast<std::size_t>(i)], wo = want_ops[static_cast<std::size_t>(i)];
    if (have.balance != wb || have.ops != wo) {
      a.mismatch += (a.mismatch.empty() ? "" : "; ") + AccountId(i) + ": balance " + std::to_string(have.balance) +
                    " ops " + std::to_string(have.ops) + ", receipts say " + std::to_string(wb) + " and " +
                    std::to_string(wo);
    }
  }
  return a;
}

}  // namespace stress::bank
