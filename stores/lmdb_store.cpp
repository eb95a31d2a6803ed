#include "litetx/lmdb_store.h"

#include <lmdb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/json/error.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serializer.hpp>
#include <boost/json/value.hpp>

#include "engine/json_text.h"
#include "litetx/document.h"

namespace litetx {

namespace json = boost::json;

namespace {

// The last revision handed out. Contains no '\0', so no document key (which always does) can
// be equal to it, and no collection prefix (collection + '\0') can cover it.
constexpr std::string_view kCounterKey{"\x01rev", 4};
constexpr std::size_t kRevisionBytes = 8;
// Reader lock-table slots (shared by every process; the first opener sizes the lock file).
// With MDB_NOTLS a slot is held only for the duration of one Get or Scan page.
constexpr unsigned kMaxReaders = 1024;
// Bound on retries after map resizes (each at least doubles the map or adopts a bigger one).
constexpr int kMaxAttempts = 64;

void PutRevision(char* out, Revision r) {
  for (std::size_t i = 0; i < kRevisionBytes; ++i) {
    out[i] = static_cast<char>(static_cast<unsigned char>((r >> (8 * i)) & 0xff));
  }
}

Revision GetRevision(const void* data) {
  const auto* b = static_cast<const unsigned char*>(data);
  Revision r = 0;
  for (std::size_t i = 0; i < kRevisionBytes; ++i) r |= static_cast<Revision>(b[i]) << (8 * i);
  return r;
}

MDB_val Val(std::string_view s) {
  MDB_val v;
  v.mv_size = s.size();
  v.mv_data = const_cast<char*>(s.data());  // LMDB never writes through a key or put value
  return v;
}

std::string_view View(const MDB_val& v) {
  return {static_cast<const char*>(v.mv_data), v.mv_size};
}

std::string Quoted(std::string_view s) {
  std::string out = "'";
  out.append(s);
  out += "'";
  return out;
}

// The Status for an LMDB (or errno) failure of an operation that certainly wrote nothing.
Status MdbError(int rc, std::string_view what, const std::string& path) {
  std::string msg = "lmdb " + Quoted(path) + ": " + std::string(what) + ": " + mdb_strerror(rc);
  switch (rc) {
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
      return Status::Corruption(std::move(msg));
    case MDB_VERSION_MISMATCH:
    case MDB_INCOMPATIBLE:
      return Status::FailedPrecondition(std::move(msg));
    case MDB_BAD_VALSIZE:
      return Status::InvalidArgument(std::move(msg));
    default:  // MDB_READERS_FULL, MDB_MAP_FULL after all retries, MDB_PANIC, EAGAIN, EIO, ...
      return Status::Unavailable(std::move(msg));
  }
}

// The Status for a failed mdb_txn_commit. LMDB writes the data pages first and the meta page
// (the commit point) last, and reports most failures (no space, LMDB limits) before the meta
// page is touched: nothing was written. An I/O error may come from the meta page write or its
// sync, after which the commit may or may not be on disk: kUnknown.
Status CommitError(int rc, std::string_view what, const std::string& path) {
  if (rc < 0 || rc == ENOSPC || rc == ENOMEM || rc == EDQUOT || rc == EINVAL) {
    return MdbError(rc, what, path);
  }
  return Status::Unknown("lmdb " + Quoted(path) + ": " + std::string(what) +
                         ": commit failed, outcome unknown: " + mdb_strerror(rc));
}

// The Status for a failure of Open (mdb_env_open or the file checks before it).
Status OpenError(int rc, std::string_view what, const std::string& path) {
  std::string msg = "lmdb: cannot open " + Quoted(path) + ": " + std::string(what) + ": " +
                    mdb_strerror(rc);
  switch (rc) {
    case ENOENT:
    case ENOTDIR:
    case EACCES:
    case EPERM:
    case EROFS:
    case ENAMETOOLONG:
    case ELOOP:
    case EISDIR:
      return Status::InvalidArgument(std::move(msg));
    default:  // corruption, version mismatch, or transient (kUnavailable)
      return Status(MdbError(rc, what, path).code(), std::move(msg));
  }
}

Status OutOfMemory(std::string_view what) {
  return Status::Unavailable("lmdb: " + std::string(what) + ": out of memory");
}

// A transaction that is aborted unless committed; keeps the write lock and reader slots from
// leaking on any early return (or exception).
class Txn {
 public:
  Txn() = default;
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  int Begin(MDB_env* env, unsigned flags) { return mdb_txn_begin(env, nullptr, flags, &txn_); }
  int Commit() {
    MDB_txn* t = std::exchange(txn_, nullptr);
    return mdb_txn_commit(t);  // frees the transaction whatever the outcome
  }
  void Abort() {
    if (txn_ != nullptr) mdb_txn_abort(std::exchange(txn_, nullptr));
  }
  MDB_txn* get() const { return txn_; }

 private:
  MDB_txn* txn_ = nullptr;
};

class Cursor {
 public:
  explicit Cursor(MDB_cursor* c) : c_(c) {}
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;
  ~Cursor() {
    if (c_ != nullptr) mdb_cursor_close(c_);
  }
  MDB_cursor* get() const { return c_; }

