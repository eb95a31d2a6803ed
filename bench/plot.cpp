// bench/plot.cpp — see plot.h.
#include "bench/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>
#include <system_error>

extern char** environ;

namespace litetx::bench {
namespace {

// A gnuplot single-quoted string: nothing is special in it but the quote, written twice.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// Line colours, one per series, all readable on white (gnuplot's fifth default is yellow).
constexpr const char* kColours[] = {"#9400d3", "#009e73", "#0072b2", "#e69f00",
                                    "#d55e00", "#56b4e9", "#000000", "#cc79a7"};

std::string Number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string FindInPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return IsExecutableFile(program) ? program : "";
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::string dirs = path;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t colon = dirs.find(':', pos);
    std::string dir = dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    if (dir.empty()) dir = ".";  // an empty PATH entry is the current directory
    const std::string candidate = dir + "/" + program;
    if (IsExecutableFile(candidate)) return candidate;
    if (colon == std::string::npos) return {};
    pos = colon + 1;
  }
}

std::string PlotScript(const std::string& title, const std::vector<PlotSeries>& series,
                       const std::string& svg_path) {
  std::string s;
  s += "set terminal svg size 1100,460 noenhanced font 'sans,12' background 'white'\n";
  s += "set output " + Quote(svg_path) + "\n";
  std::set<int> sizes;
  for (const PlotSeries& ser : series) {
    for (const PlotPoint& p : ser.points) sizes.insert(p.n);
  }
  // One data block per series and panel: n and the value, positive values only.
  struct Block {
    std::string name;
    std::string title;
    int series;
    int column;  // 0 tx/s, 1 p50, 2 p99
  };
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < series.size(); ++i) {
    for (int col = 0; col < 3; ++col) {
      std::string rows;
      for (const PlotPoint& p : series[i].points) {
        const double v = col == 0 ? p.tx_per_s : col == 1 ? p.p50_us : p.p99_us;
        if (v > 0) rows += std::to_string(p.n) + " " + Number(v) + "\n";
      }
      if (rows.empty()) continue;
      const std::string name = "$s" + std::to_string(i) + "c" + std::to_string(col);
      s += name + " << EOD\n" + rows + "EOD\n";
      blocks.push_back({name, series[i].title, static_cast<int>(i), col});
    }
  }
  std::string xtics;
  for (int n : sizes) xtics += (xtics.empty() ? "" : ", ") + std::to_string(n);
  s += "set multiplot layout 1,2 title " + Quote(title) + "\n";
  // One legend, under the left panel (the right one uses the same colours); the same bottom
  // margin in both panels keeps their plot areas the same size.
  s += "set logscale xy\nset grid\nset bmargin " + std::to_string(5 + series.size()) + "\n";
  s += "set key outside below left Left reverse vertical noautotitle\n";
  s += "set xlabel 'N (documents per transaction)'\n";
  if (!xtics.empty()) {
    s += "set xtics (" + xtics + ")\n";
    s += "set xrange [" + Number(*sizes.begin() / 1.4) + ":" + Number(*sizes.rbegin() * 1.4) +
         "]\n";
  }
  const auto panel = [&](const std::string& heading, bool latency) {
    s += "set title " + Quote(heading) + "\n";
    std::string plot;
    for (const Block& b : blocks) {
      if ((b.column == 0) == latency) continue;
      const std::string style = " with linespoints lw 2 pt 7 ps 0.6 lc rgb '" +
                                std::string(kColours[b.series % std::size(kColours)]) + "'" +
                                (b.column == 2 ? " dt 2" : " dt 1");
      plot += (plot.empty() ? "plot " : ", \\\n     ") + b.name + " using 1:2" + style +
              (latency ? " notitle" : " title " + Quote(b.title));
    }
    if (plot.empty()) {
      // Nothing measured for this panel: an empty frame with a note, not a gnuplot error.
      s += "set label 1 'no data' at graph 0.5, 0.5 center\nplot [1:2] [1:2] NaN notitle\n"
           "unset label 1\n";
    } else {
      s += plot + "\n";
    }
  };
  panel("transactions per second", false);
  panel("commit latency in us: p50 solid, p99 dashed", true);
  s += "unset multiplot\nset output\n";
  return s;
}

Status WritePlot(const std::string& gnuplot, const std::string& title,
                 const std::vector<PlotSeries>& series, const std::string& svg_path) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string script_path = std::string(tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp") +
                            "/litetx-plot-XXXXXX";
  int fd = ::mkstemp(script_path.data());
  if (fd < 0) {
    return Status::Unavailable("cannot create the gnuplot script in " + script_path + ": " +
                               std::strerror(errno));
  }
  const std::string script = PlotScript(title, series, svg_path);
  std::size_t done = 0;
  while (done < script.size()) {
    const ssize_t w = ::write(fd, script.data() + done, script.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(script_path.c_str());
      return Status::Unavailable("cannot write the gnuplot script: " +
                                 std::string(std::strerror(e)));
    }
    done += static_cast<std::size_t>(w);
  }
  ::close(fd);
  ::unlink(svg_path.c_str());  // so that a file left from before is not taken for the plot

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);  // gnuplot's output goes to our stderr
  std::string arg0 = gnuplot;
  std::vector<char*> argv{arg0.data(), script_path.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, gnuplot.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ::unlink(script_path.c_str());
    return Status::Unavailable("cannot run " + gnuplot + ": " + std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      ::unlink(script_path.c_str());
      return Status::Unavailable("waiting for " + gnuplot + ": " + std::strerror(errno));
    }
  }
  ::unlink(script_path.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Unavailable(
        gnuplot + (WIFEXITED(status) ? " exited " + std::to_string(WEXITSTATUS(status))
                                     : " was killed by signal " + std::to_string(WTERMSIG(status))) +
        " without writing " + svg_path);
  }
  struct stat st {};
  if (::stat(svg_path.c_str(), &st) != 0 || st.st_size == 0) {
    return Status::Unavailable(gnuplot + " exited 0 but wrote no plot to " + svg_path);
  }
  return Status::Ok();
}

}  // namespace litetx::bench
