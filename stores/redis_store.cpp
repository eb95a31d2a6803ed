#include "litetx/redis_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include <boost/json/serialize.hpp>

#include "engine/json_text.h"
#include "stores/redis_common.h"

namespace litetx {

namespace json = boost::json;
using namespace redis;  // NOLINT: the store is written in terms of the shared pieces

struct RedisStore::Impl {
  RedisOptions options;
  Scripts scripts;
  std::unique_ptr<NodePool> pool;
};

namespace {

// Runs write script `id`. Returns its reply (not an error reply), or the Status.
Result<Reply> RunScript(RedisStore::Impl& impl, ScriptId id, const Key& key,
                        const std::vector<std::string>& argv) {
  const std::string what = std::string("redis: ") + ScriptName(id) + " " + Describe(key);
  Conn conn(impl.pool.get());
  if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
  const RedisOptions& o = impl.options;
  Keys k = KeysOf(o.prefix, o.buckets, key);
  WriteCall call{id, &k, &argv};
  call.wait_replicas = o.wait_replicas;
  call.wait_timeout = o.wait_timeout;
  for (int attempt = 0; attempt < 2; ++attempt) {
    call.eval = attempt > 0;
    auto r = RunWrite(conn, impl.scripts, call, what);
    if (!r.ok()) return r.status();
    if ((*r)->type != REDIS_REPLY_ERROR) return r;
    ErrorReply e = ClassifyError(ReplyText(r->get()));
    if (e.kind == ErrorKind::kNoScript && attempt == 0) {
      impl.pool->Warn(what + ": the server lost the script (NOSCRIPT); sending it again");
      continue;  // nothing ran
    }
    return WriteErrorStatus(id, e, what);
  }
  return Status::Unknown(what + ": unreachable");
}

}  // namespace

std::size_t RedisStore::BucketOf(std::string_view id, std::size_t buckets) {
  return redis::BucketOf(id, buckets);
}

Result<std::shared_ptr<RedisStore>> RedisStore::Open(RedisOptions options) try {
  if (options.buckets == 0) return Status::InvalidArgument("redis: buckets must be at least 1");
  if (options.pool_size == 0) return Status::InvalidArgument("redis: pool_size must be at least 1");
  if (options.prefix.find_first_of("{}") != std::string::npos) {
    return Status::InvalidArgument("redis: the prefix must not contain '{' or '}'");
  }
  if (std::string why = TimeoutProblem(options.connect_timeout, options.command_timeout,
                                       options.wait_replicas, options.wait_timeout);
      !why.empty()) {
    return Status::InvalidArgument("redis: " + why);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const RedisOptions& o = impl->options;
  impl->pool = std::make_unique<NodePool>(NodeConfig{o.host, o.port, o.db, o.pool_size,
                                                     o.connect_timeout, o.command_timeout,
                                                     o.logger});
  impl->scripts = MakeScripts();
  auto c = impl->pool->Connect();
  if (!c.ok()) return c.status();
  redisContext* ctx = *c;
  ErrorReply redirect;
  Status s = Status::Ok();
  {
    // A cluster node would answer MOVED for most keys: refuse it with a clear error.
    Reply info(static_cast<redisReply*>(redisCommand(ctx, "CLUSTER INFO")));
    if (info == nullptr) {
      s = Status::Unavailable("redis: " + impl->pool->name() + ": " + ContextError(ctx));
    } else if (info->type == REDIS_REPLY_STRING) {
      s = Status::InvalidArgument("redis: " + impl->pool->name() +
                                  " is a Redis Cluster node; use RedisClusterStore "
                                  "(redis-cluster://)");
    }
  }
  if (s.ok()) s = CheckEvictionPolicy(ctx, *impl->pool);
  if (s.ok()) s = LoadScripts(ctx, &impl->scripts);
  if (s.ok()) s = CheckFormat(ctx, o.prefix, o.buckets, &redirect);
  if (s.ok() && !redirect.text.empty()) {
    s = Status::InvalidArgument("redis: " + impl->pool->name() +
                                " is a Redis Cluster node (it answered " + redirect.text +
                                "); use RedisClusterStore");
  }
  if (!s.ok()) {
    redisFree(ctx);
    return s;
  }
  impl->pool->Adopt(ctx);
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
  Conn conn(impl_->pool.get());
  if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
  Keys k = KeysOf(impl_->options.prefix, impl_->options.buckets, key);
  Stage stage;
  std::string error;
  auto replies = Exchange(conn, {Command{{"HMGET", k.doc, "v", "r"}}}, &stage, &error);
  if (stage != Stage::kOk) return Status::Unavailable(what + ": " + error);
  if (replies[0]->type == REDIS_REPLY_ERROR &&
      ClassifyError(ReplyText(replies[0].get())).kind == ErrorKind::kRefused) {
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
  if (std::string why = engine::StoredValueProblem(value); !why.empty()) {
    return Status::InvalidArgument("redis: create " + Describe(key) + ": " + why);
  }
  auto r = RunScript(*impl_, kCreate, key, {key.id, json::serialize(value)});
  if (!r.ok()) return r.status();
  return RevisionOf(r->get(), key);
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: create: out of memory");
}

Result<Revision> RedisStore::Replace(const Key& key, Revision expected,
                                     const boost::json::object& value) try {
  if (std::string why = CollectionProblem(key.collection); !why.empty()) {
    return Status::InvalidArgument("redis: replace " + Describe(key) + ": " + why);
  }
  if (std::string why = engine::StoredValueProblem(value); !why.empty()) {
    return Status::InvalidArgument("redis: replace " + Describe(key) + ": " + why);
  }
  auto r = RunScript(*impl_, kReplace, key,
                     {key.id, json::serialize(value), std::to_string(expected)});
  if (!r.ok()) return r.status();
  return RevisionOf(r->get(), key);
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

std::vector<BatchResult> RedisStore::Batch(std::span<const BatchOp> ops) {
  std::vector<BatchResult> out(ops.size());
  try {
    const RedisOptions& o = impl_->options;
    std::vector<BatchCommand> cmds = PrepareBatch(ops, "redis", o.prefix, o.buckets, out);
    if (cmds.empty()) return out;
    std::vector<std::size_t> noscript;  // writes whose node lacked the script: nothing ran
    {
      Conn conn(impl_->pool.get());
      if (Status s = conn.Open(); !s.ok()) {
        for (const BatchCommand& c : cmds) {
          out[c.op].status = Status(s.code(), c.what + ": " + s.message());
        }
        return out;
      }
      // One pipeline: every command is appended and written out, then every reply is read.
      std::vector<Command> send;
      send.reserve(cmds.size());
      bool writes = false;
      for (const BatchCommand& c : cmds) {
        send.push_back(CommandOf(impl_->scripts, c, false));
        writes = writes || c.write;
      }
      std::string error;
      const std::size_t sent = SendCounted(conn, send, &error);
      if (sent < cmds.size()) {
        // The commands before `sent` reached the server whole and may have run; the rest not.
        for (std::size_t j = 0; j < cmds.size(); ++j) {
          if (j < sent) {
            out[cmds[j].op] = BatchLostResult(cmds[j], error);
          } else {
            out[cmds[j].op].status = Status::Unavailable(cmds[j].what + ": not sent: " + error);
          }
        }
        return out;
      }
      // WAIT in a second send (as for single calls), so that its failure cannot be taken for
      // the scripts not having been sent.
      const bool wait = o.wait_replicas > 0 && writes;
      bool wait_sent = false;
      std::string wait_error;
      if (wait) {
        wait_sent = Send(conn,
                         {Command{{"WAIT", std::to_string(o.wait_replicas),
                                   std::to_string(o.wait_timeout.count())}}},
                         &wait_error);
      }
      std::vector<Reply> replies;
      replies.reserve(cmds.size());
      const bool all = Receive(conn, cmds.size(), &replies, &error);
      for (std::size_t j = 0; j < cmds.size(); ++j) {
        const BatchCommand& c = cmds[j];
        if (j >= replies.size()) {
          out[c.op] = BatchLostResult(c, error);
          continue;
        }
        const redisReply* r = replies[j].get();
        if (c.write && r->type == REDIS_REPLY_ERROR &&
            ClassifyError(ReplyText(r)).kind == ErrorKind::kNoScript) {
          noscript.push_back(j);
          continue;
        }
        out[c.op] = BatchReplyResult(c, r);
      }
      if (wait) {
        // Without a replica count at least wait_replicas, a write that ran is not known to
        // be on the replicas: kUnknown, as for a single call.
        std::string why =
            all ? WaitProblem(conn, wait_sent, wait_error, o.wait_replicas, o.wait_timeout)
                : "the write ran but the connection failed before WAIT answered: " + error;
        if (!why.empty()) {
          for (const BatchCommand& c : cmds) {
            if (c.write && out[c.op].status.ok()) {
              out[c.op] = BatchResult{};
              out[c.op].status = Status::Unknown(c.what + ": " + why);
            }
          }
        }
      }
    }  // the connection goes back to the pool before the single calls below take one
    for (std::size_t j : noscript) {
      impl_->pool->Warn(cmds[j].what +
                        ": the server lost the script (NOSCRIPT); sending it again");
      // Nothing ran: the single call sends it again (and the script's text if need be).
      std::vector<BatchResult> one = Store::Batch(ops.subspan(cmds[j].op, 1));
      out[cmds[j].op] = std::move(one.at(0));
    }
  } catch (const std::bad_alloc&) {
    // Somewhere in the middle: any write may have been sent (kUnknown), no read is known.
    for (std::size_t i = 0; i < ops.size(); ++i) {
      out[i] = BatchResult{};
      out[i].status =
          ops[i].is_write()
              ? Status::Unknown("redis: batch: out of memory; the write may or may not have landed")
              : Status::Unavailable("redis: batch: out of memory");
    }
  }
  return out;
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
    ranges.push_back(Command{{"ZRANGEBYLEX", BucketTag(o.prefix, collection, b) + "i", start,
                              "+", "LIMIT", "0", std::to_string(per_bucket)}});
  }
  Conn conn(impl_->pool.get());
  if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
  Stage stage;
  std::string error;
  auto replies = Exchange(conn, ranges, &stage, &error);
  if (stage != Stage::kOk) return Status::Unavailable(what + ": " + error);
  bool more = false;
  auto merged = MergeIndexReplies(replies, per_bucket, limit, what, &more);
  if (!merged.ok()) return merged.status();
  std::vector<std::string> ids = std::move(merged).value();
  ScanPage page;
  if (ids.empty()) return page;
  std::vector<Command> gets;
  for (const std::string& id : ids) {
    gets.push_back(Command{
        {"HMGET", KeysOf(o.prefix, o.buckets, Key{std::string(collection), id}).doc, "v", "r"}});
  }
  replies = Exchange(conn, gets, &stage, &error);
  if (stage != Stage::kOk) return Status::Unavailable(what + ": " + error);
  if (Status s = AddScannedDocuments(replies, ids, collection, what, &page); !s.ok()) return s;
  if (more) page.next_cursor = ids.back();
  return page;
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: scan: out of memory");
}

Result<CollectionPage> RedisStore::ListCollections(std::string_view cursor,
                                                   std::size_t limit) try {
  if (limit == 0) {
    return Status::InvalidArgument("redis: list collections: limit must be positive");
  }
  const RedisOptions& o = impl_->options;
  const std::string what = "redis: list collections";
  Conn conn(impl_->pool.get());
  if (Status s = conn.Open(); !s.ok()) return Status(s.code(), what + ": " + s.message());
  std::vector<std::string> names;
  if (Status s = ScanCollectionNames(conn, o.prefix, o.buckets, what, &names); !s.ok()) {
    conn.MarkBroken();
    return s;
  }
  return PageOfNames(std::move(names), cursor, limit);
} catch (const std::bad_alloc&) {
  return Status::Unavailable("redis: list collections: out of memory");
}

}  // namespace litetx
