#include "engine/txn_id.h"

#include <chrono>
#include <cstdint>
#include <random>

namespace litetx::engine {

std::string NewTxnId() {
  // One generator per thread, seeded from the OS: no lock on the commit path.
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(),
                      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937_64(seq);
  }();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(24, '0');
  std::uint64_t a = rng(), b = rng();
  for (int i = 15; i >= 0; --i, a >>= 4) id[i] = kHex[a & 0xf];
  for (int i = 23; i >= 16; --i, b >>= 4) id[i] = kHex[b & 0xf];
  return id;
}

}  // namespace litetx::engine
