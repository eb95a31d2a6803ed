#include "stores/redis_common.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include <boost/json/error.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>

#include "engine/json_text.h"
#include "litetx/document.h"

namespace litetx::redis {

namespace json = boost::json;

namespace {

// Every write script first checks that the keys it touches hold the Redis types of the layout
// (or nothing), so that no command inside it can fail after an earlier one wrote.
// KEYS: document, index, counter.
constexpr std::string_view kPrelude = R"lua(
local function wrong(k, t)
  local ty = redis.call('TYPE', k).ok
  if ty ~= 'none' and ty ~= t then return redis.error_reply('CORRUPT ' .. k .. ' holds a ' .. ty) end
  return nil
end
local e = wrong(KEYS[1], 'hash') or wrong(KEYS[2], 'zset') or wrong(KEYS[3], 'string')
if e then return e end
local function nextrev()
  redis.call('INCR', KEYS[3])
  return redis.call('GET', KEYS[3])
end
)lua";

// ARGV: id, JSON text. Returns the new revision as a decimal string.
constexpr std::string_view kCreateBody = R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('CONFLICT the key exists') end
local r = nextrev()
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'r', r)
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return r
)lua";

// ARGV: id, JSON text, expected revision (decimal). Returns the new revision.
constexpr std::string_view kReplaceBody = R"lua(
local cur = redis.call('HGET', KEYS[1], 'r')
if not cur then return redis.error_reply('CONFLICT the key is absent') end
if cur ~= ARGV[3] then return redis.error_reply('CONFLICT revision changed') end
local r = nextrev()
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'r', r)
return r
)lua";

// ARGV: id, expected revision (decimal). Returns 1.
constexpr std::string_view kEraseBody = R"lua(
local cur = redis.call('HGET', KEYS[1], 'r')
if not cur then return redis.error_reply('CONFLICT the key is absent') end
if cur ~= ARGV[2] then return redis.error_reply('CONFLICT revision changed') end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
)lua";

Result<StoredDocument> Decode(std::string_view text, std::string_view rev,
                              const std::string& where) {
  StoredDocument doc;
  if (!ParseRevision(rev, &doc.revision)) {
    return Status::Corruption("redis: revision of " + where + " is not a decimal: " +
                              Quoted(rev));
  }
  json::parse_options opt;
  opt.allow_invalid_utf8 = true;
  opt.max_depth = kMaxStoredNestingDepth;
  json::error_code ec;
  json::value jv = engine::ParseJson(text, ec, opt);
  if (ec == json::error::too_deep) {
    return Status::Corruption("redis: value of " + where +
                              " nests objects and arrays deeper than " +
                              std::to_string(kMaxStoredNestingDepth) + " levels");
  }
  if (ec) {
    return Status::Corruption("redis: value of " + where + " is not valid JSON: " + ec.message());
  }
  if (!jv.is_object()) {
    return Status::Corruption("redis: value of " + where + " is not a JSON object");
  }
  doc.value = std::move(jv.as_object());
  return doc;
}

bool StartsWithWord(std::string_view s, std::string_view word) {
  return s.starts_with(word) && (s.size() == word.size() || s[word.size()] == ' ');
}

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": the node named.
bool ParseRedirect(std::string_view err, std::string* host, int* port) {
  std::size_t sp = err.rfind(' ');
  if (sp == std::string_view::npos) return false;
  std::string_view addr = err.substr(sp + 1);
  std::size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos || colon + 1 >= addr.size()) return false;
  int p = 0;
  auto [ptr, ec] = std::from_chars(addr.data() + colon + 1, addr.data() + addr.size(), p);
  if (ec != std::errc() || ptr != addr.data() + addr.size() || p <= 0 || p > 65535) return false;
  *host = std::string(addr.substr(0, colon));
  *port = p;
  return true;
}

}  // namespace

std::string_view ReplyText(const redisReply* r) {
  return {r->str, static_cast<std::size_t>(r->len)};
}

std::string Quoted(std::string_view s) {
  std::string out = "'";
  out.append(s);
  out += "'";
  return out;
}

std::string Describe(const Key& key) { return Quoted(key.collection) + "/" + Quoted(key.id); }

std::string ContextError(const redisContext* c) {
  std::string msg = c->errstr[0] != '\0' ? c->errstr : "I/O error";
  if (c->err == REDIS_ERR_IO && errno != 0) msg += std::string(" (") + std::strerror(errno) + ")";
  return msg;
}

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

