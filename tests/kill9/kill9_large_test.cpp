// tests/kill9/kill9_large_test.cpp — real process crashes in the middle of large transactions:
// a worker process (large_worker.cpp) runs large transactions on an LMDB store (each: 200 rows
// inserted, 16 shared "hot" documents adjusted by 1, one document put, in chunks of 4..32
// actions) and is killed with SIGKILL at a random moment, over and over on the same store.
//
// Each round: fork+exec the worker, wait for its "ready", let it run 5..120 ms (seeded), kill -9
// it, and sort the transactions it began by what it wrote: "ack" (committed), "fail" (rolled
// back), or nothing / "unknown" (in doubt). Then reopen the store, count what the kill left
// (open records, chunk documents, held documents), run a collector (older_than 1 ms on a clock
// set to now: the worker is dead) and, with the clock 2 h on, a second pass that purges the
// outcome markers and stubs. Then audit:
//   * every transaction of the round is all or nothing: its rows number 200 or 0, read
//     committed, and no document of any collection carries a reference;
//   * acknowledged ones are there, failed ones are not, and nothing unreported is;
//   * every hot document equals the number of committed transactions over all rounds so far,
//     and kl.hot/last names one of them;
//   * no record, outcome marker or chunk document is left, the collector settled exactly the
//     records left open, without a failure, and finished only transactions found applied.
// Every fourth round the worker also runs a collector that treats transactions older than
// 30 ms as abandoned, so kills land in the middle of repairs and live transactions get claimed.
// Rounds alternate LMDB durability (nosync / nometasync, durable every fifth).
//
// Size: 30 rounds in CI (a few seconds). LITETX_LONG_TESTS=ON or LITETX_LONG=1 runs 15x as many;
// LITETX_KILL9_LARGE_ROUNDS=N sets the count. The seed is printed; LITETX_KILL9_SEED=N replays
// its choices (the kill moments relative to the worker's progress still vary with scheduling).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/large.h"
#include "engine/meta.h"
#include "engine/record.h"
#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"

#ifndef LITETX_LARGE_CRASH_WORKER
#error "LITETX_LARGE_CRASH_WORKER must name the worker executable"
#endif
#ifndef LITETX_LONG_TESTS
#define LITETX_LONG_TESTS 0
#endif

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr int kRows = 200;
constexpr int kHot = 16;

std::uint64_t EnvU64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// What one killed worker wrote before it died.
struct WorkerRun {
  std::vector<std::string> acked, failed, in_doubt;  // tags
  std::map<std::string, std::string> txn_of;         // tag -> transaction id
  std::string error;
};

