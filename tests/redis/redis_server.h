// tests/redis/redis_server.h — redis-server processes for tests: a server started on a free
// 127.0.0.1 port in a temporary directory, stopped (and the directory removed) when the object
// is destroyed, and killed with the test process (PR_SET_PDEATHSIG).
#pragma once

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <memory>
#include <string>
#include <vector>

namespace ltxtest {

// The path of redis-server, or empty.
std::string RedisServerPath();

// A loopback TCP port nobody listens on right now.
int FreePort();

struct ReplyFree {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using RawReply = std::unique_ptr<redisReply, ReplyFree>;

// A redis-server child process in its own temporary directory. Killed (SIGKILL, after SIGCONT)
// by Stop and the destructor, which also removes the directory; the child also dies with this
// process (PR_SET_PDEATHSIG).
class RedisServer {
 public:
  RedisServer() = default;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer() {
    Stop();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  // Starts the server and waits (at most 5 s) until it answers PING. Empty on success, else
  // why not.
  std::string Start() {
    const std::string exe = RedisServerPath();
    if (exe.empty()) return "redis-server not found in PATH (Debian: apt-get install redis-server)";
    char tmpl[] = "/tmp/litetx-redis-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
    dir_ = tmpl;
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = FreePort();
      if (port_ <= 0) return "no free port";
      const std::string port = std::to_string(port_);
      const std::string log = dir_ + "/redis.log";
      const pid_t parent = ::getpid();
      pid_t pid = ::fork();
      if (pid < 0) return "fork failed";
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
          ::dup2(fd, 1);
          ::dup2(fd, 2);
        }
        ::execl(exe.c_str(), exe.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1",
                "--dir", dir_.c_str(), "--save", "", "--appendonly", "no", "--daemonize", "no",
                static_cast<char*>(nullptr));
        ::_exit(127);
      }
      pid_ = pid;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (std::chrono::steady_clock::now() < deadline) {
        if (Ping()) return {};
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken meanwhile?
          pid_ = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      Stop();
    }
    return "redis-server did not answer PING (see " + dir_ + "/redis.log)";
  }

  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }
  void Pause() { ::kill(pid_, SIGSTOP); }
  void Resume() { ::kill(pid_, SIGCONT); }

  int port() const { return port_; }

  bool Ping() const {
    RawReply r(Command("PING"));
    return r != nullptr && r->type == REDIS_REPLY_STATUS;
  }

  // Runs one command on a fresh connection (binary-safe arguments); null on an I/O error.
  RawReply Command(std::vector<std::string> args) const {
    timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c == nullptr) return nullptr;
    if (c->err != 0) {
      redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, tv);
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    redisFree(c);
    return RawReply(r);
  }
  RawReply Command(const char* one) const { return Command(std::vector<std::string>{one}); }

 private:
  std::string dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace ltxtest
