// bench/lmdb_native.cpp — see lmdb_native.h.
#include "bench/lmdb_native.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>

#include <boost/json.hpp>

namespace litetx::bench {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

struct EnvClose {
  void operator()(MDB_env* e) const { mdb_env_close(e); }
};
using Env = std::unique_ptr<MDB_env, EnvClose>;

Status Fail(const std::string& what, int rc) {
  return Status::Unavailable("native LMDB: " + what + ": " + mdb_strerror(rc));
}

MDB_val Val(std::string_view s) {
  MDB_val v;
  v.mv_size = s.size();
  v.mv_data = const_cast<char*>(s.data());
  return v;
}

// One read-modify-write transaction of documents d0..d(n-1); empty on success, else the error.
std::string Transact(MDB_env* env, MDB_dbi dbi, int n, std::string& text) {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env, nullptr, 0, &txn);
  if (rc != 0) return std::string("mdb_txn_begin: ") + mdb_strerror(rc);
  for (int i = 0; i < n; ++i) {
    const std::string key = "d" + std::to_string(i);
    MDB_val k = Val(key);
    MDB_val v;
    if ((rc = mdb_get(txn, dbi, &k, &v)) != 0) {
      mdb_txn_abort(txn);
      return std::string("mdb_get: ") + mdb_strerror(rc);
    }
    std::error_code ec;
    json::value doc = json::parse(
        std::string_view(static_cast<const char*>(v.mv_data), v.mv_size), ec);
    if (ec || !doc.is_object() || !doc.as_object().contains("balance")) {
      mdb_txn_abort(txn);
      return "stored document " + key + " cannot be decoded";
    }
    json::value& balance = doc.as_object()["balance"];
    balance = balance.to_number<std::int64_t>() + 1;
    text = json::serialize(doc);
    MDB_val nv = Val(text);
    if ((rc = mdb_put(txn, dbi, &k, &nv, 0)) != 0) {
      mdb_txn_abort(txn);
      return std::string("mdb_put: ") + mdb_strerror(rc);
    }
  }
  if ((rc = mdb_txn_commit(txn)) != 0) return std::string("mdb_txn_commit: ") + mdb_strerror(rc);
  return {};
}

// The measurement itself; `dir` exists and is removed by the caller.
Result<std::vector<NativeLmdbRow>> Measure(const std::string& dir, LmdbDurability durability,
                                           const std::vector<int>& sizes,
                                           std::chrono::milliseconds duration,
                                           const std::function<bool()>& stop) {
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc != 0) return Fail("mdb_env_create", rc);
  Env env(raw);
  // Address space only: the documents take a few pages.
  if ((rc = mdb_env_set_mapsize(env.get(), std::size_t{64} << 20)) != 0) {
    return Fail("mdb_env_set_mapsize", rc);
  }
  unsigned flags = MDB_NOTLS;  // as LmdbStore
  if (durability == LmdbDurability::kNoMetaSync) flags |= MDB_NOMETASYNC;
  if (durability == LmdbDurability::kNoSync) flags |= MDB_NOSYNC;
  if ((rc = mdb_env_open(env.get(), dir.c_str(), flags, 0644)) != 0) {
    return Fail("mdb_env_open " + dir, rc);
  }
  MDB_dbi dbi = 0;
  {
    MDB_txn* txn = nullptr;
    if ((rc = mdb_txn_begin(env.get(), nullptr, 0, &txn)) != 0) return Fail("mdb_txn_begin", rc);
    if ((rc = mdb_dbi_open(txn, nullptr, 0, &dbi)) != 0) {
      mdb_txn_abort(txn);
      return Fail("mdb_dbi_open", rc);
    }
    const int max_n = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
    for (int i = 0; i < max_n; ++i) {
      const std::string key = "d" + std::to_string(i);
      const std::string text =
          json::serialize(json::object{{"balance", 0}, {"owner", key}});
      MDB_val k = Val(key);
      MDB_val v = Val(text);
      if ((rc = mdb_put(txn, dbi, &k, &v, 0)) != 0) {
        mdb_txn_abort(txn);
        return Fail("mdb_put", rc);
      }
    }
    if ((rc = mdb_txn_commit(txn)) != 0) return Fail("mdb_txn_commit", rc);
  }

  std::vector<NativeLmdbRow> rows;
  std::string text;
  for (int n : sizes) {
    if (stop && stop()) break;
    NativeLmdbRow row;
    row.n = n;
    const auto warmup = std::min<Clock::duration>(duration / 10, std::chrono::milliseconds(200));
    const auto warm_end = Clock::now() + warmup;
    while (Clock::now() < warm_end && !(stop && stop())) {
      if (!Transact(env.get(), dbi, n, text).empty()) break;
    }
    Measured& m = row.tx;
    const auto start = Clock::now();
    const auto end = start + duration;
    for (;;) {
      const auto t0 = Clock::now();
      if (t0 >= end || (stop && stop())) break;
      std::string e = Transact(env.get(), dbi, n, text);
      ++m.attempts;
      if (!e.empty()) {
        ++m.errors;
        if (m.first_error.empty()) m.first_error = e;
        continue;
      }
      m.latency.Add(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()));
      ++m.ops;
    }
    m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    m.ops_per_s = m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds : 0;
    m.p50_us = m.latency.PercentileUs(50);
    m.p99_us = m.latency.PercentileUs(99);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

Result<std::vector<NativeLmdbRow>> MeasureLmdbNative(const std::string& dir,
                                                     LmdbDurability durability,
                                                     const std::vector<int>& sizes,
                                                     std::chrono::milliseconds duration,
                                                     const std::function<bool()>& stop) {
  if (::mkdir(dir.c_str(), 0755) != 0) {
    return Status::Unavailable("native LMDB: cannot create " + dir + ": " +
                               std::generic_category().message(errno));
  }
  auto rows = Measure(dir, durability, sizes, duration, stop);  // closes the environment
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec && rows.ok()) {
    return Status::Unavailable("native LMDB: cannot remove " + dir + ": " + ec.message());
  }
  return rows;
}

}  // namespace litetx::bench
