// tools/cmd_import.cpp — `litetx import [FILE|-]`: bulk import of NDJSON or a JSON array of
// objects into one collection, all or nothing (litetx/importer.h), and `import --bench ROWS`.
//
// The input is streamed (never held whole). Output: one JSON object on stdout, the summary:
//   {"outcome": "committed" | "cancelled" | an outcome name (invalid_argument, conflict,
//    busy, aborted, unknown, unavailable, corruption), "committed"?: bool (absent for
//    unknown), "message"? (not committed), "txn_id"?, "collection", "rows_read", "imported",
//    "skipped", "bad_rows": [{"line", "reason"}...] (at most 1000), "bytes_read", "chunks",
//    "settled", "acknowledged_s", "settled_s", "rolled_back_s", "total_s", "rollback_error"?,
//    "interrupted"?}
// and the exit code (cli.h): 0 committed (bad rows skipped with --skip-bad included); 2 bad
// input or a bad row rolled the import back (also bad flags, an unreadable file, empty input);
// 10 an insert met a live document (without --skip-bad: rolled back); the outcome codes of
// `apply` for store failures (11, 14, 15, 16, 18). See docs/import.md.
//
// A progress bar goes to stderr when stderr is a terminal (rows, rows/s, and with a file of
// known size the percentage and the time left), never with --quiet or into a pipe or file.
//
// SIGINT and SIGTERM (tools/signals.h): a signal while rows are read stops the reading; the
// import is rolled back, the summary says "outcome": "cancelled" and "interrupted", and the
// exit code is 130 (SIGINT) or 143 (SIGTERM). Once the commit has begun it runs to its end
// (committed or rolled back, as without the signal); the summary then says so, with
// "interrupted", and the exit code is 130 or 143 all the same. A second signal exits at once;
// the collector rolls back the abandoned import after its lease.
//
// --bench ROWS writes ROWS generated rows of about 200 bytes as NDJSON to a temporary file (or
// uses FILE), then measures on the store, in one run: the raw baseline (the same rows read and
// parsed the same way, written with one Store::Create each), the import (to the commit point and
// to settled), and an import rolled back after its last row; prints one JSON object with the
// times, the ratios to the baseline, the peak RSS and whether each target is met; erases what
// it wrote (collections import-bench.<pid>.*).
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <streambuf>
#include <vector>
#include <thread>

#include "bench/bench.h"
#include "engine/validate.h"
#include "import/rows.h"
#include "litetx/importer.h"
#include "tools/cli.h"
#include "tools/signals.h"

namespace litetx::cli {
namespace {

// On LMDB, the pages an import reads stay mapped in the process and would show as an RSS the
// size of the database file: they are handed back to the kernel once more than 64 MiB of
// mapped files are resident (LmdbOptions::max_mapped_bytes).
constexpr std::size_t kMaxMappedBytes = std::size_t{64} << 20;
namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;

struct ImportArgs {
  std::string file = "-";
  std::string collection;
  std::string id_field;
  std::string mode = "insert";
  bool skip_bad = false;
  std::size_t chunk = LargeTransactionOptions{}.chunk_actions;
  bool quiet = false;
  bool no_settle = false;
  std::uint64_t bench = 0;  // --bench ROWS; 0: no benchmark
};

double Seconds(std::chrono::nanoseconds d) {
  return std::round(std::chrono::duration<double>(d).count() * 1e6) / 1e6;
}

long PeakRssKb() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // kilobytes on Linux
}

// The process's anonymous resident memory (RssAnon in /proc/self/status: heap, stacks; not
// file-backed pages such as an LMDB store's memory map), in kilobytes; 0 if unknown.
long AnonRssKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::strtol(line.c_str() + 8, nullptr, 10);
  }
  return 0;
}

// Samples AnonRssKb every 10 ms from a thread of its own and keeps the highest value.
class AnonRssPeak {
 public:
  AnonRssPeak() : thread_([this] { Run(); }) {}
  ~AnonRssPeak() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  long peak_kb() const { return std::max(peak_.load(), AnonRssKb()); }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const long now = AnonRssKb();
      if (now > peak_.load()) peak_.store(now);
      if (cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; })) return;
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<long> peak_{0};
  std::thread thread_;
};

