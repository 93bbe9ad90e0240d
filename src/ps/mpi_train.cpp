#include "ps/mpi_train.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <filesystem>
#include <optional>

#include "ps/allreduce.hpp"
#include "ps/mpi_learner.hpp"
#include "ps/mpi_server.hpp"
#include "ps/mpi_util.hpp"
#include "ps/protocol.hpp"
#include "ps/session.hpp"
#include "ps/shards.hpp"
#include "ps/run_parts.hpp"
#include "ps/shm_windows.hpp"

namespace asgd::ps {

namespace fs = std::filesystem;
namespace {

// Every shard resumes from its checkpoint, or none does: a mix (one shard's
// checkpoint lost) cannot be continued consistently. Collective.
bool agree_on_resume(const Comm& comm, const TrainConfig& cfg, bool server, bool resumed,
                     const RunPaths& paths) {
  const int mine = server ? (resumed ? 1 : 0) : -1;
  std::vector<int> all(static_cast<std::size_t>(comm.size()));
  mpi_check(MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, comm.get()), "Allgather");
  int resumed_shards = 0;
  for (int v : all) resumed_shards += v == 1 ? 1 : 0;
  if (resumed_shards != 0 && resumed_shards != cfg.servers)
    throw CollectiveError(fmt::format(
        "{} of {} server shards have a checkpoint in {}; resume needs all of them (remove the "
        "shard checkpoints of run {} to start again)",
        resumed_shards, cfg.servers, fs::path(paths.checkpoint).parent_path().string(),
        resolved_run_id(cfg)));
  return resumed_shards == cfg.servers;
}

// Warm start from single-learner steps: server 0 makes them, every rank
// takes the result (the learners fetch from the servers anyway). Collective.
void warm_up_everywhere(const Comm& comm, const TrainConfig& cfg, const TrainOptions& opt,
                        engine::Engine& eng, const data::Dataset& train, Server* srv) {
  double t = 0;
  if (comm.rank() == 0) t = warm_up(cfg, eng, train);
  eng.params_to_host();
  mpi_check(MPI_Bcast(eng.params(), static_cast<int>(eng.n_params()), MPI_FLOAT, 0, comm.get()), "Bcast");
  mpi_check(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, comm.get()), "Bcast");
  if (srv) {
    srv->load_weights(eng.params());
    srv->warm_up_took(t);  // on the training clock
  }
  if (comm.rank() == 0 && !opt.quiet)
    spdlog::info("warm start: {} single-learner steps on server 0 in {:.1f}s", cfg.warm_steps, t);
}

// --device cuda: each learner takes a GPU by its rank among the learners on
// its node. A learner that cannot get one stops the whole run before
// training. Collective; servers (and CPU runs) return nullptr.
std::unique_ptr<engine::Engine> learner_gpu(const Comm& comm, const TrainConfig& cfg,
                                            const TrainOptions& opt, const SharedWindows& shm,
                                            const engine::Engine& cpu, bool cuda_aware) {
  if (cfg.device == "cpu") return nullptr;
  const bool server = comm.rank() < cfg.servers;
  MPI_Comm learners_here = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split(shm.node, server ? 0 : 1, comm.rank(), &learners_here), "Comm_split");
  int node_learner = 0;
  mpi_check(MPI_Comm_rank(learners_here, &node_learner), "Comm_rank");
  mpi_check(MPI_Comm_free(&learners_here), "Comm_free");
  std::unique_ptr<engine::Engine> eng;
  std::string gpu_error;
  try {
    if (!server) eng = engine::make_engine(cfg.device, cpu.spec(), cfg.batch, node_learner);
  } catch (const std::exception& e) {
    gpu_error = fmt::format("learner {}: {}", comm.rank() - cfg.servers, e.what());
  }
  stop_if_any_failed(comm, gpu_error, "a learner could not set up its GPU");
  if (eng && !opt.quiet)
    spdlog::info("learner {} on {}{}", comm.rank() - cfg.servers, eng->describe(),
                 cuda_aware && !shm.on ? ", CUDA-aware MPI (no host staging)" : ", host staging");
  return eng;
}

void log_start(const TrainConfig& cfg, const RunSession& session, const engine::Engine& eng,
               const data::DataPair& data, const RunInfo& info, bool resumed) {
  spdlog::info("run {} -> {}", resolved_run_id(cfg), session.paths().results);
  spdlog::info("{}", eng.summary());
  spdlog::info("{} servers + {} learners, protocol {}{}, lr policy {}, batch {} per learner; "
               "data {} ({} train); BLAS {}",
               cfg.servers, cfg.learners, cfg.protocol, UpdateRule(cfg).protocol().describe(),
               cfg.lr_policy, cfg.batch, data.train.name, data.train.n, info.blas);
  if (resumed) spdlog::info("resuming {} from its checkpoints", resolved_run_id(cfg));
}

void check_shape(const TrainConfig& cfg, const Comm& comm) {
  if (auto problems = validate_run(cfg); !problems.empty()) {
    try {
      check(cfg);
    } catch (const Error& e) {
      throw CollectiveError(e.what());
    }
  }
  const int S = cfg.servers, L = cfg.learners;
  if (!UpdateRule(cfg).uses_servers()) {
    if (comm.size() != L)
      throw CollectiveError(fmt::format(
          "started with {} MPI ranks, but --learners {} with protocol {} (no servers) need exactly "
          "{} (mpiexec -n {})",
          comm.size(), L, cfg.protocol, L, L));
    return;
  }
  if (comm.size() != S + L)
    throw CollectiveError(fmt::format(
        "started with {} MPI ranks, but --servers {} + --learners {} need exactly {} (mpiexec -n {})",
        comm.size(), S, L, S + L, S + L));
}

