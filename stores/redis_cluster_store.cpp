#include "litetx/redis_cluster_store.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <new>
#include <shared_mutex>
#include <thread>
#include <utility>
#include <vector>

#include <boost/json/serialize.hpp>

#include "engine/json_text.h"
#include "stores/redis_common.h"

namespace litetx {

namespace json = boost::json;
using namespace redis;  // NOLINT: the store is written in terms of the shared pieces

namespace {

constexpr int kSlots = 16384;

using Clock = std::chrono::steady_clock;

// Pause before the next attempt after a TRYAGAIN, CLUSTERDOWN or an unreachable node: 5 ms
// doubling to 200 ms.
void Backoff(int attempt) {
  std::chrono::milliseconds d{5};
  for (int i = 0; i < attempt && d < std::chrono::milliseconds{200}; ++i) d *= 2;
  std::this_thread::sleep_for(std::min(d, std::chrono::milliseconds{200}));
}

std::uint16_t Crc16(std::string_view s) {
  std::uint16_t crc = 0;
  for (char ch : s) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(ch)) << 8;
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

bool IsNotClusterError(std::string_view err) {
  return err.find("cluster support disabled") != std::string_view::npos;
}

}  // namespace

struct RedisClusterStore::Impl {
  RedisClusterOptions options;
  Scripts scripts;

  mutable std::shared_mutex mu;
  std::map<std::string, std::unique_ptr<NodePool>> pools;  // guarded by mu; never erased
  std::vector<NodePool*> slots = std::vector<NodePool*>(kSlots, nullptr);  // guarded by mu

  std::mutex refresh_mu;          // one slot-map read at a time
  std::atomic<std::uint64_t> epoch{0};  // bumped by every slot map installed

  std::atomic<std::uint64_t> moved{0}, ask{0}, tryagain{0}, refreshes{0};

  void Warn(const std::string& msg) const {
    if (options.logger) options.logger->warn("{}", msg);
  }

  NodeConfig ConfigFor(const std::string& host, int port) const {
    return NodeConfig{host,
                      port,
                      0,
                      options.pool_size,
                      options.connect_timeout,
                      options.command_timeout,
                      options.logger};
  }

  // The pool of host:port, made if new. Caller holds `mu` exclusively.
  NodePool* PoolLocked(const std::string& host, int port) {
    std::string name = host + ":" + std::to_string(port);
    auto it = pools.find(name);
    if (it == pools.end()) {
      it = pools.emplace(name, std::make_unique<NodePool>(ConfigFor(host, port))).first;
    }
    return it->second.get();
  }

  NodePool* Pool(const std::string& host, int port) {
    {
      std::shared_lock<std::shared_mutex> lock(mu);
      auto it = pools.find(host + ":" + std::to_string(port));
      if (it != pools.end()) return it->second.get();
    }
    std::unique_lock<std::shared_mutex> lock(mu);
    return PoolLocked(host, port);
  }

  NodePool* SlotPool(int slot, std::uint64_t* seen) const {
    std::shared_lock<std::shared_mutex> lock(mu);
    *seen = epoch.load();
    return slots[static_cast<std::size_t>(slot)];
  }

  void SetSlot(int slot, NodePool* pool) {
    std::unique_lock<std::shared_mutex> lock(mu);
    slots[static_cast<std::size_t>(slot)] = pool;
  }

