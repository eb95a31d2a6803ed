// tools/cmd_batch.cpp — `litetx batch JOB.json`: runs a step of litetx::batch (litetx/batch.h)
// over an NDJSON file, as the job description JOB.json says: read each line, transform it with
// a few built-in operations, write it to a collection, a transaction per chunk, with retry,
// skip and a dead-letter collection; restartable exactly once. See docs/cli.md#litetx-batch.
//
// The job file is checked whole before anything is opened (unknown keys, bad types, bad
// numbers, bad operations are usage errors, exit 2, and nothing is written). The parts of the
// job that decide what is written (output, mode, id_field, dead_letter, transform,
// commit_interval) are stored beside the step's state when the job first runs
// ("<job>/<step>/cli" in the state collection); a rerun with other values is refused: the
// outputs of one job come from one transformation, and its chunks stay as its first run
// formed them (the library itself would adapt to another commit_interval). Retry, skip,
// backoff and concurrency may change between runs.
//
// Output: one JSON object on stdout, the summary:
//   {"status": "completed" | "already_complete" | "failed" | "unknown" | "interrupted",
//    "job", "step", "input", "output", "execution", "this_run": Counts, "total": Counts,
//    "chunks", "chunks_this_run", "skipped": [{"position", "key", "phase", "code", "message",
//    "recovered"}...] (this run's, at most 100), "skipped_more", "code"?, "message"?,
//    "interrupted"?, "elapsed_s"}
// and the exit code: 0 completed or already complete; 1 the step failed (what committed stays:
// a rerun resumes); 2 usage (bad flags, bad job file, unreadable input, a changed job); 3 the
// store cannot be opened; 15 a chunk's commit outcome is unknown (a rerun finds it out);
// 130/143 stopped by SIGINT/SIGTERM.
//
// Signals (tools/signals.h): the reader checks for a noted signal before each item and throws
// StopRequested; RunStep then lets the chunk in progress end (committed or rolled back, never
// half), joins its workers and rethrows, and the command prints the summary with
// "interrupted" and exits 130/143. A rerun resumes after the last committed chunk. A second
// signal exits at once: a crash, after which a rerun resumes as well.
//
// --status prints the step's stored state (batch::ReadStepStatus) without running anything.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>

#include "engine/json_text.h"
#include "litetx/batch.h"
#include "tools/cli.h"
#include "tools/signals.h"

namespace litetx::cli {
namespace {
namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;

// Longest job file read, and most entries listed in the summary's "skipped".
constexpr std::size_t kMaxJobFileBytes = 1 << 20;
constexpr std::size_t kMaxSkippedListed = 100;
constexpr std::size_t kMaxTransformOps = 100;

struct BatchArgs {
  std::string job_file;
  std::string input;  // --input; empty: the job's "input"
  bool status = false;
  bool quiet = false;
};

// One operation of "transform".
struct Op {
  enum Kind { kSet, kRename, kDrop, kRequire, kFilter, kToNumber, kAddTo } kind = kSet;
  std::string field;                // set, filter, to_number; add_to: the total's field
  std::string from;                 // rename: the old name; add_to: the item's number field
  std::string to;                   // rename: the new name
  std::vector<std::string> fields;  // drop, require
  json::value value;                // set: the value; filter: the value compared with
  std::string collection, id;       // add_to: the total's document
  std::optional<json::value> by;    // add_to: a constant instead of `from`
};

struct Job {
  std::string job;
  std::string step = "step";
  std::string input;
  std::string output;
  std::string id_field;
  std::string mode = "insert";
  std::string state_collection = batch::StepOptions{}.state_collection;
  std::string dead_letter;
  std::size_t commit_interval = batch::StepOptions{}.commit_interval;
  std::size_t concurrency = 1;
  bool transaction_per_item = false;
  std::chrono::milliseconds unknown_timeout = batch::StepOptions{}.unknown_timeout;
  batch::RetryPolicy retry;
  batch::BackoffPolicy backoff;
  batch::SkipPolicy skip;
  std::vector<Op> transform;
  json::value transform_json = json::array();  // as written, for the stored fingerprint
};

// ----- reading the job file -----

std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

Status Bad(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("\"" + path + "\" " + why);
}

std::string Shown(const json::value& v) {
  std::string s = FormatJson(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

Status CheckKeys(const json::object& o, const std::string& path,
                 std::initializer_list<const char*> allowed) {
  for (const auto& kv : o) {
    bool known = false;
    for (const char* a : allowed) known = known || kv.key() == a;
    if (known) continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return Bad(Join(path, kv.key()), "is not a known key (expected " + list + ")");
  }
  return Status::Ok();
}

// An optional member: OK with *out untouched when absent.
Status String(const json::object& o, const std::string& path, const char* key,
              std::string* out, bool required = false) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return required ? Bad(Join(path, key), "is required") : Status::Ok();
  if (!v->is_string()) return Bad(Join(path, key), "must be a string, not " + Shown(*v));
  *out = std::string(v->as_string());
  if (out->empty()) return Bad(Join(path, key), "must not be empty");
  return Status::Ok();
}

Status Whole(const json::object& o, const std::string& path, const char* key,
             std::uint64_t min, std::uint64_t max, std::uint64_t* out) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return Status::Ok();
  std::optional<std::uint64_t> n;
  if (v->is_uint64()) n = v->as_uint64();
  if (v->is_int64() && v->as_int64() >= 0) n = static_cast<std::uint64_t>(v->as_int64());
  if (!n || *n < min || *n > max) {
    return Bad(Join(path, key), "must be a whole number from " + std::to_string(min) + " to " +
                                    std::to_string(max) + ", not " + Shown(*v));
  }
  *out = *n;
  return Status::Ok();
}

Status Bool(const json::object& o, const std::string& path, const char* key, bool* out) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_bool()) return Bad(Join(path, key), "must be true or false, not " + Shown(*v));
  *out = v->as_bool();
  return Status::Ok();
}