WorkerRun RunAndKill(const std::vector<std::string>& args, std::chrono::milliseconds delay) {
  WorkerRun run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    run.error = "pipe2 failed";
    return run;
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(LITETX_LARGE_CRASH_WORKER));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    run.error = "fork failed";
    return run;
  }
  if (pid == 0) {  // child: async-signal-safe calls only
    ::dup2(fds[1], STDOUT_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string buffer;
  bool ready = false, eof = false;
  auto deadline = SteadyClock::now() + 10s;  // until "ready"
  auto read_some = [&](int timeout_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return;
    char chunk[65536];
    ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) {
      eof = true;
      return;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
    if (!ready && buffer.find("ready\n") != std::string::npos) {
      ready = true;
      deadline = SteadyClock::now() + delay;
    }
  };
  while (!eof && SteadyClock::now() < deadline) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    read_some(static_cast<int>(std::max<long>(0, left.count())));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  while (!eof) read_some(1000);
  ::close(fds[0]);
  if (!ready) run.error = "the worker never said ready";
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    run.error = "the worker ended by itself (status " + std::to_string(status) + ")";
  }
  std::vector<std::string> begun;
  std::set<std::string> open_tags, seen;
  std::size_t pos = 0;
  for (std::size_t nl; (nl = buffer.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    const std::string line = buffer.substr(pos, nl - pos);
    const std::size_t sp = line.find(' ');
    const std::string word = line.substr(0, sp);
    const std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (line == "ready") continue;
    if (word == "begin" && !rest.empty() && seen.insert(rest).second) {
      begun.push_back(rest);
      open_tags.insert(rest);
    } else if (word == "txn") {
      const std::size_t sp2 = rest.find(' ');
      if (sp2 == std::string::npos || !open_tags.contains(rest.substr(0, sp2))) {
        run.error = "unexpected worker line '" + line + "'";
      } else {
        run.txn_of[rest.substr(0, sp2)] = rest.substr(sp2 + 1);
      }
    } else if ((word == "ack" || word == "fail") && open_tags.erase(rest) == 1) {
      (word == "ack" ? run.acked : run.failed).push_back(rest);
    } else if (word == "unknown" && open_tags.erase(rest) == 1) {
      run.in_doubt.push_back(rest);
    } else if (run.error.empty()) {
      run.error = "unexpected worker line '" + line + "'";
    }
  }
  for (const auto& b : begun) {
    if (open_tags.contains(b)) run.in_doubt.push_back(b);
  }
  return run;
}

// Documents of `collection` (raw), all pages.
std::vector<std::pair<std::string, litetx::StoredDocument>> Scan(litetx::Store& store,
                                                                 std::string_view collection) {
  std::vector<std::pair<std::string, litetx::StoredDocument>> out;
  std::string cursor;
  for (int guard = 0; guard < 100000; ++guard) {
    auto p = store.Scan(collection, cursor, 512);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) break;
    for (auto& d : p->documents) out.push_back(std::move(d));
    if (p->next_cursor.empty()) break;
    cursor = p->next_cursor;
  }
  return out;
}

std::size_t HeldIn(litetx::Store& store, std::string_view collection) {
  std::size_t n = 0;
  for (const auto& [id, doc] : Scan(store, collection)) {
    auto m = litetx::engine::DecodeMeta(doc.value);
    EXPECT_TRUE(m.ok()) << collection << "/" << id;
    if (m.ok() && (!m->txn.empty() || m->deleting)) ++n;
  }
  return n;
}

