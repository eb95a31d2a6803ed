// batch/step.cpp — RunStep: chunk-oriented processing on litetx transactions.
//
// Stored execution context (StepOptions::state_collection), ids under "<job>/<step>":
//   <job>/<step>                 the step document: owner (the running execution's id),
//                                execution number, status, the watermark (next_chunk,
//                                next_position, checkpoint: every chunk below next_chunk is
//                                committed and the reader resumes at checkpoint), totals of
//                                the chunks below the watermark, the widest chunk window used.
//   <job>/<step>/chunk/<k>       one per committed chunk: its positions [begin, end), the
//                                reader's checkpoint after it, its counts. Inserted by the
//                                chunk's own transaction: it is the exactly-once guard.
//   <job>/<step>/item/<p>        one per item written in a transaction of its own (isolating a
//                                failing write, or a transaction per item): the item's outcome.
//   <job>/<step>/scan/<k>        chunk k is being written item by item: the positions [begin,
//                                end) written so (grown if another execution formed chunk k
//                                with other positions). A restart writes every chunk below the
//                                highest end it finds (the step document keeps it as
//                                scan_horizon) item by item, so each item marker is checked. Committed (its
//                                outcome known) before any item of chunk k is, so that a
//                                later execution never writes a chunk whole over item markers.
//   <job>/<step>/skip/<p>        one per skipped or recovered item.
// Every transaction of an execution reads the step document and fails if another execution
// owns it; a transaction that updates the step document does so at the version it read. A
// take-over looks for committed chunks again once it landed: the execution it replaced may have
// committed chunks after the first look, but not after the take-over. An item written on its
// own also fails if its chunk's document exists (a whole-chunk commit of another execution).
// Chunks run one at a time (or items of one chunk at a time) advance the watermark in the
// chunk's transaction; concurrent chunks leave it to the next restart or the completion, which
// find the committed chunks above it by reading chunk documents: chunk k is dispatched only
// once every chunk up to k - window is committed, so no committed chunk lies `window` or more
// past the first missing one.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include <boost/json/serialize.hpp>

#include "litetx/batch/step.h"

namespace litetx::batch {

namespace json = boost::json;

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kRead:
      return "read";
    case Phase::kProcess:
      return "process";
    case Phase::kWrite:
      return "write";
  }
  return "?";
}

namespace {

// Counts' fields, in one place for ToJson, FromJson and +=.
template <typename C, typename F>
void ForEachCount(C& c, F&& f) {
  f("read", c.read);
  f("written", c.written);
  f("filtered", c.filtered);
  f("read_skips", c.read_skips);
  f("process_skips", c.process_skips);
  f("write_skips", c.write_skips);
  f("recovered", c.recovered);
  f("commits", c.commits);
  f("rollbacks", c.rollbacks);
  f("retries", c.retries);
}

std::optional<std::uint64_t> AsU64(const json::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_uint64()) return v->as_uint64();
  if (v->is_int64() && v->as_int64() >= 0) return static_cast<std::uint64_t>(v->as_int64());
  return std::nullopt;
}

std::string Str(const json::object& o, const char* field) {
  const json::value* v = o.if_contains(field);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

std::string Pad(std::uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(n));
  return buf;
}

std::string NewExecutionId() {
  std::random_device rd;
  std::uint64_t a = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(a));
  return buf;
}

Status ValidName(const char* what, const std::string& name) {
  if (name.empty()) return Status::InvalidArgument(std::string("batch: ") + what + " is empty");
  if (name.size() > 128) {
    return Status::InvalidArgument(std::string("batch: ") + what + " is longer than 128 bytes");
  }
  for (unsigned char c : name) {
    if (c == '/' || c < 0x20 || c == 0x7f) {
      return Status::InvalidArgument(std::string("batch: ") + what +
                                     " contains '/' or a control character");
    }
  }
  return ValidateId(name);
}

// A chunk of input, as read.
struct Chunk {
  std::uint64_t k = 0;
  std::uint64_t begin = 0;  // first position
  std::uint64_t end = 0;    // one past the last position
  std::vector<Item> items;
  std::vector<SkipEvent> read_skips;  // read failures at positions inside [begin, end)
  json::value checkpoint;             // the reader after the chunk
};

// A chunk document found in the store.
struct DoneChunk {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  json::value checkpoint;
  Counts counts;
};

// The outcome of one item written in a transaction of its own.
struct ItemResult {
  enum Kind { kWritten, kFiltered, kSkipped, kRecovered } kind = kWritten;
  Counts counts;                  // commits, rollbacks, retries of the item's transactions
  std::optional<SkipEvent> skip;  // kSkipped / kRecovered
};

const char* ItemKindName(ItemResult::Kind k) {
  switch (k) {
    case ItemResult::kWritten:
      return "written";
    case ItemResult::kFiltered:
      return "filtered";
    case ItemResult::kSkipped:
      return "skipped";
    case ItemResult::kRecovered:
      return "recovered";
  }
  return "?";
}

// An error that ends the step (a Status that is not OK).
struct StepFailure {
  Status status;
};

class StepRun {
 public:
  StepRun(Database& db, ItemReader& reader, const StepFunctions& fns, const StepOptions& o)
      : db_(db), reader_(reader), fns_(fns), o_(o), exec_id_(NewExecutionId()),
        rng_(std::random_device{}()) {
    step_id_ = o.job + "/" + o.step;
  }

  Result<StepReport> Run();

 private:
  enum class Next { kCommitted, kRetry, kScan, kFail };

  std::string ChunkId(std::uint64_t k) const { return step_id_ + "/chunk/" + Pad(k); }
  std::string ItemId(std::uint64_t p) const { return step_id_ + "/item/" + Pad(p); }
  std::string ScanId(std::uint64_t k) const { return step_id_ + "/scan/" + Pad(k); }
  std::string SkipId(std::uint64_t p) const { return step_id_ + "/skip/" + Pad(p); }
  const std::string& coll() const { return o_.state_collection; }
  bool advances_watermark() const { return o_.concurrency == 1 || o_.transaction_per_item; }
  std::uint64_t window() const { return o_.transaction_per_item ? 1 : o_.concurrency; }