// "1:05", "12:00:03": a duration in whole seconds as a clock shows it.
std::string ClockText(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char out[32];
  if (s >= 3600) {
    std::snprintf(out, sizeof out, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(out, sizeof out, "%ld:%02ld", s / 60, s % 60);
  }
  return out;
}

// The progress bar on stderr (a terminal): one line redrawn in place.
class ProgressBar {
 public:
  explicit ProgressBar(std::optional<std::uint64_t> size) : size_(size) {}

  void Draw(const ImportProgress& p) {
    const double elapsed = std::chrono::duration<double>(p.elapsed).count();
    std::string line = "\r\033[K";
    char buf[160];
    if (size_ && *size_ > 0) {
      const double fraction =
          std::min(1.0, static_cast<double>(p.bytes_read) / static_cast<double>(*size_));
      const int width = 24;
      const int filled = static_cast<int>(width * fraction);
      line += "[" + std::string(static_cast<std::size_t>(filled), '#') +
              std::string(static_cast<std::size_t>(width - filled), '.') + "]";
      std::snprintf(buf, sizeof buf, " %3.0f%%", fraction * 100);
      line += buf;
    }
    std::snprintf(buf, sizeof buf, "  %llu rows  %.0f rows/s",
                  static_cast<unsigned long long>(p.rows_read), p.rows_per_s);
    line += buf;
    if (p.reading_done) {
      line += "  committing...";
    } else if (size_ && *size_ > 0 && p.bytes_read > 0) {
      const double left = elapsed * static_cast<double>(*size_ - std::min(*size_, p.bytes_read)) /
                          static_cast<double>(p.bytes_read);
      line += "  ETA " + ClockText(left);
    } else {
      std::snprintf(buf, sizeof buf, "  %.1f MB read", static_cast<double>(p.bytes_read) / 1e6);
      line += buf;
    }
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    drawn_ = true;
  }

  // Ends the bar's line.
  void Done() {
    if (!drawn_) return;
    std::fputs("\n", stderr);
    std::fflush(stderr);
  }

 private:
  std::optional<std::uint64_t> size_;
  bool drawn_ = false;
};

// A stream buffer over a file descriptor that never blocks for long: it waits for input in
// slices of 100 ms and ends the input (EOF) as soon as a signal has been noted, so that SIGINT
// and SIGTERM stop an import whose input stalls (a pipe or FIFO whose writer stays silent).
// A read error is thrown, which the istream turns into badbit.
class InterruptibleFdBuf : public std::streambuf {
 public:
  explicit InterruptibleFdBuf(int fd, bool owned) : fd_(fd), owned_(owned), buf_(1 << 16) {}
  ~InterruptibleFdBuf() override {
    if (owned_) ::close(fd_);
  }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    for (;;) {
      if (Interrupted() != 0) return traits_type::eof();
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, 100);
      if (ready < 0 && errno != EINTR) throw std::runtime_error(std::strerror(errno));
      if (ready <= 0) continue;
      const ssize_t n = ::read(fd_, buf_.data(), buf_.size());
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw std::runtime_error(std::strerror(errno));
      }
      if (n == 0) return traits_type::eof();
      setg(buf_.data(), buf_.data(), buf_.data() + n);
      return traits_type::to_int_type(*gptr());
    }
  }
  std::streamsize showmanyc() override { return egptr() - gptr(); }

 private:
  int fd_;
  bool owned_;
  std::vector<char> buf_;
};

// An istream owning its InterruptibleFdBuf.
class InterruptibleInput : public std::istream {
 public:
  InterruptibleInput(int fd, bool owned) : std::istream(nullptr), buf_(fd, owned) {
    rdbuf(&buf_);
  }

 private:
  InterruptibleFdBuf buf_;
};

// Opens the input: stdin for "-", else the file (not a directory). Its size when it is a
// regular file. On failure returns null with *why set.
std::unique_ptr<std::istream> OpenInput(const std::string& file,
                                        std::optional<std::uint64_t>* size, std::string* why) {
  struct stat st {};
  if (file == "-") {
    if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
      *size = static_cast<std::uint64_t>(st.st_size);
    }
    return std::make_unique<InterruptibleInput>(STDIN_FILENO, /*owned=*/false);
  }
  if (::stat(file.c_str(), &st) != 0) {
    *why = std::strerror(errno);
    return nullptr;
  }
  if (S_ISDIR(st.st_mode)) {
    *why = "it is a directory (expected a file of rows, or - for stdin)";
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    // A FIFO, a character device, ...: read so that a signal stops a stalled input.
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *why = std::strerror(errno);
      return nullptr;
    }
    return std::make_unique<InterruptibleInput>(fd, /*owned=*/true);
  }
  auto in = std::make_unique<std::ifstream>(file, std::ios::binary);
  if (!*in) {
    *why = std::strerror(errno);
    return nullptr;
  }
  *size = static_cast<std::uint64_t>(st.st_size);
  return in;
}

