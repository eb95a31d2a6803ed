// bench/bench.cpp — the measurements of `litetx bench` (see bench.h). Output: report.cpp.
#include "bench/bench.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <optional>
#include <thread>

#include <boost/json.hpp>

#include "litetx/counting_store.h"
#include "litetx/database.h"
#include "litetx/document.h"
#include "litetx/forwarding_store.h"

namespace litetx::bench {
namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;

// --- Histogram --------------------------------------------------------------------------

std::size_t Histogram::Index(std::uint64_t ns) {
  if (ns < kLinear) return static_cast<std::size_t>(ns);
  // For ns in [2^(k+5), 2^(k+6)) with k >= 1: 32 buckets of width 2^k.
  const int shift = std::bit_width(ns) - 6;
  return kLinear + static_cast<std::size_t>(shift - 1) * kSub + ((ns >> shift) - kSub);
}

double Histogram::Midpoint(std::size_t index) {
  if (index < kLinear) return static_cast<double>(index);
  const std::size_t shift = (index - kLinear) / kSub + 1;
  const double low = static_cast<double>(((index - kLinear) % kSub + kSub) << shift);
  return low + static_cast<double>(std::uint64_t{1} << shift) / 2;
}

void Histogram::Add(std::uint64_t ns) {
  ++buckets_[Index(ns)];
  ++count_;
}

void Histogram::Merge(const Histogram& other) {
  for (std::size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
}

double Histogram::PercentileUs(double p) const {
  if (count_ == 0) return 0;
  // The smallest value with at least p % of the samples at or below it.
  const auto rank =
      static_cast<std::uint64_t>(std::max(1.0, p / 100.0 * static_cast<double>(count_) + 0.5));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return Midpoint(i) / 1000.0;
  }
  return Midpoint(buckets_.size() - 1) / 1000.0;
}

void Measured::Add(const Measured& slice) {
  latency.Merge(slice.latency);
  seconds += slice.seconds;
  ops += slice.ops;
  errors += slice.errors;
  attempts += slice.attempts;
  if (first_error.empty()) first_error = slice.first_error;
  ops_per_s = seconds > 0 ? static_cast<double>(ops) / seconds : 0;
  p50_us = latency.PercentileUs(50);
  p99_us = latency.PercentileUs(99);
}

// --- Report helpers ---------------------------------------------------------------------

std::uint64_t Report::errors() const {
  std::uint64_t n = round_trip.errors;
  for (const TxRow& r : rows) n += r.raw.errors + r.tx.errors + r.native.errors;
  for (const ReadRow& r : reads) n += r.committed.errors + r.raw.errors;
  return n;
}

bool Report::all_targets_met() const {
  return std::all_of(rows.begin(), rows.end(), [](const TxRow& r) { return r.meets_target(); });
}

namespace {

long MaxRssKb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;  // Linux: kilobytes
}

std::string DocId(int thread, int i) {
  return "t" + std::to_string(thread) + "-d" + std::to_string(i);
}
std::string RawId(int thread) { return "t" + std::to_string(thread) + "-raw"; }

// Counts the round trips on a committing thread's critical path: the store calls a thread
// makes while it holds a Scope, i.e. between its call to Database::Commit and the return. A
// single call is one round trip, a non-empty Batch is one (forwarded whole, so the store
// below still runs it as one). Calls from other threads (a lease keeper, work the engine
// finishes in the background) pass uncounted. The count goes to the Scope's own counter,
// which only its thread touches: no shared counter slows the figures measured through it.
class CriticalPathStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  // While alive, counts this thread's calls through `store` into *counter.
  class Scope {
   public:
    Scope(const CriticalPathStore& store, std::uint64_t* counter)
        : saved_owner_(owner_), saved_counter_(counter_) {
      owner_ = &store;
      counter_ = counter;
    }
    ~Scope() {
      owner_ = saved_owner_;
      counter_ = saved_counter_;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const CriticalPathStore* saved_owner_;
    std::uint64_t* saved_counter_;
  };

  Result<std::optional<StoredDocument>> Get(const Key& key) override {
    Count();
    return ForwardingStore::Get(key);
  }
  Result<Revision> Create(const Key& key, const boost::json::object& value) override {
    Count();
    return ForwardingStore::Create(key, value);
  }
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override {
    Count();
    return ForwardingStore::Replace(key, expected, value);
  }
  Status Erase(const Key& key, Revision expected) override {
    Count();
    return ForwardingStore::Erase(key, expected);
  }
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override {
    Count();
    return ForwardingStore::Scan(collection, cursor, limit);
  }
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override {
    Count();
    return ForwardingStore::ListCollections(cursor, limit);
  }
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override {
    if (!ops.empty()) Count();
    return ForwardBatch(ops);
  }

