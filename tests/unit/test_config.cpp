// The configuration's field table (config/fields.hpp) and what is made from
// it: config hashes and run ids that name existing runs' files (pinned), JSON
// round trips of every field, the suite's reserved keys, and validate()
// naming each field's problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <variant>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/nesting.hpp"
#include "common/text.hpp"
#include "config/config.hpp"
#include "config/fields.hpp"

namespace {

// A config with every field away from its default.
asgd::TrainConfig changed() {
  asgd::TrainConfig c;
  c.model = "mlp";
  c.data = {"synthetic", "/data", 8, 9, 3, 5, 100, 50, 4, false};
  c.batch = 16;
  c.lr = 0.5;
  c.momentum = 0.5;
  c.weight_decay = 0.25;
  c.lr_steps = {2, 4};
  c.lr_gamma = 0.5;
  c.epochs = 3;
  c.max_steps = 7;
  c.eval_every = 2;
  c.eval_batch = 32;
  c.eval_samples = 10;
  c.checkpoint_every = 5;
  c.seed = 7;
  c.target_error = 0.3;
  c.diverge_loss = 99;
  c.threads = 2;
  c.device = "cuda";
  c.results_dir = "r";
  c.suite = "s";
  c.run_id = "id";
  c.learners = 4;
  c.servers = 2;
  c.protocol = "softsync";
  c.softsync_n = 2;
  c.n_sync = 3;
  c.staleness = 2;  // the other protocols' options, written when set
  c.tau = 4;
  c.alpha = 0.3;
  c.lambda_dc = 0.1;
  c.profile = "profiles/p.yaml";
  c.merge = "server-sgd";  // nsync's merge rule and its options, written when set
  c.server_lr = 0.05;
  c.server_momentum = 0.5;
  c.lr_policy = "staleness";
  c.warm_start = "w.h5";
  c.warm_steps = 0;
  c.virtual_learners = true;
  c.timing = "fixed";
  c.compute_s = 0.1;
  c.compute_cv = 0.2;
  c.comm_s = 0.3;
  c.straggler = 1;
  c.straggler_factor = 2;
  return c;
}

}  // namespace

// Results files, checkpoints and suite folders are named by these: they must
// never change (values of the implementation before the field table).
TEST(ConfigTable, HashesAndRunIdsArePinned) {
  asgd::TrainConfig c;
  EXPECT_EQ(asgd::config_hash(c), "a56e800a75ae1450");
  EXPECT_EQ(asgd::resolved_run_id(c), "lenet-fashion-mnist-hardsync-L1-a56e800a");
  c.model = "mlp";
  c.data.kind = "synthetic";
  c.learners = 4;
  c.protocol = "softsync";
  c.softsync_n = 2;
  c.lr_steps = {2, 4};
  c.seed = 7;
  EXPECT_EQ(asgd::resolved_run_id(c), "mlp-synthetic-softsync-L4-08986941");
  // paths, ids, threads and the checkpoint interval are not hashed; the device is
  c.device = "cuda";
  c.results_dir = "elsewhere";
  c.threads = 4;
  c.checkpoint_every = 9;
  c.suite = "s";
  EXPECT_EQ(asgd::config_hash(c), "fb1ce83b955741fc");
  static_assert(asgd::fnv1a64("") == asgd::kFnv1aOffset);
  static_assert(asgd::mix(0, 0) == asgd::splitmix64(0));
}

TEST(ConfigTable, EveryFieldRoundTripsThroughJson) {
  const asgd::TrainConfig c = changed();
  const nlohmann::json j = c;
  for (const auto& f : asgd::config::fields()) EXPECT_TRUE(j.contains(f.key)) << f.key;
  for (const auto& f : asgd::config::dataset_fields()) EXPECT_TRUE(j["dataset"].contains(f.key)) << f.key;
  EXPECT_EQ(j.size(), asgd::config::fields().size());
  const asgd::TrainConfig back = j.get<asgd::TrainConfig>();
  EXPECT_EQ(nlohmann::json(back).dump(), j.dump());
  // the default device is not written (CPU configurations keep their hashes)
  EXPECT_FALSE(nlohmann::json(asgd::TrainConfig{}).contains("device"));
}

