// tests/stress/bank_workload.cpp — see bank_workload.h.
#include "bank_workload.h"

#include <array>
#include <cstdio>
#include <optional>
#include <random>
#include <thread>

#include <boost/json.hpp>

namespace stress::bank {

using litetx::Code;
using litetx::Database;
using litetx::DocumentState;
using litetx::Status;
using litetx::TxnContext;

namespace {

std::optional<std::int64_t> Balance(const boost::json::object& doc) {
  const boost::json::value* b = doc.if_contains("balance");
  if (b == nullptr) return std::nullopt;
  if (b->is_int64()) return b->get_int64();
  if (b->is_uint64() && b->get_uint64() <= INT64_MAX) return static_cast<std::int64_t>(b->get_uint64());
  return std::nullopt;
}

// Reads one account in `tx`: its balance, or a non-OK status (missing, malformed, read error).
Status ReadBalance(TxnContext& tx, const Config& cfg, const std::string& id, std::int64_t* out) {
  auto r = tx.Get(cfg.collection, id);
  if (!r.ok()) return r.status();
  if (r->state != DocumentState::kFound) {
    return Status::Corruption("account " + id + " is " + litetx::DocumentStateName(r->state));
  }
  auto b = Balance(r->doc);
  if (!b) return Status::Corruption("account " + id + " has no integer balance: " + boost::json::serialize(r->doc));
  *out = *b;
  return Status::Ok();
}

}  // namespace

std::string AccountId(int i) { return "acct" + std::to_string(i); }

Status CreateAccounts(Database& db, const Config& cfg) {
  litetx::Transaction txn;
  for (int i = 0; i < kAccounts; ++i) {
    txn.Insert(cfg.collection, AccountId(i), {{"balance", kTotal / kAccounts + (i >= kAccounts / 2 ? 1 : 0)}});
  }
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
  char buf[1024];
  const double c = static_cast<double>(committed.load());
  const double rd = static_cast<double>(reads_ok.load());
  std::snprintf(buf, sizeof buf,
                "transfers committed %llu (%.0f tx/s, abort rate %.3f retries per commit), refused %llu, "
                "crashed %llu of %llu armed, gave up: conflict %llu busy %llu aborted %llu, unavailable %llu, "
                "unknown %llu; serializable reads committed %llu (%.0f/s, abort rate %.3f), failed %llu; "
                "violations %llu, unexpected %llu; read-committed reads %llu, skewed (sum != 100) %llu%s%s",
                static_cast<unsigned long long>(committed.load()), c / seconds,
                c > 0 ? static_cast<double>(attempts.load()) / c - 1 : 0.0,
                static_cast<unsigned long long>(refused.load()),
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

void TransferLoop(const std::shared_ptr<litetx::Store>& store, Database& db, const Config& cfg,
                  std::uint64_t seed, const std::atomic<bool>& stop, Stats& st) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, kAccounts - 1);
  std::uniform_int_distribution<std::int64_t> amount_of(1, kMaxAmount);
  std::bernoulli_distribution crash(cfg.crash_rate);
  // A transfer of at most kMaxAmount touches 2 documents: 2N+3 = 7 writes.
  std::uniform_int_distribution<std::uint64_t> crash_point(1, 7);
  while (!stop.load()) {
    const int from = pick(rng);
    int to = pick(rng);
    while (to == from) to = pick(rng);
    const std::int64_t amount = amount_of(rng);
    const std::string from_id = AccountId(from), to_id = AccountId(to);
    bool refused = false;
    auto transfer = [&](TxnContext& tx) -> Status {
      refused = false;
      std::int64_t a = 0, b = 0;
      if (Status s = ReadBalance(tx, cfg, from_id, &a); !s.ok()) return s;
      if (Status s = ReadBalance(tx, cfg, to_id, &b); !s.ok()) return s;
      if (a < 0 || b < 0) {
        st.Violation("transfer read a negative balance: " + from_id + "=" + std::to_string(a) + " " + to_id + "=" + std::to_string(b));
      }
      if (a < amount) {
        refused = true;
        return Status::FailedPrecondition("insufficient funds");
      }
      if (Status s = tx.Adjust(cfg.collection, from_id, {{"balance", -amount}}); !s.ok()) return s;
      return tx.Adjust(cfg.collection, to_id, {{"balance", amount}});
    };

    std::optional<litetx::Result<litetx::CommitInfo>> r;
    if (crash(rng)) {
      ++st.crash_armed;
      litetx::FaultOptions fo;
      fo.seed = rng();
      fo.crash_mode = litetx::CrashMode::kThrow;
      fo.crash_after_writes = crash_point(rng);
      Database crashing(std::make_shared<litetx::FaultInjectingStore>(store, fo), cfg.options);
      try {
        r = crashing.Run(transfer, cfg.run);
      } catch (const litetx::SimulatedCrash&) {
        ++st.crashed;  // the coordinator is gone; its outcome is unknown
        continue;
      }
    } else {
      r = db.Run(transfer, cfg.run);
    }
    if (r->ok()) {
      ++st.committed;
      st.attempts += static_cast<std::uint64_t>((*r)->attempts);
      continue;
    }
    const Status s = r->status();
    switch (s.code()) {
      case Code::kFailedPrecondition:
        if (refused) {
          ++st.refused;
        } else {
          st.Unexpected("transfer: " + s.ToString());
        }
        break;
      case Code::kConflict: ++st.conflict; break;
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
  while (!stop.load()) {
    std::array<std::int64_t, kAccounts> bal{};
    int runs = 0;
    auto r = db.Run(
        [&](TxnContext& tx) -> Status {
          ++runs;
          for (int i = 0; i < kAccounts; ++i) {
            if (Status s = ReadBalance(tx, cfg, AccountId(i), &bal[static_cast<std::size_t>(i)]); !s.ok()) return s;
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

Audit AuditAccounts(Database& db, const Config& cfg) {
  Audit a;
  for (int i = 0; i < kAccounts; ++i) {
    auto r = db.Read(cfg.collection, AccountId(i));
    if (!r.ok() || r->state != DocumentState::kFound || !Balance(r->doc)) {
      a.error = "account " + AccountId(i) + ": " + (r.ok() ? boost::json::serialize(r->doc) : r.status().ToString());
      return a;
    }
    const std::int64_t b = *Balance(r->doc);
    a.total += b;
    a.negative += b < 0 ? 1 : 0;
    a.balances += (i ? " " : "") + std::to_string(b);
  }
  return a;
}

}  // namespace stress::bank
