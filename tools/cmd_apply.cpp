// tools/cmd_apply.cpp — `litetx apply FILE|-`: runs one transaction given as JSON.
//
// The whole input is read and validated (UTF-8, JSON syntax and nesting depth, the action
// schema below, then the engine's own transaction checks) before the store is opened, so bad
// input never touches it. Numbers are read exactly (engine/json_text.h).
// Input: {"actions": [ACTION, ...]} where ACTION is one of
//   {"op":"insert", "collection", "id", "doc":{...}, "schema_version"?}
//   {"op":"update", "collection", "id", "set"?:{...}, "unset"?:[...], "version"?, "schema_version"?}
//   {"op":"adjust", "collection", "id", "by":{field: number...}, "version"?}
//   {"op":"delete", "collection", "id", "version"?}
//   {"op":"check",  "collection", "id", "version"}
// Output: {"outcome": NAME, "txn_id"?, "versions"? (committed), "current_version"? (conflict),
// "message"? (not committed)} and the outcome's exit code (cli.h). See docs/cli.md.
//
// SIGINT and SIGTERM (tools/signals.h): a signal that arrives before the transaction starts
// ends the command with nothing written. One that arrives while it runs is noted and the
// transaction runs to its end, as it would have without the signal: before the commit point
// it goes on to commit or rolls back, past it it finishes. Its bounds are those of every
// commit (--busy-timeout, --max-attempts with --retry-backoff, --rollback-timeout), so no
// record is left open. Then the outcome is printed with "interrupted": "SIGINT"|"SIGTERM" and
// the exit code is 130 (SIGINT) or 143 (SIGTERM) whatever the outcome: stdout says what
// happened. A second signal exits at once (130/143); the collector settles the transaction
// after its lease.
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#include "engine/json_text.h"
#include "engine/validate.h"
#include "tools/cli.h"
#include "tools/signals.h"

namespace litetx::cli {
namespace {
namespace json = boost::json;

struct ApplyArgs {
  std::string file;
  std::string busy_timeout;
  std::string lease;
  std::string retry_backoff;
  std::string rollback_timeout;
  int max_attempts = Options{}.max_attempts;
  std::string commit = "parallel";  // Options::parallel_commit: "parallel" or "classic"
};

// Returns the byte offset of the first invalid UTF-8 sequence in `s`, or npos if it is valid
// (no overlong forms, surrogates or code points above U+10FFFF).
std::size_t FindInvalidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    std::uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}


Status Bad(std::size_t index, const std::string& what) {
  return Status::InvalidArgument("action " + std::to_string(index) + ": " + what);
}

// Reads `name` from `o` as a T (an unsigned integer type), if present.
template <typename T>
Status OptionalUnsigned(const json::object& o, std::string_view name, std::size_t index,
                        std::optional<T>* out) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) return Status::Ok();
  auto n = json::try_value_to<T>(*v);
  const bool whole = v->is_uint64() || (v->is_int64() && v->get_int64() >= 0);
  if (!n && whole) {
    return Bad(index, "\"" + std::string(name) + "\" is out of range: " + json::serialize(*v) +
                          " (at most " + std::to_string(std::numeric_limits<T>::max()) + ")");
  }
  if (!n && v->is_double() && std::isfinite(v->get_double()) && v->get_double() >= 0 &&
      std::floor(v->get_double()) == v->get_double()) {
    // A whole number too large for 64 bits, which the JSON parser kept as a double.
    return Bad(index, "\"" + std::string(name) + "\" is out of range: " + FormatJson(*v) +
                          " (at most " + std::to_string(std::numeric_limits<T>::max()) + ")");
  }
  if (!n || v->is_bool()) {
    return Bad(index, "\"" + std::string(name) + "\" must be an unsigned integer, got " +
                          FormatJson(*v));
  }
  *out = *n;
  return Status::Ok();
}

