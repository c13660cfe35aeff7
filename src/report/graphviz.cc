// report/graphviz.cc — see remat/graphviz.h. The DOT goes through temporary files
// rather than pipes: no deadlock when dot's output is bigger than a pipe.
#include "remat/graphviz.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "remat/io.h"

extern char** environ;

namespace remat::report {
namespace {

// A temporary file that removes itself.
struct TempFile {
  std::string path;
  explicit TempFile(const char* suffix_tag) {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/remat_" + suffix_tag + "_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const int fd = ::mkstemp(buf.data());
    if (fd >= 0) {
      ::close(fd);
      path = buf.data();
    }
  }
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

}  // namespace

// Views and one format call, not std::string substr and '=': GCC 12 at -O3
// warns (-Wrestrict, a false positive) on the string assignments, and CI
// builds with warnings as errors.
std::string find_on_path(const char* program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  const std::string_view p(path);
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string_view::npos) end = p.size();
    // An empty entry means the current directory.
    const std::string_view dir = end == start ? std::string_view(".") : p.substr(start, end - start);
    std::string exe = fmt::format("{}/{}", dir, program);
    if (::access(exe.c_str(), X_OK) == 0) return exe;
    start = end + 1;
  }
  return "";
}

bool dot_available() { return !find_on_path("dot").empty(); }

std::optional<std::string> render_svg(std::string_view dot) {
  const std::string exe = find_on_path("dot");
  if (exe.empty()) return std::nullopt;
  TempFile in("dot"), out("svg");
  if (in.path.empty() || out.path.empty()) return std::nullopt;
  try {
    write_file_atomic(in.path, dot);
  } catch (...) {
    return std::nullopt;
  }
  std::vector<std::string> args{exe, "-Tsvg", in.path, "-o", out.path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // dot's own diagnostics go nowhere: the caller reports a missing picture.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return std::nullopt;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  try {
    std::string svg = read_file(out.path);
    if (svg.empty()) return std::nullopt;
    return svg;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace remat::report