const char* ScriptName(ScriptId id) {
  switch (id) {
    case kCreate: return "create";
    case kReplace: return "replace";
    case kErase: return "erase";
    case kScripts: break;
  }
  return "?";
}

Scripts MakeScripts() {
  Scripts s;
  for (int i = 0; i < kScripts; ++i) {
    s.text[i] = std::string(kPrelude);
    switch (static_cast<ScriptId>(i)) {
      case kCreate: s.text[i] += kCreateBody; break;
      case kReplace: s.text[i] += kReplaceBody; break;
      case kErase: s.text[i] += kEraseBody; break;
      case kScripts: break;
    }
  }
  return s;
}

std::size_t BucketOf(std::string_view id, std::size_t buckets) {
  std::uint64_t h = 14695981039346656037ull;
  for (char ch : id) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;
  }
  return static_cast<std::size_t>(h % buckets);
}

std::string BucketTag(std::string_view prefix, std::string_view collection, std::size_t b) {
  std::string tag(prefix);
  tag += '{';
  tag += collection;
  tag += ':';
  tag += std::to_string(b);
  tag += '}';
  return tag;
}

Keys KeysOf(std::string_view prefix, std::size_t buckets, const Key& key) {
  std::string tag = BucketTag(prefix, key.collection, BucketOf(key.id, buckets));
  return Keys{tag + "d:" + key.id, tag + "i", tag + "r"};
}

std::string FormatKey(std::string_view prefix) { return std::string(prefix) + "format"; }

std::string FormatValue(std::size_t buckets) {
  return "litetx-redis 1 buckets=" + std::to_string(buckets);
}

std::string CollectionProblem(std::string_view collection) {
  if (collection.find('}') != std::string_view::npos) {
    return "collection names must not contain '}' (it would end the key's hash tag)";
  }
  return {};
}

bool ParseRevision(std::string_view text, Revision* out) {
  if (text.empty() || text.size() > 20) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && p == text.data() + text.size();
}

Result<std::optional<StoredDocument>> DecodeHmget(const redisReply* r, const std::string& where) {
  using Out = std::optional<StoredDocument>;
  if (r->type == REDIS_REPLY_ERROR) {
    return Status::Corruption("redis: reading " + where + ": " + std::string(ReplyText(r)));
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
    return Status::Corruption("redis: reading " + where + ": unexpected reply type " +
                              std::to_string(r->type));
  }
  const redisReply* v = r->element[0];
  const redisReply* rev = r->element[1];
  if (v->type == REDIS_REPLY_NIL && rev->type == REDIS_REPLY_NIL) return Out{};
  if (v->type != REDIS_REPLY_STRING || rev->type != REDIS_REPLY_STRING) {
    return Status::Corruption("redis: " + where + " lacks its value or its revision");
  }
  auto doc = Decode(ReplyText(v), ReplyText(rev), where);
  if (!doc.ok()) return doc.status();
  return Out{std::move(doc).value()};
}

Result<Revision> RevisionOf(const redisReply* reply, const Key& key) {
  Revision rev = 0;
  if (reply->type != REDIS_REPLY_STRING || !ParseRevision(ReplyText(reply), &rev)) {
    return Status::Corruption("redis: write of " + Describe(key) +
                              " answered with something other than a revision");
  }
  return rev;
}

Result<std::vector<std::string>> MergeIndexReplies(const std::vector<Reply>& replies,
                                                   std::size_t per_bucket, std::size_t limit,
                                                   const std::string& what, bool* more) {
  std::vector<std::string> ids;
  *more = false;
  for (const Reply& r : replies) {
    if (r->type == REDIS_REPLY_ERROR) {
      std::string_view err = ReplyText(r.get());
      if (ClassifyError(err).kind == ErrorKind::kRefused) {
        return Status::Unavailable(what + ": " + std::string(err));
      }
      return Status::Corruption(what + ": " + std::string(err));
    }
    if (r->type != REDIS_REPLY_ARRAY) {
      return Status::Corruption(what + ": an index answered with reply type " +
                                std::to_string(r->type));
    }
    if (r->elements == per_bucket) *more = true;  // that bucket may hold more
    for (std::size_t i = 0; i < r->elements; ++i) {
      if (r->element[i]->type != REDIS_REPLY_STRING) {
        return Status::Corruption(what + ": an index member is not a string");
      }
      ids.emplace_back(ReplyText(r->element[i]));
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.size() > limit) {
    ids.resize(limit);
    *more = true;
  }
  return ids;
}

Status AddScannedDocuments(const std::vector<Reply>& replies, const std::vector<std::string>& ids,
                           std::string_view collection, const std::string& what, ScanPage* page) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const redisReply* r = replies[i].get();
    if (r->type == REDIS_REPLY_ERROR && ClassifyError(ReplyText(r)).kind == ErrorKind::kRefused) {
      return Status::Unavailable(what + ": " + std::string(ReplyText(r)));
    }
    auto doc = DecodeHmget(r, Quoted(collection) + "/" + Quoted(ids[i]));
    if (!doc.ok()) return doc.status();
    if (!doc->has_value()) continue;  // erased since the index was read
    page->documents.emplace_back(ids[i], std::move(**doc));
  }
  return Status::Ok();
}

