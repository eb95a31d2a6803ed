// tools/demo_bank.h — the bank that `litetx demo` and the kill -9 crash test (tests/kill9) run:
// accounts with balances, transfers that move money and write a ledger document in the same
// transaction, and the audit that checks what a crash-tested run left behind.
//
// Model: cfg.accounts accounts "<prefix>a<NNNNNN>" in cfg.accounts_collection, each created as
// {"balance": initial_balance}. A transfer is ONE transaction of three actions: adjust the
// payer's balance by -amount (at the version read when the transfer was planned, so a balance
// never goes negative), adjust the payee's by +amount, insert {"from", "to", "amount"} as
// "<prefix><ledger id>" in cfg.ledger_collection. The ledger is therefore the history: after
// any crash, and once the collector has settled every record, each balance must equal the
// initial balance plus what the committed ledger documents say it received minus what it paid.
//
// Ownership: plain functions and value types; Audit opens its own Database on the given store.
// Thread safety: PlanTransfer/RefreshTransfer may run on many threads at once (each with its
// own rng). Audit expects a quiet store: no coordinator or collector working on these
// collections while it reads.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/litetx.h"

namespace litetx::bank {

struct BankConfig {
  std::string accounts_collection = "demo.accounts";
  std::string ledger_collection = "demo.ledger";
  // Every id of this bank (accounts and ledger) starts with it: a run id, so that several runs
  // can share one store without clearing it.
  std::string prefix;
  int accounts = 100;
  std::int64_t initial_balance = 1000;
  std::int64_t max_amount = 100;  // a transfer moves 1..min(payer's balance, max_amount)
};

// "<prefix>a000042".
std::string AccountId(const BankConfig& cfg, int index);
// A fresh run prefix: "r" + 8 random hex digits + ".".
std::string NewRunPrefix(std::uint64_t seed);

// Inserts every account (one transaction per 100 accounts). OK, or the failed commit's status.
Status CreateAccounts(Database& db, const BankConfig& cfg);

struct Transfer {
  std::string ledger_id;  // without the bank prefix
  int from = 0;
  int to = 0;
  std::int64_t amount = 0;
  std::uint64_t from_version = 0;  // the payer's version when last read
};

// Picks a payer with money and a different payee, neither held by a transaction right now, an
// amount, and the payer's version. kUnavailable (retry), kBusy if 64 picks found no such pair
// (retry later), kFailedPrecondition / kCorruption if an account is missing or damaged.
Result<Transfer> PlanTransfer(Database& db, const BankConfig& cfg, std::mt19937_64& rng,
                              std::string ledger_id);
// Re-reads the payer's version before a retry; kFailedPrecondition if it can no longer pay.
Status RefreshTransfer(Database& db, const BankConfig& cfg, Transfer& t);
// The transfer as one transaction (adjust, adjust, insert).
Transaction TransferTxn(const BankConfig& cfg, const Transfer& t);

struct AuditOptions {
  // Ledger documents scanned: ids starting with cfg.prefix + ledger_scan_prefix (empty: all of
  // the bank's). Lets a long test audit only what the last round wrote.
  std::string ledger_scan_prefix;
  // Per account, the net amount of the ledger documents outside the scanned range (from an
  // earlier audit's AuditReport::net). Empty: zero.
  std::vector<std::int64_t> base_net;
  // Ledger documents outside the scanned range, counted in base_net.
  std::uint64_t base_ledger_docs = 0;
  // Ledger ids (without prefix) of transfers acknowledged as committed: each must be present.
  std::vector<std::string> acked;
  // Ledger ids of transfers whose outcome the caller does not know (the coordinator crashed,
  // or the commit returned kUnknown): each is counted as applied (present) or not applied
  // (absent).
  std::vector<std::string> in_doubt;
  // Ledger ids of transfer attempts whose commit failed with any code but kUnknown: rolled
  // back, certainly not applied. Each must be absent from the ledger.
  std::vector<std::string> failed;
  // The caller reported every transfer it attempted under the scanned prefix in acked,
  // in_doubt or failed: then every scanned ledger id must be one of them, and a committed
  // ledger document must be acked or in doubt (one nobody reported, or one reported failed,
  // is an error). An id in two of the lists is an error too.
  bool only_reported = false;
  // Only ActiveTransaction records created at or after this time (ms since the epoch) count as
  // left over; older ones belong to someone else. 0: every record counts.
  std::int64_t records_since_ms = 0;
};

struct AuditReport {
  std::vector<std::string> errors;  // empty: every invariant holds (at most 20 listed)
  std::uint64_t error_count = 0;
  std::int64_t total = 0;           // sum of the balances
  std::int64_t expected_total = 0;  // accounts * initial_balance
  std::uint64_t ledger_docs = 0;    // committed ledger documents (base + scanned)
  std::uint64_t placeholders = 0;   // scanned ledger ids that read as not found (rolled back)
  std::uint64_t acked_checked = 0;
  std::uint64_t failed_checked = 0;  // failed ids checked absent
  std::uint64_t in_doubt_applied = 0;
  std::uint64_t in_doubt_not_applied = 0;
  std::uint64_t held_documents = 0;  // documents with a transaction reference or deleting flag
  std::uint64_t open_records = 0;    // ActiveTransaction records that are not outcome markers
  std::vector<std::int64_t> net;     // base_net + the scanned ledger, per account

  bool ok() const { return error_count == 0; }
  void Error(std::string message);
  boost::json::object ToJson() const;
};

// Checks: every account live, unheld, with a non-negative integer balance equal to the
// initial balance plus its net in the ledger; the total conserved; every scanned ledger
// document unheld and well-formed; every acked id present, every failed id absent; with
// only_reported, every scanned ledger id reported and every committed one acked or in doubt;
// no open record. Read errors are reported as errors.
AuditReport Audit(const std::shared_ptr<Store>& store, const BankConfig& cfg,
                  const AuditOptions& options);

// ActiveTransaction records not yet replaced by an outcome marker ("done", docs/protocol.md
// §1.2), created at or after since_ms. kUnavailable / kCorruption from the scan.
Result<std::uint64_t> OpenRecords(Store& store, std::int64_t since_ms);

// Milliseconds since the epoch (system clock).
std::int64_t NowMs();

}  // namespace litetx::bank
