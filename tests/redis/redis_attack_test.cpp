// tests/redis/redis_attack_test.cpp — RedisStore under a hostile scheduler and hostile input,
// on a redis-server each test starts itself (127.0.0.1, a free port, no persistence). Skipped
// with a message when redis-server is not installed.
//
//   * a write cut off half sent (server stopped, value larger than the socket buffers) is
//     kUnavailable and never lands, not even after the server resumes;
//   * a write whose reply is lost to a stopped server is kUnknown, is executed at most once
//     (INFO commandstats), and its late reply is never read as the answer to a later command
//     on a one-connection pool;
//   * OOM (maxmemory, noeviction) and BUSY (another client's endless script) refuse a write
//     before it writes anything: kUnavailable, bucket counter and document untouched;
//   * concurrent Opens with different bucket counts agree on one format marker; a marker of
//     another format version, or of another Redis type, is refused and left as it is;
//   * Scan while other threads create and erase: every page in id order, every document that
//     existed throughout returned exactly once.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "litetx/redis_store.h"
#include "redis/redis_server.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::RedisOptions;
using litetx::RedisStore;
using Clock = std::chrono::steady_clock;

std::atomic<int> prefix_counter{0};

// The largest buffer TCP autotuning may give a socket (the third field of
// /proc/sys/net/ipv4/<name>); 32 MiB if it cannot be read.
std::size_t MaxTcpBuffer(const std::string& name) {
  std::ifstream in("/proc/sys/net/ipv4/" + name);
  std::size_t lo = 0, def = 0, max = 0;
  if (in >> lo >> def >> max) return max;
  return std::size_t{32} << 20;
}

class RedisAttackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RedisServerPath().empty()) {
      GTEST_SKIP() << "redis-server not found in PATH (Debian: apt-get install redis-server); "
                      "the Redis store is not tested";
    }
  }
  void TearDown() override { server_.Stop(); }

  void StartServer(std::vector<std::string> extra = {}) {
    RedisServerOptions so;
    so.extra_args = std::move(extra);
    std::string why = server_.Start(so);
    ASSERT_TRUE(why.empty()) << why;
  }

  RedisOptions Opts() const {
    RedisOptions o;
    o.port = server_.port();
    o.prefix = "a" + std::to_string(::getpid()) + "." + std::to_string(prefix_counter++) + ":";
    o.buckets = 1;  // one bucket: one counter key to watch
    return o;
  }

  static std::shared_ptr<RedisStore> MustOpen(const RedisOptions& o) {
    auto s = RedisStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }

  // The bucket counter of collection `c` (one bucket), or "" if absent.
  std::string Counter(const RedisOptions& o, const std::string& c) const {
    RawReply r = server_.Command({"GET", o.prefix + "{" + c + ":0}r"});
    return r != nullptr && r->type == REDIS_REPLY_STRING ? ReplyText(r.get()) : std::string();
  }

  // Calls of `cmd` the server has executed (INFO commandstats), -1 if unreadable.
  long long Calls(const std::string& cmd) const {
    RawReply r = server_.Command({"INFO", "commandstats"});
    if (r == nullptr || r->type != REDIS_REPLY_STRING) return -1;
    std::string text = ReplyText(r.get());
    std::string field = "cmdstat_" + cmd + ":calls=";
    std::size_t at = text.find(field);
    if (at == std::string::npos) return 0;
    return std::stoll(text.substr(at + field.size()));
  }

  RedisServer server_;
};