ErrorReply ClassifyError(std::string_view err) {
  ErrorReply e;
  e.text = std::string(err);
  if (StartsWithWord(err, "NOSCRIPT")) {
    e.kind = ErrorKind::kNoScript;
  } else if (StartsWithWord(err, "MOVED") && ParseRedirect(err, &e.host, &e.port)) {
    e.kind = ErrorKind::kMoved;
  } else if (StartsWithWord(err, "ASK") && ParseRedirect(err, &e.host, &e.port)) {
    e.kind = ErrorKind::kAsk;
  } else if (StartsWithWord(err, "TRYAGAIN")) {
    e.kind = ErrorKind::kTryAgain;
  } else if (StartsWithWord(err, "CLUSTERDOWN")) {
    e.kind = ErrorKind::kClusterDown;
  } else if (StartsWithWord(err, "CONFLICT")) {
    e.kind = ErrorKind::kConflict;
  } else if (err.find("CORRUPT ") != std::string_view::npos || StartsWithWord(err, "WRONGTYPE")) {
    e.kind = ErrorKind::kCorrupt;
  } else {
    for (std::string_view p : {"OOM", "LOADING", "BUSY", "MASTERDOWN", "READONLY", "NOREPLICAS",
                               "MISCONF", "NOAUTH", "NOPERM"}) {
      if (StartsWithWord(err, p)) e.kind = ErrorKind::kRefused;
    }
  }
  return e;
}

Status WriteErrorStatus(ScriptId id, const ErrorReply& e, const std::string& what) {
  switch (e.kind) {
    case ErrorKind::kConflict: {
      std::string_view rest = std::string_view(e.text).substr(std::min<std::size_t>(e.text.size(), 9));
      return Status::Conflict(std::string(ScriptName(id)) + ": " + std::string(rest));
    }
    case ErrorKind::kCorrupt: return Status::Corruption(what + ": " + e.text);
    case ErrorKind::kNoScript:
    case ErrorKind::kMoved:
    case ErrorKind::kAsk:
    case ErrorKind::kTryAgain:
    case ErrorKind::kClusterDown:
    case ErrorKind::kRefused:
      return Status::Unavailable(what + ": refused before running: " + e.text);
    case ErrorKind::kOther: break;
  }
  return Status::Unknown(what + ": the script failed, the write may or may not have landed: " +
                         e.text);
}

// ---------------------------------------------------------------------------------------------
// Connections

NodePool::NodePool(NodeConfig config)
    : config_(std::move(config)), name_(config_.host + ":" + std::to_string(config_.port)) {}

NodePool::~NodePool() {
  for (redisContext* c : idle_) redisFree(c);
}

void NodePool::Warn(const std::string& msg) const {
  if (config_.logger) config_.logger->warn("{}", msg);
}

Result<redisContext*> NodePool::Connect() const {
  redisContext* c = redisConnectWithTimeout(config_.host.c_str(), config_.port,
                                            ToTimeval(config_.connect_timeout));
  if (c == nullptr) return Status::Unavailable("redis: cannot allocate a connection");
  if (c->err != 0) {
    std::string msg = "redis: cannot connect to " + name_ + ": " + ContextError(c);
    redisFree(c);
    return Status::Unavailable(std::move(msg));
  }
  if (redisSetTimeout(c, ToTimeval(config_.command_timeout)) != REDIS_OK) {
    std::string msg = "redis: cannot set the command timeout: " + ContextError(c);
    redisFree(c);
    return Status::Unavailable(std::move(msg));
  }
  if (config_.db != 0) {
    std::string db = std::to_string(config_.db);
    Reply r(static_cast<redisReply*>(redisCommand(c, "SELECT %s", db.c_str())));
    if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
      std::string msg = "redis: SELECT " + db + " on " + name_ + " failed: " +
                        (r == nullptr ? ContextError(c) : std::string(ReplyText(r.get())));
      redisFree(c);
      return Status::Unavailable(std::move(msg));
    }
  }
  return c;
}

