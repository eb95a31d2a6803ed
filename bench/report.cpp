// bench/report.cpp — the benchmark report as JSON and as a readable table (see bench.h).
#include <cmath>
#include <cstdio>

#include <boost/json.hpp>

#include "bench/bench.h"

namespace litetx::bench {
namespace json = boost::json;

namespace {

double Round(double x, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(x * scale) / scale;
}

// Rates are printed as whole numbers (Boost.JSON would write 289693.8 as 2.896938E5).
std::int64_t PerSecond(double x) { return std::llround(x); }

std::string Format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string Verdict(const TxRow& r) {
  if (r.meets_target()) return "met";
  if (!r.meets_speed && !r.meets_writes) return "below target (speed, writes)";
  return r.meets_speed ? "below target (writes)" : "below target (speed)";
}

}  // namespace

json::value ToJson(const Report& report) {
  json::array rows;
  for (const TxRow& r : report.rows) {
    json::object o{
        {"n", r.n},
        {"threads", r.threads},
        {"tx_per_s", PerSecond(r.tx.ops_per_s)},
        {"raw_cas_per_s", PerSecond(r.raw.ops_per_s)},
        {"writes_per_tx", Round(r.writes_per_tx, 3)},
        {"write_bound", 2 * r.n + 3},
        {"reads_per_tx", Round(r.reads_per_tx, 3)},
        {"round_trips_per_tx", Round(r.round_trips_per_tx, 3)},
        {"critical_round_trips_per_tx", Round(r.critical_round_trips_per_tx, 3)},
        {"batches_per_tx", Round(r.batches_per_tx, 3)},
        {"p50_us", Round(r.tx.p50_us, 2)},
        {"p99_us", Round(r.tx.p99_us, 2)},
        {"raw_p50_us", Round(r.raw.p50_us, 2)},
        {"raw_p99_us", Round(r.raw.p99_us, 2)},
        {"bound_tx_per_s", PerSecond(r.bound_tx_per_s)},
        {"ratio_to_bound", Round(r.ratio_to_bound, 3)},
        {"meets_speed_target", r.meets_speed},
        {"meets_writes_target", r.meets_writes},
        {"meets_target", r.meets_target()},
        {"commits", r.tx.ops},
        {"errors", r.tx.errors + r.raw.errors},
        {"peak_rss_kb", r.peak_rss_kb},
        {"peak_rss_delta_kb", r.peak_rss_delta_kb},
    };
    if (report.round_trip.ops > 0) {
      o["p50_round_trips"] = Round(r.p50_round_trips, 3);
      o["p99_round_trips"] = Round(r.p99_round_trips, 3);
    }
    if (!r.tx.first_error.empty()) o["first_error"] = r.tx.first_error;
    if (!r.raw.first_error.empty()) o["raw_first_error"] = r.raw.first_error;
    rows.push_back(std::move(o));
  }
  json::array reads;
  for (const ReadRow& r : report.reads) {
    json::object o{
        {"threads", r.threads},
        {"committed_read_per_s", PerSecond(r.committed.ops_per_s)},
        {"committed_p50_us", Round(r.committed.p50_us, 2)},
        {"committed_p99_us", Round(r.committed.p99_us, 2)},
        {"raw_read_per_s", PerSecond(r.raw.ops_per_s)},
        {"raw_p50_us", Round(r.raw.p50_us, 2)},
        {"raw_p99_us", Round(r.raw.p99_us, 2)},
        {"committed_to_raw",
         Round(r.raw.ops_per_s > 0 ? r.committed.ops_per_s / r.raw.ops_per_s : 0, 3)},
        {"errors", r.committed.errors + r.raw.errors},
    };
    if (!r.committed.first_error.empty()) o["first_error"] = r.committed.first_error;
    if (!r.raw.first_error.empty()) o["raw_first_error"] = r.raw.first_error;
    reads.push_back(std::move(o));
  }
  json::object out{
      {"collection", report.collection},
      {"duration_ms", report.duration.count()},
      {"rounds", report.rounds},
      {"rows", std::move(rows)},
      {"reads", std::move(reads)},
      {"start_rss_kb", report.start_rss_kb},
      {"peak_rss_kb", report.peak_rss_kb},
      {"errors", report.errors()},
      {"all_targets_met", report.all_targets_met()},
      {"cleaned", report.cleaned},
  };
  if (report.round_trip.ops > 0 || report.round_trip.errors > 0) {
    json::object rt{
        {"get_p50_us", Round(report.round_trip.p50_us, 2)},
        {"get_p99_us", Round(report.round_trip.p99_us, 2)},
        {"gets", report.round_trip.ops},
        {"errors", report.round_trip.errors},
    };
    if (!report.round_trip.first_error.empty()) rt["first_error"] = report.round_trip.first_error;
    out["round_trip"] = std::move(rt);
  }
  if (!report.cleanup_error.empty()) out["cleanup_error"] = report.cleanup_error;
  return out;
}

std::string TableHeader(bool round_trips) {
  return std::string("  N thr       tx/s  raw CAS/s  bound tx/s  ratio  writes/tx (bound)  reads/tx"
                     "  RT/tx  crit RT/tx   p50 us    p99 us") +
         (round_trips ? "  p50 RT  p99 RT" : "") + "  peak RSS MB  target\n";
}

std::string TableRow(const TxRow& r, bool round_trips) {
  std::string line = Format(
      "%3d %3d %10.0f %10.0f %11.0f %6.3f %11.2f (%3d) %9.2f %6.2f %11.2f %8.1f %9.1f", r.n,
      r.threads, r.tx.ops_per_s, r.raw.ops_per_s, r.bound_tx_per_s, r.ratio_to_bound,
      r.writes_per_tx, 2 * r.n + 3, r.reads_per_tx, r.round_trips_per_tx,
      r.critical_round_trips_per_tx, r.tx.p50_us, r.tx.p99_us);
  if (round_trips) line += Format(" %7.2f %7.2f", r.p50_round_trips, r.p99_round_trips);
  line += Format(" %12.1f  ", static_cast<double>(r.peak_rss_kb) / 1024.0);
  line += Verdict(r);
  if (r.tx.errors + r.raw.errors > 0) {
    line += Format("  [%llu errors: %s]",
                   static_cast<unsigned long long>(r.tx.errors + r.raw.errors),
                   (r.tx.first_error.empty() ? r.raw.first_error : r.tx.first_error).c_str());
  }
  return line + "\n";
}

std::string RoundTripLine(const Report& report) {
  if (report.round_trip.ops == 0) return {};
  return Format("round trip: one Store::Get through this store, p50 %.1f us, p99 %.1f us "
                "(%llu gets, 1 thread); the rows' p50 RT and p99 RT are commit latencies in "
                "units of this p50\n",
                report.round_trip.p50_us, report.round_trip.p99_us,
                static_cast<unsigned long long>(report.round_trip.ops));
}

std::string ReadTable(const Report& report) {
  std::string out =
      "reads (one settled document per thread)\n"
      "thr  committed/s   p50 us   p99 us      raw Get/s   p50 us   p99 us  committed/raw\n";
  for (const ReadRow& r : report.reads) {
    out += Format("%3d %12.0f %8.2f %8.2f %14.0f %8.2f %8.2f %14.3f\n", r.threads,
                  r.committed.ops_per_s, r.committed.p50_us, r.committed.p99_us,
                  r.raw.ops_per_s, r.raw.p50_us, r.raw.p99_us,
                  r.raw.ops_per_s > 0 ? r.committed.ops_per_s / r.raw.ops_per_s : 0.0);
  }
  return out;
}

}  // namespace litetx::bench