 private:
  MDB_cursor* c_;
};

// Decodes a stored value: 8-byte little-endian revision, then a JSON object.
Result<StoredDocument> Decode(const MDB_val& v, std::string_view where) {
  if (v.mv_size < kRevisionBytes) {
    return Status::Corruption("lmdb: value of " + std::string(where) + " has " +
                              std::to_string(v.mv_size) +
                              " bytes, fewer than its 8-byte revision");
  }
  StoredDocument doc;
  doc.revision = GetRevision(v.mv_data);
  json::parse_options opt;
  opt.allow_invalid_utf8 = true;
  // Create and Replace never write deeper values; deeper text was written by something else,
  // and building (then copying, comparing, destroying) it would recurse that deep.
  opt.max_depth = kMaxStoredNestingDepth;
  json::error_code ec;
  json::value jv = engine::ParseJson(View(v).substr(kRevisionBytes), ec, opt);
  if (ec == json::error::too_deep) {
    return Status::Corruption("lmdb: value of " + std::string(where) +
                              " nests objects and arrays deeper than " +
                              std::to_string(kMaxStoredNestingDepth) + " levels");
  }
  if (ec) {
    return Status::Corruption("lmdb: value of " + std::string(where) +
                              " is not valid JSON: " + ec.message());
  }
  if (!jv.is_object()) {
    return Status::Corruption("lmdb: value of " + std::string(where) + " is not a JSON object");
  }
  doc.value = std::move(jv.as_object());
  return doc;
}

std::string Describe(const Key& key) { return Quoted(key.collection) + "/" + Quoted(key.id); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// The environment, shared by every LmdbStore of this process on one directory.

struct LmdbStore::Env {
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  ~Env();

  // This process's writers take turns here before LMDB's own writer mutex (process-shared,
  // robust, so a waiter always sleeps in the kernel). A write transaction lasts microseconds,
  // so a waiter spins a little first: a committing thread and a finishing thread of one
  // process then hand the writer's turn to each other without a sleep and a wake-up each time.
  std::unique_lock<std::mutex> WriterTurn() {
    std::unique_lock<std::mutex> turn(writer_turn, std::try_to_lock);
    for (int spin = 0; spin < 4000 && !turn.owns_lock(); ++spin) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      turn.try_lock();
    }
    if (!turn.owns_lock()) turn.lock();
    return turn;
  }
  std::mutex writer_turn;

  // Shared lock for one operation. Waits behind a pending resize so that a steady stream of
  // operations cannot starve it.
  std::shared_lock<std::shared_mutex> Enter() {
    if (resize_wanted.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> wait_for_resize(gate);
    }
    return std::shared_lock<std::shared_mutex>(mu);
  }

  // REQUIRES: a shared or exclusive lock on mu.
  std::size_t MapBytes() const {
    MDB_envinfo info;
    mdb_env_info(env, &info);
    return info.me_mapsize;
  }

  Status Broken() const {
    return Status::Unavailable("lmdb " + Quoted(path) +
                               ": the memory map could not be resized; reopen the store");
  }

  // Resizes the map with no transaction of this process open. grow: double it, unless it is
  // already larger than `observed` (another thread grew it meanwhile). !grow: adopt the size
  // another process grew the database to (MDB_MAP_RESIZED).
  Status Remap(bool grow, std::size_t observed);

  // One operation of a write transaction: a create, replace or erase (or a get, in a batch
  // that writes), with its key and value already encoded and checked.
  struct Item {
    BatchOp::Type type = BatchOp::Type::kGet;
    std::string key;    // EncodeKey
    std::string value;  // kCreate, kReplace: 8 placeholder bytes, then the JSON text
    Revision expected = 0;
    std::string describe;  // Describe(key), for messages
    BatchResult result;
  };

  // Runs `items` (in order) in a write transaction and returns with their results set. Group
  // commit (unless kNoSync, where each caller writes its own transaction): the items of every caller that arrives while a transaction is being written are
  // run together by one of them (the leader) in the next transaction, with one commit (one
  // fsync); the others wait for their results. A caller that finds no transaction under way
  // becomes the leader at once, so a lone caller waits for nobody. An item that fails its
  // condition fails alone; an LMDB error that aborts the transaction fails every write of it
  // (nothing is written), and then each caller's items are run again in a transaction of
  // their own, so that one caller's failure does not become another's.
  void WriteItems(std::vector<Item>* items);

  // Runs the items of `groups` in one write transaction, growing or adopting the map and
  // retrying as needed. On an error that aborts the transaction (or a failed commit), sets no
  // result and returns the Status; on OK every item's result is set.
  Status RunWriteTransaction(const std::vector<std::vector<Item>*>& groups);
  // RunWriteTransaction, and if the shared transaction failed as a whole, each group again on
  // its own; sets every item's result.
  void RunGroups(const std::vector<std::vector<Item>*>& groups);
  // Applies one item inside `txn`: sets its result (refusals included) and returns 0, or
  // returns the LMDB error that aborts the transaction.
  int ApplyItem(MDB_txn* txn, Item* item) const;

  // Write transactions committed by this process on this environment.
  std::atomic<std::uint64_t> commits{0};

  // Runs `body(txn)` (returning Result<T>) in one read-only transaction.
  template <typename T, typename Body>
  Result<T> Read(std::string_view what, Body&& body);

  // Increments the revision counter inside `txn`. REQUIRES: a write transaction.
  int NextRevision(MDB_txn* txn, Status* refusal, Revision* rev) const;

  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  std::size_t max_key = 0;
  std::string path;
  LmdbDurability durability = LmdbDurability::kDurable;
  pid_t owner_pid = 0;
  std::pair<dev_t, ino_t> file_id{};
  bool registered = false;

  std::shared_mutex mu;                    // shared: transactions; exclusive: map resize
  std::mutex gate;                         // held by a resizer waiting for `mu`
  std::atomic<bool> resize_wanted{false};  // a resizer holds `gate`
  std::atomic<bool> broken{false};         // a resize failed and the map is gone

  // Group commit: callers queue their items; one leader at a time runs a transaction.
  struct Waiter {
    std::vector<Item>* items = nullptr;
    bool done = false;
  };
  std::mutex group_mu;
  std::condition_variable group_done;
  std::vector<Waiter*> queue;  // guarded by group_mu
  bool leading = false;        // guarded by group_mu: a leader is running a transaction
};

namespace {

// Environments open in this process, by (device, inode) of the directory, so that one
// directory is never opened twice in one process (LMDB forbids it).
struct Registry {
  struct Entry {
    LmdbStore::Env* raw = nullptr;
    std::weak_ptr<LmdbStore::Env> weak;
    pid_t pid = 0;
  };
  std::mutex mu;
  std::condition_variable closed;  // an Env left the registry
  std::map<std::pair<dev_t, ino_t>, Entry> envs;
};

Registry& TheRegistry() {
  static Registry* r = new Registry;  // never destroyed: stores may outlive static destruction
  return *r;
}

}  // namespace

LmdbStore::Env::~Env() {
  // In a child after fork() the environment belongs to the parent: LMDB must not be used (nor
  // closed) there, so it is left alone.
  const bool mine = env != nullptr && owner_pid == ::getpid();
  if (!registered) {
    if (mine) mdb_env_close(env);
    return;
  }
  Registry& reg = TheRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  // Closed under the registry lock: a concurrent Open of the same directory waits for this
  // to finish, so two environments on one directory never coexist in this process.
  if (mine) mdb_env_close(env);
  auto it = reg.envs.find(file_id);
  if (it != reg.envs.end() && it->second.raw == this) reg.envs.erase(it);
  reg.closed.notify_all();
}

Status LmdbStore::Env::Remap(bool grow, std::size_t observed) {
  std::lock_guard<std::mutex> turnstile(gate);
  resize_wanted.store(true, std::memory_order_release);
  std::unique_lock<std::shared_mutex> exclusive(mu);
  struct ClearFlag {
    std::atomic<bool>& flag;
    ~ClearFlag() { flag.store(false, std::memory_order_release); }
  } clear{resize_wanted};
  if (broken.load()) return Broken();
  std::size_t target = 0;  // 0: adopt the size recorded in the file
  if (grow) {
    std::size_t now = MapBytes();
    if (now > observed) return Status::Ok();
    if (observed > std::numeric_limits<std::size_t>::max() / 2) {
      return Status::Unavailable("lmdb " + Quoted(path) + ": the memory map cannot grow beyond " +
                                 std::to_string(observed) + " bytes");
    }
    target = observed * 2;
  }
  int rc = mdb_env_set_mapsize(env, target);
  if (rc != 0) {
    // mdb_env_set_mapsize unmaps before mapping again; if mapping failed there is no map.
    broken.store(true);
    return MdbError(rc, grow ? "growing the memory map" : "adopting the memory map size",
                    path);
  }
  return Status::Ok();
}

int LmdbStore::Env::NextRevision(MDB_txn* txn, Status* refusal, Revision* rev) const {
  MDB_val k = Val(kCounterKey);
  MDB_val v;
  Revision last = 0;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == 0) {
    if (v.mv_size != kRevisionBytes) {
      *refusal = Status::Corruption("lmdb " + Quoted(path) + ": the revision counter has " +
                                    std::to_string(v.mv_size) + " bytes instead of 8");
      return 0;
    }
    last = GetRevision(v.mv_data);
  } else if (rc != MDB_NOTFOUND) {
    return rc;
  }
  if (last == std::numeric_limits<Revision>::max()) {
    *refusal = Status::Corruption("lmdb " + Quoted(path) + ": the revision counter is exhausted");
    return 0;
  }
  *rev = last + 1;
  char buf[kRevisionBytes];
  PutRevision(buf, *rev);
  MDB_val nv = Val(std::string_view(buf, sizeof buf));
  return mdb_put(txn, dbi, &k, &nv, 0);
}

int LmdbStore::Env::ApplyItem(MDB_txn* txn, Item* item) const {
  BatchResult& res = item->result;
  res = BatchResult{};
  MDB_val kv = Val(item->key);
  MDB_val old;
  int rc = mdb_get(txn, dbi, &kv, &old);
  if (rc != 0 && rc != MDB_NOTFOUND) return rc;
  const bool present = rc == 0;
  switch (item->type) {
    case BatchOp::Type::kGet: {
      if (!present) return 0;
      auto doc = Decode(old, item->describe);
      if (doc.ok()) {
        res.document = std::move(doc).value();
      } else {
        res.status = doc.status();
      }
      return 0;
    }
    case BatchOp::Type::kCreate:
      if (present) {
        res.status = Status::Conflict("create: the key exists");
        return 0;
      }
      break;
    case BatchOp::Type::kReplace:
    case BatchOp::Type::kErase: {
      const char* what = item->type == BatchOp::Type::kReplace ? "replace" : "erase";
      if (!present) {
        res.status = Status::Conflict(std::string(what) + ": the key is absent");
        return 0;
      }
      if (old.mv_size < kRevisionBytes) {
        res.status = Status::Corruption("lmdb: " + std::string(what) + " " + item->describe +
                                        ": stored value has " + std::to_string(old.mv_size) +
                                        " bytes, fewer than its 8-byte revision");
        return 0;
      }
      if (GetRevision(old.mv_data) != item->expected) {
        res.status = Status::Conflict(std::string(what) + ": revision changed");
        return 0;
      }
      if (item->type == BatchOp::Type::kErase) return mdb_del(txn, dbi, &kv, nullptr);
      break;
    }
  }
  Status refusal;
  Revision rev = 0;
  rc = NextRevision(txn, &refusal, &rev);
  if (rc != 0) return rc;
  if (!refusal.ok()) {
    res.status = refusal;
    return 0;
  }
  PutRevision(item->value.data(), rev);
  MDB_val vv = Val(item->value);
  rc = mdb_put(txn, dbi, &kv, &vv, item->type == BatchOp::Type::kCreate ? MDB_NOOVERWRITE : 0);
  if (rc == 0) res.revision = rev;
  return rc;
}

Status LmdbStore::Env::RunWriteTransaction(const std::vector<std::vector<Item>*>& groups) {
  const std::string_view what = "write";
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto lock = Enter();
    if (broken.load()) return Broken();
    auto turn = WriterTurn();  // released after the transaction below has ended
    Txn txn;
    int rc = txn.Begin(env, 0);
    if (rc == MDB_MAP_RESIZED) {
      turn.unlock();
      lock.unlock();
      if (Status s = Remap(false, 0); !s.ok()) return s;
      continue;
    }
    if (rc != 0) return MdbError(rc, what, path);
    for (std::vector<Item>* items : groups) {
      for (Item& item : *items) {
        rc = ApplyItem(txn.get(), &item);
        if (rc != 0) break;
      }
      if (rc != 0) break;
    }
    if (rc == 0) {
      rc = txn.Commit();
      if (rc == 0) {
        commits.fetch_add(1, std::memory_order_relaxed);
        return Status::Ok();
      }
      if (rc != MDB_MAP_FULL) return CommitError(rc, what, path);
    } else {
      txn.Abort();
      if (rc != MDB_MAP_FULL) return MdbError(rc, what, path);
    }
    // MDB_MAP_FULL: nothing was written. Grow the map and try again.
    std::size_t observed = MapBytes();
    turn.unlock();
    lock.unlock();
    if (Status s = Remap(true, observed); !s.ok()) return s;
  }
  return Status::Unavailable("lmdb " + Quoted(path) + ": write: gave up after " +
                             std::to_string(kMaxAttempts) + " memory map resizes");
}