Status Number(const json::object& o, const std::string& path, const char* key, double min,
              double max, double* out) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return Status::Ok();
  const double d = v->is_number() ? v->to_number<double>() : std::nan("");
  if (!(d >= min && d <= max)) {  // NaN (not a number) fails too
    char range[64];
    std::snprintf(range, sizeof range, "from %g to %g", min, max);
    return Bad(Join(path, key), std::string("must be a number ") + range + ", not " + Shown(*v));
  }
  *out = d;
  return Status::Ok();
}

// The codes a policy may name: every failure code but "unknown", whose outcome is not known
// and which the policies never retry or skip.
std::optional<Code> CodeFromName(std::string_view name) {
  for (Code c : {Code::kConflict, Code::kDeleted, Code::kBusy, Code::kNotFound, Code::kAborted,
                 Code::kUnavailable, Code::kInvalidArgument, Code::kFailedPrecondition,
                 Code::kCorruption}) {
    if (CodeName(c) == name) return c;
  }
  return std::nullopt;
}

Status Codes(const json::object& o, const std::string& path, const char* key,
             std::vector<Code>* out) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return Status::Ok();
  const std::string where = Join(path, key);
  if (!v->is_array()) return Bad(where, "must be an array of code names, not " + Shown(*v));
  std::vector<Code> codes;
  for (const json::value& e : v->as_array()) {
    const std::optional<Code> c = e.is_string() ? CodeFromName(e.as_string()) : std::nullopt;
    if (!c) {
      return Bad(where, "holds " + Shown(e) + ", not one of conflict, deleted, busy, "
                        "not_found, aborted, unavailable, invalid_argument, "
                        "failed_precondition, corruption");
    }
    codes.push_back(*c);
  }
  *out = std::move(codes);
  return Status::Ok();
}

Status Object(const json::object& o, const std::string& path, const char* key,
              const json::object** out) {
  *out = nullptr;
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_object()) return Bad(Join(path, key), "must be an object, not " + Shown(*v));
  *out = &v->as_object();
  return Status::Ok();
}

// A job or step name: the rules of batch::StepOptions::job.
Status Name(const std::string& path, const std::string& name) {
  if (name.size() > 128) return Bad(path, "is longer than 128 bytes");
  for (unsigned char c : name) {
    if (c == '/' || c < 0x20 || c == 0x7f) return Bad(path, "contains '/' or a control character");
  }
  if (Status s = ValidateId(name); !s.ok()) return Bad(path, s.message());
  return Status::Ok();
}

Status Collection(const std::string& path, const std::string& name) {
  if (Status s = ValidateCollection(name); !s.ok()) return Bad(path, s.message());
  return Status::Ok();
}

Status Field(const std::string& path, const std::string& name) {
  if (IsReservedField(name)) {
    return Bad(path, "names \"" + name + "\", reserved (fields starting with _ltx belong to litetx)");
  }
  return Status::Ok();
}

Status FieldList(const json::object& o, const std::string& path, std::vector<std::string>* out) {
  const json::value* v = o.if_contains("fields");
  const std::string where = Join(path, "fields");
  if (v == nullptr) return Bad(where, "is required");
  if (!v->is_array() || v->as_array().empty()) {
    return Bad(where, "must be a non-empty array of field names, not " + Shown(*v));
  }
  for (const json::value& e : v->as_array()) {
    if (!e.is_string() || e.as_string().empty()) {
      return Bad(where, "holds " + Shown(e) + ", not a field name");
    }
    out->emplace_back(e.as_string());
    if (Status s = Field(where, out->back()); !s.ok()) return s;
  }
  return Status::Ok();
}

