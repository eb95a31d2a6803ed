// stores/fault_injecting_store.cpp — FaultInjectingStore: a Store wrapper that injects
// transient failures, lost replies, delays and crashes, deterministically from a seed.
//
// Every call runs the same steps: throw if a kThrow crash already happened; take the call's
// index and choose its fault (the rule, or one random draw); sleep a random delay; then either
// fail at once (kTransient) or call the target, count a successful write (which may crash) and
// possibly hide its reply (kLostReply). A Batch runs these steps per operation, with one delay
// for the whole batch, and sends the surviving operations as one Batch unless the crash write
// may be among them (then one at a time). The mutex guards only the random source and the
// counters; it is never held while calling the target, the rule or the clock.
#include "litetx/fault_injecting_store.h"

#include <cassert>
#include <cstdlib>
#include <utility>

namespace litetx {
namespace {

bool IsWrite(StoreOp op) {
  return op == StoreOp::kCreate || op == StoreOp::kReplace || op == StoreOp::kErase;
}

StoreOp OpOf(BatchOp::Type type) {
  switch (type) {
    case BatchOp::Type::kGet: return StoreOp::kGet;
    case BatchOp::Type::kCreate: return StoreOp::kCreate;
    case BatchOp::Type::kReplace: return StoreOp::kReplace;
    case BatchOp::Type::kErase: return StoreOp::kErase;
  }
  return StoreOp::kGet;
}

// Reads never lose replies: a kLostReply chosen for one is treated as kNone.
Fault Sanitize(StoreOp op, Fault f) {
  return (f == Fault::kLostReply && !IsWrite(op)) ? Fault::kNone : f;
}

// A uniform double in [0, 1) from one 64-bit draw; the same on every standard library (unlike
// std::uniform_real_distribution), so a logged seed replays anywhere.
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// The fault for probabilities `transient` and `lost` given a uniform draw `u`.
Fault FromDraw(double u, double transient, double lost) {
  if (u < transient) return Fault::kTransient;
  if (u < transient + lost) return Fault::kLostReply;
  return Fault::kNone;
}

std::string Describe(StoreOp op, const Key& key) {
  return std::string(StoreOpName(op)) + " " + key.collection + "/" + key.id;
}

Status TransientStatus(StoreOp op, const Key& key) {
  return Status::Unavailable("injected transient fault: " + Describe(op, key));
}

Status LostReplyStatus(StoreOp op, const Key& key) {
  return Status::Unknown("injected lost reply (the write landed): " + Describe(op, key));
}

// Counters are bumped under the store's mutex; the caller passes both in.
void Increment(std::mutex& mu, std::uint64_t& counter) {
  std::lock_guard<std::mutex> lock(mu);
  ++counter;
}

std::shared_ptr<Store> CheckedTarget(std::shared_ptr<Store> target) {
  assert(target != nullptr && "FaultInjectingStore needs a target");
  return target;
}

FaultOptions WithClock(FaultOptions options) {
  if (!options.clock) options.clock = SystemClock();
  return options;
}

}  // namespace

const char* StoreOpName(StoreOp op) {
  switch (op) {
    case StoreOp::kGet: return "get";
    case StoreOp::kCreate: return "create";
    case StoreOp::kReplace: return "replace";
    case StoreOp::kErase: return "erase";
    case StoreOp::kScan: return "scan";
    case StoreOp::kListCollections: return "list_collections";
  }
  return "unknown";
}

FaultInjectingStore::FaultInjectingStore(std::shared_ptr<Store> target, FaultOptions options)
    : ForwardingStore(CheckedTarget(std::move(target))),
      options_(WithClock(std::move(options))),
      rng_(options_.seed) {}

// ---- operations -------------------------------------------------------------------------------

std::vector<BatchResult> FaultInjectingStore::Batch(std::span<const BatchOp> ops) {
  ThrowIfCrashed();
  std::vector<BatchResult> out(ops.size());
  if (ops.empty()) return out;
  // Each operation is decided on its own (its own call index, its own draw), in order.
  std::vector<Fault> faults(ops.size());
  std::vector<std::size_t> survivors;  // indexes of the operations sent to the target
  survivors.reserve(ops.size());
  std::uint64_t surviving_writes = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    faults[i] = Decide(OpOf(ops[i].type), ops[i].key);
    if (faults[i] == Fault::kTransient) {
      out[i].status = TransientStatus(OpOf(ops[i].type), ops[i].key);
    } else {
      survivors.push_back(i);
      if (ops[i].is_write()) ++surviving_writes;
    }
  }
  Delay();  // one round trip for the whole batch
  if (survivors.empty()) return out;