namespace {

// Whether the peer of an idle connection has closed it (or reset it, or sent something
// unasked). A command sent on such a connection would fail after being "sent", which for a
// write means an unknown outcome although the server never saw it: such connections are
// closed before use instead.
bool PeerGone(const redisContext* c) {
  char byte;
  ssize_t n = ::recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;                                      // orderly close
  if (n > 0) return true;                                       // bytes nobody asked for
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset, ...
}

}  // namespace

Result<redisContext*> NodePool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    freed_.wait(lock, [&] { return !idle_.empty() || open_ < config_.pool_size; });
    if (idle_.empty()) break;
    redisContext* c = idle_.back();
    idle_.pop_back();
    if (!PeerGone(c)) return c;
    --open_;
    lock.unlock();
    Warn("redis " + name_ + ": the server closed an idle connection; opening another");
    redisFree(c);
    lock.lock();
  }
  ++open_;
  lock.unlock();
  auto c = Connect();
  if (!c.ok()) {
    lock.lock();
    --open_;
    freed_.notify_one();
  }
  return c;
}

void NodePool::Release(redisContext* c, bool broken) {
  broken = broken || c->err != 0;
  if (broken) {
    Warn("redis " + name_ + ": closing a connection after an error: " + ContextError(c));
    redisFree(c);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (broken) {
    --open_;
  } else {
    idle_.push_back(c);
  }
  freed_.notify_one();
}

void NodePool::Adopt(redisContext* c) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(c);
  ++open_;
  freed_.notify_one();
}

Conn::~Conn() {
  if (c_ != nullptr) pool_->Release(c_, broken_);
}

Status Conn::Open() {
  auto c = pool_->Acquire();
  if (!c.ok()) return c.status();
  c_ = *c;
  return Status::Ok();
}

namespace {

// Appends `cmd` to the context's output buffer (nothing is written to the socket yet).
bool Append(redisContext* c, const Command& cmd) {
  std::vector<const char*> argv;
  std::vector<std::size_t> argvlen;
  for (const std::string& a : cmd.args) {
    argv.push_back(a.data());
    argvlen.push_back(a.size());
  }
  return redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(),
                                argvlen.data()) == REDIS_OK;
}

}  // namespace

bool Send(Conn& conn, const std::vector<Command>& commands, std::string* error) {
  redisContext* c = conn.get();
  for (const Command& cmd : commands) {
    if (!Append(c, cmd)) {
      *error = ContextError(c);
      conn.MarkBroken();
      return false;
    }
  }
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      *error = ContextError(c);
      conn.MarkBroken();
      return false;
    }
  }
  return true;
}

std::size_t SendCounted(Conn& conn, const std::vector<Command>& commands, std::string* error) {
  redisContext* c = conn.get();
  // Where each command ends in the output buffer, counted from the first byte of this call.
  std::vector<std::size_t> ends;
  ends.reserve(commands.size());
  const std::size_t before = sdslen(c->obuf);
  for (const Command& cmd : commands) {
    if (!Append(c, cmd)) {
      *error = ContextError(c);
      conn.MarkBroken();
      return 0;  // nothing was written out yet
    }
    ends.push_back(sdslen(c->obuf) - before);
  }
  const std::size_t total = sdslen(c->obuf) - before;
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      *error = ContextError(c);
      conn.MarkBroken();
      // redisBufferWrite drops the bytes the kernel took from the front of the buffer.
      const std::size_t left = std::min(sdslen(c->obuf), total);
      const std::size_t written = total - left;
      return static_cast<std::size_t>(
          std::upper_bound(ends.begin(), ends.end(), written) - ends.begin());
    }
  }
  return commands.size();
}

