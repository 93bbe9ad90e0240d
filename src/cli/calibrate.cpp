// asgd calibrate: measures this machine with the project's own code and
// writes a machine profile (perf/profile.hpp) for virtual runs (--profile):
//  - compute: each model's minibatch gradient (the learner's local step),
//    mean and coefficient of variation;
//  - server: ShardCore::accept of a gradient, without and with the update,
//    per parameter;
//  - links: push + pull over MPI between two ranks (mpiexec -n 2 of this
//    binary, `calibrate --link-probe`), over shared windows and over
//    messages, sizes 4 KiB to the largest model, fitted to latency + bytes /
//    bandwidth; the profile takes the transport real runs here use.
#include <fmt/format.h>
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <nlohmann/json.hpp>

#include "cli/calibrate.hpp"
#include "cli/calibrate_figures.hpp"
#include "cli/commands.hpp"
#include "cli/kokkos_scope.hpp"
#include "cli/stepper.hpp"
#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/nesting.hpp"
#include "common/process.hpp"
#include "common/runinfo.hpp"
#include "common/text.hpp"
#include "perf/wake.hpp"
#include "ps/exchange_probe.hpp"
#include "ps/local_steps.hpp"
#include "ps/mpi_util.hpp"
#include "ps/run_parts.hpp"
#include "ps/shard_core.hpp"
#include "ps/transport.hpp"
#include "report/stats.hpp"