TEST(ConfigTable, KeysAreUniqueAndOptionsNamed) {
  std::set<std::string> keys, flags;
  for (const auto& f : asgd::config::fields()) {
    EXPECT_TRUE(keys.insert(f.key).second) << f.key;
    if (f.option.flag) {
      EXPECT_TRUE(flags.insert(f.option.flag).second) << f.option.flag;
    }
  }
  for (const auto& f : asgd::config::dataset_fields()) {
    if (f.option.flag) {
      EXPECT_TRUE(flags.insert(f.option.flag).second) << f.option.flag;
    }
  }
  // bookkeeping a suite fills in itself
  for (const char* k : {"results_dir", "suite", "run_id", "virtual"}) {
    const auto& t = asgd::config::fields();
    const auto it = std::find_if(t.begin(), t.end(), [&](const auto& f) { return std::string(f.key) == k; });
    ASSERT_NE(it, t.end()) << k;
    EXPECT_NE(it->suite.reserved, nullptr) << k;
  }
}

TEST(ConfigTable, EachCheckNamesItsField) {
  auto problems = [](auto set) {
    asgd::TrainConfig c;
    set(c);
    std::string s;
    for (const auto& p : asgd::validate(c)) s += p + "; ";
    return s;
  };
  EXPECT_EQ(problems([](asgd::TrainConfig&) {}), "");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.batch = 0; }), "batch 0 must be >= 1; ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.protocol = "x"; }).rfind("protocol 'x' unknown (hardsync, softsync, nsync, allreduce, ssp, easgd, dcasgd", 0),
            0u);
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.lr_policy = "x"; }),
            "lr policy 'x' unknown (constant, staleness, mean-staleness); ");
  // a protocol's option is checked when another protocol is chosen too
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.softsync_n = 3; }), "softsync n 3 must be in 1..learners (1); ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) {
              c.protocol = "softsync";
              c.softsync_n = 3;
            }),
            "softsync n 3 must be in 1..learners (1); ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.n_sync = 0; }), "n_sync 0 must be >= 1; ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.model = "resnet"; }),
            "model 'resnet' unknown (mlp, lenet, cifar10-18pct, alexnet); ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.data.kind = "x"; }),
            "dataset 'x' unknown (fashion-mnist, mnist, cifar10, synthetic); ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.compute_s = -1; c.comm_s = -1; }),
            "compute_s and comm_s must be >= 0 and finite; ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) {
              c = changed();
              c.virtual_learners = false;
              c.profile.clear();
              c.staleness = c.tau = std::nullopt;  // other protocols' options: refused under softsync
              c.alpha = c.lambda_dc = std::nullopt;
              c.merge = std::nullopt;  // nsync's
              c.server_lr = c.server_momentum = std::nullopt;
            }),
            "");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.tau = 3; }),
            "--tau is an option of protocol easgd, not of hardsync; ");
}

// "Not given" is absence: a value given is checked as given, -1 (the old
// sentinel) and a protocol's own default included.
TEST(Config, GivenIsCheckedWhateverItsValue) {
  auto problems = [](auto set) {
    asgd::TrainConfig c;
    set(c);
    std::string s;
    for (const auto& p : asgd::validate(c)) s += p + "; ";
    return s;
  };
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.lambda_dc = -1; }),
            "--lambda-dc is an option of protocol dcasgd, not of hardsync; ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) { c.staleness = 3; }),
            "--staleness is an option of protocol ssp, not of hardsync; ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) {
              c.protocol = "allreduce";
              c.learners = 2;
              c.merge = "sum";
            }),
            "--merge is an option of protocol nsync, not of allreduce; ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) {
              c.protocol = "ssp";
              c.staleness = -1;
            }),
            "--staleness -1 must be in 0..1000000; ");
  EXPECT_EQ(problems([](asgd::TrainConfig& c) {
              c.protocol = "nsync";
              c.server_momentum = -1;
            }),
            "--server-momentum -1 must be in [0, 1); --server-momentum is an option of merge server-sgd, not of "
            "merge sum; ");
  asgd::TrainConfig c;
  c.protocol = "nsync";
  const std::string without = asgd::config_hash(c);
  c.merge = "sum";  // the rule run without one: the same hash and run id as before
  EXPECT_EQ(asgd::config_hash(c), without);
  EXPECT_EQ(nlohmann::json(c).value("merge", ""), "sum");  // but stored as given
}

