// tests/stress/history.h — a checker for recorded transaction histories: finds
// lost updates, aborted reads (G1a) and intermediate reads (G1b), plus reads of values nobody
// wrote and transactions that do not see their own writes.
//
// The history is a list of transactions (attempts), each with a status (committed, aborted,
// unknown) and its operations in program order. Every write stores a token unique in the whole
// history (e.g. "<attempt id>/<key>/<n>") in the document, and every read records the token it
// saw, so a read is attributed to exactly one write — by token, not by version, because
// versions also move on rollbacks. The tokens present before the history starts are declared
// with AddInitial.
//
// Checks, for every read of the transactions checked (the committed ones; all of them with
// Options::strict, which suits an engine whose every read is read-committed):
//   own write   a read of a key the transaction already wrote must see its own last write;
//   unknown     the token must be an initial token of that key or written to that key by some
//               transaction (otherwise it was invented or misattributed);
//   G1a         the writer of the token must not be aborted (unknown writers are not judged);
//   G1b         the token must be the last one its (committed) writer wrote to that key.
// Lost update: two committed transactions that read the same token of a key (before writing
// it themselves) and both wrote that key.
//
// Thread safety: a value type; build it on one thread (merge per-thread lists first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace stress::history {

enum class OpKind { kRead, kWrite };
struct Op {
  OpKind kind = OpKind::kRead;
  std::string key;
  std::string token;          // the token read or written
  std::uint64_t version = 0;  // reads: the version seen (informational)
};

enum class TxnStatus { kCommitted, kAborted, kUnknown };
struct Txn {
  std::string id;
  TxnStatus status = TxnStatus::kAborted;
  std::vector<Op> ops;
};

enum class AnomalyKind { kLostUpdate, kAbortedRead, kIntermediateRead, kUnknownToken, kOwnWriteNotSeen, kDuplicateToken };

inline const char* AnomalyName(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::kLostUpdate: return "lost-update";
    case AnomalyKind::kAbortedRead: return "G1a-aborted-read";
    case AnomalyKind::kIntermediateRead: return "G1b-intermediate-read";
    case AnomalyKind::kUnknownToken: return "unknown-token";
    case AnomalyKind::kOwnWriteNotSeen: return "own-write-not-seen";
    case AnomalyKind::kDuplicateToken: return "duplicate-token";
  }
  return "?";
}

struct Anomaly {
  AnomalyKind kind;
  std::string description;
};

struct Report {
  std::vector<Anomaly> anomalies;  // at most Options::max_listed of them
  std::map<AnomalyKind, std::size_t> counts;
  std::size_t committed = 0, aborted = 0, unknown = 0;
  std::size_t reads_checked = 0, writes = 0, unjudged_reads = 0;  // unjudged: unknown writer

  bool ok() const { return counts.empty(); }
  std::size_t Count(AnomalyKind k) const {
    auto it = counts.find(k);
    return it == counts.end() ? 0 : it->second;
  }
  std::string Summary() const {
    std::string s = "txns committed " + std::to_string(committed) + ", aborted " +
                    std::to_string(aborted) + ", unknown " + std::to_string(unknown) +
                    "; reads checked " + std::to_string(reads_checked) + ", writes " +
                    std::to_string(writes) + "; anomalies:";
    if (counts.empty()) s += " none";
    for (const auto& [k, n] : counts) s += std::string(" ") + AnomalyName(k) + "=" + std::to_string(n);
    for (const auto& a : anomalies) s += "\n  " + std::string(AnomalyName(a.kind)) + ": " + a.description;
    return s;
  }
};

class Checker {
 public:
  struct Options {
    bool strict = false;          // judge the reads of aborted and unknown transactions too
    std::size_t max_listed = 20;  // anomalies described in the report
  };
  Checker() = default;
  explicit Checker(Options o) : options_(o) {}

  void AddInitial(const std::string& key, const std::string& token) { initial_[token] = key; }
  void Add(Txn t) { txns_.push_back(std::move(t)); }
  std::size_t size() const { return txns_.size(); }

