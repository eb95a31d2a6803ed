#include "litetx/redis_store.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <boost/json/error.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "engine/json_text.h"
#include "litetx/document.h"

namespace litetx {

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

enum ScriptId { kCreate = 0, kReplace = 1, kErase = 2, kScripts = 3 };

std::string ScriptText(ScriptId id) {
  std::string s(kPrelude);
  switch (id) {
    case kCreate: s += kCreateBody; break;
    case kReplace: s += kReplaceBody; break;
    case kErase: s += kEraseBody; break;
    case kScripts: break;
  }
  return s;
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

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
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

std::string_view ReplyText(const redisReply* r) {
  return {r->str, static_cast<std::size_t>(r->len)};
}

// Why `value` cannot be stored as JSON text that reads back as it is, or empty.
std::string ValueProblem(const json::object& value) {
  switch (engine::CheckJson(value, kMaxStoredNestingDepth, /*finite_only=*/true)) {
    case engine::JsonProblem::kNone: return {};
    case engine::JsonProblem::kTooDeep:
      return "value nests objects and arrays deeper than " +
             std::to_string(kMaxStoredNestingDepth) + " levels";
    case engine::JsonProblem::kNotFinite:
      return "value holds a number that is not finite (NaN or an infinity)";
  }
  return {};
}

bool ParseRevision(std::string_view text, Revision* out) {
  if (text.empty() || text.size() > 20) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && p == text.data() + text.size();
}

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
    return Status::Corruption("redis: value of " + where + " nests objects and arrays deeper than " +
                              std::to_string(kMaxStoredNestingDepth) + " levels");
  }
  if (ec) return Status::Corruption("redis: value of " + where + " is not valid JSON: " + ec.message());
  if (!jv.is_object()) return Status::Corruption("redis: value of " + where + " is not a JSON object");
  doc.value = std::move(jv.as_object());
  return doc;
}

// Decodes an HMGET v r reply: nullopt if both are nil.
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

