// import/importer.cpp — see litetx/importer.h.
#include "litetx/importer.h"

#include <charconv>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/json/object.hpp>

#include "engine/validate.h"
#include "import/rows.h"
#include "litetx/database.h"
#include "litetx/document.h"
#include "litetx/large_transaction.h"

namespace litetx {
namespace {
namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;

std::string LinePrefix(std::uint64_t line) { return "line " + std::to_string(line) + ": "; }

// The failures of one row on its document that the engine reports (the row is bad; the
// import is not broken): an insert over a live document, a document named twice, a refused
// action. Everything else (kBusy, kAborted, kUnavailable, kCorruption, kUnknown) is a failure
// of the import itself.
bool IsRowFailure(Code c) {
  return c == Code::kInvalidArgument || c == Code::kConflict || c == Code::kNotFound ||
         c == Code::kDeleted || c == Code::kFailedPrecondition;
}

// The engine names a failed action by its tag: "action 17 (insert orders/o1): why". Returns
// the tag (the row's line) and the reason without the tag ("insert orders/o1: why"), or
// nothing when the message names no action (a failure of the transaction, not of a row).
struct EngineRowError {
  std::uint64_t line = 0;
  std::string reason;
};
std::optional<EngineRowError> RowErrorIn(const std::string& message) {
  static constexpr std::string_view kWord = "action ";
  if (message.rfind(kWord, 0) != 0) return std::nullopt;
  const char* begin = message.data() + kWord.size();
  const char* end = message.data() + message.size();
  EngineRowError e;
  auto [p, ec] = std::from_chars(begin, end, e.line);
  if (ec != std::errc() || p == begin) return std::nullopt;
  std::string_view rest(p, static_cast<std::size_t>(end - p));
  if (rest.rfind(" (", 0) == 0) {
    const std::size_t close = rest.find("): ");
    if (close != std::string_view::npos) {
      // "insert orders/o1": kept unless the reason names the document itself.
      const std::string_view what = rest.substr(2, close - 2);
      const std::string_view why = rest.substr(close + 3);
      const std::size_t space = what.find(' ');
      const std::string_view where = space == std::string_view::npos ? what : what.substr(space + 1);
      e.reason = why.find(where) != std::string_view::npos
                     ? std::string(why)
                     : std::string(what) + ": " + std::string(why);
      return e;
    }
  }
  if (rest.rfind(": ", 0) == 0) rest.remove_prefix(2);
  e.reason = std::string(rest);
  return e;
}

class Importer {
 public:
  Importer(Database& db, std::istream& in, const ImportOptions& options)
      : db_(db), in_(in), options_(options) {}

  Result<ImportSummary> Run();

 private:
  // Checks one row: OK with *id and *doc set, or kInvalidArgument with the reason.
  Status CheckRow(const importing::Row& row, std::string* id, json::object* doc);
  // A bad row found (by the importer or the engine): listed; with skip_bad_rows counted as
  // skipped (returns false), otherwise the import is rolled back (returns true; finish with
  // RolledBack()).
  bool BadRow(std::uint64_t line, const std::string& reason, Code code);
  void List(std::uint64_t line, std::string reason);
  // Rolls back what was written and returns the summary of a rolled-back import.
  Result<ImportSummary> RolledBack();
  // A failure of the import itself, returned as it is with the transaction's id.
  Status Failed(Status s) const;
  void Progress(bool reading_done);
  std::chrono::nanoseconds Since() const { return SteadyClock::now() - start_; }