Status ParseOp(const json::value& v, const std::string& path, Op* op) {
  if (!v.is_object()) return Bad(path, "must be an object with \"op\", not " + Shown(v));
  const json::object& o = v.as_object();
  std::string name;
  if (Status s = String(o, path, "op", &name, true); !s.ok()) return s;
  if (name == "set") {
    op->kind = Op::kSet;
    if (Status s = CheckKeys(o, path, {"op", "field", "value"}); !s.ok()) return s;
    if (Status s = String(o, path, "field", &op->field, true); !s.ok()) return s;
    if (Status s = Field(Join(path, "field"), op->field); !s.ok()) return s;
    if (!o.contains("value")) return Bad(Join(path, "value"), "is required");
    op->value = o.at("value");
  } else if (name == "rename") {
    op->kind = Op::kRename;
    if (Status s = CheckKeys(o, path, {"op", "from", "to"}); !s.ok()) return s;
    if (Status s = String(o, path, "from", &op->from, true); !s.ok()) return s;
    if (Status s = String(o, path, "to", &op->to, true); !s.ok()) return s;
    if (Status s = Field(Join(path, "to"), op->to); !s.ok()) return s;
    if (op->from == op->to) return Bad(path, "renames \"" + op->from + "\" to itself");
  } else if (name == "drop" || name == "require") {
    op->kind = name == "drop" ? Op::kDrop : Op::kRequire;
    if (Status s = CheckKeys(o, path, {"op", "fields"}); !s.ok()) return s;
    if (Status s = FieldList(o, path, &op->fields); !s.ok()) return s;
  } else if (name == "filter") {
    op->kind = Op::kFilter;
    if (Status s = CheckKeys(o, path, {"op", "field", "equals"}); !s.ok()) return s;
    if (Status s = String(o, path, "field", &op->field, true); !s.ok()) return s;
    if (!o.contains("equals")) return Bad(Join(path, "equals"), "is required");
    op->value = o.at("equals");
  } else if (name == "to_number") {
    op->kind = Op::kToNumber;
    if (Status s = CheckKeys(o, path, {"op", "field"}); !s.ok()) return s;
    if (Status s = String(o, path, "field", &op->field, true); !s.ok()) return s;
  } else if (name == "add_to") {
    op->kind = Op::kAddTo;
    if (Status s = CheckKeys(o, path, {"op", "collection", "id", "field", "from", "by"}); !s.ok()) {
      return s;
    }
    if (Status s = String(o, path, "collection", &op->collection, true); !s.ok()) return s;
    if (Status s = Collection(Join(path, "collection"), op->collection); !s.ok()) return s;
    if (Status s = String(o, path, "id", &op->id, true); !s.ok()) return s;
    if (Status s = ValidateId(op->id); !s.ok()) return Bad(Join(path, "id"), s.message());
    if (Status s = String(o, path, "field", &op->field, true); !s.ok()) return s;
    if (Status s = Field(Join(path, "field"), op->field); !s.ok()) return s;
    if (o.contains("from") == o.contains("by")) {
      return Bad(path, "needs exactly one of \"from\" (the item's field to add) and \"by\" "
                       "(a number to add)");
    }
    if (Status s = String(o, path, "from", &op->from); !s.ok()) return s;
    if (const json::value* by = o.if_contains("by")) {
      const bool finite = by->is_int64() || by->is_uint64() ||
                          (by->is_double() && std::isfinite(by->as_double()));
      if (!finite) return Bad(Join(path, "by"), "must be a number, not " + Shown(*by));
      op->by = *by;
    }
  } else {
    return Bad(Join(path, "op"), "is \"" + name + "\", not one of set, rename, drop, require, "
                                 "filter, to_number, add_to");
  }
  if (op->kind == Op::kSet || op->kind == Op::kFilter) {
    if (engine::CheckJson(op->value, 2, 64, /*finite_only=*/true) != engine::JsonProblem::kNone) {
      return Bad(path, "holds a value nested deeper than 64 levels or a number out of range");
    }
  }
  return Status::Ok();
}

Status ParseBackoff(const json::object& o, const std::string& path, batch::BackoffPolicy* b) {
  if (Status s = CheckKeys(o, path, {"kind", "initial_ms", "max_ms", "multiplier", "jitter"});
      !s.ok()) {
    return s;
  }
  std::string kind;
  if (Status s = String(o, path, "kind", &kind, true); !s.ok()) return s;
  constexpr std::uint64_t kMaxMs = 3'600'000;
  std::uint64_t initial = 10, max = 1000;
  double multiplier = 2.0;
  bool jitter = kind == "exponential";
  if (Status s = Whole(o, path, "initial_ms", 0, kMaxMs, &initial); !s.ok()) return s;
  if (Status s = Whole(o, path, "max_ms", 0, kMaxMs, &max); !s.ok()) return s;
  if (Status s = Number(o, path, "multiplier", 1.0, 100.0, &multiplier); !s.ok()) return s;
  if (Status s = Bool(o, path, "jitter", &jitter); !s.ok()) return s;
  // A key the kind does not use would be ignored: refused, like any typo.
  auto unused = [&](std::initializer_list<const char*> keys) -> Status {
    for (const char* k : keys) {
      if (o.contains(k)) return Bad(Join(path, k), "has no effect with kind \"" + kind + "\"");
    }
    return Status::Ok();
  };
  using std::chrono::milliseconds;
  if (kind == "none") {
    if (Status s = unused({"initial_ms", "max_ms", "multiplier", "jitter"}); !s.ok()) return s;
    *b = batch::BackoffPolicy::None();
  } else if (kind == "fixed") {
    if (Status s = unused({"max_ms", "multiplier"}); !s.ok()) return s;
    if (!o.contains("initial_ms")) return Bad(Join(path, "initial_ms"), "is required with kind \"fixed\"");
    *b = batch::BackoffPolicy::Fixed(milliseconds(initial), jitter);
  } else if (kind == "exponential") {
    if (max < initial) {
      return Bad(Join(path, "max_ms"), "(" + std::to_string(max) + ") is below initial_ms (" +
                                           std::to_string(initial) + ")");
    }
    *b = batch::BackoffPolicy::Exponential(milliseconds(initial), milliseconds(max), multiplier,
                                           jitter);
  } else {
    return Bad(Join(path, "kind"), "is \"" + kind + "\", not one of none, fixed, exponential");
  }
  return Status::Ok();
}