// Server error replies that mean the command was refused before it ran.
bool RefusedBeforeRunning(std::string_view err) {
  for (std::string_view p : {"OOM", "LOADING", "BUSY", "MASTERDOWN", "READONLY", "NOREPLICAS",
                             "MISCONF", "CLUSTERDOWN", "TRYAGAIN", "NOAUTH", "NOPERM"}) {
    if (err.starts_with(p) && (err.size() == p.size() || err[p.size()] == ' ')) return true;
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Connections

struct RedisStore::Impl {
  RedisOptions options;
  std::string scripts[kScripts];
  std::string shas[kScripts];

  std::mutex mu;
  std::condition_variable freed;
  std::vector<redisContext*> idle;  // guarded by mu
  std::size_t open = 0;             // guarded by mu: idle + in use

  ~Impl() {
    for (redisContext* c : idle) redisFree(c);
  }

  void Warn(const std::string& msg) const {
    if (options.logger) options.logger->warn("{}", msg);
  }

  // A new connected context (SELECT done), or kUnavailable.
  Result<redisContext*> Connect() const {
    redisContext* c = redisConnectWithTimeout(options.host.c_str(), options.port,
                                              ToTimeval(options.connect_timeout));
    if (c == nullptr) return Status::Unavailable("redis: cannot allocate a connection");
    if (c->err != 0) {
      std::string msg = "redis: cannot connect to " + options.host + ":" +
                        std::to_string(options.port) + ": " + ContextError(c);
      redisFree(c);
      return Status::Unavailable(std::move(msg));
    }
    if (redisSetTimeout(c, ToTimeval(options.command_timeout)) != REDIS_OK) {
      std::string msg = "redis: cannot set the command timeout: " + ContextError(c);
      redisFree(c);
      return Status::Unavailable(std::move(msg));
    }
    if (options.db != 0) {
      std::string db = std::to_string(options.db);
      Reply r(static_cast<redisReply*>(redisCommand(c, "SELECT %s", db.c_str())));
      if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
        std::string msg = "redis: SELECT " + db + " failed: " +
                          (r == nullptr ? ContextError(c) : std::string(ReplyText(r.get())));
        redisFree(c);
        return Status::Unavailable(std::move(msg));
      }
    }
    return c;
  }

  Result<redisContext*> Acquire() {
    std::unique_lock<std::mutex> lock(mu);
    freed.wait(lock, [&] { return !idle.empty() || open < options.pool_size; });
    if (!idle.empty()) {
      redisContext* c = idle.back();
      idle.pop_back();
      return c;
    }
    ++open;
    lock.unlock();
    auto c = Connect();
    if (!c.ok()) {
      lock.lock();
      --open;
      freed.notify_one();
    }
    return c;
  }

  // Returns `c` to the pool, or closes it if it saw an error (`broken`, or c->err).
  void Release(redisContext* c, bool broken) {
    broken = broken || c->err != 0;
    if (broken) {
      Warn("redis " + options.host + ":" + std::to_string(options.port) +
           ": closing a connection after an error: " + ContextError(c));
      redisFree(c);
    }
    std::lock_guard<std::mutex> lock(mu);
    if (broken) {
      --open;
    } else {
      idle.push_back(c);
    }
    freed.notify_one();
  }
};

namespace {

// One pooled connection for the duration of a call.
class Conn {
 public:
  explicit Conn(RedisStore::Impl* impl) : impl_(impl) {}
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    if (c_ != nullptr) impl_->Release(c_, broken_);
  }
  Status Open() {
    auto c = impl_->Acquire();
    if (!c.ok()) return c.status();
    c_ = *c;
    return Status::Ok();
  }
  redisContext* get() const { return c_; }
  void MarkBroken() { broken_ = true; }

 private:
  RedisStore::Impl* impl_;
  redisContext* c_ = nullptr;
  bool broken_ = false;
};

struct Command {
  std::vector<std::string> args;
};

// Where a pipelined exchange failed.
enum class Stage { kOk, kBeforeSent, kAfterSent };

// Sends `commands` in one write and reads one reply per command. On an I/O error, `*stage`
// says whether every byte had been handed to the kernel (the server may have run them).
std::vector<Reply> Exchange(Conn& conn, const std::vector<Command>& commands, Stage* stage,
                            std::string* error) {
  redisContext* c = conn.get();
  std::vector<Reply> replies;
  for (const Command& cmd : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> argvlen;
    for (const std::string& a : cmd.args) {
      argv.push_back(a.data());
      argvlen.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), argvlen.data()) !=
        REDIS_OK) {
      *stage = Stage::kBeforeSent;
      *error = ContextError(c);
      conn.MarkBroken();
      return {};
    }
  }
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      // A command the server received only in part is never run.
      *stage = Stage::kBeforeSent;
      *error = ContextError(c);
      conn.MarkBroken();
      return {};
    }
  }
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
      *stage = Stage::kAfterSent;
      *error = ContextError(c);
      conn.MarkBroken();
      return {};
    }
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  *stage = Stage::kOk;
  return replies;
}

struct Keys {
  std::string doc, index, counter;
};

Keys KeysOf(const RedisOptions& o, const Key& key) {
  std::string tag = o.prefix + "{" + key.collection + ":" +
                    std::to_string(RedisStore::BucketOf(key.id, o.buckets)) + "}";
  return Keys{tag + "d:" + key.id, tag + "i", tag + "r"};
}

std::string BucketTag(const RedisOptions& o, std::string_view collection, std::size_t b) {
  return o.prefix + "{" + std::string(collection) + ":" + std::to_string(b) + "}";
}

// Runs write script `id`. Returns its reply (not an error reply), or the Status.
Result<Reply> RunScript(RedisStore::Impl& impl, ScriptId id, const Key& key,
                        std::vector<std::string> argv) {
  const std::string what = std::string("redis: ") + ScriptName(id) + " " + Describe(key);
  Conn conn(&impl);
  if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
  Keys k = KeysOf(impl.options, key);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Command cmd;
    cmd.args = {attempt == 0 ? "EVALSHA" : "EVAL",
                attempt == 0 ? impl.shas[id] : impl.scripts[id], "3", k.doc, k.index, k.counter};
    cmd.args.insert(cmd.args.end(), argv.begin(), argv.end());
    Stage stage;
    std::string error;
    auto replies = Exchange(conn, {cmd}, &stage, &error);
    if (stage == Stage::kBeforeSent) return Status::Unavailable(what + ": not sent: " + error);
    if (stage == Stage::kAfterSent) {
      return Status::Unknown(what + ": the reply was lost, the write may or may not have landed: " +
                             error);
    }
    Reply r = std::move(replies[0]);
    if (r->type != REDIS_REPLY_ERROR) return r;
    std::string_view err = ReplyText(r.get());
    if (attempt == 0 && err.starts_with("NOSCRIPT")) {
      impl.Warn(what + ": the server lost the script (NOSCRIPT); sending it again");
      continue;  // nothing ran
    }
    if (err.starts_with("CONFLICT")) return Status::Conflict(std::string(ScriptName(id)) + ": " + std::string(err.substr(std::min<std::size_t>(err.size(), 9))));
    if (err.starts_with("CORRUPT") || err.find("CORRUPT ") != std::string_view::npos) {
      return Status::Corruption(what + ": " + std::string(err));
    }
    if (RefusedBeforeRunning(err)) return Status::Unavailable(what + ": " + std::string(err));
    return Status::Unknown(what + ": the script failed, the write may or may not have landed: " +
                           std::string(err));
  }
  return Status::Unknown(what + ": unreachable");
}