// A write whose bytes cannot all be handed to the kernel (the server is stopped and the value
// is larger than both sockets' buffers) was not received whole: kUnavailable, and after the
// server resumes it has not run — the connection was closed with the command incomplete.
TEST_F(RedisAttackTest, WriteCutOffHalfSentIsUnavailableAndNeverLands) {
  StartServer();
  RedisOptions o = Opts();
  o.command_timeout = std::chrono::milliseconds(200);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  auto base = store->Create(Key{"c", "r"}, Obj(R"({"n":0})"));
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const std::string counter = Counter(o, "c");
  const long long evals = Calls("evalsha") + Calls("eval");
  // Larger than the most the kernel may buffer on both sides of a loopback connection.
  const std::size_t size = MaxTcpBuffer("tcp_wmem") + MaxTcpBuffer("tcp_rmem") + (8u << 20);
  const json::object big{{"big", std::string(size, 'x')}};

  server_.Pause();
  auto c = store->Create(Key{"c", "new"}, big);
  auto r = store->Replace(Key{"c", "r"}, *base, big);
  server_.Resume();

  EXPECT_EQ(c.code(), Code::kUnavailable) << c.status().ToString();
  EXPECT_NE(c.status().message().find("not sent"), std::string::npos) << c.status().ToString();
  EXPECT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  // The server has read what it got and dropped the incomplete commands: once it answers, the
  // store is as before.
  ASSERT_TRUE(server_.Ping());
  auto g = store->Get(Key{"c", "new"});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(g->has_value());
  auto gr = store->Get(Key{"c", "r"});
  ASSERT_TRUE(gr.ok() && gr->has_value());
  EXPECT_EQ((*gr)->revision, *base);
  EXPECT_EQ((*gr)->value, Obj(R"({"n":0})"));
  EXPECT_EQ(Counter(o, "c"), counter);
  const long long ran = Calls("evalsha") + Calls("eval") - evals;
  EXPECT_EQ(ran, 0);
  std::printf("[ halfsent] 2 writes of %zu MiB to a stopped server: %s, %s; scripts run: %lld\n",
              size >> 20, c.status().ToString().substr(0, 11).c_str(),
              r.status().ToString().substr(0, 11).c_str(), ran);
}

