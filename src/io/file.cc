// io/file.cc — whole-file reads with a size limit, and safe output files.
//
// Contract: read_file returns the bytes of a file or throws Error(kIo) naming
// the path and the reason, including an input larger than its limit (checked
// before reading a regular file, and while reading a stream, so `yes |` cannot
// exhaust memory). write_file_atomic follows symbolic links to their final
// target and then, by what that target is:
//  * a regular file, or nothing yet: writes a temporary file next to it,
//    fsyncs it and renames it over the target, so readers see the old file or
//    the complete new one, never a partial one. An existing file keeps its
//    permission bits (and its owner, where the process may set it); other
//    hard links to it keep the old content, since the rename replaces a name.
//  * a FIFO or a character device (/dev/stdout, /dev/null): writes into it,
//    since replacing it would break whoever reads it; a FIFO nobody reads is
//    an error, not a hang.
//  * anything else (a directory, a block device, a socket): an error; such a
//    file is never replaced.
// An empty path, or one holding a NUL byte (which the system would cut
// short), is an error. Python's remat.write_file is this function.
// On any failure the temporary file is removed; remove_partial_writes_on_signals
// lets a program remove it on SIGINT/SIGTERM/SIGHUP as well.
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "io/file.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat {

namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorCode::kIo, fmt::format("cannot {} '{}': {}", what, path, std::strerror(err)));
}

[[noreturn]] void write_error(const std::string& path, const std::string& why) {
  throw Error(ErrorCode::kIo, fmt::format("cannot write '{}': {}", path, why));
}

[[noreturn]] void too_large(const std::string& path, uint64_t max_bytes) {
  throw Error(ErrorCode::kIo,
              fmt::format("cannot read '{}': it is larger than the input size limit of {} bytes "
                          "(the remat command's --max-input-size raises it)",
                          path, max_bytes));
}