  Database& db_;
  std::istream& in_;
  const ImportOptions& options_;
  SteadyClock::time_point start_;
  SteadyClock::time_point last_progress_;
  std::unique_ptr<LargeTransaction> txn_;
  std::unique_ptr<importing::RowReader> reader_;
  std::size_t max_depth_ = 0;
  std::size_t max_row_bytes_ = 0;
  ImportSummary summary_;
};

Status Importer::Failed(Status s) const {
  if (txn_ && s.txn_id().empty()) return std::move(s).WithTxnId(txn_->id());
  return s;
}

void Importer::List(std::uint64_t line, std::string reason) {
  if (summary_.bad_rows.size() < options_.max_listed_bad_rows) {
    summary_.bad_rows.push_back({line, std::move(reason)});
  }
}

bool Importer::BadRow(std::uint64_t line, const std::string& reason, Code code) {
  List(line, reason);
  if (options_.skip_bad_rows) {
    ++summary_.skipped;
    return false;
  }
  summary_.outcome = Status(code, LinePrefix(line) + reason);
  return true;
}

Result<ImportSummary> Importer::RolledBack() {
  summary_.committed = false;
  summary_.imported = 0;
  summary_.chunks = 0;
  if (txn_) {
    const auto began = SteadyClock::now();
    summary_.rollback = txn_->Rollback();
    summary_.rollback_time = SteadyClock::now() - began;
    summary_.rolled_back_at = Since();
  }
  summary_.bytes_read = reader_->bytes_read();
  summary_.total = Since();
  return std::move(summary_);
}

void Importer::Progress(bool reading_done) {
  if (!options_.on_progress) return;
  const auto now = SteadyClock::now();
  if (!reading_done && now - last_progress_ < options_.progress_interval) return;
  last_progress_ = now;
  ImportProgress p;
  p.rows_read = summary_.rows_read;
  p.bytes_read = reader_->bytes_read();
  p.elapsed = now - start_;
  p.reading_done = reading_done;
  const double s = std::chrono::duration<double>(p.elapsed).count();
  p.rows_per_s = s > 0 ? static_cast<double>(p.rows_read) / s : 0.0;
  options_.on_progress(p);
}

Status Importer::CheckRow(const importing::Row& row, std::string* id, json::object* doc) {
  if (row.oversize && row.cut) {
    return Status::InvalidArgument("the row is longer than the limit of " +
                                   std::to_string(max_row_bytes_) + " bytes (" +
                                   std::to_string(row.bytes) + " read)");
  }
  if (row.oversize) {
    return Status::InvalidArgument("the row is " + std::to_string(row.bytes) +
                                   " bytes, more than the limit of " +
                                   std::to_string(max_row_bytes_));
  }
  auto parsed = importing::ParseRow(row.text, max_depth_);
  if (!parsed.ok()) return parsed.status();
  *doc = std::move(parsed).value();
  if (options_.id_field.empty()) {
    *id = txn_->id() + "-" + std::to_string(summary_.rows_read);
    return Status::Ok();
  }
  const std::string& f = options_.id_field;
  const json::value* v = doc->if_contains(f);
  if (v == nullptr) return Status::InvalidArgument("no \"" + f + "\" field (the id)");
  if (v->is_string()) {
    *id = std::string(v->get_string());
    if (id->empty()) return Status::InvalidArgument("the id \"" + f + "\" is empty");
  } else if (v->is_int64()) {
    *id = std::to_string(v->get_int64());
  } else if (v->is_uint64()) {
    *id = std::to_string(v->get_uint64());
  } else {
    return Status::InvalidArgument("the id \"" + f + "\" must be a string or an integer");
  }
  if (Status s = ValidateId(*id); !s.ok()) {
    return Status::InvalidArgument("bad id in \"" + f + "\": " + s.message());
  }
  return Status::Ok();
}

Result<ImportSummary> Importer::Run() {
  start_ = SteadyClock::now();
  last_progress_ = start_;
  if (Status s = ValidateCollection(options_.collection); !s.ok()) {
    return Status::InvalidArgument("ImportOptions::collection: " + s.message());
  }
  if (!options_.id_field.empty() && IsReservedField(options_.id_field)) {
    return Status::InvalidArgument("ImportOptions::id_field: \"" + options_.id_field +
                                   "\" is reserved (names starting with _ltx belong to litetx)");
  }
  max_depth_ = engine::MaxNestingDepth(db_.options());
  max_row_bytes_ = options_.max_row_bytes != 0 ? options_.max_row_bytes
                                               : db_.options().max_document_bytes;
  reader_ = std::make_unique<importing::RowReader>(in_, max_row_bytes_);
  // Without skipping, an oversize row ends the import: it is not read to its end (an endless
  // line would otherwise be read forever).
  reader_->set_stop_at_oversize(!options_.skip_bad_rows);
  if (options_.cancel) reader_->set_cancel(options_.cancel);

  // The engine reports a row's failure on its document by the row's line (its tag): skipped
  // (skip_bad_rows) through on_skip, or as the error that ends the transaction.
  LargeTransactionOptions lo;
  lo.chunk_actions = options_.chunk_rows;
  lo.skip_failed_actions = options_.skip_bad_rows;
  lo.on_skip = [this](std::uint64_t tag, const Status& why) {
    auto e = RowErrorIn(why.message());
    List(tag, e ? e->reason : why.message());
    ++summary_.skipped;
  };
  lo.on_commit_point = [this] { summary_.acknowledged = Since(); };
  lo.settle = options_.settle;

  importing::Row row;
  std::string id;
  json::object doc;
  for (;;) {
    if (options_.cancel && options_.cancel()) {
      summary_.cancelled = true;
      summary_.outcome = Status::Aborted("the import was cancelled after " +
                                         std::to_string(summary_.rows_read) + " rows");
      return RolledBack();
    }
    if (!reader_->Next(&row)) break;
    if (!txn_) {
      auto begun = db_.BeginLarge(lo);
      if (!begun.ok()) return begun.status();
      txn_ = std::move(begun).value();
      summary_.txn_id = txn_->id();
    }
    ++summary_.rows_read;
    Progress(false);
    if (Status s = CheckRow(row, &id, &doc); !s.ok()) {
      if (BadRow(row.line, s.message(), Code::kInvalidArgument)) return RolledBack();
      continue;
    }
    Status s = options_.mode == ImportMode::kInsert
                   ? txn_->Insert(options_.collection, std::move(id), std::move(doc), row.line)
                   : txn_->Put(options_.collection, std::move(id), std::move(doc), row.line);
    if (s.ok()) continue;
    // A row the engine refused as an action (this row; the transaction goes on), or, without
    // skip_bad_rows, a row of the chunk just written that failed on its document (the
    // transaction has been rolled back). Either names the row by its tag.
    auto e = IsRowFailure(s.code()) ? RowErrorIn(s.message()) : std::nullopt;
    if (!e) return Failed(std::move(s));
    if (BadRow(e->line, e->reason, s.code())) return RolledBack();
  }
  if (reader_->error().code() == Code::kAborted) {  // cancelled while reading
    summary_.cancelled = true;
    summary_.outcome = Status::Aborted("the import was cancelled after " +
                                       std::to_string(summary_.rows_read) + " rows");
    return RolledBack();
  }
  if (!reader_->error().ok()) {
    const Status& e = reader_->error();
    List(reader_->error_line(), e.message());
    summary_.outcome = Status::InvalidArgument(LinePrefix(reader_->error_line()) + e.message());
    return RolledBack();
  }
  if (!txn_) {
    return Status::InvalidArgument("the input holds no rows (empty, blank lines only, or []); "
                                   "nothing was written");
  }
  Progress(true);
  if (options_.cancel && options_.cancel()) {
    summary_.cancelled = true;
    summary_.outcome = Status::Aborted("the import was cancelled after reading all " +
                                       std::to_string(summary_.rows_read) + " rows, before "
                                       "the commit");
    return RolledBack();
  }
  auto info = txn_->Commit();
  summary_.bytes_read = reader_->bytes_read();
  if (!info.ok()) {
    Status s = info.status();
    // Without skip_bad_rows, a row of the last chunk may have failed on its document.
    auto e = IsRowFailure(s.code()) ? RowErrorIn(s.message()) : std::nullopt;
    if (!e) return Failed(std::move(s));
    List(e->line, e->reason);
    summary_.outcome = Status(s.code(), LinePrefix(e->line) + e->reason);
    return RolledBack();
  }
  summary_.committed = true;
  summary_.outcome = Status::Ok();
  summary_.imported = info->written;
  summary_.chunks = info->chunks;
  summary_.settled = info->settled;
  if (info->settled) summary_.settled_at = Since();
  summary_.total = Since();
  return std::move(summary_);
}

}  // namespace

Result<ImportSummary> Import(Database& db, std::istream& in, const ImportOptions& options) {
  return Importer(db, in, options).Run();
}

}  // namespace litetx