Status ObjectField(const json::object& o, std::string_view name, std::size_t index, bool required,
                   json::object* out) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) {
    return required ? Bad(index, "missing \"" + std::string(name) + "\"") : Status::Ok();
  }
  if (!v->is_object()) return Bad(index, "\"" + std::string(name) + "\" must be an object");
  for (const auto& kv : v->get_object()) {
    if (IsReservedField(kv.key())) {
      return Bad(index, "field \"" + std::string(kv.key()) + "\" in \"" + std::string(name) +
                            "\" is reserved (names starting with _ltx belong to litetx)");
    }
  }
  *out = v->get_object();
  return Status::Ok();
}

Status StringField(const json::object& o, std::string_view name, std::size_t index,
                   std::string* out) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) return Bad(index, "missing \"" + std::string(name) + "\"");
  if (!v->is_string()) return Bad(index, "\"" + std::string(name) + "\" must be a string");
  *out = std::string(v->get_string());
  return Status::Ok();
}

Result<Action> ParseAction(const json::value& v, std::size_t index) {
  if (!v.is_object()) return Bad(index, "must be an object");
  const json::object& o = v.get_object();
  Action a;
  std::string op;
  if (Status s = StringField(o, "op", index, &op); !s.ok()) return s;
  std::set<std::string_view> allowed = {"op", "collection", "id"};
  if (op == "insert") {
    a.type = ActionType::kInsert;
    allowed.insert({"doc", "schema_version"});
  } else if (op == "update") {
    a.type = ActionType::kUpdate;
    allowed.insert({"set", "unset", "version", "schema_version"});
  } else if (op == "adjust") {
    a.type = ActionType::kAdjust;
    allowed.insert({"by", "version"});
  } else if (op == "delete") {
    a.type = ActionType::kDelete;
    allowed.insert("version");
  } else if (op == "check") {
    a.type = ActionType::kCheck;
    allowed.insert("version");
  } else {
    return Bad(index, "unknown op \"" + op + "\" (expected insert, update, adjust, delete, check)");
  }
  for (const auto& kv : o) {
    if (!allowed.contains(kv.key())) {
      return Bad(index, "unknown field \"" + std::string(kv.key()) + "\" for op " + op);
    }
  }
  if (Status s = StringField(o, "collection", index, &a.key.collection); !s.ok()) return s;
  if (Status s = StringField(o, "id", index, &a.key.id); !s.ok()) return s;
  if (Status s = ValidateCollection(a.key.collection); !s.ok()) return Bad(index, s.message());
  if (Status s = ValidateId(a.key.id); !s.ok()) return Bad(index, s.message());
  if (Status s = OptionalUnsigned(o, "version", index, &a.expected_version); !s.ok()) return s;
  if (Status s = OptionalUnsigned(o, "schema_version", index, &a.schema_version); !s.ok()) {
    return s;
  }
  Status s;
  switch (a.type) {
    case ActionType::kInsert: s = ObjectField(o, "doc", index, true, &a.fields); break;
    case ActionType::kUpdate: s = ObjectField(o, "set", index, false, &a.fields); break;
    case ActionType::kAdjust: s = ObjectField(o, "by", index, true, &a.fields); break;
    case ActionType::kDelete: break;
    case ActionType::kCheck:
      if (!a.expected_version) s = Bad(index, "a check needs \"version\"");
      break;
  }
  if (!s.ok()) return s;
  if (const json::value* u = o.if_contains("unset")) {
    if (!u->is_array()) return Bad(index, "\"unset\" must be an array of field names");
    for (const auto& f : u->get_array()) {
      if (!f.is_string()) return Bad(index, "\"unset\" must be an array of field names");
      a.unset.emplace_back(f.get_string());
      if (IsReservedField(a.unset.back())) {
        return Bad(index, "field \"" + a.unset.back() + "\" in \"unset\" is reserved");
      }
    }
  }
  return a;
}

