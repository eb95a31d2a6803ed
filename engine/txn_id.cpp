// Transaction ids: a partition digit and 60 bits from a per-thread xoshiro256** generator
// seeded with 256 bits from the kernel's random source (getrandom(2)), around the wall-clock
// millisecond of the id's making.
//
// Each thread has its own generator, so the commit path takes no lock and makes no system
// call (the wall clock is read through the vDSO). Two threads or two processes draw from
// independently seeded generators, so their ids coincide only with the probability of two
// random 64-bit values drawn in the same millisecond. fork() copies the calling thread's
// generator into the child, which would then draw the parent's next ids: a
// pthread_atfork handler bumps a generation counter in the child, and a thread whose generator
// was seeded in an older generation seeds it again from the kernel before its next id. (Should
// the handler fail to register, the generator is instead reseeded whenever the process id
// differs from the one that seeded it.) A child made by a raw clone(2) system call, which runs
// no fork handlers, is not covered.
//
// Drawing the id bytes straight from getrandom(2) would also be correct, but costs about
// 75 ns per id on Debian 12 (no vDSO getrandom in its glibc), against a few ns here.
#include "engine/txn_id.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace litetx::engine {

namespace {


// Bumped in a child process right after fork(): generators of an older generation are stale.
std::atomic<std::uint64_t> fork_generation{0};

void OnForkChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

struct Source {
  std::uint64_t generation = ~std::uint64_t{0};  // matches no generation: seeded at first use
  pid_t pid = 0;                                 // the process that seeded it
  std::uint64_t state[4] = {};                   // xoshiro256**
};

thread_local Source source;

// Fills `out` from the kernel: getrandom(2), or /dev/urandom where that system call is
// missing or refused. False if neither works.
bool KernelRandom(unsigned char* out, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::getrandom(out + got, size - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (got == size) return true;
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  while (got < size) {
    ssize_t n = ::read(fd, out + got, size - got);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (!(n < 0 && errno == EINTR)) {
      break;
    }
  }
  ::close(fd);
  return got == size;
}

// Last resort when the kernel gives no random bytes: splitmix64 over the time, the process,
// the thread and a process-wide counter. Unique in practice, not unpredictable.
void FallbackRandom(unsigned char* out, std::size_t size) {
  static std::atomic<std::uint64_t> counter{0};
  const auto wall = std::chrono::system_clock::now().time_since_epoch().count();
  const auto mono = std::chrono::steady_clock::now().time_since_epoch().count();
  std::uint64_t x = static_cast<std::uint64_t>(wall) ^ (static_cast<std::uint64_t>(mono) << 17) ^
                    (static_cast<std::uint64_t>(::getpid()) << 40) ^
                    reinterpret_cast<std::uintptr_t>(&source) ^
                    (counter.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ULL);
  for (std::size_t i = 0; i < size; i += 8) {
    x += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    for (std::size_t k = 0; k < 8 && i + k < size; ++k) {
      out[i + k] = static_cast<unsigned char>(z >> (8 * k));
    }
  }
}

// True once the fork handler is registered. Until then (or if registering failed) a generator
// is also reseeded when the process id changed since it was seeded, at one getpid() per id.
std::atomic<bool> fork_handler{false};

void Seed(Source& s, std::uint64_t generation) {
  static const bool registered = [] {
    const bool ok = ::pthread_atfork(nullptr, nullptr, &OnForkChild) == 0;
    fork_handler.store(ok, std::memory_order_relaxed);
    return ok;
  }();
  (void)registered;
  auto* bytes = reinterpret_cast<unsigned char*>(s.state);
  if (!KernelRandom(bytes, sizeof s.state)) FallbackRandom(bytes, sizeof s.state);
  if ((s.state[0] | s.state[1] | s.state[2] | s.state[3]) == 0) s.state[0] = 1;  // not all zero
  s.generation = generation;
  s.pid = ::getpid();
}

std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

std::uint64_t Next(Source& s) {
  std::uint64_t* t = s.state;
  const std::uint64_t result = Rotl(t[1] * 5, 7) * 9;
  const std::uint64_t u = t[1] << 17;
  t[2] ^= t[0];
  t[3] ^= t[1];
  t[1] ^= t[2];
  t[0] ^= t[3];
  t[2] ^= u;
  t[3] = Rotl(t[3], 45);
  return result;
}

}  // namespace

std::string NewTxnId() {
  Source& s = source;
  const std::uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  if (s.generation != generation ||
      (!fork_handler.load(std::memory_order_relaxed) && s.pid != ::getpid())) {
    Seed(s, generation);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(kTxnIdDigits, '0');
  std::uint64_t a = Next(s);
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  std::uint64_t ms = wall < 0 ? 0 : static_cast<std::uint64_t>(wall);
  id[0] = kHex[a & 0xf];  // the partition
  a >>= 4;
  for (std::size_t i = kTxnIdTimeDigits; i >= 1; --i, ms >>= 4) id[i] = kHex[ms & 0xf];
  for (std::size_t i = kTxnIdDigits - 1; i > kTxnIdTimeDigits; --i, a >>= 4) id[i] = kHex[a & 0xf];
  return id;
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int TxnIdPartition(std::string_view id) {
  return id.empty() ? -1 : HexValue(id.front());
}

std::optional<std::int64_t> TxnIdMillis(std::string_view id) {
  if (id.size() != kTxnIdDigits) return std::nullopt;
  std::int64_t ms = 0;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const int v = HexValue(id[i]);
    if (v < 0) return std::nullopt;
    if (i >= 1 && i <= kTxnIdTimeDigits) ms = ms * 16 + v;
  }
  return ms;
}

}  // namespace litetx::engine