  // Reads CLUSTER SLOTS from `host:port` into `out` (masters only). kInvalidArgument if the
  // node is not in cluster mode.
  Status ReadSlotMap(const std::string& host, int port,
                     std::vector<std::pair<std::string, int>>* out, int* covered) {
    NodePool probe(ConfigFor(host, port));
    auto c = probe.Connect();
    if (!c.ok()) return c.status();
    redisContext* ctx = *c;
    Reply r(static_cast<redisReply*>(redisCommand(ctx, "CLUSTER SLOTS")));
    std::string io = r == nullptr ? ContextError(ctx) : std::string();
    redisFree(ctx);
    const std::string node = host + ":" + std::to_string(port);
    if (r == nullptr) return Status::Unavailable("redis-cluster: CLUSTER SLOTS on " + node + ": " + io);
    if (r->type == REDIS_REPLY_ERROR) {
      std::string_view err = ReplyText(r.get());
      if (IsNotClusterError(err)) {
        return Status::InvalidArgument("redis-cluster: " + node +
                                       " is not in cluster mode (it answered: " +
                                       std::string(err) + "); use RedisStore (redis://)");
      }
      return Status::Unavailable("redis-cluster: CLUSTER SLOTS on " + node + ": " +
                                 std::string(err));
    }
    if (r->type != REDIS_REPLY_ARRAY) {
      return Status::Corruption("redis-cluster: CLUSTER SLOTS on " + node +
                                ": unexpected reply type");
    }
    out->assign(kSlots, {});
    *covered = 0;
    for (std::size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
          e->element[0]->type != REDIS_REPLY_INTEGER ||
          e->element[1]->type != REDIS_REPLY_INTEGER ||
          e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
          e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
          e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
        return Status::Corruption("redis-cluster: CLUSTER SLOTS on " + node +
                                  ": an entry of an unexpected shape");
      }
      long long lo = e->element[0]->integer, hi = e->element[1]->integer;
      std::string mhost(ReplyText(e->element[2]->element[0]));
      long long mport = e->element[2]->element[1]->integer;
      if (lo < 0 || hi >= kSlots || lo > hi || mport <= 0 || mport > 65535) {
        return Status::Corruption("redis-cluster: CLUSTER SLOTS on " + node +
                                  ": a slot range or port out of bounds");
      }
      // An empty or unknown endpoint means "the address you reached me at".
      if (mhost.empty() || mhost == "?") mhost = host;
      for (long long s = lo; s <= hi; ++s) {
        auto& slot = (*out)[static_cast<std::size_t>(s)];
        if (slot.second == 0) ++*covered;
        slot = {mhost, static_cast<int>(mport)};
      }
    }
    return Status::Ok();
  }

  // Reads the slot map again, unless another thread did since `seen`. Asks the nodes the store
  // knows (current masters first), then the seeds. kUnavailable if no node answered or the map
  // does not cover every slot (a partial map is installed all the same).
  Status Refresh(std::uint64_t seen) {
    std::lock_guard<std::mutex> guard(refresh_mu);
    if (epoch.load() != seen) return Status::Ok();
    std::vector<std::pair<std::string, int>> candidates;
    {
      std::shared_lock<std::shared_mutex> lock(mu);
      std::vector<NodePool*> masters;
      for (NodePool* p : slots) {
        if (p != nullptr && std::find(masters.begin(), masters.end(), p) == masters.end()) {
          masters.push_back(p);
        }
      }
      for (NodePool* p : masters) candidates.emplace_back(p->config().host, p->config().port);
      for (const auto& [name, p] : pools) {
        if (std::find(masters.begin(), masters.end(), p.get()) == masters.end()) {
          candidates.emplace_back(p->config().host, p->config().port);
        }
      }
    }
    for (const RedisNode& s : options.seeds) {
      std::pair<std::string, int> c{s.host, s.port};
      if (std::find(candidates.begin(), candidates.end(), c) == candidates.end()) {
        candidates.push_back(c);
      }
    }
    std::string errors;
    for (const auto& [host, port] : candidates) {
      std::vector<std::pair<std::string, int>> map;
      int covered = 0;
      Status s = ReadSlotMap(host, port, &map, &covered);
      if (s.ok() && covered == 0) s = Status::Unavailable("it serves no slots");
      if (!s.ok()) {
        if (s.code() == Code::kInvalidArgument) return s;
        errors += (errors.empty() ? "" : "; ") + s.message();
        continue;
      }
      {
        std::unique_lock<std::shared_mutex> lock(mu);
        for (int i = 0; i < kSlots; ++i) {
          const auto& [h, p] = map[static_cast<std::size_t>(i)];
          slots[static_cast<std::size_t>(i)] = p == 0 ? nullptr : PoolLocked(h, p);
        }
        epoch.fetch_add(1);
      }
      refreshes.fetch_add(1);
      if (covered < kSlots) {
        return Status::Unavailable("redis-cluster: the slot map from " + host + ":" +
                                   std::to_string(port) + " covers " + std::to_string(covered) +
                                   " of 16384 slots");
      }
      return Status::Ok();
    }
    return Status::Unavailable("redis-cluster: no node answered CLUSTER SLOTS: " + errors);
  }

