// engine/txn_id.h — transaction ids.
//
// A transaction id names a transaction's ActiveTransaction document and owns its document
// references and pessimistic locks, so two transactions must never share one: not between
// threads, not between processes on one store, and not between a process and a child it
// fork()ed. Ids carry 64 bits (the partition digit and 60 more) from a per-thread generator
// seeded from the kernel's random source, and the millisecond of their making; a child process
// reseeds before its first id (engine/txn_id.cpp).
//
// Thread safety: NewTxnId may be called from any number of threads at once; it takes no lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace litetx::engine {

// A transaction id is kTxnIdDigits lowercase hex digits:
//   [0]       the partition (0-f), uniformly random
//   [1..12]   the wall-clock millisecond the id was made (since the Unix epoch), so that the
//             ids of one partition sort by age (a retried attempt of Database::Run keeps its
//             first attempt's digits 0..15, and so its millisecond)
//   [13..27]  60 random bits
// Earlier releases made 24 random hex digits; such ids stay valid everywhere (they have a
// partition but no time).
inline constexpr std::size_t kTxnIdDigits = 28;
inline constexpr std::size_t kTxnIdTimeDigits = 12;
inline constexpr int kTxnIdPartitions = 16;

// A fresh transaction id. Never fails.
std::string NewTxnId();

// The partition of `id` (its first hex digit's value), or -1 if it does not start with a
// lowercase hex digit.
int TxnIdPartition(std::string_view id);

// The millisecond a current-format id was made; std::nullopt for any other string (earlier
// releases' 24-digit ids included).
std::optional<std::int64_t> TxnIdMillis(std::string_view id);

}  // namespace litetx::engine