TEST(Config, OptionalFieldsThroughJson) {
  asgd::TrainConfig c;
  c.protocol = "ssp";
  c.staleness = 0;
  const nlohmann::json j = c;
  EXPECT_EQ(j.at("staleness"), 0);
  EXPECT_FALSE(j.contains("tau"));
  asgd::TrainConfig back = j.get<asgd::TrainConfig>();
  EXPECT_EQ(back.staleness, 0);
  EXPECT_FALSE(back.tau.has_value());
  // a stored configuration of an older build with -1 for "not given" reads as absent
  nlohmann::json old = nlohmann::json(asgd::TrainConfig{});
  old["lambda_dc"] = -1;
  EXPECT_NO_THROW(asgd::check_same_config(asgd::TrainConfig{}, old.dump(), "old.h5"));
  // strictly read (--config), -1 is a value: refused by the check
  nlohmann::json given = nlohmann::json::object();
  given["lambda_dc"] = -1;
  EXPECT_EQ(given.get<asgd::TrainConfig>().lambda_dc, -1.0);
  // no straggler: absent, stored without it, read back from an older file's -1, the same hash
  EXPECT_FALSE(nlohmann::json(asgd::TrainConfig{}).contains("straggler"));
  nlohmann::json with_old = nlohmann::json(asgd::TrainConfig{});
  with_old["straggler"] = -1;
  EXPECT_NO_THROW(asgd::check_same_config(asgd::TrainConfig{}, with_old.dump(), "old.h5"));
  asgd::TrainConfig slow;
  slow.virtual_learners = true;
  slow.learners = 2;
  slow.straggler = -1;  // a value given: refused
  EXPECT_EQ(asgd::validate(slow).size(), 1u);
  slow.straggler = 1;
  EXPECT_TRUE(asgd::validate(slow).empty());
  EXPECT_NE(asgd::config_hash(slow), asgd::config_hash(asgd::TrainConfig{}));
}

TEST(Text, Utf8) {
  EXPECT_TRUE(asgd::valid_utf8("plain"));
  EXPECT_TRUE(asgd::valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(asgd::valid_utf8("\xff\xfe"));
  EXPECT_FALSE(asgd::valid_utf8("\xc0\xaf"));           // overlong
  EXPECT_FALSE(asgd::valid_utf8("\xed\xa0\x80"));       // a surrogate
  EXPECT_FALSE(asgd::valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(asgd::valid_utf8("\xe2\x82"));           // cut short
}

TEST(Nesting, JsonDepth) {
  EXPECT_EQ(asgd::json_too_deep(std::string(64, '[') + std::string(64, ']')), 0u);
  EXPECT_EQ(asgd::json_too_deep(std::string(65, '[') + std::string(65, ']')), 1u);
  EXPECT_EQ(asgd::json_too_deep("{\"a\": \"" + std::string(100, '[') + "\"}"), 0u);  // in a string
  EXPECT_EQ(asgd::json_too_deep("{\"a\": \"\\\"" + std::string(100, '[') + "\"}"), 0u);  // after an escaped quote
  EXPECT_EQ(asgd::json_too_deep("\n\n" + std::string(200000, '[')), 3u);
  const auto j = asgd::parse_json_bounded<nlohmann::json>(std::string(100, '[') + std::string(100, ']'));
  EXPECT_TRUE(j.is_discarded());
}

TEST(Nesting, YamlText) {
  EXPECT_EQ(asgd::yaml_too_deep("a:\n  b:\n    c: [1, {d: 2}]\n"), 0u);
  std::string block;
  for (int i = 0; i < 200; ++i) block += "- ";
  EXPECT_EQ(asgd::yaml_too_deep(block + "x\n"), 1u);
  EXPECT_EQ(asgd::yaml_too_deep("x: 1\ny: " + std::string(200, '[') + "\n"), 2u);
  EXPECT_EQ(asgd::yaml_too_deep("x: \"" + std::string(200, '[') + "\"\n"), 0u);  // quoted text
  EXPECT_EQ(asgd::yaml_unclosed_quote("a: \"b\"\nc: 'd''e'\n"), 0u);
  EXPECT_EQ(asgd::yaml_unclosed_quote("a: 1\nb: \"never closed\n"), 2u);
  EXPECT_EQ(asgd::yaml_unclosed_quote("a: 'open\n"), 1u);
  EXPECT_EQ(asgd::yaml_unclosed_quote("a: don't\nb: it's # 'c\n"), 0u);  // not at a token's start, a comment
  EXPECT_EQ(asgd::yaml_unclosed_quote("a: |\n  \"text\n  more\nb: 1\n"), 0u);  // a block scalar's text
  EXPECT_EQ(asgd::yaml_unclosed_quote("a: \"two\n  lines\"\n"), 0u);
  // one document a file: a marker before the content (and comments, directives) is the first
  EXPECT_EQ(asgd::yaml_second_document("# c\n%YAML 1.2\n---\na: 1\nb: ---x\n  --- not a marker\n"), 0u);
  EXPECT_EQ(asgd::yaml_second_document("a: 1\n---\nname: other\n"), 2u);
  EXPECT_EQ(asgd::yaml_second_document("---\na: |\n  text\n--- # next\n"), 4u);  // ends a block scalar too
  EXPECT_EQ(asgd::yaml_second_document("a: 1\n...\n"), 2u);
  EXPECT_EQ(asgd::yaml_second_document("...\nb: 2\n"), 0u);
  EXPECT_EQ(asgd::yaml_second_document("...\n---\nb: 2\n"), 2u);
  EXPECT_THROW(asgd::check_yaml_text("a: 1\n---\n", "suite x.yaml"), asgd::Error);
}

// Every number's range, as --help states it, is what validate() holds it to:
// a value just outside each bound (and NaN) is one problem naming the field
// and the range; the bound itself (closed) or just inside it (open) is none.
TEST(ConfigFields, EveryRangeIsCheckedAtItsBounds) {
  int probed = 0;
  for (const auto& f : asgd::config::fields()) {
    if (!f.range.checked()) continue;
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_member_object_pointer_v<M>) {
            using T = std::decay_t<decltype(asgd::TrainConfig{}.*m)>;
            if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
              const bool integer = std::is_integral_v<T>;
              std::string name = f.key;
              std::replace(name.begin(), name.end(), '_', ' ');
              const std::string says = "must be " + f.range.describe(integer);
              const auto probe = [&](double v, bool ok) {
                asgd::TrainConfig c;
                c.*m = static_cast<T>(v);
                int named = 0;
                for (const auto& p : asgd::validate(c))
                  if (p.rfind(name + " ", 0) == 0 && p.find(says) != std::string::npos) ++named;
                EXPECT_EQ(named, ok ? 0 : 1) << f.key << " = " << v << " (" << says << ")";
                ++probed;
              };
              const auto step = [&](double b) { return integer ? 1.0 : 1e-6 * std::max(1.0, std::fabs(b)); };
              const auto& r = f.range;
              if (r.has_lo) {
                probe(r.lo_open ? r.lo : r.lo - step(r.lo), false);
                probe(r.lo_open ? r.lo + step(r.lo) : r.lo, true);
              }
              if (r.has_hi) {
                probe(r.hi_open ? r.hi : r.hi + step(r.hi), false);
                probe(r.hi_open ? r.hi - step(r.hi) : r.hi, true);
              }
              if (!integer) probe(std::numeric_limits<double>::quiet_NaN(), false);
            }
          }
        },
        f.member);
  }
  EXPECT_GE(probed, 40);
}

