// tests/cpp/test_files.cc — what remat does to the files it is pointed at:
// output paths that are symbolic links, FIFOs, devices, directories, hard
// links or protected files, and inputs that never end.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "temp_dir.h"

namespace remat {
namespace {

using testing::has;
using testing::slurp;

// Each test's scratch directory, under a name that says which file made it.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("remat_files_test") {}
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

TEST(OutputFile, SymlinkIsWrittenThroughToItsTarget) {
  TempDir dir;
  write_file_atomic(dir / "target.json", "old");
  ASSERT_EQ(::symlink("target.json", (dir / "link.json").c_str()), 0);
  write_file_atomic(dir / "link.json", "new");
  EXPECT_TRUE(S_ISLNK(mode_of(dir / "link.json")));  // still a link
  EXPECT_EQ(slurp(dir / "target.json"), "new");
  EXPECT_EQ(dir.entries().size(), 2u);  // no temporary file left
}

TEST(OutputFile, DanglingSymlinkCreatesItsTarget) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("sub/made.json", (dir / "link.json").c_str()), 0);
  write_file_atomic(dir / "link.json", "x");
  EXPECT_TRUE(S_ISLNK(mode_of(dir / "link.json")));
  EXPECT_EQ(slurp(dir / "sub/made.json"), "x");
}

TEST(OutputFile, SymlinkLoopIsAnErrorNamingThePath) {
  TempDir dir;
  ASSERT_EQ(::symlink("b", (dir / "a").c_str()), 0);
  ASSERT_EQ(::symlink("a", (dir / "b").c_str()), 0);
  const std::string msg = error_of([&] { write_file_atomic(dir / "a", "x"); });
  EXPECT_TRUE(has(msg, dir / "a")) << msg;
}

TEST(OutputFile, ReplacedFileKeepsItsMode) {
  TempDir dir;
  for (mode_t mode : {0600, 0640, 0755}) {
    const std::string p = dir / "out.json";
    write_file_atomic(p, "first");
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
    write_file_atomic(p, "second");
    EXPECT_EQ(mode_of(p) & 07777, mode);
    EXPECT_EQ(slurp(p), "second");
  }
}

TEST(OutputFile, NewFileFollowsTheUmask) {
  TempDir dir;
  const mode_t old = ::umask(027);
  write_file_atomic(dir / "new.json", "x");
  ::umask(old);
  EXPECT_EQ(mode_of(dir / "new.json") & 07777, 0640u);
}

// The rename replaces the name it was given: another hard link to the old
// file keeps the old content (docs/format.md says so).
TEST(OutputFile, OtherHardLinksKeepTheOldContent) {
  TempDir dir;
  write_file_atomic(dir / "a.json", "old");
  ASSERT_EQ(::link((dir / "a.json").c_str(), (dir / "b.json").c_str()), 0);
  write_file_atomic(dir / "a.json", "new");
  EXPECT_EQ(slurp(dir / "a.json"), "new");
  EXPECT_EQ(slurp(dir / "b.json"), "old");
}

TEST(OutputFile, DirectoryIsNeverReplaced) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "taken").c_str(), 0755), 0);
  const std::string msg = error_of([&] { write_file_atomic(dir / "taken", "x"); });
  EXPECT_TRUE(has(msg, "a directory")) << msg;
  EXPECT_TRUE(S_ISDIR(mode_of(dir / "taken")));
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST(OutputFile, CharacterDeviceIsWrittenIntoNotReplaced) {
  write_file_atomic("/dev/null", "discarded");
  EXPECT_TRUE(S_ISCHR(mode_of("/dev/null")));
}

TEST(OutputFile, FifoIsWrittenIntoNotReplaced) {
  TempDir dir;
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A reader that is already there (non-blocking open), drained after the write.
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  write_file_atomic(fifo, "through the pipe");
  char buf[64] = {};
  const ssize_t got = ::read(rd, buf, sizeof buf - 1);
  ::close(rd);
  EXPECT_EQ(std::string(buf, got > 0 ? static_cast<size_t>(got) : 0), "through the pipe");
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST(OutputFile, FifoWithoutReaderIsAnErrorNotAHang) {
  TempDir dir;
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string msg = error_of([&] { write_file_atomic(fifo, "x"); });
  EXPECT_TRUE(has(msg, "no process is reading")) << msg;
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
}

TEST(OutputFile, MissingDirectoryIsNamed) {
  TempDir dir;
  const std::string msg = error_of([&] { write_file_atomic(dir / "missing/out.json", "x"); });
  EXPECT_TRUE(has(msg, "missing/out.json")) << msg;
  EXPECT_TRUE(has(msg, "directory '" + (dir / "missing") + "'")) << msg;
  EXPECT_TRUE(dir.entries().empty());
}

TEST(OutputFile, EmptyPathIsAnError) {
  EXPECT_TRUE(has(error_of([] { write_file_atomic("", "x"); }), "empty"));
}

// A path from Python may hold a NUL; the system would stop there and write
// a shorter name instead.
TEST(OutputFile, PathWithANulByteIsAnErrorNotAShorterName) {
  TempDir dir;
  const std::string path = (dir / "out.json") + std::string(1, '\0') + "tail";
  const std::string msg = error_of([&] { write_file_atomic(path, "x"); });
  EXPECT_TRUE(has(msg, "NUL")) << msg;
  EXPECT_TRUE(has(msg, "out.json\\0tail")) << msg;
  EXPECT_TRUE(dir.entries().empty());
}

TEST(InputFile, RegularFileOverTheLimitIsRefusedUpFront) {
  TempDir dir;
  write_file_atomic(dir / "big.json", std::string(4096, ' '));
  const std::string msg = error_of([&] { read_file(dir / "big.json", 4095); });
  EXPECT_TRUE(has(msg, "input size limit of 4095 bytes")) << msg;
  EXPECT_EQ(read_file(dir / "big.json", 4096).size(), 4096u);
  EXPECT_TRUE(has(error_of([&] { read_joint_graph_file(dir / "big.json", 100); }), "limit"));
}

// `yes | remat info /dev/stdin`: a stream that never ends stops at the limit.
TEST(InputFile, EndlessStreamStopsAtTheLimit) {
  // The writer ends on EPIPE once the reader is closed, not on SIGPIPE.
  const auto old_handler = std::signal(SIGPIPE, SIG_IGN);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([w = fds[1]] {
    const std::string chunk(1 << 16, 'y');
    while (::write(w, chunk.data(), chunk.size()) > 0) {
    }
    ::close(w);
  });
  const std::string path = "/dev/fd/" + std::to_string(fds[0]);
  const std::string msg = error_of([&] { read_joint_graph_file(path, 1 << 20); });
  EXPECT_TRUE(has(msg, path)) << msg;
  EXPECT_TRUE(has(msg, "limit of 1048576 bytes")) << msg;
  ::close(fds[0]);  // the writer's next write fails (EPIPE): it stops
  writer.join();
  std::signal(SIGPIPE, old_handler);
}

}  // namespace
}  // namespace remat
