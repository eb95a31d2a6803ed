// tests/tombstone_util.h — the set-up shared by the tombstone index tests
// (tombstone_index_test.cpp, tombstone_attack_test.cpp).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "test_util.h"

namespace ltxtest {

// A World whose engine has a 10 s lease and whose collectors keep tombstones 1 h and do not
// sweep: whatever they purge, they found through the tombstone index.
struct TombstoneWorld : World {
  static constexpr std::chrono::milliseconds kLease{10'000};
  static constexpr std::chrono::milliseconds kRetention{3'600'000};

  litetx::Options Eng() const {
    litetx::Options o = Opts();
    o.lease = kLease;
    return o;
  }
  litetx::CollectorOptions Gc(std::string name) const {
    litetx::CollectorOptions o;
    o.engine = Eng();
    o.name = std::move(name);
    o.tombstone_retention = kRetention;
    o.outcome_retention = std::chrono::hours(2);
    return o;
  }
  // Every document the well-formed entries name, entry id -> keys.
  std::map<std::string, std::set<std::string>> Index() { return TombstoneIndexOf(*mem); }
};

}  // namespace ltxtest
