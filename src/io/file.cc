// io/file.cc — whole-file reads and atomic writes.
//
// Contract: read_file returns the bytes of a file or throws Error(kIo) naming
// the path and the system's reason. write_file_atomic writes to a temporary
// file in the destination's directory, fsyncs it and renames it over the
// destination, so readers see the old file or the complete new one, never a
// partial one; on any failure the temporary file is removed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/io.h"

namespace remat {

namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorCode::kIo, fmt::format("cannot {} '{}': {}", what, path, std::strerror(err)));
}

}  // namespace

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_error("read", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    io_error("read", path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    io_error("read", path, EISDIR);
  }
  std::string data;
  if (S_ISREG(st.st_mode) && st.st_size > 0) data.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      io_error("read", path, err);
    }
    data.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return data;
}

void write_file_atomic(const std::string& path, std::string_view content) {
  if (path.empty()) throw Error(ErrorCode::kIo, "cannot write '': empty path");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) io_error("write", path, errno);
  auto fail = [&](int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    io_error("write", path, err);
  };
  // mkstemp creates 0600; give the file the permissions a plain create would.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) fail(errno);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t put = ::write(fd, content.data() + done, content.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    done += static_cast<size_t>(put);
  }
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    io_error("write", path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    io_error("write", path, err);
  }
  // Make the rename itself durable; failure here loses nothing already visible.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace remat
