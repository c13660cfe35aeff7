// cli/progress.h — a progress bar on stderr for long commands.
//
// Contract: draws only when stderr is a terminal (never into a pipe or a
// file: those stay byte-for-byte what they were without it). The bar is one
// line rewritten in place with "\r", redrawn at most every 100 ms or when
// the percentage or the task changes, and erased by finish() (or the destructor), so the
// command's own lines start on a clean line. hook() adapts it to
// PartitionOptions::progress.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace remat::cli {

class ProgressBar {
 public:
  // `enabled`: whether the caller wants a bar at all (e.g. the work is big);
  // it is drawn only if, in addition, stderr is a terminal.
  explicit ProgressBar(bool enabled);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool active() const { return active_; }
  void update(std::string_view task, double fraction);
  void finish();
  std::function<void(std::string_view, double)> hook();

 private:
  bool active_;
  bool drawn_ = false;
  int last_percent_ = -1;
  std::string last_task_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace remat::cli