// A write sent whole to a stopped server: kUnknown. After SIGCONT the server runs it (it read
// the command before the close) exactly once, and its reply never reaches a later call on the
// one-connection pool: the connection that timed out was closed, not reused.
TEST_F(RedisAttackTest, LostReplyRunsAtMostOnceAndIsNeverReadAsALaterAnswer) {
  StartServer();
  RedisOptions o = Opts();
  o.pool_size = 1;
  o.command_timeout = std::chrono::milliseconds(150);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  auto base = store->Create(Key{"c", "a"}, Obj(R"({"n":0})"));
  ASSERT_TRUE(base.ok());
  const long long evals = Calls("evalsha") + Calls("eval");

  server_.Pause();
  auto r = store->Replace(Key{"c", "a"}, *base, Obj(R"({"n":1})"));
  server_.Resume();
  EXPECT_EQ(r.code(), Code::kUnknown) << r.status().ToString();

  // Every read now answers with the document, before or after the write; never with the late
  // reply of the Replace (a bare revision).
  std::optional<StoredDocument> seen;
  for (auto until = Clock::now() + std::chrono::seconds(2); Clock::now() < until;) {
    auto g = store->Get(Key{"c", "a"});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(g->has_value());
    seen = **g;
    if (seen->revision != *base) break;
  }
  const bool landed = seen->revision != *base;
  EXPECT_EQ(seen->value, landed ? Obj(R"({"n":1})") : Obj(R"({"n":0})"));
  if (landed) {
    EXPECT_EQ(std::to_string(seen->revision), Counter(o, "c"));
  }

  auto b = store->Create(Key{"c", "b"}, Obj(R"({"n":2})"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(*b, seen->revision);
  EXPECT_EQ(std::to_string(*b), Counter(o, "c"));
  auto gb = store->Get(Key{"c", "b"});
  ASSERT_TRUE(gb.ok() && gb->has_value());
  EXPECT_EQ((*gb)->revision, *b);
  EXPECT_EQ((*gb)->value, Obj(R"({"n":2})"));
  // The kUnknown script ran at most once (no resend), plus the Create.
  const long long ran = Calls("evalsha") + Calls("eval") - evals;
  EXPECT_EQ(ran, (landed ? 1 : 0) + 1);
  std::printf("[ lostrep ] kUnknown replace %s after SIGCONT; scripts run since: %lld\n",
              landed ? "ran once" : "did not run", ran);
}

// A batch is one pipeline: with the server paused, every command of the batch is written out
// before any reply is awaited, so the batch waits out one command timeout (one per operation
// if they went one by one), the writes are kUnknown and the reads kUnavailable, and after
// SIGCONT every write of the batch has run exactly once.
TEST_F(RedisAttackTest, BatchIsOnePipelineAndLostRepliesAreUnknownWritesAndUnavailableReads) {
  StartServer();
  RedisOptions o = Opts();
  o.pool_size = 1;
  o.command_timeout = std::chrono::milliseconds(200);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  auto base = store->Create(Key{"c", "a"}, Obj(R"({"n":0})"));
  ASSERT_TRUE(base.ok());
  const long long evals = Calls("evalsha") + Calls("eval");
  const json::object v1 = Obj(R"({"n":1})"), v2 = Obj(R"({"n":2})");
  std::vector<litetx::BatchOp> ops{litetx::BatchOp::Replace(Key{"c", "a"}, *base, v1),
                                   litetx::BatchOp::Get(Key{"c", "a"}),
                                   litetx::BatchOp::Create(Key{"c", "b"}, v2),
                                   litetx::BatchOp::Create(Key{"c", "d"}, v2)};
  server_.Pause();
  const auto start = Clock::now();
  auto res = store->Batch(ops);
  const auto waited = Clock::now() - start;
  server_.Resume();
  // One round trip: one command timeout, not one per operation (4 x 200 ms).
  EXPECT_LT(waited, 2 * o.command_timeout)
      << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms";
  ASSERT_EQ(res.size(), 4u);
  EXPECT_EQ(res[0].status.code(), Code::kUnknown) << res[0].status.ToString();
  EXPECT_EQ(res[1].status.code(), Code::kUnavailable) << res[1].status.ToString();
  EXPECT_EQ(res[2].status.code(), Code::kUnknown) << res[2].status.ToString();
  EXPECT_EQ(res[3].status.code(), Code::kUnknown) << res[3].status.ToString();
  // Every script of the batch had reached the server: all three ran, once each.
  std::optional<StoredDocument> d;
  for (auto until = Clock::now() + std::chrono::seconds(2); Clock::now() < until;) {
    auto g = store->Get(Key{"c", "d"});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    if (g->has_value()) {
      d = **g;
      break;
    }
  }
  ASSERT_TRUE(d.has_value()) << "the last write of the batch never ran";
  auto a = store->Get(Key{"c", "a"});
  auto b = store->Get(Key{"c", "b"});
  ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());
  EXPECT_EQ((*a)->value, v1);
  EXPECT_EQ((*b)->value, v2);
  EXPECT_EQ(Calls("evalsha") + Calls("eval") - evals, 3);
  EXPECT_EQ(std::to_string(d->revision), Counter(o, "c"));
}

// A pipelined batch with one NOSCRIPT (after SCRIPT FLUSH) sends the lost script again for
// each write, once, and answers every operation as its single call would.
TEST_F(RedisAttackTest, BatchAfterScriptFlushResendsEachWriteOnce) {
  StartServer();
  RedisOptions o = Opts();
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  auto base = store->Create(Key{"c", "a"}, Obj(R"({"n":0})"));
  ASSERT_TRUE(base.ok());
  RawReply flush = server_.Command({"SCRIPT", "FLUSH"});
  ASSERT_NE(flush, nullptr);
  const json::object v = Obj(R"({"n":5})");
  auto res = store->Batch(std::vector<litetx::BatchOp>{
      litetx::BatchOp::Replace(Key{"c", "a"}, *base, v), litetx::BatchOp::Get(Key{"c", "a"}),
      litetx::BatchOp::Create(Key{"c", "a"}, v), litetx::BatchOp::Create(Key{"c", "n"}, v)});
  ASSERT_EQ(res.size(), 4u);
  EXPECT_TRUE(res[0].status.ok()) << res[0].status.ToString();
  EXPECT_TRUE(res[1].status.ok()) << res[1].status.ToString();
  EXPECT_EQ(res[2].status.code(), Code::kConflict) << res[2].status.ToString();
  EXPECT_TRUE(res[3].status.ok()) << res[3].status.ToString();
  auto a = store->Get(Key{"c", "a"});
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->revision, res[0].revision);
  EXPECT_EQ(Counter(o, "c"), std::to_string(std::max(res[0].revision, res[3].revision)));
}