  Status Start(StepReport& report);
  Status ProcessChunk(Chunk& chunk, Counts& counts, std::vector<SkipEvent>& skips);
  Next ChunkAttempt(Chunk& chunk, Counts& counts, std::vector<SkipEvent>& skips, Status& failure,
                    int& write_attempts, bool& scan);
  Status ProcessItemwise(Chunk& chunk, bool concurrent, Counts& counts,
                         std::vector<SkipEvent>& skips);
  Result<ItemResult> ProcessItem(std::uint64_t k, const Item& item);
  Status CompleteItemwise(Chunk& chunk, Counts& counts, std::vector<SkipEvent>& skips);
  // Records that `chunk` is written item by item: its scan marker, whose range grows to cover
  // the chunk's positions (a marker left by an earlier execution may have another range).
  Status MarkScan(const Chunk& chunk);
  // Reads the step document in `tx` and fails unless this execution owns it; then either pins
  // its version (checked at commit) or, with `progress`, advances the watermark past `chunk`.
  Status Fence(TxnContext& tx, const Chunk* progress, const Counts* counts);
  // Fails (kFailedPrecondition) if chunk k's document exists: another execution committed the
  // chunk whole, so its items must not be written one by one.
  Status NotCommittedElsewhere(TxnContext& tx, std::uint64_t k) {
    auto cd = tx.Get(coll(), ChunkId(k));
    if (!cd.ok()) return cd.status();
    if (cd->state == DocumentState::kFound) {
      return Status::FailedPrecondition("batch: chunk " + std::to_string(k) + " of " + step_id_ +
                                        " was committed by another execution");
    }
    return Status::Ok();
  }
  // After a commit that returned kUnknown: whether `marker` was written by this execution.
  Result<bool> Resolve(const std::string& marker, const std::string& txn_id);
  // Whether the transaction that wrote `marker` committed: r's outcome, or, for kUnknown,
  // what Resolve learns.
  Result<bool> Landed(const Result<CommitInfo>& r, const std::string& marker) {
    if (r.ok()) return true;
    if (r.code() != Code::kUnknown) return false;
    return Resolve(marker, r.status().txn_id());
  }
  // Runs StepFunctions::process for `item` in a nested scope of `tx`; `out` gets the output
  // (std::nullopt: filtered out).
  Status Process(TxnContext& tx, const Item& item, std::optional<json::value>& out) {
    return tx.Nested([&](TxnContext& t) -> Status {
      if (!fns_.process) {
        out = item.value;
        return Status::Ok();
      }
      auto p = fns_.process(t, item);
      if (!p.ok()) return p.status();
      out = std::move(*p);
      return Status::Ok();
    });
  }
  // Inserts chunk k's document in `tx`: kFailedPrecondition if another execution committed
  // the chunk (the insert met a live document), else the insert's own status.
  Status InsertChunkDoc(TxnContext& tx, const Chunk& chunk, const Counts& counts, bool itemwise) {
    json::object doc{{"k", chunk.k},          {"begin", chunk.begin},
                     {"end", chunk.end},      {"checkpoint", chunk.checkpoint},
                     {"counts", counts.ToJson()}, {"owner", exec_id_},
                     {"execution", execution_}};
    if (itemwise) doc["itemwise"] = true;
    Status s = tx.Insert(coll(), ChunkId(chunk.k), std::move(doc));
    if (s.ok() || s.code() != Code::kConflict) return s;
    return Status::FailedPrecondition("batch: chunk " + std::to_string(chunk.k) + " of " +
                                      step_id_ + " was committed by another execution (" +
                                      s.ToString() + ")");
  }
  Status InsertSkip(TxnContext& tx, const SkipEvent& e, const Item* item);
  // The failure for a committed chunk that the chunks formed now do not line up with.
  Status ChunksMoved(std::uint64_t k, const DoneChunk& dc, std::uint64_t position) const {
    return Status::FailedPrecondition(
        "batch: chunk " + std::to_string(k) + " of " + step_id_ + " was committed for positions [" +
        std::to_string(dc.begin) + ", " + std::to_string(dc.end) + ") but the input now reaches "
        "it at position " + std::to_string(position) + ": the input is not the one the earlier "
        "execution read");
  }
  void Backoff(int next_attempt);
  bool ReserveSkips(std::uint64_t n);
  void ReleaseSkips(std::uint64_t n, bool committed);
  void Finish(StepReport& report, const Status& status);
  template <typename F, typename... A>
  void Notify(const F& f, A&&... a) {
    if (!f) return;
    std::lock_guard<std::mutex> lock(listener_mu_);
    f(std::forward<A>(a)...);
  }
  RunOptions ChunkRunOptions() const {
    RunOptions r;
    r.max_attempts = 1;
    r.serializable = o_.serializable;
    return r;
  }

  // Failures of an item so far (stateful retry), and its last failure.
  int Failures(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = failures_.find(key);
    return it == failures_.end() ? 0 : it->second.first;
  }
  int AddFailure(const std::string& key, const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& f = failures_[key];
    f.second = s;
    return ++f.first;
  }
  Status LastFailure(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_[key].second;
  }

  Database& db_;
  ItemReader& reader_;
  const StepFunctions& fns_;
  const StepOptions& o_;
  const std::string exec_id_;
  std::string step_id_;
  std::uint64_t execution_ = 0;

  // The watermark this execution started from, its totals, and the committed chunks above it.
  std::uint64_t start_chunk_ = 0;
  std::uint64_t start_position_ = 0;
  json::value start_checkpoint_;
  Counts base_totals_;
  std::uint64_t base_chunks_ = 0;
  std::map<std::uint64_t, DoneChunk> done_;
  // Positions below this may hold item markers of an earlier execution outside any committed
  // chunk (a chunk written item by item that did not commit, perhaps formed with other
  // options): a chunk that begins below it is written item by item, so that each position's
  // marker is checked. The end of every scan marker seen at or above the watermark, and the
  // stored horizon of earlier take-overs.
  std::uint64_t scan_horizon_ = 0;

  std::mutex mu_;  // guards the members below
  std::unordered_map<std::string, std::pair<int, Status>> failures_;
  std::uint64_t skips_committed_ = 0;
  std::uint64_t skips_reserved_ = 0;
  std::mt19937_64 rng_;
  Counts run_counts_;        // this execution
  Counts committed_chunks_;  // chunks this execution committed
  std::uint64_t chunks_committed_ = 0;
  std::vector<SkipEvent> skipped_;

  std::mutex listener_mu_;
};

Status StepRun::InsertSkip(TxnContext& tx, const SkipEvent& e, const Item* item) {
  json::object rec{{"position", e.position},
                   {"key", e.key},
                   {"phase", PhaseName(e.phase)},
                   {"code", std::string(CodeName(e.failure.code()))},
                   {"message", e.failure.message()},
                   {"recovered", e.recovered},
                   {"execution", execution_}};
  if (item != nullptr) {
    // The item goes into its record if a document can hold it: a poison item too large or too
    // deep to be stored must still be skipped, so its record then says why it is left out.
    const std::size_t bytes = json::serialize(item->value).size();
    if (bytes > db_.options().max_document_bytes / 2) {
      rec["item_omitted"] = "the item is " + std::to_string(bytes) + " bytes of JSON";
    } else {
      json::object with_item = rec;
      with_item["item"] = item->value;
      Status s = tx.Insert(coll(), SkipId(e.position), std::move(with_item));
      if (s.code() != Code::kInvalidArgument) return s;
      rec["item_omitted"] = s.message();
    }
  }
  return tx.Insert(coll(), SkipId(e.position), std::move(rec));
}

void StepRun::Backoff(int next_attempt) {
  std::chrono::microseconds d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    d = o_.backoff.Delay(next_attempt, rng_);
  }
  if (d.count() > 0) db_.options().clock->SleepFor(d);
}

bool StepRun::ReserveSkips(std::uint64_t n) {
  if (n == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  if (skips_committed_ + skips_reserved_ + n > o_.skip.skip_limit) return false;
  skips_reserved_ += n;
  return true;
}

void StepRun::ReleaseSkips(std::uint64_t n, bool committed) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  skips_reserved_ -= n;
  if (committed) skips_committed_ += n;
}