  // Runs `attempt(conn, asking)` on the node serving `slot` until it gives a reply that is not
  // a redirect: follows MOVED (and refreshes the map) and ASK (the next attempt is told to send
  // ASKING first), waits out TRYAGAIN and CLUSTERDOWN, and tries again after a node could not
  // be reached, all within the command timeout and max_redirects; then kUnavailable. A Status
  // from `attempt` ends the call, except kUnavailable when `retry_unavailable` (the attempt
  // promises that kUnavailable means its command did not run). Every one of these replies and
  // failures means the command did not run, so sending it again is safe.
  template <typename Attempt>
  Result<Reply> Route(int slot, const std::string& what, bool retry_unavailable,
                      const Attempt& attempt) {
    const auto deadline = Clock::now() + options.command_timeout;
    NodePool* ask_pool = nullptr;
    std::string last;
    for (int hop = 0; hop <= options.max_redirects && Clock::now() < deadline; ++hop) {
      std::uint64_t seen = 0;
      NodePool* pool = SlotPool(slot, &seen);
      if (ask_pool != nullptr) pool = ask_pool;
      if (pool == nullptr) {
        last = "no node serves slot " + std::to_string(slot);
        (void)Refresh(seen);
        Backoff(hop);
        continue;
      }
      Conn conn(pool);
      if (Status s = conn.Open(); !s.ok()) {
        last = s.message();
        (void)Refresh(seen);
        Backoff(hop);
        continue;
      }
      const bool asking = ask_pool != nullptr;
      ask_pool = nullptr;
      Result<Reply> r = attempt(conn, asking);
      if (!r.ok()) {
        if (!retry_unavailable || r.status().code() != Code::kUnavailable) return r.status();
        last = r.status().message();  // not sent whole: it did not run; the node may be gone
        (void)Refresh(seen);
        Backoff(hop);
        continue;
      }
      if ((*r)->type != REDIS_REPLY_ERROR) return r;
      ErrorReply e = ClassifyError(ReplyText(r->get()));
      last = pool->name() + " answered " + e.text;
      switch (e.kind) {
        case ErrorKind::kMoved:
          moved.fetch_add(1);
          SetSlot(slot, Pool(e.host, e.port));
          (void)Refresh(seen);
          continue;
        case ErrorKind::kAsk:
          ask.fetch_add(1);
          ask_pool = Pool(e.host, e.port);
          continue;
        case ErrorKind::kTryAgain:
          tryagain.fetch_add(1);
          Backoff(hop);
          continue;
        case ErrorKind::kClusterDown:
          (void)Refresh(seen);
          Backoff(hop);
          continue;
        default:
          return r;
      }
    }
    return Status::Unavailable(what + ": gave up before it ran: " + last);
  }

