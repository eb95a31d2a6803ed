// tests/stress/bank_workload.h — the Jepsen-style bank of the stress tests, shared
// by bank_test.cpp (threads on a MemoryStore; this process's half of the two-process LMDB run)
// and bank_worker.cpp (the other process).
//
// Model: 8 accounts "acct0".."acct7" in one collection holding {"balance": n, "ops": count},
// 100 in all. A transfer moves 1..5 from a payer to a payee and is refused (nothing written) if
// the payer has less. It is made in one of three ways, chosen at random:
//   * adjust:    Database::Run: read both, Adjust balance and ops of both;
//   * update:    Database::Run: read both, Update both with absolute values computed from the
//                reads (read-modify-write: Run's version guard is all that stops a lost update);
//   * versioned: Database::Read both, then Database::Commit of Updates with absolute values,
//                each carrying the version read as expected_version (a kConflict is counted and
//                the transfer dropped).
// Every transfer also inserts a receipt {"from", "to", "amount"} with a unique id in the
// receipts collection, in the same transaction: receipts and balances commit or roll back
// together, so at the end each account must hold its initial balance plus the receipts'
// movements, and its "ops" must equal the receipts that name it. A lost update of a balance
// (or an applied transfer without its receipt) breaks this even when the total is conserved.
// Each writer also keeps a ledger of the transfers whose outcome it knows: every committed one
// must have its receipt, every failed one must not.
// Every `crash_every`-th transfer of a writer runs through a coordinator that crashes
// (FaultInjectingStore, CrashMode::kThrow) after a random one of its writes; if that transfer
// makes no write (refused), the next one crashes instead. Its outcome is unknown and a collector
// repairs it once its lease has passed. A reader reads all 8 accounts in one serializable Run
// (every account read is checked at commit); each committed read must sum to exactly 100 with
// no negative balance — anything else is a violation.
// Bounded by count: a writer stops after `transfers` transfers once this process's readers have
// committed `min_reads` serializable reads; readers stop when the writers have.
//
// Thread safety: TransferLoop/ReaderLoop run on many threads at once with one shared Stats.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "litetx/litetx.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/lmdb_store.h"

namespace stress::bank {

inline constexpr int kAccounts = 8;
inline constexpr std::int64_t kTotal = 100;
inline constexpr std::int64_t kMaxAmount = 5;

struct Config {
  std::string collection = "stress.bank";
  std::string tag = "p";             // first part of this process's receipt ids
  std::uint64_t transfers = 500;     // per writer
  std::uint64_t crash_every = 50;    // 0: no crashes
  std::uint64_t min_reads = 1;       // serializable reads this process commits before writers stop
  litetx::Options options;           // of every Database, crashing ones included (lease!)
  litetx::RunOptions run;            // of every transfer and read
};

std::string AccountId(int i);
std::int64_t InitialBalance(int i);
std::string ReceiptCollection(const Config& cfg);

// Inserts the 8 accounts (4 of 12 and 4 of 13).
litetx::Status CreateAccounts(litetx::Database& db, const Config& cfg);

enum Mode { kAdjust = 0, kUpdate = 1, kVersioned = 2 };

struct Stats {
  std::atomic<std::uint64_t> transfers{0}, committed{0}, attempts{0}, refused{0}, crash_armed{0}, crashed{0};
  std::atomic<std::uint64_t> by_mode[3] = {};  // committed, per Mode
  std::atomic<std::uint64_t> versioned_conflict{0};
  std::atomic<std::uint64_t> conflict{0}, busy{0}, aborted{0}, unavailable{0}, unknown{0};
  std::atomic<std::uint64_t> reads_ok{0}, reads_failed{0}, read_attempts{0};
  // Read-committed (non-serializable) readers: reads taken, and those whose sum was not 100
  // (read skew, which read committed allows; not a violation).
  std::atomic<std::uint64_t> rc_reads{0}, rc_skewed{0};
  std::atomic<std::uint64_t> violations{0}, unexpected{0};
  std::atomic<int> writers_running{0};  // set by the caller before the loops start
  std::mutex mu;
  std::string first_violation, first_unexpected, first_read_failure;
  // Receipt ids of the transfers that committed, and of those that surely did not.
  std::vector<std::string> known_committed, known_failed;

  void Violation(const std::string& what);
  void Unexpected(const std::string& what);
  // "transfers committed N (attempts/commit X), refused, crashed, ...; reads ..."
  std::string Summary(double seconds) const;
};

// Transfers until `stop`, or until cfg.transfers are done and cfg.min_reads reads committed;
// `store` is the undecorated store crashing coordinators wrap; `worker` names the receipts.
void TransferLoop(const std::shared_ptr<litetx::Store>& store, litetx::Database& db, const Config& cfg,
                  int worker, std::uint64_t seed, const std::atomic<bool>& stop, Stats& st);
// Reads of all accounts in one Run until `stop` or no writer is running: serializable (a sum
// other than 100 or a negative balance is a violation), or read committed (only a negative
// balance is; skewed sums are counted).
void ReaderLoop(litetx::Database& db, const Config& cfg, const std::atomic<bool>& stop, Stats& st,
                bool serializable = true);

// The writers' ledgers against the receipts: returns the disagreements (empty: none), at most
// a few described, and the number of receipts looked up in `*checked`.
std::string CheckKnownOutcomes(litetx::Database& db, const Config& cfg, Stats& st, std::uint64_t* checked);

struct Audit {
  std::int64_t total = 0;
  int negative = 0;
  std::uint64_t receipts = 0;  // live receipts
  std::string error;           // a read failed, an account or a receipt is malformed
  std::string mismatch;        // accounts whose balance or ops disagree with the receipts
  std::string balances;
};
// Reads every account and every receipt (read committed) on a quiet store.
Audit AuditAccounts(litetx::Database& db, const Config& cfg);

}  // namespace stress::bank
