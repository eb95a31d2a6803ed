// The manual page, the bash completion and docs/cli.md against what the tool really accepts.
//
// The list of commands and options comes from `--help` (CLI11's own formatter), a source
// independent of the generator in tools/docgen.cpp, so a command or option that the manual
// page, the completion or docs/cli.md leaves out makes a test fail.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {

// A command path ("gc", "collections list") and the long options `--help` lists for it.
struct CommandHelp {
  std::string path;
  std::vector<std::string> options;
};

// The subcommand names in the "Subcommands:" block of a --help text.
std::vector<std::string> SubcommandsOf(const std::string& help) {
  std::vector<std::string> out;
  const auto at = help.find("\nSubcommands:\n");
  if (at == std::string::npos) return out;
  std::istringstream in(help.substr(at + 14));
  std::string line;
  static const std::regex row(R"(^  ([a-z][a-z0-9-]*)\s.*)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.empty()) break;
    if (std::regex_match(line, m, row)) out.push_back(m[1]);
  }
  return out;
}

// The long options in the "Options:" block of a --help text.
std::vector<std::string> OptionsOf(const std::string& help) {
  std::vector<std::string> out;
  const auto at = help.find("\nOptions:\n");
  if (at == std::string::npos) return out;
  std::istringstream in(help.substr(at + 10));
  std::string line;
  static const std::regex opt(R"(--[a-z][a-z0-9-]*)");
  while (std::getline(in, line)) {
    if (line.empty()) break;
    if (line.rfind("  -", 0) != 0) continue;  // a continued description
    const std::string names = line.substr(0, line.find(' ', 2));
    for (std::sregex_iterator it(names.begin(), names.end(), opt), end; it != end; ++it) {
      out.push_back(it->str());
    }
  }
  return out;
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> words;
  std::istringstream in(path);
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

// Every command (depth first) with its options, read from `litetx [path] --help`.
std::vector<CommandHelp> AllCommands() {
  std::vector<CommandHelp> out;
  std::vector<std::string> todo = {""};
  while (!todo.empty()) {
    const std::string path = todo.back();
    todo.pop_back();
    std::vector<std::string> args = Split(path);
    args.push_back("--help");
    RunResult r = RunCli(args);
    EXPECT_EQ(r.code, 0) << path << ": " << r.err;
    out.push_back({path, OptionsOf(r.out)});
    for (const std::string& sub : SubcommandsOf(r.out)) {
      todo.push_back(path.empty() ? sub : path + " " + sub);
    }
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a shell command line, returning its exit code and combined output.
int Shell(const std::string& command, std::string* output) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  std::size_t n;
  output->clear();
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Roff(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

class CliDocgenTest : public CliTest {
 protected:
  std::string WriteTemp(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

TEST_F(CliDocgenTest, HelpListsTheCommands) {
  // The walk the other tests rely on finds the commands (a broken parser would pass vacuously).
  const auto all = AllCommands();
  std::set<std::string> paths;
  for (const auto& c : all) paths.insert(c.path);
  for (const char* c : {"apply", "get", "scan", "txns", "gc", "demo", "bench", "completion", "man"}) {
    EXPECT_TRUE(paths.count(c)) << c;
  }
  for (const auto& c : all) {
    if (c.path == "gc") {
      EXPECT_NE(std::find(c.options.begin(), c.options.end(), "--older-than"), c.options.end());
    }
  }
}

TEST_F(CliDocgenTest, ManPageRendersWithoutWarnings) {
  RunResult man = RunCli({"man"});
  ASSERT_EQ(man.code, 0) << man.err;
  const std::string page = WriteTemp("litetx.1", man.out);
  std::string out;
  // groff (groff-base, installed by scripts/bootstrap.sh) with every warning enabled.
  const int rc = Shell("groff -k -man -Tutf8 -ww -z '" + page + "'", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << "groff warnings";
  ASSERT_EQ(Shell("groff -k -man -Tutf8 '" + page + "' | col -b", &out), 0) << out;
  EXPECT_NE(out.find("litetx - multi-document transactions"), std::string::npos) << out;
  EXPECT_NE(out.find("EXIT STATUS"), std::string::npos);
}

TEST_F(CliDocgenTest, ManPageHasEveryCommandAndOption) {
  RunResult man = RunCli({"man"});
  ASSERT_EQ(man.code, 0) << man.err;
  EXPECT_EQ(man.out.rfind(".\\\" Generated", 0), 0u);
  EXPECT_NE(man.out.find(".TH LITETX 1 \"\" \"litetx "), std::string::npos);
  int checked = 0;
  for (const CommandHelp& c : AllCommands()) {
    std::string section = man.out;
    if (!c.path.empty()) {
      const std::string heading = ".SS \"" + Roff("litetx " + c.path) + "\"\n";
      const auto at = man.out.find(heading);
      ASSERT_NE(at, std::string::npos) << "no section for " << c.path;
      const auto next = man.out.find(".SS ", at + heading.size());
      section = man.out.substr(at, next == std::string::npos ? std::string::npos : next - at);
    } else {
      section = man.out.substr(0, man.out.find(".SH COMMANDS"));
    }
    for (const std::string& opt : c.options) {
      EXPECT_NE(section.find("\\fB" + Roff(opt) + "\\fR"), std::string::npos)
          << opt << " of '" << c.path << "' missing from the manual page";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

// The codes in a "| code | meaning |" table of docs/cli.md ("130, 143" counts as two).
std::set<int> DocExitCodes(const std::string& doc) {
  std::set<int> codes;
  const auto at = doc.find("## Exit codes");
  if (at == std::string::npos) return codes;
  std::istringstream in(doc.substr(at));
  std::string line;
  std::getline(in, line);
  static const std::regex row(R"(^\| ([0-9, ]+) \|.*)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) break;
    if (!std::regex_match(line, m, row)) continue;
    std::istringstream nums(m[1].str());
    std::string n;
    while (std::getline(nums, n, ',')) codes.insert(std::stoi(n));
  }
  return codes;
}

TEST_F(CliDocgenTest, ExitCodesAgreeBetweenManPageAndDocs) {
  RunResult man = RunCli({"man"});
  ASSERT_EQ(man.code, 0) << man.err;
  const auto at = man.out.find(".SH EXIT STATUS\n");
  ASSERT_NE(at, std::string::npos);
  const std::string section = man.out.substr(at, man.out.find(".SH ", at + 5) - at);
  std::set<int> man_codes;
  static const std::regex row(R"(\.TP\n([0-9]+)\n)");
  for (std::sregex_iterator it(section.begin(), section.end(), row), end; it != end; ++it) {
    man_codes.insert(std::stoi((*it)[1]));
  }
  const std::set<int> doc_codes = DocExitCodes(ReadFile(LITETX_SOURCE_DIR "/docs/cli.md"));
  EXPECT_GE(man_codes.size(), 16u);
  EXPECT_EQ(man_codes, doc_codes);
}

// The part of docs/cli.md about `command`: from its "## `command" heading to the next "## ".
std::string DocSection(const std::string& doc, const std::string& command) {
  const std::string heading = "\n## `" + command;
  const auto at = doc.find(heading);
  if (at == std::string::npos) return "";
  const auto next = doc.find("\n## ", at + heading.size());
  return doc.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

TEST_F(CliDocgenTest, DocsDescribeEveryCommandAndOption) {
  const std::string doc = ReadFile(LITETX_SOURCE_DIR "/docs/cli.md");
  ASSERT_FALSE(doc.empty());
  int checked = 0;
  for (const CommandHelp& c : AllCommands()) {
    std::string section;
    if (c.path.empty()) {
      section = doc.substr(0, doc.find("\n## "));  // the global flags, before any command
    } else {
      // A subcommand ("collections list") is described in its command's section.
      const std::string top = Split(c.path).front();
      section = DocSection(doc, top);
      if (section.empty()) {
        ADD_FAILURE() << "docs/cli.md has no \"## `" << top << "\" section";
        continue;
      }
      if (c.path != top) {
        EXPECT_NE(section.find(c.path), std::string::npos) << c.path << " not described";
      }
    }
    for (const std::string& opt : c.options) {
      if (opt == "--help") continue;  // said once for all: "Every command accepts --help"
      EXPECT_NE(section.find("`" + opt), std::string::npos)
          << opt << " of '" << c.path << "' is not described in docs/cli.md";
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

// Completions bash offers for the words of `line` (the last one being completed).
std::string Complete(const std::string& script, const std::string& line) {
  std::string out;
  const std::string command =
      "bash -c 'source \"$0\"; read -ra COMP_WORDS <<< \"$1\"; "
      "[[ \"$1\" == *\" \" ]] && COMP_WORDS+=(\"\"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); "
      "_litetx; printf \"%s\\n\" \"${COMPREPLY[@]}\" | sort | tr \"\\n\" \" \"' '" +
      script + "' '" + line + "'";
  EXPECT_EQ(Shell(command, &out), 0) << out;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

TEST_F(CliDocgenTest, BashCompletion) {
  RunResult r = RunCli({"completion", "bash"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string script = WriteTemp("litetx.bash", r.out);
  std::string out;
  ASSERT_EQ(Shell("bash -n '" + script + "'", &out), 0) << out;
  // Command names, options of the command on the line, choices, schemes, files.
  EXPECT_EQ(Complete(script, "litetx a"), "apply");
  EXPECT_EQ(Complete(script, "litetx --sync nosync g"), "gc get");
  EXPECT_EQ(Complete(script, "litetx gc --o"), "--older-than --once --outcome-retention");
  EXPECT_EQ(Complete(script, "litetx --log-level "), "debug error info off warn");
  EXPECT_EQ(Complete(script, "litetx --store lmdb:x scan --format "), "json pretty");
  EXPECT_EQ(Complete(script, "litetx txns --state p"), "pending");
  EXPECT_EQ(Complete(script, "litetx --store r"), "redis-cluster:// redis://");
  EXPECT_EQ(Complete(script, "litetx completion "), "bash");
  EXPECT_EQ(Complete(script, "litetx get "), "");  // collection names are not guessed
  std::ofstream(dir_ + "/txn-one.json") << "{}";
  EXPECT_EQ(Complete(script, "litetx apply " + dir_ + "/txn-"), dir_ + "/txn-one.json");
  // File names are neither split at spaces nor expanded as globs.
  std::ofstream(dir_ + "/my file.json") << "{}";
  std::ofstream(dir_ + "/[ab].json") << "{}";
  std::ofstream(dir_ + "/a.json") << "{}";
  EXPECT_EQ(Complete(script, "litetx apply " + dir_ + "/my"), dir_ + "/my file.json");
  EXPECT_EQ(Complete(script, "litetx apply " + dir_ + "/["), dir_ + "/[ab].json");
  // Every command and every option `--help` lists is offered.
  for (const CommandHelp& c : AllCommands()) {
    std::string line = "litetx " + c.path + (c.path.empty() ? "" : " ") + "--";
    const std::string offered = " " + Complete(script, line) + " ";
    for (const std::string& opt : c.options) {
      EXPECT_NE(offered.find(" " + opt + " "), std::string::npos)
          << opt << " not offered after '" << line << "': " << offered;
    }
  }
}

}  // namespace
}  // namespace litetx::clitest
