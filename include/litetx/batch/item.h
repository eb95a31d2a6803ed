// litetx/batch/item.h — the items a batch step reads, and the reader interface.
//
// An Item is one unit of input: a JSON value with a key. A step reads items one at a time
// from an ItemReader, groups them into chunks and writes each chunk in one litetx
// transaction. Items are JSON because that is what litetx stores; a C++ type converts with
// boost::json::value_from / value_to in the processor.
//
// Thread safety: a step calls its reader from one thread at a time (the step's own thread),
// also when chunks or items are processed concurrently; a reader need not be thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/json/value.hpp>

#include "litetx/status.h"

namespace litetx::batch {

struct Item {
  // The item's place in the input: 0 for the first item the reader ever returned, counting
  // read failures too. Set by the step (a reader's own value is overwritten), so that it is
  // the same on every run of a deterministic reader.
  std::uint64_t position = 0;
  // The item's identity: the key its failures are counted under for stateful retry, and the
  // key shown in skip records. Empty: the step uses the decimal position.
  std::string key;
  // The item itself.
  boost::json::value value;
};

// A source of items that can resume where a committed chunk ended.
//
// Restart contract: Checkpoint() after the n-th Read() must describe a state from which
// Restore() continues with the (n+1)-th item, in a later process too. The step stores the
// checkpoint in the same transaction as each chunk's output, so after a crash the job resumes
// right after the last committed chunk. The input must be the same on every run (the same
// items in the same order): chunks are formed again from it and must come out the same.
class ItemReader {
 public:
  virtual ~ItemReader() = default;
  // The next item, or std::nullopt once the input is exhausted (and on every call after).
  // A non-OK status is a read failure of the item at this position: the step skips it if the
  // skip policy allows (the reader must then be positioned after it), else the step fails.
  virtual Result<std::optional<Item>> Read() = 0;
  // Where the reader stands: any JSON value (e.g. a byte offset). Called after each chunk's
  // last read.
  virtual boost::json::value Checkpoint() const = 0;
  // Moves the reader to a checkpoint an earlier Checkpoint() returned (also from another
  // process). Returns OK, or an error that stops the step (e.g. kInvalidArgument for a
  // checkpoint that does not fit, kUnavailable for an input that cannot be opened).
  virtual Status Restore(const boost::json::value& checkpoint) = 0;
};

}  // namespace litetx::batch