 private:
  void Count() const {
    if (owner_ == this) ++*counter_;
  }
  static thread_local const CriticalPathStore* owner_;
  static thread_local std::uint64_t* counter_;
};

thread_local const CriticalPathStore* CriticalPathStore::owner_ = nullptr;
thread_local std::uint64_t* CriticalPathStore::counter_ = nullptr;

// One critical-path counter per worker thread, each on a cache line of its own.
struct alignas(64) ThreadCounter {
  std::uint64_t value = 0;
};

// One operation of one worker thread; built before the clock starts.
using Op = std::function<Status()>;

// Runs `threads` workers, each repeating the operation make(thread) returns, for a warm-up
// and then `duration`. Operations that start inside the timed window are counted; the rate
// divides them by the time from the window's start to the moment the last worker stopped.
//
// Reading the clock costs ~25-50 ns on a VM (kvm-clock), as much as a tenth of an in-memory
// CAS, so a worker whose operations took under kFastOpNs on average during the warm-up reads
// the clock (deadline and latency) only on every kSampleStride-th operation: latencies are
// then a uniform sample, and the clock costs the throughput well under 1 %.
Measured Measure(int threads, std::chrono::milliseconds duration,
                 const std::function<Op(int)>& make) {
  constexpr std::int64_t kFastOpNs = 5'000;
  constexpr std::uint64_t kSampleStride = 16;
  struct Worker {
    Op op;
    Histogram hist;
    std::uint64_t ops = 0, errors = 0, attempts = 0;
    SteadyClock::time_point stopped{};
    std::string first_error;
  };
  std::vector<Worker> workers(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) workers[static_cast<std::size_t>(t)].op = make(t);

  const auto warmup =
      std::min<SteadyClock::duration>(duration / 10, std::chrono::milliseconds(200));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  SteadyClock::time_point warmup_start, window_start, window_end;  // written before `go`
  std::vector<std::thread> pool;
  for (Worker& w : workers) {
    pool.emplace_back([&] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      std::uint64_t stride = 1, warm_ops = 0;
      bool in_window = false;
      for (std::uint64_t i = 0;; ++i) {
        const bool timed = i % stride == 0;
        SteadyClock::time_point t1;
        if (timed) {
          t1 = SteadyClock::now();
          if (t1 >= window_end) {
            w.stopped = t1;
            break;
          }
          if (!in_window && t1 >= window_start) {
            in_window = true;
            const auto warm_ns = std::chrono::nanoseconds(t1 - warmup_start).count();
            if (warm_ops > 0 && warm_ns / static_cast<std::int64_t>(warm_ops) < kFastOpNs) {
              stride = kSampleStride;
            }
          }
        }
        Status s = w.op();
        ++w.attempts;
        if (!s.ok()) {
          ++w.errors;
          if (w.first_error.empty()) w.first_error = s.ToString();
          continue;
        }
        if (!in_window) {
          ++warm_ops;
          continue;
        }
        ++w.ops;
        if (timed) {
          w.hist.Add(static_cast<std::uint64_t>(
              std::chrono::nanoseconds(SteadyClock::now() - t1).count()));
        }
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  warmup_start = SteadyClock::now();
  window_start = warmup_start + warmup;
  window_end = window_start + duration;
  go.store(true, std::memory_order_release);
  for (std::thread& t : pool) t.join();

  Measured m;
  SteadyClock::time_point stopped = window_end;
  for (Worker& w : workers) {
    m.latency.Merge(w.hist);
    m.ops += w.ops;
    m.errors += w.errors;
    m.attempts += w.attempts;
    stopped = std::max(stopped, w.stopped);
    if (m.first_error.empty()) m.first_error = w.first_error;
  }
  m.seconds = std::chrono::duration<double>(stopped - window_start).count();
  m.ops_per_s = m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds : 0;
  m.p50_us = m.latency.PercentileUs(50);
  m.p99_us = m.latency.PercentileUs(99);
  return m;
}

// Raw single-document CAS: Replace at the expected revision on the thread's own key, with a
// body the size of a benchmark document (a field changes on every write). raw[t] holds the
// key's current body and revision from one measurement to the next.
std::function<Op(int)> RawCas(Store& store, const std::string& collection,
                              std::vector<StoredDocument>& raw) {
  return [&store, &collection, &raw](int t) -> Op {
    StoredDocument* doc = &raw[static_cast<std::size_t>(t)];
    return [&store, doc, key = Key{collection, RawId(t)}]() -> Status {
      json::value& balance = doc->value["balance"];
      balance = balance.to_number<std::int64_t>() + 1;
      auto r = store.Replace(key, doc->revision, doc->value);
      if (r.ok()) {
        doc->revision = *r;
        return Status::Ok();
      }
      if (auto g = store.Get(key); g.ok() && g->has_value()) doc->revision = (*g)->revision;
      return r.status();
    };
  };
}

// Sets up the documents: for every thread, kGroups x max(sizes) documents and one raw CAS key. An id
// left over from an earlier run with the same pid is reused.
Result<std::vector<StoredDocument>> Setup(Store& store, Database& db, const Config& c,
                                          int max_threads) {
  const int max_n = *std::max_element(c.sizes.begin(), c.sizes.end());
  std::vector<StoredDocument> raw;
  for (int t = 0; t < max_threads; ++t) {
    for (int i = 0; i < kGroups * max_n; ++i) {
      auto r = db.Commit(Transaction().Insert(c.collection, DocId(t, i),
                                              {{"balance", 0}, {"owner", DocId(t, i)}}));
      if (!r.ok() && r.code() != Code::kConflict) return r.status();
    }
    // The raw key holds what a benchmark document looks like in the store (with _ltx).
    auto g = store.Get(Key{c.collection, DocId(t, 0)});
    if (!g.ok()) return g.status();
    if (!g->has_value()) return Status::Corruption("benchmark document vanished");
    Key key{c.collection, RawId(t)};
    auto created = store.Create(key, (*g)->value);
    if (created.ok()) {
      raw.push_back(StoredDocument{(*g)->value, *created});
      continue;
    }
    auto again = store.Get(key);
    if (!again.ok() || !again->has_value()) return created.status();
    raw.push_back(**again);
  }
  return raw;
}


}  // namespace

Result<Report> Run(std::shared_ptr<Store> store, const Config& config, const Options& engine,
                   const std::function<void(const TxRow&)>& on_row) {
  Config c = config;
  if (c.collection.empty()) c.collection = "bench." + std::to_string(::getpid());
  if (c.sizes.empty()) c.sizes = {1, 2, 4, 16};
  std::vector<int> thread_counts{1};
  if (c.threads > 1) thread_counts.push_back(c.threads);

  // Transactions go through a CountingStore so that writes and round trips are counted, not
  // computed, and above it a CriticalPathStore that counts the committing threads' own round
  // trips; raw operations and the read comparison use the store itself.
  auto counting = std::make_shared<CountingStore>(store);
  auto critical = std::make_shared<CriticalPathStore>(counting);
  Database plain(store, engine);

  Report report;
  report.collection = c.collection;
  report.duration = c.duration;
  report.rounds = std::max(1, c.rounds);
  report.start_rss_kb = MaxRssKb();
  auto raw = Setup(*store, plain, c, thread_counts.back());
  if (!raw.ok()) return raw.status();

  const int rounds = std::max(1, c.rounds);
  const auto slice = std::max(std::chrono::milliseconds(1), c.duration / rounds);
  const auto get = [&](int t) -> Op {
    return [&store, key = Key{c.collection, DocId(t, 0)}]() -> Status {
      auto g = store->Get(key);
      if (!g.ok()) return g.status();
      return g->has_value() ? Status::Ok() : Status::Corruption("benchmark document missing");
    };
  };
  if (c.calibrate_round_trip) report.round_trip = Measure(1, slice, get);
  const double rt_us = report.round_trip.p50_us;
  for (int threads : thread_counts) {
    for (int n : c.sizes) {
      TxRow row;
      row.n = n;
      row.threads = threads;
      const long rss_before = MaxRssKb();
      counting->Reset();
      // A Database per row, destroyed before the counts are read: work it does on threads of
      // its own after Commit returned belongs to this row's counts, provided its destructor
      // waits for that work.
      std::optional<Database> db_holder;
      Database& db = db_holder.emplace(critical, engine);
      std::vector<ThreadCounter> on_path(static_cast<std::size_t>(threads));
      const int max_n = *std::max_element(c.sizes.begin(), c.sizes.end());
      const auto commit = [&](int t) -> Op {
        // Group g holds documents g*max_n .. g*max_n+n-1 of the thread.
        auto txns = std::make_shared<std::vector<Transaction>>(c.hot ? 1 : kGroups);
        for (std::size_t g = 0; g < txns->size(); ++g) {
          for (int i = 0; i < n; ++i) {
            (*txns)[g].Adjust(c.collection, DocId(t, static_cast<int>(g) * max_n + i),
                              {{"balance", 1}});
          }
        }
        return [&db, &critical, txns, next = std::make_shared<std::size_t>(0),
                counter = &on_path[static_cast<std::size_t>(t)].value]() -> Status {
          CriticalPathStore::Scope scope(*critical, counter);
          const Transaction& txn = (*txns)[(*next)++ % txns->size()];
          return db.Commit(txn).status();
        };
      };
      const bool native = c.native && threads == 1;
      const auto native_op = [&](int) -> Op {
        return [&c, n]() -> Status { return c.native(n); };
      };
      for (int r = 0; r < rounds; ++r) {
        row.raw.Add(Measure(threads, slice, RawCas(*store, c.collection, *raw)));
        row.tx.Add(Measure(threads, slice, commit));
        if (native) row.native.Add(Measure(1, slice, native_op));
      }
      db_holder.reset();
      const StoreCounts counts = counting->counts();
      const auto attempts = static_cast<double>(std::max<std::uint64_t>(1, row.tx.attempts));
      row.writes_per_tx = static_cast<double>(counts.writes()) / attempts;
      row.reads_per_tx = static_cast<double>(counts.gets) / attempts;
      row.round_trips_per_tx = static_cast<double>(counts.round_trips) / attempts;
      row.batches_per_tx = static_cast<double>(counts.batches) / attempts;
      std::uint64_t critical_calls = 0;
      for (const ThreadCounter& tc : on_path) critical_calls += tc.value;
      row.critical_round_trips_per_tx = static_cast<double>(critical_calls) / attempts;
      if (rt_us > 0) {
        row.p50_round_trips = row.tx.p50_us / rt_us;
        row.p99_round_trips = row.tx.p99_us / rt_us;
      }
      const int bound_writes = n == 1 ? 1 : 2 * n + 3;
      row.bound_tx_per_s = row.raw.ops_per_s / bound_writes;
      row.ratio_to_bound = row.bound_tx_per_s > 0 ? row.tx.ops_per_s / row.bound_tx_per_s : 0;
      row.meets_speed = row.ratio_to_bound >= 0.9;
      row.meets_writes = row.writes_per_tx <= 2.0 * n + 3;
      row.peak_rss_kb = MaxRssKb();
      row.peak_rss_delta_kb = row.peak_rss_kb - rss_before;
      if (on_row) on_row(row);
      report.rows.push_back(std::move(row));
    }
  }

  for (int threads : thread_counts) {
    ReadRow row;
    row.threads = threads;
    const auto committed = [&](int t) -> Op {
      return [&plain, &c, id = DocId(t, 0)]() -> Status {
        auto r = plain.Read(c.collection, id);
        if (!r.ok()) return r.status();
        return r->state == DocumentState::kFound ? Status::Ok()
                                                 : Status::Corruption("benchmark document missing");
      };
    };
    for (int r = 0; r < rounds; ++r) {
      row.committed.Add(Measure(threads, slice, committed));
      row.raw.Add(Measure(threads, slice, get));
    }
    report.reads.push_back(std::move(row));
  }

  report.peak_rss_kb = MaxRssKb();
  if (c.cleanup) report.cleaned = EraseCollection(*store, c.collection, &report.cleanup_error);
  return report;
}

std::uint64_t EraseCollection(Store& store, const std::string& collection, std::string* error) {
  std::uint64_t erased = 0;
  std::string cursor;
  for (;;) {
    auto page = store.Scan(collection, cursor, 256);
    if (!page.ok()) {
      *error = page.status().ToString();
      return erased;
    }
    for (const auto& [id, doc] : page->documents) {
      Status s = store.Erase(Key{collection, id}, doc.revision);
      if (s.ok()) {
        ++erased;
      } else if (error->empty()) {
        *error = id + ": " + s.ToString();
      }
    }
    if (page->next_cursor.empty()) return erased;
    cursor = page->next_cursor;
  }
}

}  // namespace litetx::bench
