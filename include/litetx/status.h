// litetx/status.h — error reporting for the whole library.
//
// Every fallible call returns a Status or a Result<T>; the library throws no exception of its
// own except BadResultAccess, for a programming error: reading the value of a Result that holds
// an error (check ok() or `if (result)` first, or use value_or).
// Codes are grouped by what the caller should do next:
//   retry the transaction ........ kConflict, kBusy, kAborted   (IsRetryableTransaction)
//   retry the same call .......... kUnavailable                  (IsRetryableCall)
//   fix the input ................ kInvalidArgument
//   fix the state first .......... kNotFound, kDeleted, kFailedPrecondition, kCorruption
//   ask again later, never guess . kUnknown (the outcome of a write is not known)
//
// Thread safety: Status and Result are values; distinct objects may be used from distinct
// threads freely, one object needs external synchronisation like any std type.
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace litetx {

enum class Code : std::uint8_t {
  kOk = 0,
  // The document's version (or, at the Store seam, its revision or presence) is not the one
  // expected: someone else changed it first. Retry the transaction.
  kConflict,
  // The document is a tombstone: a committed delete. The litesoft model's "error dialog".
  kDeleted,
  // Another transaction holds the document and did not let go within Options::busy_timeout.
  kBusy,
  // The document never existed (or its only insert was rolled back).
  kNotFound,
  // The transaction was rolled back by someone else (a collector claimed it). Retry it.
  kAborted,
  // The outcome of a write is not known (a reply was lost and could not be resolved). For a
  // commit: the transaction may or may not have committed; ask again later.
  kUnknown,
  // A transient failure; the operation certainly did not take effect. Retry the call.
  kUnavailable,
  // Malformed input: bad names, reserved fields, wrong types, oversized documents.
  kInvalidArgument,
  // The state does not allow the operation (e.g. adjusting a field that is not a number).
  kFailedPrecondition,
  // A stored record could not be decoded.
  kCorruption,
};

// Returns the stable lower-case name of `code` ("ok", "conflict", "not_found", ...).
std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
  static Status Deleted(std::string m) { return {Code::kDeleted, std::move(m)}; }
  static Status Busy(std::string m) { return {Code::kBusy, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
  static Status Unknown(std::string m) { return {Code::kUnknown, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {Code::kFailedPrecondition, std::move(m)};
  }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // The current version of the document a kConflict is about, when it is known (optimistic
  // locking: lets a caller show "someone else changed this to version N").
  std::optional<std::uint64_t> current_version() const { return current_version_; }
  Status&& WithCurrentVersion(std::uint64_t v) && {
    current_version_ = v;
    return std::move(*this);
  }

  // The id of the transaction a failed commit ran as (empty if it failed before getting one).
  // For kUnknown, Database::Outcome(txn_id) — or, for a one-action commit, the document's
  // ReadResult::last_writer — tells later whether it committed.
  const std::string& txn_id() const { return txn_id_; }
  Status&& WithTxnId(std::string id) && {
    txn_id_ = std::move(id);
    return std::move(*this);
  }

  // True for kConflict, kBusy and kAborted: run the whole transaction again.
  bool IsRetryableTransaction() const {
    return code_ == Code::kConflict || code_ == Code::kBusy || code_ == Code::kAborted;
  }
  // True for kUnavailable: the call had no effect; call again.
  bool IsRetryableCall() const { return code_ == Code::kUnavailable; }

  // "conflict: <message>", or "ok".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::optional<std::uint64_t> current_version_;
  std::string txn_id_;
};

// Thrown by Result<T>::value() (and operator* and operator->) when the Result holds an error:
// a programming error, like std::bad_expected_access. what() is
// "litetx::Result::value() called on error: <status>"; status() is the error held.
class BadResultAccess : public std::logic_error {
 public:
  explicit BadResultAccess(Status status)
      : std::logic_error("litetx::Result::value() called on error: " + status.ToString()),
        status_(std::move(status)) {}
  const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

// A value or a non-OK Status.
//
//   litetx::Result<litetx::ReadResult> r = db.Read("accounts", "alice");
//   if (!r) return r.status();          // explicit operator bool: the same as r.ok()
//   use(r->doc);                        // value(), operator* and operator-> need ok()
//   auto n = count.value_or(0);         // the value, or a fallback when in error
//
// value(), operator* and operator-> on an error throw BadResultAccess (never a std::get
// exception). For Result<bool>, `if (r)` tests ok(), not the value held: write `r.value()` or
// `*r` for the value.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The same as ok().
  explicit operator bool() const { return ok(); }

  // The value. Throws BadResultAccess if !ok().
  T& value() & {
    Check();
    return *std::get_if<T>(&v_);
  }
  const T& value() const& {
    Check();
    return *std::get_if<T>(&v_);
  }
  T&& value() && {
    Check();
    return std::move(*std::get_if<T>(&v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The value if ok(), else `fallback`, which must convert to T implicitly (as for
  // std::optional::value_or: `Result<std::vector<int>>::value_or(5)` does not compile). Never
  // throws BadResultAccess.
  template <typename U>
    requires std::is_convertible_v<U&&, T>
  T value_or(U&& fallback) const& {
    if (const T* v = std::get_if<T>(&v_)) return *v;
    return static_cast<T>(std::forward<U>(fallback));
  }
  template <typename U>
    requires std::is_convertible_v<U&&, T>
  T value_or(U&& fallback) && {
    if (T* v = std::get_if<T>(&v_)) return std::move(*v);
    return static_cast<T>(std::forward<U>(fallback));
  }

  // The error, or an OK status when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  Code code() const { return ok() ? Code::kOk : std::get<Status>(v_).code(); }

 private:
  void Check() const {
    if (const Status* s = std::get_if<Status>(&v_)) throw BadResultAccess(*s);
  }

  std::variant<T, Status> v_;
};

}  // namespace litetx
