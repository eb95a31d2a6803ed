// bench/bench.h — the measurements behind `litetx bench`: the raw compare-and-swap rate of a
// store, then transactions of N documents on the same store in the same run, with the store
// writes and round trips they cost (counted through a CountingStore, and on the committing
// thread's critical path through a store of bench.cpp), their commit latency and the
// process's peak memory; and a committed read (Database::Read) beside a raw read (Store::Get).
//
// Workload: every thread owns its documents (ids "t<thread>-d<i>" in one collection of its
// own, "bench.<pid>"), so threads never contend for a document and the figures measure the
// protocol, not waiting on held documents. A transaction is N Adjust actions (+1 to a numeric
// field) on N distinct documents; N = 1 takes the one-write fast path, N >= 2 the full path
// (record create, N applies, commit flip, N finishes, outcome marker: 2N+3 writes).
//
// Thread safety: Run is not reentrant; it starts and joins its own worker threads.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/json/value.hpp>

#include "litetx/options.h"
#include "litetx/store.h"

namespace litetx::bench {

struct Config {
  // Timed length of every measurement. A transaction row and the raw CAS measurement it is
  // compared with alternate in `rounds` slices of duration / rounds each (raw, tx, raw, tx...)
  // so that a store whose speed drifts (fsync under other load) affects both alike. Every
  // slice starts with an untimed warm-up of a tenth of it (at most 200 ms).
  std::chrono::milliseconds duration{2'000};
  int rounds = 4;
  // Documents per transaction.
  std::vector<int> sizes{1, 2, 4, 16};
  // Thread counts: each size is measured with 1 thread and with `threads` (if > 1).
  int threads = 4;
  // The collection the benchmark writes (documents and raw CAS keys). Empty: "bench.<pid>".
  std::string collection;
  // Erase the benchmark's documents when done (their outcome markers in __litetx.txn are left
  // to the collector, which erases them after CollectorOptions::outcome_retention).
  bool cleanup = true;
  // Measure, before the rows, the latency of one Store::Get on the store given to Run (for a
  // store that models a network round trip: its p50 is the unit of the rows' latencies in
  // round trips, Report::round_trip and TxRow::p50_round_trips).
  bool calibrate_round_trip = false;
  // The store's own multi-document transaction of n documents, without litetx (may be null):
  // each 1-thread row then also measures it, on one thread, in slices alternating with the
  // raw CAS and transaction slices (raw, tx, native, raw, tx, native...), so that a store whose
  // speed drifts affects all three alike. TxRow::native.
  std::function<Status(int n)> native;
  // Every transaction of a thread on the same N documents. Otherwise (the default) each thread
  // cycles through kGroups groups of N documents of its own, so that a transaction does not
  // meet the previous one's documents while those are still being finished in the background
  // (a service updating many documents, rather than one hot spot).
  bool hot = false;
};

// Groups of documents each thread cycles through unless Config::hot.
inline constexpr int kGroups = 8;

// A latency histogram of fixed size (log-linear buckets, 32 per power of two: each value is
// known within ~3 %), so recording allocates nothing and does not move peak memory.
class Histogram {
 public:
  void Add(std::uint64_t ns);
  void Merge(const Histogram& other);
  std::uint64_t count() const { return count_; }
  // The p-th percentile (0 < p <= 100) in microseconds, the midpoint of its bucket; 0 if empty.
  double PercentileUs(double p) const;

