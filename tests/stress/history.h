// tests/stress/history.h — a checker for recorded transaction histories. It recovers a version
// order per key, builds the dependency graph of the committed transactions and looks for the
// anomalies docs/concurrency.md §4 says litetx prevents.
//
// The history is a list of transactions (attempts), each with a status (committed, aborted,
// unknown), an isolation level, optionally its real-time interval, and its operations in
// program order. Every write stores a token unique in the whole history (e.g. "<attempt
// id>/<key>/<n>") in the document, and every read records the token it saw and the document's
// version, so a read is attributed to exactly one write by token (versions also move on
// rollbacks, so a version alone names no write). The tokens present before the history starts
// are declared with AddInitial.
//
// Which transactions count as committed: those recorded committed, and those of unknown status
// (a coordinator that crashed, a kUnknown outcome) whose final write of some key was read by a
// judged read of another transaction — a value that was read was committed, or the read is
// itself an anomaly. An unknown transaction nobody read from is left out of the graph.
//
// Version order of a key: the initial token first, then every placed token by its version. A
// token is placed when its version is known: the version its write installed (Op::version of a
// write, e.g. from CommitInfo::versions), or a version at which a read saw it. Versions of a key
// never decrease and never repeat, and a token stays current from its install until the next
// committed write, so any known version of each token orders the tokens correctly. The committed
// final writes nobody saw and whose version is unknown are not placed (Report::unplaced_writes):
// the checks below cannot see an anomaly that only such a write would reveal.
//
// Checks. Reads judged: those of committed transactions; of every transaction with
// Options::strict (right for litetx, whose every read is read-committed).
//   own write       a read of a key the transaction already wrote sees its own last write;
//   unknown token   the token is an initial token of that key or was written to that key;
//   G1a             the writer of the token read was not aborted;
//   G1b             the token read is the last one its writer wrote to that key;
//   version order   two tokens of a key at the same version; a token read at a version below
//                   the one its write installed; a transaction's write ordered before the value
//                   it read of that key;
//   lost update     a transaction of level kRun or kSerializable that read token X of a key and
//                   then wrote the key must have installed the very next version after X. Any
//                   committed write in between (by a blind writer, an unknown-status writer or
//                   another read-modify-write) was lost. Without a version order, two such
//                   transactions that read the same X and both wrote the key are a lost update;
//   G0 / G1c        no cycle of write-write (ww) and write-read (wr) dependencies among committed
//                   transactions (G0: write-write edges alone);
//   G2-item         no cycle of ww, wr and read-write anti-dependencies (rw: T read X, another
//                   transaction wrote the next version of that key), where the rw edges taken
//                   are those whose reader is kSerializable (Adya's mixed serialization graph: a
//                   read-committed or plain Run transaction may miss later writes, a
//                   serializable one may not);
//   stale read      with real-time intervals: a read by a transaction that started after a
//                   committed writer's call returned sees that write or a later one.
// Not covered: predicates and phantoms (reads record found documents only), and anomalies that
// involve only unplaced writes.
//
// Thread safety: a value type; build it on one thread (merge per-thread lists first).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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
  std::uint64_t version = 0;  // reads: the version seen; writes: the version installed (0: unknown)
};

enum class TxnStatus { kCommitted, kAborted, kUnknown };
// What the transaction was promised: kReadCommitted (plain reads, or reads and then a write
// without the version read: lost updates allowed), kRun (Database::Run: a key read and then
// written carries the version read), kSerializable (Run with RunOptions::serializable).
enum class Level { kReadCommitted, kRun, kSerializable };
struct Txn {
  std::string id;
  TxnStatus status = TxnStatus::kAborted;
  std::vector<Op> ops;
  Level level = Level::kRun;
  // Real time, on one monotonic clock (e.g. ns since the test started): when the attempt
  // started, and when the call that committed it returned. 0: unknown (not checked).
  std::uint64_t start_ns = 0, end_ns = 0;
};

enum class AnomalyKind {
  kLostUpdate,
  kAbortedRead,
  kIntermediateRead,
  kUnknownToken,
  kOwnWriteNotSeen,
  kDuplicateToken,
  kVersionOrder,
  kWriteCycle,       // G0
  kCircularFlow,     // G1c
  kAntiDependency,   // G2-item
  kStaleRead,
};

