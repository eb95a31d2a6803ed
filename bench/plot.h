// bench/plot.h — `litetx bench --plot FILE.svg`: transactions per second and p50/p99 commit
// latency against N, one line per series (a store at a thread count, or a native
// alternative), drawn by gnuplot (Debian: gnuplot-nox) with its svg terminal. Both axes of
// both panels are logarithmic.
//
// Thread safety: free functions without shared state.
#pragma once

#include <string>
#include <vector>

#include "litetx/status.h"

namespace litetx::bench {

struct PlotPoint {
  int n = 0;
  double tx_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
};

struct PlotSeries {
  std::string title;  // the legend entry, e.g. "lmdb nosync, litetx, 1 thread"
  std::vector<PlotPoint> points;
};

// The full path of `program` as execvp would find it through the PATH environment variable
// (an executable regular file), or empty if there is none.
std::string FindInPath(const std::string& program);

// The gnuplot script that writes the plot of `series` to `svg_path`, titled `title`. Points
// with a value <= 0 (a row whose operations all failed) are left out of that panel; a series
// with no point left is left out.
std::string PlotScript(const std::string& title, const std::vector<PlotSeries>& series,
                       const std::string& svg_path);

// Runs `gnuplot` (a path) on PlotScript(title, series, svg_path). OK once gnuplot exited 0
// and the file is there and not empty; kUnavailable naming what went wrong otherwise
// (gnuplot's own messages go to this process's stderr).
Status WritePlot(const std::string& gnuplot, const std::string& title,
                 const std::vector<PlotSeries>& series, const std::string& svg_path);

}  // namespace litetx::bench
