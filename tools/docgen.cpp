// tools/docgen.cpp — the manual page and the bash completion, walked from the CLI11 tree.
#include "tools/docgen.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/cli.h"

namespace litetx::cli {
namespace {

std::vector<const CLI::App*> Commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

// The option's flag names, long ones first ("--collection", "--purge", "-h").
std::vector<std::string> FlagNames(const CLI::Option* opt) {
  std::vector<std::string> names;
  for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
  return names;
}

bool TakesValue(const CLI::Option* opt) { return opt->get_expected_min() > 0; }

// The choices CLI11 shows in the type name: "TEXT:{pretty,json}" -> {pretty, json}.
std::vector<std::string> Choices(const CLI::Option* opt) {
  const std::string type = opt->get_type_name();
  const auto open = type.find('{');
  const auto close = type.find('}', open == std::string::npos ? 0 : open);
  std::vector<std::string> out;
  if (open == std::string::npos || close == std::string::npos) return out;
  std::string item;
  for (std::size_t i = open + 1; i < close; ++i) {
    if (type[i] == ',') {
      out.push_back(item);
      item.clear();
    } else {
      item += type[i];
    }
  }
  out.push_back(item);
  return out;
}

// Whether a positional names a file (completed with file names).
bool NamesFile(const CLI::Option* opt) {
  const std::string n = opt->get_name();
  return n.find("file") != std::string::npos || n.find("FILE") != std::string::npos ||
         n.find("path") != std::string::npos || n.find("PATH") != std::string::npos;
}

// ---- roff --------------------------------------------------------------------------------

// Text for a roff line: backslashes escaped, non-ASCII dashes spelled out, and a leading '.' or
// '\'' neutralised so that it is not read as a request.
std::string Roff(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      out += "\\e";
    } else if (text.compare(i, 3, "\xE2\x80\x94") == 0) {  // em dash
      out += "\\(em";
      i += 2;
    } else if (text.compare(i, 3, "\xE2\x80\x93") == 0) {  // en dash
      out += "\\(en";
      i += 2;
    } else if (c == '\n') {
      out += '\n';
      if (i + 1 < text.size() && (text[i + 1] == '.' || text[i + 1] == '\'')) out += "\\&";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

// An option or command name in roff: every '-' a minus sign, so that it can be searched for
// and copied.
std::string RoffName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '-') {
      out += "\\-";
    } else if (c == '\\') {
      out += "\\e";
    } else {
      out += c;
    }
  }
  return out;
}

// `text` as a sentence: with a full stop at the end.
std::string Sentence(const std::string& text) {
  if (text.empty() || text.back() == '.') return text;
  return text + ".";
}

void RoffOption(const CLI::Option* opt, std::string* page) {
  *page += ".TP\n";
  if (opt->nonpositional()) {
    const auto names = FlagNames(opt);
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (i) *page += ", ";
      *page += "\\fB" + RoffName(names[i]) + "\\fR";
    }
    if (TakesValue(opt)) *page += " \\fI" + Roff(opt->get_type_name()) + "\\fR";
  } else {
    *page += "\\fI" + Roff(opt->get_name()) + "\\fR";
    if (!opt->get_type_name().empty()) *page += " (" + Roff(opt->get_type_name()) + ")";
  }
  *page += "\n" + Roff(Sentence(opt->get_description()));
  const std::string def = opt->get_default_str();
  if (TakesValue(opt) && !def.empty() && def != "[]") *page += " Default: " + Roff(def) + ".";
  if (!opt->get_envname().empty()) {
    *page += " Environment: \\fB" + RoffName(opt->get_envname()) + "\\fR.";
  }
  if (opt->get_required()) *page += " Required.";
  *page += "\n";
}

std::string Synopsis(const std::vector<std::string>& path, const CLI::App& cmd) {
  std::string s = "\\fBlitetx\\fR [\\fIGLOBAL OPTIONS\\fR]";
  for (const auto& p : path) s += " \\fB" + RoffName(p) + "\\fR";
  if (!Commands(cmd).empty()) {
    s += " \\fICOMMAND\\fR";
  } else {
    s += " [\\fIOPTIONS\\fR]";
    for (const CLI::Option* opt : cmd.get_options()) {
      if (opt->nonpositional()) continue;
      s += opt->get_required() ? " \\fI" + Roff(opt->get_name()) + "\\fR"
                               : " [\\fI" + Roff(opt->get_name()) + "\\fR]";
    }
  }
  return s;
}

