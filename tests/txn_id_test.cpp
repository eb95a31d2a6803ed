// tests/txn_id_test.cpp — transaction ids are never shared: not between threads, not between a
// process and the child it fork()ed. A shared id would let one transaction take another's
// document reference (or lock) for its own and build on its uncommitted value.
//
// The fork tests run the child in the same test binary: it only draws ids or commits through
// its own LMDB store, reports over a pipe and leaves with _exit (no GoogleTest in the child).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/txn_id.h"
#include "test_util.h"

namespace ltxtest {
namespace {

namespace fs = std::filesystem;
using litetx::Transaction;
using litetx::engine::NewTxnId;

constexpr std::size_t kIdLength = 28;

bool WellFormed(const std::string& id) {
  return id.size() == kIdLength && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Writes all of `data` to `fd`; false on error.
bool WriteAll(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads until EOF.
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// The child's exit status, or -1 if it did not exit normally.
int Reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TxnIdTest, ThreadsNeverDrawTheSameId) {
  constexpr int kThreads = 8;
  constexpr int kEach = 20'000;
  std::vector<std::vector<std::string>> drawn(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&drawn, t] {
      drawn[t].reserve(kEach);
      for (int i = 0; i < kEach; ++i) drawn[t].push_back(NewTxnId());
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> all;
  for (const auto& ids : drawn) {
    for (const auto& id : ids) {
      ASSERT_TRUE(WellFormed(id)) << id;
      all.insert(id);
    }
  }
  EXPECT_EQ(all.size(), std::size_t{kThreads} * kEach) << "an id was drawn twice";
}

// An id carries its partition and the millisecond it was made: the ids of one partition sort by
// age, every partition is drawn, and a 24-digit id of earlier releases has a partition but no
// time.
TEST(TxnIdTest, IdsCarryAPartitionAndTheirMillisecond) {
  using litetx::engine::TxnIdMillis;
  using litetx::engine::TxnIdPartition;
  auto wall = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  std::vector<int> per_partition(litetx::engine::kTxnIdPartitions, 0);
  std::vector<std::string> ids;
  for (int i = 0; i < 2'000; ++i) {
    const auto before = wall();
    std::string id = NewTxnId();
    const auto after = wall();
    ASSERT_TRUE(WellFormed(id)) << id;
    auto ms = TxnIdMillis(id);
    ASSERT_TRUE(ms.has_value()) << id;
    EXPECT_GE(*ms, before) << id;
    EXPECT_LE(*ms, after) << id;
    const int p = TxnIdPartition(id);
    ASSERT_GE(p, 0);
    ASSERT_LT(p, litetx::engine::kTxnIdPartitions);
    ++per_partition[static_cast<std::size_t>(p)];
    ids.push_back(std::move(id));
    if (i % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int p = 0; p < litetx::engine::kTxnIdPartitions; ++p) {
    EXPECT_GT(per_partition[static_cast<std::size_t>(p)], 40) << "partition " << p;
  }
  // Within a partition, byte order is the order of the millisecond.
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (std::size_t j = i + 1; j < ids.size(); j += 97) {
      if (ids[i][0] != ids[j][0]) continue;
      if (*TxnIdMillis(ids[i]) < *TxnIdMillis(ids[j])) EXPECT_LT(ids[i], ids[j]);
    }
  }
  EXPECT_EQ(TxnIdPartition("0123456789abcdef01234567"), 0);
  EXPECT_FALSE(TxnIdMillis("0123456789abcdef01234567").has_value());
  EXPECT_EQ(TxnIdPartition(""), -1);
  EXPECT_EQ(TxnIdPartition("X"), -1);
  EXPECT_FALSE(TxnIdMillis("g000000000000000000000000000").has_value());
}

TEST(TxnIdTest, ForkedChildAndParentDrawDifferentIds) {
  constexpr int kEach = 10'000;
  (void)NewTxnId();  // this thread's id source is in use when fork() copies the process
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    for (int i = 0; i < kEach; ++i) {
      std::string id = NewTxnId();
      if (!WriteAll(fds[1], id.data(), id.size())) ::_exit(2);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::set<std::string> parent;
  for (int i = 0; i < kEach; ++i) parent.insert(NewTxnId());
  const std::string child = ReadAll(fds[0]);
  ::close(fds[0]);
  ASSERT_EQ(Reap(pid), 0);
  ASSERT_EQ(child.size(), kEach * kIdLength);
  int shared = 0;
  std::string first_shared;
  for (std::size_t off = 0; off < child.size(); off += kIdLength) {
    std::string id = child.substr(off, kIdLength);
    ASSERT_TRUE(WellFormed(id)) << id;
    if (parent.count(id) != 0 && shared++ == 0) first_shared = id;
  }
  EXPECT_EQ(shared, 0) << "the child drew " << shared << " of the parent's ids, e.g. "
                       << first_shared;
}

// What the child reports: its commit's status code and the body of c/x it then reads raw.
struct ChildReport {
  int code = -1;
  std::string body;
};

TEST(TxnIdTest, ForkedChildDoesNotTakeTheParentsHoldForItsOwn) {
  TempDir dir;
  auto clock = std::make_shared<litetx::ManualClock>();
  litetx::Options opts;
  opts.clock = clock;
  opts.busy_timeout = 50ms;
  {
    auto store = litetx::LmdbStore::Open(dir.str());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    litetx::Database seed(*store, opts);
    // Also puts this thread's id source in use before fork() copies it.
    MustCommit(seed, Transaction().Insert("c", "x", {{"n", 1}}).Insert("c", "y", {{"n", 1}}));
  }
  int go[2], report[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(report), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: once the parent holds c/x, a one-action commit on it, from its own store.
    ::close(go[1]);
    ::close(report[0]);
    char byte = 0;
    if (::read(go[0], &byte, 1) != 1) ::_exit(2);
    auto store = litetx::LmdbStore::Open(dir.str());
    if (!store.ok()) ::_exit(3);
    litetx::Database db(*store, opts);
    auto r = db.Commit(Transaction().Adjust("c", "x", {{"n", 10}}));
    auto raw = (*store)->Get(Key{"c", "x"});
    if (!raw.ok() || !raw->has_value()) ::_exit(4);
    std::string line = std::to_string(static_cast<int>(r.code())) + " " +
                       json::serialize(litetx::engine::UserFields((*raw)->value));
    if (!WriteAll(report[1], line.data(), line.size())) ::_exit(5);
    ::_exit(0);
  }
  ::close(go[0]);
  ::close(report[1]);
  // Parent: a transaction that applies c/x and then stops before its commit point (its
  // coordinator "dies"), so c/x stays held by it, uncommitted, within its lease.
  auto store = litetx::LmdbStore::Open(dir.str());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto hook = std::make_shared<HookStore>(*store);
  std::string holder;
  int writes = 0;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && s.ok()) holder = c.key.id;
    if (c.is_write() && s.ok() && ++writes == 2) throw std::runtime_error("coordinator dies");
    return std::nullopt;
  };
  {
    litetx::Database parent(hook, opts);
    EXPECT_THROW((void)parent.Commit(
                     Transaction().Update("c", "x", {{"n", 7}}).Update("c", "y", {{"n", 7}})),
                 std::runtime_error);
  }
  ASSERT_FALSE(holder.empty());
  ASSERT_EQ(MetaOf(**store, "c", "x").txn, holder);
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  ::close(go[1]);
  const std::string line = ReadAll(report[0]);
  ::close(report[0]);
  ASSERT_EQ(Reap(pid), 0);
  ChildReport child;
  const auto space = line.find(' ');
  ASSERT_NE(space, std::string::npos) << line;
  child.code = std::atoi(line.substr(0, space).c_str());
  child.body = line.substr(space + 1);
  // The child waited for the live holder and gave up, as any other transaction must; it did not
  // write 7 + 10 over the parent's uncommitted 7.
  EXPECT_EQ(child.code, static_cast<int>(Code::kBusy)) << line;
  EXPECT_EQ(child.body, R"({"n":7})") << "the child wrote over the parent's uncommitted value";
  EXPECT_EQ(MetaOf(**store, "c", "x").txn, holder);
}

}  // namespace
}  // namespace ltxtest