// Every rank: its session (the writer's holds the run's lock; a finished run
// is not run again, a failed one, the watchdog's, is resumed from its
// checkpoints), the data and a CPU engine, and on a server its shard,
// resumed or warm-started. Collective; returns 1 when the run is finished.
int set_up(const Comm& comm, const TrainConfig& cfg, const TrainOptions& opt,
           std::optional<RunSession>& session, std::optional<RunSetup>& run,
           std::optional<Server>& srv, bool& resumed) {
  const bool server = comm.rank() < cfg.servers, writer = comm.rank() == 0;
  std::string error;
  int skip = 0;
  try {
    session.emplace(cfg, opt, writer);
    skip = session->finished() ? 1 : 0;
    run.emplace(session->load(writer ? 0 : cfg.batch, "cpu"));  // a GPU learner's comes later
    run->engine->init(cfg.seed);
    if (server) {
      srv.emplace(*session, comm, &run->data, *run->engine);
      if (!skip) resumed = srv->resume();
      if (!skip && !resumed && !cfg.warm_start.empty()) {
        load_warm_start(cfg, *run->engine);
        srv->load_weights(run->engine->params());
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  stop_if_any_failed(comm, error, "set-up failed on another rank");
  mpi_check(MPI_Bcast(&skip, 1, MPI_INT, 0, comm.get()), "Bcast");
  return skip;
}

// Names this rank in its messages and sets its stall timeout: server 0 gives
// up first, so that it can still write the failed result; every other rank a
// little later (when every rank is stuck, all fire).
void name_rank(int rank, int servers, double stall_timeout_s) {
  set_rank_label(rank < servers ? fmt::format("rank {} (server {})", rank, rank)
                                : fmt::format("rank {} (learner {})", rank, rank - servers));
  set_stall_timeout(rank == 0 ? stall_timeout_s : stall_timeout_s * 1.2 + 1);
}

// A server rank runs its shard; server 0 writes the result through `write`,
// also what was trained before a stall (marked failed; the checkpoint stays
// for a resume).
template <class Write>
void serve(Server& srv, bool writer, const Write& write, TrainOutcome& out) {
  io::RunResult res;
  try {
    res = srv.run();
  } catch (const Stalled&) {
    if (writer) {
      res = srv.failed_result();
      write(res);
    }
    throw;
  }
  if (writer) {
    write(res);
    out.result = std::move(res);
  }
}

}  // namespace

TrainOutcome train_mpi(const TrainConfig& cfg, MPI_Comm parent, const TrainOptions& opt) {
  Comm comm(parent);
  check_shape(cfg, comm);
  check_injection();  // a bad ASGD_INJECT_*, ASGD_WAIT or switch stops the run before any work; every rank finds it
  const bool no_servers = !UpdateRule(cfg).uses_servers();
  const int S = no_servers ? 0 : cfg.servers, L = cfg.learners;
  const bool server = comm.rank() < S;
  const bool writer = comm.rank() == 0;
  name_rank(comm.rank(), S, opt.stall_timeout_s);
  if (no_servers) return train_allreduce(cfg, comm, opt);

  // Set-up on every rank; any failure is reported by the rank that saw it and
  // every rank stops before training starts.
  std::optional<RunSession> session;
  std::optional<RunSetup> run;
  std::optional<Server> srv;
  bool resumed = false;
  const int skip = set_up(comm, cfg, opt, session, run, srv, resumed);
  TrainOutcome& out = session->outcome();
  out.skipped = skip != 0;
  if (skip) return out;
  engine::Engine& cpu = *run->engine;
  out.resumed = agree_on_resume(comm, cfg, server, resumed, out.paths);
  if (!out.resumed && cfg.warm_steps > 0)
    warm_up_everywhere(comm, cfg, opt, cpu, run->data.train, server ? &*srv : nullptr);

  // Node-local shared windows when every rank is on this node (see SharedWindows).
  SharedWindows shm;
  open_shared_windows(shm, comm, server,
                      server ? shard_of(cpu.n_params(), comm.rank(), S).len : cpu.n_params(), S, L);
  if (shm.on && server) srv->use_shared(&shm);
  const bool cuda_aware = cfg.device == "cuda" && mpi_cuda_aware();
  const std::unique_ptr<engine::Engine> gpu = learner_gpu(comm, cfg, opt, shm, cpu, cuda_aware);

  const RunInfo info = collect_run_info();
  const std::vector<std::string> nodes = rank_hosts(comm);  // collective
  // learners' GPUs are theirs to know; their logs name each device
  const std::string gpu_note =
      cfg.device == "cuda" ? fmt::format("cuda: one GPU per learner ({} learners)", L) : "";
  if (writer && !opt.quiet) log_start(cfg, *session, cpu, run->data, info, out.resumed);
  // server 0's result: header, transport, summary, written (temporary name, then rename)
  auto write = [&](io::RunResult& res) {
    const std::string mpi = mpi_library_version();
    session->header(res, info, cfg.protocol, mpi);
    res.machine_json = machine_json(info, {S + L, cfg.threads, nodes, mpi, gpu_note});
    res.transport = shm.on ? "shared-memory" : "messages";  // ASGD_SHM=0: messages
    if (shm.on) res.weights = weights_in_place(shm, cfg, cpu.n_params()) ? "in-place" : "copied";
    session->finish(res, res.status, res.summary.train_time_s, res.summary.epochs);
  };
  if (!server) {
    run_learner(cfg, comm, run->data.train, gpu ? *gpu : cpu, shm, cuda_aware);
    return out;
  }
  serve(*srv, writer, write, out);
  return out;
}

}  // namespace asgd::ps