void LmdbStore::Env::RunGroups(const std::vector<std::vector<Item>*>& groups) {
  // The transaction as a whole failed: nothing of it committed (or, on kUnknown, maybe
  // all of it). Each caller's items get a transaction of their own unless the outcome is
  // open or there was only one caller.
  auto fail = [](std::vector<Item>* its, const Status& s) {
    for (Item& item : *its) {
      item.result = BatchResult{};
      item.result.status = item.type == BatchOp::Type::kGet && s.code() == Code::kUnknown
                               ? Status::Unavailable(s.message())
                               : s;
    }
  };
  Status s = Status::Ok();
  try {
    s = RunWriteTransaction(groups);
    if (!s.ok() && s.code() != Code::kUnknown && groups.size() > 1) {
      for (std::vector<Item>* g : groups) {
        Status alone = RunWriteTransaction({g});
        if (!alone.ok()) fail(g, alone);
      }
      s = Status::Ok();
    }
  } catch (const std::bad_alloc&) {
    s = Status::Unavailable("lmdb " + Quoted(path) + ": write: out of memory");
  } catch (const std::exception& e) {
    s = Status::Unavailable("lmdb " + Quoted(path) + ": write: " + e.what());
  }
  if (!s.ok()) {
    for (std::vector<Item>* g : groups) fail(g, s);
  }
}