  Report Check() const {
    Report rep;
    auto flag = [&](AnomalyKind k, std::string d) {
      ++rep.counts[k];
      if (rep.anomalies.size() < options_.max_listed) rep.anomalies.push_back({k, std::move(d)});
    };
    struct Writer {
      std::size_t txn;
      std::string key;
      bool final_write;  // the last write of that transaction to that key
    };
    std::map<std::string, Writer> writers;  // token -> its write
    for (std::size_t i = 0; i < txns_.size(); ++i) {
      const Txn& t = txns_[i];
      switch (t.status) {
        case TxnStatus::kCommitted: ++rep.committed; break;
        case TxnStatus::kAborted: ++rep.aborted; break;
        case TxnStatus::kUnknown: ++rep.unknown; break;
      }
      std::map<std::string, std::string> last;  // key -> last token written
      for (const Op& op : t.ops) {
        if (op.kind != OpKind::kWrite) continue;
        ++rep.writes;
        if (writers.contains(op.token) || initial_.contains(op.token)) {
          flag(AnomalyKind::kDuplicateToken, "token " + op.token + " written twice (txn " + t.id + ")");
        }
        writers[op.token] = Writer{i, op.key, false};
        last[op.key] = op.token;
      }
      for (const auto& [key, token] : last) writers[token].final_write = true;
    }

    // (key, token read) -> committed transactions that read it and then wrote the key.
    std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> rmw;
    for (std::size_t i = 0; i < txns_.size(); ++i) {
      const Txn& t = txns_[i];
      const bool judged = options_.strict || t.status == TxnStatus::kCommitted;
      std::map<std::string, std::string> own;                  // key -> own last token
      std::map<std::string, std::set<std::string>> external;  // key -> tokens read before own write
      for (const Op& op : t.ops) {
        if (op.kind == OpKind::kWrite) {
          own[op.key] = op.token;
          continue;
        }
        if (!judged) continue;
        ++rep.reads_checked;
        const std::string where = "txn " + t.id + " read " + op.key + " = " + op.token;
        if (auto o = own.find(op.key); o != own.end()) {
          if (o->second != op.token) flag(AnomalyKind::kOwnWriteNotSeen, where + ", own last write " + o->second);
          continue;
        }
        external[op.key].insert(op.token);
        if (auto in = initial_.find(op.token); in != initial_.end()) {
          if (in->second != op.key) flag(AnomalyKind::kUnknownToken, where + " (initial token of " + in->second + ")");
          continue;
        }
        auto w = writers.find(op.token);
        if (w == writers.end() || w->second.key != op.key) {
          flag(AnomalyKind::kUnknownToken, where + (w == writers.end() ? " (never written)" : " (written to " + w->second.key + ")"));
          continue;
        }
        const Txn& writer = txns_[w->second.txn];
        if (w->second.txn == i) {
          flag(AnomalyKind::kOwnWriteNotSeen, where + " (its own later write)");
          continue;
        }
        switch (writer.status) {
          case TxnStatus::kUnknown: ++rep.unjudged_reads; break;
          case TxnStatus::kAborted: flag(AnomalyKind::kAbortedRead, where + " written by aborted " + writer.id); break;
          case TxnStatus::kCommitted:
            if (!w->second.final_write) flag(AnomalyKind::kIntermediateRead, where + ", an intermediate write of " + writer.id);
            break;
        }
      }
      if (t.status != TxnStatus::kCommitted) continue;
      for (const auto& [key, tokens] : external) {
        if (!own.contains(key)) continue;
        for (const auto& tok : tokens) rmw[{key, tok}].push_back(i);
      }
    }
    for (const auto& [kt, list] : rmw) {
      if (list.size() < 2) continue;
      std::string d = "key " + kt.first + ": token " + kt.second + " read and overwritten by";
      for (std::size_t i : list) d += " " + txns_[i].id;
      flag(AnomalyKind::kLostUpdate, d);
    }
    return rep;
  }

 private:
  Options options_;
  std::map<std::string, std::string> initial_;  // token -> key
  std::vector<Txn> txns_;
};

}  // namespace stress::history