// Reads and checks the job file. kInvalidArgument naming the problem, nothing else.
Status ParseJob(const std::string& file, Job* job) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    return Status::InvalidArgument("cannot read " + file + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(file + " is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxJobFileBytes) {
    return Status::InvalidArgument(file + " is larger than 1 MiB: not a job description");
  }
  std::ifstream in(file, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in) return Status::InvalidArgument("cannot read " + file);
  const std::string text = buf.str();
  json::parse_options popt;
  popt.max_depth = 70;
  json::error_code ec;
  std::size_t used = 0;
  json::value v = engine::ParseJson(text, ec, popt, &used);
  if (ec) {
    return Status::InvalidArgument("malformed JSON near byte " + std::to_string(used) + ": " +
                                   ec.message());
  }
  if (auto key = engine::FindDuplicateKey(text)) {
    return Status::InvalidArgument("key \"" + *key + "\" appears twice in one object");
  }
  if (!v.is_object()) return Status::InvalidArgument("the job description must be a JSON object");
  const json::object& o = v.as_object();
  if (Status s = CheckKeys(o, "", {"job", "step", "input", "output", "id_field", "mode",
                                   "state_collection", "dead_letter", "commit_interval",
                                   "concurrency", "transaction_per_item", "retry", "skip",
                                   "transform", "unknown_timeout_ms"});
      !s.ok()) {
    return s;
  }
  if (Status s = String(o, "", "job", &job->job, true); !s.ok()) return s;
  if (Status s = Name("job", job->job); !s.ok()) return s;
  if (Status s = String(o, "", "step", &job->step); !s.ok()) return s;
  if (Status s = Name("step", job->step); !s.ok()) return s;
  if (Status s = String(o, "", "input", &job->input); !s.ok()) return s;
  if (Status s = String(o, "", "output", &job->output, true); !s.ok()) return s;
  if (Status s = Collection("output", job->output); !s.ok()) return s;
  if (Status s = String(o, "", "id_field", &job->id_field); !s.ok()) return s;
  if (Status s = String(o, "", "mode", &job->mode); !s.ok()) return s;
  if (job->mode != "insert" && job->mode != "upsert") {
    return Bad("mode", "is \"" + job->mode + "\", not insert or upsert");
  }
  if (Status s = String(o, "", "state_collection", &job->state_collection); !s.ok()) return s;
  if (Status s = Collection("state_collection", job->state_collection); !s.ok()) return s;
  if (Status s = String(o, "", "dead_letter", &job->dead_letter); !s.ok()) return s;
  if (!job->dead_letter.empty()) {
    if (Status s = Collection("dead_letter", job->dead_letter); !s.ok()) return s;
    if (job->dead_letter == job->output) return Bad("dead_letter", "is the output collection");
    if (job->dead_letter == job->state_collection) {
      return Bad("dead_letter", "is the state collection");
    }
  }
  if (job->output == job->state_collection) return Bad("output", "is the state collection");
  std::uint64_t n = job->commit_interval;
  if (Status s = Whole(o, "", "commit_interval", 1, 100'000, &n); !s.ok()) return s;
  job->commit_interval = static_cast<std::size_t>(n);
  n = job->concurrency;
  if (Status s = Whole(o, "", "concurrency", 1, 256, &n); !s.ok()) return s;
  job->concurrency = static_cast<std::size_t>(n);
  if (Status s = Bool(o, "", "transaction_per_item", &job->transaction_per_item); !s.ok()) {
    return s;
  }

  n = static_cast<std::uint64_t>(job->unknown_timeout.count());
  if (Status s = Whole(o, "", "unknown_timeout_ms", 0, 3'600'000, &n); !s.ok()) return s;
  job->unknown_timeout = std::chrono::milliseconds(n);

  const json::object* retry = nullptr;
  if (Status s = Object(o, "", "retry", &retry); !s.ok()) return s;
  if (retry != nullptr) {
    if (Status s = CheckKeys(*retry, "retry", {"max_attempts", "backoff", "codes"}); !s.ok()) {
      return s;
    }
    n = static_cast<std::uint64_t>(job->retry.max_attempts);
    if (Status s = Whole(*retry, "retry", "max_attempts", 1, 100, &n); !s.ok()) return s;
    job->retry.max_attempts = static_cast<int>(n);
    if (Status s = Codes(*retry, "retry", "codes", &job->retry.retryable); !s.ok()) return s;
    const json::object* backoff = nullptr;
    if (Status s = Object(*retry, "retry", "backoff", &backoff); !s.ok()) return s;
    if (backoff != nullptr) {
      if (Status s = ParseBackoff(*backoff, "retry.backoff", &job->backoff); !s.ok()) return s;
    }
  }
  const json::object* skip = nullptr;
  if (Status s = Object(o, "", "skip", &skip); !s.ok()) return s;
  if (skip != nullptr) {
    if (Status s = CheckKeys(*skip, "skip", {"limit", "codes"}); !s.ok()) return s;
    if (Status s = Whole(*skip, "skip", "limit", 0, 1'000'000'000'000, &job->skip.skip_limit);
        !s.ok()) {
      return s;
    }
    if (Status s = Codes(*skip, "skip", "codes", &job->skip.skippable); !s.ok()) return s;
  }

  if (const json::value* t = o.if_contains("transform")) {
    if (!t->is_array()) return Bad("transform", "must be an array of operations, not " + Shown(*t));
    if (t->as_array().size() > kMaxTransformOps) {
      return Bad("transform", "has more than " + std::to_string(kMaxTransformOps) + " operations");
    }
    std::size_t i = 0;
    for (const json::value& e : t->as_array()) {
      Op op;
      if (Status s = ParseOp(e, "transform[" + std::to_string(i++) + "]", &op); !s.ok()) return s;
      if (op.kind == Op::kAddTo && op.collection == job->state_collection) {
        return Bad("transform[" + std::to_string(i - 1) + "].collection", "is the state collection");
      }
      job->transform.push_back(std::move(op));
    }
    job->transform_json = *t;
  }

  // A chunk is one transaction: at most Options::max_actions documents. Each item writes its
  // output or a skip record, and with a dead-letter collection a recovered item writes both a
  // dead letter and a skip record; the chunk also writes its chunk document, the step document
  // and each add_to total.
  std::size_t totals = 0;
  for (const Op& op : job->transform) totals += op.kind == Op::kAddTo ? 1 : 0;
  const std::size_t per_item = job->dead_letter.empty() ? 1 : 2;
  const std::size_t max_actions = Options{}.max_actions;
  const std::size_t most = (max_actions - 2 - std::min(totals, max_actions - 2)) / per_item;
  if (!job->transaction_per_item && job->commit_interval > most) {
    return Bad("commit_interval", "is " + std::to_string(job->commit_interval) +
                                      ": a chunk is one transaction of at most " +
                                      std::to_string(max_actions) + " documents, so at most " +
                                      std::to_string(most) + " items fit in one here");
  }
  return Status::Ok();
}

// ----- the processor -----

// Two JSON values are equal for "filter": numbers by value (1 equals 1.0), others as written.
bool SameValue(const json::value& a, const json::value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_double() || b.is_double()) return a.to_number<double>() == b.to_number<double>();
    if (a.is_int64() && b.is_int64()) return a.as_int64() == b.as_int64();
    if (a.is_uint64() && b.is_uint64()) return a.as_uint64() == b.as_uint64();
    const json::value& i = a.is_int64() ? a : b;  // one int64, one uint64
    const json::value& u = a.is_int64() ? b : a;
    return i.as_int64() >= 0 && static_cast<std::uint64_t>(i.as_int64()) == u.as_uint64();
  }
  return a == b;
}