ImportOptions MakeOptions(const ImportArgs& args) {
  ImportOptions o;
  o.collection = args.collection;
  o.id_field = args.id_field;
  o.mode = args.mode == "upsert" ? ImportMode::kUpsert : ImportMode::kInsert;
  o.skip_bad_rows = args.skip_bad;
  o.chunk_rows = args.chunk;
  o.settle = !args.no_settle;
  return o;
}

json::array BadRowsJson(const std::vector<ImportBadRow>& rows) {
  json::array out;
  for (const ImportBadRow& b : rows) {
    json::object o;
    o["line"] = b.line;
    o["reason"] = b.reason;
    out.emplace_back(std::move(o));
  }
  return out;
}

json::object SummaryJson(const ImportSummary& s, const std::string& collection) {
  json::object o;
  o["outcome"] = s.committed ? "committed" : s.cancelled ? "cancelled" : OutcomeName(s.outcome);
  o["committed"] = s.committed;
  if (!s.committed) o["message"] = s.outcome.message();
  if (!s.txn_id.empty()) o["txn_id"] = s.txn_id;
  o["collection"] = collection;
  o["rows_read"] = s.rows_read;
  o["imported"] = s.imported;
  o["skipped"] = s.skipped;
  o["bad_rows"] = BadRowsJson(s.bad_rows);
  o["bytes_read"] = s.bytes_read;
  o["chunks"] = s.chunks;
  o["settled"] = s.settled;
  o["acknowledged_s"] = Seconds(s.acknowledged);
  o["settled_s"] = Seconds(s.settled_at);
  o["rolled_back_s"] = Seconds(s.rolled_back_at);
  o["total_s"] = Seconds(s.total);
  if (!s.rollback.ok()) o["rollback_error"] = s.rollback.ToString();
  return o;
}

int RunBench(Context& ctx, const ImportArgs& args, bool file_given);

int RunImport(Context& ctx, const ImportArgs& args, bool file_given) {
  if (args.bench > 0) return RunBench(ctx, args, file_given);
  if (Status s = ValidateCollection(args.collection); !s.ok()) {
    return Fail(kExitUsage, "--collection: " + s.message());
  }
  if (!args.id_field.empty() && IsReservedField(args.id_field)) {
    return Fail(kExitUsage, "--id-field: \"" + args.id_field +
                                "\" is reserved (names starting with _ltx belong to litetx)");
  }
  // Until CatchSignals below, a signal ends the process at once: nothing is written yet.
  std::optional<std::uint64_t> size;
  std::string why;
  auto in = OpenInput(args.file, &size, &why);
  if (!in) return Fail(kExitUsage, "cannot read " + args.file + ": " + why);

  CatchSignals();  // before OpenStore and the Database start any thread
  int code = kExitOk;
  ctx.lmdb_max_mapped_bytes = kMaxMappedBytes;
  auto store = OpenStore(ctx, &code);
  if (!store) return code;
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(kExitOk), std::string("interrupted (") + InterruptedName() +
                                              ") before the import started: nothing written");
  }
  Database db(store, EngineOptions(ctx));
  ImportOptions o = MakeOptions(args);
  o.cancel = [] { return Interrupted() != 0; };
  ProgressBar bar(size);
  if (!args.quiet && ::isatty(STDERR_FILENO) == 1) {
    o.on_progress = [&bar](const ImportProgress& p) { bar.Draw(p); };
  }
  auto r = Import(db, *in, o);
  bar.Done();
  if (!r.ok()) {
    const Status& s = r.status();
    json::object out;
    out["outcome"] = OutcomeName(s);
    // kUnknown: neither committed nor rolled back is known; everything else did not commit.
    if (s.code() != Code::kUnknown) out["committed"] = false;
    out["message"] = s.message();
    if (!s.txn_id().empty()) out["txn_id"] = s.txn_id();
    out["collection"] = args.collection;
    if (s.code() == Code::kUnknown) {
      out["message"] = s.message() + "; ask later with `litetx txns` (the txn_id's state), "
                                     "do not import again blindly";
    }
    if (Interrupted() != 0) out["interrupted"] = InterruptedName();
    PrintJson(out);
    if (Interrupted() != 0) return ExitAfterSignal(kExitOk);
    return Fail(OutcomeExit(s), "import " + std::string(OutcomeName(s)) + ": " + s.message());
  }
  json::object out = SummaryJson(*r, args.collection);
  if (Interrupted() != 0) {
    out["interrupted"] = InterruptedName();
    PrintJson(out);
    return Fail(ExitAfterSignal(kExitOk),
                std::string("interrupted (") + InterruptedName() + "): " +
                    (r->committed ? "the commit had begun; the import committed"
                                  : "the import was rolled back; nothing of it is visible"));
  }
  PrintJson(out);
  if (r->committed) return kExitOk;
  return Fail(OutcomeExit(r->outcome), "import rolled back: " + r->outcome.message());
}

