// engine/json_text.h — reading JSON text exactly, and checking a JSON value's shape without
// recursion. Every place litetx turns JSON text into values (the LMDB store's stored documents
// and records, the CLI's input) parses with ParseJson.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/error.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>

namespace litetx::engine {

// Parses `text` as one JSON value, like boost::json::parse, but with exact numbers: a number
// with a fraction or an exponent (or an integer outside the int64/uint64 ranges) becomes the
// double nearest to its decimal value (std::from_chars, round half to even), so every finite
// double that boost::json::serialize printed comes back with the same bits, the sign of zero
// included. (Boost 1.81's own parser is off by one unit in the last place for some of them.)
// Integers are int64, or uint64 above INT64_MAX, as with boost. Text beyond the double range
// reads as an infinity (too large) or a zero (too small), as with boost.
// The parse is not recursive; nesting deeper than opt.max_depth fails with
// boost::json::error::too_deep. On failure returns null and sets `ec`; `*consumed` (if
// given) receives how many bytes were read (where the error is). May throw std::bad_alloc.
boost::json::value ParseJson(std::string_view text, boost::json::error_code& ec,
                             const boost::json::parse_options& opt,
                             std::size_t* consumed = nullptr);

enum class JsonProblem : unsigned char {
  kNone,
  kTooDeep,    // objects and arrays nest deeper than allowed
  kNotFinite,  // a double is NaN or infinite (JSON text cannot hold it)
};

// Walks `v` with an explicit stack (no recursion, whatever its depth) and returns the first
// problem found: objects and arrays nested deeper than `max_depth` levels, where `v` itself is
// at level `level` (in a document, which is level 1, its field values are level 2), or, if
// `finite_only`, a NaN or an infinity anywhere. The walk stops at the first problem, so a
// value nested far deeper than `max_depth` costs only `max_depth` levels of work.
JsonProblem CheckJson(const boost::json::value& v, std::size_t level, std::size_t max_depth,
                      bool finite_only);
// The same for a whole document (level 1).
JsonProblem CheckJson(const boost::json::object& doc, std::size_t max_depth, bool finite_only);

// What a store writes with: why `value` cannot be stored as JSON text that reads back as it is
// (nested deeper than kMaxStoredNestingDepth, or a NaN or an infinity), or empty.
std::string StoredValueProblem(const boost::json::object& value);

// The length of boost::json::serialize(value), counted without building the text: the
// serializer writes into a buffer on the stack, which is reused.
std::size_t SerializedSize(const boost::json::object& value);

// The first key named twice in one object of `text` (well-formed JSON), if any. A JSON parser
// keeps only one of the two values, so such input is refused instead of guessed at.
std::optional<std::string> FindDuplicateKey(std::string_view text);

}  // namespace litetx::engine
