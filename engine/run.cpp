// Database::Run and TxnContext (litetx/run.h): buffered writes with read-your-writes,
// optimistic and pessimistic locks, re-running on contention, hooks.
//
// The context keeps, per document, the committed image read at first touch (the base) and
// the image with this transaction's writes applied, computed by the engine's own Prepare so
// that every rule (expected versions, adjust types, inserts over tombstones) is the commit's.
// At commit each document becomes one action: the single write as given when the document
// was written once and never read, else the difference between base and image at the version
// read (Update / Delete / Insert), or a Check when it was only read and must not change.
//
// Nested scopes (TxnContext::Nested) keep an undo log each: the state an entry had when the
// scope began (a copy, or "absent"), saved once per scope before the scope first changes or
// creates it. Undoing a scope puts those states back; a scope that succeeds hands its log to
// the enclosing scope, which keeps its own older state of a document both saved.
#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <utility>

#include <boost/json.hpp>

#include "engine/coordinator.h"
#include "engine/lease_keeper.h"
#include "engine/locks.h"
#include "engine/meta.h"
#include "engine/txn_id.h"
#include "engine/validate.h"
#include "engine/worklist.h"
#include "litetx/database.h"

namespace litetx {
namespace json = boost::json;

struct TxnContext::Impl {
  struct Entry {
    ReadResult base;                       // committed image at first touch
    std::optional<StoredDocument> image;   // with our writes; std::nullopt: absent
    bool user_read = false;                // the callback read it (Get)
    std::optional<std::uint64_t> expected;  // optimistic lock version
    int writes = 0;
    std::optional<Action> single;          // the write, while there is exactly one
  };

  Impl(Database& db, engine::Coordinator& coordinator, engine::LeaseKeeper* leases,
       const RunOptions& options, std::string id, std::int64_t priority_ms, int attempt)
      : db(db),
        coordinator(coordinator),
        env{db.store(), db.options(), *db.options().clock, *db.options().logger, leases},
        options(options),
        id(std::move(id)),
        priority_ms(priority_ms),
        attempt(attempt) {}

  // An open nested scope: the state each entry it changed or created had when it began
  // (std::nullopt: absent), and `pinned_conflict` then.
  struct Scope {
    std::map<Key, std::optional<Entry>> saved;
    bool pinned_conflict = false;
  };

  // The entry of `key`, read from the store (and saved as absent in the innermost open scope)
  // at first touch. Callers Save it before they change it.
  Result<Entry*> Load(const Key& key);
  // Saves `entry`'s current state in the innermost open scope, unless that scope saved it
  // already. Nothing when no scope is open.
  void Save(const Key& key, const Entry& entry) {
    if (!scopes.empty()) scopes.back().saved.try_emplace(key, entry);
  }
  void OpenScope() { scopes.push_back(Scope{{}, pinned_conflict}); }
  // Ends the innermost scope: keeps its changes when `keep`, else puts back what it saved.
  // Throws nothing but allocation failure, so that it may run during unwinding.
  void CloseScope(bool keep);
  // True if `s` is a kConflict this attempt would meet again: one met by the callback itself
  // (pinned_conflict), or the status of an undone scope that met one.
  bool Pinned(const Status& s) const;
  Status Apply(Action action);
  Result<ReadResult> View(const Key& key);
  Transaction Build() const;
  // Releases every lock in `locks` and empties it. Returns the keys whose release failed
  // (their entries stay until they expire unless released later).
  std::vector<Key> ReleaseLocks();
  // Remembers a lock as held (or possibly held) and keeps it renewed in the background.
  void HoldLock(Key key);
  // The lease keeper's renewal of every lock held (its own thread).
  void RenewLocks();

