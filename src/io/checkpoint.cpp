// Checkpoint files: root attributes, this shard's weights and momentum, the
// learners' data cursors, RNG words, and the results series so far under
// /progress, as documented in results/README.md.
#include "io/h5_util.hpp"
#include "io/results.hpp"

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

}  // namespace asgd::io