// ----- --bench -----

// A row of about 200 bytes: {"name", "email", "balance", "tags", "note"}; the note pads it.
std::string BenchRow(std::uint64_t n) {
  std::string row = "{\"name\":\"customer " + std::to_string(n) + "\",\"email\":\"customer" +
                    std::to_string(n) + "@example.com\",\"balance\":" +
                    std::to_string((n * 7919) % 100000) + ",\"tags\":[\"bench\",\"import\"]," +
                    "\"active\":" + (n % 2 == 0 ? "true" : "false") + ",\"note\":\"";
  while (row.size() < 198) row += static_cast<char>('a' + (row.size() + n) % 26);
  return row + "\"}";
}

// Erases `collection` on the store: first the ids `prefix` + 1..n one by one when they are
// known (a scan of a large collection is slow on some stores: memory: copies every shard's
// next page for each page), then whatever a scan still finds. Adds any problem to *problems.
void Erase(Store& store, const std::string& collection, const std::string& prefix,
           std::uint64_t n, json::array* problems) {
  std::string error;
  for (std::uint64_t i = 1; i <= n && error.empty(); ++i) {
    const Key key{collection, prefix + std::to_string(i)};
    auto g = store.Get(key);
    if (!g.ok()) {
      error = key.id + ": " + g.status().ToString();
    } else if (g->has_value()) {
      if (Status s = store.Erase(key, (*g)->revision); !s.ok()) error = key.id + ": " + s.ToString();
    }
  }
  if (error.empty()) bench::EraseCollection(store, collection, &error);
  if (!error.empty()) problems->emplace_back(collection + ": " + error);
}

