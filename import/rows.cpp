// import/rows.cpp — see rows.h.
#include "import/rows.h"

#include <algorithm>

#include <cstring>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "engine/json_text.h"

namespace litetx::importing {
namespace json = boost::json;

namespace {

constexpr std::size_t kBlock = std::size_t{1} << 16;

bool IsBlank(int c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }


// Where a scan of JSON text stands with respect to strings: Step(c) takes the next byte and
// returns true if it belongs to a string (its quotes included), escapes followed.
class StringTracker {
 public:
  bool Step(char c) {
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      return true;
    }
    if (c == '"') {
      in_string_ = true;
      return true;
    }
    return false;
  }

 private:
  bool in_string_ = false;
  bool escape_ = false;
};

// Colons outside strings: in well-formed JSON, one per object member.
std::size_t CountMembersInText(std::string_view text) {
  std::size_t n = 0;
  StringTracker strings;
  for (const char c : text) {
    if (!strings.Step(c) && c == ':') ++n;
  }
  return n;
}

// Members of every object in `doc`, nested ones included (an explicit stack, no recursion).
std::size_t CountMembers(const json::object& doc) {
  std::size_t n = doc.size();
  std::vector<const json::value*> todo;
  for (const auto& kv : doc) {
    if (kv.value().is_structured()) todo.push_back(&kv.value());
  }
  while (!todo.empty()) {
    const json::value* v = todo.back();
    todo.pop_back();
    if (const json::object* o = v->if_object()) {
      n += o->size();
      for (const auto& kv : *o) {
        if (kv.value().is_structured()) todo.push_back(&kv.value());
      }
    } else {
      for (const json::value& item : v->get_array()) {
        if (item.is_structured()) todo.push_back(&item);
      }
    }
  }
  return n;
}

const char* KindName(const json::value& v) {
  switch (v.kind()) {
    case json::kind::array: return "an array";
    case json::kind::string: return "a string";
    case json::kind::bool_: return "a boolean";
    case json::kind::null: return "null";
    case json::kind::object: return "an object";
    default: return "a number";
  }
}

}  // namespace

RowReader::RowReader(std::istream& in, std::size_t max_row_bytes)
    : in_(in), max_row_bytes_(max_row_bytes) {
  buf_.resize(kBlock);
}