// Parses and validates the whole input. kInvalidArgument with a one-line message otherwise.
Result<Transaction> ParseTransaction(std::string_view text, const Options& options) {
  if (std::size_t at = FindInvalidUtf8(text); at != std::string_view::npos) {
    return Status::InvalidArgument("input is not valid UTF-8 (byte " + std::to_string(at) + ")");
  }
  // Numbers are read exactly (engine::ParseJson). A document sits 3 levels down in the input
  // ({"actions":[{"doc":...}]}), so the input may nest 3 levels more than a document; deeper
  // input is refused while parsing, before anything copies it.
  const std::size_t doc_limit = engine::MaxNestingDepth(options);
  json::parse_options opt;
  opt.max_depth = doc_limit + 3;
  json::error_code ec;
  std::size_t used = 0;
  json::value doc = engine::ParseJson(text, ec, opt, &used);
  if (ec == json::error::too_deep) {
    return Status::InvalidArgument(
        "input nests deeper than " + std::to_string(opt.max_depth) +
        " levels of objects and arrays (near byte " + std::to_string(used) +
        "): a document may nest at most " + std::to_string(doc_limit) + " levels");
  }
  if (ec) {
    return Status::InvalidArgument("malformed JSON near byte " + std::to_string(used) + ": " +
                                   ec.message());
  }
  if (auto key = engine::FindDuplicateKey(text)) {
    return Status::InvalidArgument("key \"" + *key + "\" appears twice in one object");
  }
  if (!doc.is_object()) return Status::InvalidArgument("input must be a JSON object");
  for (const auto& kv : doc.get_object()) {
    if (kv.key() != "actions") {
      return Status::InvalidArgument("unknown top-level field \"" + std::string(kv.key()) +
                                     "\" (expected only \"actions\")");
    }
  }
  const json::value* actions = doc.get_object().if_contains("actions");
  if (actions == nullptr || !actions->is_array()) {
    return Status::InvalidArgument("input needs \"actions\": an array of actions");
  }
  if (actions->get_array().empty()) return Status::InvalidArgument("\"actions\" is empty");
  Transaction txn;
  std::size_t index = 0;
  for (const auto& v : actions->get_array()) {
    auto a = ParseAction(v, index++);
    if (!a.ok()) return a.status();
    txn.Add(std::move(a).value());
  }
  // The engine's own checks (duplicates, set/unset overlap, finite deltas, limits), so that
  // nothing it would reject reaches the store.
  if (Status s = engine::ValidateTransaction(txn, options); !s.ok()) return s;
  return txn;
}

// The most input `apply` reads: far more than any transaction the engine accepts needs in
// practice, and a bound on the memory a runaway input (/dev/zero, a huge file) can take.
constexpr std::size_t kMaxInputBytes = std::size_t{64} << 20;

// Reads all of `in` into *out, at most kMaxInputBytes. On failure says why in *why.
bool ReadBounded(std::istream& in, std::string* out, std::string* why) {
  out->clear();
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    out->append(buf, static_cast<std::size_t>(in.gcount()));
    if (out->size() > kMaxInputBytes) {
      *why = "the input is larger than " + std::to_string(kMaxInputBytes >> 20) + " MiB";
      return false;
    }
  }
  if (in.bad()) {
    *why = "read error";
    return false;
  }
  return true;
}

// Reads the input; on failure says why in *why.
bool ReadInput(const std::string& file, std::string* out, std::string* why) {
  if (file == "-") return ReadBounded(std::cin, out, why);
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    *why = std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *why = "it is a directory (expected a file holding JSON, or - for stdin)";
    return false;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    *why = std::strerror(errno);
    return false;
  }
  return ReadBounded(in, out, why);
}

// Applies the duration flags to `o`. False (after printing the error) on a bad value.
bool Tune(const ApplyArgs& args, Options& o) {
  struct {
    const std::string& text;
    std::chrono::milliseconds& field;
  } durations[] = {{args.busy_timeout, o.busy_timeout},
                   {args.lease, o.lease},
                   {args.retry_backoff, o.retry_backoff.initial},
                   {args.rollback_timeout, o.rollback_timeout}};
  for (auto& d : durations) {
    if (d.text.empty()) continue;
    auto v = ParseDuration(d.text);
    if (!v.ok()) return false;
    d.field = *v;
  }
  o.max_attempts = args.max_attempts;
  o.parallel_commit = args.commit == "parallel";
  return true;
}

