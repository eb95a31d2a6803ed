// litetx/document.h — documents as readers see them, and the rules for names and fields.
//
// Documents are Boost.JSON objects addressed by (collection, id). The engine keeps its
// metadata in the reserved top-level field "_ltx"; any top-level field whose name starts with
// "_ltx" is reserved and rejected in user input. Collections whose name starts with "__litetx"
// are the engine's own (ActiveTransaction documents live in kTransactionsCollection).
//
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "litetx/status.h"

namespace litetx {

inline constexpr std::string_view kMetaField = "_ltx";
inline constexpr std::string_view kReservedFieldPrefix = "_ltx";
inline constexpr std::string_view kReservedCollectionPrefix = "__litetx";
inline constexpr std::string_view kTransactionsCollection = "__litetx.txn";
// Outcome pages: the outcomes of many finished transactions per document, folded there from
// their outcome markers by the collector (docs/protocol.md, "Outcome pages").
inline constexpr std::string_view kOutcomesCollection = "__litetx.out";
// The tombstone index: which documents became tombstones or placeholders, and when, so that the
// collector purges them once their retention has passed without sweeping every collection
// (docs/protocol.md, "The tombstone index").
inline constexpr std::string_view kTombstoneIndexCollection = "__litetx.tomb";
inline constexpr std::size_t kMaxCollectionBytes = 128;
// Together they fit LMDB's key limit of 511 bytes (collection + '\0' + id), so a name that
// passes validation is storable on every shipped backend.
inline constexpr std::size_t kMaxIdBytes = 382;
// The highest nesting limit Options::max_nesting_depth can set (levels of objects and arrays,
// the document itself being level 1). Boost.JSON copies, compares and encodes values
// recursively, with stack and (encoding) memory growing with the depth; this cap keeps both
// small on any thread.
inline constexpr std::size_t kMaxNestingDepth = 256;
// The deepest JSON the shipped stores write or read: kMaxNestingDepth plus the levels the
// engine adds around a document (a transaction record holds it at actions[i].fields). Deeper
// values are refused by Create and Replace (kInvalidArgument), and deeper stored LMDB text is
// reported as kCorruption when read.
inline constexpr std::size_t kMaxStoredNestingDepth = kMaxNestingDepth + 8;

enum class DocumentState : std::uint8_t {
  kFound,     // a live document
  kNotFound,  // never existed, or its only insert was rolled back
  kDeleted,   // a tombstone left by a committed delete
};

// "found", "not_found", "deleted".
const char* DocumentStateName(DocumentState state);

struct ReadResult {
  DocumentState state = DocumentState::kNotFound;
  // kFound / kDeleted: the document's version number (+1 on every change, rollbacks
  // included). An insert over a tombstone or placeholder continues from its version; an
  // insert of an id with no stored version (new, or its tombstone purged) starts at the
  // inserting Database's clock in microseconds. So an id's versions never decrease and never
  // repeat (docs/protocol.md §1.1).
  std::uint64_t version = 0;
  // kFound: the document's schema version.
  std::uint32_t schema_version = 0;
  // kFound: the user fields (no engine metadata).
  boost::json::object doc;
  // Isolation::kReadUncommitted only: the id of the transaction holding the document (empty
  // if none) and whether that transaction is deleting it.
  std::string txn;
  bool deleting = false;
  // kFound / kDeleted: the id of the transaction that wrote this version (empty if unknown, or
  // after a rollback). A caller told kUnknown by a one-action commit compares it with
  // CommitInfo-less knowledge of its transaction id (Status::txn_id()).
  std::string last_writer;
};

// OK, or kInvalidArgument naming the problem: empty, longer than kMaxCollectionBytes, not
// UTF-8, control characters, or the reserved "__litetx" prefix.
Status ValidateCollection(std::string_view collection);
// OK, or kInvalidArgument: empty, longer than kMaxIdBytes, not UTF-8, control characters.
Status ValidateId(std::string_view id);
// True if `field` is reserved for the engine (starts with "_ltx").
bool IsReservedField(std::string_view field);

}  // namespace litetx
