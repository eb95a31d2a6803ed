// tools/cli_common.cpp — see cli.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "tools/cli.h"

namespace litetx::cli {
namespace {

bool ParseU64(std::string_view s, std::uint64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

bool ParseProbability(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && *out >= 0.0 && *out <= 1.0;
}

bool IsWrite(StoreOp op) {
  return op == StoreOp::kCreate || op == StoreOp::kReplace || op == StoreOp::kErase;
}

// The scripted faults of LITETX_FAULTS (partition-after-writes, stall-write, hold-write), run as a
// FaultOptions::rule. A rule replaces the store's own random draws, so it also draws the
// transient / lost-reply faults itself, the same way (one 64-bit draw per call).
struct Script {
  std::uint64_t partition_after = 0;  // 0: none
  std::uint64_t stall_write = 0;      // 0: none
  std::chrono::milliseconds stall{0};
  std::uint64_t hold_write = 0;  // 0: none
  std::string hold_fifo;
  double transient = 0.0;
  double lost = 0.0;
  std::mutex mu;
  std::mt19937_64 rng;
  std::uint64_t write_calls = 0;
  bool partitioned = false;

  Fault Decide(StoreOp op) {
    std::uint64_t n = 0;
    double u = 0.0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (partitioned) return Fault::kTransient;
      if (IsWrite(op)) n = ++write_calls;
      if (n != 0 && n == partition_after) {
        partitioned = true;
        return Fault::kLostReply;
      }
      u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    }
    if (n != 0 && n == stall_write) std::this_thread::sleep_for(stall);
    if (n != 0 && n == hold_write) Hold(n);
    if (u < transient) return Fault::kTransient;
    if (u < transient + lost && IsWrite(op)) return Fault::kLostReply;
    return Fault::kNone;
  }

  // Waits until a byte is written to hold_fifo. Opened for reading and writing, a FIFO opens
  // at once on Linux and a read of it waits for data (never for end-of-file: this process is
  // a writer too), so the line below is printed only once the wait is ready to be released.
  void Hold(std::uint64_t n) const {
    int fd = -1;
    do {
      fd = ::open(hold_fifo.c_str(), O_RDWR | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      std::fprintf(stderr, "litetx: LITETX_FAULTS: cannot open %s (%s); not holding\n",
                   hold_fifo.c_str(), std::strerror(errno));
      return;
    }
    std::fprintf(stderr, "litetx: LITETX_FAULTS: holding before write %llu until a byte is "
                 "written to %s\n", static_cast<unsigned long long>(n), hold_fifo.c_str());
    std::fflush(stderr);
    char byte = 0;
    while (::read(fd, &byte, 1) < 0 && errno == EINTR) {
    }
    ::close(fd);
  }
};

bool IsFifo(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

}  // namespace

Result<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::uint64_t n = 0;
  std::string_view unit = std::string_view(text).substr(digits);
  constexpr std::uint64_t kMaxMs = std::uint64_t{1} << 53;  // ~285,000 years: no overflow
  std::uint64_t scale = 0;
  if (unit == "ms") scale = 1;
  else if (unit == "s") scale = 1'000;
  else if (unit == "m") scale = 60'000;
  else if (unit == "h") scale = 3'600'000;
  if (scale == 0 || !ParseU64(std::string_view(text).substr(0, digits), &n) ||
      n > kMaxMs / scale) {
    return Status::InvalidArgument("bad duration '" + text +
                                   "' (expected a whole number and ms, s, m or h, e.g. 500ms)");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(n * scale));
}

CLI::Validator DurationCheck() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        auto d = ParseDuration(s);
        return d.ok() ? std::string() : d.status().message();
      },
      "DURATION", "duration");
}

std::shared_ptr<spdlog::logger> Logger(const Context& ctx) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto logger = spdlog::get("litetx");
  if (!logger) logger = spdlog::stderr_color_mt("litetx");
  logger->set_level(spdlog::level::from_str(ctx.log_level));
  return logger;
}

Options EngineOptions(const Context& ctx) {
  Options o;
  o.logger = Logger(ctx);
  return o;
}

