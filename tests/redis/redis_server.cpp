#include "redis/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

namespace ltxtest {

std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/usr/local/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path p = std::filesystem::path(dirs.substr(start, end - start)) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
    start = end + 1;
  }
  return {};
}

std::string RedisServerPath() { return FindInPath("redis-server"); }
std::string RedisCliPath() { return FindInPath("redis-cli"); }

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string ReplyText(const redisReply* r) {
  if (r == nullptr) return {};
  if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR ||
      r->type == REDIS_REPLY_STRING) {
    return std::string(r->str, r->len);
  }
  return {};
}

RedisServer::~RedisServer() {
  Stop();
  if (!dir_.empty() && std::getenv("LITETX_KEEP_REDIS_DIRS") != nullptr) {
    std::fprintf(stderr, "redis-server directory kept: %s\n", dir_.c_str());
  } else if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string RedisServer::Start(RedisServerOptions options) {
  if (!dir_.empty()) return "RedisServer::Start called twice (use Restart)";
  const std::string exe = RedisServerPath();
  if (exe.empty()) return "redis-server not found in PATH (Debian: apt-get install redis-server)";
  if (options.appendfsync != "always" && options.appendfsync != "everysec") {
    return "appendfsync must be always or everysec";
  }
  options_ = std::move(options);
  char tmpl[] = "/tmp/litetx-redis-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
  dir_ = tmpl;
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = FreePort();
    if (port_ <= 0) return "no free port";
    if (options_.cluster) {
      bus_port_ = FreePort();
      if (bus_port_ <= 0) return "no free port";
      if (bus_port_ == port_) continue;
    }
    if (Launch(std::chrono::steady_clock::now() + std::chrono::seconds(5))) return {};
  }
  return "redis-server did not answer PING (see " + dir_ + "/redis.log)";
}

bool RedisServer::Launch(std::chrono::steady_clock::time_point deadline) {
  const std::string exe = RedisServerPath();
  if (exe.empty()) return false;
  std::vector<std::string> args = {exe,       "--port",      std::to_string(port_),
                                   "--bind",  "127.0.0.1",   "--dir",
                                   dir_,      "--save",      "",
                                   "--daemonize", "no",      "--appendonly",
                                   options_.appendonly ? "yes" : "no"};
  if (options_.appendonly) {
    args.insert(args.end(), {"--appendfsync", options_.appendfsync});
  }
  if (options_.cluster) {
    args.insert(args.end(),
                {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf",
                 "--cluster-port", std::to_string(bus_port_), "--cluster-node-timeout",
                 std::to_string(options_.cluster_node_timeout_ms),
                 // A replica attaching (at creation, after a restart) syncs at once instead of
                 // after the default 5 s wait for more replicas.
                 "--repl-diskless-sync-delay", "0"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  const pid_t pid = SpawnLogged(std::move(args), dir_ + "/redis.log");
  if (pid < 0) return false;
  pid_ = pid;
  while (std::chrono::steady_clock::now() < deadline) {
    // PING answers -LOADING while the data is loaded, so a PONG means loading has ended; the
    // INFO check makes that explicit.
    if (Ping() && InfoField("persistence", "loading") == "0") return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken meanwhile?
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stop();
  return false;
}

std::string RedisServer::Restart(std::chrono::milliseconds timeout) {
  if (dir_.empty()) return "RedisServer::Restart before Start";
  Stop();
  if (Launch(std::chrono::steady_clock::now() + timeout)) return {};
  return "redis-server did not restart on port " + std::to_string(port_) + " within " +
         std::to_string(timeout.count()) + " ms (see " + dir_ + "/redis.log)";
}

void RedisServer::Stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

void RedisServer::Pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}
void RedisServer::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

bool RedisServer::Ping() const {
  RawReply r(Command("PING"));
  return r != nullptr && r->type == REDIS_REPLY_STATUS;
}

pid_t SpawnLogged(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;  // the parent, or -1
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

RawReply RedisServer::Command(std::vector<std::string> args) const {
  std::vector<RawReply> r = Commands({std::move(args)});
  return r.empty() ? nullptr : std::move(r.front());
}

std::vector<RawReply> RedisServer::Commands(
    const std::vector<std::vector<std::string>>& commands) const {
  std::vector<RawReply> out;
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (c == nullptr) return out;
  if (c->err != 0) {
    redisFree(c);
    return out;
  }
  redisSetTimeout(c, tv);
  for (const auto& args : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    out.emplace_back(r);
    if (r == nullptr) break;
  }
  redisFree(c);
  return out;
}

std::string RedisServer::InfoField(const std::string& section, const std::string& field) const {
  RawReply r = Command({"INFO", section});
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return {};
  std::istringstream in(std::string(r->str, r->len));
  std::string line;
  const std::string want = field + ":";
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.compare(0, want.size(), want) == 0) return line.substr(want.size());
  }
  return {};
}

}  // namespace ltxtest