// maxmemory with noeviction: the scripts' first write (INCR of the counter) is refused with
// OOM before anything was written, so the store says kUnavailable and nothing changed. Erase
// frees memory and is allowed.
TEST_F(RedisAttackTest, OutOfMemoryRefusesAWriteBeforeAnythingIsWritten) {
  StartServer({"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"});
  RedisOptions o = Opts();
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const json::object filler{{"pad", std::string(8192, 'p')}};
  int created = 0;
  litetx::Result<Revision> refused = Revision{0};
  std::map<std::string, Revision> revs;
  for (; created < 5000; ++created) {
    std::string counter = Counter(o, "c");
    std::string id = "k" + std::to_string(created);
    refused = store->Create(Key{"c", id}, filler);
    if (!refused.ok()) {
      EXPECT_EQ(Counter(o, "c"), counter) << "the counter moved although the write was refused";
      auto g = store->Get(Key{"c", id});
      ASSERT_TRUE(g.ok());
      EXPECT_FALSE(g->has_value());
      break;
    }
    revs[id] = *refused;
  }
  ASSERT_FALSE(refused.ok()) << "maxmemory 4mb never reached after " << created << " creates";
  EXPECT_EQ(refused.code(), Code::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("OOM"), std::string::npos)
      << refused.status().ToString();
  // Replace under OOM: refused, the document untouched.
  const std::string counter = Counter(o, "c");
  auto r = store->Replace(Key{"c", "k0"}, revs["k0"], Obj(R"({"n":1})"));
  EXPECT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  auto g = store->Get(Key{"c", "k0"});
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->revision, revs["k0"]);
  EXPECT_EQ((*g)->value, filler);
  EXPECT_EQ(Counter(o, "c"), counter);
  // Erase writes no new data (DEL, ZREM): it runs.
  EXPECT_TRUE(store->Erase(Key{"c", "k1"}, revs["k1"]).ok());
  std::printf("[ oom     ] %d creates of 8 KiB, then create: %s; replace: %s\n", created,
              refused.status().ToString().substr(0, 60).c_str(),
              r.status().ToString().substr(0, 11).c_str());
}

// Another client's script runs past busy-reply-threshold: the server answers BUSY to our
// script without running it. kUnavailable, nothing written; after SCRIPT KILL writes work.
TEST_F(RedisAttackTest, BusyServerRefusesAWriteAndNothingIsWritten) {
  StartServer({"--busy-reply-threshold", "50"});
  RedisOptions o = Opts();
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  auto base = store->Create(Key{"c", "a"}, Obj(R"({"n":0})"));
  ASSERT_TRUE(base.ok());
  const std::string counter = Counter(o, "c");

  std::thread looper([port = server_.port()] {
    timeval tv{10, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == nullptr) return;
    if (c->err == 0) {
      redisSetTimeout(c, tv);
      RawReply r(static_cast<redisReply*>(redisCommand(c, "EVAL %s 0", "while true do end")));
    }
    redisFree(c);
  });
  bool busy = false;
  for (auto until = Clock::now() + std::chrono::seconds(5); !busy && Clock::now() < until;) {
    RawReply p = server_.Command("PING");
    busy = p != nullptr && p->type == REDIS_REPLY_ERROR && ReplyText(p.get()).starts_with("BUSY");
  }
  EXPECT_TRUE(busy) << "the server never answered BUSY";
  auto c = store->Create(Key{"c", "new"}, Obj(R"({"n":1})"));
  auto r = store->Replace(Key{"c", "a"}, *base, Obj(R"({"n":1})"));
  Status e = store->Erase(Key{"c", "a"}, *base);
  RawReply kill = server_.Command({"SCRIPT", "KILL"});
  looper.join();
  ASSERT_NE(kill, nullptr);
  EXPECT_EQ(ReplyText(kill.get()), "OK");

  EXPECT_EQ(c.code(), Code::kUnavailable) << c.status().ToString();
  EXPECT_NE(c.status().message().find("BUSY"), std::string::npos) << c.status().ToString();
  EXPECT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_EQ(e.code(), Code::kUnavailable) << e.ToString();
  EXPECT_EQ(Counter(o, "c"), counter);
  auto g = store->Get(Key{"c", "new"});
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
  auto ga = store->Get(Key{"c", "a"});
  ASSERT_TRUE(ga.ok() && ga->has_value());
  EXPECT_EQ((*ga)->revision, *base);
  EXPECT_TRUE(store->Replace(Key{"c", "a"}, *base, Obj(R"({"n":2})")).ok());
  std::printf("[ busy    ] against a BUSY server: create %s, replace %s, erase %s\n",
              c.status().ToString().substr(0, 11).c_str(),
              r.status().ToString().substr(0, 11).c_str(), e.ToString().substr(0, 11).c_str());
}