TEST(ConfigFields, RangeTexts) {
  using namespace asgd::config;
  EXPECT_EQ(at_least(1).describe(true), ">= 1");
  EXPECT_EQ(above(0).describe(false), "> 0");
  EXPECT_EQ(closed(1, 512).describe(true), "in 1..512");
  EXPECT_EQ(half_open(0, 1).describe(false), "in [0, 1)");
  EXPECT_EQ(open(0, 1).describe(false), "in (0, 1)");
  EXPECT_EQ(closed(0, 1).describe(false), "in [0, 1]");
  EXPECT_EQ(depends("in 1..learners").describe(true), "in 1..learners");
  EXPECT_FALSE(depends("x").checked());
  EXPECT_FALSE(half_open(0, 1).holds(1));
  EXPECT_TRUE(half_open(0, 1).holds(0));
  EXPECT_FALSE(above(0).holds(std::numeric_limits<double>::infinity()));
}

// The memory estimate of virtual learners asks the protocol what it keeps:
// EASGD a learner's momentum and centre beside its weights, DC-ASGD the weights
// the shard sent each learner, nsync a learner's momentum, softsync neither.
TEST(Config, MemoryEstimateCountsWhatEachProtocolKeeps) {
  asgd::TrainConfig c;
  c.model = "mlp";
  c.data.kind = "synthetic";
  c.data.h = c.data.w = 8;
  c.data.n_train = 4096;
  c.virtual_learners = true;
  c.learners = 16;
  c.protocol = "softsync";
  c.softsync_n = 16;
  const double base = asgd::estimate_memory(c).model;
  auto with = [&](const char* protocol) {
    asgd::TrainConfig x = c;
    x.protocol = protocol;
    return asgd::estimate_memory(x).model;
  };
  // one parameter-sized copy per learner, in bytes: base holds 5 + 3 + 16 of them
  const double copy = base / (5 + 3 + 16);
  EXPECT_NEAR(with("nsync"), base + 16 * copy, 1e-6 * base);
  EXPECT_NEAR(with("easgd"), base + 32 * copy, 1e-6 * base);
  EXPECT_NEAR(with("dcasgd"), base + (1 + 16) * copy, 1e-6 * base);  // an accumulator and 16 copies sent
  EXPECT_NEAR(with("hardsync"), base + copy, 1e-6 * base);           // c = 16 gradients summed
}
