#pragma once
// The small virtual-learner run the virtual and protocol tests start from:
// mlp on 8x8 synthetic images of 4 classes (512 train, 64 test), batch 8,
// lr 0.05, 2 epochs, lognormal timing (0.01 s compute, 0.002 s push + pull),
// results under dir in suite "t". Each test sets what it varies.
#include <string>

#include "config/config.hpp"

inline asgd::TrainConfig small_virtual(const std::string& protocol, const std::string& dir) {
  asgd::TrainConfig c;
  c.model = "mlp";
  c.data.kind = "synthetic";
  c.data.h = c.data.w = 8;
  c.data.c = 1;
  c.data.classes = 4;
  c.data.n_train = 512;
  c.data.n_test = 64;
  c.batch = 8;
  c.lr = 0.05;
  c.epochs = 2;
  c.virtual_learners = true;
  c.protocol = protocol;
  c.timing = "lognormal";
  c.compute_s = 0.01;
  c.comm_s = 0.002;
  c.results_dir = dir;
  c.suite = "t";
  return c;
}