  // Runs `cmd` (a read) on the node serving `slot`. The reply may be an error reply other than
  // a redirect (the caller decides); kUnavailable on any I/O failure or when giving up.
  Result<Reply> RouteRead(int slot, const Command& cmd, const std::string& what) {
    return Route(slot, what, /*retry_unavailable=*/false,
                 [&](Conn& conn, bool asking) -> Result<Reply> {
                   std::vector<Command> cmds;
                   if (asking) cmds.push_back(Command{{"ASKING"}});
                   cmds.push_back(cmd);
                   Stage stage;
                   std::string error;
                   auto replies = Exchange(conn, cmds, &stage, &error);
                   if (stage != Stage::kOk) {
                     return Status::Unavailable(what + ": " + conn.pool()->name() + ": " + error);
                   }
                   return std::move(replies.back());
                 });
  }

  // Runs write script `id` on the node serving `key`. A script that may have run is never sent
  // again: RunWrite returns kUnavailable only when the script was not sent whole, and the
  // replies Route retries on (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) and NOSCRIPT (answered here
  // by sending the script's text on the same connection) all mean it did not run.
  Result<Reply> RouteWrite(ScriptId id, const Key& key, const std::vector<std::string>& argv) {
    const std::string what = std::string("redis-cluster: ") + ScriptName(id) + " " + Describe(key);
    Keys k = KeysOf(options.prefix, options.buckets, key);
    WriteCall call{id, &k, &argv};
    call.wait_replicas = options.wait_replicas;
    call.wait_timeout = options.wait_timeout;
    auto r = Route(SlotOf(k.doc), what, /*retry_unavailable=*/true,
                   [&](Conn& conn, bool asking) -> Result<Reply> {
                     call.asking = asking;
                     call.eval = false;
                     const std::string on = what + " on " + conn.pool()->name();
                     auto w = RunWrite(conn, scripts, call, on);
                     if (!w.ok() || (*w)->type != REDIS_REPLY_ERROR ||
                         ClassifyError(ReplyText(w->get())).kind != ErrorKind::kNoScript) {
                       return w;
                     }
                     Warn(on + ": the node lacks the script (NOSCRIPT); sending its text");
                     call.eval = true;
                     return RunWrite(conn, scripts, call, on);
                   });
    if (!r.ok()) return r.status();
    if ((*r)->type != REDIS_REPLY_ERROR) return r;
    return WriteErrorStatus(id, ClassifyError(ReplyText(r->get())), what);
  }

  // Reads: one command per entry, each for its slot. Pipelines the commands to every master at
  // once (all sends, then all replies); an entry whose node failed or redirected is then run
  // alone through RouteRead. Every returned reply is a non-redirect reply.
  Result<std::vector<Reply>> ReadMany(const std::vector<std::pair<int, Command>>& cmds,
                                      const std::string& what) {
    std::vector<Reply> out(cmds.size());
    std::map<NodePool*, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < cmds.size(); ++i) {
      std::uint64_t seen = 0;
      NodePool* p = SlotPool(cmds[i].first, &seen);
      if (p != nullptr) groups[p].push_back(i);
    }
    struct Batch {
      std::unique_ptr<Conn> conn;
      std::vector<std::size_t> idx;
      bool sent = false;
    };
    std::vector<Batch> batches;
    for (auto& [pool, idx] : groups) {
      Batch b{std::make_unique<Conn>(pool), std::move(idx)};
      if (b.conn->Open().ok()) {
        std::vector<Command> send;
        for (std::size_t i : b.idx) send.push_back(cmds[i].second);
        std::string error;
        b.sent = Send(*b.conn, send, &error);
      }
      batches.push_back(std::move(b));
    }
    for (Batch& b : batches) {
      if (!b.sent) continue;
      std::vector<Reply> replies;
      std::string error;
      if (!Receive(*b.conn, b.idx.size(), &replies, &error)) continue;
      for (std::size_t j = 0; j < b.idx.size(); ++j) {
        Reply& r = replies[j];
        if (r->type == REDIS_REPLY_ERROR) {
          ErrorKind k = ClassifyError(ReplyText(r.get())).kind;
          if (k == ErrorKind::kMoved || k == ErrorKind::kAsk || k == ErrorKind::kTryAgain ||
              k == ErrorKind::kClusterDown) {
            continue;  // run alone below
          }
        }
        out[b.idx[j]] = std::move(r);
      }
    }
    batches.clear();  // connections back to their pools
    for (std::size_t i = 0; i < cmds.size(); ++i) {
      if (out[i] != nullptr) continue;
      auto r = RouteRead(cmds[i].first, cmds[i].second, what);
      if (!r.ok()) return r.status();
      out[i] = std::move(r).value();
    }
    return out;
  }
};

