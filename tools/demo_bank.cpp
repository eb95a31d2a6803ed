// tools/demo_bank.cpp — see demo_bank.h.
#include "tools/demo_bank.h"

#include <chrono>
#include <cstdio>
#include <unordered_map>

#include <boost/json.hpp>

namespace litetx::bank {
namespace {

constexpr std::size_t kMaxListedErrors = 20;
constexpr std::size_t kScanBatch = 512;

// The integer field `name` of `doc`, if it is one.
std::optional<std::int64_t> IntField(const boost::json::object& doc, std::string_view name) {
  auto it = doc.find(name);
  if (it == doc.end()) return std::nullopt;
  if (it->value().is_int64()) return it->value().get_int64();
  if (it->value().is_uint64() && it->value().get_uint64() <= INT64_MAX) {
    return static_cast<std::int64_t>(it->value().get_uint64());
  }
  return std::nullopt;
}

std::optional<std::string> StringField(const boost::json::object& doc, std::string_view name) {
  auto it = doc.find(name);
  if (it == doc.end() || !it->value().is_string()) return std::nullopt;
  return std::string(it->value().get_string());
}

// Reads account `index` (uncommitted, to see whether a transaction holds it). Sets *held, and,
// when it is not held, *balance and *version (then equal to the committed ones).
Status ReadAccount(Database& db, const BankConfig& cfg, int index, bool* held,
                   std::int64_t* balance, std::uint64_t* version) {
  const std::string id = AccountId(cfg, index);
  auto r = db.Read(cfg.accounts_collection, id, ReadOptions{Isolation::kReadUncommitted});
  if (!r.ok()) return r.status();
  *held = !r->txn.empty();
  if (*held) return Status::Ok();
  if (r->state != DocumentState::kFound) {
    return Status::FailedPrecondition("account " + id + " is " + DocumentStateName(r->state));
  }
  auto b = IntField(r->doc, "balance");
  if (!b) return Status::FailedPrecondition("account " + id + " has no balance");
  *balance = *b;
  *version = r->version;
  return Status::Ok();
}

}  // namespace

std::string AccountId(const BankConfig& cfg, int index) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "a%06d", index);
  return cfg.prefix + buf;
}

