// Restarts that change the step's options over the state a failed or crashed execution left:
// committed chunks above the watermark (concurrent chunks leave gaps below them when one chunk
// fails or the process dies), scan and item markers of a chunk written item by item, and empty
// chunks. Between executions commit_interval, complete_chunk, concurrency and
// transaction_per_item change; the restart itself is crashed at every write; several restarts
// in a row each use other options. Whatever the options, each chunk formed on a restart must
// stop at the first position of a committed chunk, every good item's output must exist exactly
// once (the writer counts in "times" how often a document was written), the counts must add up
// (read = written + filtered + skips + recovered, over all 14 items), ReadStepStatus must see
// every committed chunk after each crash, and the step must end completed.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <random>

#include "attack_util.h"

namespace battack {
namespace {

using litetx::FaultInjectingStore;
using litetx::FaultOptions;
using litetx::SimulatedCrash;

// One execution's options.
struct Opt {
  const char* name;
  std::size_t ci = 4;
  std::size_t conc = 1;
  bool per_item = false;
  bool odd_ends = false;  // complete_chunk: a chunk also ends after an item with an odd n
};

lb::StepOptions OptsOf(const Opt& p) {
  lb::StepOptions o = StepOpts(Mode::kSequential);
  o.commit_interval = p.ci;
  o.concurrency = p.conc;
  o.transaction_per_item = p.per_item;
  if (p.odd_ends) {
    o.complete_chunk = [](const std::vector<lb::Item>& items) { return N(items.back()) % 2 == 1; };
  }
  return o;
}

// The restarts' options: smaller and larger chunks than the first execution's (larger ones
// leave indices below a committed chunk with no positions: committed empty), chunks at once,
// a transaction per item, and a completion policy.
const Opt kOpts[] = {
    {"ci1", 1, 1, false, false},
    {"ci3-conc2", 3, 2, false, false},
    {"ci20", 20, 1, false, false},
    {"ci5-per-item-conc2", 5, 2, true, false},
    {"ci20-per-item", 20, 1, true, false},
    {"ci6-odd-ends-conc3", 6, 3, false, true},
};

// The chunk documents: k -> {begin, end, counts}.
struct ChunkDoc {
  std::uint64_t begin = 0, end = 0;
  lb::Counts counts;
};
std::map<std::uint64_t, ChunkDoc> ChunkDocs(Rig& rig) {
  auto db = rig.Db();
  std::map<std::uint64_t, ChunkDoc> out;
  const std::string prefix = StepId() + "/chunk/";
  for (const auto& [id, d] : FoundDocs(*rig.mem, *db, kState)) {
    if (id.rfind(prefix, 0) != 0) continue;
    ChunkDoc c;
    c.begin = d.at("begin").to_number<std::uint64_t>();
    c.end = d.at("end").to_number<std::uint64_t>();
    auto cc = lb::Counts::FromJson(d.at("counts").as_object());
    EXPECT_TRUE(cc.ok());
    if (cc.ok()) c.counts = *cc;
    out[d.at("k").to_number<std::uint64_t>()] = c;
  }
  return out;
}

std::string RangesText(const std::map<std::uint64_t, ChunkDoc>& docs) {
  std::string s;
  for (const auto& [k, c] : docs) {
    s += " " + std::to_string(k) + ":[" + std::to_string(c.begin) + "," + std::to_string(c.end) +
         ")";
  }
  return s;
}

// While the step is not complete: what ReadStepStatus reports must be what the chunk documents
// hold (it finds the chunks above the watermark within the stored window), and the committed
// chunks must not overlap.
std::vector<std::string> VerifyPartial(Rig& rig) {
  std::vector<std::string> bad;
  const auto docs = ChunkDocs(rig);
  lb::Counts sum;
  std::uint64_t last_end = 0;
  bool first = true;
  for (const auto& [k, c] : docs) {
    sum += c.counts;
    if (c.end < c.begin || (!first && c.begin < last_end)) {
      bad.push_back("chunk documents overlap:" + RangesText(docs));
    }
    first = false;
    last_end = c.end;
  }
  auto db = rig.Db();
  auto st = lb::ReadStepStatus(*db, StepOpts(Mode::kSequential));
  if (!st.ok()) {
    if (!docs.empty()) bad.push_back("ReadStepStatus: " + st.status().ToString());
    return bad;
  }
  if (st->chunks != docs.size()) {
    bad.push_back("ReadStepStatus sees " + std::to_string(st->chunks) + " chunks, stored:" +
                  RangesText(docs));
  }
  if (CountsText(st->total) != CountsText(sum)) {
    bad.push_back("ReadStepStatus totals " + CountsText(st->total) + " != chunk documents " +
                  CountsText(sum));
  }
  return bad;
}

// The end state, whatever the chunking: every expected output exactly once (times 1), the dead
// letter once, the skip records, chunk documents k = 0..K-1 tiling [0, 14) in order (empty ones
// allowed), their counts adding up, the stored status completed with totals equal to theirs,
// and the report equal to the stored state. `fmode` is kSequential, or kScan (item 10 refused
// by the writer).
std::vector<std::string> VerifyEnd(Rig& rig, Mode fmode, const lb::StepReport& report) {
  std::vector<std::string> bad;
  auto db = rig.Db();
  const Expected e = ExpectedOf(fmode);
  auto outs = FoundDocs(*rig.mem, *db, kOut);
  for (int i : e.outputs) {
    auto it = outs.find(ItemKey(i));
    if (it == outs.end()) {
      bad.push_back("output " + ItemKey(i) + " missing");
      continue;
    }
    const json::object want{{"n", i}, {"sq", i * i}, {"times", 1}};
    if (it->second != want) bad.push_back("output " + ItemKey(i) + " is " + json::serialize(it->second));
  }
  for (const auto& [id, doc] : outs) {
    if (id.size() != 3 || !e.outputs.count(std::atoi(id.c_str() + 1))) {
      bad.push_back("unexpected output " + id + " " + json::serialize(doc));
    }
  }
  auto dead = FoundDocs(*rig.mem, *db, kDead);
  const json::object want_dead{{"n", 2}, {"code", "unavailable"}, {"times", 1}};
  if (dead.size() != 1 || !dead.count("i02") || dead["i02"] != want_dead) {
    std::string s;
    for (const auto& [id, d] : dead) s += id + "=" + json::serialize(d) + " ";
    bad.push_back("dead letters: " + s);
  }
  std::map<std::uint64_t, std::pair<std::string, bool>> skips;
  const std::string skip_prefix = StepId() + "/skip/";
  for (const auto& [id, d] : FoundDocs(*rig.mem, *db, kState)) {
    if (id.rfind(skip_prefix, 0) != 0) continue;
    skips[d.at("position").to_number<std::uint64_t>()] = {std::string(d.at("phase").as_string()),
                                                          d.at("recovered").as_bool()};
  }
  if (skips != e.skips) bad.push_back("skip records: " + std::to_string(skips.size()));
  const auto docs = ChunkDocs(rig);
  lb::Counts sum;
  std::uint64_t want_k = 0, pos = 0, non_empty = 0;
  for (const auto& [k, c] : docs) {
    if (k != want_k++ || c.begin != pos || c.end < c.begin) {
      bad.push_back("chunk documents do not tile the input:" + RangesText(docs));
      break;
    }
    pos = c.end;
    sum += c.counts;
    if (c.end > c.begin) ++non_empty;
  }
  if (pos != kItems) bad.push_back("chunk documents end at " + std::to_string(pos) + ":" + RangesText(docs));
  auto check = [&](const char* what, const lb::Counts& c) {
    if (c.read != kItems || c.written != e.outputs.size() || c.filtered != e.filtered ||
        c.process_skips != e.process_skips || c.write_skips != e.write_skips ||
        c.read_skips != 0 || c.recovered != e.recovered ||
        c.read != c.written + c.filtered + c.skips() + c.recovered || c.commits < non_empty) {
      bad.push_back(std::string(what) + " counts " + CountsText(c));
    }
  };
  check("chunk documents'", sum);
  auto st = lb::ReadStepStatus(*db, StepOpts(Mode::kSequential));
  if (!st.ok()) {
    bad.push_back("ReadStepStatus: " + st.status().ToString());
    return bad;
  }
  if (st->status != "completed") bad.push_back("stored status " + st->status);
  if (st->chunks != docs.size()) bad.push_back("stored chunks " + std::to_string(st->chunks));
  if (CountsText(st->total) != CountsText(sum)) {
    bad.push_back("stored totals " + CountsText(st->total) + " != chunk documents " + CountsText(sum));
  }
  if (!report.status.ok()) bad.push_back("report status " + report.status.ToString());
  if (report.chunks != docs.size()) bad.push_back("report chunks " + std::to_string(report.chunks));
  if (CountsText(report.total) != CountsText(sum)) {
    bad.push_back("report totals " + CountsText(report.total) + " != chunk documents " +
                  CountsText(sum));
  }
  return bad;
}

// The first execution runs chunks at once and fails, leaving committed chunks above a gap:
//   kOne:  three chunks of four at once; item 0 (chunk 0) waits until two chunks committed,
//          then fails for good (kCorruption): chunks 1 [4,8) and 2 [8,12) committed, 0 not.
//   kTwo:  four chunks of two at once; items 0 and 3 (chunks 0 and 1) wait until two chunks
//          committed, then fail for good: chunks 2 [4,6) and 3 [6,8) committed, 0 and 1 not.
//   kDies: like kTwo, but the process dies (SimulatedCrash thrown from chunk 0's process)
//          instead of failing it: what it left in flight is the collector's.
enum class Gap { kOne, kTwo, kDies };
const char* GapName(Gap g) {
  switch (g) {
    case Gap::kOne: return "gap of one below chunks 1-2";
    case Gap::kTwo: return "gap of two below chunks 2-3";
    case Gap::kDies: return "gap of two below chunks 2-3, process died";
  }
  return "?";
}

// Runs the first execution for `gap`; false (with a test failure) if it did not leave the gap.
bool MakeGap(Rig& rig, Gap gap, Mode fmode) {
  auto ex = std::make_shared<Exec>();
  std::mutex mu;
  std::condition_variable cv;
  int committed = 0;
  lb::StepOptions o = StepOpts(Mode::kSequential);
  o.concurrency = gap == Gap::kOne ? 3 : 4;
  o.commit_interval = gap == Gap::kOne ? 4 : 2;
  o.listener.after_chunk = [&](std::uint64_t, const lb::Counts&) {
    std::lock_guard<std::mutex> lock(mu);
    ++committed;
    cv.notify_all();
  };
  ex->fail_process = [&](const lb::Item& item) -> std::optional<Status> {
    const int n = N(item);
    if (n != 0 && (gap == Gap::kOne || n != 3)) return std::nullopt;
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return committed >= 2; }));
    lock.unlock();
    if (gap == Gap::kDies && n == 0) throw SimulatedCrash(0);
    return Status::Corruption("item cannot be read");
  };
  {
    auto db = rig.Db();
    if (gap == Gap::kDies) {
      EXPECT_THROW((void)RunExec(*db, fmode, ex, &o), SimulatedCrash);
    } else {
      auto r = RunExec(*db, fmode, ex, &o);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) return false;
      EXPECT_EQ(r->status.code(), Code::kCorruption) << r->status.ToString();
    }
  }
  Status s = rig.Settle();
  EXPECT_TRUE(s.ok()) << s.ToString();
  const auto docs = ChunkDocs(rig);
  std::vector<std::uint64_t> ks;
  for (const auto& [k, c] : docs) ks.push_back(k);
  const std::vector<std::uint64_t> want =
      gap == Gap::kOne ? std::vector<std::uint64_t>{1, 2} : std::vector<std::uint64_t>{2, 3};
  EXPECT_EQ(ks, want) << RangesText(docs);
  return ks == want;
}

