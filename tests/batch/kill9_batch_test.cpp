// tests/batch/kill9_batch_test.cpp — real process crashes in the middle of a batch step: a
// worker process (kill9_batch_worker.cpp) runs a step over an NDJSON file of 20,000 items (with
// unreadable lines, poison items and blank lines) on an LMDB store, and is killed with SIGKILL
// at a random moment, over and over, on the same store.
//
// Each round: fork+exec the worker, wait for its "ready" and then for a random number (1..12)
// of committed chunks, let it run 0..20 ms more (seeded), kill -9 it. Then reopen the store and
// run a collector that treats every transaction as abandoned (older_than 1 ms on a clock set to
// now: the worker is dead), and audit what is committed so far: every output written once
// ("writes" 1), the shared counter equal to the number of outputs, and the outputs equal to
// what the committed chunk documents say they wrote. Rounds alternate one chunk at a time and
// three concurrent chunks. After the kill rounds the worker runs to the end (no kill), and the
// final audit checks: the step completed; every good item's output exactly once with its
// content; a skip record for each unreadable line (phase read) and each poison item (phase
// process); the counts equal what the input holds and balance; no transaction left open and
// no document held.
//
// Size: 8 kill rounds (a few seconds). LITETX_LONG_TESTS=ON or LITETX_LONG=1 runs 40 over
// 100,000 items;
// LITETX_BATCH_KILL9_ROUNDS=N sets the count. The seed is printed; LITETX_BATCH_KILL9_SEED=N
// replays its choices (the kill moments relative to the worker's progress still vary).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "batch_util.h"

#ifndef LITETX_BATCH_KILL9_WORKER
#error "LITETX_BATCH_KILL9_WORKER must name the worker executable"
#endif
#ifndef LITETX_LONG_TESTS
#define LITETX_LONG_TESTS 0
#endif

namespace {

using namespace bt;
using SteadyClock = std::chrono::steady_clock;

std::uint64_t EnvU64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// What one worker run printed and how it ended.
struct WorkerRun {
  bool ready = false;
  int chunks = 0;          // "chunk k" lines
  std::string done;        // the "done" line's JSON, if it completed
  std::string failed;      // the "failed" or "refused" line, if any
  bool killed = false;     // ended by our SIGKILL
  int exit_code = -1;      // if it exited by itself
  std::string error;       // a problem of the harness or an unexpected line
};

// Runs the worker; with `kill_after_chunks` > 0, kills it `delay` after it printed that many
// chunk lines (or when it ends by itself first). Bounded: 120 s in all.
WorkerRun RunWorker(const std::vector<std::string>& args, int kill_after_chunks,
                    std::chrono::milliseconds delay) {
  WorkerRun run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    run.error = "pipe2 failed";
    return run;
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(LITETX_BATCH_KILL9_WORKER));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
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
  std::size_t parsed = 0;
  bool eof = false;
  const auto hard_deadline = SteadyClock::now() + std::chrono::seconds(120);
  std::optional<SteadyClock::time_point> kill_at;
  auto parse = [&] {
    for (std::size_t nl; (nl = buffer.find('\n', parsed)) != std::string::npos; parsed = nl + 1) {
      const std::string line = buffer.substr(parsed, nl - parsed);
      if (line == "ready") {
        run.ready = true;
      } else if (line.rfind("chunk ", 0) == 0) {
        ++run.chunks;
      } else if (line.rfind("done ", 0) == 0) {
        run.done = line.substr(5);
      } else if (line.rfind("failed ", 0) == 0 || line.rfind("refused ", 0) == 0) {
        run.failed = line;
      } else if (run.error.empty()) {
        run.error = "unexpected worker line '" + line + "'";
      }
    }
  };
  while (!eof) {
    const auto now = SteadyClock::now();
    if (now >= hard_deadline) {
      run.error = "the worker did not end within 120 s";
      break;
    }
    if (kill_after_chunks > 0 && !kill_at && run.chunks >= kill_after_chunks) kill_at = now + delay;
    if (kill_at && now >= *kill_at) break;
    auto until = kill_at ? *kill_at : hard_deadline;
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::clamp<long>(wait_ms, 0, 1000))) > 0) {
      char chunk[65536];
      const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
      if (n <= 0) {
        eof = true;
      } else {
        buffer.append(chunk, static_cast<std::size_t>(n));
        parse();
      }
    }
  }
  if (!eof) {
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  // Whatever it printed before it died.
  for (;;) {
    char chunk[65536];
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  parse();
  ::close(fds[0]);
  if (WIFSIGNALED(status)) {
    run.killed = WTERMSIG(status) == SIGKILL;
    if (!run.killed && run.error.empty()) {
      run.error = "the worker died of signal " + std::to_string(WTERMSIG(status));
    }
  } else if (WIFEXITED(status)) {
    run.exit_code = WEXITSTATUS(status);
  }
  if (!run.ready && run.error.empty()) run.error = "the worker never said ready";
  return run;
}

// The input: items {"id", "i", "v"} (some with "poison": true), unreadable lines and blank
// lines. Records each non-blank line's position (the step's item position) and what it is.
struct Input {
  std::string path;
  std::uint64_t items = 0;                   // lines that read as items
  std::set<std::uint64_t> unreadable;        // positions of lines that fail to read
  std::map<std::uint64_t, std::string> poison;  // position -> key
  std::map<std::string, std::int64_t> good;     // key -> v, for the items written
};

std::int64_t ValueOf(std::uint64_t i) { return static_cast<std::int64_t>((i * 40503u) % 65521u); }

Input WriteInput(const std::string& path, std::uint64_t n, std::mt19937_64& rng) {
  Input in;
  in.path = path;
  std::ofstream f(path, std::ios::binary);
  std::uint64_t position = 0;
  std::bernoulli_distribution bad(0.002), blank(0.0025), poisoned(0.0015);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (blank(rng)) f << "\n";
    if (bad(rng)) {
      f << "{\"id\": \"broken-" << i << "\", \"i\": \n";  // not valid JSON
      in.unreadable.insert(position++);
    }
    const std::string key = Key(i);
    json::object o{{"id", key}, {"i", i}, {"v", ValueOf(i)}};
    if (poisoned(rng)) {
      o["poison"] = true;
      in.poison.emplace(position, key);
    } else {
      in.good.emplace(key, ValueOf(i));
    }
    f << json::serialize(o) << "\n";
    ++in.items;
    ++position;
  }
  return in;
}