void LmdbStore::Env::WriteItems(std::vector<Item>* items) {
  if (durability == LmdbDurability::kNoSync) {
    // Nothing is fsynced at commit, so there is no sync to share, and handing results from
    // a leader to waiting threads would cost more than it saves: each caller runs its own
    // transaction (LMDB serialises writers).
    RunGroups({items});
    return;
  }
  Waiter me{items, false};
  std::unique_lock<std::mutex> lock(group_mu);
  queue.push_back(&me);
  while (!me.done) {
    if (leading) {
      group_done.wait(lock);
      continue;
    }
    // Lead: take every queued caller (this one included) into one transaction.
    leading = true;
    std::vector<Waiter*> taken;
    taken.swap(queue);
    lock.unlock();
    std::vector<std::vector<Item>*> groups;
    groups.reserve(taken.size());
    for (Waiter* w : taken) groups.push_back(w->items);
    RunGroups(groups);
    lock.lock();
    for (Waiter* w : taken) w->done = true;
    leading = false;
    group_done.notify_all();
  }
}

template <typename T, typename Body>
Result<T> LmdbStore::Env::Read(std::string_view what, Body&& body) {
  bool reader_check_done = false;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto lock = Enter();
    if (broken.load()) return Broken();
    Txn txn;
    int rc = txn.Begin(env, MDB_RDONLY);
    if (rc == MDB_MAP_RESIZED) {
      lock.unlock();
      if (Status s = Remap(false, 0); !s.ok()) return s;
      continue;
    }
    if (rc == MDB_READERS_FULL && !reader_check_done) {
      // Slots of processes that died without closing the store are reclaimed here.
      reader_check_done = true;
      int dead = 0;
      if (mdb_reader_check(env, &dead) == 0 && dead > 0) continue;
    }
    if (rc != 0) return MdbError(rc, what, path);
    return body(txn.get());  // ~Txn aborts the read transaction
  }
  return Status::Unavailable("lmdb " + Quoted(path) + ": " + std::string(what) +
                             ": gave up after " + std::to_string(kMaxAttempts) +
                             " memory map resizes");
}

// ---------------------------------------------------------------------------------------------
// Open