bool Receive(Conn& conn, std::size_t n, std::vector<Reply>* out, std::string* error) {
  redisContext* c = conn.get();
  for (std::size_t i = 0; i < n; ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
      *error = ContextError(c);
      conn.MarkBroken();
      return false;
    }
    out->emplace_back(static_cast<redisReply*>(raw));
  }
  return true;
}

std::vector<Reply> Exchange(Conn& conn, const std::vector<Command>& commands, Stage* stage,
                            std::string* error) {
  std::vector<Reply> replies;
  if (!Send(conn, commands, error)) {
    *stage = Stage::kBeforeSent;
    return {};
  }
  if (!Receive(conn, commands.size(), &replies, error)) {
    *stage = Stage::kAfterSent;
    return {};
  }
  *stage = Stage::kOk;
  return replies;
}

Status LoadScripts(redisContext* c, Scripts* scripts) {
  for (int i = 0; i < kScripts; ++i) {
    Reply r(static_cast<redisReply*>(
        redisCommand(c, "SCRIPT LOAD %b", scripts->text[i].data(), scripts->text[i].size())));
    if (r == nullptr || r->type != REDIS_REPLY_STRING) {
      return Status::Unavailable(std::string("redis: SCRIPT LOAD failed: ") +
                                 (r == nullptr ? ContextError(c) : std::string(ReplyText(r.get()))));
    }
    scripts->sha[i] = std::string(ReplyText(r.get()));
  }
  return Status::Ok();
}

std::string TimeoutProblem(std::chrono::milliseconds connect_timeout,
                           std::chrono::milliseconds command_timeout, int wait_replicas,
                           std::chrono::milliseconds wait_timeout) {
  if (connect_timeout.count() <= 0) return "connect_timeout must be positive";
  if (command_timeout.count() <= 0) return "command_timeout must be positive";
  if (wait_replicas < 0) return "wait_replicas must not be negative";
  if (wait_replicas > 0 && wait_timeout.count() <= 0) {
    return "wait_timeout must be positive (WAIT 0 waits forever)";
  }
  if (wait_replicas > 0 && wait_timeout >= command_timeout) {
    return "wait_timeout must be shorter than command_timeout";
  }
  return {};
}

Status CheckEvictionPolicy(redisContext* c, const NodePool& pool) {
  Reply r(static_cast<redisReply*>(redisCommand(c, "CONFIG GET maxmemory-policy")));
  if (r == nullptr) {
    return Status::Unavailable("redis: " + pool.name() + ": CONFIG GET: " + ContextError(c));
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[1]->type != REDIS_REPLY_STRING) {
    pool.Warn("redis " + pool.name() +
              ": cannot read maxmemory-policy (CONFIG GET refused); it must not be allkeys-*, "
              "which would evict litetx's keys");
    return Status::Ok();
  }
  std::string_view policy = ReplyText(r->element[1]);
  if (policy.starts_with("allkeys-")) {
    return Status::InvalidArgument(
        "redis: " + pool.name() + " has maxmemory-policy " + std::string(policy) +
        ": it may evict documents and revision counters (revisions would be reused); use "
        "noeviction (or a volatile-* policy: litetx's keys never expire)");
  }
  return Status::Ok();
}