// Runs executions with `o` until the step completes (at most `max`, a collector pass after
// each failure).
std::optional<lb::StepReport> Complete(Rig& rig, Mode fmode, const lb::StepOptions& o, int max,
                                       std::string* why) {
  for (int i = 0; i < max; ++i) {
    auto db = rig.Db();
    auto r = RunExec(*db, fmode, nullptr, &o);
    if (r.ok() && r->status.ok()) return *r;
    *why = r.ok() ? r->status.ToString() : r.status().ToString();
    if (Status s = rig.Settle(); !s.ok()) *why += "; collector: " + s.ToString();
  }
  return std::nullopt;
}

// One execution with `o` on rig.mem, crashed after write `w` (0: never); with `lossy_seed`,
// one write in ten also lands with its reply lost (kUnknown). Returns the report if it
// completed the step; sets *crashed.
std::optional<lb::StepReport> RunCrashing(Rig& rig, Mode fmode, const lb::StepOptions& o,
                                          std::uint64_t w, bool* crashed,
                                          std::uint64_t lossy_seed = 0,
                                          std::uint64_t* lost = nullptr) {
  FaultOptions f;
  f.crash_after_writes = w;
  if (lossy_seed != 0) {
    f.seed = lossy_seed;
    f.lost_reply_probability = 0.1;
  }
  auto faulty = std::make_shared<FaultInjectingStore>(rig.mem, f);
  auto db = rig.Db(faulty);
  *crashed = false;
  std::optional<lb::StepReport> out;
  try {
    auto r = RunExec(*db, fmode, nullptr, &o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok() && r->status.ok()) out = *r;
    // A restart with other options may refuse (kFailedPrecondition) only with a reason; it
    // must not fail in any other way (but for lost replies: kUnknown, or a retry given up).
    if (r.ok() && !r->status.ok() && lossy_seed == 0) {
      EXPECT_EQ(r->status.code(), Code::kFailedPrecondition) << r->status.ToString();
    }
  } catch (const SimulatedCrash&) {
    *crashed = true;
  }
  EXPECT_EQ(*crashed, faulty->crashed());
  if (lost != nullptr) *lost += faulty->lost_replies();
  Status s = rig.Settle();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// A gap, then a restart with other options crashed after each of its writes in turn (and once
// not at all; the process-died gap at every third write unless LITETX_LONG), then a third execution with yet other options that completes the step. After
// each crash ReadStepStatus must see exactly the committed chunks.
TEST(BatchRestartOptions, GapsThenARestartWithOtherOptionsCrashedAtEveryWrite) {
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t cases = 0, crashes = 0, completed_by_restart = 0, empty_chunks = 0;
  const std::size_t n_opts = sizeof kOpts / sizeof kOpts[0];
  for (Gap gap : {Gap::kOne, Gap::kTwo, Gap::kDies}) {
    for (std::size_t i = 0; i < n_opts; ++i) {
      const Opt& second = kOpts[i];
      const Opt& third = kOpts[(i + 1 + static_cast<std::size_t>(gap)) % n_opts];
      // The process-died gap at every third write only, but in the long run.
      const std::uint64_t stride = gap == Gap::kDies && !LongRun() ? 3 : 1;
      for (std::uint64_t w = 1; w <= 400; w += stride) {
        SCOPED_TRACE(std::string(GapName(gap)) + "; restart " + second.name +
                     " crashed after write " + std::to_string(w) + "; then " + third.name);
        Rig rig;
        if (!MakeGap(rig, gap, Mode::kSequential)) return;
        ++cases;
        bool crashed = false;
        auto done = RunCrashing(rig, Mode::kSequential, OptsOf(second), w, &crashed);
        if (crashed) {
          ++crashes;
          auto bad = VerifyPartial(rig);
          ASSERT_TRUE(bad.empty()) << Join(bad);
        } else if (done) {
          ++completed_by_restart;
        }
        if (!done) {
          std::string why;
          done = Complete(rig, Mode::kSequential, OptsOf(third), 3, &why);
          ASSERT_TRUE(done.has_value()) << "the step did not complete: " << why;
        }
        auto bad = VerifyEnd(rig, Mode::kSequential, *done);
        ASSERT_TRUE(bad.empty()) << Join(bad) << "\n  chunks:" << RangesText(ChunkDocs(rig));
        for (const auto& [k, c] : ChunkDocs(rig)) empty_chunks += c.begin == c.end;
        if (!crashed) break;  // past the restart's last write
      }
    }
  }
  std::printf("[ options  ] %llu cases, %llu restarts crashed, %llu completed by the restart, "
              "%llu empty chunks committed, %.1f s\n",
              static_cast<unsigned long long>(cases), static_cast<unsigned long long>(crashes),
              static_cast<unsigned long long>(completed_by_restart),
              static_cast<unsigned long long>(empty_chunks),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  EXPECT_GT(crashes, 0u);
  EXPECT_GT(empty_chunks, 0u);
  EXPECT_EQ(completed_by_restart, 3 * n_opts);  // each restart, uncrashed, completes the step
}

// Whether an execution left a chunk written partly item by item: a scan marker without its
// chunk's document.
bool PendingScan(Rig& rig) {
  auto db = rig.Db();
  const auto docs = ChunkDocs(rig);
  const std::string prefix = StepId() + "/scan/";
  for (const auto& [id, d] : FoundDocs(*rig.mem, *db, kState)) {
    if (id.rfind(prefix, 0) != 0) continue;
    if (!docs.count(std::stoull(id.substr(prefix.size())))) return true;
  }
  return false;
}

// Chains of executions, each with options drawn at random (fixed seed): a gap, then two or
// three restarts each crashed at a random write, then one that completes the step; half of
// the chains with a writer that refuses item 10 (so that chunks holding it are written item by
// item, a scan). After each crash ReadStepStatus must see exactly the committed chunks.
// `keep_after_scan`: an execution that follows one which left a chunk partly written item by
// item keeps that execution's options (off in every test: any options must work, see
// ItemMarkersOfAChunkTheRestartCutsDifferently).
struct ChainTally {
  std::uint64_t chains = 0, executions = 0, crashes = 0, kept = 0, failed_chains = 0,
                lost_replies = 0;
};
void Chains(int n, bool keep_after_scan, bool lossy, ChainTally& t) {
  const Opt more[] = {
      {"ci2-conc4", 2, 4, false, false},
      {"ci4", 4, 1, false, false},
      {"ci3-per-item-conc3", 3, 3, true, false},
      {"ci7-odd-ends", 7, 1, false, true},
  };
  std::vector<Opt> opts(std::begin(kOpts), std::end(kOpts));
  opts.insert(opts.end(), std::begin(more), std::end(more));
  std::mt19937_64 rng(20261125);
  for (int c = 0; c < n; ++c) {
    const Gap gap = static_cast<Gap>(rng() % 3);
    const Mode fmode = rng() % 2 == 0 ? Mode::kSequential : Mode::kScan;
    std::string trace = std::string(GapName(gap)) + ", " + ModeName(fmode) + " writer";
    SCOPED_TRACE("chain " + std::to_string(c) + ": " + trace);
    Rig rig;
    if (!MakeGap(rig, gap, fmode)) return;
    ++t.chains;
    std::optional<lb::StepReport> done;
    const Opt* prev = nullptr;
    const int restarts = 2 + static_cast<int>(rng() % 2);
    for (int i = 0; i < restarts && !done; ++i) {
      const Opt* o = &opts[rng() % opts.size()];
      const std::uint64_t w = 1 + rng() % 60;
      if (keep_after_scan && prev != nullptr && PendingScan(rig)) {
        o = prev;
        ++t.kept;
      }
      trace += std::string("; ") + o->name + " crashed after write " + std::to_string(w);
      SCOPED_TRACE(trace);
      bool crashed = false;
      done = RunCrashing(rig, fmode, OptsOf(*o), w, &crashed, lossy ? 1 + rng() : 0,
                         &t.lost_replies);
      ++t.executions;
      if (crashed) {
        ++t.crashes;
        auto bad = VerifyPartial(rig);
        EXPECT_TRUE(bad.empty()) << Join(bad);
      }
      prev = o;
    }
    if (!done) {
      const Opt* o = &opts[rng() % opts.size()];
      if (keep_after_scan && prev != nullptr && PendingScan(rig)) {
        o = prev;
        ++t.kept;
      }
      trace += std::string("; ") + o->name;
      SCOPED_TRACE(trace);
      std::string why;
      done = Complete(rig, fmode, OptsOf(*o), 3, &why);
      ++t.executions;
      EXPECT_TRUE(done.has_value()) << "the step did not complete: " << why;
      if (!done) {
        ++t.failed_chains;
        continue;
      }
    }
    auto bad = VerifyEnd(rig, fmode, *done);
    EXPECT_TRUE(bad.empty()) << Join(bad) << "\n  chunks:" << RangesText(ChunkDocs(rig))
                             << "\n  executions: " << trace;
    if (!bad.empty()) ++t.failed_chains;
  }
}

TEST(BatchRestartOptions, SeveralRestartsInARowEachWithOtherOptions) {
  const auto started = std::chrono::steady_clock::now();
  ChainTally t;
  Chains(LongRun() ? 2000 : 150, /*keep_after_scan=*/false, /*lossy=*/false, t);
  std::printf("[ options  ] %llu chains, %llu executions, %llu crashed, %llu kept the options of "
              "a scan left partly done, %.1f s\n",
              static_cast<unsigned long long>(t.chains),
              static_cast<unsigned long long>(t.executions),
              static_cast<unsigned long long>(t.crashes), static_cast<unsigned long long>(t.kept),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  EXPECT_EQ(t.failed_chains, 0u);
  EXPECT_GT(t.crashes, t.chains);
}

// The same chains with one write in ten of each restart landing with its reply lost: the
// commits whose outcome the step must learn (kUnknown) include chunk documents above a gap,
// empty chunks, scan markers and item markers, under options that change between executions.
TEST(BatchRestartOptions, SeveralRestartsWithLostRepliesEachWithOtherOptions) {
  const auto started = std::chrono::steady_clock::now();
  ChainTally t;
  Chains(LongRun() ? 1000 : 100, /*keep_after_scan=*/false, /*lossy=*/true, t);
  std::printf("[ options  ] lost replies: %llu chains, %llu executions, %llu crashed, %llu "
              "replies lost, %.1f s\n",
              static_cast<unsigned long long>(t.chains),
              static_cast<unsigned long long>(t.executions),
              static_cast<unsigned long long>(t.crashes),
              static_cast<unsigned long long>(t.lost_replies),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  EXPECT_EQ(t.failed_chains, 0u);
  EXPECT_GT(t.crashes, 0u);
  EXPECT_GT(t.lost_replies, t.chains);
}

// A chunk's scan marker is keyed by its index, its item markers by position; a restart with
// another commit_interval (or complete_chunk) cuts the same positions into chunks with other
// indices. Each item written one by one must not be written again by a chunk formed on the
// restart whose own index has no scan marker:
//   (a) a transaction per item, twelve to a chunk, one item at a time, dies inside item 9's
//       write (items 0-8 done, each with its item marker, under scan marker 0); the restart,
//       two to a chunk and a transaction per chunk, must not write chunks 3 [6,8) and 4 [8,10)
//       whole.
//   (b) a transaction per chunk, twelve to a chunk, with a writer that refuses item 10: chunk
//       0 is written item by item and the execution dies inside item 11's write; the restart,
//       two to a chunk, must not write chunks 3 [6,8) and 4 [8,10) whole.
// Scan markers record their chunk's positions; a restart takes the highest end of those at or
// above the watermark (and the stored one) as a horizon below which every chunk goes item by
// item, checking each position's marker.
TEST(BatchRestartOptions, ItemMarkersOfAChunkTheRestartCutsDifferently) {
  {
    SCOPED_TRACE("(a) a transaction per item, twelve to a chunk, then two to a chunk");
    Rig rig;
    auto ex = std::make_shared<Exec>();
    ex->on_write = [](const std::vector<lb::Output>& outs) {
      if (outs.front().item->key == "i09") throw SimulatedCrash(0);
    };
    lb::StepOptions first = OptsOf({"ci12-per-item", 12, 1, true, false});
    {
      auto db = rig.Db();
      EXPECT_THROW((void)RunExec(*db, Mode::kSequential, ex, &first), SimulatedCrash);
    }
    ASSERT_TRUE(rig.Settle().ok());
    ASSERT_TRUE(PendingScan(rig));
    std::string why;
    auto done = Complete(rig, Mode::kSequential, OptsOf({"ci2", 2, 1, false, false}), 3, &why);
    ASSERT_TRUE(done.has_value()) << why;
    auto bad = VerifyEnd(rig, Mode::kSequential, *done);
    EXPECT_TRUE(bad.empty()) << Join(bad) << "\n  chunks:" << RangesText(ChunkDocs(rig));
  }
  {
    SCOPED_TRACE("(b) a scan of twelve, then two to a chunk");
    Rig rig;
    auto ex = std::make_shared<Exec>();
    ex->on_write = [](const std::vector<lb::Output>& outs) {
      if (outs.size() == 1 && outs.front().item->key == "i11") throw SimulatedCrash(0);
    };
    lb::StepOptions first = OptsOf({"ci12", 12, 1, false, false});
    {
      auto db = rig.Db();
      EXPECT_THROW((void)RunExec(*db, Mode::kScan, ex, &first), SimulatedCrash);
    }
    ASSERT_TRUE(rig.Settle().ok());
    ASSERT_TRUE(PendingScan(rig));
    std::string why;
    auto done = Complete(rig, Mode::kScan, OptsOf({"ci2", 2, 1, false, false}), 3, &why);
    ASSERT_TRUE(done.has_value()) << why;
    auto bad = VerifyEnd(rig, Mode::kScan, *done);
    EXPECT_TRUE(bad.empty()) << Join(bad) << "\n  chunks:" << RangesText(ChunkDocs(rig));
  }
  // The chains of SeveralRestartsInARowEachWithOtherOptions with any options after a scan
  // left partly done.
  ChainTally t;
  Chains(150, /*keep_after_scan=*/false, /*lossy=*/false, t);
  std::printf("[ options  ] any options after a partly done scan: %llu of %llu chains wrong\n",
              static_cast<unsigned long long>(t.failed_chains),
              static_cast<unsigned long long>(t.chains));
  EXPECT_EQ(t.failed_chains, 0u);
}

}  // namespace
}  // namespace battack