Result<std::shared_ptr<LmdbStore>> LmdbStore::Open(const std::string& path,
                                                   LmdbOptions options) try {
  if (path.empty()) return Status::InvalidArgument("lmdb: the store path is empty");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int e = errno;
    if (e != ENOENT) return OpenError(e, "stat", path);
    if (!options.create_if_missing) {
      return Status::InvalidArgument("lmdb: cannot open " + Quoted(path) +
                                     ": it does not exist (create_if_missing is off)");
    }
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) {
      return Status::InvalidArgument("lmdb: cannot create directory " + Quoted(path) + ": " +
                                     ec.message());
    }
    if (::stat(path.c_str(), &st) != 0) return OpenError(errno, "stat", path);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("lmdb: cannot open " + Quoted(path) +
                                   ": not a directory (the store is a directory holding "
                                   "data.mdb and lock.mdb)");
  }
  if (!options.create_if_missing) {
    struct stat data;
    std::string data_path = (std::filesystem::path(path) / "data.mdb").string();
    if (::stat(data_path.c_str(), &data) != 0) {
      int e = errno;
      if (e == ENOENT) {
        return Status::InvalidArgument("lmdb: cannot open " + Quoted(path) +
                                       ": no data.mdb in it (create_if_missing is off)");
      }
      return OpenError(e, "stat data.mdb", path);
    }
  }

  const std::pair<dev_t, ino_t> file_id{st.st_dev, st.st_ino};
  Registry& reg = TheRegistry();
  std::shared_ptr<Env> shared;  // declared before the lock: released after it
  std::unique_lock<std::mutex> lock(reg.mu);
  for (;;) {
    auto it = reg.envs.find(file_id);
    if (it == reg.envs.end()) break;
    if (it->second.pid != ::getpid()) {  // inherited from the parent across fork()
      reg.envs.erase(it);
      break;
    }
    shared = it->second.weak.lock();
    if (shared != nullptr) {
      if (shared->durability != options.durability) {
        return Status::InvalidArgument(
            "lmdb: " + Quoted(path) +
            " is already open in this process with another durability (LMDB allows one "
            "environment per directory and process; durability is fixed per environment)");
      }
      return std::shared_ptr<LmdbStore>(new LmdbStore(std::move(shared), path, options));
    }
    reg.closed.wait(lock);  // its last store is being destroyed: wait for the close
  }

  auto env = std::make_shared<Env>();
  env->path = path;
  env->durability = options.durability;
  env->owner_pid = ::getpid();
  env->file_id = file_id;
  int rc = mdb_env_create(&env->env);
  if (rc != 0) {
    env->env = nullptr;
    return OpenError(rc, "mdb_env_create", path);
  }
  if ((rc = mdb_env_set_maxreaders(env->env, kMaxReaders)) != 0) {
    return OpenError(rc, "mdb_env_set_maxreaders", path);
  }
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::size_t initial = options.initial_map_bytes;
  if (initial < page) initial = page;
  if (initial % page != 0) initial += page - initial % page;
  if ((rc = mdb_env_set_mapsize(env->env, initial)) != 0) {
    return OpenError(rc, "mdb_env_set_mapsize", path);
  }
  unsigned flags = MDB_NOTLS;
  switch (options.durability) {
    case LmdbDurability::kDurable:
      break;
    case LmdbDurability::kNoMetaSync:
      flags |= MDB_NOMETASYNC;
      break;
    case LmdbDurability::kNoSync:
      flags |= MDB_NOSYNC;
      break;
  }
  if ((rc = mdb_env_open(env->env, path.c_str(), flags, 0644)) != 0) {
    return OpenError(rc, "mdb_env_open", path);  // ~Env closes the handle, as LMDB requires
  }
  int dead = 0;
  (void)mdb_reader_check(env->env, &dead);  // free slots of processes that died mid-read
  // Keep what earlier runs grew the map to (recorded in the file), or the configured size if
  // that is larger. No transaction is open yet.
  if ((rc = mdb_env_set_mapsize(env->env, 0)) != 0) {
    return OpenError(rc, "adopting the recorded map size", path);
  }
  if (env->MapBytes() < initial && (rc = mdb_env_set_mapsize(env->env, initial)) != 0) {
    return OpenError(rc, "mdb_env_set_mapsize", path);
  }
  {
    Txn txn;
    if ((rc = txn.Begin(env->env, MDB_RDONLY)) != 0) return OpenError(rc, "mdb_txn_begin", path);
    if ((rc = mdb_dbi_open(txn.get(), nullptr, 0, &env->dbi)) != 0) {
      return OpenError(rc, "mdb_dbi_open", path);
    }
    if ((rc = txn.Commit()) != 0) return OpenError(rc, "mdb_txn_commit", path);
  }
  env->max_key = static_cast<std::size_t>(mdb_env_get_maxkeysize(env->env));

  reg.envs[file_id] = Registry::Entry{env.get(), env, env->owner_pid};
  env->registered = true;
  return std::shared_ptr<LmdbStore>(new LmdbStore(std::move(env), path, options));
} catch (const std::bad_alloc&) {
  return OutOfMemory("open " + Quoted(path));
} catch (const std::exception& e) {
  return Status::Unavailable("lmdb: cannot open " + Quoted(path) + ": " + e.what());
}