void RoffCommand(std::vector<std::string> path, const CLI::App& cmd, std::string* page) {
  path.push_back(cmd.get_name());
  std::string title = "litetx";
  for (const auto& p : path) title += " " + p;
  *page += ".SS \"" + RoffName(title) + "\"\n" + Synopsis(path, cmd) + "\n.PP\n" +
           Roff(Sentence(cmd.get_description())) + "\n";
  std::vector<const CLI::Option*> positionals, flags;
  for (const CLI::Option* opt : cmd.get_options()) {
    (opt->nonpositional() ? flags : positionals).push_back(opt);
  }
  if (!positionals.empty()) {
    *page += ".PP\nArguments:\n.RS\n";
    for (const CLI::Option* opt : positionals) RoffOption(opt, page);
    *page += ".RE\n";
  }
  *page += ".PP\nOptions:\n.RS\n";
  for (const CLI::Option* opt : flags) RoffOption(opt, page);
  *page += ".RE\n";
  for (const CLI::App* sub : Commands(cmd)) RoffCommand(path, *sub, page);
}

// ---- bash --------------------------------------------------------------------------------

// A bash single-quoted word.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct CompletionTables {
  std::map<std::string, std::string> subs, opts, valued, choices;
  std::set<std::string> files;
};

void Collect(const std::string& path, const CLI::App& cmd, CompletionTables* t) {
  std::string subs, opts, valued = " ";
  for (const CLI::App* sub : Commands(cmd)) subs += (subs.empty() ? "" : " ") + sub->get_name();
  for (const CLI::Option* opt : cmd.get_options()) {
    if (!opt->nonpositional()) {
      if (NamesFile(opt)) t->files.insert(path);
      std::string list;
      for (const std::string& c : Choices(opt)) list += (list.empty() ? "" : " ") + c;
      if (!list.empty()) t->choices[path + "|@"] = list;  // a positional with choices
      continue;
    }
    for (const std::string& name : FlagNames(opt)) {
      opts += (opts.empty() ? "" : " ") + name;
      if (!TakesValue(opt)) continue;
      valued += name + " ";
      std::string list;
      for (const std::string& c : Choices(opt)) list += (list.empty() ? "" : " ") + c;
      if (!list.empty()) t->choices[path + "|" + name] = list;
    }
  }
  t->subs[path] = subs;
  t->opts[path] = opts;
  t->valued[path] = valued;
  for (const CLI::App* sub : Commands(cmd)) {
    Collect(path + " " + sub->get_name(), *sub, t);
  }
}

std::string BashArray(const char* name, const std::map<std::string, std::string>& m) {
  std::string out = std::string("  local -A ") + name + "=(";
  for (const auto& [k, v] : m) out += "\n    [" + Quote(k) + "]=" + Quote(v);
  return out + "\n  )\n";
}

}  // namespace

std::string ManPage(const CLI::App& app, const std::string& version) {
  std::string page;
  page += ".\\\" Generated by `litetx man` from the tool's own option definitions.\n";
  page += ".TH LITETX 1 \"\" \"litetx " + Roff(version) + "\" \"User Commands\"\n";
  // The tool's description reads "litetx — what it is"; NAME wants "litetx \- what it is".
  std::string what = app.get_description();
  const auto dash = what.find(" \xE2\x80\x94 ");
  if (dash != std::string::npos) what = what.substr(dash + 5);
  page += ".SH NAME\nlitetx \\- " + Roff(what) + "\n";
  page += ".SH SYNOPSIS\n\\fBlitetx\\fR [\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR "
          "[\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]\n";
  page += ".SH DESCRIPTION\n"
          "\\fBlitetx\\fR runs all-or-nothing multi-document transactions against a store that "
          "only offers single-document atomic writes (an LMDB directory, a Redis server or a "
          "Redis Cluster), reads documents and transaction records, and runs the collector "
          "that settles transactions whose coordinator crashed.\n"
          ".PP\n"
          "Every command prints JSON on stdout; errors are one line on stderr starting with "
          "\\(lqlitetx: \\(rq. Durations are a whole number and a unit (ms, s, m, h: 500ms, 2s, "
          "1m) or a bare 0. Every command accepts \\fB\\-\\-help\\fR.\n";
  page += ".SH GLOBAL OPTIONS\n";
  for (const CLI::Option* opt : app.get_options()) RoffOption(opt, &page);
  page += ".SH COMMANDS\n";
  for (const CLI::App* cmd : Commands(app)) RoffCommand({}, *cmd, &page);
  page += ".SH ENVIRONMENT\n"
          ".TP\n\\fBLITETX_STORE\\fR\nThe store used when \\fB\\-\\-store\\fR is not given.\n"
          ".TP\n\\fBLITETX_FAULTS\\fR\nFault injection for crash tests: comma-separated items "
          "crash\\-after\\-writes:K, transient:P, lost\\-reply:P, seed:N, exit\\-code:N, "
          "partition\\-after\\-writes:K, stall\\-write:K:DURATION, hold\\-write:K:FIFO.\n";
  page += ".SH EXIT STATUS\n";
  for (const ExitCodeInfo& e : kExitCodes) {
    page += ".TP\n" + std::to_string(e.code) + "\n" + Roff(e.meaning) + "\n";
  }
  page += ".SH SIGNALS\nSIGINT and SIGTERM are handled alike: the command finishes its current "
          "step (a running transaction commits or rolls back), cleans up and exits 130 or 143. "
          "A second signal exits at once; the collector settles what is left.\n";
  page += ".SH SEE ALSO\nThe command-line reference docs/cli.md, the guide docs/guide.md and the "
          "protocol reference docs/protocol.md in the litetx sources.\n";
  return page;
}

