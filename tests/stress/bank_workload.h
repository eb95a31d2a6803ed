// tests/stress/bank_workload.h — the Jepsen-style bank of the stress tests, shared
// by bank_test.cpp (threads on a MemoryStore; this process's half of the two-process LMDB run)
// and bank_worker.cpp (the other process).
//
// Model: 8 accounts "acct0".."acct7" in one collection holding {"balance": n}, 100 in all.
// A transfer is one Database::Run: read payer and payee, refuse (return kFailedPrecondition,
// nothing written) if the payer has less than the amount (1..5), else Adjust both. With
// probability crash_rate a transfer runs through a coordinator that crashes (FaultInjectingStore,
// CrashMode::kThrow) after a random one of its writes; its outcome is unknown and a collector
// repairs it once its lease has passed. A reader reads all 8 accounts in one serializable Run
// (every account read is checked at commit); each committed read must sum to exactly 100 with
// no negative balance — anything else is a violation.
//
// Thread safety: TransferLoop/ReaderLoop run on many threads at once with one shared Stats.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "litetx/litetx.h"

namespace stress::bank {

inline constexpr int kAccounts = 8;
inline constexpr std::int64_t kTotal = 100;
inline constexpr std::int64_t kMaxAmount = 5;

struct Config {
  std::string collection = "stress.bank";
  double crash_rate = 0.01;
  litetx::Options options;        // of every Database, crashing ones included (lease!)
  litetx::RunOptions run;         // of every transfer and read
};

std::string AccountId(int i);

// Inserts the 8 accounts (4 of 12 and 4 of 13).
litetx::Status CreateAccounts(litetx::Database& db, const Config& cfg);

struct Stats {
  std::atomic<std::uint64_t> committed{0}, attempts{0}, refused{0}, crash_armed{0}, crashed{0};
  std::atomic<std::uint64_t> conflict{0}, busy{0}, aborted{0}, unavailable{0}, unknown{0};
  std::atomic<std::uint64_t> reads_ok{0}, reads_failed{0}, read_attempts{0};
  // Read-committed (non-serializable) readers: reads taken, and those whose sum was not 100
  // (read skew, which read committed allows; not a violation).
  std::atomic<std::uint64_t> rc_reads{0}, rc_skewed{0};
  std::atomic<std::uint64_t> violations{0}, unexpected{0};
  std::mutex mu;
  std::string first_violation, first_unexpected, first_read_failure;

  void Violation(const std::string& what);
  void Unexpected(const std::string& what);
  // "transfers committed N (attempts/commit X), refused, crashed, ...; reads ..."
  std::string Summary(double seconds) const;
};

// Transfers until `stop`; `store` is the undecorated store crashing coordinators wrap.
void TransferLoop(const std::shared_ptr<litetx::Store>& store, litetx::Database& db,
                  const Config& cfg, std::uint64_t seed, const std::atomic<bool>& stop, Stats& st);
// Reads of all accounts in one Run until `stop`: serializable (a sum other than 100 or a
// negative balance is a violation), or read committed (only a negative balance is; skewed sums
// are counted).
void ReaderLoop(litetx::Database& db, const Config& cfg, const std::atomic<bool>& stop, Stats& st,
                bool serializable = true);

struct Audit {
  std::int64_t total = 0;
  int negative = 0;
  std::string error;  // a read failed or an account is missing
  std::string balances;
};
// Reads every account (read committed) on a quiet store.
Audit AuditAccounts(litetx::Database& db, const Config& cfg);

}  // namespace stress::bank