bool RowReader::Fill() {
  if (!error_.ok()) return false;
  pos_ = 0;
  len_ = 0;
  if (cancel_ && cancel_()) {
    error_ = Status::Aborted("cancelled while reading the input");
    error_line_ = line_;
    return false;
  }
  // Whatever the stream has at hand (at least one byte, waiting for it), so that a slow
  // producer's rows are taken as they come; a stream that cannot tell what it has at hand is
  // read a block at a time.
  if (in_.peek() != std::istream::traits_type::eof()) {
    std::streamsize n = in_.readsome(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    if (n <= 0) {
      in_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
      n = in_.gcount();
    }
    len_ = static_cast<std::size_t>(std::max<std::streamsize>(n, 0));
  }
  if (len_ == 0 && cancel_ && cancel_()) {
    error_ = Status::Aborted("cancelled while reading the input");
    error_line_ = line_;
    return false;
  }
  if (len_ == 0) {
    if (in_.bad()) {
      error_ = Status::InvalidArgument("the input could not be read after " +
                                       std::to_string(bytes_read_) + " bytes");
      error_line_ = line_;
    }
    return false;
  }
  return true;
}

int RowReader::Get() {
  if (pos_ == len_ && !Fill()) return -1;
  const char c = buf_[pos_++];
  ++bytes_read_;
  if (c == '\n') ++line_;
  return static_cast<unsigned char>(c);
}

bool RowReader::Fail(Status s) {
  if (error_.ok()) {
    error_ = std::move(s);
    error_line_ = line_;
  }
  done_ = true;
  return false;
}

void RowReader::Append(Row* row, char c) {
  ++row->bytes;
  if (row->oversize) return;
  if (row->text.size() >= max_row_bytes_) {
    // Blanks past the limit may be the ones between the element and its ',' or ']' (trimmed,
    // not part of the row): held back until something else follows them.
    if (IsBlank(static_cast<unsigned char>(c))) {
      ++blanks_over_;
      return;
    }
    row->oversize = true;
    row->text.clear();
    return;
  }
  row->text.push_back(c);
}

bool RowReader::Next(Row* row) {
  if (done_) return false;
  row->text.clear();
  row->bytes = 0;
  row->oversize = false;
  row->cut = false;
  blanks_over_ = 0;
  if (format_ == Format::kUnknown) {
    // A UTF-8 byte order mark at the very start is skipped.
    if (bytes_read_ == 0 && Fill() && len_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) {
      pos_ = 3;
      bytes_read_ = 3;
    }
    for (;;) {
      if (pos_ == len_ && !Fill()) {  // blanks only, or nothing at all
        done_ = true;
        return false;
      }
      if (!IsBlank(static_cast<unsigned char>(buf_[pos_]))) break;
      Get();
    }
    if (buf_[pos_] == '[') {
      Get();
      format_ = Format::kArray;
    } else {
      format_ = Format::kNdjson;
    }
  }
  if (format_ == Format::kNdjson) return NextNdjson(row);
  return NextArrayElement(row);
}

bool RowReader::NextNdjson(Row* row) {
  for (;;) {
    row->line = line_;
    row->text.clear();
    row->bytes = 0;
    row->oversize = false;
    bool blank = true;
    bool ended = false;  // the stream ended on this line
    for (;;) {
      if (pos_ == len_ && !Fill()) {
        if (!error_.ok()) return Fail(error_);
        ended = true;
        break;
      }
      const char* start = buf_.data() + pos_;
      const std::size_t n = len_ - pos_;
      const char* nl = static_cast<const char*>(std::memchr(start, '\n', n));
      const std::size_t take = nl != nullptr ? static_cast<std::size_t>(nl - start) : n;
      if (blank) {
        for (std::size_t i = 0; i < take; ++i) {
          if (!IsBlank(static_cast<unsigned char>(start[i]))) {
            blank = false;
            break;
          }
        }
      }
      row->bytes += take;
      if (!row->oversize) {
        if (row->text.size() + take > max_row_bytes_) {
          // A '\r' before the newline does not count: it is not part of the row.
          const bool only_cr = nl != nullptr && row->text.size() + take == max_row_bytes_ + 1 &&
                               take > 0 && start[take - 1] == '\r';
          if (only_cr) {
            row->text.append(start, take);
          } else {
            row->oversize = true;
            row->text.clear();
          }
        } else {
          row->text.append(start, take);
        }
      }
      pos_ += take;
      bytes_read_ += take;
      if (row->oversize && stop_at_oversize_ && nl == nullptr) {
        row->cut = true;
        done_ = true;
        return true;
      }
      if (nl != nullptr) {
        ++pos_;
        ++bytes_read_;
        ++line_;
        break;
      }
    }
    if (!row->text.empty() && row->text.back() == '\r') {
      row->text.pop_back();
      --row->bytes;
    }
    if (!blank) return true;
    if (ended) {
      done_ = true;
      return false;
    }
  }
}

bool RowReader::NextArrayElement(Row* row) {
  int c = 0;
  if (!array_closed_) {
    // Blanks up to the element, or to the ']' that closes the array.
    for (;;) {
      c = Get();
      if (c < 0) {
        if (!error_.ok()) return Fail(error_);
        return Fail(Status::InvalidArgument("the input ends inside the array (no closing ']')"));
      }
      if (!IsBlank(c)) break;
    }
    if (c == ']') {
      if (expect_element_) {
        return Fail(Status::InvalidArgument("a ',' right before the array's closing ']'"));
      }
      array_closed_ = true;
    }
  }
  if (array_closed_) {
    // Only blanks may follow the array.
    for (;;) {
      c = Get();
      if (c < 0) {
        if (!error_.ok()) return Fail(error_);
        done_ = true;
        return false;
      }
      if (!IsBlank(c)) {
        return Fail(Status::InvalidArgument("unexpected text after the array's closing ']'"));
      }
    }
  }
  expect_element_ = false;
  row->line = line_;
  int depth = 0;
  StringTracker strings;
  for (;;) {
    if (strings.Step(static_cast<char>(c))) {
      // inside a string (or its quotes): taken as it is
    } else if (depth == 0 && c == ',') {
      expect_element_ = true;
      break;
    } else if (depth == 0 && c == ']') {
      array_closed_ = true;
      break;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
    Append(row, static_cast<char>(c));
    if (row->oversize && stop_at_oversize_) {
      row->cut = true;
      done_ = true;
      return true;
    }
    c = Get();
    if (c < 0) {
      if (!error_.ok()) return Fail(error_);
      return Fail(Status::InvalidArgument("the input ends inside the array (no closing ']')"));
    }
  }
  while (!row->text.empty() && IsBlank(static_cast<unsigned char>(row->text.back()))) {
    row->text.pop_back();
  }
  return true;
}

std::size_t FindInvalidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const std::size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    std::uint32_t cp = c & (0x7f >> len);
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

Result<json::object> ParseRow(std::string_view text, std::size_t max_depth) {
  std::size_t first = 0;
  while (first < text.size() && IsBlank(static_cast<unsigned char>(text[first]))) ++first;
  if (first == text.size()) return Status::InvalidArgument("empty array element");
  if (std::size_t at = FindInvalidUtf8(text); at != std::string_view::npos) {
    return Status::InvalidArgument("not valid UTF-8 (byte " + std::to_string(at + 1) +
                                   " of the row)");
  }
  json::parse_options opt;
  opt.max_depth = max_depth;
  json::error_code ec;
  std::size_t used = 0;
  json::value v = engine::ParseJson(text, ec, opt, &used);
  if (ec == json::error::too_deep) {
    return Status::InvalidArgument("nests objects and arrays deeper than " +
                                   std::to_string(max_depth) + " levels");
  }
  if (ec) {
    return Status::InvalidArgument("malformed JSON near byte " + std::to_string(used + 1) +
                                   " of the row: " + ec.message());
  }
  if (!v.is_object()) {
    return Status::InvalidArgument(std::string("not a JSON object (") + KindName(v) + ")");
  }
  if (CountMembers(v.get_object()) != CountMembersInText(text)) {
    auto key = engine::FindDuplicateKey(text);
    return Status::InvalidArgument("key \"" + key.value_or("?") +
                                   "\" appears twice in one object");
  }
  return std::move(v.get_object());
}

}  // namespace litetx::importing
