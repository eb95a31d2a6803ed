// tools/cli_common.cpp — see cli.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <climits>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "litetx/redis_cluster_store.h"
#include "litetx/redis_store.h"
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


// ---- redis:// and redis-cluster:// URIs (grammar in cli.h) ----

// The options a Redis URI's query can set; both schemes share them.
struct RedisQuery {
  std::string prefix = "ltx:";
  std::optional<std::size_t> buckets;  // unset: the store's default
  std::size_t pool = 8;
  std::chrono::milliseconds timeout{2000};
  std::chrono::milliseconds connect_timeout{1000};
  int wait = 0;
  std::chrono::milliseconds wait_timeout{500};
};

// A URI problem: the usage message "bad --store 'URI': WHY".
Status BadUri(const std::string& uri, const std::string& why) {
  return Status::InvalidArgument("bad --store '" + uri + "': " + why);
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '-' || c == '_';
}

bool IsIpv6Char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') ||
         c == ':' || c == '.';
}

// "HOST:PORT" or "[IPV6]:PORT".
Status ParseNode(const std::string& uri, std::string_view text, RedisNode* out) {
  std::string_view host, rest;
  if (!text.empty() && text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return BadUri(uri, "'[' without a closing ']'");
    host = text.substr(1, close - 1);
    if (host.empty()) return BadUri(uri, "empty IPv6 address in '[]'");
    for (char c : host) {
      if (!IsIpv6Char(c)) return BadUri(uri, "bad IPv6 address '" + std::string(host) + "'");
    }
    rest = text.substr(close + 1);
    if (rest.empty()) return BadUri(uri, "missing port after '[" + std::string(host) + "]'");
    if (rest.front() != ':') {
      return BadUri(uri, "unexpected '" + std::string(rest) + "' after '[" + std::string(host) +
                             "]' (expected :PORT)");
    }
    rest.remove_prefix(1);
  } else {
    std::size_t colon = text.find(':');
    host = text.substr(0, colon);
    if (host.empty()) return BadUri(uri, "missing host (expected HOST:PORT)");
    for (char c : host) {
      if (!IsHostChar(c)) {
        return BadUri(uri, "bad host '" + std::string(host) +
                               "' (a name or IPv4 address; an IPv6 address goes in [...])");
      }
    }
    if (colon == std::string_view::npos) {
      return BadUri(uri, "missing port after host '" + std::string(host) + "' (expected HOST:PORT)");
    }
    rest = text.substr(colon + 1);
  }
  if (rest.empty()) return BadUri(uri, "missing port after '" + std::string(host) + ":'");
  std::size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0) return BadUri(uri, "bad port '" + std::string(rest) + "' (expected 1..65535)");
  if (digits < rest.size()) {
    return BadUri(uri, "unexpected '" + std::string(rest.substr(digits)) + "' after port " +
                           std::string(rest.substr(0, digits)));
  }
  std::uint64_t port = 0;
  if (!ParseU64(rest, &port) || port < 1 || port > 65535) {
    return BadUri(uri, "port " + std::string(rest) + " out of range (expected 1..65535)");
  }
  out->host = std::string(host);
  out->port = static_cast<int>(port);
  return Status::Ok();
}

// %XX escapes decoded (so a prefix may hold '&', '=', '%' ...); false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// A positive count in [1, max].
bool ParseCount(std::string_view s, std::uint64_t max, std::uint64_t* out) {
  return ParseU64(s, out) && *out >= 1 && *out <= max;
}

// Milliseconds: a bare whole number (ms) or a duration with a unit (500ms, 2s); positive.
bool ParseMs(const std::string& s, std::chrono::milliseconds* out) {
  std::uint64_t n = 0;
  if (ParseU64(s, &n)) {
    if (n == 0 || n > INT_MAX) return false;
    *out = std::chrono::milliseconds(static_cast<std::int64_t>(n));
    return true;
  }
  auto d = ParseDuration(s);
  if (!d.ok() || d->count() <= 0 || d->count() > INT_MAX) return false;
  *out = *d;
  return true;
}

