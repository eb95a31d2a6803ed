// tools/signals.cpp — see signals.h.
#include "tools/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace litetx::cli {
namespace {

std::atomic<int> g_signal{0};        // the first signal noted
std::atomic<bool> g_catching{false};  // CatchSignals was called
std::once_flag g_installed;
std::mutex g_mu;
std::condition_variable g_cv;

sigset_t Signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

const char* Name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : ""; }

// Ends the process with 128 + sig; `note` (may be empty) goes to stderr first. Output still in
// stdio buffers is dropped: another thread may be in the middle of writing it.
[[noreturn]] void ExitNow(int sig, const std::string& note) {
  if (!note.empty()) {
    std::size_t done = 0;
    while (done < note.size()) {
      ssize_t n = ::write(STDERR_FILENO, note.data() + done, note.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
  }
  ::_exit(128 + sig);
}

void Watch() {
  const sigset_t set = Signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    int none = 0;
    if (!g_signal.compare_exchange_strong(none, sig)) {
      ExitNow(sig, std::string("litetx: second signal (") + Name(sig) +
                       "): exiting at once; `litetx gc` settles what is left after its lease\n");
    }
    if (!g_catching.load()) ExitNow(sig, "");
    const std::string note = std::string("litetx: ") + Name(sig) +
                             " received: finishing the current step, then exiting (a second "
                             "signal exits at once)\n";
    (void)!::write(STDERR_FILENO, note.data(), note.size());
    {
      std::lock_guard<std::mutex> lock(g_mu);  // a waiter between its check and its wait
    }
    g_cv.notify_all();
  }
}

}  // namespace

void InstallSignalHandling() {
  std::call_once(g_installed, [] {
    const sigset_t set = Signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(Watch).detach();
  });
}

void CatchSignals() {
  g_catching = true;
  InstallSignalHandling();
}

int Interrupted() { return g_signal.load(); }

const char* InterruptedName() { return Name(g_signal.load()); }

int ExitAfterSignal(int code) {
  const int sig = g_signal.load();
  return sig != 0 ? 128 + sig : code;
}

int WaitForSignal(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(g_mu);
  auto ready = [&] { return g_signal.load() != 0 || (done && done()); };
  if (timeout >= std::chrono::hours(24 * 365)) {
    g_cv.wait(lock, ready);
  } else {
    g_cv.wait_for(lock, timeout, ready);
  }
  return g_signal.load();
}

int WaitForSignal() { return WaitForSignal(nullptr, std::chrono::milliseconds::max()); }

void Wake() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
  }
  g_cv.notify_all();
}

}  // namespace litetx::cli