Status CheckFormat(redisContext* c, std::string_view prefix, std::size_t buckets,
                   ErrorReply* redirect, bool asking) {
  const std::string key = FormatKey(prefix);
  const std::string want = FormatValue(buckets);
  auto ask = [&] {
    if (asking) Reply(static_cast<redisReply*>(redisCommand(c, "ASKING")));
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    ask();
    Reply r(static_cast<redisReply*>(redisCommand(c, "GET %b", key.data(), key.size())));
    if (r == nullptr) {
      return Status::Unavailable("redis: reading " + Quoted(key) + ": " + ContextError(c));
    }
    if (r->type == REDIS_REPLY_ERROR) {
      ErrorReply e = ClassifyError(ReplyText(r.get()));
      if (e.kind == ErrorKind::kMoved || e.kind == ErrorKind::kAsk) {
        *redirect = e;
        return Status::Ok();
      }
      if (e.kind == ErrorKind::kCorrupt) {
        return Status::InvalidArgument("redis: the key " + Quoted(key) +
                                       " is not litetx's format marker (it holds another type); "
                                       "choose another prefix");
      }
      return Status::Unavailable("redis: reading " + Quoted(key) + ": " + e.text);
    }
    if (r->type == REDIS_REPLY_STRING) {
      std::string_view have = ReplyText(r.get());
      if (have == want) return Status::Ok();
      if (have.starts_with("litetx-redis 1 buckets=")) {
        return Status::InvalidArgument("redis: the data under prefix " + Quoted(prefix) +
                                       " was written with " + std::string(have.substr(15)) +
                                       ", not buckets=" + std::to_string(buckets));
      }
      return Status::InvalidArgument("redis: the key " + Quoted(key) +
                                     " is not litetx's format marker (it holds " + Quoted(have) +
                                     "); choose another prefix");
    }
    if (r->type != REDIS_REPLY_NIL) {
      return Status::Corruption("redis: reading " + Quoted(key) + ": unexpected reply type");
    }
    ask();
    Reply set(static_cast<redisReply*>(redisCommand(c, "SET %b %b NX", key.data(), key.size(),
                                                    want.data(), want.size())));
    if (set == nullptr) {
      return Status::Unavailable("redis: writing " + Quoted(key) + ": " + ContextError(c));
    }
    if (set->type == REDIS_REPLY_STATUS) return Status::Ok();
    if (set->type == REDIS_REPLY_ERROR) {
      return Status::Unavailable("redis: writing " + Quoted(key) + ": " +
                                 std::string(ReplyText(set.get())));
    }
    // NIL: another process wrote it first; read it again.
  }
  return Status::Unavailable("redis: the format marker " + Quoted(key) + " keeps changing");
}

Command ScriptCommand(const Scripts& scripts, const WriteCall& call) {
  Command cmd;
  cmd.args.reserve(6 + call.argv->size());
  cmd.args = {call.eval ? "EVAL" : "EVALSHA",
              call.eval ? scripts.text[call.id] : scripts.sha[call.id], "3", call.keys->doc,
              call.keys->index, call.keys->counter};
  cmd.args.insert(cmd.args.end(), call.argv->begin(), call.argv->end());
  return cmd;
}

Result<Reply> RunWrite(Conn& conn, const Scripts& scripts, const WriteCall& call,
                       const std::string& what) {
  Command cmd = ScriptCommand(scripts, call);
  std::vector<Command> first;
  if (call.asking) first.push_back(Command{{"ASKING"}});
  first.push_back(std::move(cmd));
  std::string error;
  // The script is the last command of this send: if it fails, the script was not received
  // whole and cannot have run.
  if (!Send(conn, first, &error)) return Status::Unavailable(what + ": not sent: " + error);
  const bool wait = call.wait_replicas > 0;
  bool wait_sent = false;
  if (wait) {
    Command w{{"WAIT", std::to_string(call.wait_replicas),
               std::to_string(call.wait_timeout.count())}};
    wait_sent = Send(conn, {w}, &error);
  }
  std::vector<Reply> replies;
  if (!Receive(conn, first.size(), &replies, &error)) {
    return Status::Unknown(what + ": the reply was lost, the write may or may not have landed: " +
                           error);
  }
  Reply script = std::move(replies.back());
  if (!wait) return script;
  if (!wait_sent) {
    // The script's reply came; WAIT was never asked. Without a count, the write's durability
    // on the replicas is not known.
    if (script->type == REDIS_REPLY_ERROR) return script;
    return Status::Unknown(what + ": the write ran but WAIT could not be sent: " + error);
  }
  replies.clear();
  if (!Receive(conn, 1, &replies, &error)) {
    if (script->type == REDIS_REPLY_ERROR) return script;
    return Status::Unknown(what + ": the write ran but the reply to WAIT was lost: " + error);
  }
  if (script->type == REDIS_REPLY_ERROR) return script;  // nothing written: WAIT does not matter
  const redisReply* w = replies[0].get();
  if (w->type != REDIS_REPLY_INTEGER) {
    return Status::Unknown(what + ": the write ran but WAIT answered " +
                           (w->type == REDIS_REPLY_ERROR ? std::string(ReplyText(w))
                                                         : std::string("an unexpected type")));
  }
  if (w->integer < call.wait_replicas) {
    return Status::Unknown(what + ": the write ran on the master but only " +
                           std::to_string(w->integer) + " of " +
                           std::to_string(call.wait_replicas) + " replicas acknowledged it within " +
                           std::to_string(call.wait_timeout.count()) +
                           " ms; it may be lost if the master fails");
  }
  return script;
}