int RedisClusterStore::SlotOf(std::string_view key) {
  std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) % kSlots;
}

Result<std::shared_ptr<RedisClusterStore>> RedisClusterStore::Open(RedisClusterOptions options) try {
  if (options.seeds.empty()) {
    return Status::InvalidArgument("redis-cluster: at least one seed node is needed");
  }
  for (const RedisNode& n : options.seeds) {
    if (n.host.empty() || n.port <= 0 || n.port > 65535) {
      return Status::InvalidArgument("redis-cluster: bad seed node '" + n.host + ":" +
                                     std::to_string(n.port) + "'");
    }
  }
  if (options.buckets == 0) {
    return Status::InvalidArgument("redis-cluster: buckets must be at least 1");
  }
  if (options.pool_size == 0) {
    return Status::InvalidArgument("redis-cluster: pool_size must be at least 1");
  }
  if (options.max_redirects < 1) {
    return Status::InvalidArgument("redis-cluster: max_redirects must be at least 1");
  }
  if (options.prefix.find_first_of("{}") != std::string::npos) {
    return Status::InvalidArgument("redis-cluster: the prefix must not contain '{' or '}'");
  }
  if (std::string why = TimeoutProblem(options.connect_timeout, options.command_timeout,
                                       options.wait_replicas, options.wait_timeout);
      !why.empty()) {
    return Status::InvalidArgument("redis-cluster: " + why);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->scripts = MakeScripts();
  if (Status s = impl->Refresh(0); !s.ok()) return s;

  // Load the scripts on every master (a node that loses them later answers NOSCRIPT and gets
  // the text), and check or write the format marker on the master of its slot.
  std::vector<NodePool*> masters;
  for (NodePool* p : impl->slots) {
    if (std::find(masters.begin(), masters.end(), p) == masters.end()) masters.push_back(p);
  }
  for (NodePool* p : masters) {
    auto c = p->Connect();
    if (!c.ok()) return c.status();
    Status s = CheckEvictionPolicy(*c, *p);
    if (s.ok()) s = LoadScripts(*c, &impl->scripts);
    if (!s.ok()) {
      redisFree(*c);
      return Status(s.code(), "redis-cluster: " + p->name() + ": " + s.message());
    }
    p->Adopt(*c);
  }
  const RedisClusterOptions& o = impl->options;
  NodePool* marker = impl->slots[static_cast<std::size_t>(SlotOf(FormatKey(o.prefix)))];
  bool asking = false;
  for (int hop = 0;; ++hop) {
    auto c = marker->Connect();
    if (!c.ok()) return c.status();
    ErrorReply redirect;
    Status s = CheckFormat(*c, o.prefix, o.buckets, &redirect, asking);
    redisFree(*c);
    if (!s.ok()) return s;
    if (redirect.text.empty()) break;
    if (hop >= o.max_redirects) {
      return Status::Unavailable("redis-cluster: the format marker keeps moving: " + redirect.text);
    }
    asking = redirect.kind == ErrorKind::kAsk;
    marker = impl->Pool(redirect.host, redirect.port);
  }
  return std::shared_ptr<RedisClusterStore>(new RedisClusterStore(std::move(impl)));
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis-cluster: open: out of memory");
}

RedisClusterStore::RedisClusterStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisClusterStore::~RedisClusterStore() = default;

const RedisClusterOptions& RedisClusterStore::options() const { return impl_->options; }

RedisClusterStore::Stats RedisClusterStore::stats() const {
  return Stats{impl_->moved.load(), impl_->ask.load(), impl_->tryagain.load(),
               impl_->refreshes.load()};
}

Result<std::optional<StoredDocument>> RedisClusterStore::Get(const Key& key) try {
  using Out = std::optional<StoredDocument>;
  if (!CollectionProblem(key.collection).empty()) return Out{};
  const std::string what = "redis-cluster: get " + Describe(key);
  const RedisClusterOptions& o = impl_->options;
  Keys k = KeysOf(o.prefix, o.buckets, key);
  auto r = impl_->RouteRead(SlotOf(k.doc), Command{{"HMGET", k.doc, "v", "r"}}, what);
  if (!r.ok()) return r.status();
  if ((*r)->type == REDIS_REPLY_ERROR &&
      ClassifyError(ReplyText(r->get())).kind == ErrorKind::kRefused) {
    return Status::Unavailable(what + ": " + std::string(ReplyText(r->get())));
  }
  return DecodeHmget(r->get(), Describe(key));
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis-cluster: get: out of memory");
}

Result<Revision> RedisClusterStore::Create(const Key& key, const boost::json::object& value) try {
  if (std::string why = CollectionProblem(key.collection); !why.empty()) {
    return Status::InvalidArgument("redis-cluster: create " + Describe(key) + ": " + why);
  }
  if (std::string why = engine::StoredValueProblem(value); !why.empty()) {
    return Status::InvalidArgument("redis-cluster: create " + Describe(key) + ": " + why);
  }
  auto r = impl_->RouteWrite(kCreate, key, {key.id, json::serialize(value)});
  if (!r.ok()) return r.status();
  return RevisionOf(r->get(), key);
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis-cluster: create: out of memory");
}

Result<Revision> RedisClusterStore::Replace(const Key& key, Revision expected,
                                            const boost::json::object& value) try {
  if (std::string why = CollectionProblem(key.collection); !why.empty()) {
    return Status::InvalidArgument("redis-cluster: replace " + Describe(key) + ": " + why);
  }
  if (std::string why = engine::StoredValueProblem(value); !why.empty()) {
    return Status::InvalidArgument("redis-cluster: replace " + Describe(key) + ": " + why);
  }
  auto r = impl_->RouteWrite(kReplace, key,
                             {key.id, json::serialize(value), std::to_string(expected)});
  if (!r.ok()) return r.status();
  return RevisionOf(r->get(), key);
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis-cluster: replace: out of memory");
}

Status RedisClusterStore::Erase(const Key& key, Revision expected) try {
  if (!CollectionProblem(key.collection).empty()) {
    return Status::Conflict("erase: the key is absent");  // such a key cannot exist
  }
  auto r = impl_->RouteWrite(kErase, key, {key.id, std::to_string(expected)});
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER || (*r)->integer != 1) {
    return Status::Corruption("redis-cluster: erase " + Describe(key) + ": unexpected reply");
  }
  return Status::Ok();
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis-cluster: erase: out of memory");
}

