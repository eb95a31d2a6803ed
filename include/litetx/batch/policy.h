// litetx/batch/policy.h — retry, backoff and skip policies, and stateless retry.
//
// The policies say which failures a step retries and skips; failures are Status values,
// classified by their code and, for failures of your own, by a predicate (e.g. on a message
// prefix your processor uses).
//
// Stateless retry (Spring Batch's RETRY around a remote call, seed notation A.2) repeats a
// call in place, inside one transaction attempt, until it succeeds or the policy gives up:
//
//   litetx::batch::RetryPolicy retry{.max_attempts = 5};
//   litetx::batch::BackoffPolicy backoff = litetx::batch::BackoffPolicy::Exponential(
//       std::chrono::milliseconds{10}, std::chrono::milliseconds{1000});
//   litetx::Status s = litetx::batch::Retry(retry, backoff, [&](int attempt) {
//     return CallRemoteService(item);   // not a store operation: nothing to undo
//   });
//
// A call that writes through the transaction (a store operation) must undo its buffered
// writes before it is tried again: RetryNested runs each attempt as a nested scope of the
// transaction (TxnContext::Nested, the NESTED propagation that A.6 and A.8 call for), so a
// failed attempt leaves nothing behind and the enclosing transaction goes on.
//
// Thread safety: policies are values; the functions are reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "litetx/run.h"
#include "litetx/status.h"

namespace litetx::batch {

// Which failures are worth another attempt, and how many attempts an item gets.
struct RetryPolicy {
  // Attempts in all, the first included: 1 retries nothing.
  int max_attempts = 3;
  // Codes that are retried: by default what litetx reports for a transient condition —
  // conflict and busy (another transaction won: the seed's "deadlock loser"), aborted, and a
  // store call that failed without effect.
  std::vector<Code> retryable{Code::kConflict, Code::kBusy, Code::kAborted, Code::kUnavailable};
  // Further failures to retry (your own): called with any failure whose code is not listed.
  std::function<bool(const Status&)> also_retryable{};

  // True if `failure` is of a retryable kind (the attempt count aside). Never for kUnknown.
  bool Retryable(const Status& failure) const;
};

// How long to wait before another attempt.
struct BackoffPolicy {
  enum class Kind : std::uint8_t { kNone, kFixed, kExponential };
  // kNone: retry at once. kFixed: wait `initial` each time. kExponential: `initial`, doubling
  // (times `multiplier`) up to `max`.
  Kind kind = Kind::kExponential;
  std::chrono::milliseconds initial{10};  // the first wait (kFixed: every wait)
  std::chrono::milliseconds max{1'000};   // kExponential: the cap
  double multiplier = 2.0;                // kExponential: growth per attempt (>= 1)
  // Wait a random time in [0, the computed wait] (full jitter), so that retrying workers do
  // not collide again in step.
  bool jitter = true;

  static BackoffPolicy None() { return {Kind::kNone, {}, {}, 1.0, false}; }
  static BackoffPolicy Fixed(std::chrono::milliseconds d, bool jitter = false) {
    return {Kind::kFixed, d, d, 1.0, jitter};
  }
  static BackoffPolicy Exponential(std::chrono::milliseconds initial,
                                   std::chrono::milliseconds max, double multiplier = 2.0,
                                   bool jitter = true) {
    return {Kind::kExponential, initial, max, multiplier, jitter};
  }
  // The wait before attempt `next_attempt` (2 for the first retry). `rng` draws the jitter.
  std::chrono::microseconds Delay(int next_attempt, std::mt19937_64& rng) const;
};

// Which failures may be skipped (the item is left out and recorded) instead of failing the
// step, and how many.
struct SkipPolicy {
  // Most items skipped over the whole step, restarts included (read, process and write skips
  // together); one more fails the step. 0: nothing is skipped.
  std::uint64_t skip_limit = 0;
  // Codes that may be skipped: by default bad input (an unparsable line, an item the
  // processor rejects as invalid) and a state the item cannot be applied to.
  std::vector<Code> skippable{Code::kInvalidArgument, Code::kFailedPrecondition,
                              Code::kNotFound, Code::kDeleted};
  // Further failures to skip (your own): called with any failure whose code is not listed.
  std::function<bool(const Status&)> also_skippable{};

  // True if `failure` is of a skippable kind (the limit aside). Never for kUnknown.
  bool Skippable(const Status& failure) const;
};

// Stateless retry: calls `fn(attempt)` (attempt 1, 2, ...) until it returns OK, returns a
// failure the policy does not retry, or has run policy.max_attempts times; waits per
// `backoff` in between. Returns the last status. If `recover` is given and the attempts are
// used up on a retryable failure, returns recover(last failure) instead (A.2's recovery path).
Status Retry(const RetryPolicy& policy, const BackoffPolicy& backoff,
             const std::function<Status(int attempt)>& fn,
             const std::function<Status(const Status& last)>& recover = nullptr);

// Stateless retry of work that writes through `tx`: like Retry, but each attempt runs as a
// nested scope of `tx` (TxnContext::Nested), so a failed attempt's buffered writes are undone
// before the next one; `recover`, if given, runs in a nested scope of its own too.
Status RetryNested(TxnContext& tx, const RetryPolicy& policy, const BackoffPolicy& backoff,
                   const std::function<Status(TxnContext& tx, int attempt)>& fn,
                   const std::function<Status(TxnContext& tx, const Status& last)>& recover =
                       nullptr);

}  // namespace litetx::batch