Status ParseRedisQuery(const std::string& uri, std::string_view query, RedisQuery* q) {
  if (query.empty()) return BadUri(uri, "empty query after '?'");
  std::set<std::string> seen;
  std::size_t pos = 0;
  while (pos <= query.size()) {
    std::size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view item = query.substr(pos, amp - pos);
    pos = amp + 1;
    std::size_t eq = item.find('=');
    if (item.empty() || eq == std::string_view::npos) {
      return BadUri(uri, "query item '" + std::string(item) + "' is not KEY=VALUE");
    }
    std::string key(item.substr(0, eq));
    std::string value(item.substr(eq + 1));
    if (!seen.insert(key).second) return BadUri(uri, "query key '" + key + "' given twice");
    const std::string bad = "bad value '" + value + "' for '" + key + "' (expected ";
    std::uint64_t n = 0;
    if (key == "prefix") {
      if (!PercentDecode(value, &q->prefix)) return BadUri(uri, bad + "text with valid %XX escapes)");
      if (q->prefix.find_first_of("{}") != std::string::npos) {
        return BadUri(uri, "the prefix must not contain '{' or '}'");
      }
    } else if (key == "buckets") {
      if (!ParseCount(value, 1'000'000, &n)) return BadUri(uri, bad + "1..1000000)");
      q->buckets = static_cast<std::size_t>(n);
    } else if (key == "pool") {
      if (!ParseCount(value, 1024, &n)) return BadUri(uri, bad + "1..1024)");
      q->pool = static_cast<std::size_t>(n);
    } else if (key == "wait") {
      if (!ParseU64(value, &n) || n > 1000) return BadUri(uri, bad + "0..1000 replicas)");
      q->wait = static_cast<int>(n);
    } else if (key == "timeout" || key == "connect_timeout" || key == "wait_timeout") {
      std::chrono::milliseconds* target = key == "timeout"           ? &q->timeout
                                          : key == "connect_timeout" ? &q->connect_timeout
                                                                     : &q->wait_timeout;
      if (!ParseMs(value, target)) {
        return BadUri(uri, bad + "positive milliseconds, e.g. 2000 or 2s)");
      }
    } else {
      return BadUri(uri, "unknown query key '" + key +
                             "' (expected prefix, buckets, pool, timeout, connect_timeout, "
                             "wait, wait_timeout)");
    }
  }
  if (q->wait > 0 && q->wait_timeout >= q->timeout) {
    return BadUri(uri, "wait_timeout must be shorter than timeout");
  }
  return Status::Ok();
}

// Splits "AUTHORITY[/PATH][?QUERY]" after the scheme; the query (without '?') is parsed.
Status SplitRedisUri(const std::string& uri, std::string_view rest, std::string_view* nodes,
                     std::optional<std::string_view>* path, RedisQuery* q) {
  std::size_t qmark = rest.find('?');
  if (qmark != std::string_view::npos) {
    if (Status s = ParseRedisQuery(uri, rest.substr(qmark + 1), q); !s.ok()) return s;
    rest = rest.substr(0, qmark);
  }
  // A '/' inside [...] cannot occur in a valid IPv6 literal, so the first '/' ends the nodes.
  std::size_t slash = rest.find('/');
  *nodes = rest.substr(0, slash);
  if (slash != std::string_view::npos) *path = rest.substr(slash + 1);
  return Status::Ok();
}

}  // namespace

Status ParseRedisUri(const std::string& uri, RedisOptions* out) {
  constexpr std::string_view kScheme = "redis://";
  std::string_view rest = std::string_view(uri).substr(kScheme.size());
  std::string_view node_text;
  std::optional<std::string_view> path;
  RedisQuery q;
  if (Status s = SplitRedisUri(uri, rest, &node_text, &path, &q); !s.ok()) return s;
  if (node_text.find(',') != std::string_view::npos) {
    return BadUri(uri, "redis:// takes one HOST:PORT (several nodes: redis-cluster://)");
  }
  RedisNode node;
  if (Status s = ParseNode(uri, node_text, &node); !s.ok()) return s;
  RedisOptions o;
  o.host = node.host;
  o.port = node.port;
  if (path && !path->empty()) {
    std::uint64_t db = 0;
    if (!ParseU64(*path, &db) || db > INT_MAX) {
      return BadUri(uri, "bad database '" + std::string(*path) + "' (expected a number, e.g. /0)");
    }
    o.db = static_cast<int>(db);
  }
  o.prefix = q.prefix;
  if (q.buckets) o.buckets = *q.buckets;
  o.pool_size = q.pool;
  o.command_timeout = q.timeout;
  o.connect_timeout = q.connect_timeout;
  o.wait_replicas = q.wait;
  o.wait_timeout = q.wait_timeout;
  *out = std::move(o);
  return Status::Ok();
}

