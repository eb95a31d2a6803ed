// import/rows.h — the rows of an import's input, read as a stream, and the parsing of one row.
//
// The input is NDJSON (one JSON object a line; blank lines are ignored) or one JSON array of
// objects, told apart by its first non-blank byte ('[': an array). RowReader never holds more
// than one row: it reads the stream in blocks, finds where each row ends (a newline, or for the
// array form the ',' or ']' that closes an element, tracking strings, escapes and nesting
// itself), and keeps the text of a row only up to max_row_bytes (a longer row is reported as
// oversize with its length, its text dropped). ParseRow then parses one row alone.
//
// What is a bad row (reported with its line, the rest of the input still readable) and what is
// bad input (the framing itself is broken, nothing after it can be trusted):
//   bad row    malformed JSON, not an object, invalid UTF-8, a key twice in one object,
//              nesting too deep, over max_row_bytes, an empty array element ("[1,,2]");
//   bad input  text after the array's closing ']', the end of the input inside the array, a
//              comma right before the closing ']', a read error of the stream.
//
// Internal to litetx_import (the `litetx import --bench` baseline reads rows with it too).
// Thread safety: a RowReader is used by one thread at a time; ParseRow is a pure function.
#pragma once

#include <functional>

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "litetx/status.h"

namespace litetx::importing {

enum class Format : std::uint8_t {
  kUnknown,  // nothing but blanks read so far
  kNdjson,   // one object a line
  kArray,    // one JSON array of objects
};

struct Row {
  std::uint64_t line = 0;    // 1-based line the row starts on
  std::string text;          // the row's text; empty when oversize
  std::uint64_t bytes = 0;   // the row's length in bytes (the whole of it, also when oversize)
  bool oversize = false;     // longer than max_row_bytes: its text was not kept
  bool cut = false;          // oversize and not read to its end (stop_at_oversize): `bytes`
                             // is what was read of it
};

class RowReader {
 public:
  // `in` must outlive the reader. A row longer than `max_row_bytes` is returned as oversize.
  RowReader(std::istream& in, std::size_t max_row_bytes);

  // Reads the next row into *row. True: a row. False: the end of the input (error() OK), or
  // bad input (error() is kInvalidArgument with the reason, error_line() the line where it was
  // found; a read error of the stream counts as bad input); after false every call returns
  // false. The end is reported only once the whole input has
  // been read, so text after an array's ']' is found before the end is.
  bool Next(Row* row);

  // Stop at the first oversize row instead of reading it to its end: Next returns it (cut) and
  // then ends the input. For a caller that gives up at a bad row anyway: an endless line
  // (/dev/zero) is then not read forever.
  void set_stop_at_oversize(bool stop) { stop_at_oversize_ = stop; }
  // Asked before every read of the stream: true ends the input with error() kAborted.
  void set_cancel(std::function<bool()> cancel) { cancel_ = std::move(cancel); }

  const Status& error() const { return error_; }
  std::uint64_t error_line() const { return error_line_; }
  Format format() const { return format_; }
  // Bytes consumed from the stream so far.
  std::uint64_t bytes_read() const { return bytes_read_; }

 private:
  // The next byte, or -1 at the end of the stream (or on a read error: error_ is set).
  int Get();
  // Fills the buffer; false at the end of the stream.
  bool Fill();
  bool NextNdjson(Row* row);
  bool NextArrayElement(Row* row);
  bool Fail(Status s);
  void Append(Row* row, char c);

  std::istream& in_;
  std::size_t max_row_bytes_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::size_t len_ = 0;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t line_ = 1;  // line of the next byte Get returns
  Format format_ = Format::kUnknown;
  bool done_ = false;
  bool array_closed_ = false;
  bool expect_element_ = false;  // in an array, after a ','
  bool stop_at_oversize_ = false;
  std::function<bool()> cancel_;
  std::uint64_t blanks_over_ = 0;  // blanks past max_row_bytes not yet known to be trailing
  Status error_;
  std::uint64_t error_line_ = 0;
};

// Parses one row's text into a document. kInvalidArgument with the reason otherwise: not valid
// UTF-8, malformed JSON, nested deeper than `max_depth` levels (the row itself is level 1), not
// an object, or a key named twice in one object (JSON parsers keep only one of the values, so
// such a row is refused rather than guessed at). Numbers are read exactly (engine/json_text.h).
Result<boost::json::object> ParseRow(std::string_view text, std::size_t max_depth);

// The byte offset of the first invalid UTF-8 sequence in `s` (overlong forms, surrogates and
// code points above U+10FFFF are invalid), or npos.
std::size_t FindInvalidUtf8(std::string_view s);

}  // namespace litetx::importing