// Every document of `collection` through one scan (LMDB).
std::vector<std::pair<std::string, litetx::StoredDocument>> ScanWhole(litetx::Store& store,
                                                                      std::string_view c) {
  return ltxtest::ScanAll(store, c, 4096);
}

// What is committed now, read through a Database after the collector settled everything.
struct Audit {
  std::map<std::string, json::object> outputs;  // out/<key> -> user fields
  std::int64_t counter = -1;
  std::uint64_t chunk_docs = 0;
  litetx::batch::Counts chunk_counts;  // summed over the chunk documents
  std::map<std::uint64_t, json::object> skips;  // position -> skip record
  std::uint64_t held = 0;              // documents still referencing a transaction
  std::uint64_t open_records = 0;
};

Audit Look(const std::shared_ptr<litetx::Store>& store, const std::string& job) {
  Audit a;
  litetx::Database db(store);
  for (const char* c : {"out", "stats", "litetx_batch"}) {
    for (const auto& [id, doc] : ScanWhole(*store, c)) {
      auto m = litetx::engine::DecodeMeta(doc.value);
      EXPECT_TRUE(m.ok()) << c << "/" << id;
      if (m.ok() && (!m->txn.empty() || m->deleting)) ++a.held;
    }
  }
  for (const auto& [id, doc] : ScanWhole(*store, litetx::kTransactionsCollection)) {
    const json::value* done = doc.value.if_contains("done");
    if (done == nullptr || !done->is_bool() || !done->get_bool()) ++a.open_records;
  }
  a.outputs = CommittedAll(db, "out");
  if (auto c = Committed(db, "stats", "counter")) a.counter = c->at("items").to_number<std::int64_t>();
  const std::string chunk_prefix = job + "/step/chunk/", skip_prefix = job + "/step/skip/";
  for (const auto& [id, doc] : CommittedAll(db, "litetx_batch")) {
    if (id.rfind(chunk_prefix, 0) == 0) {
      ++a.chunk_docs;
      auto c = litetx::batch::Counts::FromJson(doc.at("counts").as_object());
      EXPECT_TRUE(c.ok()) << id;
      if (c.ok()) a.chunk_counts += *c;
    } else if (id.rfind(skip_prefix, 0) == 0) {
      a.skips.emplace(std::stoull(id.substr(skip_prefix.size())), doc);
    }
  }
  return a;
}