// A decimal number written in a string ("42", "-3.5", "1e3"), as JSON writes numbers.
std::optional<json::value> ParseNumber(std::string_view s) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (!digits()) return std::nullopt;
  bool integral = true;
  if (i < s.size() && s[i] == '.') {
    ++i;
    integral = false;
    if (!digits()) return std::nullopt;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    integral = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  if (integral) {
    std::int64_t v = 0;
    if (auto r = std::from_chars(s.data(), s.data() + s.size(), v); r.ec == std::errc()) {
      return json::value(v);
    }
    std::uint64_t u = 0;
    if (auto r = std::from_chars(s.data(), s.data() + s.size(), u); r.ec == std::errc()) {
      return json::value(u);
    }
  }
  double d = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec != std::errc() || !std::isfinite(d)) return std::nullopt;
  return json::value(d);
}

Status Invalid(const batch::Item& item, const std::string& why) {
  return Status::InvalidArgument("item " + item.key + ": " + why);
}

// Adds `delta` to `op`'s total, creating the document or the field as needed.
Status AddTo(TxnContext& tx, const Op& op, const json::value& delta) {
  auto doc = tx.Get(op.collection, op.id);
  if (!doc.ok()) return doc.status();
  if (doc->state != DocumentState::kFound) {
    return tx.Insert(op.collection, op.id, json::object{{op.field, delta}});
  }
  if (!doc->doc.contains(op.field)) {
    return tx.Update(op.collection, op.id, json::object{{op.field, delta}});
  }
  return tx.Adjust(op.collection, op.id, json::object{{op.field, delta}});
}

// Applies the transform to `item`: the output, std::nullopt when filtered out, or a failure.
Result<std::optional<json::value>> Process(const Job& job, TxnContext& tx,
                                           const batch::Item& item) {
  if (Status s = ValidateId(item.key); !s.ok()) return Invalid(item, "not a document id: " + s.message());
  json::object doc = item.value.as_object();
  for (const Op& op : job.transform) {
    switch (op.kind) {
      case Op::kSet:
        doc[op.field] = op.value;
        break;
      case Op::kRename:
        if (auto it = doc.find(op.from); it != doc.end()) {
          json::value v = std::move(it->value());
          doc.erase(it);
          doc[op.to] = std::move(v);
        }
        break;
      case Op::kDrop:
        for (const std::string& f : op.fields) doc.erase(f);
        break;
      case Op::kRequire:
        for (const std::string& f : op.fields) {
          const json::value* v = doc.if_contains(f);
          if (v == nullptr || v->is_null()) return Invalid(item, "required field \"" + f + "\" is missing");
        }
        break;
      case Op::kFilter:
        if (const json::value* v = doc.if_contains(op.field); v != nullptr && SameValue(*v, op.value)) {
          return std::optional<json::value>{};
        }
        break;
      case Op::kToNumber: {
        json::value* v = doc.if_contains(op.field);
        if (v != nullptr && v->is_number()) break;
        std::optional<json::value> n;
        if (v != nullptr && v->is_string()) n = ParseNumber(v->as_string());
        if (!n) {
          return Invalid(item, "field \"" + op.field + "\" is " +
                                   (v == nullptr ? std::string("missing") : Shown(*v)) +
                                   ", not a number");
        }
        *v = std::move(*n);
        break;
      }
      case Op::kAddTo: {
        json::value delta;
        if (op.by) {
          delta = *op.by;
        } else {
          const json::value* v = doc.if_contains(op.from);
          if (v == nullptr || !v->is_number()) {
            return Invalid(item, "field \"" + op.from + "\" is " +
                                     (v == nullptr ? std::string("missing") : Shown(*v)) +
                                     ", not a number");
          }
          delta = *v;
        }
        if (Status s = AddTo(tx, op, delta); !s.ok()) return s;
        break;
      }
    }
  }
  for (const auto& kv : doc) {
    if (IsReservedField(kv.key())) {
      return Invalid(item, "field \"" + std::string(kv.key()) +
                               "\" is reserved (fields starting with _ltx belong to litetx)");
    }
  }
  return std::optional<json::value>{json::value(std::move(doc))};
}

// Writes one output: a new document (insert), or a new document or a whole replacement
// (upsert).
Status WriteOne(const Job& job, TxnContext& tx, const batch::Output& o) {
  const json::object& doc = o.value.as_object();
  if (job.mode == "insert") return tx.Insert(job.output, o.item->key, doc);
  auto old = tx.Get(job.output, o.item->key);
  if (!old.ok()) return old.status();
  if (old->state != DocumentState::kFound) return tx.Insert(job.output, o.item->key, doc);
  std::vector<std::string> unset;
  for (const auto& kv : old->doc) {
    if (!doc.contains(kv.key())) unset.emplace_back(kv.key());
  }
  return tx.Update(job.output, o.item->key, doc, std::move(unset));
}