std::string BashCompletion(const CLI::App& app) {
  CompletionTables t;
  Collect("litetx", app, &t);  // bash has no empty keys: the path starts at the tool's name
  std::string files;
  for (const std::string& f : t.files) files += (files.empty() ? "" : " ") + Quote(f);
  std::string s =
      "# bash completion for litetx (generated by `litetx completion bash`; needs bash 4).\n"
      "# Load it with: source <(litetx completion bash)\n"
      "_litetx() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\"\n"
      "  (( COMP_CWORD > 0 )) && prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n";
  s += BashArray("subs", t.subs);
  s += BashArray("opts", t.opts);
  s += BashArray("valued", t.valued);
  s += BashArray("choices", t.choices);
  s += "  local files=(" + files + ")\n";
  s +=
      // Candidates go through mapfile, one per line, so that file names with spaces or glob
      // characters are neither split nor expanded.
      // Walk the words before the cursor: options (and the values of those that take one)
      // are skipped, command names extend the path.
      "  local path=litetx i w skip=0 cand\n"
      "  for (( i=1; i<COMP_CWORD; i++ )); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    if (( skip )); then skip=0; continue; fi\n"
      "    if [[ \"$w\" == -* ]]; then\n"
      "      [[ \"$w\" != *=* && \"${valued[$path]}\" == *\" $w \"* ]] && skip=1\n"
      "      continue\n"
      "    fi\n"
      "    for cand in ${subs[$path]}; do\n"
      "      if [[ \"$w\" == \"$cand\" ]]; then path=\"$path $w\"; break; fi\n"
      "    done\n"
      "  done\n"
      "  COMPREPLY=()\n"
      // The value of an option.
      "  if [[ \"$prev\" == -* && \"${valued[$path]}\" == *\" $prev \"* ]]; then\n"
      "    if [[ -n \"${choices[$path|$prev]}\" ]]; then\n"
      "      mapfile -t COMPREPLY < <(compgen -W \"${choices[$path|$prev]}\" -- \"$cur\")\n"
      "    elif [[ \"$prev\" == --store ]]; then\n"
      "      mapfile -t COMPREPLY < <(compgen -W \"lmdb: memory: redis:// redis-cluster://\" -- \"$cur\")\n"
      "      compopt -o nospace 2>/dev/null\n"
      "    fi\n"
      "    return 0\n"
      "  fi\n"
      "  if [[ \"$cur\" == -* ]]; then\n"
      "    mapfile -t COMPREPLY < <(compgen -W \"${opts[$path]}\" -- \"$cur\")\n"
      "  elif [[ -n \"${choices[$path|@]}\" ]]; then\n"
      "    mapfile -t COMPREPLY < <(compgen -W \"${choices[$path|@]}\" -- \"$cur\")\n"
      "  elif [[ -n \"${subs[$path]}\" ]]; then\n"
      "    mapfile -t COMPREPLY < <(compgen -W \"${subs[$path]}\" -- \"$cur\")\n"
      "  else\n"
      "    for cand in \"${files[@]}\"; do\n"
      "      if [[ \"$cand\" == \"$path\" ]]; then\n"
      "        mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
      "        compopt -o filenames 2>/dev/null\n"
      "      fi\n"
      "    done\n"
      "  fi\n"
      "  return 0\n"
      "}\n"
      "complete -F _litetx litetx\n";
  return s;
}

void AddDocgen(CLI::App& app, std::function<int()>* run) {
  CLI::App* completion = app.add_subcommand(
      "completion", "Print a shell completion script (bash): source <(litetx completion bash)");
  auto shell = std::make_shared<std::string>();
  completion->add_option("shell", *shell, "The shell")->required()->check(
      CLI::IsMember({"bash"}));
  CLI::App* root = &app;
  completion->callback([run, root, shell] {
    *run = [root] {
      std::fputs(BashCompletion(*root).c_str(), stdout);
      return static_cast<int>(kExitOk);
    };
  });
  CLI::App* man = app.add_subcommand("man", "Print this tool's manual page (roff): "
                                            "litetx man | man -l -");
  man->callback([run, root] {
    *run = [root] {
      std::fputs(ManPage(*root, litetx::Version()).c_str(), stdout);
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace litetx::cli