// Opens racing on one prefix with two bucket counts: the marker's first writer wins, every
// Open with its count succeeds, every other one is refused; the marker is never overwritten.
TEST_F(RedisAttackTest, ConcurrentOpensAgreeOnOneFormatMarker) {
  StartServer();
  const RedisOptions base = Opts();
  constexpr int kThreads = 8;
  for (int round = 0; round < 5; ++round) {
    RedisOptions o = base;
    o.prefix += std::to_string(round) + ":";
    std::latch go(kThreads);
    std::vector<Code> codes(kThreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([&, t] {
        RedisOptions mine = o;
        mine.buckets = t % 2 == 0 ? 3 : 5;
        go.arrive_and_wait();
        codes[t] = RedisStore::Open(mine).code();
      });
    }
    for (auto& t : ts) t.join();
    RawReply m = server_.Command({"GET", o.prefix + "format"});
    ASSERT_NE(m, nullptr);
    const std::string marker = ReplyText(m.get());
    ASSERT_TRUE(marker == "litetx-redis 1 buckets=3" || marker == "litetx-redis 1 buckets=5")
        << marker;
    const std::size_t winner = marker.back() == '3' ? 3 : 5;
    for (int t = 0; t < kThreads; ++t) {
      const std::size_t b = t % 2 == 0 ? 3 : 5;
      EXPECT_EQ(codes[t], b == winner ? Code::kOk : Code::kInvalidArgument) << "thread " << t;
    }
  }
}

// A marker written by another format version, or a foreign key of another type where the
// marker goes: Open refuses it and writes nothing.
TEST_F(RedisAttackTest, MarkerOfAnotherVersionOrTypeIsRefusedAndLeftAlone) {
  StartServer();
  RedisOptions o = Opts();
  ASSERT_NE(server_.Command({"SET", o.prefix + "format", "litetx-redis 2 buckets=1"}), nullptr);
  auto s = RedisStore::Open(o);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.status().ToString();
  RawReply m = server_.Command({"GET", o.prefix + "format"});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(ReplyText(m.get()), "litetx-redis 2 buckets=1");

  RedisOptions h = Opts();
  ASSERT_NE(server_.Command({"HSET", h.prefix + "format", "f", "v"}), nullptr);
  auto sh = RedisStore::Open(h);
  EXPECT_EQ(sh.code(), Code::kInvalidArgument) << sh.status().ToString();
  RawReply t = server_.Command({"TYPE", h.prefix + "format"});
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(ReplyText(t.get()), "hash");
  RawReply n = server_.Command("DBSIZE");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->integer, 2);
}

// Scan while two threads create and erase other documents of the collection: each scan's ids
// are strictly increasing across pages, and every document that existed for the whole scan is
// returned once, with its value.
TEST_F(RedisAttackTest, ScanDuringChurnIsOrderedAndMissesNoStableDocument) {
  StartServer();
  RedisOptions o = Opts();
  o.buckets = 7;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  std::set<std::string> stable;
  for (int i = 0; i < 120; ++i) {
    std::string id = "s" + std::to_string(i * 37 % 1000);
    ASSERT_TRUE(store->Create(Key{"c", id}, json::object{{"id", id}}).ok());
    stable.insert(id);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> churned{0};
  std::vector<std::thread> churn;
  for (int t = 0; t < 2; ++t) {
    churn.emplace_back([&, t] {
      for (int i = 0; i < 20000 && !stop.load(); ++i) {
        // Ids sorting before, between and after the stable ones.
        std::string id = std::string(1, "arz"[i % 3]) + std::to_string(t) + "-" +
                         std::to_string(i % 50);
        auto c = store->Create(Key{"c", id}, json::object{{"id", id}});
        if (c.ok()) {
          (void)store->Erase(Key{"c", id}, *c);
          churned.fetch_add(1);
        }
      }
    });
  }
  int scans = 0;
  for (std::size_t limit : {1u, 2u, 5u, 64u}) {
    for (int rep = 0; rep < 3; ++rep, ++scans) {
      std::vector<std::string> got;
      std::string cursor;
      for (int page = 0; page < 5000; ++page) {
        auto p = store->Scan("c", cursor, limit);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        ASSERT_LE(p->documents.size(), limit);
        for (auto& [id, doc] : p->documents) {
          ASSERT_TRUE(got.empty() || got.back() < id) << "out of order: " << id;
          EXPECT_EQ(doc.value, (json::object{{"id", id}}));
          got.push_back(id);
        }
        if (p->next_cursor.empty()) break;
        ASSERT_TRUE(cursor < p->next_cursor);
        cursor = p->next_cursor;
      }
      for (const std::string& id : stable) {
        EXPECT_TRUE(std::binary_search(got.begin(), got.end(), id))
            << "limit " << limit << ": missed " << id;
      }
    }
  }
  stop = true;
  for (auto& t : churn) t.join();
  EXPECT_GT(churned.load(), 0);
  std::printf("[ churn   ] %d full scans (limits 1, 2, 5, 64) during %d create+erase pairs: "
              "ordered, no stable document missed\n", scans, churned.load());
}

}  // namespace
}  // namespace ltxtest
