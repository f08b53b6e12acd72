// A fresh directory under $TMPDIR for a test's files, removed (permissions
// restored first) when the object goes away.
#ifndef REMAT_TESTS_TESTING_SCRATCH_DIR_H_
#define REMAT_TESTS_TESTING_SCRATCH_DIR_H_

#include <dirent.h>
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

namespace remat::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                       std::string("/remat_test_XXXXXX");
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~ScratchDir() { std::system(("chmod -R u+rwx '" + path_ + "'; rm -rf '" + path_ + "'").c_str()); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Writes `content` to the file `name` in the directory; returns its path.
  std::string Write(const std::string& name, const std::string& content) const {
    const std::string p = Path(name);
    std::ofstream(p) << content;
    return p;
  }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

  // The names of the entries in the directory, or in its folder `sub`.
  std::set<std::string> Names(const std::string& sub = "") const {
    std::set<std::string> names;
    if (DIR* d = ::opendir(sub.empty() ? path_.c_str() : Path(sub).c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") names.insert(n);
      }
      ::closedir(d);
    }
    return names;
  }

 private:
  std::string path_;
};

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_SCRATCH_DIR_H_