int RunBench(Context& ctx, const ImportArgs& args, bool file_given) {
  CatchSignals();
  const std::string base = "import-bench." + std::to_string(::getpid());
  const std::string raw_collection = base + ".raw";
  const std::string import_collection = base + ".import";
  const std::string rollback_collection = base + ".rollback";
  std::string path = args.file;
  bool generated = false;
  if (!file_given) {
    path = (std::filesystem::temp_directory_path() / (base + ".ndjson")).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (std::uint64_t n = 1; n <= args.bench && out; ++n) out << BenchRow(n) << '\n';
    out.close();
    if (!out) return Fail(kExitStore, "cannot write the rows to " + path);
    generated = true;
  }
  struct Cleanup {
    std::string path;
    bool remove;
    ~Cleanup() {
      std::error_code ec;
      if (remove) std::filesystem::remove(path, ec);
    }
  } cleanup{path, generated};
  std::optional<std::uint64_t> size;
  std::string why;
  if (!OpenInput(path, &size, &why)) return Fail(kExitUsage, "cannot read " + path + ": " + why);

  int code = kExitOk;
  ctx.lmdb_max_mapped_bytes = kMaxMappedBytes;
  auto store = OpenStore(ctx, &code);
  if (!store) return code;
  Options engine = EngineOptions(ctx);
  Database db(store, engine);
  const std::size_t max_depth = engine::MaxNestingDepth(engine);
  json::array problems;

  // ru_maxrss after each phase (it only grows): on memory: the store's own documents count, on
  // LMDB the pages of its memory map that were touched. The anonymous peak leaves the map out.
  AnonRssPeak anon;
  const long rss_before_kb = PeakRssKb();
  long rss_raw_kb = 0, rss_import_kb = 0;

  // (a) The raw baseline: the same reading and parsing, then one Store::Create per row.
  std::uint64_t raw_rows = 0;
  const auto raw_start = SteadyClock::now();
  {
    std::ifstream in(path, std::ios::binary);
    importing::RowReader reader(in, engine.max_document_bytes);
    importing::Row row;
    while (Interrupted() == 0 && reader.Next(&row)) {
      ++raw_rows;
      auto doc = importing::ParseRow(row.text, max_depth);
      if (!doc.ok()) {
        problems.emplace_back("raw: line " + std::to_string(row.line) + ": " +
                              doc.status().message());
        break;
      }
      auto w = store->Create(Key{raw_collection, "raw-" + std::to_string(raw_rows)}, *doc);
      if (!w.ok()) {
        problems.emplace_back("raw: " + w.status().ToString());
        break;
      }
    }
    if (!reader.error().ok()) problems.emplace_back("raw: " + reader.error().message());
  }
  const double raw_s = std::chrono::duration<double>(SteadyClock::now() - raw_start).count();
  rss_raw_kb = PeakRssKb();
  Erase(*store, raw_collection, "raw-", raw_rows, &problems);

  // (b) The import, to the commit point and to settled.
  ImportArgs a = args;
  a.no_settle = false;
  a.collection = import_collection;
  ImportOptions io = MakeOptions(a);
  io.cancel = [] { return Interrupted() != 0; };
  std::optional<ImportSummary> imported;
  if (Interrupted() == 0) {
    std::ifstream in(path, std::ios::binary);
    auto r = Import(db, in, io);
    if (!r.ok()) {
      problems.emplace_back("import: " + r.status().ToString());
    } else {
      if (!r->committed) problems.emplace_back("import not committed: " + r->outcome.ToString());
      imported = std::move(*r);
    }
  }
  rss_import_kb = PeakRssKb();
  // Generated ids ("<txn id>-<n>") are known; with --id-field the scan finds them.
  if (imported && args.id_field.empty()) {
    Erase(*store, import_collection, imported->txn_id + "-", imported->rows_read, &problems);
  } else {
    Erase(*store, import_collection, "", 0, &problems);
  }

  // (c) An import rolled back after its last row (cancelled before its commit).
  a.collection = rollback_collection;
  ImportOptions ro = MakeOptions(a);
  bool read_all = false;
  ro.on_progress = [&read_all](const ImportProgress& p) { read_all = p.reading_done; };
  ro.progress_interval = std::chrono::hours(1);  // only the last call matters here
  ro.cancel = [&read_all] { return read_all || Interrupted() != 0; };
  std::optional<ImportSummary> rolled;
  if (Interrupted() == 0) {
    std::ifstream in(path, std::ios::binary);
    auto r = Import(db, in, ro);
    if (!r.ok()) {
      problems.emplace_back("rollback run: " + r.status().ToString());
    } else {
      if (!r->cancelled || !r->rollback.ok()) {
        problems.emplace_back("rollback run: " + r->outcome.ToString() + "; rollback " +
                              r->rollback.ToString());
      }
      rolled = std::move(*r);
    }
  }
  if (rolled && args.id_field.empty()) {
    Erase(*store, rollback_collection, rolled->txn_id + "-", rolled->rows_read, &problems);
  } else {
    Erase(*store, rollback_collection, "", 0, &problems);
  }
  db.Flush();
  const long peak_kb = PeakRssKb();

  json::object out;
  out["store"] = ctx.store_uri;
  out["sync"] = ctx.store_uri.rfind("lmdb", 0) == 0 ? json::value(ctx.lmdb_sync) : json::value(nullptr);
  out["file"] = generated ? json::value(nullptr) : json::value(path);
  out["rows"] = raw_rows;
  out["bytes"] = size.value_or(0);
  out["chunk_rows"] = args.chunk;
  const auto rate = [](std::uint64_t rows, double s) { return s > 0 ? std::round(rows / s) : 0.0; };
  out["raw"] = {{"seconds", std::round(raw_s * 1e6) / 1e6}, {"rows_per_s", rate(raw_rows, raw_s)}};
  double ack_s = 0, settled_s = 0, rollback_total_s = 0, rollback_s = 0;
  if (imported) {
    ack_s = Seconds(imported->acknowledged);
    settled_s = Seconds(imported->settled_at);
    out["import"] = {{"rows", imported->imported},
                     {"acknowledged_s", ack_s},
                     {"settled_s", settled_s},
                     {"rows_per_s_acknowledged", rate(imported->imported, ack_s)},
                     {"rows_per_s_settled", rate(imported->imported, settled_s)},
                     {"chunks", imported->chunks}};
  }
  if (rolled) {
    rollback_total_s = Seconds(rolled->rolled_back_at);
    rollback_s = Seconds(rolled->rollback_time);
    out["rollback"] = {{"rows", rolled->rows_read},
                       {"rolled_back_s", rollback_total_s},
                       {"rollback_s", rollback_s}};
  }
  const auto ratio = [raw_s](double s) {
    return raw_s > 0 && s > 0 ? std::round(s / raw_s * 1000) / 1000 : 0.0;
  };
  const double ack_ratio = ratio(ack_s);
  const double settled_ratio = ratio(settled_s);
  const double rollback_ratio = ratio(rollback_total_s);
  out["ratios"] = {{"acknowledged_to_raw", ack_ratio},
                   {"settled_to_raw", settled_ratio},
                   {"rollback_to_raw", rollback_ratio}};
  const double peak_mb = std::round(static_cast<double>(peak_kb) / 1024.0 * 10) / 10;
  out["peak_rss_mb"] = peak_mb;
  const auto mb = [](long kb) { return std::round(static_cast<double>(kb) / 1024.0 * 10) / 10; };
  out["peak_rss_mb_after"] = {{"start", mb(rss_before_kb)},
                              {"raw", mb(rss_raw_kb)},
                              {"import", mb(rss_import_kb)},
                              {"rollback", peak_mb}};
  const bool measured = imported.has_value() && rolled.has_value();
  const auto verdict = [measured](bool met) { return measured && met ? "met" : "not met"; };
  json::object targets;
  targets["acknowledged_to_raw <= 1.3"] = verdict(ack_ratio <= 1.3);
  targets["settled_to_raw <= 2.5"] = verdict(settled_ratio <= 2.5);
  targets["rollback_to_raw <= 2.5"] = verdict(rollback_ratio <= 2.5);
  const double anon_mb = mb(anon.peak_kb());
  out["peak_anon_rss_mb"] = anon_mb;
  targets["peak_rss_mb < 200"] = verdict(peak_mb < 200);
  targets["peak_anon_rss_mb < 200"] = verdict(anon_mb < 200);
  bool all = true;
  for (const auto& kv : targets) all = all && kv.value() == "met";
  out["targets"] = std::move(targets);
  out["all_targets_met"] = all;
  out["problems"] = problems;
  if (Interrupted() != 0) out["interrupted"] = InterruptedName();
  PrintJson(out);
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(kExitOk), std::string("interrupted (") + InterruptedName() +
                                              "): the benchmark stopped; its collections were "
                                              "erased");
  }
  if (!problems.empty()) {
    return Fail(kExitFailed, std::to_string(problems.size()) + " problem(s) in the benchmark "
                             "(see \"problems\")");
  }
  return kExitOk;
}

}  // namespace