 private:
  static constexpr int kLinear = 64;  // values below this have a bucket each
  static constexpr int kSub = 32;     // buckets per power of two above it
  static std::size_t Index(std::uint64_t ns);
  static double Midpoint(std::size_t index);
  std::array<std::uint64_t, kLinear + 59 * kSub> buckets_{};
  std::uint64_t count_ = 0;
};

// One timed measurement (or several slices of one, added up): `ops` successful operations
// started inside the timed windows, which lasted `seconds` in all.
struct Measured {
  double ops_per_s = 0;
  double seconds = 0;
  Histogram latency;
  double p50_us = 0;
  double p99_us = 0;
  std::uint64_t ops = 0;
  std::uint64_t errors = 0;       // operations that returned an error (not in ops or latency)
  std::uint64_t attempts = 0;     // every operation, warm-up included (writes are per attempt)
  std::string first_error;
  // Adds a slice measured the same way (rates and percentiles recomputed over both).
  void Add(const Measured& slice);
};

// Transactions of N documents with `threads` threads, and the raw CAS rate measured in
// slices alternating with them, with the same thread count (Config::rounds).
struct TxRow {
  int n = 0;
  int threads = 0;
  Measured raw;          // Store::Replace at the expected revision, one key per thread
  Measured tx;           // Database::Commit of N adjusts
  Measured native;       // Config::native(n), 1-thread rows only (empty otherwise)
  double writes_per_tx = 0;  // counted: (creates + replaces + erases) / commits attempted
  double reads_per_tx = 0;   // counted: gets / commits attempted
  // Counted: store calls (a single call, or a non-empty Batch, is one round trip) per commit
  // attempted, from every thread (the committing one and any the engine works on)...
  double round_trips_per_tx = 0;
  // ...and only those the committing thread made between the call to Commit and its return.
  double critical_round_trips_per_tx = 0;
  double batches_per_tx = 0;  // counted: non-empty Batch calls per commit attempted
  // Commit latency divided by Report::round_trip.p50_us (0 without a calibration).
  double p50_round_trips = 0;
  double p99_round_trips = 0;
  double bound_tx_per_s = 0;  // raw CAS/s / (2N+3), or raw CAS/s itself for N = 1
  double ratio_to_bound = 0;  // tx/s / bound
  bool meets_speed = false;   // ratio_to_bound >= 0.9
  bool meets_writes = false;  // writes_per_tx <= 2N+3
  long peak_rss_kb = 0;       // getrusage ru_maxrss after the row
  long peak_rss_delta_kb = 0;  // how much this row raised it
  bool meets_target() const { return meets_speed && meets_writes; }
};

// A committed read (Database::Read, read-committed) against a raw Store::Get of the same
// settled document, one document per thread.
struct ReadRow {
  int threads = 0;
  Measured committed;
  Measured raw;
};

struct Report {
  std::string collection;
  std::chrono::milliseconds duration{0};
  int rounds = 0;
  std::vector<TxRow> rows;
  std::vector<ReadRow> reads;
  // With Config::calibrate_round_trip: single Store::Get calls on one thread, measured before
  // the rows (empty otherwise).
  Measured round_trip;
  long start_rss_kb = 0;  // ru_maxrss before the first measurement
  long peak_rss_kb = 0;   // ru_maxrss at the end
  std::uint64_t cleaned = 0;  // documents erased by the cleanup
  std::string cleanup_error;  // empty if the cleanup succeeded (or was not asked for)
  std::uint64_t errors() const;
  bool all_targets_met() const;
};

// Runs every measurement on `store`. `engine` configures the Database (logger...); its lease
// must exceed a measurement so that no lease extension is counted. `on_row` (may be null) is
// called as each transaction row completes, for progress output. Returns kUnavailable /
// kCorruption if the setup (inserting the documents) fails.
Result<Report> Run(std::shared_ptr<Store> store, const Config& config, const Options& engine,
                   const std::function<void(const TxRow&)>& on_row = nullptr);

// The report as JSON: {"collection", "duration_ms", "rows": [{n, threads, tx_per_s,
// raw_cas_per_s, writes_per_tx, p50_us, p99_us, ratio_to_bound, meets_target, ...}],
// "reads": [...], "peak_rss_kb", "all_targets_met", ...}. Documented in docs/benchmarks.md.
boost::json::value ToJson(const Report& report);
// One readable table line per row, with a header; `TableRow` is for progress output.
// `round_trips`: with the p50 RT and p99 RT columns (latency in calibrated round trips).
std::string TableHeader(bool round_trips);
std::string TableRow(const TxRow& row, bool round_trips);
// The round-trip calibration (Report::round_trip) as one line; empty without one.
std::string RoundTripLine(const Report& report);
std::string ReadTable(const Report& report);

// Erases every document of `collection` at the revision scanned (a document changed meanwhile
// is left, and the first failure is put in *error); returns how many were erased.
std::uint64_t EraseCollection(Store& store, const std::string& collection, std::string* error);

}  // namespace litetx::bench