std::string NewRunPrefix(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ static_cast<std::uint64_t>(
                                  std::chrono::steady_clock::now().time_since_epoch().count()));
  char buf[16];
  std::snprintf(buf, sizeof buf, "r%08x.", static_cast<unsigned>(rng() & 0xffffffffu));
  return buf;
}

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status CreateAccounts(Database& db, const BankConfig& cfg) {
  for (int first = 0; first < cfg.accounts; first += 100) {
    Transaction txn;
    for (int i = first; i < cfg.accounts && i < first + 100; ++i) {
      txn.Insert(cfg.accounts_collection, AccountId(cfg, i), {{"balance", cfg.initial_balance}});
    }
    Result<CommitInfo> r = db.Commit(txn);
    for (int attempt = 0; attempt < 20 && r.code() == Code::kUnavailable; ++attempt) {
      r = db.Commit(txn);
    }
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

Result<Transfer> PlanTransfer(Database& db, const BankConfig& cfg, std::mt19937_64& rng,
                              std::string ledger_id) {
  std::uniform_int_distribution<int> pick(0, cfg.accounts - 1);
  Transfer t;
  t.ledger_id = std::move(ledger_id);
  for (int tries = 0; tries < 64; ++tries) {
    t.from = pick(rng);
    do {
      t.to = pick(rng);
    } while (t.to == t.from);
    // Skip accounts a transaction holds right now (e.g. a crashed one, until the collector
    // repairs it): the commit would wait for them and likely end kBusy.
    bool held = false;
    std::int64_t balance = 0, unused_balance = 0;
    std::uint64_t unused_version = 0;
    if (Status s = ReadAccount(db, cfg, t.from, &held, &balance, &t.from_version); !s.ok()) {
      return s;
    }
    if (held || balance <= 0) continue;
    if (Status s = ReadAccount(db, cfg, t.to, &held, &unused_balance, &unused_version); !s.ok()) {
      return s;
    }
    if (held) continue;
    std::uniform_int_distribution<std::int64_t> amount(1, std::min(balance, cfg.max_amount));
    t.amount = amount(rng);
    return t;
  }
  return Status::Busy("found no pair of free accounts with money to transfer");
}

Status RefreshTransfer(Database& db, const BankConfig& cfg, Transfer& t) {
  auto r = db.Read(cfg.accounts_collection, AccountId(cfg, t.from));
  if (!r.ok()) return r.status();
  auto balance = r->state == DocumentState::kFound ? IntField(r->doc, "balance") : std::nullopt;
  if (!balance || *balance < t.amount) {
    return Status::FailedPrecondition("payer can no longer pay");
  }
  t.from_version = r->version;
  return Status::Ok();
}

Transaction TransferTxn(const BankConfig& cfg, const Transfer& t) {
  return Transaction()
      .Adjust(cfg.accounts_collection, AccountId(cfg, t.from), {{"balance", -t.amount}},
              t.from_version)
      .Adjust(cfg.accounts_collection, AccountId(cfg, t.to), {{"balance", t.amount}})
      .Insert(cfg.ledger_collection, cfg.prefix + t.ledger_id,
              {{"from", AccountId(cfg, t.from)}, {"to", AccountId(cfg, t.to)}, {"amount", t.amount}});
}

void AuditReport::Error(std::string message) {
  ++error_count;
  if (errors.size() < kMaxListedErrors) errors.push_back(std::move(message));
}

boost::json::object AuditReport::ToJson() const {
  boost::json::array errs;
  for (const auto& e : errors) errs.emplace_back(e);
  return {{"ok", ok()},
          {"total", total},
          {"expected_total", expected_total},
          {"ledger_docs", ledger_docs},
          {"rolled_back_ledger_ids", placeholders},
          {"acked_checked", acked_checked},
          {"failed_checked", failed_checked},
          {"in_doubt_applied", in_doubt_applied},
          {"in_doubt_not_applied", in_doubt_not_applied},
          {"held_documents", held_documents},
          {"open_records", open_records},
          {"error_count", error_count},
          {"errors", std::move(errs)}};
}

Result<std::uint64_t> OpenRecords(Store& store, std::int64_t since_ms) {
  std::uint64_t open = 0;
  std::string cursor;
  do {
    auto page = store.Scan(kTransactionsCollection, cursor, kScanBatch);
    if (!page.ok()) return page.status();
    for (const auto& [id, doc] : page->documents) {
      auto done = doc.value.find("done");
      if (done != doc.value.end() && done->value().is_bool() && done->value().get_bool()) continue;
      auto created = IntField(doc.value, "created");
      if (since_ms > 0 && created && *created < since_ms) continue;
      ++open;
    }
    cursor = page->next_cursor;
  } while (!cursor.empty());
  return open;
}

AuditReport Audit(const std::shared_ptr<Store>& store, const BankConfig& cfg,
                  const AuditOptions& options) {
  AuditReport rep;
  Database db(store);
  const ReadOptions raw{Isolation::kReadUncommitted};
  rep.expected_total = cfg.initial_balance * cfg.accounts;
  rep.net = options.base_net;
  rep.net.resize(static_cast<std::size_t>(cfg.accounts), 0);
  rep.ledger_docs = options.base_ledger_docs;
  std::unordered_map<std::string, int> index;
  for (int i = 0; i < cfg.accounts; ++i) index.emplace(AccountId(cfg, i), i);

  // What the caller reported for each ledger id (without the bank prefix).
  enum class Reported : std::uint8_t { kAcked, kInDoubt, kFailed };
  auto name = [](Reported r) {
    return r == Reported::kAcked ? "acknowledged" : r == Reported::kInDoubt ? "in doubt" : "failed";
  };
  std::unordered_map<std::string, Reported> reported;
  if (options.only_reported) {
    for (const auto& [ids, kind] : {std::pair{&options.acked, Reported::kAcked},
                                    std::pair{&options.in_doubt, Reported::kInDoubt},
                                    std::pair{&options.failed, Reported::kFailed}}) {
      for (const auto& lid : *ids) {
        auto [it, fresh] = reported.emplace(lid, kind);
        if (!fresh) {
          rep.Error("transfer " + lid + " reported both " + name(it->second) + " and " +
                    name(kind));
        }
      }
    }
  }
  // With only_reported: an error unless `id` (a scanned ledger id) was reported, and, if it
  // is committed, as acknowledged or in doubt.
  auto check_reported = [&](const std::string& id, bool committed) {
    if (!options.only_reported) return;
    const std::string lid = id.substr(cfg.prefix.size());
    auto it = reported.find(lid);
    if (it == reported.end()) {
      rep.Error(std::string("ledger ") + (committed ? "document " : "placeholder ") + id +
                " belongs to no reported transfer");
    } else if (committed && it->second == Reported::kFailed) {
      rep.Error("ledger " + id + " is committed but its transfer was reported failed");
    }
  };

  // The ledger: every document under the scanned prefix, read uncommitted to see references.
  const std::string prefix = cfg.prefix + options.ledger_scan_prefix;
  std::string cursor = prefix;
  bool more = true;
  while (more) {
    auto page = store->Scan(cfg.ledger_collection, cursor, kScanBatch);
    if (!page.ok()) {
      rep.Error("cannot scan the ledger: " + page.status().ToString());
      break;
    }
    for (const auto& [id, unused] : page->documents) {
      if (id.compare(0, prefix.size(), prefix) != 0) {
        more = false;
        break;
      }
      auto r = db.Read(cfg.ledger_collection, id, raw);
      if (!r.ok()) {
        rep.Error("ledger " + id + ": " + r.status().ToString());
        continue;
      }
      if (!r->txn.empty() || r->deleting) {
        ++rep.held_documents;
        rep.Error("ledger " + id + " still held by transaction " + r->txn);
        continue;
      }
      if (r->state == DocumentState::kNotFound) {
        ++rep.placeholders;
        check_reported(id, false);
        continue;
      }
      if (r->state != DocumentState::kFound) {
        rep.Error("ledger " + id + " is " + DocumentStateName(r->state));
        continue;
      }
      auto from = StringField(r->doc, "from");
      auto to = StringField(r->doc, "to");
      auto amount = IntField(r->doc, "amount");
      if (!from || !to || !amount || !index.contains(*from) || !index.contains(*to) ||
          *amount <= 0) {
        rep.Error("ledger " + id + " is malformed: " + boost::json::serialize(r->doc));
        continue;
      }
      check_reported(id, true);
      rep.net[static_cast<std::size_t>(index[*from])] -= *amount;
      rep.net[static_cast<std::size_t>(index[*to])] += *amount;
      ++rep.ledger_docs;
    }
    cursor = page->next_cursor;
    if (cursor.empty()) more = false;
  }

  // The accounts: live, unheld, and each balance what the ledger says.
  for (int i = 0; i < cfg.accounts; ++i) {
    const std::string id = AccountId(cfg, i);
    auto r = db.Read(cfg.accounts_collection, id, raw);
    if (!r.ok()) {
      rep.Error("account " + id + ": " + r.status().ToString());
      continue;
    }
    if (!r->txn.empty() || r->deleting) {
      ++rep.held_documents;
      rep.Error("account " + id + " still held by transaction " + r->txn);
    }
    auto balance = IntField(r->doc, "balance");
    if (r->state != DocumentState::kFound || !balance) {
      rep.Error("account " + id + " is " + DocumentStateName(r->state) + " " +
                boost::json::serialize(r->doc));
      continue;
    }
    rep.total += *balance;
    const std::int64_t expected = cfg.initial_balance + rep.net[static_cast<std::size_t>(i)];
    if (*balance != expected) {
      rep.Error("account " + id + " has balance " + std::to_string(*balance) +
                " but the ledger implies " + std::to_string(expected));
    }
    if (*balance < 0) rep.Error("account " + id + " is overdrawn: " + std::to_string(*balance));
  }
  if (rep.total != rep.expected_total) {
    rep.Error("money not conserved: total " + std::to_string(rep.total) + ", expected " +
              std::to_string(rep.expected_total));
  }

  // Acknowledged transfers are in the ledger, failed ones are not; in-doubt ones are in it or
  // not, never half.
  for (const auto& lid : options.acked) {
    auto r = db.Read(cfg.ledger_collection, cfg.prefix + lid);
    ++rep.acked_checked;
    if (!r.ok() || r->state != DocumentState::kFound) {
      rep.Error("acknowledged transfer " + lid + " is not in the ledger (" +
                (r.ok() ? DocumentStateName(r->state) : r.status().ToString()) + ")");
    }
  }
  // Failed attempts were rolled back: certainly not applied.
  for (const auto& lid : options.failed) {
    auto r = db.Read(cfg.ledger_collection, cfg.prefix + lid);
    ++rep.failed_checked;
    if (!r.ok()) {
      rep.Error("failed transfer " + lid + ": " + r.status().ToString());
    } else if (r->state == DocumentState::kFound) {
      rep.Error("failed transfer " + lid + " is in the ledger");
    }
  }
  for (const auto& lid : options.in_doubt) {
    auto r = db.Read(cfg.ledger_collection, cfg.prefix + lid);
    if (!r.ok()) {
      rep.Error("in-doubt transfer " + lid + ": " + r.status().ToString());
    } else if (r->state == DocumentState::kFound) {
      ++rep.in_doubt_applied;
    } else {
      ++rep.in_doubt_not_applied;
    }
  }

  // No ActiveTransaction record left open.
  auto open = OpenRecords(*store, options.records_since_ms);
  if (!open.ok()) {
    rep.Error("cannot scan the transaction records: " + open.status().ToString());
  } else if (*open > 0) {
    rep.open_records = *open;
    rep.Error(std::to_string(*open) + " transaction record(s) not settled");
  }
  return rep;
}

}  // namespace litetx::bank
