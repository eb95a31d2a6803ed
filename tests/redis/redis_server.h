// tests/redis/redis_server.h — redis-server processes for tests: a server started on a free
// 127.0.0.1 port in a temporary directory, stopped (and the directory removed) when the object
// is destroyed, and killed with the test process (PR_SET_PDEATHSIG).
#pragma once

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace ltxtest {

// The path of redis-server, or empty.
std::string RedisServerPath();

// The path of redis-cli, or empty.
std::string RedisCliPath();

// The first executable called `name` in PATH (or /usr/bin:/usr/local/bin), or empty.
std::string FindInPath(const std::string& name);

// A loopback TCP port nobody listens on right now.
int FreePort();

// Starts `args` (args[0] is the executable's path) as a child process with stdout and stderr
// appended to `log` and stdin from /dev/null; the child dies with this process
// (PR_SET_PDEATHSIG). Returns its pid, or -1 if fork failed.
pid_t SpawnLogged(std::vector<std::string> args, const std::string& log);

struct ReplyFree {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using RawReply = std::unique_ptr<redisReply, ReplyFree>;

// The text of a status, error or string reply; empty for null or other types.
std::string ReplyText(const redisReply* r);

// How a RedisServer is started. The defaults are those of the single-server tests: no
// persistence at all.
struct RedisServerOptions {
  bool appendonly = false;
  std::string appendfsync = "everysec";  // "always" or "everysec" (with appendonly)
  // Cluster mode: cluster-enabled yes, nodes.conf in the server's directory, the cluster bus on
  // a second free port (cluster-port), the given node timeout.
  bool cluster = false;
  int cluster_node_timeout_ms = 1000;
  // Appended to the command line as given, e.g. {"--maxmemory", "10mb"}.
  std::vector<std::string> extra_args;
};

// A redis-server child process in its own temporary directory. Stop, Kill9 and the destructor
// kill it (SIGKILL, after SIGCONT); the destructor also removes the directory; the child also
// dies with this process (PR_SET_PDEATHSIG). Every wait is bounded.
class RedisServer {
 public:
  RedisServer() = default;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer();

  // Starts the server in a new temporary directory on a free port and waits (at most 5 s)
  // until it answers PING. Empty on success, else why not.
  std::string Start(RedisServerOptions options = {});

  // SIGKILL (after SIGCONT) and reap; the directory and its files stay. Safe when not running.
  void Stop();
  void Kill9() { Stop(); }

  // Starts the server again on the same port(s), in the same directory, with the same options,
  // and waits (at most `timeout`) until it answers PING and has finished loading its data
  // (INFO persistence loading:0). Empty on success, else why not.
  std::string Restart(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }
  int bus_port() const { return bus_port_; }  // cluster mode only, else -1
  const RedisServerOptions& options() const { return options_; }

  bool Ping() const;

  // Runs one command on a fresh connection (binary-safe arguments, 1 s connect and reply
  // timeout); null on an I/O error.
  RawReply Command(std::vector<std::string> args) const;
  RawReply Command(const char* one) const { return Command(std::vector<std::string>{one}); }
  // Runs several commands one after another on ONE fresh connection (what WAIT needs: it
  // counts the replicas that have this connection's last write); stops at an I/O error, whose
  // null reply is the last element.
  std::vector<RawReply> Commands(const std::vector<std::vector<std::string>>& commands) const;

  // A field of INFO <section> ("role" of "replication"), or empty if absent or unreachable.
  std::string InfoField(const std::string& section, const std::string& field) const;

 private:
  // Forks and execs redis-server on port_/bus_port_ and waits for PING (and loading:0) until
  // `deadline`. False if the child exited or the deadline passed (the child is then killed).
  bool Launch(std::chrono::steady_clock::time_point deadline);

  RedisServerOptions options_;
  std::string dir_;
  int port_ = -1;
  int bus_port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace ltxtest