Status ParseRedisClusterUri(const std::string& uri, RedisClusterOptions* out) {
  constexpr std::string_view kScheme = "redis-cluster://";
  std::string_view rest = std::string_view(uri).substr(kScheme.size());
  std::string_view node_text;
  std::optional<std::string_view> path;
  RedisQuery q;
  if (Status s = SplitRedisUri(uri, rest, &node_text, &path, &q); !s.ok()) return s;
  if (node_text.empty()) {
    return BadUri(uri, "no cluster nodes (expected HOST:PORT[,HOST:PORT...])");
  }
  if (path) {
    return BadUri(uri, "redis-cluster:// takes no database ('/" + std::string(*path) +
                           "'): a cluster has only database 0");
  }
  RedisClusterOptions o;
  o.seeds.clear();
  std::size_t pos = 0;
  while (pos <= node_text.size()) {
    std::size_t comma = node_text.find(',', pos);
    if (comma == std::string_view::npos) comma = node_text.size();
    std::string_view item = node_text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) return BadUri(uri, "empty node in the node list (a stray ',')");
    RedisNode node;
    if (Status s = ParseNode(uri, item, &node); !s.ok()) return s;
    o.seeds.push_back(std::move(node));
  }
  o.prefix = q.prefix;
  if (q.buckets) o.buckets = *q.buckets;
  o.pool_size = q.pool;
  o.command_timeout = q.timeout;
  o.connect_timeout = q.connect_timeout;
  o.wait_replicas = q.wait;
  o.wait_timeout = q.wait_timeout;
  *out = std::move(o);
  return Status::Ok();
}

namespace {
}  // namespace

Result<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  if (text == "0") return std::chrono::milliseconds(0);
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
  const std::string expected = " (expected a whole number and ms, s, m or h, e.g. 500ms, 2s, 1m)";
  if (digits == text.size() && digits > 0) {
    return Status::InvalidArgument("duration '" + text + "' has no unit" + expected);
  }
  if (scale == 0 || !ParseU64(std::string_view(text).substr(0, digits), &n)) {
    return Status::InvalidArgument("bad duration '" + text + "'" + expected);
  }
  if (n > kMaxMs / scale) {
    return Status::InvalidArgument("duration '" + text + "' is too long (at most 2^53 ms)");
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

CLI::Validator WholeNumberCheck(std::uint64_t min, std::uint64_t max) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& s) -> std::string {
        const bool digits = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
        if (!digits) return "'" + s + "' is not a whole number (expected " + range + ")";
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc::result_out_of_range || v > max || v < min) {
          return "'" + s + "' is out of range (expected " + range + ")";
        }
        if (ec != std::errc() || end != s.data() + s.size()) {
          return "'" + s + "' is not a whole number (expected " + range + ")";
        }
        return {};
      },
      "UINT:" + range, "whole number");
}

CLI::Validator ProbabilityCheck() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || !(v >= 0.0 && v <= 1.0)) {
          return "'" + s + "' is not a probability (expected a number from 0 to 1)";
        }
        return {};
      },
      "0..1", "probability");
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

