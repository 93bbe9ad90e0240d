#pragma once
// One trainer per run: an exclusive flock(2) on `<checkpoints>/<run-id>.lock`,
// held by the writing process (rank 0 under MPI) from before the "already
// finished" check until it exits. The kernel drops the lock when the process
// dies, kill -9 included, so a lock never outlives its trainer. The file
// holds the owner's host and pid, for the refusal message.
#include <string>

namespace asgd::io {

class RunLock {
 public:
  // Takes the lock of run `run_id` whose checkpoint is `checkpoint` (the lock
  // file sits beside it). Throws asgd::Error naming the run, the lock file and
  // the owner when another process holds it. Then removes what a dead writer
  // of this run left behind: `<file>.tmp.<pid>` beside its results and
  // checkpoint files (nobody else may be writing them while we hold the lock).
  RunLock(const std::string& checkpoint, const std::string& results, const std::string& run_id);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }
  // Leftover temporary files removed when the lock was taken.
  int removed_tmp() const { return removed_; }

  // Whether some process holds the lock of the run with this checkpoint now
  // (`asgd sweep status` shows it as running). Never takes it.
  static bool busy(const std::string& checkpoint);
  static std::string lock_path(const std::string& checkpoint);

 private:
  std::string path_;
  int fd_ = -1;
  int removed_ = 0;
};

}  // namespace asgd::io
