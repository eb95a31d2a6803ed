// litetx/importer.h — bulk import of JSON documents into one collection, all or nothing.
//
// Import reads rows from a stream and writes each as a document of one collection, all in one
// LargeTransaction (litetx/large_transaction.h): readers see none of the rows until the commit
// point and all of them right after it, and a crash at any point leaves either every row
// imported or none (the collector finishes or reverses what a dead importer left).
//
//   litetx::ImportOptions o;
//   o.collection = "orders";
//   o.id_field = "order_id";                  // or empty: ids are generated
//   std::ifstream in("orders.ndjson");
//   auto r = litetx::Import(db, in, o);
//   if (!r.ok()) ...;                           // store failure, kAborted, kUnknown, bad options
//   else if (!r->committed) ...;                // a bad row: r->bad_rows says which and why
//
// Input: NDJSON (one JSON object a line; blank lines are ignored; a line may end in "\r\n") or
// one JSON array of objects, told apart by the first non-blank character ('[': an array). A
// UTF-8 byte order mark at the start is skipped. The input is streamed: memory stays flat
// whatever its size (one row at a time here, one chunk of rows in the transaction); it is never
// held whole. Each row is parsed alone, numbers exactly (as the LMDB store and `litetx apply`
// read them). A row's line is the line it starts on (1-based); several elements of an array
// on one line share it.
//
// A bad row is reported with its line and the reason:
//   - malformed JSON, not a JSON object, invalid UTF-8, a key twice in one object, nested
//     deeper than Options::max_nesting_depth, an empty array element ("[1,,2]");
//   - longer than ImportOptions::max_row_bytes (its text is not kept in memory);
//   - with id_field: the field missing, not a string or an integer, empty, or not a valid id
//     (ValidateId: at most kMaxIdBytes bytes, no control characters);
//   - refused by the engine as an action (e.g. a reserved "_ltx" field, a document over
//     Options::max_document_bytes with its metadata);
//   - an id given twice in the input (the engine finds the document named twice);
//   - kInsert: an id that already holds a live document (kConflict from the engine).
// Without skip_bad_rows the first bad row found rolls the whole import back (nothing of it is
// visible, before or after); with it, bad rows are skipped and listed, and the rest commits.
// The input itself is bad — the import is rolled back even with skip_bad_rows, and the reason
// is reported with its line — when its framing is broken: text after the array's closing ']',
// the end of the input inside the array, a ',' right before the closing ']', or a read error.
// Empty input (nothing, blank lines only, or "[]") is an error: kInvalidArgument, and nothing
// is written (the transaction begins with the first row).
//
// Ownership: Import borrows the Database and the stream for the duration of the call.
// Thread safety: one Import call uses its stream and options from the calling thread only
// (callbacks run on it); several imports may run at once on one Database, each with its own
// stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include "litetx/status.h"