inline const char* AnomalyName(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::kLostUpdate: return "lost-update";
    case AnomalyKind::kAbortedRead: return "G1a-aborted-read";
    case AnomalyKind::kIntermediateRead: return "G1b-intermediate-read";
    case AnomalyKind::kUnknownToken: return "unknown-token";
    case AnomalyKind::kOwnWriteNotSeen: return "own-write-not-seen";
    case AnomalyKind::kDuplicateToken: return "duplicate-token";
    case AnomalyKind::kVersionOrder: return "version-order";
    case AnomalyKind::kWriteCycle: return "G0-write-cycle";
    case AnomalyKind::kCircularFlow: return "G1c-circular-information-flow";
    case AnomalyKind::kAntiDependency: return "G2-item-anti-dependency-cycle";
    case AnomalyKind::kStaleRead: return "stale-read";
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
  std::size_t unknown_committed = 0;  // unknown-status transactions read from: committed
  std::size_t reads_checked = 0, writes = 0;
  std::size_t placed = 0;             // tokens in the version orders (initial ones included)
  std::size_t unplaced_writes = 0;    // committed final writes whose place is unknown
  std::size_t unplaced_recorded = 0;  // ... of transactions recorded committed
  std::size_t rmw_checked = 0;        // read-then-write pairs checked for a lost update
  std::size_t ww_edges = 0, wr_edges = 0, rw_edges = 0;  // rw: all anti-dependencies found
  std::size_t realtime_checked = 0;   // reads checked against writes that ended before them

  bool ok() const { return counts.empty(); }
  std::size_t Count(AnomalyKind k) const {
    auto it = counts.find(k);
    return it == counts.end() ? 0 : it->second;
  }
  std::string Summary() const {
    std::string s = "txns committed " + std::to_string(committed) + ", aborted " + std::to_string(aborted) +
                    ", unknown " + std::to_string(unknown) + " (" + std::to_string(unknown_committed) +
                    " read from, so committed); reads checked " + std::to_string(reads_checked) +
                    ", writes " + std::to_string(writes) + ", versions placed " + std::to_string(placed) +
                    ", committed writes unplaced " + std::to_string(unplaced_writes) + " (" +
                    std::to_string(unplaced_recorded) + " of transactions recorded committed)" +
                    ", read-then-write checked " + std::to_string(rmw_checked) + "; edges ww " +
                    std::to_string(ww_edges) + " wr " + std::to_string(wr_edges) + " rw " +
                    std::to_string(rw_edges) + "; reads checked in real time " +
                    std::to_string(realtime_checked) + "; anomalies:";
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

  // `version`: the version of the initial value, if known (0: unknown).
  void AddInitial(const std::string& key, const std::string& token, std::uint64_t version = 0) {
    initial_[token] = Initial{key, version};
  }
  void Add(Txn t) { txns_.push_back(std::move(t)); }
  std::size_t size() const { return txns_.size(); }

  Report Check() const {
    State st(*this);
    st.Run();
    return std::move(st.rep);
  }

 private:
  struct Initial {
    std::string key;
    std::uint64_t version = 0;
  };

  // The working state of one Check().
  struct State {
    explicit State(const Checker& c) : c(c), txns(c.txns_), n(c.txns_.size()) {}

    const Checker& c;
    const std::vector<Txn>& txns;
    const std::size_t n;
    Report rep;

    static constexpr std::size_t kInitialTxn = static_cast<std::size_t>(-1);
    struct Writer {
      std::size_t txn = kInitialTxn;
      std::string key;
      bool final_write = false;     // the last write of that transaction to that key
      std::uint64_t version = 0;    // installed version, if the history says
    };
    std::map<std::string, Writer> writers;         // token -> its write
    std::vector<bool> committed;                   // per txn: committed or read from
    std::vector<bool> judged;                      // per txn: its reads are judged
    // Per txn: key -> external reads in order (token, version), own last write per key.
    struct Shape {
      std::map<std::string, std::vector<std::pair<std::string, std::uint64_t>>> external;
      std::map<std::string, std::string> last_write;
    };
    std::vector<Shape> shapes;
    std::map<std::string, std::vector<std::uint64_t>> seen_at;  // token -> versions read at
    // Version order: key -> tokens in order; token -> index in its key's order.
    std::map<std::string, std::vector<std::string>> order;
    std::map<std::string, std::size_t> index;
    // Dependency graph over txn indexes; an edge kind per (from, to).
    enum Edge : unsigned { kWW = 1, kWR = 2, kRW = 4 };
    std::vector<std::map<std::size_t, unsigned>> out;
    std::set<std::pair<std::string, std::string>> lost_reported;  // (key, token read)

    void Flag(AnomalyKind k, std::string d) {
      ++rep.counts[k];
      if (rep.anomalies.size() < c.options_.max_listed) rep.anomalies.push_back({k, std::move(d)});
    }
    const std::string& Id(std::size_t t) const {
      static const std::string kInit = "<initial>";
      return t == kInitialTxn ? kInit : txns[t].id;
    }
    std::size_t WriterOf(const std::string& token) const {
      auto w = writers.find(token);
      return w == writers.end() ? kInitialTxn : w->second.txn;
    }

    void Run() {
      IndexWrites();
      JudgeReads();
      BuildOrders();
      CheckLostUpdates();
      BuildGraph();
      CheckCycles();
      CheckRealTime();
    }

    // Statuses, writes and each transaction's shape; duplicate tokens.
    void IndexWrites() {
      committed.assign(n, false);
      judged.assign(n, false);
      shapes.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        const Txn& t = txns[i];
        switch (t.status) {
          case TxnStatus::kCommitted: ++rep.committed; break;
          case TxnStatus::kAborted: ++rep.aborted; break;
          case TxnStatus::kUnknown: ++rep.unknown; break;
        }
        committed[i] = t.status == TxnStatus::kCommitted;
        judged[i] = c.options_.strict || committed[i];
        Shape& sh = shapes[i];
        for (const Op& op : t.ops) {
          if (op.kind == OpKind::kRead) {
            if (!sh.last_write.contains(op.key)) sh.external[op.key].emplace_back(op.token, op.version);
            continue;
          }
          ++rep.writes;
          if (writers.contains(op.token) || c.initial_.contains(op.token)) {
            Flag(AnomalyKind::kDuplicateToken, "token " + op.token + " written twice (txn " + t.id + ")");
          }
          writers[op.token] = Writer{i, op.key, false, op.version};
          sh.last_write[op.key] = op.token;
        }
        for (const auto& [key, token] : sh.last_write) writers[token].final_write = true;
      }
    }

    // The per-read checks; which unknown transactions were read from.
    void JudgeReads() {
      for (std::size_t i = 0; i < n; ++i) {
        if (!judged[i]) continue;
        const Txn& t = txns[i];
        std::map<std::string, std::string> own;  // key -> own last token so far
        for (const Op& op : t.ops) {
          if (op.kind == OpKind::kWrite) {
            own[op.key] = op.token;
            continue;
          }
          ++rep.reads_checked;
          const std::string where = "txn " + t.id + " read " + op.key + " = " + op.token;
          if (auto o = own.find(op.key); o != own.end()) {
            if (o->second != op.token) Flag(AnomalyKind::kOwnWriteNotSeen, where + ", own last write " + o->second);
            continue;
          }
          if (auto in = c.initial_.find(op.token); in != c.initial_.end()) {
            if (in->second.key != op.key) {
              Flag(AnomalyKind::kUnknownToken, where + " (initial token of " + in->second.key + ")");
            } else if (op.version != 0) {
              seen_at[op.token].push_back(op.version);
            }
            continue;
          }
          auto w = writers.find(op.token);
          if (w == writers.end() || w->second.key != op.key) {
            Flag(AnomalyKind::kUnknownToken, where + (w == writers.end() ? " (never written)" : " (written to " + w->second.key + ")"));
            continue;
          }
          if (w->second.txn == i) {
            Flag(AnomalyKind::kOwnWriteNotSeen, where + " (its own later write)");
            continue;
          }
          const Txn& writer = txns[w->second.txn];
          if (writer.status == TxnStatus::kAborted) {
            Flag(AnomalyKind::kAbortedRead, where + " written by aborted " + writer.id);
            continue;
          }
          if (!w->second.final_write) {
            Flag(AnomalyKind::kIntermediateRead, where + ", an intermediate write of " + writer.id);
            continue;
          }
          if (writer.status == TxnStatus::kUnknown && !committed[w->second.txn]) {
            committed[w->second.txn] = true;
            ++rep.unknown_committed;
          }
          if (op.version != 0) seen_at[op.token].push_back(op.version);
        }
      }
    }

    // Version order of every key, from installed versions and versions seen.
    void BuildOrders() {
      std::map<std::string, std::vector<std::pair<std::uint64_t, std::string>>> placed;  // key -> (version, token)
      std::map<std::string, std::string> first;  // key -> initial token
      for (const auto& [token, in] : c.initial_) first[in.key] = token;
      auto place = [&](const std::string& key, const std::string& token, std::uint64_t installed) {
        auto s = seen_at.find(token);
        std::uint64_t v = installed;
        if (s != seen_at.end()) {
          const std::uint64_t lowest = *std::min_element(s->second.begin(), s->second.end());
          if (installed != 0 && lowest < installed) {
            Flag(AnomalyKind::kVersionOrder, "key " + key + ": token " + token + " read at version " +
                                                 std::to_string(lowest) + ", below the version " +
                                                 std::to_string(installed) + " its write installed");
          }
          if (v == 0) v = lowest;
        }
        return v;
      };
      for (const auto& [token, in] : c.initial_) {
        const std::uint64_t v = place(in.key, token, in.version);
        order[in.key].push_back(token);
        if (v != 0) placed[in.key].emplace_back(v, token);
      }
      for (const auto& [token, w] : writers) {
        if (!w.final_write || !committed[w.txn]) continue;
        const std::uint64_t v = place(w.key, token, w.version);
        if (v == 0) {
          ++rep.unplaced_writes;
          if (txns[w.txn].status == TxnStatus::kCommitted) ++rep.unplaced_recorded;
          continue;
        }
        placed[w.key].emplace_back(v, token);
      }
      for (auto& [key, list] : placed) {
        std::sort(list.begin(), list.end());
        auto& ord = order[key];
        const bool has_initial = !ord.empty();
        for (std::size_t j = 0; j < list.size(); ++j) {
          if (j > 0 && list[j].first == list[j - 1].first) {
            Flag(AnomalyKind::kVersionOrder, "key " + key + ": tokens " + list[j - 1].second + " and " +
                                                 list[j].second + " both at version " + std::to_string(list[j].first));
          }
          if (has_initial && list[j].second == ord.front()) {
            if (j != 0) {
              Flag(AnomalyKind::kVersionOrder, "key " + key + ": the initial token " + ord.front() +
                                                   " was seen at version " + std::to_string(list[j].first) +
                                                   ", after " + list[0].second);
            }
            continue;
          }
          ord.push_back(list[j].second);
        }
      }
      for (const auto& [key, ord] : order) {
        rep.placed += ord.size();
        for (std::size_t j = 0; j < ord.size(); ++j) index[ord[j]] = j;
      }
    }

    // A read-then-write of a key by a kRun or kSerializable transaction installs the next version.
    void CheckLostUpdates() {
      std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> pairs;  // (key, X) -> txns
      for (std::size_t i = 0; i < n; ++i) {
        if (!committed[i] || txns[i].level == Level::kReadCommitted) continue;
        for (const auto& [key, reads] : shapes[i].external) {
          auto lw = shapes[i].last_write.find(key);
          if (lw == shapes[i].last_write.end()) continue;
          // The write carries the version of the first read (a run reads a key once).
          const std::string& x = reads.front().first;
          pairs[{key, x}].push_back(i);
          auto ix = index.find(x), iy = index.find(lw->second);
          if (ix == index.end() || iy == index.end()) continue;
          ++rep.rmw_checked;
          const auto& ord = order.at(key);
          if (iy->second == ix->second + 1) continue;
          if (!lost_reported.insert({key, x}).second) continue;
          const std::string where = "txn " + txns[i].id + " read " + key + " = " + x + " and wrote " + lw->second;
          if (iy->second <= ix->second) {
            Flag(AnomalyKind::kVersionOrder, where + ", but its write is ordered before the value it read");
            continue;
          }
          std::string lost;
          for (std::size_t j = ix->second + 1; j < iy->second; ++j) lost += " " + ord[j] + " (" + Id(WriterOf(ord[j])) + ")";
          Flag(AnomalyKind::kLostUpdate, where + "; written in between and lost:" + lost);
        }
      }
      for (const auto& [kx, list] : pairs) {
        if (list.size() < 2 || lost_reported.contains(kx)) continue;
        lost_reported.insert(kx);
        std::string d = "key " + kx.first + ": token " + kx.second + " read and overwritten by";
        for (std::size_t i : list) d += " " + txns[i].id;
        Flag(AnomalyKind::kLostUpdate, d);
      }
    }

    void AddEdge(std::size_t from, std::size_t to, Edge e) {
      if (from == kInitialTxn || from == to) return;
      unsigned& k = out[from][to];
      if ((k & e) != 0) return;
      k |= e;
      if (e == kWW) ++rep.ww_edges;
      if (e == kWR) ++rep.wr_edges;
      if (e == kRW) ++rep.rw_edges;
    }

    void BuildGraph() {
      out.assign(n, {});
      for (const auto& [key, ord] : order) {
        for (std::size_t j = 1; j < ord.size(); ++j) AddEdge(WriterOf(ord[j - 1]), WriterOf(ord[j]), kWW);
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (!committed[i]) continue;
        for (const auto& [key, reads] : shapes[i].external) {
          for (const auto& [x, version] : reads) {
            (void)version;
            auto w = writers.find(x);
            if (w != writers.end() && w->second.key == key && w->second.final_write && committed[w->second.txn]) {
              AddEdge(w->second.txn, i, kWR);
            }
            auto ix = index.find(x);
            if (ix == index.end()) continue;
            const auto& ord = order.at(key);
            if (ix->second + 1 < ord.size()) AddEdge(i, WriterOf(ord[ix->second + 1]), kRW);
          }
        }
      }
    }

    // Strongly connected components of the graph restricted to edges `mask` (whose rw edges
    // count only when `rw_from(from)`); returns a component id per txn.
    std::vector<std::size_t> Components(unsigned mask, const std::function<bool(std::size_t)>& rw_from,
                                        std::size_t* count) const {
      auto take = [&](std::size_t from, unsigned k) {
        const unsigned m = k & mask;
        if ((m & ~static_cast<unsigned>(kRW)) != 0) return true;
        return (m & kRW) != 0 && rw_from(from);
      };
      // Iterative Tarjan.
      const std::size_t none = static_cast<std::size_t>(-1);
      std::vector<std::size_t> idx(n, none), low(n, 0), comp(n, none);
      std::vector<bool> on(n, false);
      std::vector<std::size_t> stack;
      std::size_t next = 0, comps = 0;
      struct Frame {
        std::size_t v;
        std::map<std::size_t, unsigned>::const_iterator it;
      };
      for (std::size_t s = 0; s < n; ++s) {
        if (!committed[s] || idx[s] != none) continue;
        std::vector<Frame> frames{{s, out[s].begin()}};
        idx[s] = low[s] = next++;
        stack.push_back(s);
        on[s] = true;
        while (!frames.empty()) {
          Frame& f = frames.back();
          if (f.it != out[f.v].end()) {
            const auto [w, k] = *f.it;
            ++f.it;
            if (!committed[w] || !take(f.v, k)) continue;
            if (idx[w] == none) {
              idx[w] = low[w] = next++;
              stack.push_back(w);
              on[w] = true;
              frames.push_back({w, out[w].begin()});
            } else if (on[w]) {
              low[f.v] = std::min(low[f.v], idx[w]);
            }
            continue;
          }
          const std::size_t v = f.v;
          frames.pop_back();
          if (!frames.empty()) low[frames.back().v] = std::min(low[frames.back().v], low[v]);
          if (low[v] == idx[v]) {
            std::size_t w;
            do {
              w = stack.back();
              stack.pop_back();
              on[w] = false;
              comp[w] = comps;
            } while (w != v);
            ++comps;
          }
        }
      }
      *count = comps;
      return comp;
    }

    // A cycle through the edge from -> to inside component `cid`, described with its edges.
    std::string Cycle(std::size_t from, std::size_t to, const std::vector<std::size_t>& comp, unsigned mask,
                      const std::function<bool(std::size_t)>& rw_from) const {
      auto name = [](unsigned k) {
        std::string s;
        if (k & kWW) s += "ww";
        if (k & kWR) s += std::string(s.empty() ? "" : "/") + "wr";
        if (k & kRW) s += std::string(s.empty() ? "" : "/") + "rw";
        return s;
      };
      auto usable = [&](std::size_t a, unsigned k) {
        unsigned m = k & mask;
        if (!rw_from(a)) m &= ~static_cast<unsigned>(kRW);
        return m;
      };
      // Breadth-first from `to` back to `from` within the component.
      std::map<std::size_t, std::size_t> parent{{to, to}};
      std::vector<std::size_t> queue{to};
      for (std::size_t q = 0; q < queue.size() && !parent.contains(from); ++q) {
        const std::size_t v = queue[q];
        for (const auto& [w, k] : out[v]) {
          if (!committed[w] || comp[w] != comp[from] || usable(v, k) == 0 || parent.contains(w)) continue;
          parent[w] = v;
          queue.push_back(w);
        }
      }
      if (!parent.contains(from)) return "(no cycle path found)";
      std::vector<std::size_t> path{from};
      while (path.back() != to) path.push_back(parent[path.back()]);
      std::reverse(path.begin(), path.end());  // to ... from
      std::string d = Id(from);
      d += " -" + name(usable(from, out[from].at(to))) + "-> " + Id(to);
      for (std::size_t j = 1; j < path.size(); ++j) {
        d += " -" + name(usable(path[j - 1], out[path[j - 1]].at(path[j]))) + "-> " + Id(path[j]);
      }
      return d;
    }

    void CheckCycles() {
      auto never = [](std::size_t) { return false; };
      auto serializable = [&](std::size_t t) { return txns[t].level == Level::kSerializable; };
      std::size_t n_ww = 0, n_flow = 0, n_all = 0;
      const auto ww = Components(kWW, never, &n_ww);
      const auto flow = Components(kWW | kWR, never, &n_flow);
      const auto all = Components(kWW | kWR | kRW, serializable, &n_all);
      // One anomaly per component of more than one transaction, found through one of its
      // edges: G0 where write-write edges alone close it, G1c where write-read edges are needed,
      // G2-item where anti-dependencies are.
      std::set<std::size_t> done_ww, done_flow, done_all;
      for (std::size_t v = 0; v < n; ++v) {
        if (!committed[v]) continue;
        for (const auto& [w, k] : out[v]) {
          if (!committed[w]) continue;
          if ((k & kWW) && ww[v] == ww[w] && done_ww.insert(ww[v]).second) {
            done_flow.insert(flow[v]);
            done_all.insert(all[v]);
            Flag(AnomalyKind::kWriteCycle, Cycle(v, w, ww, kWW, never));
          }
          if ((k & (kWW | kWR)) && flow[v] == flow[w] && done_flow.insert(flow[v]).second) {
            done_all.insert(all[v]);
            Flag(AnomalyKind::kCircularFlow, Cycle(v, w, flow, kWW | kWR, never));
          }
        }
      }
      for (std::size_t v = 0; v < n; ++v) {
        if (!committed[v] || !serializable(v)) continue;
        for (const auto& [w, k] : out[v]) {
          if (!committed[w] || (k & kRW) == 0 || all[v] != all[w] || !done_all.insert(all[v]).second) continue;
          Flag(AnomalyKind::kAntiDependency, Cycle(v, w, all, kWW | kWR | kRW, serializable));
        }
      }
    }

    // A read that started after a committed write's call returned sees it or a later write.
    void CheckRealTime() {
      // key -> (end time, index) of committed writes with a known end, by end time.
      std::map<std::string, std::vector<std::pair<std::uint64_t, std::size_t>>> ends;
      for (const auto& [key, ord] : order) {
        for (std::size_t j = 0; j < ord.size(); ++j) {
          const std::size_t w = WriterOf(ord[j]);
          if (w != kInitialTxn && txns[w].end_ns != 0) ends[key].emplace_back(txns[w].end_ns, j);
        }
      }
      std::map<std::string, std::vector<std::size_t>> prefix_max;  // key -> running max index
      for (auto& [key, list] : ends) {
        std::sort(list.begin(), list.end());
        auto& pm = prefix_max[key];
        std::size_t m = 0;
        for (const auto& e : list) pm.push_back(m = std::max(m, e.second));
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (!judged[i] || txns[i].start_ns == 0) continue;
        for (const auto& [key, reads] : shapes[i].external) {
          auto e = ends.find(key);
          if (e == ends.end()) continue;
          // Writes that ended strictly before this transaction started.
          const auto& list = e->second;
          const auto it = std::lower_bound(list.begin(), list.end(), std::make_pair(txns[i].start_ns, std::size_t{0}));
          if (it == list.begin()) continue;
          const std::size_t newest = prefix_max[key][static_cast<std::size_t>(it - list.begin()) - 1];
          for (const auto& [x, version] : reads) {
            (void)version;
            auto ix = index.find(x);
            if (ix == index.end()) continue;
            ++rep.realtime_checked;
            if (ix->second < newest) {
              const auto& ord = order.at(key);
              Flag(AnomalyKind::kStaleRead, "txn " + txns[i].id + " read " + key + " = " + x + ", but " + ord[newest] +
                                                " (" + Id(WriterOf(ord[newest])) + ") had been committed before it started");
            }
          }
        }
      }
    }
  };

  Options options_;
  std::map<std::string, Initial> initial_;  // token -> key, version
  std::vector<Txn> txns_;
};

}  // namespace stress::history