Status StepRun::Fence(TxnContext& tx, const Chunk* progress, const Counts* counts) {
  auto r = tx.Get(coll(), step_id_);
  if (!r.ok()) return r.status();
  if (r->state != DocumentState::kFound || Str(r->doc, "owner") != exec_id_) {
    return Status::FailedPrecondition("batch: step " + step_id_ +
                                      " was taken over by another execution");
  }
  if (progress == nullptr) return tx.LockOptimistic(coll(), step_id_, r->version);
  json::object set;
  set["next_chunk"] = progress->k + 1;
  set["next_position"] = progress->end;
  set["checkpoint"] = progress->checkpoint;
  auto totals = Counts::FromJson(r->doc.contains("totals") && r->doc.at("totals").is_object()
                                     ? r->doc.at("totals").as_object()
                                     : json::object{});
  if (!totals.ok()) return totals.status();
  *totals += *counts;
  std::uint64_t chunks = AsU64(r->doc.if_contains("chunks")).value_or(0) + 1;
  // Chunks an earlier execution committed between the old watermark and this chunk move
  // below the watermark now: their counts join the totals.
  const std::uint64_t from = AsU64(r->doc.if_contains("next_chunk")).value_or(0);
  for (auto it = done_.lower_bound(from); it != done_.end() && it->first < progress->k; ++it) {
    *totals += it->second.counts;
    ++chunks;
  }
  set["totals"] = totals->ToJson();
  set["chunks"] = chunks;
  // The horizon as this execution knows it: the scan markers below the new watermark are not
  // looked at again by a restart.
  set["scan_horizon"] =
      std::max(AsU64(r->doc.if_contains("scan_horizon")).value_or(0), scan_horizon_);
  return tx.Update(coll(), step_id_, std::move(set));
}