std::vector<BatchResult> RedisClusterStore::Batch(std::span<const BatchOp> ops) {
  std::vector<BatchResult> out(ops.size());
  try {
    const RedisClusterOptions& o = impl_->options;
    std::vector<BatchCommand> cmds =
        PrepareBatch(ops, "redis-cluster", o.prefix, o.buckets, out);
    if (cmds.empty()) return out;
    // Group the commands by the master of their slot (as the slot map has it now).
    std::map<NodePool*, std::vector<std::size_t>> groups;
    std::vector<std::size_t> alone;  // run on their own through the single calls
    for (std::size_t j = 0; j < cmds.size(); ++j) {
      std::uint64_t seen = 0;
      NodePool* p = impl_->SlotPool(SlotOf(cmds[j].keys.doc), &seen);
      if (p != nullptr) {
        groups[p].push_back(j);
      } else {
        alone.push_back(j);
      }
    }
    struct Pipeline {
      std::unique_ptr<Conn> conn;
      std::vector<std::size_t> idx;  // into cmds
      std::size_t sent = 0;          // commands handed to the kernel whole
      bool writes = false;
      bool wait_sent = false;
      std::string error, wait_error;
    };
    std::vector<Pipeline> pipes;
    pipes.reserve(groups.size());
    // Every pipeline is written out before any reply is read: the masters work in parallel.
    for (auto& [pool, idx] : groups) {
      Pipeline p;
      p.conn = std::make_unique<Conn>(pool);
      p.idx = std::move(idx);
      if (Status s = p.conn->Open(); s.ok()) {
        std::vector<Command> send;
        send.reserve(p.idx.size());
        for (std::size_t j : p.idx) {
          send.push_back(CommandOf(impl_->scripts, cmds[j], false));
          p.writes = p.writes || cmds[j].write;
        }
        p.sent = SendCounted(*p.conn, send, &p.error);
        if (p.sent == p.idx.size() && p.writes && o.wait_replicas > 0) {
          p.wait_sent = Send(*p.conn,
                             {Command{{"WAIT", std::to_string(o.wait_replicas),
                                       std::to_string(o.wait_timeout.count())}}},
                             &p.wait_error);
        }
      } else {
        p.error = s.message();
      }
      pipes.push_back(std::move(p));
    }
    for (Pipeline& p : pipes) {
      // Not sent whole: it did not run; the single call routes it (the node may be gone).
      for (std::size_t k = p.sent; k < p.idx.size(); ++k) alone.push_back(p.idx[k]);
      if (p.sent == 0) continue;
      std::vector<Reply> replies;
      replies.reserve(p.sent);
      const bool all = p.sent == p.idx.size() && Receive(*p.conn, p.sent, &replies, &p.error);
      std::vector<std::size_t> written;  // writes that ran (their WAIT decides)
      for (std::size_t k = 0; k < p.sent; ++k) {
        const BatchCommand& c = cmds[p.idx[k]];
        if (k >= replies.size()) {
          out[c.op] = BatchLostResult(c, p.conn->pool()->name() + ": " + p.error);
          continue;
        }
        const redisReply* r = replies[k].get();
        if (BatchRetryable(c, r)) {
          // Nothing ran: MOVED, ASK, TRYAGAIN, CLUSTERDOWN or NOSCRIPT. The single call sends
          // it again and follows the redirect.
          ErrorReply e = ClassifyError(ReplyText(r));
          if (e.kind == ErrorKind::kMoved) {
            impl_->moved.fetch_add(1);
            impl_->SetSlot(SlotOf(c.keys.doc), impl_->Pool(e.host, e.port));
          }
          alone.push_back(p.idx[k]);
          continue;
        }
        out[c.op] = BatchReplyResult(c, r);
        if (c.write && out[c.op].status.ok()) written.push_back(p.idx[k]);
      }
      if (p.writes && o.wait_replicas > 0) {
        // WAIT's reply is read even when no write ran (all failed their condition or were
        // redirected): left unread, it would be taken for the reply of the connection's next
        // command.
        std::string why =
            all ? WaitProblem(*p.conn, p.wait_sent, p.wait_error, o.wait_replicas,
                              o.wait_timeout)
                : "the write ran but the connection failed before WAIT answered: " + p.error;
        if (!why.empty()) {
          for (std::size_t j : written) {
            out[cmds[j].op] = BatchResult{};
            out[cmds[j].op].status = Status::Unknown(cmds[j].what + ": " + why);
          }
        }
      }
    }
    pipes.clear();  // connections back to their pools before the single calls take any
    std::sort(alone.begin(), alone.end());
    for (std::size_t j : alone) {
      std::vector<BatchResult> one = Store::Batch(ops.subspan(cmds[j].op, 1));
      out[cmds[j].op] = std::move(one.at(0));
    }
  } catch (const std::bad_alloc&) {
    // Somewhere in the middle: any write may have been sent (kUnknown), no read is known.
    for (std::size_t i = 0; i < ops.size(); ++i) {
      out[i] = BatchResult{};
      out[i].status =
          ops[i].is_write()
              ? Status::Unknown(
                    "redis-cluster: batch: out of memory; the write may or may not have landed")
              : Status::Unavailable("redis-cluster: batch: out of memory");
    }
  }
  return out;
}

