// The command line, in process: the input is split at newlines into
// arguments for cli::Run, run in a scratch directory that holds small input
// files (tiny.json, profile.json, plan.json, ...) for the arguments to name.
// Arguments containing '/' are skipped, so outputs stay in the scratch
// directory; it is reset after every run.
//
// Checks: exit code 0, 2, 3 or 5 (an output the arguments name cannot be
// written, e.g. -o subdir; 1 is an internal error, a bug); a bad-input or
// output exit prints exactly one "planner: error: ..." line and nothing else.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "fuzz_check.h"
#include "remat/planner.h"

namespace remat::fuzz {
namespace {

struct Scratch {
  std::string dir;
  std::string home;  // the working directory outside runs
  std::map<std::string, std::string> files;  // name -> content
  std::map<std::string, ino_t> inodes;
};
Scratch* scratch = nullptr;

ModelConfig Tiny(Architecture arch) {
  ModelConfig c;
  c.name = "tiny";
  c.architecture = arch;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 100;
  c.seq_len = 16;
  c.max_position = 16;
  c.micro_batch = 4;
  if (arch == Architecture::kLlama) {
    c.attention = AttentionImpl::kFlash;
    c.precision = Precision::kBf16;
    c.tie_embeddings = false;
  }
  return c;
}

std::map<std::string, std::string> InputFiles() {
  std::map<std::string, std::string> f;
  const ModelConfig tiny = Tiny(Architecture::kGpt);
  f["tiny.json"] = ModelConfigToJson(tiny);
  f["bert.json"] = ModelConfigToJson(Tiny(Architecture::kBert));
  f["llama.json"] = ModelConfigToJson(Tiny(Architecture::kLlama));
  ModelConfig gpt2 = tiny;
  gpt2.name = "gpt2-small";
  gpt2.layers = 12;
  gpt2.hidden = 768;
  gpt2.heads = 12;
  gpt2.ffn_hidden = 3072;
  gpt2.vocab = 50257;
  gpt2.seq_len = gpt2.max_position = 1024;
  gpt2.micro_batch = 16;
  f["gpt2-small.json"] = ModelConfigToJson(gpt2);
  f["config.json"] =
      R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 32,)"
      R"( "vocab_size": 100, "resid_pdrop": 0.1})";
  Result<Profile> p = AnalyticProfile(tiny, AnalyticOptions{});
  if (p.ok()) {
    f["profile.json"] = ProfileToJson(*p);
    PlanOptions o;
    o.strategy = Strategy::kUniform;
    Result<PlanSet> plans = MakePlan(*p, o);
    ReportContext ctx;
    ctx.input_path = "tiny.json";
    if (plans.ok()) f["plan.json"] = PlanToJson(*plans, *p, ctx);
  }
  f["truncated.json"] = R"({"layers": 2, "hidden": )";
  f["empty.json"] = "";
  return f;
}

void WriteFile(const std::string& name, const std::string& content) {
  const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) Fail("cannot write a scratch file", name);
  if (::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    Fail("short write of a scratch file", name);
  }
  ::close(fd);
  struct stat st;
  ::stat(name.c_str(), &st);
  scratch->inodes[name] = st.st_ino;
}

// Removes what the last run wrote and restores input files it replaced.
void Reset() {
  DIR* d = ::opendir(".");
  if (d == nullptr) Fail("cannot list the scratch directory", scratch->dir);
  std::vector<std::string> extra;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name == "subdir" || scratch->files.count(name)) continue;
    extra.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : extra) {
    if (::unlink(name.c_str()) != 0) ::rmdir(name.c_str());
  }
  for (const auto& [name, content] : scratch->files) {
    struct stat st {};
    if (::stat(name.c_str(), &st) != 0 || st.st_ino != scratch->inodes[name] ||
        st.st_size != static_cast<off_t>(content.size()) || !S_ISREG(st.st_mode)) {
      if (S_ISDIR(st.st_mode)) ::rmdir(name.c_str());
      WriteFile(name, content);
    }
  }
  ::mkdir("subdir", 0755);
}

void RemoveScratch() {
  if (scratch == nullptr) return;
  const std::string cmd = "rm -rf '" + scratch->dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", scratch->dir.c_str());
}

}  // namespace
}  // namespace remat::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace remat::fuzz;
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/remat_cli_fuzz_XXXXXX";
  char home[4096];
  if (::getcwd(home, sizeof home) == nullptr || ::mkdtemp(tmpl.data()) == nullptr ||
      ::chdir(tmpl.c_str()) != 0) {
    Fail("cannot make a scratch directory", tmpl);
  }
  scratch = new Scratch{tmpl, home, InputFiles(), {}};
  for (const auto& [name, content] : scratch->files) WriteFile(name, content);
  ::mkdir("subdir", 0755);
  std::atexit(RemoveScratch);
  // libFuzzer reads corpus paths relative to where it started.
  if (::chdir(home) != 0) Fail("cannot return to", home);
  // "-o -" writes to standard output; keep it out of the fuzzer's log.
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, STDOUT_FILENO);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remat;
  std::vector<std::string> args;
  std::string current;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      if (current.find('/') != std::string::npos) return -1;  // stay in the scratch directory
      args.push_back(current);
      current.clear();
      if (args.size() > 64) return -1;
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  std::ostringstream out, err;
  cli::Environment env;
  env.out = &out;
  env.err = &err;
  if (::chdir(fuzz::scratch->dir.c_str()) != 0) fuzz::Fail("chdir", fuzz::scratch->dir);
  const int code = cli::Run(args, env);
  fuzz::Reset();
  if (::chdir(fuzz::scratch->home.c_str()) != 0) fuzz::Fail("chdir", fuzz::scratch->home);
  const std::string e = err.str();
  const std::string detail = "exit " + std::to_string(code) + ", stderr: " + e;
  REMAT_FUZZ_CHECK(code == 0 || code == 2 || code == 3 || code == 5, detail);
  const long lines = std::count(e.begin(), e.end(), '\n');
  if (code == 2 || code == 5) {
    REMAT_FUZZ_CHECK(lines == 1 && e.rfind("planner: error: ", 0) == 0, detail);
  } else {
    REMAT_FUZZ_CHECK(lines <= 1, detail);
  }
  return 0;
}
