// bench/lmdb_native.cpp — see lmdb_native.h.
#include "bench/lmdb_native.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include <boost/json.hpp>

namespace litetx::bench {
namespace json = boost::json;

struct NativeLmdb::Env {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  ~Env() {
    if (env != nullptr) mdb_env_close(env);
  }
};

namespace {

Status Fail(const std::string& what, int rc) {
  return Status::Unavailable("native LMDB: " + what + ": " + mdb_strerror(rc));
}

MDB_val Val(std::string_view s) {
  MDB_val v;
  v.mv_size = s.size();
  v.mv_data = const_cast<char*>(s.data());
  return v;
}

void RemoveDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // best effort: a scratch directory
}

}  // namespace

NativeLmdb::NativeLmdb(std::string dir, std::unique_ptr<Env> env)
    : dir_(std::move(dir)), env_(std::move(env)) {}

NativeLmdb::~NativeLmdb() {
  env_.reset();  // closes the environment before its files go
  RemoveDir(dir_);
}

Result<std::unique_ptr<NativeLmdb>> NativeLmdb::Open(const std::string& dir,
                                                     LmdbDurability durability, int max_n) {
  if (::mkdir(dir.c_str(), 0755) != 0) {
    return Status::Unavailable("native LMDB: cannot create " + dir + ": " +
                               std::generic_category().message(errno));
  }
  auto setup = [&]() -> Result<std::unique_ptr<Env>> {
    auto env = std::make_unique<Env>();
    int rc = mdb_env_create(&env->env);
    if (rc != 0) {
      env->env = nullptr;
      return Fail("mdb_env_create", rc);
    }
    // Address space only: the documents take a few pages.
    if ((rc = mdb_env_set_mapsize(env->env, std::size_t{64} << 20)) != 0) {
      return Fail("mdb_env_set_mapsize", rc);
    }
    unsigned flags = MDB_NOTLS;  // as LmdbStore
    if (durability == LmdbDurability::kNoMetaSync) flags |= MDB_NOMETASYNC;
    if (durability == LmdbDurability::kNoSync) flags |= MDB_NOSYNC;
    if ((rc = mdb_env_open(env->env, dir.c_str(), flags, 0644)) != 0) {
      return Fail("mdb_env_open " + dir, rc);
    }
    MDB_txn* txn = nullptr;
    if ((rc = mdb_txn_begin(env->env, nullptr, 0, &txn)) != 0) return Fail("mdb_txn_begin", rc);
    if ((rc = mdb_dbi_open(txn, nullptr, 0, &env->dbi)) != 0) {
      mdb_txn_abort(txn);
      return Fail("mdb_dbi_open", rc);
    }
    for (int i = 0; i < max_n; ++i) {
      const std::string key = "d" + std::to_string(i);
      const std::string text = json::serialize(json::object{{"balance", 0}, {"owner", key}});
      MDB_val k = Val(key);
      MDB_val v = Val(text);
      if ((rc = mdb_put(txn, env->dbi, &k, &v, 0)) != 0) {
        mdb_txn_abort(txn);
        return Fail("mdb_put", rc);
      }
    }
    if ((rc = mdb_txn_commit(txn)) != 0) return Fail("mdb_txn_commit", rc);
    return env;
  };
  auto env = setup();
  if (!env.ok()) {
    RemoveDir(dir);  // ~Env closed the environment first
    return env.status();
  }
  return std::unique_ptr<NativeLmdb>(new NativeLmdb(dir, std::move(*env)));
}

Status NativeLmdb::Transact(int n) {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_->env, nullptr, 0, &txn);
  if (rc != 0) return Fail("mdb_txn_begin", rc);
  for (int i = 0; i < n; ++i) {
    const std::string key = "d" + std::to_string(i);
    MDB_val k = Val(key);
    MDB_val v;
    if ((rc = mdb_get(txn, env_->dbi, &k, &v)) != 0) {
      mdb_txn_abort(txn);
      return Fail("mdb_get " + key, rc);
    }
    std::error_code ec;
    json::value doc =
        json::parse(std::string_view(static_cast<const char*>(v.mv_data), v.mv_size), ec);
    if (ec || !doc.is_object() || !doc.as_object().contains("balance")) {
      mdb_txn_abort(txn);
      return Status::Corruption("native LMDB: document " + key + " cannot be decoded");
    }
    json::value& balance = doc.as_object()["balance"];
    balance = balance.to_number<std::int64_t>() + 1;
    text_ = json::serialize(doc);
    MDB_val nv = Val(text_);
    if ((rc = mdb_put(txn, env_->dbi, &k, &nv, 0)) != 0) {
      mdb_txn_abort(txn);
      return Fail("mdb_put " + key, rc);
    }
  }
  if ((rc = mdb_txn_commit(txn)) != 0) return Fail("mdb_txn_commit", rc);
  return Status::Ok();
}

}  // namespace litetx::bench
