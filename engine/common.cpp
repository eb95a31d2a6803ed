// Small definitions of the public value types: Status, Transaction, names, validation, clock.
#include <cstdint>
#include <thread>

#include "litetx/clock.h"
#include "litetx/document.h"
#include "litetx/status.h"
#include "litetx/transaction.h"

namespace litetx {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kConflict: return "conflict";
    case Code::kDeleted: return "deleted";
    case Code::kBusy: return "busy";
    case Code::kNotFound: return "not_found";
    case Code::kAborted: return "aborted";
    case Code::kUnknown: return "unknown";
    case Code::kUnavailable: return "unavailable";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kCorruption: return "corruption";
  }
  return "?";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(CodeName(code_));
  if (!message_.empty()) s += ": " + message_;
  return s;
}

const char* ActionTypeName(ActionType type) {
  switch (type) {
    case ActionType::kInsert: return "insert";
    case ActionType::kUpdate: return "update";
    case ActionType::kAdjust: return "adjust";
    case ActionType::kDelete: return "delete";
    case ActionType::kCheck: return "check";
  }
  return "?";
}

const char* DocumentStateName(DocumentState state) {
  switch (state) {
    case DocumentState::kFound: return "found";
    case DocumentState::kNotFound: return "not_found";
    case DocumentState::kDeleted: return "deleted";
  }
  return "?";
}

Transaction& Transaction::Insert(std::string collection, std::string id, boost::json::object doc,
                                 std::optional<std::uint32_t> schema_version) {
  return Add(Action{ActionType::kInsert, {std::move(collection), std::move(id)}, std::move(doc),
                    {}, std::nullopt, schema_version});
}
Transaction& Transaction::Update(std::string collection, std::string id, boost::json::object set,
                                 std::vector<std::string> unset,
                                 std::optional<std::uint64_t> expected_version,
                                 std::optional<std::uint32_t> schema_version) {
  return Add(Action{ActionType::kUpdate, {std::move(collection), std::move(id)}, std::move(set),
                    std::move(unset), expected_version, schema_version});
}
Transaction& Transaction::Adjust(std::string collection, std::string id, boost::json::object by,
                                 std::optional<std::uint64_t> expected_version) {
  return Add(Action{ActionType::kAdjust, {std::move(collection), std::move(id)}, std::move(by),
                    {}, expected_version, std::nullopt});
}
Transaction& Transaction::Delete(std::string collection, std::string id,
                                 std::optional<std::uint64_t> expected_version) {
  return Add(Action{ActionType::kDelete, {std::move(collection), std::move(id)}, {}, {},
                    expected_version, std::nullopt});
}
Transaction& Transaction::Check(std::string collection, std::string id,
                                std::uint64_t expected_version) {
  return Add(Action{ActionType::kCheck, {std::move(collection), std::move(id)}, {}, {},
                    expected_version, std::nullopt});
}
Transaction& Transaction::Add(Action action) {
  actions_.push_back(std::move(action));
  return *this;
}

namespace {

// OK if `s` is well-formed UTF-8 without control characters.
Status CheckText(std::string_view what, std::string_view s, std::size_t max) {
  if (s.empty()) return Status::InvalidArgument(std::string(what) + " is empty");
  if (s.size() > max) {
    return Status::InvalidArgument(std::string(what) + " is " + std::to_string(s.size()) +
                                   " bytes, over the limit of " + std::to_string(max));
  }
  // Strict RFC 3629 decoding: overlong forms, UTF-16 surrogates and code points past
  // U+10FFFF are rejected, so a name has exactly one byte spelling.
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      return Status::InvalidArgument(std::string(what) + " is not valid UTF-8");
    }
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; k < len; ++k) {
      auto b = static_cast<unsigned char>(s[i + k]);
      if ((b >> 6) != 0x2) return Status::InvalidArgument(std::string(what) + " is not valid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr std::uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Status::InvalidArgument(std::string(what) + " is not valid UTF-8");
    }
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      return Status::InvalidArgument(std::string(what) + " contains a control character");
    }
    i += len;
  }
  return Status::Ok();
}

}  // namespace

Status ValidateCollection(std::string_view collection) {
  if (Status s = CheckText("collection name", collection, kMaxCollectionBytes); !s.ok()) return s;
  if (collection.substr(0, kReservedCollectionPrefix.size()) == kReservedCollectionPrefix) {
    return Status::InvalidArgument("collection names starting with __litetx are reserved");
  }
  return Status::Ok();
}

Status ValidateId(std::string_view id) { return CheckText("document id", id, kMaxIdBytes); }

bool IsReservedField(std::string_view field) {
  return field.substr(0, kReservedFieldPrefix.size()) == kReservedFieldPrefix;
}

namespace {
class RealClock final : public Clock {
 public:
  std::int64_t NowMillis() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::int64_t MonotonicMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepFor(std::chrono::microseconds d) override { std::this_thread::sleep_for(d); }
};
}  // namespace

std::shared_ptr<Clock> SystemClock() {
  return std::make_shared<RealClock>();
}

}  // namespace litetx