  Database& db;
  engine::Coordinator& coordinator;
  engine::Env env;
  const RunOptions& options;
  std::string id;
  std::int64_t priority_ms;
  int attempt;
  std::map<Key, Entry> entries;
  // The locks this attempt holds, or may hold: a Lock that failed after its lock write's reply
  // was lost is counted too (releasing a lock that is not there writes nothing).
  std::vector<Key> locks;
  std::mutex locks_mu;  // guards `locks` against the lease keeper's renewal
  // A conflict met by the callback itself (a version it pinned did not match, an insert over
  // a live document): running the callback again cannot help, so Run returns it instead.
  bool pinned_conflict = false;
  // The status the last undone scope returned, when it was a kConflict it met itself: the
  // callback returning it ends the run as pinned_conflict does.
  std::optional<Status> pinned_status;
  // Open nested scopes, innermost last.
  std::vector<Scope> scopes;
  // The background renewal of the locks (Options::renew_leases); declared last: ends first.
  engine::LeaseKeeper::Handle renewal;
};

namespace {

Status ValidKey(std::string_view collection, std::string_view id) {
  if (Status s = ValidateCollection(collection); !s.ok()) return s;
  return ValidateId(id);
}

Key MakeKey(std::string_view collection, std::string_view id) {
  return Key{std::string(collection), std::string(id)};
}

// The stored form of a committed image, as Prepare expects it.
std::optional<StoredDocument> Stored(const ReadResult& r) {
  if (r.state == DocumentState::kNotFound) return std::nullopt;
  engine::Meta m;
  m.version = r.version;
  m.schema_version = r.schema_version;
  m.deleted = r.state == DocumentState::kDeleted;
  return StoredDocument{engine::MakeStored(m.deleted ? json::object{} : r.doc, m), 0};
}

}  // namespace

Result<TxnContext::Impl::Entry*> TxnContext::Impl::Load(const Key& key) {
  auto it = entries.find(key);
  if (it != entries.end()) return &it->second;
  auto r = db.Read(key.collection, key.id);
  if (!r.ok()) return r.status();
  Entry e;
  e.base = std::move(r).value();
  e.image = Stored(e.base);
  if (!scopes.empty()) scopes.back().saved.try_emplace(key, std::nullopt);
  return &entries.emplace(key, std::move(e)).first->second;
}

void TxnContext::Impl::CloseScope(bool keep) {
  Scope scope = std::move(scopes.back());
  scopes.pop_back();
  if (keep) {
    // The enclosing scope must be able to undo these changes too. Where it saved nothing yet,
    // it had not changed the entry, so the state at this scope's start is the state at its own.
    if (!scopes.empty()) {
      for (auto& [key, prior] : scope.saved) scopes.back().saved.try_emplace(key, std::move(prior));
    }
    return;
  }
  for (auto& [key, prior] : scope.saved) {
    if (prior) {
      entries.insert_or_assign(key, std::move(*prior));
    } else {
      entries.erase(key);
    }
  }
  pinned_conflict = scope.pinned_conflict;
}

bool TxnContext::Impl::Pinned(const Status& s) const {
  if (s.code() != Code::kConflict) return false;
  if (pinned_conflict) return true;
  return pinned_status && pinned_status->message() == s.message() &&
         pinned_status->current_version() == s.current_version() &&
         pinned_status->txn_id() == s.txn_id();
}

Result<ReadResult> TxnContext::Impl::View(const Key& key) {
  auto e = Load(key);
  if (!e.ok()) return e.status();
  Entry& entry = **e;
  if (!entry.user_read) {
    Save(key, entry);
    entry.user_read = true;
  }
  ReadResult r;
  if (!entry.image) return r;
  auto meta = engine::DecodeMeta(entry.image->value);
  if (!meta.ok()) return meta.status();
  r.version = meta->version;
  r.last_writer = entry.base.last_writer;
  if (meta->deleted) {
    r.state = DocumentState::kDeleted;
    return r;
  }
  r.state = DocumentState::kFound;
  r.schema_version = meta->schema_version;
  r.doc = engine::UserFields(entry.image->value);
  return r;
}

Status TxnContext::Impl::Apply(Action action) {
  Transaction one;
  one.Add(action);
  if (Status s = engine::ValidateTransaction(one, env.options); !s.ok()) {
    return Status::InvalidArgument(s.message());
  }
  auto e = Load(action.key);
  if (!e.ok()) return e.status();
  Entry& entry = **e;
  auto p = engine::Prepare(action, entry.image, id, env.options.default_schema_version,
                           engine::FirstVersion(env.clock.NowMillis()), /*final_only=*/true);
  if (!p.ok()) {
    // Against the committed state this attempt read: re-running would meet it again.
    if (p.code() == Code::kConflict) pinned_conflict = true;
    return p.status();
  }
  // The image after this write, at the version read (versions change only at commit).
  auto meta = engine::DecodeMeta(p->final);
  if (!meta.ok()) return meta.status();
  Save(action.key, entry);
  meta->version = entry.base.version;
  meta->last_writer.clear();
  meta->at_ms = 0;
  if (meta->deleted) {
    entry.image = StoredDocument{engine::MakeStored(json::object{}, *meta), 0};
  } else {
    entry.image = StoredDocument{engine::MakeStored(std::move(p->final), *meta), 0};
  }
  if (++entry.writes == 1) {
    entry.single = std::move(action);
  } else {
    entry.single.reset();
  }
  return Status::Ok();
}

Transaction TxnContext::Impl::Build() const {
  Transaction txn;
  for (const auto& [key, e] : entries) {
    const std::uint64_t expect = e.expected.value_or(e.base.version);
    const bool base_live = e.base.state == DocumentState::kFound;
    if (e.writes == 0) {
      if (e.expected || (options.serializable && e.user_read && base_live)) {
        txn.Check(key.collection, key.id, expect);
      }
      continue;
    }
    if (e.writes == 1 && !e.user_read && !e.expected) {
      txn.Add(*e.single);
      continue;
    }
    auto meta = e.image ? engine::DecodeMeta(e.image->value) : Result<engine::Meta>(Status::NotFound(""));
    const bool image_live = meta.ok() && meta->live();
    if (base_live && image_live) {
      json::object set;
      std::vector<std::string> unset;
      json::object body = engine::UserFields(e.image->value);
      for (const auto& kv : body) {
        const json::value* old = e.base.doc.if_contains(kv.key());
        if (old == nullptr || *old != kv.value()) set[kv.key()] = kv.value();
      }
      for (const auto& kv : e.base.doc) {
        if (!body.contains(kv.key())) unset.emplace_back(kv.key());
      }
      std::optional<std::uint32_t> sv;
      if (meta->schema_version != e.base.schema_version) sv = meta->schema_version;
      if (set.empty() && unset.empty() && !sv) {
        txn.Check(key.collection, key.id, expect);
      } else {
        txn.Update(key.collection, key.id, std::move(set), std::move(unset), expect, sv);
      }
    } else if (base_live) {
      txn.Delete(key.collection, key.id, expect);
    } else if (image_live) {
      txn.Insert(key.collection, key.id, engine::UserFields(e.image->value), meta->schema_version);
    }
    // Neither live: inserted and deleted again, or never there: nothing to write.
  }
  return txn;
}

void TxnContext::Impl::HoldLock(Key key) {
  {
    std::lock_guard<std::mutex> lock(locks_mu);
    if (std::find(locks.begin(), locks.end(), key) != locks.end()) return;
    locks.push_back(std::move(key));
  }
  if (env.leases != nullptr && !renewal) {
    renewal = env.leases->Register([this] { RenewLocks(); });
  }
}

void TxnContext::Impl::RenewLocks() {
  std::vector<Key> held;
  {
    std::lock_guard<std::mutex> lock(locks_mu);
    held = locks;
  }
  for (const Key& key : held) {
    Status s = engine::RenewLock(env, key, id, options.lock_lease.count());
    if (!s.ok()) {
      env.log.debug("txn {}: could not renew its lock on {}/{} ({}); retried next period", id,
                    key.collection, key.id, s.ToString());
    }
  }
}

std::vector<Key> TxnContext::Impl::ReleaseLocks() {
  renewal.Reset();  // no renewal runs from here on
  std::vector<Key> failed;
  for (Key& key : locks) {
    Status s = engine::ReleaseLock(env, key, id);
    if (!s.ok()) {
      env.log.debug("txn {}: could not release its lock on {}/{} ({})", id, key.collection,
                    key.id, s.ToString());
      failed.push_back(std::move(key));
    }
  }
  locks.clear();
  return failed;
}

// ---------------------------------------------------------------------------------------------
// TxnContext

TxnContext::TxnContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TxnContext::~TxnContext() {
  try {
    for (const Key& key : impl_->ReleaseLocks()) {
      impl_->env.log.warn("txn {}: could not release its lock on {}/{}; it expires with its lease",
                          impl_->id, key.collection, key.id);
    }
  } catch (...) {
    // A store that throws (e.g. a simulated crash) leaves the locks to expire.
  }
}

Result<ReadResult> TxnContext::Get(std::string_view collection, std::string_view id) {
  if (Status s = ValidKey(collection, id); !s.ok()) return s;
  return impl_->View(MakeKey(collection, id));
}

Result<ReadResult> TxnContext::Get(std::string_view collection, std::string_view id,
                                   std::uint64_t expected_version) {
  if (Status s = LockOptimistic(collection, id, expected_version); !s.ok()) return s;
  return impl_->View(MakeKey(collection, id));
}

// Writes are built by the Transaction builder, so they are the same actions Commit takes.
namespace {
Action Only(const Transaction& t) { return t.actions().front(); }
}  // namespace

Status TxnContext::Insert(std::string_view collection, std::string_view id,
                          boost::json::object doc, std::optional<std::uint32_t> schema_version) {
  // Before the builder copies the action: a deep document must not reach a recursive copy.
  if (Status s = engine::ValidateFields(doc, impl_->env.options); !s.ok()) return s;
  return impl_->Apply(Only(Transaction().Insert(std::string(collection), std::string(id),
                                                std::move(doc), schema_version)));
}

Status TxnContext::Update(std::string_view collection, std::string_view id,
                          boost::json::object set, std::vector<std::string> unset,
                          std::optional<std::uint64_t> expected_version) {
  if (Status s = engine::ValidateFields(set, impl_->env.options); !s.ok()) return s;
  return impl_->Apply(Only(Transaction().Update(std::string(collection), std::string(id),
                                                std::move(set), std::move(unset),
                                                expected_version)));
}

Status TxnContext::Adjust(std::string_view collection, std::string_view id,
                          boost::json::object by, std::optional<std::uint64_t> expected_version) {
  if (Status s = engine::ValidateFields(by, impl_->env.options); !s.ok()) return s;
  return impl_->Apply(Only(Transaction().Adjust(std::string(collection), std::string(id),
                                                std::move(by), expected_version)));
}

Status TxnContext::Delete(std::string_view collection, std::string_view id,
                          std::optional<std::uint64_t> expected_version) {
  return impl_->Apply(Only(Transaction().Delete(std::string(collection), std::string(id),
                                                expected_version)));
}

Status TxnContext::LockOptimistic(std::string_view collection, std::string_view id,
                                  std::uint64_t expected_version) {
  if (Status s = ValidKey(collection, id); !s.ok()) return s;
  Key key = MakeKey(collection, id);
  auto e = impl_->Load(key);
  if (!e.ok()) return e.status();
  const ReadResult& base = (*e)->base;
  std::string where = key.collection + "/" + key.id;
  if (base.state == DocumentState::kNotFound) return Status::NotFound(where + ": no such document");
  if (base.state == DocumentState::kDeleted) return Status::Deleted(where + ": the document is deleted");
  if (base.version != expected_version) {
    impl_->pinned_conflict = true;
    return Status::Conflict(where + ": expected version " + std::to_string(expected_version) +
                            ", found " + std::to_string(base.version))
        .WithCurrentVersion(base.version);
  }
  if ((*e)->expected != expected_version) {
    impl_->Save(key, **e);
    (*e)->expected = expected_version;
  }
  return Status::Ok();
}

Status TxnContext::Nested(const std::function<Status(TxnContext&)>& fn) {
  // Opens the scope; undoes it if fn throws, else Close ends it as fn's status says.
  class Guard {
   public:
    explicit Guard(Impl& impl) : impl_(impl) { impl_.OpenScope(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() {
      if (open_) impl_.CloseScope(/*keep=*/false);
    }
    void Close(const Status& s) {
      open_ = false;
      if (s.ok()) {
        impl_.CloseScope(/*keep=*/true);
        return;
      }
      const bool pinned = impl_.Pinned(s);  // before the undo restores pinned_conflict
      impl_.CloseScope(/*keep=*/false);
      if (pinned) impl_.pinned_status = s;
    }

   private:
    Impl& impl_;
    bool open_ = true;
  };
  Guard guard(*impl_);
  Status s = fn(*this);
  guard.Close(s);
  return s;
}

Status TxnContext::Lock(std::string_view collection, std::string_view id, LockMode mode) {
  if (Status s = ValidKey(collection, id); !s.ok()) return s;
  Key key = MakeKey(collection, id);
  engine::Waiter self{impl_->id, impl_->priority_ms, !impl_->locks.empty()};
  bool maybe_taken = false;
  Status s = engine::AcquireLock(impl_->env, key, self, mode == LockMode::kWrite,
                                 impl_->options.lock_lease.count(), &maybe_taken);
  // A failure after a lost reply may have left the lock stored: it is released with the rest.
  if (s.ok() || maybe_taken) impl_->HoldLock(std::move(key));
  return s;
}

const std::string& TxnContext::txn_id() const { return impl_->id; }
int TxnContext::attempt() const { return impl_->attempt; }

// ---------------------------------------------------------------------------------------------
// Database::Run

namespace {

// Locks of earlier attempts whose release failed: tried again before each later attempt and
// when the run ends, so that they do not keep the run's next attempt (or anyone) waiting until
// they expire.
class Unreleased {
 public:
  explicit Unreleased(engine::Env env) : env_(env) {}
  Unreleased(const Unreleased&) = delete;
  Unreleased& operator=(const Unreleased&) = delete;
  ~Unreleased() {
    try {
      ReleaseAgain(/*last=*/true);
    } catch (...) {
      // A store that throws (e.g. a simulated crash) leaves the locks to expire.
    }
  }

  void Add(const std::string& owner, std::vector<Key> keys) {
    for (Key& k : keys) locks_.emplace_back(owner, std::move(k));
  }
  // Tries each release again; keeps those that fail, unless `last` (then they are logged and
  // left to expire).
  void ReleaseAgain(bool last = false) {
    std::erase_if(locks_, [&](const std::pair<std::string, Key>& l) {
      Status s = engine::ReleaseLock(env_, l.second, l.first);
      if (!s.ok() && last) {
        env_.log.warn("txn {}: could not release its lock on {}/{} ({}); it expires with its "
                      "lease", l.first, l.second.collection, l.second.id, s.ToString());
      }
      return s.ok() || last;
    });
  }

 private:
  engine::Env env_;
  std::vector<std::pair<std::string, Key>> locks_;  // (owner, document)
};

}  // namespace

Result<CommitInfo> Database::Run(const std::function<Status(TxnContext&)>& fn,
                                 const RunOptions& options) {
  Clock& clock = *options_.clock;
  // The run's age for wait-die is wall time (other processes compare it); its timeout is
  // measured on monotonic time, so that a step of the wall clock does not move it.
  const std::int64_t priority_ms = clock.NowMillis();
  const std::int64_t started_us = clock.MonotonicMicros();
  const std::int64_t timeout_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options.timeout).count();
  Unreleased unreleased(engine::Env{*store_, options_, clock, *options_.logger});
  // Every attempt's id starts with the first attempt's first 16 hex digits: wait-die breaks
  // ties of age by id, so the order between two runs of the same age stays the same across
  // their re-runs. The last 12 digits are new on each attempt (each has its own record).
  const std::string first_id = engine::NewTxnId();
  auto attempt_id = [&](int attempt) {
    return attempt == 1 ? first_id : first_id.substr(0, 16) + engine::NewTxnId().substr(16);
  };
  std::mt19937_64 rng(std::hash<std::string>{}(first_id));
  std::chrono::milliseconds backoff = options.backoff.initial;
  auto give_up = [&](Status s) -> Result<CommitInfo> {
    unreleased.ReleaseAgain();  // before after_rollback, which may expect the locks gone
    if (s.code() != Code::kUnknown && options.hooks.after_rollback) options.hooks.after_rollback(s);
    return s;
  };
  for (int attempt = 1;; ++attempt) {
    unreleased.ReleaseAgain();
    TxnContext ctx(std::make_unique<TxnContext::Impl>(*this, *coordinator_, leases_.get(), options,
                                                      attempt_id(attempt), priority_ms, attempt));
    TxnContext::Impl& impl = *ctx.impl_;
    // An exception from fn or before_commit propagates: unwinding destroys ctx, whose
    // destructor releases the attempt's locks; its buffered writes are dropped unwritten.
    Status s = fn(ctx);
    // before_commit runs on every attempt whose callback succeeded, so that what it reads is
    // read again, and what it writes computed again, whenever the attempt is repeated.
    if (s.ok() && options.hooks.before_commit) s = options.hooks.before_commit(ctx);
    // A Result is never built from an OK status (it asserts): the callback's error, or the
    // commit's result.
    Result<CommitInfo> r = [&]() -> Result<CommitInfo> {
      if (!s.ok()) return s;
      Transaction txn = impl.Build();
      if (txn.empty()) return CommitInfo{impl.id, {}, attempt};
      return coordinator_->Commit(txn,
                                  engine::CommitRequest{impl.id, priority_ms, !impl.locks.empty()});
    }();
    unreleased.Add(impl.id, impl.ReleaseLocks());
    if (r.ok()) {
      unreleased.ReleaseAgain();
      r->attempts = attempt;
      if (options.hooks.after_commit) options.hooks.after_commit(*r);
      return r;
    }
    Status failed = r.status();
    const bool out_of_time = clock.MonotonicMicros() - started_us >= timeout_us ||
                             (options.max_attempts > 0 && attempt >= options.max_attempts);
    // A conflict the callback met itself comes back on every re-run: it ends the run. The
    // callback's own status may be one that an undone nested scope met.
    const bool pinned = s.ok() ? impl.pinned_conflict && failed.code() == Code::kConflict
                               : impl.Pinned(failed);
    if (!failed.IsRetryableTransaction() || out_of_time || pinned) {
      return give_up(std::move(failed));
    }
    options_.logger->debug("run: attempt {} ended {}; running again", attempt, failed.ToString());
    std::uniform_int_distribution<std::int64_t> jitter(0, backoff.count() * 1000);
    clock.SleepFor(std::chrono::microseconds(jitter(rng)));
    backoff = std::min(backoff * 2, options.backoff.max);
  }
}

}  // namespace litetx