std::vector<BatchCommand> PrepareBatch(std::span<const BatchOp> ops, std::string_view store,
                                       std::string_view prefix, std::size_t buckets,
                                       std::vector<BatchResult>& out) {
  std::vector<BatchCommand> cmds;
  cmds.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    BatchCommand c;
    if (PrepareBatchOp(ops[i], i, store, prefix, buckets, &c, &out[i])) {
      cmds.push_back(std::move(c));
    }
  }
  return cmds;
}

bool PrepareBatchOp(const BatchOp& op, std::size_t index, std::string_view store,
                    std::string_view prefix, std::size_t buckets, BatchCommand* cmd,
                    BatchResult* result) {
  const char* name = op.type == BatchOp::Type::kGet      ? "get"
                     : op.type == BatchOp::Type::kCreate  ? "create"
                     : op.type == BatchOp::Type::kReplace ? "replace"
                                                          : "erase";
  cmd->op = index;
  cmd->where = Describe(op.key);
  cmd->what = std::string(store) + ": " + name + " " + cmd->where;
  const std::string bad_collection = CollectionProblem(op.key.collection);
  switch (op.type) {
    case BatchOp::Type::kGet:
      if (!bad_collection.empty()) return false;  // such a key cannot exist: absent
      break;
    case BatchOp::Type::kErase:
      if (!bad_collection.empty()) {
        result->status = Status::Conflict("erase: the key is absent");
        return false;
      }
      cmd->write = true;
      cmd->id = kErase;
      cmd->argv = {op.key.id, std::to_string(op.expected)};
      break;
    case BatchOp::Type::kCreate:
    case BatchOp::Type::kReplace: {
      std::string why = bad_collection;
      if (why.empty() && op.value == nullptr) why = "batch operation without a value";
      if (why.empty()) why = engine::StoredValueProblem(*op.value);
      if (!why.empty()) {
        result->status = Status::InvalidArgument(cmd->what + ": " + why);
        return false;
      }
      cmd->write = true;
      cmd->id = op.type == BatchOp::Type::kCreate ? kCreate : kReplace;
      cmd->argv = {op.key.id, json::serialize(*op.value)};
      if (op.type == BatchOp::Type::kReplace) cmd->argv.push_back(std::to_string(op.expected));
      break;
    }
  }
  cmd->keys = KeysOf(prefix, buckets, op.key);
  return true;
}

Command CommandOf(const Scripts& scripts, const BatchCommand& cmd, bool eval) {
  if (!cmd.write) return Command{{"HMGET", cmd.keys.doc, "v", "r"}};
  WriteCall call{cmd.id, &cmd.keys, &cmd.argv};
  call.eval = eval;
  return ScriptCommand(scripts, call);
}

BatchResult BatchReplyResult(const BatchCommand& cmd, const redisReply* reply) {
  BatchResult res;
  if (!cmd.write) {
    if (reply->type == REDIS_REPLY_ERROR &&
        ClassifyError(ReplyText(reply)).kind == ErrorKind::kRefused) {
      res.status = Status::Unavailable(cmd.what + ": " + std::string(ReplyText(reply)));
      return res;
    }
    auto doc = DecodeHmget(reply, cmd.where);
    if (doc.ok()) {
      res.document = std::move(doc).value();
    } else {
      res.status = doc.status();
    }
    return res;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    res.status = WriteErrorStatus(cmd.id, ClassifyError(ReplyText(reply)), cmd.what);
    return res;
  }
  if (cmd.id == kErase) {
    if (reply->type != REDIS_REPLY_INTEGER || reply->integer != 1) {
      res.status = Status::Corruption(cmd.what + ": unexpected reply");
    }
    return res;
  }
  Revision rev = 0;
  if (reply->type != REDIS_REPLY_STRING || !ParseRevision(ReplyText(reply), &rev)) {
    res.status = Status::Corruption(cmd.what + ": answered with something other than a revision");
    return res;
  }
  res.revision = rev;
  return res;
}

BatchResult BatchLostResult(const BatchCommand& cmd, const std::string& error) {
  BatchResult res;
  res.status = cmd.write ? Status::Unknown(cmd.what +
                                           ": the reply was lost, the write may or may not have "
                                           "landed: " + error)
                         : Status::Unavailable(cmd.what + ": " + error);
  return res;
}