namespace {

// The bytes of this process's resident set that map files (the "shared" field of
// /proc/self/statm: file-backed and shared pages); 0 if it cannot be read.
std::uint64_t MappedResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0, shared = 0;
  const int n = std::fscanf(f, "%llu %llu %llu", &size, &resident, &shared);
  std::fclose(f);
  if (n != 3) return 0;
  return static_cast<std::uint64_t>(shared) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

LmdbStore::LmdbStore(std::shared_ptr<Env> env, std::string path, LmdbOptions options)
    : env_(std::move(env)), path_(std::move(path)), options_(options) {
  if (options_.max_mapped_bytes != 0) mapped_floor_.store(MappedResidentBytes());
}

LmdbStore::~LmdbStore() = default;

// ---------------------------------------------------------------------------------------------
// Operations

namespace {

// Why `key` cannot be stored, or empty. Collections must not contain '\0' (the separator);
// LMDB limits keys to `max_key` bytes.
std::string KeyProblem(const Key& key, std::size_t max_key) {
  if (key.collection.find('\0') != std::string::npos) {
    return "collection names must not contain '\\0'";
  }
  std::size_t size = key.collection.size() + 1 + key.id.size();
  if (size > max_key) {
    return "key of " + std::to_string(size) + " bytes (collection + 1 + id) is over LMDB's " +
           std::to_string(max_key);
  }
  return {};
}

std::string EncodeKey(const Key& key) {
  std::string k;
  k.reserve(key.collection.size() + 1 + key.id.size());
  k.append(key.collection);
  k.push_back('\0');
  k.append(key.id);
  return k;
}

// 8 placeholder bytes for the revision, then the JSON text. False if over `max_bytes`.
bool EncodeValue(const json::object& value, std::size_t max_bytes, std::string* out) {
  out->assign(kRevisionBytes, '\0');
  json::serializer sr;
  sr.reset(&value);
  char buf[4096];
  while (!sr.done()) {
    out->append(sr.read(buf));
    if (out->size() > max_bytes) return false;
  }
  return true;
}

}  // namespace

namespace {

// Counts an operation towards LmdbOptions::max_mapped_bytes when it ends (however it ends).
template <typename F>
struct CountOnExit {
  F done;
  ~CountOnExit() { done(); }
};
template <typename F>
CountOnExit(F) -> CountOnExit<F>;

}  // namespace

void LmdbStore::CountOperations(std::size_t ops) {
  const std::uint64_t limit = options_.max_mapped_bytes;
  if (limit == 0 || ops == 0) return;
  // The resident set is looked at every kEvery operations (a batch counts its operations).
  constexpr std::uint64_t kEvery = 64;
  const std::uint64_t before = operations_.fetch_add(ops, std::memory_order_relaxed);
  if (before / kEvery == (before + ops) / kEvery) return;
  // Measured from what was mapped right after the last release (or the open): the program's
  // own files (its executable, its libraries) count in the "shared" figure too.
  const std::uint64_t now = MappedResidentBytes();
  if (now <= mapped_floor_.load(std::memory_order_relaxed) + limit) return;
  (void)ReleaseMappedPages();  // a failure only leaves the pages mapped
  mapped_floor_.store(MappedResidentBytes(), std::memory_order_relaxed);
}

namespace {

// The address ranges [begin, end) where this process maps the file `path` (device `dev`,
// inode `ino`) shared, from /proc/self/maps (LMDB does not tell where its map is unless it is
// fixed). A mapping is the file's if its device and inode match or, where the two device
// numbers differ (btrfs subvolumes, some overlay filesystems), its inode and path do. Private
// mappings are left alone: dropping their pages could drop someone's changes.
std::vector<std::pair<std::uintptr_t, std::uintptr_t>> MappedRanges(const std::string& path,
                                                                     dev_t dev, ino_t ino) {
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> out;
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long begin = 0, end = 0, offset = 0, inode = 0;
    unsigned int major_no = 0, minor_no = 0;
    char perms[8] = {};
    int consumed = 0;
    if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &begin, &end, perms, &offset,
                    &major_no, &minor_no, &inode, &consumed) != 7) {
      continue;
    }
    if (inode != static_cast<unsigned long long>(ino) || end <= begin || perms[3] != 's') {
      continue;
    }
    std::string_view name(line + consumed);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.remove_suffix(1);
    if ((major_no == major(dev) && minor_no == minor(dev)) || name == path) {
      out.emplace_back(static_cast<std::uintptr_t>(begin), static_cast<std::uintptr_t>(end));
    }
  }
  std::fclose(f);
  return out;
}

}  // namespace

Status LmdbStore::ReleaseMappedPages() try {
  // The shared lock keeps the map where it is: a resize (which moves it) needs it exclusively.
  auto lock = env_->Enter();
  if (env_->broken.load()) return env_->Broken();
  struct stat st {};
  const std::string data_path = (std::filesystem::path(env_->path) / "data.mdb").string();
  if (::stat(data_path.c_str(), &st) != 0) {
    const int err = errno;
    return Status::Unavailable("lmdb " + Quoted(env_->path) + ": stat data.mdb: " +
                               std::strerror(err));
  }
  // The map is the file's shared, read-only mapping (no MDB_WRITEMAP): dropping its pages
  // loses nothing, and a reader inside a page maps the same bytes again (LMDB never rewrites
  // a page an open read transaction can see). Only mappings of this very file are touched.
  std::error_code ec;
  const std::string canonical = std::filesystem::weakly_canonical(data_path, ec).string();
  for (const auto& [begin, end] : MappedRanges(ec ? data_path : canonical, st.st_dev, st.st_ino)) {
    if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) {
      const int err = errno;
      return Status::Unavailable("lmdb " + Quoted(env_->path) + ": madvise: " +
                                 std::strerror(err));
    }
  }
  return Status::Ok();
} catch (const std::exception& e) {
  return Status::Unavailable(std::string("lmdb: release mapped pages: ") + e.what());
}

Result<std::optional<StoredDocument>> LmdbStore::Get(const Key& key) try {
  CountOnExit count{[this] { CountOperations(1); }};
  using Out = std::optional<StoredDocument>;
  if (!KeyProblem(key, env_->max_key).empty()) return Out{};  // such a key cannot exist
  std::string k = EncodeKey(key);
  return env_->Read<Out>("get", [&](MDB_txn* txn) -> Result<Out> {
    MDB_val kv = Val(k);
    MDB_val v;
    int rc = mdb_get(txn, env_->dbi, &kv, &v);
    if (rc == MDB_NOTFOUND) return Out{};
    if (rc != 0) return MdbError(rc, "get " + Describe(key), env_->path);
    auto doc = Decode(v, Describe(key));
    if (!doc.ok()) return doc.status();
    return Out{std::move(doc).value()};
  });
} catch (const std::bad_alloc&) {
  return OutOfMemory("get");
} catch (const std::exception& e) {
  return Status::Unavailable(std::string("lmdb: get: ") + e.what());
}