namespace litetx {

class Database;

enum class ImportMode : std::uint8_t {
  // Every row is a new document (LargeTransaction::Insert): an id that already holds a live
  // document is a bad row (kConflict). An id whose document was deleted (a tombstone) is
  // inserted again.
  kInsert,
  // Insert, or replace every field of the live document with that id
  // (LargeTransaction::Put): fields not in the row are removed, the version goes up by one.
  kUpsert,
};

// What the progress callback is told.
struct ImportProgress {
  std::uint64_t rows_read = 0;   // rows read so far (bad ones included; blank lines not)
  std::uint64_t bytes_read = 0;  // bytes of input consumed so far
  std::chrono::nanoseconds elapsed{0};  // since Import was called
  double rows_per_s = 0.0;       // rows_read / elapsed
  bool reading_done = false;     // the last call: the input is read, the commit comes next
};

// One bad row: its line in the input (1-based) and why it is bad.
struct ImportBadRow {
  std::uint64_t line = 0;
  std::string reason;
};

struct ImportOptions {
  // The collection the rows go to. Required; validated as any collection name
  // (ValidateCollection): a bad one fails Import with kInvalidArgument, nothing written.
  std::string collection;
  // The top-level field of each row holding its id: a string, or an integer (written in
  // decimal). The field stays in the document. Empty: ids are generated, "<txn id>-<n>" where n
  // is the row's number among the rows read (1-based), unique to this import.
  std::string id_field;
  // kInsert (new documents only) or kUpsert (insert or replace). See ImportMode.
  ImportMode mode = ImportMode::kInsert;
  // false: the first bad row rolls the whole import back. true: bad rows are skipped and
  // listed (ImportSummary::bad_rows), the others commit.
  bool skip_bad_rows = false;
  // Most bad rows listed in ImportSummary::bad_rows; the count (skipped) stays exact beyond it.
  std::size_t max_listed_bad_rows = 1000;
  // Rows per chunk of the transaction (LargeTransactionOptions::chunk_actions): one batch
  // read, one chunk document and one batch apply each. Values below 1 act as 1, above 10000
  // as 10000.
  std::size_t chunk_rows = 500;
  // Longest row accepted, in bytes of input text (the line, or the array element). 0: the
  // Database's Options::max_document_bytes.
  std::size_t max_row_bytes = 0;
  // Called on the importing thread at most once per progress_interval while rows are read, and
  // once more with reading_done when the input has been read. May be empty.
  std::function<void(const ImportProgress&)> on_progress;
  // Least time between two calls of on_progress.
  std::chrono::milliseconds progress_interval{200};
  // Asked before each row and once more before the commit: true stops the import, which is
  // rolled back (ImportSummary::cancelled). Once the commit has begun it runs to its end. May
  // be empty.
  std::function<bool()> cancel;
  // Clear the transaction's references from its documents before Import returns (as
  // LargeTransactionOptions::settle). Off: Import returns at the commit point and the collector
  // (or the Database's later transactions) finishes them; readers see the rows either way.
  bool settle = true;
};

struct ImportSummary {
  // The import's transaction (its ActiveTransaction document's id; Database::Outcome tells its
  // fate later). Empty when no transaction was begun.
  std::string txn_id;
  std::uint64_t rows_read = 0;  // rows read (bad ones included; blank lines not)
  std::uint64_t imported = 0;   // rows written as documents (0 unless committed)
  std::uint64_t skipped = 0;    // bad rows skipped (skip_bad_rows), exact
  // The bad rows, in the order found, at most max_listed_bad_rows: those skipped, or the one
  // that rolled the import back (or the bad input). Not always in line order: rows refused by
  // the engine are found when their chunk is written.
  std::vector<ImportBadRow> bad_rows;
  // True: every row not skipped is in the collection. False: none is (rolled back).
  bool committed = false;
  // OK when committed. Otherwise why the import was rolled back: kInvalidArgument (a bad row,
  // bad input, or a row the engine refused), kConflict (kInsert over a live document), kAborted
  // with `cancelled` set. The message starts with "line N: " where a line is known.
  Status outcome;
  // The import was stopped by ImportOptions::cancel.
  bool cancelled = false;
  // After a rollback: OK, or the store error after which the rest of the rollback was left to
  // the collector (the import is not committed either way; it is only not yet fully undone).
  Status rollback;
  // Committed and every document finished (settle on and no store failure while finishing).
  bool settled = false;
  std::uint64_t bytes_read = 0;  // bytes of input consumed
  std::uint64_t chunks = 0;      // chunk documents written (when committed)
  // Times since Import was called: the commit point landed (acknowledged), every document
  // finished (settled_at), the rollback ended (rolled_back_at: done, or left to the collector as
  // `rollback` says); zero when not reached. And the whole call (total).
  std::chrono::nanoseconds acknowledged{0};
  std::chrono::nanoseconds settled_at{0};
  std::chrono::nanoseconds rolled_back_at{0};
  std::chrono::nanoseconds total{0};
  // How long the rollback itself took (zero when none).
  std::chrono::nanoseconds rollback_time{0};
};

// Imports `in` into options.collection in one large transaction (see above). Returns:
//   a summary, committed          every row not skipped is in the collection;
//   a summary, not committed      rolled back because of a bad row, bad input or cancel (see
//                                 ImportSummary::outcome);
//   kInvalidArgument              bad options, or empty input; nothing written;
//   kBusy                         another transaction held a document past
//                                 Options::busy_timeout; rolled back;
//   kConflict                     a document kept changing under other writers while its
//                                 chunk was written; rolled back;
//   kAborted                      a collector rolled the import back (it ran past its lease);
//   kUnavailable                  the store failed before the commit point; rolled back (or
//                                 nothing written, when beginning the transaction failed);
//   kCorruption                   a stored document could not be decoded; rolled back;
//   kUnknown                      the commit flip's reply was lost and its outcome could not be
//                                 learned: the import is neither reported committed nor rolled
//                                 back; Database::Outcome(status.txn_id()) settles it later
//                                 (also when the reply of the record's creation was lost: then
//                                 no row was written, and the collector settles the record).
// Every error after the transaction began carries its id (Status::txn_id()).
Result<ImportSummary> Import(Database& db, std::istream& in, const ImportOptions& options);

}  // namespace litetx
