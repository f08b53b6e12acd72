#include "remat/io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace remat {
namespace {
constexpr int64_t kMaxInputBytes = int64_t{256} << 20;
}

Result<std::string> ReadTextFile(const std::string& path) {
  struct stat st;
  if (path.empty()) return Status::Invalid("no input file given");
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Invalid(path + ": no such file");
    return Status::Invalid(path + ": cannot read: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Status::Invalid(path + ": is a directory, expected a JSON file");
  if (!S_ISREG(st.st_mode)) return Status::Invalid(path + ": not a regular file");
  if (st.st_size > kMaxInputBytes) {
    return Status::Invalid(path + ": file is larger than 256 MiB, not a remat input");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Invalid(path + ": cannot read: " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::Invalid(path + ": read error");
  return buffer.str();
}

Status WriteFileAtomic(const std::string& path, const std::string& content) {
  if (path == "-") {
    std::cout << content;
    std::cout.flush();
    return std::cout ? Status::Ok() : Status::Invalid("cannot write to standard output");
  }
  if (path.empty()) return Status::Invalid("empty output path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::Invalid(path + ": is a directory, expected a file path for the output");
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return Status::Invalid(path + ": cannot write: " + std::strerror(errno));
  }
  const size_t written = std::fwrite(content.data(), 1, content.size(), f);
  const bool flushed = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (written != content.size() || !flushed || !closed) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::Invalid(path + ": write failed: " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::Invalid(path + ": cannot move the written file into place: " + why);
  }
  return Status::Ok();
}

}  // namespace remat