void AddImport(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Import NDJSON or a JSON array of objects into one collection, all or nothing "
                "(see docs/import.md)");
  CLI::Option* file = cmd->add_option("file", args->file,
                                      "File of rows (NDJSON or one JSON array), or - for stdin");
  CLI::Option* collection = cmd->add_option("--collection", args->collection,
                                            "Collection the rows go to (required)");
  cmd->add_option("--id-field", args->id_field,
                  "Top-level field holding each row's id (a string or an integer); default: "
                  "ids are generated, <txn id>-<row number>");
  cmd->add_option("--mode", args->mode,
                  "insert: new documents only, an existing id is a bad row; upsert: insert or "
                  "replace the whole document")
      ->check(CLI::IsMember({"insert", "upsert"}));
  cmd->add_flag("--skip-bad", args->skip_bad,
                "Skip bad rows and list them (at most 1000; the count is exact) instead of "
                "rolling the whole import back");
  cmd->add_option("--chunk", args->chunk, "Rows per chunk of the transaction (1 to 10000)")
      ->check(WholeNumberCheck(1, 10000));
  cmd->add_flag("--quiet", args->quiet, "No progress bar on stderr (it is only drawn on a "
                                        "terminal anyway)");
  cmd->add_flag("--no-settle", args->no_settle,
                "Return at the commit point; the collector clears the documents' references "
                "later (readers see the rows either way)");
  cmd->add_option("--bench", args->bench,
                  "Benchmark instead: ROWS generated rows of about 200 bytes (or FILE's rows), "
                  "written raw with one Store::Create each, imported, and imported then rolled "
                  "back; prints the times, ratios, peak RSS and targets; erases what it wrote")
      ->check(WholeNumberCheck(1, 100'000'000));
  cmd->callback([&ctx, args, file, collection] {
    const bool file_given = file->count() > 0;
    if (args->bench == 0 && collection->count() == 0) {
      throw CLI::RequiredError("--collection");
    }
    ctx.run = [&ctx, args, file_given] { return RunImport(ctx, *args, file_given); };
  });
}

}  // namespace litetx::cli