// --- temporary files a signal handler may have to remove ----------------------
//
// A fixed table, so the handler touches no allocator and no lock: a slot is
// claimed (kFilling), its path copied, then published (kActive). Writes
// beyond kSlots at once still work; they are just not cleaned up on signals.
constexpr int kSlots = 16;
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
enum SlotState : int { kFree = 0, kFilling = 1, kActive = 2 };
struct PendingTemp {
  std::atomic<int> state{kFree};
  char path[PATH_MAX] = {};
};
PendingTemp g_pending[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads these");

int track_temp(const std::string& tmp) {
  if (tmp.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_pending[i].state.compare_exchange_strong(expected, kFilling)) {
      std::memcpy(g_pending[i].path, tmp.c_str(), tmp.size() + 1);
      g_pending[i].state.store(kActive, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void untrack_temp(int slot) {
  if (slot >= 0) g_pending[slot].state.store(kFree, std::memory_order_release);
}

extern "C" void remove_pending_and_die(int sig) {
  for (PendingTemp& p : g_pending) {
    if (p.state.load(std::memory_order_acquire) == kActive) ::unlink(p.path);
  }
  // Die of the signal as the default action would (the shell sees 128+sig).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// --- writing --------------------------------------------------------------------

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// The final target of `path` after following symbolic links (a dangling
// link's target is where the new file goes, as a shell's `>` would put it).
std::string follow_links(const std::string& path) {
  std::string at = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(at.c_str(), buf, sizeof buf - 1);
    if (n < 0) io_error("write", path, errno);
    const std::string target(buf, static_cast<size_t>(n));
    at = target.front() == '/' ? target : dir_of(at) + "/" + target;
  }
  io_error("write", path, ELOOP);
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Writes all of `content` to fd; returns 0 or the errno of the failure.
int write_all(int fd, std::string_view content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t put = ::write(fd, content.data() + done, content.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(put);
  }
  return 0;
}

// A FIFO or character device: written into, not replaced.
void write_into(const std::string& path, const std::string& target, std::string_view content) {
  // O_NONBLOCK: opening a FIFO nobody reads fails with ENXIO instead of
  // waiting forever; the writes themselves block as usual.
  const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) write_error(path, "it is a FIFO that no process is reading");
    io_error("write", path, errno);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int err = write_all(fd, content);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) io_error("write", path, err);
}

void replace_atomically(const std::string& path, const std::string& target,
                        const struct stat* existing, std::string_view content) {
  const std::string dir = dir_of(target);
  std::string tmp = target + ".tmp.XXXXXX";
  // The file is registered for removal before a signal can see it exist:
  // the signals the handler serves wait until both are done.
  sigset_t cleanup_signals, old_mask;
  ::sigemptyset(&cleanup_signals);
  for (int sig : kCleanupSignals) ::sigaddset(&cleanup_signals, sig);
  ::pthread_sigmask(SIG_BLOCK, &cleanup_signals, &old_mask);
  const int fd = ::mkstemp(tmp.data());
  const int mkstemp_errno = errno;
  const int slot = fd >= 0 ? track_temp(tmp) : -1;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (fd < 0) {
    write_error(path, fmt::format("cannot create a temporary file in '{}': {}", dir,
                                  std::strerror(mkstemp_errno)));
  }
  auto fail = [&](int err, bool close_fd) {
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    untrack_temp(slot);
    io_error("write", path, err);
  };
  // mkstemp creates 0600. A replaced file keeps its permission bits (and its
  // owner and group where allowed); a new one gets what a plain create would.
  mode_t mode;
  if (existing != nullptr) {
    mode = existing->st_mode & 0777;
    if (existing->st_uid != ::geteuid() || existing->st_gid != ::getegid()) {
      (void)!::fchown(fd, existing->st_uid, existing->st_gid);  // best effort
    }
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  if (::fchmod(fd, mode) != 0) fail(errno, true);
  if (const int err = write_all(fd, content); err != 0) fail(err, true);
  if (::fsync(fd) != 0) fail(errno, true);
  if (::close(fd) != 0) fail(errno, false);
  if (::rename(tmp.c_str(), target.c_str()) != 0) fail(errno, false);
  untrack_temp(slot);
  // Make the rename itself durable; failure here loses nothing already visible.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

bool is_regular_within_limit(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (static_cast<uint64_t>(st.st_size) > max_bytes) too_large(path, max_bytes);
  return true;
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
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
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      ::close(fd);
      too_large(path, max_bytes);
    }
    data.reserve(static_cast<size_t>(st.st_size));
  }
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
    // A stream (or a file still growing) is cut off at the limit.
    if (static_cast<uint64_t>(got) > max_bytes - data.size()) {
      ::close(fd);
      too_large(path, max_bytes);
    }
    data.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return data;
}

void write_file_atomic(const std::string& path, std::string_view content) {
  if (path.empty()) write_error(path, "the path is empty");
  // The system would stop at the first NUL and write elsewhere (a Python
  // str or bytes path may hold one).
  if (size_t nul = path.find('\0'); nul != std::string::npos) {
    std::string shown = path;
    for (; nul != std::string::npos; nul = shown.find('\0', nul)) shown.replace(nul, 1, "\\0");
    write_error(shown, "the path contains a NUL byte");
  }
  const std::string target = follow_links(path);
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) {
    if (errno != ENOENT) io_error("write", path, errno);
    // A new file: its directory must exist (say so, rather than that the
    // temporary file could not be created).
    struct stat dir_st {};
    const std::string dir = dir_of(target);
    if (::stat(dir.c_str(), &dir_st) != 0) {
      write_error(path, fmt::format("directory '{}': {}", dir, std::strerror(errno)));
    }
    if (!S_ISDIR(dir_st.st_mode)) write_error(path, fmt::format("'{}' is not a directory", dir));
    replace_atomically(path, target, nullptr, content);
    return;
  }
  if (S_ISREG(st.st_mode)) {
    replace_atomically(path, target, &st, content);
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    write_into(path, target, content);
  } else {
    write_error(path, fmt::format("it is {}, which remat never replaces", kind_of(st.st_mode)));
  }
}

void remove_partial_writes_on_signals() {
  for (int sig : kCleanupSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_pending_and_die;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace remat