int RunApply(Context& ctx, const ApplyArgs& args) {
  // Until CatchSignals below, a signal ends the process at once: nothing is written while the
  // input is read (which may wait on a terminal or a pipe) and checked.
  std::string text;
  std::string why = "read error";
  if (!ReadInput(args.file, &text, &why)) {
    return Fail(kExitUsage, "cannot read " + (args.file == "-" ? std::string("stdin") : args.file) +
                                ": " + why);
  }
  Options options = EngineOptions(ctx);
  // A one-shot command reports its outcome once the transaction is settled in the store (and
  // a signal stops it between transactions, never between a report and the finish): finishing
  // in the background would only move the wait to the exit.
  options.finish_in_background = false;
  if (!Tune(args, options)) return Fail(kExitUsage, "bad duration flag");
  auto txn = ParseTransaction(text, options);
  if (!txn.ok()) return Fail(kExitUsage, "bad transaction: " + txn.status().message());

  CatchSignals();  // before OpenStore and the Database start any thread
  int code = kExitOk;
  auto store = OpenStore(ctx, &code);
  if (!store) return code;
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(kExitOk),
                std::string("interrupted (") + InterruptedName() + ") before the transaction "
                "started: nothing written");
  }
  Database db(store, options);
  auto r = db.Commit(*txn);
  if (r.code() == Code::kInvalidArgument) {  // e.g. a document over the size limit
    return Fail(ExitAfterSignal(kExitUsage), "bad transaction: " + r.status().message());
  }
  json::object out;
  out["outcome"] = OutcomeName(r.status());
  if (r.ok()) {
    out["txn_id"] = r->txn_id;
    json::array versions;
    for (std::uint64_t v : r->versions) versions.emplace_back(v);
    out["versions"] = std::move(versions);
  } else {
    const Status& s = r.status();
    if (!s.txn_id().empty()) out["txn_id"] = s.txn_id();
    if (s.current_version()) out["current_version"] = *s.current_version();
    out["message"] = s.message();
    if (s.code() == Code::kBusy) {
      // The holder is named in the message; say how to free its documents.
      out["message"] = s.message() +
                       "; retry later. If its coordinator is gone, a collector settles it once "
                       "its lease ends (litetx gc --once), or at once with litetx gc --once "
                       "--older-than D (D longer than any live transaction)";
    }
  }
  if (Interrupted() != 0) {
    out["interrupted"] = InterruptedName();
    PrintJson(out);
    return Fail(ExitAfterSignal(kExitOk), std::string("interrupted (") + InterruptedName() +
                                              "): the transaction ran to its end: " +
                                              OutcomeName(r.status()));
  }
  PrintJson(out);
  return OutcomeExit(r.status());
}

}  // namespace

void AddApply(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ApplyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "apply", "Run one transaction given as JSON ({\"actions\":[...]}, see docs/cli.md)");
  cmd->add_option("file", args->file, "File holding the transaction, or - for stdin")->required();
  cmd->add_option("--busy-timeout", args->busy_timeout,
                  "Wait this long for a document held by another transaction (default 2s)")
      ->check(DurationCheck());
  cmd->add_option("--lease", args->lease,
                  "Lease of the transaction: a collector may roll it back after this "
                  "(default 5s; renewed in the background while the transaction runs)")
      ->check(DurationCheck());
  cmd->add_option("--retry-backoff", args->retry_backoff,
                  "First wait before retrying a failed store call (default 100ms, doubling)")
      ->check(DurationCheck());
  cmd->add_option("--rollback-timeout", args->rollback_timeout,
                  "Give up an active rollback after this and leave it to the collector "
                  "(default: never give up)")
      ->check(DurationCheck());
  cmd->add_option("--max-attempts", args->max_attempts,
                  "Attempts at one store call before giving up")
      ->check(WholeNumberCheck(1, 1000));
  cmd->add_option("--commit", args->commit,
                  "parallel: write the transaction record together with the documents and "
                  "report once both landed (default); classic: the record first, the commit "
                  "flag after the documents")
      ->check(CLI::IsMember({"parallel", "classic"}));
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return RunApply(ctx, *args); }; });
}

}  // namespace litetx::cli