namespace {

std::shared_ptr<Store> Open(const Context& ctx, bool create_if_missing, int* exit_code) {
  const std::string& uri = ctx.store_uri;
  std::shared_ptr<Store> store;
  auto cannot_open = [&](const Status& s) {
    *exit_code = Fail(kExitStore, "cannot open store " + uri + ": " + s.message());
    return nullptr;
  };
  if (uri == "memory:" || uri == "memory") {
    store = std::make_shared<MemoryStore>();
  } else if (uri.rfind("lmdb:", 0) == 0) {
    std::string path = uri.substr(5);
    if (path.empty()) path = kDefaultLmdbPath;
    LmdbOptions lo;
    lo.create_if_missing = create_if_missing;
    lo.max_mapped_bytes = ctx.lmdb_max_mapped_bytes;
    if (ctx.lmdb_sync == "nometasync") lo.durability = LmdbDurability::kNoMetaSync;
    if (ctx.lmdb_sync == "nosync") lo.durability = LmdbDurability::kNoSync;
    auto opened = LmdbStore::Open(path, lo);
    if (!opened.ok()) return cannot_open(opened.status());
    store = *opened;
  } else if (uri.rfind("redis://", 0) == 0 || uri.rfind("redis-cluster://", 0) == 0) {
    const bool cluster = uri.rfind("redis-cluster://", 0) == 0;
    RedisOptions ro;
    RedisClusterOptions co;
    Status parsed = cluster ? ParseRedisClusterUri(uri, &co) : ParseRedisUri(uri, &ro);
    if (!parsed.ok()) {
      *exit_code = Fail(kExitUsage, parsed.message());
      return nullptr;
    }
#ifdef LITETX_CLI_WITH_REDIS
    // Open's errors (server unreachable, refused setup, not a cluster node, a format marker
    // with another bucket count) are all store errors: the URI itself was checked above.
    if (cluster) {
      co.logger = Logger(ctx);
      auto opened = RedisClusterStore::Open(std::move(co));
      if (!opened.ok()) return cannot_open(opened.status());
      store = *opened;
    } else {
      ro.logger = Logger(ctx);
      auto opened = RedisStore::Open(std::move(ro));
      if (!opened.ok()) return cannot_open(opened.status());
      store = *opened;
    }
#else
    *exit_code = Fail(kExitUsage, "bad --store '" + uri + "': this litetx was built without "
                                  "Redis support (LITETX_WITH_REDIS=OFF)");
    return nullptr;
#endif
  } else {
    *exit_code = Fail(kExitUsage, "bad --store '" + uri + "' (expected " + kStoreSchemes + ")");
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

}  // namespace

std::shared_ptr<Store> OpenStore(const Context& ctx, int* exit_code) {
  return Open(ctx, /*create_if_missing=*/true, exit_code);
}

std::shared_ptr<Store> OpenExistingStore(const Context& ctx, int* exit_code) {
  return Open(ctx, /*create_if_missing=*/false, exit_code);
}

namespace {

void AppendDouble(double d, std::string* out) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest exact form
  std::string_view text(buf, ec == std::errc() ? static_cast<std::size_t>(p - buf) : 0);
  if (!std::isfinite(d) || text.empty()) {  // not storable; shown as JSON can hold it
    out->append("null");
    return;
  }
  out->append(text);
  // "1" would read back as an integer: keep the double a double.
  if (text.find_first_of(".e") == std::string_view::npos) out->append(".0");
}

void AppendJson(const boost::json::value& v, bool pretty, int depth, std::string* out) {
  auto newline = [&](int d) {
    if (!pretty) return;
    out->push_back('\n');
    out->append(static_cast<std::size_t>(d) * 2, ' ');
  };
  switch (v.kind()) {
    case boost::json::kind::double_: AppendDouble(v.get_double(), out); break;
    case boost::json::kind::object: {
      const auto& o = v.get_object();
      if (o.empty()) {
        out->append("{}");
        break;
      }
      out->push_back('{');
      bool first = true;
      for (const auto& kv : o) {
        if (!first) out->push_back(',');
        first = false;
        newline(depth + 1);
        out->append(boost::json::serialize(boost::json::string(kv.key())));
        out->append(pretty ? ": " : ":");
        AppendJson(kv.value(), pretty, depth + 1, out);
      }
      newline(depth);
      out->push_back('}');
      break;
    }
    case boost::json::kind::array: {
      const auto& a = v.get_array();
      if (a.empty()) {
        out->append("[]");
        break;
      }
      out->push_back('[');
      bool first = true;
      for (const auto& e : a) {
        if (!first) out->push_back(',');
        first = false;
        newline(depth + 1);
        AppendJson(e, pretty, depth + 1, out);
      }
      newline(depth);
      out->push_back(']');
      break;
    }
    default: out->append(boost::json::serialize(v)); break;  // strings, integers, bool, null
  }
}

}  // namespace

std::string FormatJson(const boost::json::value& v, bool pretty) {
  std::string s;
  AppendJson(v, pretty, 0, &s);
  return s;
}

void PrintJson(const boost::json::value& v) {
  std::string s = FormatJson(v);
  s.push_back('\n');
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

bool OutputFormat::Pretty() const {
  if (name.empty()) return ::isatty(STDOUT_FILENO) == 1;
  return name == "pretty";
}

void AddFormatOption(CLI::App* cmd, OutputFormat* format) {
  cmd->add_option("--format", format->name,
                  "Output: pretty (indented) or json (one line). Default: pretty when stdout "
                  "is a terminal, json otherwise")
      ->check(CLI::IsMember({"pretty", "json"}));
}

void Print(const boost::json::value& v, const OutputFormat& format) {
  std::string s = FormatJson(v, format.Pretty());
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
