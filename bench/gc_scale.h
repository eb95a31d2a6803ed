// bench/gc_scale.h — the collector at service scale (`litetx gc --bench`): what one collector
// pass costs on a store holding many outcome markers, many tombstones and a few abandoned
// transactions, before and after folding the markers into outcome pages.
//
// Steps, on an empty store (the record and outcome collections must be empty):
//  1. setup: `markers` outcome markers written into the record collection as finished
//     transactions leave them (ids spread over the last `span`, as a service's ids of the
//     outcome retention are), `tombstones` tombstones in collection `<prefix>.tomb`, and
//     `abandoned` transactions of two inserts each whose coordinator died after its applies;
//  2. "before": one pass of a collector that does not fold (as releases before outcome pages
//     ran), sweeping `<prefix>.tomb` with the default sweep budget: it reads every marker;
//  3. migration: passes of a folding collector until no marker is left in the record
//     collection (the one-off cost of an upgraded store);
//  4. "after": `abandoned` more abandoned transactions, then one pass of a folding collector
//     without a sweep, then one with the sweep, then one with nothing to do;
//  5. optionally, a backlog of abandoned transactions settled by one collector, then by several
//     sharing the record collection (CollectorOptions::share_partitions).
// Each pass is timed and the documents it read are counted (every Get, every document a Scan
// returned). Storage is counted as bytes of ids and JSON values of the collections.
//
// Thread safety: one call at a time per store.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/json/object.hpp>

#include "litetx/status.h"
#include "litetx/store.h"

namespace litetx::bench {

struct GcScaleOptions {
  std::uint64_t markers = 1'000'000;   // outcome markers written in setup
  std::uint64_t tombstones = 100'000;  // tombstones written in setup, younger than the retention
  std::uint64_t tombstones_due = 100;  // tombstones written in setup, past the retention (24 h)
  std::uint64_t abandoned = 100;       // abandoned transactions before each measured pass
  std::chrono::milliseconds span{std::chrono::hours(1)};  // the markers' ids spread over it
  std::string prefix = "bench.gc";     // collections <prefix>.tomb and <prefix>.live
  bool progress = false;               // a line on stderr per step
  // Setup writes the outcomes straight into outcome pages (as a collector that folds as it goes
  // leaves them) instead of markers; the "before" pass and the migration are skipped.
  bool folded_setup = false;
  // false: stop after the "before" pass (no migration, no "after" passes, no backlog).
  bool migrate = true;
  // Step 5 (when run_collectors is set and backlog > 0): `backlog` abandoned transactions are
  // made, then run_collectors(1) settles them and returns the seconds it took; then as many
  // again, settled by run_collectors(collectors). The caller decides what a collector is (a
  // process of its own, or a thread): each runs passes with share_partitions until none is left.
  std::uint64_t backlog = 0;
  int collectors = 2;
  std::function<Result<double>(int collectors)> run_collectors;
};

// Runs the steps above on `store` and returns the report (JSON), or kInvalidArgument (the
// store's record or outcome collection is not empty), or the first store error.
Result<boost::json::object> RunGcScale(const std::shared_ptr<Store>& store,
                                       const GcScaleOptions& options);

}  // namespace litetx::bench