Result<FaultOptions> ParseFaults(const std::string& spec) {
  FaultOptions f;
  f.crash_mode = CrashMode::kExit;
  f.seed = std::random_device{}();
  auto script = std::make_shared<Script>();
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    std::string name = item.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : item.substr(colon + 1);
    std::uint64_t n = 0;
    bool ok = true;
    if (name == "crash-after-writes") {
      ok = ParseU64(value, &n) && n > 0;
      f.crash_after_writes = n;
    } else if (name == "transient") {
      ok = ParseProbability(value, &f.transient_probability);
    } else if (name == "lost-reply") {
      ok = ParseProbability(value, &f.lost_reply_probability);
    } else if (name == "seed") {
      ok = ParseU64(value, &f.seed);
    } else if (name == "exit-code") {
      ok = ParseU64(value, &n) && n > 0 && n < 256;
      f.exit_code = static_cast<int>(n);
    } else if (name == "partition-after-writes") {
      ok = ParseU64(value, &script->partition_after) && script->partition_after > 0;
    } else if (name == "stall-write") {
      std::size_t colon2 = value.find(':');
      ok = colon2 != std::string::npos &&
           ParseU64(std::string_view(value).substr(0, colon2), &script->stall_write) &&
           script->stall_write > 0;
      if (ok) {
        auto d = ParseDuration(value.substr(colon2 + 1));
        ok = d.ok();
        if (ok) script->stall = *d;
      }
    } else if (name == "hold-write") {
      std::size_t colon2 = value.find(':');
      ok = colon2 != std::string::npos &&
           ParseU64(std::string_view(value).substr(0, colon2), &script->hold_write) &&
           script->hold_write > 0;
      if (ok) {
        script->hold_fifo = value.substr(colon2 + 1);
        if (!IsFifo(script->hold_fifo)) {
          return Status::InvalidArgument("LITETX_FAULTS: '" + script->hold_fifo +
                                         "' in '" + item + "' is not a FIFO (make it with mkfifo)");
        }
      }
    } else {
      return Status::InvalidArgument("LITETX_FAULTS: unknown item '" + name +
                                     "' (expected crash-after-writes:K, transient:P, "
                                     "lost-reply:P, seed:N, exit-code:N, "
                                     "partition-after-writes:K, stall-write:K:DURATION, "
                                     "hold-write:K:FIFO)");
    }
    if (!ok) return Status::InvalidArgument("LITETX_FAULTS: bad value in '" + item + "'");
  }
  if (f.transient_probability + f.lost_reply_probability > 1.0) {
    return Status::InvalidArgument("LITETX_FAULTS: transient + lost-reply exceed 1");
  }
  if (script->partition_after != 0 || script->stall_write != 0 || script->hold_write != 0) {
    script->transient = f.transient_probability;
    script->lost = f.lost_reply_probability;
    script->rng.seed(f.seed);
    f.rule = [script](StoreOp op, const Key&, std::uint64_t) { return script->Decide(op); };
  }
  return f;
}

std::shared_ptr<Store> OpenStore(const Context& ctx, int* exit_code) {
  const std::string& uri = ctx.store_uri;
  std::shared_ptr<Store> store;
  if (uri == "memory:" || uri == "memory") {
    store = std::make_shared<MemoryStore>();
  } else if (uri.rfind("lmdb:", 0) == 0) {
    std::string path = uri.substr(5);
    if (path.empty()) path = kDefaultLmdbPath;
    LmdbOptions lo;
    lo.create_if_missing = ctx.create_store;
    if (ctx.lmdb_sync == "nometasync") lo.durability = LmdbDurability::kNoMetaSync;
    if (ctx.lmdb_sync == "nosync") lo.durability = LmdbDurability::kNoSync;
    auto opened = LmdbStore::Open(path, lo);
    if (!opened.ok()) {
      *exit_code = Fail(kExitStore, "cannot open store " + uri + ": " + opened.status().message());
      return nullptr;
    }
    store = *opened;
  } else {
    *exit_code = Fail(kExitUsage, "bad --store '" + uri + "' (expected lmdb:PATH or memory:)");
    return nullptr;
  }
  if (const char* spec = std::getenv("LITETX_FAULTS"); spec != nullptr && *spec != '\0') {
    auto faults = ParseFaults(spec);
    if (!faults.ok()) {
      *exit_code = Fail(kExitUsage, faults.status().message());
      return nullptr;
    }
    Logger(ctx)->info("LITETX_FAULTS={} (seed {})", spec, faults->seed);
    store = std::make_shared<FaultInjectingStore>(store, *faults);
  }
  return store;
}

void PrintJson(const boost::json::value& v) {
  std::string s = boost::json::serialize(v);
  s.push_back('\n');
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

int Fail(int code, const std::string& message) {
  std::string line = "litetx: " + message;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  return code;
}

const char* OutcomeName(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return "committed";
    case Code::kConflict: return "conflict";
    case Code::kDeleted: return "deleted";
    case Code::kBusy: return "busy";
    case Code::kNotFound: return "not_found";
    case Code::kAborted: return "aborted";
    case Code::kUnknown: return "unknown";
    case Code::kUnavailable: return "unavailable";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kCorruption: return "corruption";
    case Code::kInvalidArgument: return "invalid_argument";
  }
  return "error";
}

int OutcomeExit(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return kExitOk;
    case Code::kConflict: return kExitConflict;
    case Code::kDeleted: return kExitDeleted;
    case Code::kBusy: return kExitBusy;
    case Code::kNotFound: return kExitNotFound;
    case Code::kAborted: return kExitAborted;
    case Code::kUnknown: return kExitUnknown;
    case Code::kUnavailable: return kExitUnavailable;
    case Code::kFailedPrecondition: return kExitPrecondition;
    case Code::kCorruption: return kExitCorruption;
    case Code::kInvalidArgument: return kExitUsage;
  }
  return kExitFailed;
}

}  // namespace litetx::cli
