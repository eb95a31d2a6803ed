// tools/signals.h — SIGINT and SIGTERM in the `litetx` command-line tool, handled alike.
//
// Both signals are blocked in every thread and received by one watcher thread (sigwait), so
// no work is done in a signal handler. What a signal does:
//   - Before a command has called CatchSignals (parsing, and the read-only commands get, scan
//     and txns): the process exits at once with 128 + the signal number (130 for SIGINT, 143
//     for SIGTERM). Nothing has been written, so nothing is left behind.
//   - After CatchSignals (apply, bench, demo, gc): the first signal is noted (a line on stderr
//     says so: "litetx: SIGINT received: finishing the current step..."); the command
//     finishes the step it is in (a transaction runs to its end: it commits or rolls back),
//     cleans up, and exits with 130 or 143 (gc without --once exits 0: see cmd_gc.cpp).
//   - A second signal exits at once, with 130 or 143 again, after one line on stderr. What the
//     first signal's cleanup had not finished is left to the collector (`litetx gc`), which
//     settles abandoned transactions after their lease like those of a crashed process.
//
// Thread safety: every function may be called from any thread. InstallSignalHandling (and so
// CatchSignals the first time) must run before the process starts any thread of its own:
// threads inherit the blocked signals only from the thread that creates them.
#pragma once

#include <chrono>
#include <functional>

namespace litetx::cli {

// Exit codes after a signal (128 + the signal number), documented in docs/cli.md.
inline constexpr int kExitSigint = 130;
inline constexpr int kExitSigterm = 143;

// Blocks SIGINT and SIGTERM in the calling thread and starts the watcher thread. Idempotent.
// main() calls it first, so that every command (get, scan and txns included) exits 130/143.
void InstallSignalHandling();

// From now on the first signal is noted instead of ending the process (installs the handling
// if InstallSignalHandling has not run). Call it before the command starts any thread.
void CatchSignals();

// The first signal received (SIGINT or SIGTERM), or 0.
int Interrupted();
// "SIGINT", "SIGTERM" or "" for Interrupted().
const char* InterruptedName();
// 128 + Interrupted() if a signal was noted, else `code`.
int ExitAfterSignal(int code);

// Waits until a signal has been noted or `done()` returns true (it is checked when the wait
// starts and whenever Wake() is called) or `timeout` passes. Returns Interrupted().
int WaitForSignal(const std::function<bool()>& done, std::chrono::milliseconds timeout);
// Waits for a signal only.
int WaitForSignal();
// Makes WaitForSignal check its `done` again.
void Wake();

}  // namespace litetx::cli
