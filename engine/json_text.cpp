#include "engine/json_text.h"

#include "litetx/document.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/serializer.hpp>
#include <boost/json/value_stack.hpp>

namespace litetx::engine {
namespace json = boost::json;

namespace {

// A basic_parser handler that builds the value on a value_stack exactly as Boost's own parser
// does, except for doubles: those are converted from their text with std::from_chars instead
// of Boost's approximate conversion.
class ExactHandler {
 public:
  static constexpr std::size_t max_object_size = json::object::max_size();
  static constexpr std::size_t max_array_size = json::array::max_size();
  static constexpr std::size_t max_key_size = json::string::max_size();
  static constexpr std::size_t max_string_size = json::string::max_size();

  ExactHandler(unsigned char* temp, std::size_t size) : st(json::storage_ptr(), temp, size) {}

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) { return true; }
  bool on_object_end(std::size_t n, json::error_code&) {
    st.push_object(n);
    return true;
  }
  bool on_array_begin(json::error_code&) { return true; }
  bool on_array_end(std::size_t n, json::error_code&) {
    st.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code&) {
    st.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, json::error_code&) {
    st.push_string(s);
    return true;
  }
  // A number split across input chunks arrives in parts; the last part comes with its value.
  bool on_number_part(json::string_view s, json::error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, json::string_view, json::error_code&) {
    number_.clear();
    st.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, json::error_code&) {
    number_.clear();
    st.push_uint64(u);
    return true;
  }
  bool on_double(double approx, json::string_view s, json::error_code&) {
    std::string_view text(s.data(), s.size());
    if (!number_.empty()) {
      number_.append(s.data(), s.size());
      text = number_;
    }
    st.push_double(Exact(text, approx));
    number_.clear();
    return true;
  }
  bool on_bool(bool b, json::error_code&) {
    st.push_bool(b);
    return true;
  }
  bool on_null(json::error_code&) {
    st.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

  json::value_stack st;

 private:
  // The double nearest to `text` (valid JSON number syntax, which std::from_chars accepts).
  // Out of range, from_chars reports an error and leaves the result alone; then the value is
  // an infinity or a zero of the text's sign, told apart by Boost's approximation.
  static double Exact(std::string_view text, double approx) {
    double d = 0.0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (err == std::errc() && end == text.data() + text.size()) return d;
    const bool negative = !text.empty() && text.front() == '-';
    if (err == std::errc::result_out_of_range) {
      double magnitude = std::fabs(approx) >= 1.0 ? std::numeric_limits<double>::infinity() : 0.0;
      return negative ? -magnitude : magnitude;
    }
    return approx;  // not reached for text the JSON grammar accepted
  }

  std::string number_;  // the parts of a number split across input chunks
};

}  // namespace

json::value ParseJson(std::string_view text, json::error_code& ec,
                      const json::parse_options& opt, std::size_t* consumed) {
  unsigned char temp[4096];  // value_stack's first buffer, as boost::json::parse uses
  json::basic_parser<ExactHandler> p(opt, temp, sizeof temp);
  p.handler().st.reset(json::storage_ptr());
  ec = {};
  std::size_t n = p.write_some(false, text.data(), text.size(), ec);
  if (!ec && n < text.size()) ec = json::error::extra_data;
  if (consumed != nullptr) *consumed = n;
  if (ec) return nullptr;
  return p.handler().st.release();
}

namespace {

// Containers still to look into, with their level; each is visited once, in no particular
// order. The first ones live in the object itself, so checking a typical document allocates
// nothing.
class Todo {
 public:
  struct Entry {  // trivial: the inline array below is left uninitialised
    const json::value* v;
    std::size_t level;
  };
  bool empty() const { return size_ == 0 && spill_.empty(); }
  void push(const json::value* v, std::size_t level) {
    if (size_ < kInline) {
      inline_[size_++] = Entry{v, level};
    } else {
      spill_.push_back(Entry{v, level});
    }
  }
  Entry pop() {
    if (spill_.empty()) return inline_[--size_];
    Entry e = spill_.back();
    spill_.pop_back();
    return e;
  }