  // A landed write: counted, possibly the crash write (Landed throws or exits), its reply
  // possibly lost.
  auto settle = [&](std::size_t i, BatchResult r) {
    const BatchOp& op = ops[i];
    if (op.is_write() && r.status.ok()) {
      if (faults[i] == Fault::kLostReply) Increment(mu_, lost_);
      Landed();
      if (faults[i] == Fault::kLostReply) {
        r.status = LostReplyStatus(OpOf(op.type), op.key);
        r.revision = 0;
      }
    }
    out[i] = std::move(r);
  };

  bool crash_may_fall_inside = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    crash_may_fall_inside = !crashed_ && options_.crash_after_writes != 0 &&
                            options_.crash_after_writes > writes_ &&
                            options_.crash_after_writes - writes_ <= surviving_writes;
  }
  if (crash_may_fall_inside) {
    // One operation at a time, in order, so that the operations after the crash write never
    // reach the target.
    for (std::size_t i : survivors) {
      std::vector<BatchResult> one = target().Batch(ops.subspan(i, 1));
      settle(i, std::move(one.at(0)));
    }
  } else {
    std::vector<BatchOp> send;
    send.reserve(survivors.size());
    for (std::size_t i : survivors) send.push_back(ops[i]);
    std::vector<BatchResult> got = target().Batch(send);
    for (std::size_t j = 0; j < survivors.size(); ++j) settle(survivors[j], std::move(got.at(j)));
  }
  ThrowIfCrashed();  // another thread crashed the "process" meanwhile: the replies are never seen
  return out;
}

Result<std::optional<StoredDocument>> FaultInjectingStore::Get(const Key& key) {
  ThrowIfCrashed();
  Fault f = Decide(StoreOp::kGet, key);
  Delay();
  if (f == Fault::kTransient) return TransientStatus(StoreOp::kGet, key);
  auto r = target().Get(key);
  ThrowIfCrashed();  // another thread crashed the "process" meanwhile: the reply is never seen
  return r;
}

Result<ScanPage> FaultInjectingStore::Scan(std::string_view collection, std::string_view cursor,
                                           std::size_t limit) {
  ThrowIfCrashed();
  Key key{std::string(collection), ""};  // Scan has no document: the rule sees {collection, ""}
  Fault f = Decide(StoreOp::kScan, key);
  Delay();
  if (f == Fault::kTransient) {
    return Status::Unavailable("injected transient fault: scan " + std::string(collection));
  }
  auto r = target().Scan(collection, cursor, limit);
  ThrowIfCrashed();
  return r;
}

Result<CollectionPage> FaultInjectingStore::ListCollections(std::string_view cursor,
                                                           std::size_t limit) {
  ThrowIfCrashed();
  Fault f = Decide(StoreOp::kListCollections, Key{});  // no document: the rule sees {"", ""}
  Delay();
  if (f == Fault::kTransient) {
    return Status::Unavailable("injected transient fault: list collections");
  }
  auto r = target().ListCollections(cursor, limit);
  ThrowIfCrashed();
  return r;
}

Result<Revision> FaultInjectingStore::Create(const Key& key, const boost::json::object& value) {
  ThrowIfCrashed();
  Fault f = Decide(StoreOp::kCreate, key);
  Delay();
  if (f == Fault::kTransient) return TransientStatus(StoreOp::kCreate, key);
  auto r = target().Create(key, value);
  if (!r.ok()) {  // nothing landed: the target's error goes back unchanged
    ThrowIfCrashed();
    return r;
  }
  if (f == Fault::kLostReply) Increment(mu_, lost_);
  Landed();
  ThrowIfCrashed();
  if (f == Fault::kLostReply) return LostReplyStatus(StoreOp::kCreate, key);
  return r;
}

