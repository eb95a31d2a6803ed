// engine/meta.h — the engine metadata stored in every document's "_ltx" field.
//
// Stored form: {"_ltx": {"v": version, "sv": schema version, "tx": holding txn id,
//               "dlg": deleting flag, "del": deleted flag, "gone": placeholder flag,
//               "lw": last writing txn id, "at": ms when deleted/gone,
//               "lk": [{"o": owner txn id, "m": "r"|"w", "x": expiry ms, "p": priority ms}],
//               "u": the hold's undo data, only while "tx" is set (engine/worklist.h UndoOf)},
//  ...user fields}
// "lk" holds pessimistic locks (litetx/run.h). A lock whose expiry has passed is ignored and
// dropped by the next write. Transaction writes (apply, finish, reverse) never carry a lock
// over: a document is only written by a transaction when no live foreign lock is on it.
// Absent flags are false; an absent "tx" means no transaction holds the document.
// A "gone" document is a placeholder left by a rolled-back insert, or a fence a collector puts
// on an absent key so that a late insert of a reversed coordinator fails its CAS: it reads as
// not found but keeps the version counter going so versions never decrease.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/status.h"

namespace litetx::engine {

// One pessimistic lock held in a document's metadata.
struct LockEntry {
  std::string owner;             // the id of the transaction (attempt) holding it
  bool write = false;            // exclusive (write) or shared (read)
  std::int64_t expires_ms = 0;   // ignored from then on
  std::int64_t priority_ms = 0;  // the owner's age, for wait-die
};

struct Meta {
  std::uint64_t version = 0;
  std::uint32_t schema_version = 0;
  std::string txn;          // holding transaction; empty if none
  bool deleting = false;    // a delete is pending under `txn`
  bool deleted = false;     // tombstone
  bool gone = false;        // placeholder of a rolled-back insert
  std::string last_writer;  // id of the transaction that wrote this revision
  std::int64_t at_ms = 0;   // deleted / gone: when it became so (ms since epoch; 0 unknown)

  std::vector<LockEntry> locks;  // pessimistic locks, possibly expired

  bool live() const { return !deleted && !gone; }
};

// Decodes the metadata of a stored document; kCorruption if "_ltx" is missing or malformed.
Result<Meta> DecodeMeta(const boost::json::object& stored);

// If `stored` is a tombstone or a placeholder ("del" or "gone"), records `now_ms` as the time
// it became one ("at"); the collector purges it once the tombstone retention has passed.
void StampTombstoneTime(boost::json::object& stored, std::int64_t now_ms);

// Writes `meta` into `stored["_ltx"]`, replacing what was there (appended if absent). The
// object already there, or else `reuse`, is written over: when its names are the ones `meta`
// needs, in the same order, only the values change and nothing is allocated.
void EncodeMeta(boost::json::object& stored, const Meta& meta, boost::json::object reuse = {});

// If "_ltx" is the last field of `stored` (as the engine writes it: erasing the last field keeps
// the others' order), erases it and returns its object (empty if it was not an object).
// Otherwise returns an empty object and leaves `stored` as it was.
boost::json::object TakeMeta(boost::json::object& stored);

// The user fields of a stored document (everything but "_ltx"), in their order. The rvalue
// form takes `stored` over instead of copying it.
boost::json::object UserFields(const boost::json::object& stored);
boost::json::object UserFields(boost::json::object&& stored);

// A stored document made of `body` (its "_ltx", if any, is replaced) and `meta`. `reuse`: an
// earlier "_ltx" object whose memory EncodeMeta may write over (see EncodeMeta).
boost::json::object MakeStored(boost::json::object body, const Meta& meta,
                               boost::json::object reuse = {});

}  // namespace litetx::engine