bool BatchRetryable(const BatchCommand& cmd, const redisReply* reply) {
  if (reply->type != REDIS_REPLY_ERROR) return false;
  switch (ClassifyError(ReplyText(reply)).kind) {
    case ErrorKind::kMoved:
    case ErrorKind::kAsk:
    case ErrorKind::kTryAgain:
    case ErrorKind::kClusterDown:
      return true;
    case ErrorKind::kNoScript:
      return cmd.write;
    default:
      return false;
  }
}

std::string WaitProblem(Conn& conn, bool wait_sent, const std::string& send_error, int replicas,
                        std::chrono::milliseconds timeout) {
  if (!wait_sent) return "the write ran but WAIT could not be sent: " + send_error;
  std::vector<Reply> w;
  std::string error;
  if (!Receive(conn, 1, &w, &error)) {
    return "the write ran but the reply to WAIT was lost: " + error;
  }
  if (w[0]->type != REDIS_REPLY_INTEGER) {
    return "the write ran but WAIT answered " +
           (w[0]->type == REDIS_REPLY_ERROR ? std::string(ReplyText(w[0].get()))
                                            : std::string("an unexpected type"));
  }
  if (w[0]->integer < replicas) {
    return "the write ran on the master but only " + std::to_string(w[0]->integer) + " of " +
           std::to_string(replicas) + " replicas acknowledged it within " +
           std::to_string(timeout.count()) + " ms; it may be lost if the master fails";
  }
  return {};
}

std::optional<std::string> IndexKeyCollection(std::string_view key, std::string_view prefix,
                                              std::size_t buckets) {
  if (!key.starts_with(prefix)) return std::nullopt;
  std::string_view rest = key.substr(prefix.size());
  if (rest.empty() || rest.front() != '{') return std::nullopt;
  // Collection names hold no '}', so the first one closes the tag; a document key's id may
  // end in "}i" but its tag is followed by "d:".
  std::size_t close = rest.find('}');
  if (close == std::string_view::npos || rest.substr(close) != "}i") return std::nullopt;
  std::string_view inside = rest.substr(1, close - 1);
  std::size_t colon = inside.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view digits = inside.substr(colon + 1);
  std::size_t b = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), b);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || b >= buckets ||
      std::to_string(b) != digits) {
    return std::nullopt;
  }
  return std::string(inside.substr(0, colon));
}

std::string IndexKeyPattern(std::string_view prefix) {
  std::string pattern;
  for (char ch : prefix) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') pattern += '\\';
    pattern += ch;
  }
  pattern += "{*}i";
  return pattern;
}

CollectionPage PageOfNames(std::vector<std::string> names, std::string_view cursor,
                           std::size_t limit) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  CollectionPage page;
  auto it = cursor.empty() ? names.begin()
                           : std::upper_bound(names.begin(), names.end(), cursor,
                                              [](std::string_view c, const std::string& n) {
                                                return c < n;
                                              });
  for (; it != names.end(); ++it) {
    if (page.names.size() == limit) {
      page.next_cursor = page.names.back();
      break;
    }
    page.names.push_back(*it);
  }
  return page;
}

Status ScanCollectionNames(Conn& conn, std::string_view prefix, std::size_t buckets,
                           const std::string& what, std::vector<std::string>* names) {
  const std::string pattern = IndexKeyPattern(prefix);
  std::string cursor = "0";
  // SCAN ends when the server hands back cursor 0; each step reads about COUNT keys.
  do {
    Stage stage;
    std::string error;
    auto replies = Exchange(
        conn, {Command{{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}}}, &stage, &error);
    if (stage != Stage::kOk) {
      return Status::Unavailable(what + ": " + conn.pool()->name() + ": " + error);
    }
    const redisReply* r = replies.front().get();
    if (r->type == REDIS_REPLY_ERROR) {
      return Status::Unavailable(what + ": " + conn.pool()->name() + ": " +
                                 std::string(ReplyText(r)));
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
      return Status::Unavailable(what + ": " + conn.pool()->name() +
                                 ": SCAN answered with an unexpected reply");
    }
    cursor = std::string(ReplyText(r->element[0]));
    const redisReply* keys = r->element[1];
    for (std::size_t i = 0; i < keys->elements; ++i) {
      if (keys->element[i]->type != REDIS_REPLY_STRING) continue;
      if (auto name = IndexKeyCollection(ReplyText(keys->element[i]), prefix, buckets)) {
        names->push_back(std::move(*name));
      }
    }
  } while (cursor != "0");
  return Status::Ok();
}

}  // namespace litetx::redis
