// batch/readers.cpp — VectorReader and NdjsonReader.
#include "litetx/batch/readers.h"

#include <boost/json/parse.hpp>

namespace litetx::batch {

namespace json = boost::json;

Result<std::optional<Item>> VectorReader::Read() {
  if (next_ >= items_.size()) return std::optional<Item>{};
  return std::optional<Item>{items_[next_++]};
}

json::value VectorReader::Checkpoint() const { return json::value(static_cast<std::uint64_t>(next_)); }

Status VectorReader::Restore(const json::value& checkpoint) {
  if (!checkpoint.is_uint64() && !(checkpoint.is_int64() && checkpoint.as_int64() >= 0)) {
    return Status::InvalidArgument("VectorReader: the checkpoint is not an index");
  }
  const std::uint64_t i =
      checkpoint.is_uint64() ? checkpoint.as_uint64() : static_cast<std::uint64_t>(checkpoint.as_int64());
  if (i > items_.size()) {
    return Status::InvalidArgument("VectorReader: checkpoint " + std::to_string(i) +
                                   " is past the end (" + std::to_string(items_.size()) + ")");
  }
  next_ = static_cast<std::size_t>(i);
  return Status::Ok();
}

NdjsonReader::NdjsonReader(std::string path, NdjsonReaderOptions options)
    : path_(std::move(path)), options_(std::move(options)) {}

Result<std::unique_ptr<NdjsonReader>> NdjsonReader::Open(const std::string& path,
                                                         NdjsonReaderOptions options) {
  std::unique_ptr<NdjsonReader> r(new NdjsonReader(path, std::move(options)));
  r->in_.open(path, std::ios::binary);
  if (!r->in_) return Status::Unavailable("cannot open " + path);
  return r;
}

Result<std::optional<Item>> NdjsonReader::Read() {
  std::streambuf* buf = in_.rdbuf();
  for (;;) {
    std::string line;
    bool too_long = false;
    bool any = false;
    for (;;) {
      const int c = buf->sbumpc();
      if (c == std::char_traits<char>::eof()) break;
      any = true;
      ++offset_;
      if (c == '\n') break;
      if (line.size() < options_.max_line_bytes) {
        line.push_back(static_cast<char>(c));
      } else {
        too_long = true;
      }
    }
    if (!any) return std::optional<Item>{};
    const std::uint64_t number = line_++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = path_ + ":" + std::to_string(number) + ": ";
    if (too_long) {
      return Status::InvalidArgument(where + "line longer than " +
                                     std::to_string(options_.max_line_bytes) + " bytes");
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank: not an item
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec) return Status::InvalidArgument(where + "not valid JSON (" + ec.message() + ")");
    if (!v.is_object()) return Status::InvalidArgument(where + "not a JSON object");
    Item item;
    if (options_.key_field.empty()) {
      item.key = std::to_string(number);
    } else {
      const json::value* k = v.as_object().if_contains(options_.key_field);
      if (k == nullptr) {
        return Status::InvalidArgument(where + "no field \"" + options_.key_field + "\"");
      }
      if (k->is_string()) {
        item.key = std::string(k->as_string());
      } else if (k->is_int64()) {
        item.key = std::to_string(k->as_int64());
      } else if (k->is_uint64()) {
        item.key = std::to_string(k->as_uint64());
      } else {
        return Status::InvalidArgument(where + "field \"" + options_.key_field +
                                       "\" is not a string or an integer");
      }
      if (item.key.empty()) {
        return Status::InvalidArgument(where + "field \"" + options_.key_field + "\" is empty");
      }
    }
    item.value = std::move(v);
    return std::optional<Item>{std::move(item)};
  }
}

json::value NdjsonReader::Checkpoint() const {
  return json::object{{"offset", offset_}, {"line", line_}};
}

Status NdjsonReader::Restore(const json::value& checkpoint) {
  const json::object* o = checkpoint.if_object();
  const json::value* off = o ? o->if_contains("offset") : nullptr;
  const json::value* line = o ? o->if_contains("line") : nullptr;
  auto as_u64 = [](const json::value* v) -> std::optional<std::uint64_t> {
    if (v == nullptr) return std::nullopt;
    if (v->is_uint64()) return v->as_uint64();
    if (v->is_int64() && v->as_int64() >= 0) return static_cast<std::uint64_t>(v->as_int64());
    return std::nullopt;
  };
  auto o_off = as_u64(off);
  auto o_line = as_u64(line);
  if (!o_off || !o_line || *o_line == 0) {
    return Status::InvalidArgument("NdjsonReader: the checkpoint is not {offset, line}");
  }
  in_.clear();
  in_.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in_.tellg());
  if (*o_off > size) {
    return Status::InvalidArgument(path_ + ": checkpoint offset " + std::to_string(*o_off) +
                                   " is past the end of the file (" + std::to_string(size) +
                                   " bytes): not the same input");
  }
  in_.seekg(static_cast<std::streamoff>(*o_off));
  if (!in_) return Status::Unavailable(path_ + ": cannot seek to the checkpoint");
  offset_ = *o_off;
  line_ = *o_line;
  return Status::Ok();
}

}  // namespace litetx::batch