 private:
  static constexpr std::size_t kInline = 32;
  std::array<Entry, kInline> inline_;
  std::size_t size_ = 0;
  std::vector<Entry> spill_;
};

// Checks `v`, at `level`: a scalar at once, a container by queueing it in `todo`.
JsonProblem Look(const json::value& v, std::size_t level, std::size_t max_depth,
                 bool finite_only, Todo& todo) {
  switch (v.kind()) {
    case json::kind::object:
    case json::kind::array:
      if (level > max_depth) return JsonProblem::kTooDeep;
      todo.push(&v, level);
      return JsonProblem::kNone;
    case json::kind::double_:
      if (finite_only && !std::isfinite(v.get_double())) return JsonProblem::kNotFinite;
      return JsonProblem::kNone;
    default:
      return JsonProblem::kNone;
  }
}

JsonProblem Drain(std::size_t max_depth, bool finite_only, Todo& todo) {
  while (!todo.empty()) {
    auto [v, level] = todo.pop();
    if (v->is_object()) {
      for (const auto& kv : v->get_object()) {
        JsonProblem p = Look(kv.value(), level + 1, max_depth, finite_only, todo);
        if (p != JsonProblem::kNone) return p;
      }
    } else {
      for (const json::value& item : v->get_array()) {
        JsonProblem p = Look(item, level + 1, max_depth, finite_only, todo);
        if (p != JsonProblem::kNone) return p;
      }
    }
  }
  return JsonProblem::kNone;
}

}  // namespace

JsonProblem CheckJson(const json::value& v, std::size_t level, std::size_t max_depth,
                      bool finite_only) {
  Todo todo;
  if (JsonProblem p = Look(v, level, max_depth, finite_only, todo); p != JsonProblem::kNone) {
    return p;
  }
  return Drain(max_depth, finite_only, todo);
}

JsonProblem CheckJson(const json::object& doc, std::size_t max_depth, bool finite_only) {
  if (max_depth < 1) return JsonProblem::kTooDeep;
  Todo todo;
  for (const auto& kv : doc) {
    JsonProblem p = Look(kv.value(), 2, max_depth, finite_only, todo);
    if (p != JsonProblem::kNone) return p;
  }
  return Drain(max_depth, finite_only, todo);
}

std::string StoredValueProblem(const boost::json::object& value) {
  switch (CheckJson(value, kMaxStoredNestingDepth, /*finite_only=*/true)) {
    case JsonProblem::kNone: return {};
    case JsonProblem::kTooDeep:
      return "value nests objects and arrays deeper than " +
             std::to_string(kMaxStoredNestingDepth) + " levels";
    case JsonProblem::kNotFinite:
      return "value holds a number that is not finite (NaN or an infinity)";
  }
  return {};
}

std::optional<std::string> FindDuplicateKey(std::string_view text) {
  std::vector<std::optional<std::set<std::string>>> open;  // a key set per open object
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{') {
      open.emplace_back(std::set<std::string>{});
    } else if (c == '[') {
      open.emplace_back(std::nullopt);
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (c == '"') {
      std::size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      std::string_view token = text.substr(i, end + 1 - i);
      std::size_t next = end + 1;
      while (next < text.size() && (text[next] == ' ' || text[next] == '\t' ||
                                    text[next] == '\n' || text[next] == '\r')) {
        ++next;
      }
      if (next < text.size() && text[next] == ':' && !open.empty() && open.back()) {
        json::error_code ec;
        json::value key = ParseJson(token, ec, json::parse_options{});  // decodes escapes
        if (!ec && key.is_string() && !open.back()->insert(std::string(key.get_string())).second) {
          return std::string(key.get_string());
        }
      }
      i = end;
    }
  }
  return std::nullopt;
}

std::size_t SerializedSize(const json::object& value) {
  // The serializer writes the text into `out` piece by piece; only the pieces' lengths are
  // kept. A document that fits in `out` is written in one piece, without the serializer
  // suspending (which is when it allocates its own stack).
  char out[4096];
  json::serializer sr;
  sr.reset(&value);
  std::size_t n = 0;
  while (!sr.done()) n += sr.read(out, sizeof out).size();
  return n;
}

}  // namespace litetx::engine
