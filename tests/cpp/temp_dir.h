// tests/cpp/temp_dir.h — a scratch directory for the tests that write files.
//
// Contract: TempDir makes a fresh directory under /tmp (named after `tag`) and
// removes it with everything in it when it goes out of scope; `dir / "name"`
// is a path inside it and entries() lists what it holds, '.' entries aside,
// so a test can check that nothing was left behind. has() is the substring
// test those checks read with.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace remat::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "remat_test") {
    std::string tmpl = "/tmp/" + tag + "_XXXXXX";
    const char* d = mkdtemp(tmpl.data());
    path_ = d != nullptr ? d : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') out.emplace_back(e->d_name);
      }
      closedir(d);
    }
    return out;
  }

 private:
  std::string path_;
};

}  // namespace remat::testing
