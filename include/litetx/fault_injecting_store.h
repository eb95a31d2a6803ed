// litetx/fault_injecting_store.h — a Store wrapper that injects failures, for crash testing.
//
// Wraps any store. Seeded and deterministic: the same seed and the same sequence of calls
// inject the same faults (with several threads the interleaving decides the sequence). It can
//   (a) "crash" right after the k-th write lands (crash_after_writes = k): the write is applied
//       and then the process (kExit: std::_Exit, no cleanup) or the calling code (kThrow:
//       throws SimulatedCrash, which unwinds the coordinator so nothing after that write
//       happens) dies; later calls through a crashed store throw again;
//   (b) fail an operation with kUnavailable before it reaches the target (nothing written);
//   (c) apply a write and then lose its reply (kUnknown: the write landed);
//   (d) delay operations by up to max_delay (through the options' clock).
// Faults are chosen per call by `rule` if set, otherwise at random with the given
// probabilities. Reads (Get, Scan, ListCollections) may be failed transiently or delayed, never
// lose replies.
//
// Batch: every operation of a batch is one call of its own, in the order given: it takes its
// own call index, is decided by the rule (with its own StoreOp, key and index) or its own random
// draw, and is faulted and counted on its own (a transient fault fails that operation alone and
// the others go on; a lost reply lets that write land and reports it kUnknown). The delays
// (round_trip_delay and the random one up to max_delay) are slept once per batch, as one
// network round trip. The operations that were not failed transiently go to the target as ONE
// Batch call, keeping the target's batching, unless the crash write may be among them (the
// batch holds at least as many surviving writes as remain before crash_after_writes): then they
// go one at a time, in order, so that a crash falls in the middle of the batch exactly as
// between single calls: the writes up to and including the crash write land, the later
// operations never reach the target, and the crash throws or exits. With several threads the
// crash point counts the writes of every thread as they land, as for single calls.
//
// SimulatedCrash is the one exception litetx code may see: it is a test device, thrown only by
// this class in kThrow mode, and the engine is exception-safe against it (RAII only).
//
// Thread safety: safe from many threads (the random source and counters are locked).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>

#include "litetx/clock.h"
#include "litetx/forwarding_store.h"

namespace litetx {

enum class StoreOp : std::uint8_t { kGet, kCreate, kReplace, kErase, kScan, kListCollections };
const char* StoreOpName(StoreOp op);

enum class Fault : std::uint8_t {
  kNone,       // pass the call through
  kTransient,  // return kUnavailable without calling the target
  kLostReply,  // writes only: call the target, then return kUnknown if it succeeded
};

enum class CrashMode : std::uint8_t {
  kThrow,  // throw SimulatedCrash (in-process tests)
  kExit,   // std::_Exit(exit_code): the process dies without cleanup (shell/kill tests)
};

// Thrown in CrashMode::kThrow after the crash write landed, and by every later call.
class SimulatedCrash : public std::runtime_error {
 public:
  explicit SimulatedCrash(std::uint64_t write_index)
      : std::runtime_error("simulated crash after write " + std::to_string(write_index)),
        write_index_(write_index) {}
  std::uint64_t write_index() const { return write_index_; }

 private:
  std::uint64_t write_index_;
};

struct FaultOptions {
  // Seed of the random choices; log it to replay a failing run.
  std::uint64_t seed = 1;
  // Crash right after the k-th write (create, replace or erase; counted from 1) lands,
  // whatever its reply. Zero: never.
  std::uint64_t crash_after_writes = 0;
  // How the crash happens.
  CrashMode crash_mode = CrashMode::kThrow;
  // Exit status of the process in CrashMode::kExit.
  int exit_code = 86;
  // Probability that an operation fails with kUnavailable (nothing written).
  double transient_probability = 0.0;
  // Probability that a write lands but its reply is lost (kUnknown).
  double lost_reply_probability = 0.0;
  // Each call (a single operation, or a whole Batch) sleeps a random time in [0, max_delay]
  // through `clock` before it runs.
  std::chrono::microseconds max_delay{0};
  // Each call (a single operation, or a whole Batch) sleeps this long through `clock` before it
  // runs, as a network round trip would: a model of a networked store for benchmarks.
  std::chrono::microseconds round_trip_delay{0};
  // Clock used for delays; null means SystemClock().
  std::shared_ptr<Clock> clock;
  // If set, decides the fault of every call instead of the probabilities: it gets the
  // operation, the key ({collection, ""} for Scan, {"", ""} for ListCollections) and the
  // call's index (counted from 1 over all operations; each operation of a Batch is one).
  // Called without the store's lock, possibly from several threads at once: a rule with
  // mutable state must synchronise it.
  std::function<Fault(StoreOp op, const Key& key, std::uint64_t index)> rule;
};

class FaultInjectingStore final : public ForwardingStore {
 public:
  // REQUIRES: target != nullptr.
  FaultInjectingStore(std::shared_ptr<Store> target, FaultOptions options);

  Result<std::optional<StoredDocument>> Get(const Key& key) override;
  Result<Revision> Create(const Key& key, const boost::json::object& value) override;
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override;
  Status Erase(const Key& key, Revision expected) override;
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override;
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override;
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override;

  // Writes that reached the target and succeeded so far.
  std::uint64_t writes() const;
  // Faults injected so far, by kind.
  std::uint64_t transient_faults() const;
  std::uint64_t lost_replies() const;
  // True once the crash write has landed.
  bool crashed() const;
  // Changes the crash point (0: never) and clears the crashed state. The write count goes on:
  // pass writes() + k to crash after k more writes.
  void ArmCrash(std::uint64_t crash_after_writes);

 private:
  Fault Decide(StoreOp op, const Key& key);
  void Delay();
  void ThrowIfCrashed();
  // Called after a write landed: counts it and crashes if it was the k-th.
  void Landed();

  FaultOptions options_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::uint64_t calls_ = 0;
  std::uint64_t writes_ = 0;
  std::uint64_t transient_ = 0;
  std::uint64_t lost_ = 0;
  bool crashed_ = false;
};

}  // namespace litetx