namespace asgd::cli {

namespace {

constexpr int kCoresProbeRounds = 5;  // the cores probe's interleaved rounds of alone and together
// The least a phase of a cores-probe round lasts (5 minibatches of cifar10-18pct at batch 4: 20 ms).
constexpr double kCoresProbePhase_s = 0.25;

// T = a + b B: the bandwidth term b from least squares over the sizes of
// 1 MiB and more (smaller ones sit in the caches and would flatter it), the
// latency a from the smallest size's time less its b B.
std::pair<double, double> fit(const nlohmann::json& points) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& pt : points) {
    const double x = pt[0].get<double>(), y = pt[1].get<double>();
    if (x < 1048576.0 && points.size() > 2) continue;
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double b = std::max(1e-300, (n * sxy - sx * sy) / std::max(1e-300, n * sxx - sx * sx));
  const double x0 = points[0][0].get<double>(), y0 = points[0][1].get<double>();
  return {std::max(0.0, y0 - b * x0), b};
}

// Over messages: the machine's busy CPU per byte the probe moved, less what
// the ranks' waits alone cost over the same span (the model charges a
// waiting rank's load apart: counted here too, it would be paid twice).
void cpu_figure(const nlohmann::json& j, perf::Profile& p) {
  const auto c = j.value("cpu", nlohmann::json::object());
  if (c.value("busy_s", 0.0) <= 0 || c.value("bytes", 0.0) <= 0) return;
  const double busy = c["busy_s"].get<double>(), waits = c.value("waits_s", 0.0), moved = c["bytes"].get<double>();
  const double net = std::max(0.0, busy - waits);
  p.cpu_s_per_byte = measured(
      net / moved, fmt::format("asgd calibrate {}: the busy CPU seconds of the ranks' {} (/proc/stat: user, nice, "
                               "system, irq, softirq) over the largest size's exchanges ({:.2f} s in {:.2f} s, "
                               "{:.0f} MB moved) less the same span's busy CPU while both ranks only wait politely "
                               "(a 1 s wait for a message that never comes: {:.2f} s), per byte: the kernel's "
                               "network path and MPI's work on the bytes",
                               today(), c.value("machines", 1) == 1 ? "machine" : "two machines", busy,
                               c.value("seconds", 0.0), 1e-6 * moved, waits));
  spdlog::info("links    {:.2f} ns of CPU per byte moved ({:.2f} s busy for {:.0f} MB, {:.2f} s of it the waits')",
               1e9 * net / moved, busy, 1e-6 * moved, waits);
}

// Runs this binary's hidden `--NAME-probe` on `ranks` ranks (o.mpiexec) with
// `args`; returns the JSON it wrote, which must hold `key`. Its output stays
// in a temporary folder when it fails (the error names it).
nlohmann::json run_probe(const CalibrateOptions& o, const std::string& name, int ranks,
                         const std::vector<std::string>& args, const char* key, const std::string& what) {
  const std::string dir = std::filesystem::temp_directory_path() / fmt::format("asgd-calibrate-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/" + name + ".json", log = dir + "/" + name + ".log";
  std::vector<std::string> cmd{o.mpiexec, "-n", std::to_string(ranks), own_executable(),
                               "calibrate", "--" + name + "-probe", out};
  cmd.insert(cmd.end(), args.begin(), args.end());
  spdlog::info("{:<8} {} -n {} {} calibrate --{}-probe ({})", name == "link" ? "links" : name, o.mpiexec, ranks, cmd[3],
               name, what);
  const std::string err = run_process(cmd, log, 600);
  if (!err.empty()) throw Error(fmt::format("calibrate: the {} probe failed ({}); its output: {}", name, err, log));
  std::ifstream in(out);
  auto j = parse_json_bounded<nlohmann::json>(std::string(std::istreambuf_iterator<char>(in), {}));
  if (!j.is_object() || !j.contains(key)) throw Error(fmt::format("calibrate: the {} probe wrote no result: {}", name, out));
  std::filesystem::remove_all(dir);
  return j;
}

void link_figures(const CalibrateOptions& o, perf::Profile& p, index_t largest) {
  const auto j = run_probe(o, "link", 2, {"--largest", std::to_string(largest)}, "messages",
                           fmt::format("sizes 4 KiB to {:.1f} MB", 4e-6 * static_cast<double>(largest)));
  const bool shm = j.contains("shm");
  const auto [a, b] = fit(j[shm ? "shm" : "messages"]);
  const auto [am, bm] = fit(j["messages"]);
  // an exchange is two transfers (push, pull), each through both endpoints'
  // links: a = 4 latencies, b = 2 / bandwidth
  // where the two ranks ran: one host, or two (a link between nodes)
  std::string where = "on one host";
  if (const auto h = j.value("hosts", std::vector<std::string>{}); h.size() == 2)
    where = h[0] == h[1] ? fmt::format("both on {}", h[0]) : fmt::format("on {} and {}", h[0], h[1]);
  const std::string how = fmt::format(
      "asgd calibrate {}: push + pull between 2 ranks ({}, launched by {}) with the training code's messages "
      "and waits over {}, "
      "{} sizes 4 KiB..{:.1f} MB, least squares T = a + b*bytes; latency a/4 per endpoint, bandwidth 2/b "
      "(messages: a = {:.1f} us, {:.2f} GB/s)",
      today(), where, o.mpiexec, shm ? "node-local shared windows (what runs on one node use)" : "messages", j["messages"].size(),
      4e-6 * static_cast<double>(largest), 1e6 * am, 2e-9 / bm);
  p.learner = {measured(a / 4, how), measured(2 / b, how)};
  p.server = p.learner;
  if (!shm && j.contains("send")) {
    // what is still to arrive when the send is done: the time between, at the link's rate
    const auto& s = j["send"];
    const double sent = s["sent_s"].get<double>(), arrived = s["arrived_s"].get<double>();
    const double buffered = std::clamp((arrived - sent - 2 * a / 4) * 2 / b, 0.0, s["bytes"].get<double>());
    p.send_buffer_bytes = measured(
        buffered, fmt::format("asgd calibrate {}: a send of {:.1f} MB to a posted receive ({}): done after {:.4f} s, "
                              "arrived (acknowledged) after {:.4f} s, median of 3; (arrived - done - 2 latencies) "
                              "x the bandwidth above",
                              today(), 1e-6 * s["bytes"].get<double>(), where, sent, arrived));
  }
  if (!shm) cpu_figure(j, p);
  p.exchange = perf::Exchange{shm ? "shared-windows" : "messages", "measured",
                              fmt::format("asgd calibrate {}: the link probe's 2 ranks ({}) {}", today(), where,
                                          shm ? "share node-local windows: replies are copied by the learners"
                                              : "have no shared window: the weights and gradients go by message")};
  if (p.send_buffer_bytes)
    spdlog::info("links    a send is done with {:.2f} MB still to arrive (send buffers)", 1e-6 * p.send_buffer_bytes->value);
  spdlog::info("links    latency {:.1f} us per endpoint, {:.2f} GB/s ({}, ranks {})", 1e6 * a / 4, 2e-9 / b,
               shm ? "shared windows" : "messages", where);
}

// What a waiting rank takes from working ones when ranks outnumber cores:
// C ranks compute alone (one) and together while one more waits politely;
// together at rate r = alone / together = C / (C + load).
void waiting_load(const CalibrateOptions& o, perf::Profile& p) {
  const int C = static_cast<int>(p.cores->value);
  const std::string model = o.models.front(), batch = std::to_string(o.batches.front());
  const auto j = run_probe(o, "cores", C + 1,
                           {"--models", model, "--batch", batch, "--threads", std::to_string(o.threads), "--steps",
                            std::to_string(o.steps)},
                           "together_brief", fmt::format("{} computing, 1 waiting", C));
  const double alone = j.at("alone").get<double>();
  const auto load_of = [&](const char* key, const std::string& waits) {
    const double together = j.at(key).get<double>();
    const double load = std::clamp(C * (together / alone - 1), 0.0, 1.0);
    spdlog::info("cores    {:.2f} ms alone, {:.2f} ms with {} at once + 1 waiting ({}): a waiting rank takes {:.3f} "
                 "of a core",
                 1e3 * alone, 1e3 * together, C, waits, load);
    return measured(
        load, fmt::format("asgd calibrate {}: mpiexec -n {}: {} interleaved rounds of {} minibatches of {} at batch "
                          "{} on one rank alone, then on {} ranks at once while one more rank waits politely for a "
                          "message ({}); median alone {} ms, together {} ms (the median round's ratio); "
                          "load = cores x (together / alone - 1), clamped to 0..1",
                          today(), C + 1, kCoresProbeRounds, j.at("per_round").get<int>(), model, batch, C, waits,
                          1e3 * alone, 1e3 * together));
  };
  p.waiting_rank_load = load_of("together", "one wait");
  p.brief_wait_load = load_of("together_brief", fmt::format("in waits of {:g} ms, each from its spin phase on",
                                                            1e3 * perf::kBriefWait_s));
}

}  // namespace

int cmd_calibrate(const CalibrateOptions& o) {
  // the profile's folder must take it: said before any measuring
  // error_code forms: a link loop is refused here by name, never a raw filesystem_error
  std::error_code ec;
  const std::filesystem::path out_dir = std::filesystem::absolute(o.out, ec).parent_path();
  if (!std::filesystem::is_directory(out_dir, ec) || ::access(out_dir.c_str(), W_OK) != 0)
    throw Error(fmt::format("--out {}: cannot write in {} (no such folder, or not writable)", o.out,
                            out_dir.string()));
  if (std::filesystem::is_directory(o.out, ec)) throw Error(fmt::format("--out {}: is a folder", o.out));
  if ((void)std::filesystem::status(o.out, ec), ec && ec != std::errc::no_such_file_or_directory)
    throw Error(fmt::format("--out {}: {}", o.out, ec.message()));
  check_writable(o.out);
  if (!valid_utf8(o.name)) throw Error(fmt::format("--name '{}': not valid UTF-8", shorten(o.name)));
  // a model or batch twice would time (and write) the same entry twice
  for (std::size_t i = 0; i < o.models.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (o.models[i] == o.models[j]) throw Error(fmt::format("--models: '{}' is given twice", o.models[i]));
  for (std::size_t i = 0; i < o.batches.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (o.batches[i] == o.batches[j]) throw Error(fmt::format("--batch: {} is given twice", o.batches[i]));
  // the wait policy and the switches it measures under: a bad value is said before any measuring
  (void)ps::event_wait_schedule();
  for (const char* name : {"ASGD_DOORBELL", "ASGD_SHM"}) (void)ps::env_switch(name);
  const auto t0 = Clock::now();
  perf::Profile p;
  const RunInfo info = collect_run_info();
  p.name = o.name.empty() ? info.host : o.name;
  p.machine = fmt::format("{}, {} CPUs allowed, {}", info.cpu_model, info.cpus_allowed, info.blas);
  p.description = fmt::format("measured by asgd calibrate ({}) on {}", info.git_commit, info.host);
  p.cores = measured(info.cpus_allowed, "this process's affinity mask (sched_getaffinity) at calibration");
  index_t largest = 1 << 20;
  {
    KokkosScope kokkos(o.threads);
    std::string biggest = o.models.front();
    for (const auto& m : o.models)
      for (int b : o.batches) {
        index_t n = 0;
        p.compute.push_back(compute_entry(m, b, o.threads, o.steps, n));
        if (n > largest) biggest = m;
        largest = std::max(largest, n);
      }
    // the shard's arrays after a learner's minibatch of the largest model, as in a run
    Stepper st(biggest, o.batches.front(), o.threads);
    server_figures(p, largest, [&] { st.times(1, 0); },
                   fmt::format("a minibatch gradient of {} at batch {} in the same process", biggest, o.batches.front()));
    per_push_figure(p);
  }
  wake_figures(p);
  link_figures(o, p, largest);
  waiting_load(o, p);
  if (o.inject_update_s > 0 || o.inject_byte_s > 0) {
    const std::string why = fmt::format("injected into the real server with ASGD_INJECT_SERVER={:g}:{:g} (the "
                                        "validation's server-bound runs)", o.inject_update_s, o.inject_byte_s);
    p.inject_update_s = perf::Figure{o.inject_update_s, "assumed", why};
    p.inject_byte_s = perf::Figure{o.inject_byte_s, "assumed", why};
  }
  perf::write_profile(p, o.out);
  spdlog::info("wrote {} in {:.0f} s", o.out, seconds_since(t0));
  return 0;
}

namespace {

// The cores probe's messages: a token sent, and the server's polite wait for one.
void probe_tell(const ps::Comm& comm, int to) {
  char token = 0;
  MPI_Request r = ps::isend(token, to, 1, comm.get());
  ps::polite_wait(r, ps::Wait::transfer);
}
// brief: in waits of perf::kBriefWait_s, each from its spin phase on
void probe_await(const ps::Comm& comm, int from, bool brief = false) {
  char token = 0;
  if (brief)
    while (!ps::polite_probe_for(from, 1, comm.get(), perf::kBriefWait_s)) {
    }
  else
    ps::polite_probe(from, 1, comm.get());
  MPI_Request r = ps::irecv(token, from, 1, comm.get());
  ps::polite_wait(r, ps::Wait::event);
}
// Ranks 1..C tell rank 0 and wait for it; rank 0 waits for each (`brief`: in
// brief waits), then tells them all.
void probe_meet(const ps::Comm& comm, bool brief) {
  if (comm.rank() > 0) {
    probe_tell(comm, 0);
    probe_await(comm, 0);
    return;
  }
  for (int q = 1; q < comm.size(); ++q) probe_await(comm, q, brief);
  for (int q = 1; q < comm.size(); ++q) probe_tell(comm, q);
}

}  // namespace

// Interleaved rounds: rank 1 alone while the others wait politely, then all C
// at once while rank 0 waits (one wait), then all C at once again while rank 0
// waits in brief waits (perf::kBriefWait_s each, as a rank answering often
// does); each round's ratios together / alone, their medians written (the
// machine's speed moves between seconds apart: one pair of timings moves the
// load by several times its value).
int cmd_calibrate_cores_probe(const CalibrateOptions& o) {
  const ps::Comm comm(MPI_COMM_WORLD);
  const int C = comm.size() - 1;
  if (C < 1) throw Error("calibrate --cores-probe: run with mpiexec -n cores+1");
  std::optional<KokkosScope> kokkos;
  std::optional<Stepper> st;
  if (comm.rank() > 0) {
    kokkos.emplace(o.threads);
    st.emplace(o.models.front(), o.batches.front(), o.threads);
    st->times(2, 0);
  }
  int per = std::max(2, o.steps / 2);  // a phase's minibatches: more where they last under kCoresProbePhase_s
  if (comm.rank() == 1) {  // a step: the median of enough steps to last 50 ms (a run's first steps are slow)
    double step_s = 1;
    for (int n = 3; n < (1 << 20); n *= 4)
      if ((step_s = report::median(st->times(0, n))) * n >= 0.05) break;
    per = static_cast<int>(std::clamp(std::ceil(kCoresProbePhase_s / std::max(step_s, 1e-7)), 1.0 * per, 1e6));
  }
  ps::mpi_check(MPI_Bcast(&per, 1, MPI_INT, 1, comm.get()), "Bcast");
  probe_meet(comm, false);  // everyone ready
  std::vector<double> alone, ratios[2];  // rank 0: each round's
  for (int round = 0; round < kCoresProbeRounds; ++round) {
    double a = 0, t[2] = {0, 0};
    if (comm.rank() == 1) {
      a = stats(st->times(0, per)).mean;
      for (int q = 0; q <= C; ++q)
        if (q != 1) probe_tell(comm, q);
    } else {
      probe_await(comm, 1);
    }
    for (int brief = 0; brief < 2; ++brief) {  // all at once: rank 0 in one wait, then in brief ones
      if (comm.rank() > 0) t[brief] = stats(st->times(0, per)).mean;
      probe_meet(comm, brief == 1);
    }
    std::vector<double> all(static_cast<std::size_t>(2 * (C + 1)));
    ps::mpi_check(MPI_Gather(t, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, comm.get()), "Gather");
    ps::mpi_check(MPI_Bcast(&a, 1, MPI_DOUBLE, 1, comm.get()), "Bcast");
    if (comm.rank() != 0) continue;
    alone.push_back(a);
    for (int b = 0; b < 2; ++b) {
      double mean = 0;
      for (int q = 1; q <= C; ++q) mean += all[static_cast<std::size_t>(2 * q + b)] / C;
      ratios[b].push_back(mean / a);
    }
  }
  st.reset();
  if (comm.rank() == 0) {
    const double a1 = report::median(alone);
    write_file_atomic(o.cores_probe, nlohmann::json{{"alone", a1}, {"together", a1 * report::median(ratios[0])},
                                                    {"together_brief", a1 * report::median(ratios[1])},
                                                    {"rounds", kCoresProbeRounds}, {"per_round", per}}
                                         .dump());
  }
  return 0;
}

namespace {
// The machine's busy CPU seconds over the probe's largest exchanges and, as
// `waits_s`, what the same span costs while both ranks only wait politely
// (the rate of `idle_rate`, busy CPU per second of such a wait), both ranks'
// machines counted once each (the ranks of the emulated cluster share one).
// Collective; rank 0 gets {busy_s, waits_s, seconds, bytes, machines}.
nlohmann::json probe_cpu(const ps::Comm& comm, double busy, double idle_rate, double span, double bytes) {
  char id[64] = {};
  const std::string mine = machine_boot_id();
  std::copy_n(mine.begin(), std::min<std::size_t>(mine.size(), sizeof id - 1), id);
  std::vector<char> ids(2 * sizeof id);
  const double mine_figures[2] = {busy, idle_rate * span};
  std::vector<double> all(4);
  ps::mpi_check(MPI_Gather(id, sizeof id, MPI_CHAR, ids.data(), sizeof id, MPI_CHAR, 0, comm.get()), "Gather");
  ps::mpi_check(MPI_Gather(mine_figures, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, comm.get()), "Gather");
  const bool one = std::string(ids.data()) == std::string(ids.data() + sizeof id) && id[0] != 0;
  return {{"busy_s", one ? all[0] : all[0] + all[2]},
          {"waits_s", one ? all[1] : all[1] + all[3]},
          {"seconds", span},
          {"bytes", bytes},
          {"machines", one ? 1 : 2}};
}

constexpr int kQuietTag = 32001;  // a tag no message carries: the quiet wait's

// The machine's busy CPU seconds per second while both ranks wait politely,
// for `seconds`, for a message that never comes: the waits' own cost with
// nothing flowing (and whatever else the machine runs), which the model
// charges apart from the bytes (the cores probe's loads).
double quiet_wait_rate(const ps::Comm& comm, double seconds) {
  ps::mpi_check(MPI_Barrier(comm.get()), "Barrier");
  const double b0 = machine_busy_seconds();
  const auto t0 = Clock::now();
  (void)ps::polite_probe_for(1 - comm.rank(), kQuietTag, comm.get(), seconds);
  const double rate = (machine_busy_seconds() - b0) / std::max(1e-9, seconds_since(t0));
  ps::mpi_check(MPI_Barrier(comm.get()), "Barrier");
  return rate;
}
}  // namespace

int cmd_calibrate_probe(const std::string& out, index_t largest) {
  const ps::Comm comm(MPI_COMM_WORLD);
  if (comm.size() != 2) throw Error("calibrate --link-probe: run with mpiexec -n 2");
  std::vector<index_t> sizes{1024, 16384, 262144, 1048576};
  if (largest > sizes.back()) sizes.push_back(largest);
  nlohmann::json j;
  for (bool shm : {true, false}) {
    nlohmann::json pts = nlohmann::json::array();
    try {
      for (index_t n : sizes) {
        const double bytes = 4.0 * static_cast<double>(n);
        // about 400 MB or 1 s of exchanges, whichever is less (a slow link: 3 at least);
        // one exchange first says how long one takes (both ranks agree on the count)
        const double one = ps::exchange_seconds(comm, n, 1, shm);
        double each = one;
        MPI_Allreduce(&one, &each, 1, MPI_DOUBLE, MPI_MAX, comm.get());
        const int iters = static_cast<int>(std::clamp(std::min(4e8 / bytes, 1.0 / std::max(each, 1e-9)), 3.0, 400.0));
        const bool count_cpu = !shm && n == sizes.back();
        const double quiet = count_cpu ? quiet_wait_rate(comm, 1.0) : 0.0;
        std::vector<double> t;
        const double busy0 = machine_busy_seconds();
        const auto t0 = Clock::now();
        for (int r = 0; r < 3; ++r) t.push_back(ps::exchange_seconds(comm, n, iters, shm));
        if (count_cpu)
          j["cpu"] = probe_cpu(comm, machine_busy_seconds() - busy0, quiet, seconds_since(t0), 3.0 * iters * 2 * bytes);
        std::sort(t.begin(), t.end());
        pts.push_back({bytes, t[1]});
      }
    } catch (const Error&) {
      if (!shm) throw;
      continue;  // no shared windows here: messages only
    }
    j[shm ? "shm" : "messages"] = pts;
  }
  {  // the largest size's send against its arrival (the send buffers)
    const ps::SendTimes st = ps::send_times(comm, sizes.back(), 3);
    j["send"] = {{"bytes", 4.0 * static_cast<double>(sizes.back())}, {"sent_s", st.sent}, {"arrived_s", st.arrived}};
  }
  j["hosts"] = ps::rank_hosts(comm);  // collective; rank 0 gets both
  if (comm.rank() == 0) write_file_atomic(out, j.dump());
  return 0;
}

}  // namespace asgd::cli