Result<bool> StepRun::Resolve(const std::string& marker, const std::string& txn_id) {
  Clock& clock = *db_.options().clock;
  const std::int64_t deadline =
      clock.MonotonicMicros() +
      std::chrono::duration_cast<std::chrono::microseconds>(o_.unknown_timeout).count();
  std::chrono::microseconds wait{2'000};
  for (;;) {
    auto r = db_.Read(coll(), marker);
    if (r.ok() && r->state == DocumentState::kFound) {
      if (Str(r->doc, "owner") == exec_id_) return true;
      return Status::FailedPrecondition("batch: " + marker + " was written by another execution");
    }
    if (!txn_id.empty()) {
      auto out = db_.Outcome(txn_id);
      if (out.ok() && *out == TxnOutcome::kAborted) return false;
      if (out.ok() && *out == TxnOutcome::kCommitted) {
        // Committed, and the marker is in it: read it again (it is visible from now on).
        wait = std::chrono::microseconds{0};
      }
    }
    if (clock.MonotonicMicros() >= deadline) {
      return Status::Unknown("batch: the outcome of the commit writing " + marker +
                             " is not known (txn " + txn_id + "); run the step again later");
    }
    clock.SleepFor(wait);
    wait = std::min(std::chrono::microseconds{200'000}, wait * 2 + std::chrono::microseconds{1'000});
  }
}

// ---------------------------------------------------------------------------------------------
// Start: create the step document, or take it over and find what is already committed.

Status StepRun::Start(StepReport& report) {
  for (int tries = 0;; ++tries) {
    auto r = db_.Read(coll(), step_id_);
    if (!r.ok()) return r.status();
    if (r->state != DocumentState::kFound) {
      execution_ = 1;
      auto c = db_.Run(
          [&](TxnContext& tx) {
            return tx.Insert(coll(), step_id_,
                             json::object{{"format", 1},
                                          {"job", o_.job},
                                          {"step", o_.step},
                                          {"owner", exec_id_},
                                          {"execution", execution_},
                                          {"status", "running"},
                                          {"next_chunk", 0},
                                          {"next_position", 0},
                                          {"checkpoint", nullptr},
                                          {"totals", Counts{}.ToJson()},
                                          {"chunks", 0},
                                          {"window", window()},
                                          {"scan_horizon", 0},
                                          {"last_error", ""}});
          },
          ChunkRunOptions());
      if (c.ok()) break;
      if (c.code() == Code::kConflict && tries < 3) continue;  // created meanwhile: read it
      if (c.code() == Code::kConflict) {
        return Status::Conflict("batch: another execution of " + step_id_ + " started meanwhile");
      }
      return c.status();
    }
    const json::object& d = r->doc;
    if (AsU64(d.if_contains("format")).value_or(0) != 1) {
      return Status::FailedPrecondition("batch: " + step_id_ +
                                        " is not a step document this version can read");
    }
    auto totals = Counts::FromJson(d.contains("totals") && d.at("totals").is_object()
                                       ? d.at("totals").as_object()
                                       : json::object{});
    if (!totals.ok()) return totals.status();
    const std::uint64_t prev_execution = AsU64(d.if_contains("execution")).value_or(0);
    if (Str(d, "status") == "completed") {
      report.already_complete = true;
      report.execution = prev_execution;
      report.total = *totals;
      report.chunks = AsU64(d.if_contains("chunks")).value_or(0);
      return Status::Ok();
    }
    std::uint64_t next_chunk = AsU64(d.if_contains("next_chunk")).value_or(0);
    std::uint64_t next_position = AsU64(d.if_contains("next_position")).value_or(0);
    json::value checkpoint = d.contains("checkpoint") ? d.at("checkpoint") : json::value();
    std::uint64_t chunks = AsU64(d.if_contains("chunks")).value_or(0);
    const std::uint64_t prev_window = std::max<std::uint64_t>(1, AsU64(d.if_contains("window")).value_or(1));
    // Committed chunks at or above the watermark: none lies prev_window or more past a
    // missing one.
    done_.clear();
    // Chunk k's document, if it is committed.
    auto read_chunk = [&](std::uint64_t k) -> Result<std::optional<DoneChunk>> {
      auto c = db_.Read(coll(), ChunkId(k));
      if (!c.ok()) return c.status();
      if (c->state != DocumentState::kFound) return std::optional<DoneChunk>{};
      DoneChunk dc;
      dc.begin = AsU64(c->doc.if_contains("begin")).value_or(0);
      dc.end = AsU64(c->doc.if_contains("end")).value_or(0);
      dc.checkpoint = c->doc.contains("checkpoint") ? c->doc.at("checkpoint") : json::value();
      auto cc = Counts::FromJson(c->doc.contains("counts") && c->doc.at("counts").is_object()
                                     ? c->doc.at("counts").as_object()
                                     : json::object{});
      if (!cc.ok()) return cc.status();
      dc.counts = *cc;
      return std::optional<DoneChunk>(std::move(dc));
    };
    // Chunk k's scan marker: raises the horizon; true if there is one.
    std::uint64_t horizon = AsU64(d.if_contains("scan_horizon")).value_or(0);
    auto read_scan = [&](std::uint64_t k) -> Result<bool> {
      auto m = db_.Read(coll(), ScanId(k));
      if (!m.ok()) return m.status();
      if (m->state != DocumentState::kFound) return false;
      horizon = std::max(horizon, AsU64(m->doc.if_contains("end")).value_or(0));
      return true;
    };
    // An index is missing when it has neither a chunk document nor a scan marker (a chunk in
    // flight may have written the marker): none of either lies prev_window or more past one.
    std::uint64_t misses = 0;
    bool contiguous = true;
    for (std::uint64_t k = next_chunk; misses < prev_window; ++k) {
      auto found = read_chunk(k);
      if (!found.ok()) return found.status();
      auto marked = read_scan(k);
      if (!marked.ok()) return marked.status();
      if (!found->has_value()) {
        if (*marked) {
          misses = 0;
        } else {
          ++misses;
        }
        contiguous = false;
        continue;
      }
      misses = 0;
      DoneChunk dc = std::move(**found);
      if (contiguous && dc.begin != next_position) {
        return Status::FailedPrecondition(
            "batch: chunk " + std::to_string(k) + " of " + step_id_ + " begins at position " +
            std::to_string(dc.begin) + ", not where the chunks before it end (" +
            std::to_string(next_position) + "): the stored state is inconsistent");
      }
      if (contiguous) {
        // Below the new watermark: folded into the step document's totals.
        next_chunk = k + 1;
        next_position = dc.end;
        checkpoint = dc.checkpoint;
        *totals += dc.counts;
        ++chunks;
      } else {
        done_.emplace(k, std::move(dc));
      }
    }
    execution_ = prev_execution + 1;
    json::object set{{"owner", exec_id_},
                     {"execution", execution_},
                     {"status", "running"},
                     {"next_chunk", next_chunk},
                     {"next_position", next_position},
                     {"checkpoint", checkpoint},
                     {"totals", totals->ToJson()},
                     {"chunks", chunks},
                     {"window", std::max(prev_window, window())},
                     {"scan_horizon", horizon},
                     {"last_error", ""}};
    auto c = db_.Run(
        [&](TxnContext& tx) {
          return tx.Update(coll(), step_id_, set, {}, r->version);
        },
        ChunkRunOptions());
    if (!c.ok()) {
      // The version read is gone: another execution took the step over, or a crashed
      // execution's chunk transaction that held the step document was rolled back while this
      // update waited for it (a rollback moves the version on). Read it again.
      if (c.code() == Code::kConflict && tries < 3) continue;
      if (c.code() == Code::kConflict) {
        return Status::Conflict("batch: another execution of " + step_id_ +
                                " took the step over meanwhile");
      }
      return c.status();
    }
    // Chunks run at once commit without changing the step document, so the execution taken
    // over may have committed chunks after the look above. From now on its commits fail (they
    // pin the version this take-over replaced): a second look finds every chunk it committed.
    misses = 0;
    for (std::uint64_t k = next_chunk; misses < prev_window; ++k) {
      auto marked = read_scan(k);
      if (!marked.ok()) return marked.status();
      if (done_.count(k) != 0) {
        misses = 0;
        continue;
      }
      auto found = read_chunk(k);
      if (!found.ok()) return found.status();
      if (!found->has_value()) {
        if (*marked) {
          misses = 0;
        } else {
          ++misses;
        }
        continue;
      }
      misses = 0;
      done_.emplace(k, std::move(**found));
    }
    scan_horizon_ = horizon;
    start_chunk_ = next_chunk;
    start_position_ = next_position;
    start_checkpoint_ = checkpoint;
    base_totals_ = *totals;
    base_chunks_ = chunks;
    skips_committed_ = totals->skips();
    for (const auto& [k, dc] : done_) skips_committed_ += dc.counts.skips();
    return Status::Ok();
  }
  start_chunk_ = 0;
  start_position_ = 0;
  start_checkpoint_ = nullptr;
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// A chunk in one transaction.

StepRun::Next StepRun::ChunkAttempt(Chunk& chunk, Counts& counts, std::vector<SkipEvent>& skips,
                                    Status& failure, int& write_attempts, bool& scan) {
  // What the callback decided; unset when the failure came from the commit itself.
  std::optional<Next> decided;
  Counts attempt;
  std::vector<SkipEvent> attempt_skips;
  std::uint64_t reserved = 0;
  auto r = db_.Run(
      [&](TxnContext& tx) -> Status {
        attempt = Counts{};
        attempt_skips.clear();
        if (Status s = Fence(tx, nullptr, nullptr); !s.ok()) {
          decided = Next::kFail;
          return s;
        }
        auto sm = tx.Get(coll(), ScanId(chunk.k));
        if (!sm.ok()) return sm.status();
        if (sm->state == DocumentState::kFound) {
          scan = true;  // an earlier execution began writing this chunk item by item
          decided = Next::kScan;
          return Status::Aborted("batch: chunk is being written item by item");
        }
        std::vector<Output> outputs;
        outputs.reserve(chunk.items.size());
        // The RECOVER path for `item`; on its failure (or without a recoverer) the item is
        // skipped if the failure may be skipped, else the step fails.
        auto recover = [&](const Item& item, const Status& why, Phase phase) -> Status {
          if (fns_.recover) {
            Status rs = tx.Nested(
                [&](TxnContext& t) { return fns_.recover(t, item, why); });
            if (rs.ok()) {
              ++attempt.recovered;
              attempt_skips.push_back(SkipEvent{phase, item.position, item.key, why, true});
              return Status::Ok();
            }
          }
          if (o_.skip.Skippable(why)) {
            ++(phase == Phase::kProcess ? attempt.process_skips : attempt.write_skips);
            attempt_skips.push_back(SkipEvent{phase, item.position, item.key, why, false});
            return Status::Ok();
          }
          decided = Next::kFail;
          return why;
        };
        for (const Item& item : chunk.items) {
          ++attempt.read;
          if (Failures(item.key) >= o_.retry.max_attempts) {
            // Presented again with its retries used up: recovered without processing (A.3).
            if (Status s = recover(item, LastFailure(item.key), Phase::kProcess); !s.ok()) return s;
            continue;
          }
          std::optional<json::value> out;
          Status ps = Process(tx, item, out);
          if (ps.ok()) {
            if (out) {
              outputs.push_back(Output{&item, std::move(*out)});
            } else {
              ++attempt.filtered;
            }
            continue;
          }
          if (o_.retry.Retryable(ps)) {
            const int n = AddFailure(item.key, ps);
            if (n < o_.retry.max_attempts) {
              // Stateful retry: the chunk rolls back and the item comes back in the next
              // attempt.
              failure = ps;
              decided = Next::kRetry;
              Notify(o_.listener.on_retry,
                     RetryEvent{Phase::kProcess, chunk.k, item.key, n, ps});
              return ps;
            }
            // The last attempt failed: its writes are undone (nested scope), so the item is
            // recovered at once, in this same transaction.
          }
          if (Status s = recover(item, ps, Phase::kProcess); !s.ok()) return s;
        }
        if (!outputs.empty()) {
          Status ws = tx.Nested([&](TxnContext& t) { return fns_.write(t, outputs); });
          if (!ws.ok()) return ws;  // decided after the rollback
        }
        attempt.written = outputs.size();
        attempt.read_skips = chunk.read_skips.size();
        for (const SkipEvent& e : chunk.read_skips) attempt_skips.push_back(e);
        const std::uint64_t n = attempt_skips.size() - attempt.recovered;
        if (!ReserveSkips(n)) {
          decided = Next::kFail;
          return Status::FailedPrecondition("batch: skip limit " +
                                            std::to_string(o_.skip.skip_limit) + " exceeded");
        }
        reserved = n;
        for (const SkipEvent& e : attempt_skips) {
          const Item* item = nullptr;
          for (const Item& it : chunk.items) {
            if (it.position == e.position) item = &it;
          }
          if (Status s = InsertSkip(tx, e, item); !s.ok()) return s;
        }
        attempt.commits = 1;
        Counts stored = attempt;
        stored.rollbacks = counts.rollbacks;
        stored.retries = counts.retries;
        // Another execution committed this chunk, or the document cannot be stored (e.g. a
        // checkpoint it cannot hold): either way the step stops.
        if (Status s = InsertChunkDoc(tx, chunk, stored, /*itemwise=*/false); !s.ok()) {
          decided = Next::kFail;
          return s;
        }
        if (advances_watermark()) {
          if (Status s = Fence(tx, &chunk, &stored); !s.ok()) {
            decided = Next::kFail;
            return s;
          }
        }
        return Status::Ok();
      },
      ChunkRunOptions());
  if (r.ok()) {
    ReleaseSkips(reserved, true);
    attempt.rollbacks = counts.rollbacks;
    attempt.retries = counts.retries;
    counts = attempt;
    skips = std::move(attempt_skips);
    return Next::kCommitted;
  }
  Status s = r.status();
  if (s.code() == Code::kUnknown) {
    auto landed = Resolve(ChunkId(chunk.k), s.txn_id());
    if (!landed.ok()) {
      ReleaseSkips(reserved, false);
      failure = landed.status();
      return Next::kFail;
    }
    if (*landed) {
      ReleaseSkips(reserved, true);
      attempt.rollbacks = counts.rollbacks;
      attempt.retries = counts.retries;
      counts = attempt;
      skips = std::move(attempt_skips);
      return Next::kCommitted;
    }
    s = Status::Aborted("batch: chunk commit rolled back after a lost reply");
  }
  ReleaseSkips(reserved, false);
  ++counts.rollbacks;
  if (decided) {
    failure = s;
    if (*decided != Next::kScan) Notify(o_.listener.on_chunk_error, chunk.k, s);
    return *decided;
  }
  // The write, or the commit, failed: the whole chunk is at stake.
  Notify(o_.listener.on_chunk_error, chunk.k, s);
  failure = s;
  ++write_attempts;
  if (o_.retry.Retryable(s) && write_attempts < o_.retry.max_attempts) {
    Notify(o_.listener.on_retry, RetryEvent{Phase::kWrite, chunk.k, "", write_attempts, s});
    return Next::kRetry;
  }
  // Write the chunk item by item to find the failing item(s), if one could be skipped or
  // recovered (a failure of the store's own data is not an item's).
  if ((fns_.recover || o_.skip.skip_limit > 0) && s.code() != Code::kCorruption) {
    return Next::kScan;
  }
  return Next::kFail;
}

Status StepRun::ProcessChunk(Chunk& chunk, Counts& counts, std::vector<SkipEvent>& skips) {
  Notify(o_.listener.before_chunk, chunk.k);
  if (o_.transaction_per_item) {
    // The scan marker first: a later execution that runs a transaction per chunk then writes
    // this chunk item by item too, and finds the items already written here by their markers.
    if (Status s = MarkScan(chunk); !s.ok()) return s;
    return ProcessItemwise(chunk, /*concurrent=*/true, counts, skips);
  }
  if (chunk.begin < scan_horizon_) {
    // Items here may have been written one by one by an earlier execution: go item by item,
    // where each item's marker is checked.
    if (Status s = MarkScan(chunk); !s.ok()) return s;
    return ProcessItemwise(chunk, /*concurrent=*/false, counts, skips);
  }
  int write_attempts = 0;
  for (int attempt = 1;; ++attempt) {
    Status failure;
    bool scan = false;
    switch (ChunkAttempt(chunk, counts, skips, failure, write_attempts, scan)) {
      case Next::kCommitted:
        return Status::Ok();
      case Next::kRetry:
        ++counts.retries;
        Backoff(attempt + 1);
        continue;
      case Next::kScan:
        // Chunk-level failures rolled back: go item by item to find the failing item(s).
        // Or an earlier execution began this chunk item by item: its marker's range is
        // extended to this chunk's positions.
        if (scan) --counts.rollbacks;  // the marker was found: nothing was attempted
        if (Status s = MarkScan(chunk); !s.ok()) return s;
        return ProcessItemwise(chunk, /*concurrent=*/false, counts, skips);
      case Next::kFail:
        return failure;
    }
  }
}

Status StepRun::MarkScan(const Chunk& chunk) {
  const std::uint64_t k = chunk.k;
  for (int attempt = 1;; ++attempt) {
    auto r = db_.Run(
        [&](TxnContext& tx) -> Status {
          if (Status s = Fence(tx, nullptr, nullptr); !s.ok()) return s;
          if (Status s = NotCommittedElsewhere(tx, k); !s.ok()) return s;
          auto sm = tx.Get(coll(), ScanId(k));
          if (!sm.ok()) return sm.status();
          if (sm->state != DocumentState::kFound) {
            return tx.Insert(coll(), ScanId(k), json::object{{"owner", exec_id_},
                                                             {"begin", chunk.begin},
                                                             {"end", chunk.end}});
          }
          const std::uint64_t begin =
              std::min(AsU64(sm->doc.if_contains("begin")).value_or(chunk.begin), chunk.begin);
          const std::uint64_t end =
              std::max(AsU64(sm->doc.if_contains("end")).value_or(chunk.end), chunk.end);
          if (Str(sm->doc, "owner") == exec_id_ &&
              AsU64(sm->doc.if_contains("begin")) == begin &&
              AsU64(sm->doc.if_contains("end")) == end) {
            return Status::Ok();
          }
          return tx.Update(coll(), ScanId(k),
                           json::object{{"owner", exec_id_}, {"begin", begin}, {"end", end}});
        },
        ChunkRunOptions());
    if (r.ok()) return Status::Ok();
    if (r.code() == Code::kUnknown) {
      // The item markers written next are trusted by a later execution only under a scan
      // marker (without one it writes the chunk whole, again): learn whether it landed.
      auto landed = Resolve(ScanId(k), r.status().txn_id());
      if (!landed.ok()) return landed.status();
      if (*landed) return Status::Ok();
    } else if (!r.status().IsRetryableTransaction() && r.code() != Code::kUnavailable) {
      return r.status();
    }
    // Try once more after a pause; a marker is cheap.
    if (attempt >= 2) {
      return r.code() == Code::kUnknown
                 ? Status::Aborted("batch: the scan marker of chunk " + std::to_string(k) +
                                   " was rolled back after a lost reply")
                 : r.status();
    }
    Backoff(attempt + 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Item by item: each item in a transaction of its own, guarded by its item marker.

Result<ItemResult> StepRun::ProcessItem(std::uint64_t k, const Item& item) {
  ItemResult res;
  enum class Mode { kNormal, kRecover, kSkip } mode = Mode::kNormal;
  Status why;  // the failure being recovered or skipped
  Phase why_phase = Phase::kProcess;
  int commit_failures = 0;
  if (Failures(item.key) >= o_.retry.max_attempts) {
    mode = Mode::kRecover;
    why = LastFailure(item.key);
  }
  for (int attempt = 1;; ++attempt) {
    std::optional<Status> user_failure;  // from process or write (not the commit)
    Phase user_phase = Phase::kProcess;
    std::optional<json::object> existing;  // the item's marker, from an earlier execution
    bool fenced_out = false;
    bool over_limit = false;
    ItemResult::Kind kind = ItemResult::kWritten;
    std::uint64_t reserved = 0;
    auto r = db_.Run(
        [&](TxnContext& tx) -> Status {
          kind = ItemResult::kWritten;
          existing.reset();
          if (Status s = Fence(tx, nullptr, nullptr); !s.ok()) {
            fenced_out = true;
            return s;
          }
          auto m = tx.Get(coll(), ItemId(item.position));
          if (!m.ok()) return m.status();
          if (m->state == DocumentState::kFound) {
            existing = m->doc;
            return Status::Ok();
          }
          Mode here = mode;
          if (here == Mode::kRecover) {
            if (fns_.recover) {
              Status rs = tx.Nested([&](TxnContext& t) { return fns_.recover(t, item, why); });
              if (rs.ok()) {
                kind = ItemResult::kRecovered;
              } else if (o_.skip.Skippable(why)) {
                here = Mode::kSkip;
              } else {
                user_failure = why;
                user_phase = why_phase;
                return why;
              }
            } else if (o_.skip.Skippable(why)) {
              here = Mode::kSkip;
            } else {
              user_failure = why;
              user_phase = why_phase;
              return why;
            }
          }
          if (here == Mode::kSkip) {
            if (!ReserveSkips(1)) {
              over_limit = true;
              return Status::FailedPrecondition("batch: skip limit " +
                                                std::to_string(o_.skip.skip_limit) + " exceeded");
            }
            reserved = 1;
            kind = ItemResult::kSkipped;
          }
          if (here == Mode::kNormal) {
            std::optional<json::value> out;
            Status ps = Process(tx, item, out);
            if (!ps.ok()) {
              user_failure = ps;
              user_phase = Phase::kProcess;
              return ps;
            }
            if (!out) {
              kind = ItemResult::kFiltered;
            } else {
              std::vector<Output> one;
              one.push_back(Output{&item, std::move(*out)});
              Status ws = tx.Nested([&](TxnContext& t) { return fns_.write(t, one); });
              if (!ws.ok()) {
                user_failure = ws;
                user_phase = Phase::kWrite;
                return ws;
              }
            }
          }
          // After the item's own writes, which read what they write: if another execution's
          // commit of the whole chunk is visible to them, it is visible here too.
          if (Status s = NotCommittedElsewhere(tx, k); !s.ok()) {
            fenced_out = true;
            return s;
          }
          json::object marker{{"position", item.position},
                              {"chunk", k},
                              {"outcome", ItemKindName(kind)},
                              {"owner", exec_id_}};
          if (kind == ItemResult::kSkipped || kind == ItemResult::kRecovered) {
            SkipEvent e{why_phase, item.position, item.key, why, kind == ItemResult::kRecovered};
            marker["phase"] = PhaseName(why_phase);
            if (Status s = InsertSkip(tx, e, &item); !s.ok()) return s;
          }
          return tx.Insert(coll(), ItemId(item.position), std::move(marker));
        },
        ChunkRunOptions());
    auto landed = Landed(r, ItemId(item.position));
    if (!landed.ok()) {
      ReleaseSkips(reserved, false);
      return landed.status();
    }
    const bool committed = *landed;
    if (committed) {
      ReleaseSkips(reserved, true);
      if (existing) {
        // Written by an earlier execution (or by this one before a lost reply): its outcome.
        const std::string outcome = Str(*existing, "outcome");
        res.kind = outcome == "filtered"    ? ItemResult::kFiltered
                   : outcome == "skipped"   ? ItemResult::kSkipped
                   : outcome == "recovered" ? ItemResult::kRecovered
                                            : ItemResult::kWritten;
        if (res.kind == ItemResult::kSkipped) {
          // Skipped by an earlier execution whose chunk did not commit: not in the totals this
          // execution started from, yet it counts against the skip limit.
          std::lock_guard<std::mutex> lock(mu_);
          ++skips_committed_;
        }
        if (res.kind == ItemResult::kSkipped || res.kind == ItemResult::kRecovered) {
          const std::string ph = Str(*existing, "phase");
          res.skip = SkipEvent{ph == "write" ? Phase::kWrite : Phase::kProcess, item.position,
                               item.key, Status::FailedPrecondition("skipped by an earlier execution"),
                               res.kind == ItemResult::kRecovered};
        }
        return res;  // nothing was written now
      }
      res.kind = kind;
      if (kind == ItemResult::kSkipped || kind == ItemResult::kRecovered) {
        res.skip = SkipEvent{why_phase, item.position, item.key, why,
                             kind == ItemResult::kRecovered};
      }
      ++res.counts.commits;
      return res;
    }
    ReleaseSkips(reserved, false);
    ++res.counts.rollbacks;
    Status s = r.status();
    Notify(o_.listener.on_chunk_error, k, s);
    if (fenced_out || over_limit) return s;
    if (user_failure) {
      const Status f = *user_failure;
      if (mode == Mode::kRecover) return f;  // the recoverer failed and f cannot be skipped
      if (o_.retry.Retryable(f)) {
        const int n = AddFailure(item.key, f);
        if (n < o_.retry.max_attempts) {
          Notify(o_.listener.on_retry, RetryEvent{user_phase, k, item.key, n, f});
          ++res.counts.retries;
          Backoff(n + 1);
          continue;
        }
        mode = Mode::kRecover;
        why = f;
        why_phase = user_phase;
        continue;
      }
      // Failed for good: recovered if a recoverer takes it, else skipped if allowed.
      if (fns_.recover || o_.skip.Skippable(f)) {
        mode = Mode::kRecover;
        why = f;
        why_phase = user_phase;
        continue;
      }
      return f;
    }
    // The commit failed.
    ++commit_failures;
    if (o_.retry.Retryable(s) && commit_failures < o_.retry.max_attempts) {
      Notify(o_.listener.on_retry, RetryEvent{Phase::kWrite, k, item.key, commit_failures, s});
      ++res.counts.retries;
      Backoff(commit_failures + 1);
      continue;
    }
    return s;
  }
}

Status StepRun::ProcessItemwise(Chunk& chunk, bool concurrent, Counts& counts,
                                std::vector<SkipEvent>& skips) {
  const std::size_t n = chunk.items.size();
  std::vector<std::optional<Result<ItemResult>>> results(n);
  std::vector<std::exception_ptr> errors;
  std::mutex errors_mu;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  auto worker = [&] {
    for (;;) {
      const std::size_t i = next.fetch_add(1);
      if (i >= n || stop.load()) return;
      try {
        results[i] = ProcessItem(chunk.k, chunk.items[i]);
        if (!results[i]->ok()) stop.store(true);
      } catch (...) {
        stop.store(true);
        std::lock_guard<std::mutex> lock(errors_mu);
        errors.push_back(std::current_exception());
      }
    }
  };
  const std::size_t threads = concurrent ? std::min<std::size_t>(o_.concurrency, n) : 1;
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  if (!errors.empty()) std::rethrow_exception(errors.front());
  Counts items;
  std::vector<SkipEvent> item_skips;
  for (std::size_t i = 0; i < n; ++i) {
    if (results[i] && !results[i]->ok()) return results[i]->status();
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!results[i]) return Status::Aborted("batch: chunk stopped");  // not reached
    const ItemResult& ir = results[i]->value();
    ++items.read;
    items.commits += ir.counts.commits;
    items.rollbacks += ir.counts.rollbacks;
    items.retries += ir.counts.retries;
    switch (ir.kind) {
      case ItemResult::kWritten:
        ++items.written;
        break;
      case ItemResult::kFiltered:
        ++items.filtered;
        break;
      case ItemResult::kSkipped:
        ++(ir.skip->phase == Phase::kWrite ? items.write_skips : items.process_skips);
        item_skips.push_back(*ir.skip);
        break;
      case ItemResult::kRecovered:
        ++items.recovered;
        item_skips.push_back(*ir.skip);
        break;
    }
  }
  items.rollbacks += counts.rollbacks;
  items.retries += counts.retries;
  counts = items;
  skips = std::move(item_skips);
  return CompleteItemwise(chunk, counts, skips);
}

Status StepRun::CompleteItemwise(Chunk& chunk, Counts& counts, std::vector<SkipEvent>& skips) {
  Counts final_counts;
  std::uint64_t reserved = 0;
  for (int attempt = 1;; ++attempt) {
    auto r = db_.Run(
        [&](TxnContext& tx) -> Status {
          final_counts = counts;
          final_counts.read_skips = chunk.read_skips.size();
          ++final_counts.commits;
          if (Status s = Fence(tx, nullptr, nullptr); !s.ok()) return s;
          if (reserved == 0 && !ReserveSkips(chunk.read_skips.size())) {
            return Status::FailedPrecondition("batch: skip limit " +
                                              std::to_string(o_.skip.skip_limit) + " exceeded");
          }
          reserved = chunk.read_skips.size();
          for (const SkipEvent& e : chunk.read_skips) {
            if (Status s = InsertSkip(tx, e, nullptr); !s.ok()) return s;
          }
          if (Status s = InsertChunkDoc(tx, chunk, final_counts, /*itemwise=*/true); !s.ok()) {
            return s;
          }
          if (advances_watermark()) return Fence(tx, &chunk, &final_counts);
          return Status::Ok();
        },
        ChunkRunOptions());
    auto landed = Landed(r, ChunkId(chunk.k));
    if (!landed.ok()) {
      ReleaseSkips(reserved, false);
      return landed.status();
    }
    const bool committed = *landed;
    if (committed) {
      ReleaseSkips(reserved, true);
      counts = final_counts;
      for (const SkipEvent& e : chunk.read_skips) skips.push_back(e);
      std::sort(skips.begin(), skips.end(),
                [](const SkipEvent& a, const SkipEvent& b) { return a.position < b.position; });
      return Status::Ok();
    }
    ReleaseSkips(reserved, false);
    reserved = 0;
    ++counts.rollbacks;
    if (r.status().IsRetryableTransaction() || r.code() == Code::kUnavailable ||
        r.code() == Code::kUnknown) {
      if (attempt < std::max(3, o_.retry.max_attempts)) {
        ++counts.retries;
        Backoff(attempt + 1);
        continue;
      }
    }
    return r.status();
  }
}

// ---------------------------------------------------------------------------------------------
// The step.

void StepRun::Finish(StepReport& report, const Status& status) {
  report.status = status;
  report.execution = execution_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    report.this_run = run_counts_;
    report.total = base_totals_;
    report.total += committed_chunks_;
    report.chunks = base_chunks_ + chunks_committed_;
    report.skipped = skipped_;
  }
  for (const auto& [k, dc] : done_) {
    report.total += dc.counts;
    ++report.chunks;
  }
  std::sort(report.skipped.begin(), report.skipped.end(),
            [](const SkipEvent& a, const SkipEvent& b) { return a.position < b.position; });
}

Result<StepReport> StepRun::Run() {
  StepReport report;
  if (Status s = Start(report); !s.ok()) return s;
  if (report.already_complete) return report;
  if (!start_checkpoint_.is_null()) {
    if (Status s = reader_.Restore(start_checkpoint_); !s.ok()) {
      return Status::FailedPrecondition("batch: the reader cannot resume at the stored "
                                        "checkpoint: " + s.ToString());
    }
  }

  // Chunks in flight (dispatched, not finished), the first failure, and worker exceptions.
  std::mutex flight_mu;
  std::condition_variable flight_cv;
  std::set<std::uint64_t> in_flight;
  std::optional<Status> failed;
  std::exception_ptr thrown;
  std::vector<std::thread> workers;
  std::deque<std::unique_ptr<Chunk>> queue;
  bool no_more = false;
  const bool pooled = o_.concurrency > 1 && !o_.transaction_per_item;

  auto run_chunk = [&](Chunk& chunk) {
    Counts counts;
    std::vector<SkipEvent> skips;
    Status s;
    try {
      s = ProcessChunk(chunk, counts, skips);
      {
        std::lock_guard<std::mutex> lock(mu_);
        run_counts_.rollbacks += counts.rollbacks;
        run_counts_.retries += counts.retries;
        if (s.ok()) {
          Counts c = counts;
          c.rollbacks = c.retries = 0;
          run_counts_ += c;
          committed_chunks_ += counts;
          ++chunks_committed_;
          for (const SkipEvent& e : skips) skipped_.push_back(e);
        }
      }
      // Listeners may throw too, also on a worker thread: like a step function's exception,
      // it ends the step once the workers are joined.
      if (s.ok()) {
        Notify(o_.listener.after_chunk, chunk.k, counts);
        for (const SkipEvent& e : skips) Notify(o_.listener.on_skip, e);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(flight_mu);
      if (!thrown) thrown = std::current_exception();
      if (!failed) failed = Status::Aborted("batch: a step function threw");
      in_flight.erase(chunk.k);
      flight_cv.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(flight_mu);
    if (!s.ok() && !failed) failed = s;
    in_flight.erase(chunk.k);
    flight_cv.notify_all();
  };

  if (pooled) {
    for (std::size_t t = 0; t < o_.concurrency; ++t) {
      workers.emplace_back([&] {
        for (;;) {
          std::unique_ptr<Chunk> c;
          {
            std::unique_lock<std::mutex> lock(flight_mu);
            flight_cv.wait(lock, [&] { return !queue.empty() || no_more; });
            if (queue.empty()) return;
            c = std::move(queue.front());
            queue.pop_front();
            if (failed) {
              // The step is failing: a chunk not started yet is left to the restart.
              in_flight.erase(c->k);
              flight_cv.notify_all();
              continue;
            }
          }
          run_chunk(*c);
        }
      });
    }
  }

  std::uint64_t k = start_chunk_;
  std::uint64_t position = start_position_;
  Status read_failure;
  std::exception_ptr read_thrown;
  try {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(flight_mu);
        if (failed) break;
      }
      if (auto it = done_.find(k); it != done_.end()) {
        // Committed by an earlier execution: move the reader past it.
        if (it->second.begin != position) {
          read_failure = ChunksMoved(k, it->second, position);
          break;
        }
        if (Status s = reader_.Restore(it->second.checkpoint); !s.ok()) {
          read_failure = Status::FailedPrecondition(
              "batch: the reader cannot resume at a stored checkpoint: " + s.ToString());
          break;
        }
        position = it->second.end;
        ++k;
        continue;
      }
      auto chunk = std::make_unique<Chunk>();
      chunk->k = k;
      chunk->begin = position;
      bool exhausted = false;
      // Below a chunk an earlier execution committed, the chunks must not reach into it: they
      // end at its first position, and the chunk right before it ends exactly there (its
      // range was fixed when the earlier execution formed it; options such as commit_interval
      // may have changed since). A chunk left with no positions is committed empty.
      std::optional<std::uint64_t> bound;
      bool exact = false;
      if (auto next = done_.upper_bound(k); next != done_.end()) {
        bound = next->second.begin;
        exact = next->first == k + 1;
        if (*bound < position) {
          read_failure = Status::FailedPrecondition(
              "batch: chunk " + std::to_string(next->first) + " was committed for positions "
              "from " + std::to_string(*bound) + ", before " + std::to_string(position) +
              ": not the same input");
          break;
        }
      }
      auto more = [&] {
        if (bound) {
          if (position >= *bound) return false;
          if (exact) return true;
        }
        return position - chunk->begin < o_.commit_interval;
      };
      while (more()) {
        auto r = reader_.Read();
        if (!r.ok()) {
          Status f = r.status();
          if (!o_.skip.Skippable(f)) {
            read_failure = f;
            break;
          }
          chunk->read_skips.push_back(SkipEvent{Phase::kRead, position, "", f, false});
          ++position;
          continue;
        }
        if (!r->has_value()) {
          exhausted = true;
          break;
        }
        Item item = std::move(**r);
        item.position = position++;
        if (item.key.empty()) item.key = std::to_string(item.position);
        chunk->items.push_back(std::move(item));
        if (!exact && o_.complete_chunk && o_.complete_chunk(chunk->items)) break;
      }
      if (!read_failure.ok()) break;
      chunk->end = position;
      if (bound && exhausted) {
        read_failure = Status::FailedPrecondition(
            "batch: the input ended at position " + std::to_string(position) +
            ", before chunks an earlier execution committed: not the same input");
        break;
      }
      if (chunk->end == chunk->begin && !bound) break;  // nothing left
      chunk->checkpoint = reader_.Checkpoint();
      ++k;
      if (!pooled) {
        {
          std::lock_guard<std::mutex> lock(flight_mu);
          in_flight.insert(chunk->k);
        }
        run_chunk(*chunk);
      } else {
        std::unique_lock<std::mutex> lock(flight_mu);
        // The window: chunk k waits until every chunk up to k - window has finished.
        flight_cv.wait(lock, [&] {
          return failed || in_flight.empty() ||
                 (in_flight.size() < o_.concurrency && chunk->k < *in_flight.begin() + window());
        });
        if (failed) break;
        in_flight.insert(chunk->k);
        queue.push_back(std::move(chunk));
        flight_cv.notify_all();
      }
      if (exhausted) break;
    }
  } catch (...) {
    read_thrown = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(flight_mu);
    no_more = true;
    if (read_thrown || !read_failure.ok()) {
      // Chunks already queued are not started.
      for (auto& c : queue) in_flight.erase(c->k);
      queue.clear();
    }
  }
  flight_cv.notify_all();
  for (auto& t : workers) t.join();
  if (read_thrown) std::rethrow_exception(read_thrown);
  if (thrown) std::rethrow_exception(thrown);

  Status final_status = failed ? *failed : read_failure;
  if (final_status.ok()) {
    // Every chunk is committed: record the completion.
    Finish(report, Status::Ok());
    auto c = db_.Run(
        [&](TxnContext& tx) -> Status {
          auto r = tx.Get(coll(), step_id_);
          if (!r.ok()) return r.status();
          if (r->state != DocumentState::kFound || Str(r->doc, "owner") != exec_id_) {
            return Status::FailedPrecondition("batch: step " + step_id_ +
                                              " was taken over by another execution");
          }
          return tx.Update(coll(), step_id_,
                           json::object{{"status", "completed"},
                                        {"next_chunk", k},
                                        {"next_position", position},
                                        {"checkpoint", reader_.Checkpoint()},
                                        {"totals", report.total.ToJson()},
                                        {"chunks", report.chunks}});
        },
        [&] {
          RunOptions r;
          r.max_attempts = 5;
          return r;
        }());
    if (c.ok()) return report;
    final_status = c.status();
  }
  Finish(report, final_status);
  Notify(o_.listener.on_error, final_status);
  if (final_status.code() != Code::kUnknown) {
    // Best effort: a failed status for monitoring; the watermark is untouched.
    (void)db_.Run(
        [&](TxnContext& tx) -> Status {
          auto r = tx.Get(coll(), step_id_);
          if (!r.ok()) return r.status();
          if (r->state != DocumentState::kFound || Str(r->doc, "owner") != exec_id_) {
            return Status::Ok();
          }
          return tx.Update(coll(), step_id_,
                           json::object{{"status", "failed"},
                                        {"last_error", final_status.ToString()}});
        },
        ChunkRunOptions());
  }
  return report;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Counts& Counts::operator+=(const Counts& o) {
  read += o.read;
  written += o.written;
  filtered += o.filtered;
  read_skips += o.read_skips;
  process_skips += o.process_skips;
  write_skips += o.write_skips;
  recovered += o.recovered;
  commits += o.commits;
  rollbacks += o.rollbacks;
  retries += o.retries;
  return *this;
}

json::object Counts::ToJson() const {
  json::object o;
  ForEachCount(*this, [&](const char* name, const std::uint64_t& v) { o[name] = v; });
  return o;
}

Result<Counts> Counts::FromJson(const json::object& o) {
  Counts c;
  Status bad;
  ForEachCount(c, [&](const char* name, std::uint64_t& v) {
    const json::value* f = o.if_contains(name);
    if (f == nullptr) return;
    auto u = AsU64(f);
    if (!u) {
      bad = Status::Corruption(std::string("batch: count \"") + name + "\" is not a number");
      return;
    }
    v = *u;
  });
  if (!bad.ok()) return bad;
  return c;
}

Result<StepReport> RunStep(Database& db, ItemReader& reader, const StepFunctions& functions,
                           const StepOptions& options) {
  if (Status s = ValidName("job", options.job); !s.ok()) return s;
  if (Status s = ValidName("step", options.step); !s.ok()) return s;
  if (Status s = ValidateCollection(options.state_collection); !s.ok()) return s;
  if (!functions.write) return Status::InvalidArgument("batch: StepFunctions::write is required");
  if (options.commit_interval == 0) {
    return Status::InvalidArgument("batch: commit_interval must be at least 1");
  }
  if (options.concurrency == 0 || options.concurrency > 1024) {
    return Status::InvalidArgument("batch: concurrency must be 1 to 1024");
  }
  if (options.retry.max_attempts < 1) {
    return Status::InvalidArgument("batch: retry.max_attempts must be at least 1");
  }
  StepRun run(db, reader, functions, options);
  return run.Run();
}

Result<StepStatus> ReadStepStatus(Database& db, const StepOptions& options) {
  if (Status s = ValidName("job", options.job); !s.ok()) return s;
  if (Status s = ValidName("step", options.step); !s.ok()) return s;
  auto r = db.Read(options.state_collection, options.job + "/" + options.step);
  if (!r.ok()) return r.status();
  if (r->state != DocumentState::kFound) {
    return Status::NotFound("batch: step " + options.job + "/" + options.step + " never ran");
  }
  StepStatus st;
  st.status = Str(r->doc, "status");
  st.execution = AsU64(r->doc.if_contains("execution")).value_or(0);
  st.chunks = AsU64(r->doc.if_contains("chunks")).value_or(0);
  st.last_error = Str(r->doc, "last_error");
  if (const json::value* t = r->doc.if_contains("totals"); t != nullptr && t->is_object()) {
    auto c = Counts::FromJson(t->as_object());
    if (!c.ok()) return c.status();
    st.total = *c;
  }
  if (st.status != "completed") {
    // Chunks committed above the watermark (chunks run at once leave it where it was until
    // the step completes or restarts) are committed work too: none lies `window` or more past
    // a missing one.
    const std::uint64_t window =
        std::max<std::uint64_t>(1, AsU64(r->doc.if_contains("window")).value_or(1));
    std::uint64_t misses = 0;
    for (std::uint64_t k = AsU64(r->doc.if_contains("next_chunk")).value_or(0); misses < window;
         ++k) {
      auto c = db.Read(options.state_collection,
                       options.job + "/" + options.step + "/chunk/" + Pad(k));
      if (!c.ok()) return c.status();
      if (c->state != DocumentState::kFound) {
        ++misses;
        continue;
      }
      misses = 0;
      auto cc = Counts::FromJson(c->doc.contains("counts") && c->doc.at("counts").is_object()
                                     ? c->doc.at("counts").as_object()
                                     : json::object{});
      if (!cc.ok()) return cc.status();
      st.total += *cc;
      ++st.chunks;
    }
  }
  return st;
}

}  // namespace litetx::batch
