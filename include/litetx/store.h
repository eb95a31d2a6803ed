// litetx/store.h — the Store seam: the only way litetx does I/O.
//
// A Store offers single-document atomic operations and nothing more, so that it can be built
// on LMDB, Redis (a Lua compare-and-set), Redis Cluster, MongoDB (findOneAndUpdate with a
// filter) or DynamoDB (condition expressions). litetx never assumes that two documents can be
// written atomically together; a backend must not provide it either.
//
// Every stored document has a Revision chosen by the store. A revision changes on every write
// and is never reused for the same key, not even after the key was erased and created again
// (a global counter, a random 64-bit value or a server timestamp all qualify). Conditional
// writes compare it (compare-and-swap). The engine's own version numbers live inside the
// document; the store does not interpret document contents.
//
// Error contract of every operation:
//   kConflict     the condition did not hold (create: the key exists; replace/erase: the key is
//                 absent or has another revision). Nothing was written.
//   kUnavailable  a transient failure; nothing was written.
//   kUnknown      the write may or may not have happened (e.g. a lost reply). Reads never
//                 return it.
//   kCorruption   the stored bytes could not be decoded.
//   kInvalidArgument  the backend refuses the key or value (e.g. too large).
//
// Thread safety: implementations must be safe to call from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/status.h"

namespace litetx {

using Revision = std::uint64_t;

// Address of a document.
struct Key {
  std::string collection;
  std::string id;

  friend bool operator==(const Key&, const Key&) = default;
  friend auto operator<=>(const Key&, const Key&) = default;
};

// A document as the store holds it: the whole JSON object (user fields and engine metadata)
// and its revision.
struct StoredDocument {
  boost::json::object value;
  Revision revision = 0;
};

// One page of a collection scan, in ascending id order.
struct ScanPage {
  std::vector<std::pair<std::string, StoredDocument>> documents;  // (id, document)
  // Pass back to Scan to continue; empty when the scan is complete.
  std::string next_cursor;
};

// One page of a collection listing, in ascending byte order of the names.
struct CollectionPage {
  std::vector<std::string> names;
  // Pass back to ListCollections to continue; empty when the listing is complete.
  std::string next_cursor;
};

// One operation of a Store::Batch call: the arguments of one Get, Create, Replace or Erase.
struct BatchOp {
  enum class Type : std::uint8_t { kGet, kCreate, kReplace, kErase };

  Type type = Type::kGet;
  Key key;
  // kReplace, kErase: the revision the compare-and-swap expects. Ignored otherwise.
  Revision expected = 0;
  // kCreate, kReplace: the value to write. Not owned: it must outlive the Batch call.
  // REQUIRES: non-null for kCreate and kReplace.
  const boost::json::object* value = nullptr;

  static BatchOp Get(Key key) { return {Type::kGet, std::move(key), 0, nullptr}; }
  static BatchOp Create(Key key, const boost::json::object& value) {
    return {Type::kCreate, std::move(key), 0, &value};
  }
  static BatchOp Replace(Key key, Revision expected, const boost::json::object& value) {
    return {Type::kReplace, std::move(key), expected, &value};
  }
  static BatchOp Erase(Key key, Revision expected) {
    return {Type::kErase, std::move(key), expected, nullptr};
  }
  bool is_write() const { return type != Type::kGet; }
};

// The outcome of one operation of a batch: exactly what the single call would have returned.
struct BatchResult {
  // The operation's status, with the single call's error contract (see Store below).
  Status status;
  // kGet with an OK status: the document, or std::nullopt if the key is absent.
  std::optional<StoredDocument> document;
  // kCreate and kReplace with an OK status: the new revision.
  Revision revision = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // Reads one document. Returns the document, std::nullopt if the key is absent, or
  // kUnavailable / kCorruption.
  virtual Result<std::optional<StoredDocument>> Get(const Key& key) = 0;

  // Creates the document if the key is absent. Returns its new revision, or kConflict if the
  // key exists, or kUnavailable / kUnknown / kInvalidArgument.
  virtual Result<Revision> Create(const Key& key, const boost::json::object& value) = 0;

  // Replaces the document if its current revision is `expected`. Returns the new revision, or
  // kConflict (absent or other revision), kUnavailable, kUnknown, kInvalidArgument.
  virtual Result<Revision> Replace(const Key& key, Revision expected,
                                   const boost::json::object& value) = 0;

  // Erases the document if its current revision is `expected`. Returns OK, or kConflict
  // (absent or other revision), kUnavailable, kUnknown.
  virtual Status Erase(const Key& key, Revision expected) = 0;

  // Lists the documents of `collection` in ascending id order, at most `limit` of them
  // (REQUIRES: limit > 0), starting after `cursor` (empty: from the start). The scan is not a
  // snapshot: documents written meanwhile may or may not appear; each one returned was read
  // atomically. Returns kUnavailable / kCorruption on failure.
  virtual Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                                std::size_t limit) = 0;

  // Lists the names of the collections that hold at least one document, in ascending byte
  // order, at most `limit` of them, starting after `cursor` (empty: from the start; any string
  // may be given, not only a listed name). A collection whose documents were all erased is not
  // listed: collections exist only through their documents. The empty name (which the engine
  // never uses) is not listed. The engine's own collections ("__litetx" prefix) are listed like
  // any other. Not a snapshot: collections created or emptied meanwhile may or may not appear.
  // Returns the page, or kInvalidArgument (limit is 0), kUnavailable / kCorruption on failure,
  // as Scan. An administrative call: the engine itself never makes it. Cost of one call on the
  // shipped stores:
  //   MemoryStore        one ordered seek per collection per shard (16 shards), each shard
  //                      locked in turn; documents are not visited.
  //   LmdbStore          one read transaction, one seek per listed collection (it skips from
  //                      one collection to the next without reading their documents).
  //   RedisStore         SCAN over the whole keyspace of the database (O(keys), in steps of
  //                      COUNT 1000, never blocking the server for long), whatever `limit` is.
  //   RedisClusterStore  the same SCAN on every master.
  virtual Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) = 0;

  // Runs several independent single-document operations together and returns one result per
  // operation, in the order given (an empty batch returns an empty vector). Each operation
  // behaves exactly as its single call (Get, Create, Replace, Erase) would, with the same
  // error contract, and is atomic on its own document; nothing is atomic across them: any
  // subset of the writes may land, in any order, whatever the others' outcomes, and a failure
  // of the connection can leave writes kUnknown and reads kUnavailable. Two operations on the
  // same key run in an unspecified order (the engine never sends such a batch).
  //
  // What a batch buys is round trips: the default implementation (stores/store.cpp) runs the
  // operations one after another through the single calls, so every store supports Batch;
  // the shipped stores override it: LmdbStore runs a batch in one LMDB transaction (writes
  // from concurrent callers are group-committed, one fsync for many), RedisStore pipelines it
  // (one round trip), RedisClusterStore pipelines to each node, all nodes in parallel.
  virtual std::vector<BatchResult> Batch(std::span<const BatchOp> ops);
};

}  // namespace litetx