namespace {

// The item of a write (or a get in a batch that writes), or the result its single call gives
// without touching LMDB (a refused key or value, a key that cannot exist). False: `*result`.
bool PrepareItem(const BatchOp& op, std::size_t max_key, std::size_t max_value_bytes,
                 LmdbStore::Env::Item* item, BatchResult* result) {
  const char* name = op.type == BatchOp::Type::kGet      ? "get"
                     : op.type == BatchOp::Type::kCreate  ? "create"
                     : op.type == BatchOp::Type::kReplace ? "replace"
                                                          : "erase";
  const std::string why_key = KeyProblem(op.key, max_key);
  switch (op.type) {
    case BatchOp::Type::kGet:
      if (!why_key.empty()) return false;  // such a key cannot exist: absent
      break;
    case BatchOp::Type::kErase:
      if (!why_key.empty()) {
        result->status = Status::Conflict("erase: the key is absent");  // cannot exist
        return false;
      }
      break;
    case BatchOp::Type::kCreate:
    case BatchOp::Type::kReplace: {
      std::string why = why_key;
      if (why.empty() && op.value == nullptr) why = "batch operation without a value";
      if (why.empty()) why = engine::StoredValueProblem(*op.value);
      if (!why.empty()) {
        result->status = Status::InvalidArgument("lmdb: " + std::string(name) + " " +
                                                 Describe(op.key) + ": " + why);
        return false;
      }
      if (!EncodeValue(*op.value, max_value_bytes, &item->value)) {
        result->status = Status::InvalidArgument("lmdb: " + std::string(name) + " " +
                                                 Describe(op.key) + ": value over " +
                                                 std::to_string(max_value_bytes) + " bytes");
        return false;
      }
      break;
    }
  }
  item->type = op.type;
  item->key = EncodeKey(op.key);
  item->expected = op.expected;
  item->describe = Describe(op.key);
  return true;
}

}  // namespace

// A single write is a batch of one: it joins the group commit like any other.
Result<Revision> LmdbStore::Create(const Key& key, const boost::json::object& value) {
  BatchOp op = BatchOp::Create(key, value);
  BatchResult r = std::move(Batch(std::span<const BatchOp>(&op, 1)).at(0));
  if (!r.status.ok()) return r.status;
  return r.revision;
}

Result<Revision> LmdbStore::Replace(const Key& key, Revision expected,
                                    const boost::json::object& value) {
  BatchOp op = BatchOp::Replace(key, expected, value);
  BatchResult r = std::move(Batch(std::span<const BatchOp>(&op, 1)).at(0));
  if (!r.status.ok()) return r.status;
  return r.revision;
}

Status LmdbStore::Erase(const Key& key, Revision expected) {
  BatchOp op = BatchOp::Erase(key, expected);
  return std::move(Batch(std::span<const BatchOp>(&op, 1)).at(0)).status;
}

std::vector<BatchResult> LmdbStore::Batch(std::span<const BatchOp> ops) {
  CountOnExit count{[this, n = ops.size()] { CountOperations(n); }};
  std::vector<BatchResult> out(ops.size());
  try {
    const bool writes =
        std::any_of(ops.begin(), ops.end(), [](const BatchOp& op) { return op.is_write(); });
    if (!writes) {
      // Reads only: one read transaction for all of them.
      std::vector<std::size_t> keys_at;
      std::vector<std::string> keys;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        if (!KeyProblem(ops[i].key, env_->max_key).empty()) continue;  // absent
        keys_at.push_back(i);
        keys.push_back(EncodeKey(ops[i].key));
      }
      if (keys.empty()) return out;
      auto r = env_->Read<bool>("get", [&](MDB_txn* txn) -> Result<bool> {
        for (std::size_t j = 0; j < keys.size(); ++j) {
          BatchResult& res = out[keys_at[j]];
          const Key& key = ops[keys_at[j]].key;
          MDB_val kv = Val(keys[j]);
          MDB_val v;
          int rc = mdb_get(txn, env_->dbi, &kv, &v);
          if (rc == MDB_NOTFOUND) continue;
          if (rc != 0) {
            res.status = MdbError(rc, "get " + Describe(key), env_->path);
            continue;
          }
          auto doc = Decode(v, Describe(key));
          if (doc.ok()) {
            res.document = std::move(doc).value();
          } else {
            res.status = doc.status();
          }
        }
        return true;
      });
      if (!r.ok()) {
        for (std::size_t i : keys_at) out[i].status = r.status();
      }
      return out;
    }
    // With writes: every operation the store has to run goes into one write transaction.
    std::vector<Env::Item> items;
    std::vector<std::size_t> items_at;
    items.reserve(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      Env::Item item;
      if (PrepareItem(ops[i], env_->max_key, options_.max_value_bytes, &item, &out[i])) {
        items.push_back(std::move(item));
        items_at.push_back(i);
      }
    }
    if (items.empty()) return out;
    env_->WriteItems(&items);
    for (std::size_t j = 0; j < items.size(); ++j) out[items_at[j]] = std::move(items[j].result);
  } catch (const std::bad_alloc&) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      out[i] = BatchResult{};
      out[i].status = OutOfMemory(ops[i].is_write() ? "write" : "get");
    }
  } catch (const std::exception& e) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      out[i] = BatchResult{};
      out[i].status = Status::Unavailable(std::string("lmdb: batch: ") + e.what());
    }
  }
  return out;
}

