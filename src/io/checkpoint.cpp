// Checkpoint files: root attributes, this shard's weights and momentum, the
// learners' data cursors, RNG words, and the results series so far under
// /progress, as documented in results/README.md.
#include "io/h5_util.hpp"
#include "io/results.hpp"
#include "io/virtual_state.hpp"

#include <cmath>
#include <cstdio>

namespace asgd::io {

namespace {

// Checked on write and on read, so a checkpoint that cannot be resumed is
// refused when it is made, not when it is needed.
void validate(const Checkpoint& c) {
  if (c.weights.size() != c.momentum.size()) {
    throw Error("weights has " + std::to_string(c.weights.size()) + " values, momentum has " +
                std::to_string(c.momentum.size()));
  }
  if (c.shard_count < 1 || c.shard_index < 0 || c.shard_index >= c.shard_count) {
    throw Error("shard_index " + std::to_string(c.shard_index) + " is not in [0, shard_count " +
                std::to_string(c.shard_count) + ")");
  }
  const auto shard_size = static_cast<std::int64_t>(c.weights.size());
  if (c.n_params < 0 || c.shard_offset < 0 || c.shard_offset > c.n_params - shard_size) {
    throw Error("shard of " + std::to_string(shard_size) + " parameters at offset " +
                std::to_string(c.shard_offset) + " does not fit n_params " + std::to_string(c.n_params));
  }
  if (c.shard_count == 1 && shard_size != c.n_params) {
    throw Error("holds " + std::to_string(shard_size) + " weights, but its one shard should hold all " +
                std::to_string(c.n_params) + " parameters");
  }
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (c.clock < 0 || c.schedule_step < 0)
    throw Error("clock " + std::to_string(c.clock) + " / schedule_step " +
                std::to_string(c.schedule_step) + " is negative");
  if (!std::isfinite(c.epochs) || c.epochs < 0)
    throw Error("epochs " + num(c.epochs) + " is not a finite count >= 0");
  if (!std::isfinite(c.wall_s) || c.wall_s < 0)
    throw Error("wall_s " + num(c.wall_s) + " is not a time");
  for (std::size_t l = 0; l < c.cursors.size(); ++l)
    if (c.cursors[l].epoch < 0 || c.cursors[l].batch < 0)
      throw Error("learner " + std::to_string(l) + "'s data cursor (epoch " +
                  std::to_string(c.cursors[l].epoch) + ", batch " + std::to_string(c.cursors[l].batch) +
                  ") is negative");
  // Past the run's end, where the checkpoint carries the run's config.
  const h5::RunEnd end = h5::run_end_of(c.progress.config_json);
  if (end.max_epochs >= 0 && c.epochs > end.max_epochs)
    throw Error("epochs " + num(c.epochs) + " lies past the run's end (" + num(end.max_epochs) +
                " epochs at most)");
  if (end.max_steps > 0 && c.clock > end.max_steps)
    throw Error("clock " + std::to_string(c.clock) + " lies past the run's end (max_steps " +
                std::to_string(end.max_steps) + ")");
}

void write_checkpoint_at(const h5::Loc& root, const Checkpoint& c) {
  validate(c);
  h5::write_attr(root, "magic", std::string(h5::kCheckpointMagic));
  h5::write_attr(root, "schema_version", c.schema_version);
  h5::write_attr(root, "run_id", c.run_id);
  h5::write_attr(root, "model", c.model);
  h5::write_attr(root, "config_hash", c.config_hash);
  h5::write_attr(root, "n_params", c.n_params);
  h5::write_attr(root, "shard_index", c.shard_index);
  h5::write_attr(root, "shard_count", c.shard_count);
  h5::write_attr(root, "shard_offset", c.shard_offset);
  h5::write_attr(root, "clock", c.clock);
  h5::write_attr(root, "schedule_step", c.schedule_step);
  h5::write_attr(root, "epochs", c.epochs);
  h5::write_attr(root, "wall_s", c.wall_s);

  h5::write_vector(root, "weights", c.weights);
  h5::write_vector(root, "momentum", c.momentum);
  {
    h5::Group g = h5::create_group(root, "cursors");
    const h5::Loc loc{g.get(), "/cursors"};
    h5::write_column(loc, "epoch", c.cursors, &LearnerCursor::epoch);
    h5::write_column(loc, "batch", c.cursors, &LearnerCursor::batch);
  }
  h5::write_vector(root, "rng", c.rng_state);
  {
    h5::Group g = h5::create_group(root, "progress");
    h5::write_run_result(h5::Loc{g.get(), "/progress"}, c.progress);
  }
  if (!c.virtual_state.empty()) write_virtual_state(root, c.virtual_state, c.n_params);
}

Checkpoint read_checkpoint_at(const h5::Loc& root) {
  if (!h5::has_attribute(root, "magic")) throw Error("not an asgd checkpoint (no magic attribute)");
  const std::string magic = h5::read_attr_str(root, "magic");
  if (magic != h5::kCheckpointMagic) {
    throw Error("not an asgd checkpoint (magic attribute is \"" + magic + "\", expected \"" +
                h5::kCheckpointMagic + "\")");
  }
  if (!h5::has_attribute(root, "schema_version")) {
    throw Error("not an asgd checkpoint (no schema_version attribute)");
  }
  Checkpoint c;
  c.schema_version = h5::read_attr_i32(root, "schema_version");
  if (c.schema_version > kCheckpointSchemaVersion) {
    throw Error("checkpoint schema version " + std::to_string(c.schema_version) + " is newer than this build (" +
                std::to_string(kCheckpointSchemaVersion) + ")");
  }
  if (c.schema_version < 1) throw Error("invalid checkpoint schema version " + std::to_string(c.schema_version));
  if (c.schema_version < 2)
    throw Error("checkpoint schema version " + std::to_string(c.schema_version) +
                " stores dense weights [inputs, outputs]; this build stores them [outputs, inputs] "
                "(schema 2): remove the checkpoint to start the run again");
  c.run_id = h5::read_attr_str(root, "run_id");
  c.model = h5::read_attr_str(root, "model");
  c.config_hash = h5::read_attr_str(root, "config_hash");
  c.n_params = h5::read_attr_i64(root, "n_params");
  c.shard_index = h5::read_attr_i32(root, "shard_index");
  c.shard_count = h5::read_attr_i32(root, "shard_count");
  c.shard_offset = h5::read_attr_i64(root, "shard_offset");
  c.clock = h5::read_attr_i64(root, "clock");
  c.schedule_step = h5::read_attr_i64(root, "schedule_step");
  c.epochs = h5::read_attr_f64(root, "epochs");
  c.wall_s = h5::read_attr_f64(root, "wall_s");

  c.weights = h5::read_vector<float>(root, "weights");
  c.momentum = h5::read_vector<float>(root, "momentum");
  {
    h5::Group g = h5::open_group(root, "cursors");
    const h5::Loc loc{g.get(), "/cursors"};
    h5::read_column(loc, "epoch", c.cursors, &LearnerCursor::epoch, true);
    h5::read_column(loc, "batch", c.cursors, &LearnerCursor::batch, false);
  }
  c.rng_state = h5::read_vector<std::uint64_t>(root, "rng");
  {
    h5::Group g = h5::open_group(root, "progress");
    c.progress = h5::read_run_result(h5::Loc{g.get(), "/progress"});
  }
  if (h5::has_link(root, "virtual")) c.virtual_state = read_virtual_state(root, c.n_params);
  validate(c);
  return c;
}

}  // namespace

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  h5::atomic_write(path, [&](const h5::Loc& root) { write_checkpoint_at(root, c); });
}

