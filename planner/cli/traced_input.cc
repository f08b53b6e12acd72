#include "traced_input.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "remat/input/model_types.h"
#include "remat/io/io.h"
#include "remat/io/json_top_level.h"

namespace remat::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

std::filesystem::path CacheDir() {
  if (std::string d = Env("REMAT_TRACE_CACHE"); !d.empty()) return d;
  if (std::string d = Env("XDG_CACHE_HOME"); !d.empty()) {
    return std::filesystem::path(d) / "remat" / "traces";
  }
  return std::filesystem::path(Env("HOME").empty() ? "/tmp" : Env("HOME")) / ".cache" / "remat" /
         "traces";
}

// Runs argv, its standard error read into *err; returns the exit status
// (-1: it could not run).
int Run(const std::vector<std::string>& argv, std::string* err) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    _exit(127);
  }
  close(pipe_fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) err->append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The tracer's last line (its one-line error), or what ran.
std::string LastLine(const std::string& text) {
  std::string line, last;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Under --compile: the first job setting that makes the step other than
// one the tracer runs (the model's own training step, its language-
// modelling or base head and loss, or a sentence-transformers job: head
// pooling, loss mnrl), set in the config's `remat` block or by its flag, as
// "remat.KEY VALUE" / "--flag VALUE"; empty if none: a classification head.
std::string UntracedJobSetting(const nlohmann::json& doc, const Args& args) {
  struct Setting {
    const char* key;
    const char* flag;
    std::vector<std::string> traced;  // the values the traced step runs
  };
  const Setting settings[] = {{"head", "head", {"default", "lm", "pooling"}},
                              {"loss", "loss", {"default", "cross_entropy", "mnrl"}},
                              {"num_labels", "num-labels", {}}};
  const nlohmann::json* block =
      doc.contains("remat") && doc["remat"].is_object() ? &doc["remat"] : nullptr;
  for (const Setting& s : settings) {
    std::string value, where;
    if (args.Has(s.flag)) {
      value = args.Get(s.flag);
      where = std::string("--") + s.flag;
    } else if (block != nullptr && block->contains(s.key)) {
      const nlohmann::json& v = (*block)[s.key];
      value = v.is_string() ? v.get<std::string>() : v.dump();
      where = std::string("remat.") + s.key;
    } else {
      continue;
    }
    if (std::find(s.traced.begin(), s.traced.end(), value) == s.traced.end()) {
      return where + " " + value;
    }
  }
  return "";
}

}  // namespace

Result<std::optional<std::string>> TracedProfilePath(const std::string& path, const Args& args) {
  const bool compile = args.Has("compile");
  std::string config = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    config = (std::filesystem::path(path) / "config.json").string();
  }
  Result<std::string> text = ReadTextFile(config);
  if (!text.ok()) {
    if (compile) return text.status().WithPrefix("option --compile traces a config.json");
    return std::optional<std::string>();  // the ordinary reader says why
  }
  // A look at the root's keys first: a measured profile is large, and only
  // a config.json is parsed whole (a profile, with its "layers", is told
  // apart without a scan; so is a document that is not JSON).
  const bool profile = RootHasKeyIfValid(*text, "layers");
  const JsonTopLevel top = profile ? JsonTopLevel{} : ScanJsonTopLevel(*text);
  if (profile || !top.object || top.Has("layers") || top.String("model_type") == nullptr) {
    if (compile) {
      return Status::Invalid("option --compile: " + config +
                             " is not a Hugging Face config.json (an object with a model_type); "
                             "--compile traces one with python -m remat trace --compile");
    }
    return std::optional<std::string>();
  }
  const std::string type = *top.String("model_type");
  if (compile) {
    const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
    const std::string setting = UntracedJobSetting(doc, args);
    if (!setting.empty()) {
      return Status::Invalid(
          "option --compile: " + config + ": " + setting +
          " is not traced: --compile traces the model's own training step (its language-"
          "modelling or base head and loss) or a sentence-transformers job (head pooling, loss "
          "mnrl), not a classification job; plan that job without --compile");
    }
  }
  // A hand-written model is the eager step's; a compiled step is traced.
  if (!compile && IsHandWrittenModelType(type)) return std::optional<std::string>();

  std::vector<std::string> flags;
  std::vector<const char*> taken(std::begin(kTracedJobFlags), std::end(kTracedJobFlags));
  taken.insert(taken.end(), std::begin(kTracedSentenceFlags), std::end(kTracedSentenceFlags));
  for (const char* flag : taken) {
    if (args.Has(flag)) {
      flags.push_back(std::string("--") + flag);
      flags.push_back(args.Get(flag));
    }
  }
  if (compile) flags.push_back("--compile");
  std::string key = *text;
  for (const std::string& f : flags) key += '\0' + f;
  std::ostringstream name;
  name << std::hex << std::hash<std::string>{}(key) << ".profile.json";
  const std::filesystem::path dir = CacheDir();
  const std::filesystem::path out = dir / name.str();
  if (std::filesystem::exists(out, ec)) return std::optional<std::string>(out.string());

  const std::string by_hand =
      compile ? config + ": --compile plans the step torch.compile runs, traced by python -m "
                         "remat trace --compile (needs torch and transformers)"
              : config + ": model_type \"" + type +
                    "\" has no hand-written model; trace it: python -m remat trace " + config +
                    " -o profile.json (needs torch and transformers), then plan profile.json";
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Invalid(by_hand + " (cannot make the trace cache " + dir.string() + ")");
  const std::string python = Env("REMAT_PYTHON").empty() ? "python3" : Env("REMAT_PYTHON");
  std::vector<std::string> argv = {python, "-m", "remat", "trace", config, "-o", out.string()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::string err;
  const int code = Run(argv, &err);
  if (code == 2 && err.find("remat.trace") != std::string::npos) {
    return Status::Invalid(LastLine(err));  // the tracer's own line: bad config or flag
  }
  if (code != 0) {
    return Status::Invalid(by_hand + " (" + python + " -m remat trace: " + LastLine(err) + ")");
  }
  return std::optional<std::string>(out.string());
}

}  // namespace remat::cli