// ----- input, progress -----

// Thrown by the reader once a signal was noted; RunStep lets the chunk in progress end and
// rethrows it.
struct StopRequested {};

// What the progress bar and the summary count while the step runs (listener callbacks come
// from worker threads, serialised; reads from the calling thread).
class Progress {
 public:
  explicit Progress(bool draw) : draw_(draw), start_(SteadyClock::now()) {}

  void OnRead() {
    read_.fetch_add(1, std::memory_order_relaxed);
    Draw(false);
  }
  void OnChunk(const batch::Counts& c) {
    chunks_.fetch_add(1, std::memory_order_relaxed);
    skips_.fetch_add(c.skips() + c.recovered, std::memory_order_relaxed);
    Draw(false);
  }
  // Ends the bar's line.
  void Done() {
    if (!draw_) return;
    Draw(true);
    std::lock_guard<std::mutex> lock(mu_);
    if (drawn_) std::fputs("\n", stderr);
    std::fflush(stderr);
  }
  std::uint64_t chunks() const { return chunks_.load(); }

 private:
  void Draw(bool force) {
    if (!draw_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = SteadyClock::now();
    if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const double s = std::chrono::duration<double>(now - start_).count();
    const std::uint64_t read = read_.load();
    char line[200];
    std::snprintf(line, sizeof line,
                  "\r\033[K%llu items  %.0f items/s  %llu chunks  %llu skipped",
                  static_cast<unsigned long long>(read), s > 0 ? read / s : 0.0,
                  static_cast<unsigned long long>(chunks_.load()),
                  static_cast<unsigned long long>(skips_.load()));
    std::fputs(line, stderr);
    std::fflush(stderr);
  }

  const bool draw_;
  const SteadyClock::time_point start_;
  std::atomic<std::uint64_t> read_{0}, chunks_{0}, skips_{0};
  std::mutex mu_;
  bool drawn_ = false;
  SteadyClock::time_point last_;
};

// The NDJSON reader of the module, stopped by a signal. On an input that cannot seek (a pipe),
// Restore reads forward from where the reader stands to the checkpoint instead: the input is
// the same on every run, so reading it again reaches the same offsets.
class Reader final : public batch::ItemReader {
 public:
  Reader(std::unique_ptr<batch::NdjsonReader> inner, bool seekable, Progress* progress)
      : inner_(std::move(inner)), seekable_(seekable), progress_(progress) {}

  // A checkpoint's number (written by NdjsonReader, read back from the store).
  static std::optional<std::uint64_t> Unsigned(const json::value* v) {
    if (v == nullptr) return std::nullopt;
    if (v->is_uint64()) return v->as_uint64();
    if (v->is_int64() && v->as_int64() >= 0) return static_cast<std::uint64_t>(v->as_int64());
    return std::nullopt;
  }

  Result<std::optional<batch::Item>> Read() override {
    if (Interrupted() != 0) throw StopRequested{};
    auto r = inner_->Read();
    if (!r.ok() || r->has_value()) progress_->OnRead();
    return r;
  }
  json::value Checkpoint() const override { return inner_->Checkpoint(); }
  Status Restore(const json::value& checkpoint) override {
    if (seekable_) return inner_->Restore(checkpoint);
    const json::object* want = checkpoint.if_object();
    const auto target = Unsigned(want != nullptr ? want->if_contains("offset") : nullptr);
    const auto line = Unsigned(want != nullptr ? want->if_contains("line") : nullptr);
    if (!target || !line) return Status::InvalidArgument("the checkpoint is not {offset, line}");
    for (;;) {
      const json::value at = inner_->Checkpoint();
      const std::uint64_t now = *Unsigned(at.as_object().if_contains("offset"));
      if (now == *target) {
        if (*line != *Unsigned(at.as_object().if_contains("line"))) {
          return Status::InvalidArgument("the input differs from the run that wrote the "
                                         "checkpoint (line numbers do not match)");
        }
        return Status::Ok();
      }
      if (now > *target) {
        return Status::InvalidArgument("the input differs from the run that wrote the "
                                       "checkpoint (no line ends at byte " +
                                       std::to_string(*target) + ")");
      }
      if (Interrupted() != 0) throw StopRequested{};
      auto r = inner_->Read();
      if (r.ok() && !r->has_value()) {
        return Status::InvalidArgument("the input ends at byte " + std::to_string(now) +
                                       ", before the checkpoint at byte " +
                                       std::to_string(*target) + ": not the same input");
      }
    }
  }

