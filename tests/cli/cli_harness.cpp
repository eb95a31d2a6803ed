// tests/cli/cli_harness.cpp — see cli_harness.h.
#include "cli_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

extern char** environ;

namespace litetx::clitest {
namespace json = boost::json;

boost::json::object RunResult::Json() const {
  json::error_code ec;
  json::value v = json::parse(out, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "stdout is not a JSON object: '" << out << "' (stderr: " << err << ")";
    return {};
  }
  return v.get_object();
}

std::vector<std::uint64_t> Versions(const RunResult& r) {
  std::vector<std::uint64_t> out;
  json::object o = r.Json();
  const json::value* v = o.if_contains("versions");
  if (v == nullptr || !v->is_array()) {
    ADD_FAILURE() << "no \"versions\" in '" << r.out << "' (stderr: " << r.err << ")";
    return out;
  }
  for (const json::value& e : v->get_array()) out.push_back(e.to_number<std::uint64_t>());
  return out;
}

std::uint64_t FirstVersionNow() {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return static_cast<std::uint64_t>(ms.count()) * 1000;
}

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// Writes all of `data` to `fd`, ignoring EPIPE (a child that exits early).
void WriteAll(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// One read of a ready pipe, appended to `sink`: the read's result (> 0 data, 0 end of file,
// < 0 an error, errno set; EINTR means try again).
ssize_t ReadInto(int fd, std::string* sink) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) sink->append(buf, static_cast<std::size_t>(n));
  return n;
}

// Children started and not yet finished; TearDown kills them if a test stopped early.
std::vector<pid_t>& Live() {
  static std::vector<pid_t> live;
  return live;
}

}  // namespace

Child Start(const std::vector<std::string>& args, const std::string& faults,
            const std::string& input) {
  static const bool ignore_sigpipe = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)ignore_sigpipe;
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {};
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);

  std::vector<std::string> argv_s = {LITETX_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LITETX_FAULTS=", 14) != 0) env_s.emplace_back(*e);
  }
  if (!faults.empty()) env_s.push_back("LITETX_FAULTS=" + faults);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  Child c;
  int rc = ::posix_spawn(&c.pid, LITETX_CLI_PATH, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << LITETX_CLI_PATH << ": " << std::strerror(rc);
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return {};
  }
  Live().push_back(c.pid);
  WriteAll(in[1], input);  // inputs are small: they fit in the pipe or the child reads them
  ::close(in[1]);
  c.out_fd = out[0];
  c.err_fd = err[0];
  return c;
}

bool WaitForStderr(Child& c, const std::string& text, std::chrono::milliseconds timeout) {
  if (c.pid < 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true;  // stdout is read too, so that a child writing much there never blocks
  for (;;) {
    if (c.err_read.find(text) != std::string::npos) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd fds[2] = {{out_open ? c.out_fd : -1, POLLIN, 0}, {c.err_fd, POLLIN, 0}};
    int ready = ::poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    std::string* sinks[2] = {&c.out_read, &c.err_read};
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ReadInto(fds[i].fd, sinks[i]);
      if (n > 0 || (n < 0 && errno == EINTR)) {
        continue;
      } else if (i == 0) {
        out_open = false;  // Finish reads its end-of-file again
      } else {
        return c.err_read.find(text) != std::string::npos;  // stderr closed
      }
    }
  }
}

RunResult Finish(Child c) {
  RunResult r;
  if (c.pid < 0) return r;
  r.out = std::move(c.out_read);
  r.err = std::move(c.err_read);
  struct pollfd fds[2] = {{c.out_fd, POLLIN, 0}, {c.err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ReadInto(fds[i].fd, sinks[i]);
      if (n > 0) {
        continue;
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::erase(Live(), c.pid);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

RunResult RunCli(const std::vector<std::string>& args, const std::string& faults,
              const std::string& input) {
  return Finish(Start(args, faults, input));
}

void CliTest::SetUp() {
  char tmpl[] = "/tmp/litetx-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
  dir_ = tmpl;
  path_ = dir_ + "/db";
  store_ = "lmdb:" + path_;
}

void CliTest::TearDown() {
  for (pid_t pid : Live()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  Live().clear();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> CliTest::With(std::vector<std::string> args) const {
  std::vector<std::string> all = {"--store", store_, "--sync", "nosync"};
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

RunResult CliTest::Cli(std::vector<std::string> args, const std::string& faults,
                       const std::string& input) const {
  return RunCli(With(std::move(args)), faults, input);
}

RunResult CliTest::Apply(const std::string& txn_json, const std::string& faults,
                         std::vector<std::string> extra) const {
  static int counter = 0;
  std::string file = dir_ + "/txn" + std::to_string(counter++) + ".json";
  std::ofstream(file, std::ios::binary) << txn_json;
  std::vector<std::string> args = {"apply", file};
  args.insert(args.end(), extra.begin(), extra.end());
  return Cli(std::move(args), faults);
}

json::object CliTest::Get(const std::string& collection, const std::string& id) const {
  RunResult r = Cli({"get", collection, id});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.Json();
}

std::string CliTest::ScanText(const std::string& collection) const {
  RunResult r = Cli({"scan", collection, "--include-deleted"});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

std::int64_t CliTest::Unsettled() const {
  RunResult r = Cli({"txns"});
  EXPECT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  std::int64_t n = 0;
  if (const json::value* list = o.if_contains("transactions"); list && list->is_array()) {
    for (const auto& t : list->get_array()) {
      const json::value* done = t.get_object().if_contains("done");
      if (done == nullptr || !done->is_bool() || !done->get_bool()) ++n;
    }
  } else {
    ADD_FAILURE() << "txns printed no list: " << r.out;
  }
  return n;
}

}  // namespace litetx::clitest