std::uint64_t LmdbStore::write_transactions() const { return env_->commits.load(); }

Result<ScanPage> LmdbStore::Scan(std::string_view collection, std::string_view cursor,
                                 std::size_t limit) try {
  CountOnExit count{[this] { CountOperations(1); }};
  if (limit == 0) return Status::InvalidArgument("lmdb: scan: limit must be positive");
  if (collection.find('\0') != std::string_view::npos) return ScanPage{};  // cannot exist
  std::string prefix(collection);
  prefix.push_back('\0');
  if (prefix.size() > env_->max_key) return ScanPage{};
  // Position at the first key >= prefix + cursor (LMDB refuses longer keys than it can store:
  // seek to the longest stored-size prefix of it and skip what is not after the cursor).
  std::string after = prefix + std::string(cursor);
  std::string_view seek = std::string_view(after).substr(0, env_->max_key);
  const bool exclusive = !cursor.empty();
  return env_->Read<ScanPage>("scan", [&](MDB_txn* txn) -> Result<ScanPage> {
    MDB_cursor* raw = nullptr;
    int rc = mdb_cursor_open(txn, env_->dbi, &raw);
    if (rc != 0) return MdbError(rc, "scan", env_->path);
    Cursor c(raw);
    MDB_val k = Val(seek);
    MDB_val v;
    rc = mdb_cursor_get(c.get(), &k, &v, MDB_SET_RANGE);
    while (rc == 0 && (exclusive ? View(k) <= after : View(k) < after)) {
      rc = mdb_cursor_get(c.get(), &k, &v, MDB_NEXT);
    }
    ScanPage page;
    page.documents.reserve(std::min<std::size_t>(limit, 1024));
    // Document keys of the collection are exactly the keys starting with prefix; the counter
    // key has no '\0' and never does.
    for (; rc == 0 && View(k).starts_with(prefix); rc = mdb_cursor_get(c.get(), &k, &v, MDB_NEXT)) {
      if (page.documents.size() == limit) {  // one more exists: the page is not the last
        page.next_cursor = page.documents.back().first;
        return page;
      }
      std::string id(View(k).substr(prefix.size()));
      auto doc = Decode(v, Quoted(collection) + "/" + Quoted(id));
      if (!doc.ok()) return doc.status();
      page.documents.emplace_back(std::move(id), std::move(doc).value());
    }
    if (rc != 0 && rc != MDB_NOTFOUND) return MdbError(rc, "scan", env_->path);
    return page;
  });
} catch (const std::bad_alloc&) {
  return OutOfMemory("scan");
} catch (const std::exception& e) {
  return Status::Unavailable(std::string("lmdb: scan: ") + e.what());
}

Result<CollectionPage> LmdbStore::ListCollections(std::string_view cursor,
                                                  std::size_t limit) try {
  if (limit == 0) return Status::InvalidArgument("lmdb: list collections: limit must be positive");
  // Keys are collection + '\0' + id, in byte order, so one collection's keys are contiguous
  // and every key of a greater collection is >= collection + '\x01' (names hold no '\0'). The
  // counter key has no '\0' and is stepped over.
  using Page = CollectionPage;
  return env_->Read<Page>("list collections", [&](MDB_txn* txn) -> Result<Page> {
    MDB_cursor* raw = nullptr;
    int rc = mdb_cursor_open(txn, env_->dbi, &raw);
    if (rc != 0) return MdbError(rc, "list collections", env_->path);
    Cursor c(raw);
    MDB_val k;
    MDB_val v;
    // Positions at the first key of a collection greater than `name` (or at the counter key).
    // A seek key longer than LMDB accepts is cut: it then lands earlier, and the loop below
    // skips what is not after the cursor.
    auto seek_past = [&](std::string_view name) {
      std::string after(name);
      after.push_back('\x01');
      if (after.size() > env_->max_key) after.resize(env_->max_key);
      k = Val(after);
      return mdb_cursor_get(c.get(), &k, &v, MDB_SET_RANGE);
    };
    rc = cursor.empty() ? mdb_cursor_get(c.get(), &k, &v, MDB_FIRST) : seek_past(cursor);
    CollectionPage page;
    while (rc == 0) {
      std::string_view key = View(k);
      std::size_t sep = key.find('\0');
      if (sep == std::string_view::npos) {  // the revision counter
        rc = mdb_cursor_get(c.get(), &k, &v, MDB_NEXT);
        continue;
      }
      std::string name(key.substr(0, sep));
      if (name.empty() || (!cursor.empty() && name <= cursor)) {
        rc = seek_past(name);
        continue;
      }
      if (page.names.size() == limit) {  // one more exists: the page is not the last
        page.next_cursor = page.names.back();
        return page;
      }
      page.names.push_back(name);
      rc = seek_past(name);
    }
    if (rc != MDB_NOTFOUND) return MdbError(rc, "list collections", env_->path);
    return page;
  });
} catch (const std::bad_alloc&) {
  return OutOfMemory("list collections");
} catch (const std::exception& e) {
  return Status::Unavailable(std::string("lmdb: list collections: ") + e.what());
}

Status LmdbStore::Sync() {
  auto lock = env_->Enter();
  if (env_->broken.load()) return env_->Broken();
  int rc = mdb_env_sync(env_->env, 1);
  if (rc != 0) return MdbError(rc, "sync", env_->path);
  return Status::Ok();
}

const std::string& LmdbStore::path() const { return path_; }

std::size_t LmdbStore::map_bytes() const {
  auto lock = env_->Enter();
  if (env_->broken.load()) return 0;
  return env_->MapBytes();
}

}  // namespace litetx