 private:
  std::unique_ptr<batch::NdjsonReader> inner_;
  bool seekable_;
  Progress* progress_;
};

// Opens the input: "-" is stdin. Sets *seekable for a regular file.
Result<std::unique_ptr<batch::NdjsonReader>> OpenInput(const std::string& file,
                                                       const std::string& id_field,
                                                       bool* seekable) {
  struct stat st {};
  const std::string path = file == "-" ? "/dev/stdin" : file;
  const int rc = file == "-" ? ::fstat(STDIN_FILENO, &st) : ::stat(file.c_str(), &st);
  if (rc != 0) return Status::InvalidArgument("cannot read " + file + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("cannot read " + file + ": it is a directory");
  }
  *seekable = S_ISREG(st.st_mode);
  batch::NdjsonReaderOptions o;
  o.key_field = id_field;
  o.max_line_bytes = Options{}.max_document_bytes;
  auto r = batch::NdjsonReader::Open(path, o);
  if (!r.ok()) return Status::InvalidArgument("cannot read " + file + ": " + r.status().message());
  return r;
}

// ----- the stored job description -----

// What decides the outputs, stored when the job first runs.
json::object Fingerprint(const Job& job) {
  return json::object{{"commit_interval", job.commit_interval},
                      {"output", job.output},
                      {"mode", job.mode},
                      {"id_field", job.id_field},
                      {"dead_letter", job.dead_letter},
                      {"transform", job.transform_json}};
}

std::string FingerprintId(const Job& job) { return job.job + "/" + job.step + "/cli"; }

// Stores the fingerprint, or compares it with the stored one. OK, kInvalidArgument naming
// what changed, or the store's error.
Status CheckFingerprint(Database& db, const Job& job) {
  const json::object want = Fingerprint(job);
  for (int tries = 0; tries < 3; ++tries) {
    auto r = db.Read(job.state_collection, FingerprintId(job));
    if (!r.ok()) return r.status();
    if (r->state == DocumentState::kFound) {
      for (const auto& kv : want) {
        const json::value* had = r->doc.if_contains(kv.key());
        if (had == nullptr || *had != kv.value()) {
          return Status::InvalidArgument(
              "job " + job.job + "/" + job.step + " was started with \"" +
              std::string(kv.key()) + "\" " + (had ? Shown(*had) : std::string("unset")) +
              ", now " + Shown(kv.value()) +
              ": a restart must form and process its items as before. Restore it, or use a "
              "new job name");
        }
      }
      return Status::Ok();
    }
    auto c = db.Run([&](TxnContext& tx) {
      return tx.Insert(job.state_collection, FingerprintId(job), want);
    });
    if (c.ok()) return Status::Ok();
    if (c.code() != Code::kConflict) return c.status();
  }
  return Status::Conflict("another run of job " + job.job + " started at the same moment");
}

// ----- the command -----

double Seconds(SteadyClock::duration d) {
  return std::round(std::chrono::duration<double>(d).count() * 1e3) / 1e3;
}

json::object SkipJson(const batch::SkipEvent& e) {
  return json::object{{"position", e.position},
                      {"key", e.key},
                      {"phase", batch::PhaseName(e.phase)},
                      {"code", std::string(CodeName(e.failure.code()))},
                      {"message", e.failure.message()},
                      {"recovered", e.recovered}};
}

json::array SkipList(const std::vector<batch::SkipEvent>& events, std::uint64_t* more) {
  json::array out;
  for (const batch::SkipEvent& e : events) {
    if (out.size() == kMaxSkippedListed) break;
    out.push_back(SkipJson(e));
  }
  *more = events.size() - out.size();
  return out;
}

batch::StepOptions StepOptionsOf(const Job& job) {
  batch::StepOptions o;
  o.job = job.job;
  o.step = job.step;
  o.state_collection = job.state_collection;
  o.commit_interval = job.commit_interval;
  o.concurrency = job.concurrency;
  o.transaction_per_item = job.transaction_per_item;
  o.unknown_timeout = job.unknown_timeout;
  o.retry = job.retry;
  o.backoff = job.backoff;
  o.skip = job.skip;
  return o;
}

// Engine options of the command: a transaction that meets a document held by a crashed run's
// transaction waits until that transaction's lease has passed and settles it on the spot, so
// a rerun right after a crash goes on instead of failing busy.
Options BatchEngineOptions(const Context& ctx) {
  Options o = EngineOptions(ctx);
  o.busy_timeout = o.lease + std::chrono::seconds(1);
  return o;
}

int RunStatus(Context& ctx, const Job& job) {
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;
  Database db(store, BatchEngineOptions(ctx));
  json::object out{{"job", job.job}, {"step", job.step}};
  auto st = batch::ReadStepStatus(db, StepOptionsOf(job));
  if (!st.ok() && st.code() == Code::kNotFound) {
    out["status"] = "not_started";
    PrintJson(out);
    return kExitOk;
  }
  if (!st.ok()) return Fail(OutcomeExit(st.status()), "batch --status: " + st.status().ToString());
  out["status"] = st->status;
  out["execution"] = st->execution;
  out["total"] = st->total.ToJson();
  out["chunks"] = st->chunks;
  out["last_error"] = st->last_error;
  PrintJson(out);
  return kExitOk;
}

int RunBatch(Context& ctx, const BatchArgs& args) {
  const auto start = SteadyClock::now();
  Job job;
  if (Status s = ParseJob(args.job_file, &job); !s.ok()) {
    return Fail(kExitUsage, "job file " + args.job_file + ": " + s.message());
  }
  if (args.status) return RunStatus(ctx, job);
  std::string input = args.input;
  if (input.empty()) {
    if (job.input.empty()) {
      return Fail(kExitUsage, "job file " + args.job_file + ": no \"input\", and no --input given");
    }
    // A relative path in the job file is relative to the job file's directory.
    std::filesystem::path p(job.input);
    if (p.is_relative()) p = std::filesystem::path(args.job_file).parent_path() / p;
    input = p.string();
  }
  bool seekable = false;
  auto inner = OpenInput(input, job.id_field, &seekable);
  if (!inner.ok()) return Fail(kExitUsage, inner.status().message());

  CatchSignals();  // before OpenStore and the Database start any thread
  int code = kExitOk;
  auto store = OpenStore(ctx, &code);
  if (!store) return code;
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(kExitOk), std::string("interrupted (") + InterruptedName() +
                                              ") before the step started: nothing written");
  }
  Database db(store, BatchEngineOptions(ctx));
  if (Status s = CheckFingerprint(db, job); !s.ok()) {
    if (s.code() == Code::kInvalidArgument) return Fail(kExitUsage, s.message());
    return Fail(kExitFailed, "batch: cannot read or store the job description: " + s.ToString());
  }

  Progress progress(!args.quiet && ::isatty(STDERR_FILENO) == 1);
  Reader reader(std::move(*inner), seekable, &progress);
  batch::StepFunctions fns;
  fns.process = [&job](TxnContext& tx, const batch::Item& item) { return Process(job, tx, item); };
  fns.write = [&job](TxnContext& tx, const std::vector<batch::Output>& outputs) {
    for (const batch::Output& o : outputs) {
      if (Status s = WriteOne(job, tx, o); !s.ok()) return s;
    }
    return Status::Ok();
  };
  if (!job.dead_letter.empty()) {
    fns.recover = [&job](TxnContext& tx, const batch::Item& item, const Status& failure) {
      return tx.Insert(job.dead_letter, job.job + "/" + job.step + "/" + std::to_string(item.position),
                       json::object{{"job", job.job},
                                    {"step", job.step},
                                    {"position", item.position},
                                    {"key", item.key},
                                    {"code", std::string(CodeName(failure.code()))},
                                    {"message", failure.message()},
                                    {"item", item.value}});
    };
  }
  batch::StepOptions options = StepOptionsOf(job);
  // What this run committed, for the summary of a run stopped by a signal (RunStep then
  // returns no report).
  batch::Counts committed;
  std::vector<batch::SkipEvent> skipped;
  options.listener.after_chunk = [&](std::uint64_t, const batch::Counts& c) {
    committed += c;
    progress.OnChunk(c);
  };
  options.listener.on_skip = [&](const batch::SkipEvent& e) { skipped.push_back(e); };

  json::object out;
  out["status"] = "";
  out["job"] = job.job;
  out["step"] = job.step;
  out["input"] = input;
  out["output"] = job.output;
  std::optional<Result<batch::StepReport>> result;
  try {
    result = batch::RunStep(db, reader, fns, options);
  } catch (const StopRequested&) {
  }
  progress.Done();

  int exit_code = kExitOk;
  if (!result) {
    // Stopped by a signal: the chunk in progress ended (committed or rolled back) and nothing
    // runs any more. ReadStepStatus counts every committed chunk.
    out["status"] = "interrupted";
    auto st = batch::ReadStepStatus(db, options);
    if (st.ok()) {
      out["execution"] = st->execution;
      out["total"] = st->total.ToJson();
      out["chunks"] = st->chunks;
    }
    out["this_run"] = committed.ToJson();
    std::sort(skipped.begin(), skipped.end(),
              [](const auto& a, const auto& b) { return a.position < b.position; });
    std::uint64_t more = 0;
    out["skipped"] = SkipList(skipped, &more);
    out["skipped_more"] = more;
    exit_code = ExitAfterSignal(kExitOk);
  } else if (!result->ok()) {
    const Status& s = result->status();
    out["status"] = "failed";
    out["code"] = std::string(CodeName(s.code()));
    out["message"] = s.message();
    exit_code = s.code() == Code::kInvalidArgument ? kExitUsage : kExitFailed;
  } else {
    const batch::StepReport& r = **result;
    const Status& s = r.status;
    out["status"] = r.already_complete ? "already_complete"
                    : s.ok()           ? "completed"
                    : s.code() == Code::kUnknown ? "unknown"
                                                 : "failed";
    out["execution"] = r.execution;
    out["this_run"] = r.this_run.ToJson();
    out["total"] = r.total.ToJson();
    out["chunks"] = r.chunks;
    std::uint64_t more = 0;
    out["skipped"] = SkipList(r.skipped, &more);
    out["skipped_more"] = more;
    if (!s.ok()) {
      out["code"] = std::string(CodeName(s.code()));
      out["message"] = s.message();
    }
    exit_code = s.ok() ? kExitOk : s.code() == Code::kUnknown ? kExitUnknown : kExitFailed;
  }
  out["chunks_this_run"] = progress.chunks();
  if (Interrupted() != 0) out["interrupted"] = InterruptedName();
  out["elapsed_s"] = Seconds(SteadyClock::now() - start);
  PrintJson(out);
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(exit_code),
                std::string("interrupted (") + InterruptedName() + "): " +
                    (result ? "the step had ended" : "stopped after the chunk in progress") +
                    "; run the same job again to resume");
  }
  if (exit_code == kExitUnknown) {
    return Fail(exit_code, "step outcome unknown: " + std::string(out["message"].as_string()));
  }
  if (exit_code != kExitOk) {
    return Fail(exit_code, "step failed (" + std::string(out["code"].as_string()) + "): " +
                               std::string(out["message"].as_string()) +
                               " (what committed stays; the same job resumes after it)");
  }
  return kExitOk;
}

}  // namespace

void AddBatch(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<BatchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "batch", "Run a batch step over an NDJSON file as JOB.json describes: transform each "
               "line, write it in chunks of one transaction each, with retry, skip and a "
               "dead-letter collection; a rerun resumes after the last committed chunk "
               "(see docs/cli.md)");
  cmd->add_option("job_file", args->job_file, "The job description (JSON)")->required();
  cmd->add_option("--input", args->input,
                  "The NDJSON file to read, or - for stdin; overrides the job's \"input\"");
  cmd->add_flag("--status", args->status,
                "Print the step's stored state (status, execution, totals, chunks) and exit; "
                "runs nothing");
  cmd->add_flag("--quiet", args->quiet,
                "No progress bar on stderr (it is only drawn on a terminal anyway)");
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return RunBatch(ctx, *args); }; });
}

}  // namespace litetx::cli
