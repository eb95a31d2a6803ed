// litetx/transaction.h — a multi-document transaction, as a list of actions.
//
// Build a Transaction, then hand it to Database::Commit. Building never fails and touches no
// store; all validation (names, reserved fields, sizes, duplicates) happens in Commit before
// anything is written. A document may appear in at most one action of a transaction: Commit
// rejects a second action on the same (collection, id) with kInvalidArgument, so that the
// worklist's reversing data is unambiguous — combine the changes into one action instead.
//
// Thread safety: a value type; not synchronised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/store.h"

namespace litetx {

enum class ActionType : std::uint8_t {
  kInsert,  // create a document (also over a tombstone); fails if a live one exists
  kUpdate,  // set and unset top-level fields of a live document
  kAdjust,  // add numeric deltas to existing numeric fields of a live document
  kDelete,  // delete a live document, leaving a tombstone
  kCheck,   // assert a live document's version without writing it
};

// "insert", "update", "adjust", "delete", "check".
const char* ActionTypeName(ActionType type);

struct Action {
  ActionType type = ActionType::kCheck;
  Key key;
  // kInsert: the whole document. kUpdate: fields to set. kAdjust: field -> numeric delta.
  boost::json::object fields;
  // kUpdate: top-level fields to remove.
  std::vector<std::string> unset;
  // The version the document must have (optimistic locking). Required for kCheck.
  std::optional<std::uint64_t> expected_version;
  // kInsert: the document's schema version (default Options::default_schema_version).
  // kUpdate: a new schema version, or keep the current one.
  std::optional<std::uint32_t> schema_version;
};

class Transaction {
 public:
  Transaction& Insert(std::string collection, std::string id, boost::json::object doc,
                      std::optional<std::uint32_t> schema_version = std::nullopt);
  Transaction& Update(std::string collection, std::string id, boost::json::object set,
                      std::vector<std::string> unset = {},
                      std::optional<std::uint64_t> expected_version = std::nullopt,
                      std::optional<std::uint32_t> schema_version = std::nullopt);
  Transaction& Adjust(std::string collection, std::string id, boost::json::object by,
                      std::optional<std::uint64_t> expected_version = std::nullopt);
  Transaction& Delete(std::string collection, std::string id,
                      std::optional<std::uint64_t> expected_version = std::nullopt);
  Transaction& Check(std::string collection, std::string id, std::uint64_t expected_version);
  // Appends a prepared action (e.g. parsed from JSON).
  Transaction& Add(Action action);

  const std::vector<Action>& actions() const { return actions_; }
  bool empty() const { return actions_.empty(); }
  std::size_t size() const { return actions_.size(); }

 private:
  std::vector<Action> actions_;
};

}  // namespace litetx