TEST(Kill9LargeTest, WorkerKilledInTheMiddleOfLargeTransactionsLeavesAllOrNothing) {
  const std::uint64_t seed = EnvU64("LITETX_KILL9_SEED", std::random_device{}());
  const bool long_run = LITETX_LONG_TESTS != 0 || EnvU64("LITETX_LONG", 0) == 1;
  const int rounds = static_cast<int>(EnvU64("LITETX_KILL9_LARGE_ROUNDS", long_run ? 450 : 30));
  std::printf("[kill9 large] %d rounds, seed %llu (replay: LITETX_KILL9_SEED=%llu)\n", rounds,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "litetx-kill9-large-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir_template.data()), nullptr);
  const std::string dir = dir_template;
  litetx::LmdbOptions lo;
  lo.durability = litetx::LmdbDurability::kNoSync;
  {
    auto store = litetx::LmdbStore::Open(dir, lo);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    litetx::Database db(*store);
    litetx::Transaction t;
    for (int j = 0; j < kHot; ++j) t.Insert("kl.hot", "h" + std::to_string(j), {{"n", 0}});
    t.Insert("kl.hot", "last", {{"tag", ""}});
    ASSERT_TRUE(db.Commit(t).ok());
  }

  std::uint64_t committed_total = 0;
  std::set<std::string> committed_tags;
  std::uint64_t acks = 0, fails = 0, doubt = 0, doubt_applied = 0, left_open = 0, left_chunks = 0,
                left_held = 0, gc_finished = 0, gc_reversed = 0;
  const auto started = SteadyClock::now();
  for (int round = 1; round <= rounds; ++round) {
    char round_id[16];
    std::snprintf(round_id, sizeof round_id, "r%05d", round);
    const bool racing_gc = round % 4 == 0;
    const std::string sync = round % 5 == 0 ? "durable" : round % 2 == 0 ? "nometasync" : "nosync";
    const auto delay = std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 120)(rng));
    std::vector<std::string> args = {"--store",    dir,
                                     "--sync",     sync,
                                     "--round",    round_id,
                                     "--rows",     std::to_string(kRows),
                                     "--hot",      std::to_string(kHot),
                                     "--seed",     std::to_string(rng()),
                                     "--lease-ms", "2000"};
    if (racing_gc) args.insert(args.end(), {"--gc-older-than-ms", "30"});
    const std::string where = std::string("round ") + round_id + " (" + sync +
                              (racing_gc ? ", racing collector" : "") + ", killed " +
                              std::to_string(delay.count()) + " ms after ready, seed " +
                              std::to_string(seed) + ", store " + dir + ")";
    WorkerRun run = RunAndKill(args, delay);
    ASSERT_TRUE(run.error.empty()) << where << ": " << run.error;
    ASSERT_LE(run.in_doubt.size(), 1u) << where << ": one transaction at a time";

    auto opened = litetx::LmdbStore::Open(dir, lo);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::shared_ptr<litetx::Store> store = *opened;
    const std::string rows_collection = std::string("kl.rows.") + round_id;
    // What the kill left.
    std::size_t open = 0;
    for (const auto& [id, doc] : Scan(*store, litetx::kTransactionsCollection)) {
      auto rec = litetx::engine::DecodeRecord(doc.value);
      ASSERT_TRUE(rec.ok()) << where;
      if (!rec->done) ++open;
    }
    ASSERT_LE(open, 1u) << where << ": more open records than transactions in progress";
    left_open += open;
    left_chunks += Scan(*store, litetx::engine::kChunksCollection).size();
    left_held += HeldIn(*store, rows_collection) + HeldIn(*store, "kl.hot");

    // The worker is dead: everything is stale. Settle, then purge markers and stubs.
    auto clock = std::make_shared<litetx::ManualClock>(litetx::SystemClock()->NowMillis() + 1000);
    litetx::CollectorOptions go;
    go.engine.clock = clock;
    go.older_than = 1ms;
    go.name = "gc-audit";
    litetx::Collector gc(store, go);
    ASSERT_TRUE(gc.RunOnce().ok()) << where;
    // Before the purge every transaction that got a record has an answer, and it agrees with
    // what the worker reported (rows checked below).
    std::map<std::string, litetx::TxnOutcome> outcome_of;
    {
      litetx::Database asker(store);
      for (const auto& [tag, txn] : run.txn_of) {
        auto o = asker.Outcome(txn);
        ASSERT_TRUE(o.ok()) << where << ": " << o.status().ToString();
        ASSERT_TRUE(*o == litetx::TxnOutcome::kCommitted || *o == litetx::TxnOutcome::kAborted)
            << where << ": " << tag << " is " << litetx::TxnOutcomeName(*o);
        outcome_of[tag] = *o;
      }
    }
    clock->Advance(25h);
    ASSERT_TRUE(gc.RunOnce().ok()) << where;
    const litetx::CollectorStats st = gc.stats();
    ASSERT_EQ(st.failed, 0u) << where;
    ASSERT_EQ(st.finished + st.reversed, open) << where;
    gc_finished += st.finished;
    gc_reversed += st.reversed;
    ASSERT_TRUE(Scan(*store, litetx::kTransactionsCollection).empty()) << where << ": records left";
    ASSERT_TRUE(Scan(*store, litetx::engine::kChunksCollection).empty())
        << where << ": chunks left";
    ASSERT_EQ(HeldIn(*store, rows_collection) + HeldIn(*store, "kl.hot"), 0u) << where;

    // Every transaction of the round: all rows or none.
    litetx::Database db(store);
    std::map<std::string, int> rows_of;
    for (const auto& [id, doc] : Scan(*store, rows_collection)) {
      auto r = db.Read(rows_collection, id);
      ASSERT_TRUE(r.ok()) << where << ": " << r.status().ToString();
      if (r->state != litetx::DocumentState::kFound)
        continue;  // a rolled-back insert's placeholder
      ASSERT_TRUE(r->doc.contains("tag")) << where;
      ++rows_of[std::string(r->doc.at("tag").as_string())];
    }
    std::set<std::string> reported(run.acked.begin(), run.acked.end());
    reported.insert(run.failed.begin(), run.failed.end());
    reported.insert(run.in_doubt.begin(), run.in_doubt.end());
    for (const auto& [tag, txn] : run.txn_of) {
      ASSERT_EQ(outcome_of[tag] == litetx::TxnOutcome::kCommitted, rows_of.contains(tag))
          << where << ": the outcome of " << tag << " disagrees with its rows";
    }
    for (const auto& [tag, n] : rows_of) {
      ASSERT_EQ(n, kRows) << where << ": transaction " << tag << " is partly there";
      ASSERT_TRUE(reported.contains(tag)) << where << ": " << tag << " was never begun";
      committed_tags.insert(tag);
    }
    for (const auto& tag : run.acked) {
      ASSERT_TRUE(rows_of.contains(tag)) << where << ": acknowledged " << tag << " is missing";
    }
    for (const auto& tag : run.failed) {
      ASSERT_FALSE(rows_of.contains(tag)) << where << ": failed " << tag << " is there";
    }
    for (const auto& tag : run.in_doubt) doubt_applied += rows_of.contains(tag) ? 1 : 0;
    ASSERT_LE(st.finished, static_cast<std::uint64_t>(run.in_doubt.size() + run.acked.size()))
        << where;
    committed_total += rows_of.size();
    // The hot documents: each adjusted once per committed transaction, all rounds so far.
    for (int j = 0; j < kHot; ++j) {
      auto r = db.Read("kl.hot", "h" + std::to_string(j));
      ASSERT_TRUE(r.ok() && r->state == litetx::DocumentState::kFound) << where;
      ASSERT_EQ(r->doc.at("n").to_number<std::uint64_t>(), committed_total)
          << where << ": h" << j << " disagrees with the committed transactions";
    }
    auto last = db.Read("kl.hot", "last");
    ASSERT_TRUE(last.ok() && last->state == litetx::DocumentState::kFound) << where;
    const std::string last_tag(last->doc.at("tag").as_string());
    ASSERT_TRUE(committed_total == 0 ? last_tag.empty() : committed_tags.contains(last_tag))
        << where << ": last names " << last_tag;
    acks += run.acked.size();
    fails += run.failed.size();
    doubt += run.in_doubt.size();
  }
  const double secs = std::chrono::duration<double>(SteadyClock::now() - started).count();
  std::printf(
      "[kill9 large] rounds %d: committed transactions %llu (acknowledged %llu), failed "
      "%llu, in doubt at the kill %llu (applied %llu); the kills left %llu open records, "
      "%llu chunk documents, %llu held documents; the collector finished %llu and "
      "reversed %llu; %.1f s\n",
      rounds, static_cast<unsigned long long>(committed_total),
      static_cast<unsigned long long>(acks), static_cast<unsigned long long>(fails),
      static_cast<unsigned long long>(doubt), static_cast<unsigned long long>(doubt_applied),
      static_cast<unsigned long long>(left_open), static_cast<unsigned long long>(left_chunks),
      static_cast<unsigned long long>(left_held), static_cast<unsigned long long>(gc_finished),
      static_cast<unsigned long long>(gc_reversed), secs);
  if (rounds >= 20) {
    // Kills land mid-transaction: the collector had records to reverse, chunks and holds were
    // left behind, and transactions were committed.
    EXPECT_GT(acks, 0u);
    EXPECT_GT(gc_reversed, 0u);
    EXPECT_GT(left_chunks, 0u);
    EXPECT_GT(left_held, 0u);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
