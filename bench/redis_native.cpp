// bench/redis_native.cpp — see redis_native.h.
#include "bench/redis_native.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

namespace litetx::bench {
namespace {

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// Sends `cmds` (each an argument list) in one write and reads their replies; the error text
// of the first failure, empty if none.
std::string Pipeline(redisContext* c, const std::vector<std::vector<std::string>>& cmds,
                     std::vector<Reply>* replies) {
  for (const auto& args : cmds) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      return c->errstr;
    }
  }
  replies->clear();
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    void* r = nullptr;
    if (redisGetReply(c, &r) != REDIS_OK || r == nullptr) return c->errstr;
    replies->emplace_back(static_cast<redisReply*>(r));
    if (replies->back()->type == REDIS_REPLY_ERROR) return replies->back()->str;
  }
  return {};
}

}  // namespace

Result<NativeRedisRow> MeasureRedisMultiExec(const std::string& host, int port, int db,
                                             const std::string& key_prefix, int n,
                                             std::chrono::milliseconds duration) {
  timeval tv{2, 0};
  Context c(redisConnectWithTimeout(host.c_str(), port, tv));
  if (c == nullptr || c->err != 0) {
    return Status::Unavailable("native MULTI/EXEC: cannot connect to " + host + ":" +
                               std::to_string(port) + (c ? std::string(": ") + c->errstr : ""));
  }
  redisSetTimeout(c.get(), tv);
  std::vector<Reply> replies;
  if (std::string e = Pipeline(c.get(), {{"SELECT", std::to_string(db)}}, &replies); !e.empty()) {
    return Status::Unavailable("native MULTI/EXEC: SELECT: " + e);
  }
  const std::string tag = key_prefix + "{bench.native." + std::to_string(::getpid()) + "}:";
  // On a cluster, the slot of the tag may be served by another node: follow its MOVED (a
  // plain server answers the probe itself).
  std::string where = host + ":" + std::to_string(port);
  for (int hop = 0; hop < 3; ++hop) {
    std::string e = Pipeline(c.get(), {{"EXISTS", tag + "0"}}, &replies);
    if (e.rfind("MOVED ", 0) != 0) {
      if (!e.empty()) return Status::Unavailable("native MULTI/EXEC: " + where + ": " + e);
      break;
    }
    where = e.substr(e.rfind(' ') + 1);
    const std::size_t colon = where.rfind(':');
    if (colon == std::string::npos) return Status::Unavailable("native MULTI/EXEC: " + e);
    const std::string h = where.substr(0, colon);
    const int p = std::atoi(where.c_str() + colon + 1);
    c.reset(redisConnectWithTimeout(h.c_str(), p, tv));
    if (c == nullptr || c->err != 0) {
      return Status::Unavailable("native MULTI/EXEC: cannot connect to " + where);
    }
    redisSetTimeout(c.get(), tv);
  }
  const std::string value = R"({"counter":0,"pad":"xxxxxxxxxxxxxxxx"})";
  std::vector<std::vector<std::string>> cmds;
  cmds.push_back({"MULTI"});
  for (int i = 0; i < n; ++i) cmds.push_back({"HSET", tag + std::to_string(i), "v", value, "r", "1"});
  cmds.push_back({"EXEC"});

  NativeRedisRow row;
  row.n = n;
  using Clock = std::chrono::steady_clock;
  auto run = [&](Clock::duration length, bool timed) -> std::string {
    const auto start = Clock::now();
    const auto end = start + length;
    Measured m;
    while (Clock::now() < end) {
      const auto t0 = Clock::now();
      std::string e = Pipeline(c.get(), cmds, &replies);
      ++m.attempts;
      if (!e.empty() || replies.back()->type != REDIS_REPLY_ARRAY ||
          replies.back()->elements != static_cast<std::size_t>(n)) {
        ++m.errors;
        if (m.first_error.empty()) m.first_error = e.empty() ? "EXEC did not run" : e;
        if (c->err != 0) break;  // the connection is gone
        continue;
      }
      m.latency.Add(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()));
      ++m.ops;
    }
    if (timed) {
      m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      m.ops_per_s = m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds : 0;
      m.p50_us = m.latency.PercentileUs(50);
      m.p99_us = m.latency.PercentileUs(99);
      row.tx = m;
    }
    return m.first_error;
  };
  run(std::min<Clock::duration>(duration / 10, std::chrono::milliseconds(200)), false);
  run(duration, true);
  std::vector<std::string> del = {"DEL"};
  for (int i = 0; i < n; ++i) del.push_back(tag + std::to_string(i));
  if (c->err == 0) Pipeline(c.get(), {del}, &replies);
  return row;
}

}  // namespace litetx::bench