TEST(BatchKill9Test, WorkerKilledAtRandomResumesAndWritesEveryItemOnce) {
  const std::uint64_t seed = EnvU64("LITETX_BATCH_KILL9_SEED", std::random_device{}());
  const bool long_run = LITETX_LONG_TESTS != 0 || EnvU64("LITETX_LONG", 0) == 1;
  const int rounds = static_cast<int>(EnvU64("LITETX_BATCH_KILL9_ROUNDS", long_run ? 40 : 8));
  const std::uint64_t kItems = long_run ? 100'000 : 20'000;
  constexpr int kInterval = 100;
  std::printf("[batch kill9] %d kill rounds, seed %llu (replay: LITETX_BATCH_KILL9_SEED=%llu)\n",
              rounds, static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  const auto started = SteadyClock::now();
  std::mt19937_64 rng(seed);
  ltxtest::TempDir dir;
  const std::string store_dir = dir.Sub("store");
  const Input in = WriteInput(dir.Sub("input.ndjson"), kItems, rng);
  const std::string job = "kill9-job";
  litetx::LmdbOptions lo;
  lo.durability = litetx::LmdbDurability::kNoSync;
  {
    auto store = litetx::LmdbStore::Open(store_dir, lo);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    litetx::Database db(*store);
    ASSERT_TRUE(db.Commit(litetx::Transaction().Insert("stats", "counter", {{"items", 0}})).ok());
  }
  auto args = [&](int concurrency) {
    return std::vector<std::string>{"--store",           store_dir,
                                    "--input",           in.path,
                                    "--job",             job,
                                    "--lease-ms",        "2000",
                                    "--commit-interval", std::to_string(kInterval),
                                    "--concurrency",     std::to_string(concurrency)};
  };
  // After a worker ended (killed or not): settle what it left, then check what is committed.
  std::uint64_t left_open = 0, left_held = 0, reversed = 0, finished = 0;
  auto settle_and_check = [&](const std::string& where) -> Audit {
    auto opened = litetx::LmdbStore::Open(store_dir, lo);
    EXPECT_TRUE(opened.ok()) << where << ": " << opened.status().ToString();
    if (!opened.ok()) return {};
    std::shared_ptr<litetx::Store> store = *opened;
    Audit before = Look(store, job);
    left_open += before.open_records;
    left_held += before.held;
    auto clock = std::make_shared<litetx::ManualClock>(litetx::SystemClock()->NowMillis() + 1000);
    litetx::CollectorOptions go;
    go.engine.clock = clock;
    go.engine.logger = ltxtest::QuietLogger();
    go.older_than = std::chrono::milliseconds(1);
    go.name = "gc-kill9-batch";
    litetx::Collector gc(store, go);
    EXPECT_TRUE(gc.RunOnce().ok()) << where;
    EXPECT_EQ(gc.stats().failed, 0u) << where;
    EXPECT_EQ(gc.stats().reversed + gc.stats().finished, before.open_records) << where;
    reversed += gc.stats().reversed;
    finished += gc.stats().finished;
    Audit a = Look(store, job);
    EXPECT_EQ(a.open_records, 0u) << where;
    EXPECT_EQ(a.held, 0u) << where;
    // Exactly once so far: each output written once, the counter counting each once, and the
    // outputs those the committed chunks wrote.
    std::uint64_t twice = 0;
    for (const auto& [id, doc] : a.outputs) twice += doc.at("writes") == 1 ? 0 : 1;
    EXPECT_EQ(twice, 0u) << where;
    EXPECT_EQ(a.counter, static_cast<std::int64_t>(a.outputs.size())) << where;
    EXPECT_EQ(a.chunk_counts.written, a.outputs.size()) << where;
    EXPECT_EQ(a.chunk_counts.skips(), a.skips.size()) << where;
    return a;
  };

  int kills = 0, ran_to_end = 0, worker_runs = 0;
  std::uint64_t chunks_at_kills = 0;
  std::vector<std::string> kill_points;
  bool completed = false;
  std::string done_line;
  for (int round = 1; round <= rounds && !completed; ++round) {
    const int concurrency = round % 2 == 1 ? 1 : 3;
    const int after = std::uniform_int_distribution<int>(1, 12)(rng);
    const auto delay = std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 20)(rng));
    const std::string where = "round " + std::to_string(round) + " (concurrency " +
                              std::to_string(concurrency) + ", killed " +
                              std::to_string(delay.count()) + " ms after " +
                              std::to_string(after) + " chunks; seed " + std::to_string(seed) + ")";
    ++worker_runs;
    WorkerRun run = RunWorker(args(concurrency), after, delay);
    ASSERT_TRUE(run.error.empty()) << where << ": " << run.error;
    if (run.killed) {
      ++kills;
      chunks_at_kills += static_cast<std::uint64_t>(run.chunks);
      kill_points.push_back(std::to_string(run.chunks));
    } else {
      ++ran_to_end;
      ASSERT_EQ(run.exit_code, 0) << where << ": " << run.failed;
      ASSERT_FALSE(run.done.empty()) << where;
      completed = true;
      done_line = run.done;
    }
    settle_and_check(where);
    if (HasFatalFailure()) return;
  }
  // To the end, without a kill (a few runs at most: a run may stop on a failure it reports).
  for (int attempt = 1; attempt <= 3 && !completed; ++attempt) {
    ++worker_runs;
    WorkerRun run = RunWorker(args(2), 0, std::chrono::milliseconds(0));
    const std::string where = "final run " + std::to_string(attempt);
    ASSERT_TRUE(run.error.empty()) << where << ": " << run.error;
    ASSERT_FALSE(run.killed) << where;
    if (run.exit_code == 0 && !run.done.empty()) {
      ++ran_to_end;
      completed = true;
      done_line = run.done;
    } else {
      ADD_FAILURE() << where << " ended with " << run.exit_code << ": " << run.failed;
    }
    settle_and_check(where);
  }
  ASSERT_TRUE(completed);

  // The final audit.
  auto opened = litetx::LmdbStore::Open(store_dir, lo);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<litetx::Store> store = *opened;
  Audit a = Look(store, job);
  EXPECT_EQ(a.open_records, 0u);
  EXPECT_EQ(a.held, 0u);
  EXPECT_EQ(a.outputs.size(), in.good.size());
  std::uint64_t wrong = 0;
  for (const auto& [key, v] : in.good) {
    auto it = a.outputs.find(key);
    if (it == a.outputs.end() || it->second.at("writes") != 1 || it->second.at("v") != v) {
      if (++wrong <= 5) {
        ADD_FAILURE() << key << ": "
                      << (it == a.outputs.end() ? std::string("missing") : json::serialize(it->second));
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  for (const auto& [p, key] : in.poison) EXPECT_FALSE(a.outputs.contains(key)) << key;
  EXPECT_EQ(a.counter, static_cast<std::int64_t>(in.good.size()));
  // Skip records: each unreadable line (read), each poison item (process), nothing else.
  EXPECT_EQ(a.skips.size(), in.unreadable.size() + in.poison.size());
  for (std::uint64_t p : in.unreadable) {
    auto it = a.skips.find(p);
    ASSERT_TRUE(it != a.skips.end()) << "no skip record for unreadable position " << p;
    EXPECT_EQ(it->second.at("phase"), "read") << p;
    EXPECT_EQ(it->second.at("code"), "invalid_argument") << p;
  }
  for (const auto& [p, key] : in.poison) {
    auto it = a.skips.find(p);
    ASSERT_TRUE(it != a.skips.end()) << "no skip record for poison item " << key;
    EXPECT_EQ(it->second.at("phase"), "process") << p;
    EXPECT_EQ(it->second.at("key"), json::value(key)) << p;
  }
  // The counts: what the input holds, balanced, stored and reported alike.
  litetx::Database db(store);
  litetx::batch::StepOptions so;
  so.job = job;
  auto st = litetx::batch::ReadStepStatus(db, so);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->status, "completed");
  EXPECT_EQ(st->execution, static_cast<std::uint64_t>(worker_runs));
  const litetx::batch::Counts& t = st->total;
  EXPECT_EQ(t.read, in.items);
  EXPECT_EQ(t.read_skips, in.unreadable.size());
  EXPECT_EQ(t.process_skips, in.poison.size());
  EXPECT_EQ(t.written, in.good.size());
  EXPECT_EQ(t.read, t.written + t.filtered + t.process_skips + t.write_skips + t.recovered);
  EXPECT_EQ(st->chunks, a.chunk_docs);
  EXPECT_EQ(st->chunks, (in.items + in.unreadable.size() + kInterval - 1) / kInterval);
  EXPECT_EQ(json::serialize(a.chunk_counts.ToJson()), json::serialize(t.ToJson()));
  const json::value done = json::parse(done_line);
  EXPECT_EQ(json::serialize(done.at("total")), json::serialize(t.ToJson()));

  const double secs = std::chrono::duration<double>(SteadyClock::now() - started).count();
  std::string points;
  for (const auto& k : kill_points) points += (points.empty() ? "" : ",") + k;
  std::printf(
      "[batch kill9] items %llu (%zu unreadable lines, %zu poison); worker runs %d: killed %d "
      "(after %s chunks of their run), ran to the end %d; the kills left %llu open records and "
      "%llu held documents, the collector reversed %llu and finished %llu; final: %llu chunks, "
      "%llu commits, %llu rollbacks, %llu executions; %.1f s\n",
      static_cast<unsigned long long>(in.items), in.unreadable.size(), in.poison.size(),
      worker_runs, kills, points.c_str(), ran_to_end,
      static_cast<unsigned long long>(left_open), static_cast<unsigned long long>(left_held),
      static_cast<unsigned long long>(reversed), static_cast<unsigned long long>(finished),
      static_cast<unsigned long long>(st->chunks), static_cast<unsigned long long>(t.commits),
      static_cast<unsigned long long>(t.rollbacks), static_cast<unsigned long long>(st->execution),
      secs);
  std::fflush(stdout);
  EXPECT_EQ(kills, rounds) << "a worker completed the step before every kill round was used";
  EXPECT_GT(chunks_at_kills, 0u);
  // The kills landed inside transactions: they left records open or documents held.
  EXPECT_GT(left_open + left_held, 0u);
}

}  // namespace
