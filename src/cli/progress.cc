// cli/progress.cc — see progress.h.
#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace remat::cli {

ProgressBar::ProgressBar(bool enabled) : active_(enabled && ::isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(std::string_view task, double fraction) {
  if (!active_) return;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int percent = static_cast<int>(fraction * 100);
  const auto now = std::chrono::steady_clock::now();
  // A new task is always drawn: it names the phase the command is in.
  if (task == last_task_ && percent == last_percent_ &&
      now - last_draw_ < std::chrono::milliseconds(100))
    return;
  last_task_.assign(task);
  last_percent_ = percent;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\rremat: %-10.*s [%s] %3d%%", static_cast<int>(task.size()), task.data(),
               bar.c_str(), percent);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  // Erase the line: "\r", spaces over the bar, "\r".
  std::fprintf(stderr, "\r%60s\r", "");
  std::fflush(stderr);
  drawn_ = false;
}

std::function<void(std::string_view, double)> ProgressBar::hook() {
  if (!active_) return nullptr;
  return [this](std::string_view task, double fraction) { update(task, fraction); };
}

}  // namespace remat::cli