Checkpoint read_checkpoint(const std::string& path) {
  Checkpoint c;
  h5::read_file(path, [&](const h5::Loc& root) { c = read_checkpoint_at(root); });
  return c;
}

void check_checkpoint(const Checkpoint& ck, const std::string& path, const CheckpointExpect& want) {
  const std::string what = want.what;
  auto fail = [&](const std::string& msg) { throw Error(path + ": " + what + " " + msg); };
  if (!want.config_hash.empty() && ck.config_hash != want.config_hash)
    throw Error(path + ": " + what + " was written by another configuration (hash " + ck.config_hash +
                ", this run " + want.config_hash + "); remove it or choose another --run-id");
  if (!want.model.empty() && ck.model != want.model)
    fail("holds model " + ck.model + ", this run is " + want.model);
  if (want.n_params >= 0 && ck.n_params != want.n_params)
    fail("holds " + std::to_string(ck.n_params) + " parameters, this run's " + want.model + " has " +
         std::to_string(want.n_params));
  if (ck.shard_count != want.shard_count || ck.shard_index != want.shard_index ||
      ck.shard_offset != want.shard_offset)
    fail("is shard " + std::to_string(ck.shard_index) + " of " + std::to_string(ck.shard_count) +
         " (offset " + std::to_string(ck.shard_offset) + "), this run needs shard " +
         std::to_string(want.shard_index) + " of " + std::to_string(want.shard_count) + " (offset " +
         std::to_string(want.shard_offset) + ")");
  const std::int64_t len = want.shard_len >= 0 ? want.shard_len : want.shard_count == 1 ? want.n_params : -1;
  if (len >= 0 && static_cast<std::int64_t>(ck.weights.size()) != len)
    fail("holds " + std::to_string(ck.weights.size()) + " weights, this run needs " + std::to_string(len));
  if (len >= 0 && static_cast<std::int64_t>(ck.momentum.size()) != len)
    fail("holds " + std::to_string(ck.momentum.size()) + " momentum values, this run needs " +
         std::to_string(len));
  if (want.learners >= 0 && static_cast<std::int64_t>(ck.cursors.size()) != want.learners)
    fail("holds data cursors of " + std::to_string(ck.cursors.size()) + " learners, this run has " +
         std::to_string(want.learners));
  if (want.max_clock >= 0 && ck.clock > want.max_clock)
    fail("is at update " + std::to_string(ck.clock) + ", past the run's end at update " +
         std::to_string(want.max_clock));
  if (want.max_epochs >= 0 && ck.epochs > want.max_epochs) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "is at epoch %g, past the run's end (%g epochs)", ck.epochs, want.max_epochs);
    fail(buf);
  }
  if (want.finite_weights) {
    for (std::size_t i = 0; i < ck.weights.size(); ++i)
      if (!std::isfinite(ck.weights[i]))
        fail("holds a non-finite weight (" + std::string(std::isnan(ck.weights[i]) ? "NaN" : "Inf") +
             " at index " + std::to_string(i) + "): the run it came from diverged");
  }
}

}  // namespace asgd::io