Result<Revision> RevisionReply(Result<Reply> r, const Key& key) {
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  Revision rev = 0;
  if (reply->type != REDIS_REPLY_STRING || !ParseRevision(ReplyText(reply), &rev)) {
    return Status::Corruption("redis: write of " + Describe(key) +
                              " answered with something other than a revision");
  }
  return rev;
}

std::string CollectionProblem(std::string_view collection) {
  if (collection.find('}') != std::string_view::npos) {
    return "collection names must not contain '}' (it would end the key's hash tag)";
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RedisStore

std::size_t RedisStore::BucketOf(std::string_view id, std::size_t buckets) {
  std::uint64_t h = 14695981039346656037ull;
  for (char ch : id) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;
  }
  return static_cast<std::size_t>(h % buckets);
}

Result<std::shared_ptr<RedisStore>> RedisStore::Open(RedisOptions options) try {
  if (options.buckets == 0) return Status::InvalidArgument("redis: buckets must be at least 1");
  if (options.pool_size == 0) return Status::InvalidArgument("redis: pool_size must be at least 1");
  if (options.prefix.find_first_of("{}") != std::string::npos) {
    return Status::InvalidArgument("redis: the prefix must not contain '{' or '}'");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  auto c = impl->Connect();
  if (!c.ok()) return c.status();
  redisContext* ctx = *c;
  for (int i = 0; i < kScripts; ++i) {
    impl->scripts[i] = ScriptText(static_cast<ScriptId>(i));
    Reply r(static_cast<redisReply*>(
        redisCommand(ctx, "SCRIPT LOAD %b", impl->scripts[i].data(), impl->scripts[i].size())));
    if (r == nullptr || r->type != REDIS_REPLY_STRING) {
      std::string msg = std::string("redis: SCRIPT LOAD failed: ") +
                        (r == nullptr ? ContextError(ctx) : std::string(ReplyText(r.get())));
      redisFree(ctx);
      return Status::Unavailable(std::move(msg));
    }
    impl->shas[i] = std::string(ReplyText(r.get()));
  }
  impl->idle.push_back(ctx);
  impl->open = 1;
  return std::shared_ptr<RedisStore>(new RedisStore(std::move(impl)));
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: open: out of memory");
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisStore::~RedisStore() = default;

const RedisOptions& RedisStore::options() const { return impl_->options; }

Result<std::optional<StoredDocument>> RedisStore::Get(const Key& key) try {
  using Out = std::optional<StoredDocument>;
  if (!CollectionProblem(key.collection).empty()) return Out{};
  const std::string what = "redis: get " + Describe(key);
  Conn conn(impl_.get());
  if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
  Keys k = KeysOf(impl_->options, key);
  Stage stage;
  std::string error;
  auto replies = Exchange(conn, {Command{{"HMGET", k.doc, "v", "r"}}}, &stage, &error);
  if (stage != Stage::kOk) return Status::Unavailable(what + ": " + error);
  if (replies[0]->type == REDIS_REPLY_ERROR && RefusedBeforeRunning(ReplyText(replies[0].get()))) {
    return Status::Unavailable(what + ": " + std::string(ReplyText(replies[0].get())));
  }
  return DecodeHmget(replies[0].get(), Describe(key));
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: get: out of memory");
}

Result<Revision> RedisStore::Create(const Key& key, const boost::json::object& value) try {
  if (std::string why = CollectionProblem(key.collection); !why.empty()) {
    return Status::InvalidArgument("redis: create " + Describe(key) + ": " + why);
  }
  if (std::string why = ValueProblem(value); !why.empty()) {
    return Status::InvalidArgument("redis: create " + Describe(key) + ": " + why);
  }
  return RevisionReply(RunScript(*impl_, kCreate, key, {key.id, json::serialize(value)}), key);
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: create: out of memory");
}

Result<Revision> RedisStore::Replace(const Key& key, Revision expected,
                                     const boost::json::object& value) try {
  if (std::string why = CollectionProblem(key.collection); !why.empty()) {
    return Status::InvalidArgument("redis: replace " + Describe(key) + ": " + why);
  }
  if (std::string why = ValueProblem(value); !why.empty()) {
    return Status::InvalidArgument("redis: replace " + Describe(key) + ": " + why);
  }
  return RevisionReply(RunScript(*impl_, kReplace, key,
                                 {key.id, json::serialize(value), std::to_string(expected)}),
                       key);
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: replace: out of memory");
}

Status RedisStore::Erase(const Key& key, Revision expected) try {
  if (!CollectionProblem(key.collection).empty()) {
    return Status::Conflict("erase: the key is absent");  // such a key cannot exist
  }
  auto r = RunScript(*impl_, kErase, key, {key.id, std::to_string(expected)});
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER || (*r)->integer != 1) {
    return Status::Corruption("redis: erase " + Describe(key) + ": unexpected reply");
  }
  return Status::Ok();
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: erase: out of memory");
}

Result<ScanPage> RedisStore::Scan(std::string_view collection, std::string_view cursor,
                                  std::size_t limit) try {
  if (limit == 0) return Status::InvalidArgument("redis: scan: limit must be positive");
  if (!CollectionProblem(collection).empty()) return ScanPage{};
  const RedisOptions& o = impl_->options;
  const std::string what = "redis: scan " + Quoted(collection);
  // ZRANGEBYLEX's LIMIT takes a signed 64-bit count; no page can be larger than this anyway.
  const std::size_t per_bucket = std::min<std::size_t>(limit, std::size_t{1} << 30);
  const std::string start = cursor.empty() ? std::string("-") : "(" + std::string(cursor);
  std::vector<Command> ranges;
  for (std::size_t b = 0; b < o.buckets; ++b) {
    ranges.push_back(Command{{"ZRANGEBYLEX", BucketTag(o, collection, b) + "i", start, "+",
                              "LIMIT", "0", std::to_string(per_bucket)}});
  }
  Conn conn(impl_.get());
  if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
  Stage stage;
  std::string error;
  auto replies = Exchange(conn, ranges, &stage, &error);
  if (stage != Stage::kOk) return Status::Unavailable(what + ": " + error);
  std::vector<std::string> ids;
  bool more = false;
  for (const Reply& r : replies) {
    if (r->type == REDIS_REPLY_ERROR) {
      std::string_view err = ReplyText(r.get());
      if (RefusedBeforeRunning(err)) return Status::Unavailable(what + ": " + std::string(err));
      return Status::Corruption(what + ": " + std::string(err));
    }
    if (r->type != REDIS_REPLY_ARRAY) {
      return Status::Corruption(what + ": an index answered with reply type " +
                                std::to_string(r->type));
    }
    if (r->elements == per_bucket) more = true;  // that bucket may hold more
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
    more = true;
  }
  ScanPage page;
  if (ids.empty()) return page;
  std::vector<Command> gets;
  for (const std::string& id : ids) {
    gets.push_back(Command{{"HMGET", KeysOf(o, Key{std::string(collection), id}).doc, "v", "r"}});
  }
  replies = Exchange(conn, gets, &stage, &error);
  if (stage != Stage::kOk) return Status::Unavailable(what + ": " + error);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const redisReply* r = replies[i].get();
    if (r->type == REDIS_REPLY_ERROR && RefusedBeforeRunning(ReplyText(r))) {
      return Status::Unavailable(what + ": " + std::string(ReplyText(r)));
    }
    auto doc = DecodeHmget(r, Quoted(collection) + "/" + Quoted(ids[i]));
    if (!doc.ok()) return doc.status();
    if (!doc->has_value()) continue;  // erased since the index was read
    page.documents.emplace_back(ids[i], std::move(**doc));
  }
  if (more) page.next_cursor = ids.back();
  return page;
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: scan: out of memory");
}

}  // namespace litetx
