// batch/policy.cpp — retry, backoff and skip policies; stateless retry.
#include "litetx/batch/policy.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace litetx::batch {

namespace {
bool Listed(const std::vector<Code>& codes, Code c) {
  return std::find(codes.begin(), codes.end(), c) != codes.end();
}
}  // namespace

bool RetryPolicy::Retryable(const Status& failure) const {
  if (failure.ok() || failure.code() == Code::kUnknown) return false;
  if (Listed(retryable, failure.code())) return true;
  return also_retryable && also_retryable(failure);
}

bool SkipPolicy::Skippable(const Status& failure) const {
  if (failure.ok() || failure.code() == Code::kUnknown) return false;
  if (Listed(skippable, failure.code())) return true;
  return also_skippable && also_skippable(failure);
}

std::chrono::microseconds BackoffPolicy::Delay(int next_attempt, std::mt19937_64& rng) const {
  using std::chrono::microseconds;
  double us = 0;
  switch (kind) {
    case Kind::kNone:
      return microseconds{0};
    case Kind::kFixed:
      us = static_cast<double>(microseconds(initial).count());
      break;
    case Kind::kExponential: {
      const double m = std::max(1.0, multiplier);
      const double cap = static_cast<double>(microseconds(max).count());
      us = static_cast<double>(microseconds(initial).count()) *
           std::pow(m, std::max(0, next_attempt - 2));
      us = std::min(us, cap);
      break;
    }
  }
  if (!(us > 0)) return microseconds{0};
  us = std::min(us, 1e15);  // about 31 years: no overflow below
  auto d = static_cast<std::int64_t>(us);
  if (jitter) d = std::uniform_int_distribution<std::int64_t>(0, d)(rng);
  return microseconds{d};
}

namespace {
std::mt19937_64 SeededRng() {
  return std::mt19937_64(std::random_device{}());
}
}  // namespace

Status Retry(const RetryPolicy& policy, const BackoffPolicy& backoff,
             const std::function<Status(int attempt)>& fn,
             const std::function<Status(const Status& last)>& recover) {
  std::mt19937_64 rng = SeededRng();
  const int most = std::max(1, policy.max_attempts);
  for (int attempt = 1;; ++attempt) {
    Status s = fn(attempt);
    if (s.ok() || !policy.Retryable(s)) return s;
    if (attempt >= most) return recover ? recover(s) : s;
    std::this_thread::sleep_for(backoff.Delay(attempt + 1, rng));
  }
}

Status RetryNested(TxnContext& tx, const RetryPolicy& policy, const BackoffPolicy& backoff,
                   const std::function<Status(TxnContext& tx, int attempt)>& fn,
                   const std::function<Status(TxnContext& tx, const Status& last)>& recover) {
  std::function<Status(const Status&)> nested_recover;
  if (recover) {
    nested_recover = [&](const Status& last) {
      return tx.Nested([&](TxnContext& t) { return recover(t, last); });
    };
  }
  return Retry(
      policy, backoff,
      [&](int attempt) { return tx.Nested([&](TxnContext& t) { return fn(t, attempt); }); },
      nested_recover);
}

}  // namespace litetx::batch
