// litetx/batch/readers.h — ready-made item readers: a vector in memory and an NDJSON file.
//
// Ownership: each reader owns its input (a copy of the vector, an open file).
// Thread safety: none; a step calls its reader from one thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "litetx/batch/item.h"

namespace litetx::batch {

// Items from a vector. The checkpoint is the index of the next item.
class VectorReader final : public ItemReader {
 public:
  explicit VectorReader(std::vector<Item> items) : items_(std::move(items)) {}
  Result<std::optional<Item>> Read() override;
  boost::json::value Checkpoint() const override;
  Status Restore(const boost::json::value& checkpoint) override;

 private:
  std::vector<Item> items_;
  std::size_t next_ = 0;
};

struct NdjsonReaderOptions {
  // A top-level field whose value (a string, or an integer written in decimal) is the item's
  // key; empty: the key is the line number. A line without it is a read failure.
  std::string key_field;
  // Longest line accepted, in bytes; a longer line is a read failure (kInvalidArgument), and
  // the reader moves past it without holding it in memory.
  std::size_t max_line_bytes = 1 << 20;
};

// Items from a file of JSON values, one per line (NDJSON). Blank lines are passed over and
// are not items. A line that is not valid JSON, is not an object, is longer than
// max_line_bytes or lacks the key field is a read failure (kInvalidArgument naming the line
// number); the reader continues with the next line. The checkpoint is {"offset": byte offset,
// "line": line number} of the next line; Restore seeks there.
class NdjsonReader final : public ItemReader {
 public:
  // Opens `path`. Returns the reader, or kUnavailable if the file cannot be opened.
  static Result<std::unique_ptr<NdjsonReader>> Open(const std::string& path,
                                                    NdjsonReaderOptions options = {});
  Result<std::optional<Item>> Read() override;
  boost::json::value Checkpoint() const override;
  Status Restore(const boost::json::value& checkpoint) override;

 private:
  NdjsonReader(std::string path, NdjsonReaderOptions options);
  std::string path_;
  NdjsonReaderOptions options_;
  std::ifstream in_;
  std::uint64_t offset_ = 0;  // of the next line
  std::uint64_t line_ = 1;    // number of the next line (1-based)
};

}  // namespace litetx::batch