Result<Revision> FaultInjectingStore::Replace(const Key& key, Revision expected,
                                              const boost::json::object& value) {
  ThrowIfCrashed();
  Fault f = Decide(StoreOp::kReplace, key);
  Delay();
  if (f == Fault::kTransient) return TransientStatus(StoreOp::kReplace, key);
  auto r = target().Replace(key, expected, value);
  if (!r.ok()) {
    ThrowIfCrashed();
    return r;
  }
  if (f == Fault::kLostReply) Increment(mu_, lost_);
  Landed();
  ThrowIfCrashed();
  if (f == Fault::kLostReply) return LostReplyStatus(StoreOp::kReplace, key);
  return r;
}

Status FaultInjectingStore::Erase(const Key& key, Revision expected) {
  ThrowIfCrashed();
  Fault f = Decide(StoreOp::kErase, key);
  Delay();
  if (f == Fault::kTransient) return TransientStatus(StoreOp::kErase, key);
  Status s = target().Erase(key, expected);
  if (!s.ok()) {
    ThrowIfCrashed();
    return s;
  }
  if (f == Fault::kLostReply) Increment(mu_, lost_);
  Landed();
  ThrowIfCrashed();
  if (f == Fault::kLostReply) return LostReplyStatus(StoreOp::kErase, key);
  return s;
}

// ---- counters ---------------------------------------------------------------------------------

std::uint64_t FaultInjectingStore::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

std::uint64_t FaultInjectingStore::transient_faults() const {
  std::lock_guard<std::mutex> lock(mu_);
  return transient_;
}

std::uint64_t FaultInjectingStore::lost_replies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

bool FaultInjectingStore::crashed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return crashed_;
}

void FaultInjectingStore::ArmCrash(std::uint64_t crash_after_writes) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.crash_after_writes = crash_after_writes;
  crashed_ = false;
}

// ---- internals --------------------------------------------------------------------------------

Fault FaultInjectingStore::Decide(StoreOp op, const Key& key) {
  std::uint64_t index = 0;
  Fault f = Fault::kNone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = ++calls_;
    if (!options_.rule) {
      f = FromDraw(Uniform01(rng_), options_.transient_probability,
                   IsWrite(op) ? options_.lost_reply_probability : 0.0);
    }
  }
  // The rule is user code: run it unlocked so it may call writes(), crashed() and so on.
  if (options_.rule) f = options_.rule(op, key, index);
  f = Sanitize(op, f);
  if (f == Fault::kTransient) Increment(mu_, transient_);
  return f;
}

void FaultInjectingStore::Delay() {
  if (options_.round_trip_delay.count() > 0) options_.clock->SleepFor(options_.round_trip_delay);
  if (options_.max_delay.count() <= 0) return;
  // count() is a positive int64, so bound + 1 cannot overflow.
  auto bound = static_cast<std::uint64_t>(options_.max_delay.count());
  std::uint64_t us = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    us = rng_() % (bound + 1);  // [0, max_delay]; the modulo bias is negligible here
  }
  options_.clock->SleepFor(std::chrono::microseconds(static_cast<std::int64_t>(us)));
}

void FaultInjectingStore::ThrowIfCrashed() {
  std::uint64_t at = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!crashed_) return;
    at = options_.crash_after_writes;
  }
  throw SimulatedCrash(at);
}

void FaultInjectingStore::Landed() {
  std::uint64_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = ++writes_;
    if (crashed_ || options_.crash_after_writes == 0 || index != options_.crash_after_writes) {
      return;
    }
    crashed_ = true;
  }
  if (options_.crash_mode == CrashMode::kExit) std::_Exit(options_.exit_code);
  throw SimulatedCrash(index);
}

}  // namespace litetx