Result<ScanPage> RedisClusterStore::Scan(std::string_view collection, std::string_view cursor,
                                         std::size_t limit) try {
  if (limit == 0) return Status::InvalidArgument("redis-cluster: scan: limit must be positive");
  if (!CollectionProblem(collection).empty()) return ScanPage{};
  const RedisClusterOptions& o = impl_->options;
  const std::string what = "redis-cluster: scan " + Quoted(collection);
  const std::size_t per_bucket = std::min<std::size_t>(limit, std::size_t{1} << 30);
  const std::string start = cursor.empty() ? std::string("-") : "(" + std::string(cursor);
  std::vector<std::pair<int, Command>> ranges;
  for (std::size_t b = 0; b < o.buckets; ++b) {
    std::string index = BucketTag(o.prefix, collection, b) + "i";
    int slot = SlotOf(index);
    ranges.emplace_back(slot, Command{{"ZRANGEBYLEX", std::move(index), start, "+", "LIMIT",
                                       "0", std::to_string(per_bucket)}});
  }
  auto replies = impl_->ReadMany(ranges, what);
  if (!replies.ok()) return replies.status();
  bool more = false;
  auto merged = MergeIndexReplies(*replies, per_bucket, limit, what, &more);
  if (!merged.ok()) return merged.status();
  std::vector<std::string> ids = std::move(merged).value();
  ScanPage page;
  if (ids.empty()) return page;
  std::vector<std::pair<int, Command>> gets;
  for (const std::string& id : ids) {
    std::string doc = KeysOf(o.prefix, o.buckets, Key{std::string(collection), id}).doc;
    int slot = SlotOf(doc);
    gets.emplace_back(slot, Command{{"HMGET", std::move(doc), "v", "r"}});
  }
  replies = impl_->ReadMany(gets, what);
  if (!replies.ok()) return replies.status();
  if (Status s = AddScannedDocuments(*replies, ids, collection, what, &page); !s.ok()) return s;
  if (more) page.next_cursor = ids.back();
  return page;
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis-cluster: scan: out of memory");
}

Result<CollectionPage> RedisClusterStore::ListCollections(std::string_view cursor,
                                                          std::size_t limit) try {
  if (limit == 0) {
    return Status::InvalidArgument("redis-cluster: list collections: limit must be positive");
  }
  const RedisClusterOptions& o = impl_->options;
  const std::string what = "redis-cluster: list collections";
  // The masters of the current slot map; SCAN sees only the node it runs on.
  std::vector<NodePool*> masters;
  {
    std::shared_lock<std::shared_mutex> lock(impl_->mu);
    for (NodePool* p : impl_->slots) {
      if (p != nullptr && std::find(masters.begin(), masters.end(), p) == masters.end()) {
        masters.push_back(p);
      }
    }
  }
  if (masters.empty()) return Status::Unavailable(what + ": no master is known");
  std::vector<std::string> names;
  for (NodePool* pool : masters) {
    Conn conn(pool);
    if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
    if (Status s = ScanCollectionNames(conn, o.prefix, o.buckets, what, &names); !s.ok()) {
      conn.MarkBroken();
      return s;
    }
  }
  return PageOfNames(std::move(names), cursor, limit);
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis-cluster: list collections: out of memory");
}

}  // namespace litetx
