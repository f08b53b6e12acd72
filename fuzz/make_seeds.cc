// remat_fuzz_seeds OUTDIR EXAMPLES_DIR: writes the seed corpus of every fuzz
// target, OUTDIR/<target>/<name>, from the bundled examples and from what the
// planner itself produces (analytic profiles, plan.json files, schedules), so
// no generated file is committed.
#include <sys/stat.h>

#include <cstdio>
#include <dirent.h>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "remat/planner.h"

namespace remat::fuzz {
namespace {

int failures = 0;

void Put(const std::string& dir, const std::string& name, const std::string& content) {
  ::mkdir(dir.c_str(), 0755);
  const Status s = WriteOutputFile(dir + "/" + name, content);
  if (!s.ok()) {
    std::fprintf(stderr, "remat_fuzz_seeds: %s\n", s.message().c_str());
    ++failures;
  }
}

ModelConfig Small(Architecture arch, int layers) {
  ModelConfig c;
  c.name = std::string("small-") + ToString(arch);
  c.architecture = arch;
  c.layers = layers;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = arch == Architecture::kLlama ? 176 : 256;
  c.vocab = 128;
  c.seq_len = 32;
  c.max_position = 34;
  c.micro_batch = 2;
  c.tie_embeddings = arch != Architecture::kLlama;
  return c;
}

std::vector<ModelConfig> Models() {
  std::vector<ModelConfig> m;
  for (Architecture a : {Architecture::kGpt, Architecture::kBert, Architecture::kLlama}) {
    m.push_back(Small(a, 2));
  }
  ModelConfig amp = Small(Architecture::kGpt, 1);
  amp.name = "amp";
  amp.precision = Precision::kAmpBf16;
  amp.optimizer = Optimizer::kSgdMomentum;
  amp.attention = AttentionImpl::kFlash;
  amp.dropout = 0;
  m.push_back(amp);
  ModelConfig half = Small(Architecture::kLlama, 3);
  half.name = "half";
  half.precision = Precision::kFp16;
  half.optimizer = Optimizer::kNone;
  half.grad_accumulation = 4;
  m.push_back(half);
  return m;
}

const char* const kHfConfigs[][2] = {
    {"gpt2", R"({"_name_or_path": "gpt2", "model_type": "gpt2", "n_layer": 2, "n_embd": 64,
  "n_head": 4, "n_inner": null, "n_positions": 64, "n_ctx": 64, "vocab_size": 128,
  "resid_pdrop": 0.1, "torch_dtype": "float32", "architectures": ["GPT2LMHeadModel"]})"},
    {"llama", R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
  "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 172,
  "max_position_embeddings": 128, "vocab_size": 128, "tie_word_embeddings": false,
  "attention_dropout": 0.0, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-06})"},
    {"mistral", R"({"model_type": "mistral", "num_hidden_layers": 1, "hidden_size": 32,
  "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
  "vocab_size": 64, "torch_dtype": "float16"})"},
    {"roberta", R"({"_name_or_path": "distilroberta-base", "model_type": "roberta",
  "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256,
  "max_position_embeddings": 66, "vocab_size": 128, "hidden_dropout_prob": 0.1,
  "type_vocab_size": 1})"},
    {"bert", R"({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": 32,
  "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 32,
  "vocab_size": 64})"},
};

const char* const kUnits[] = {"24GB",   "80GiB", "1.5TiB", "512 MiB", "100B",          "4KiB",
                              "2TB",    "0.5KB", "24",     "24XB",    "auto",          "none",
                              "uniform", "optimal-single", "amp_bf16", "fp32", "h200", "cpu",
                              "x0",     "a12",   "g3"};

const char* const kCli[] = {
    "--budget\n24GB\ntiny.json",
    "plan\n--budget\n1MB\n--strategy\nuniform\n--every\n1\ntiny.json",
    "--budget\n2MB\n--strategy\nsegment\n--segments\n2\nbert.json",
    "--budget\n2MB\n--strategy\nselective\nllama.json",
    "--selective-layers\n0,1\nllama.json",
    "--checkpoint-layers\n0,1\n--json\ntiny.json",
    "profile\n--analytic\n-o\nout.json\ntiny.json",
    "profile\n--analytic\nconfig.json",
    "--json\n--budget\n600KB\nprofile.json",
    "-o\nplan.out.json\n--budget\n24GB\nconfig.json",
    "--budget\n100KB\n--micro-batch\n64\ntiny.json",
    "--precision\namp_fp16\n--seq-len\n64\ntiny.json",
    "--device\nh200\n--tflops\n100\n--budget\n1GB\ntiny.json",
    "--budget\n24GB\ngpt2-small.json",
    "--budget\n24GB\nsubdir",
    "--budget\n24GB\nmissing.json",
    "--budget\n24GB\ntruncated.json",
    "--budget\n24GB\nplan.json",
    "--help",
    "--version",
    "profile\n--help",
    "--budget\n1MB\n--strategy\noptimal\n--slots\n64\ntiny.json",
    "--budget\n1MB\n--strategy\noptimal-single\nbert.json",
    "--budget\n1MB\n--report\nreport.html\n--trace\ntrace.json\ntiny.json",
    "--budget\n1MB\n--format\nmd\n--pareto-points\n3\nllama.json",
    "pareto\n--points\n4\n--strategies\nuniform,optimal\ntiny.json",
    "pareto\n--min-budget\n100KB\n--max-budget\n2MB\n--json\n-o\np.json\nprofile.json",
};

int Main(const std::string& out, const std::string& examples) {
  ::mkdir(out.c_str(), 0755);
  // model.json: the bundled examples and small variants.
  if (DIR* d = ::opendir(examples.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() < 5 || name.substr(name.size() - 5) != ".json") continue;
      Result<std::string> text = ReadTextFile(examples + "/" + name);
      if (text.ok()) Put(out + "/model_config", name, *text);
    }
    ::closedir(d);
  } else {
    std::fprintf(stderr, "remat_fuzz_seeds: cannot list %s\n", examples.c_str());
    ++failures;
  }
  for (const ModelConfig& c : Models()) {
    Put(out + "/model_config", c.name + ".json", ModelConfigToJson(c));
    Result<Profile> p = AnalyticProfile(c, AnalyticOptions{});
    if (!p.ok()) {
      std::fprintf(stderr, "remat_fuzz_seeds: %s\n", p.status().message().c_str());
      ++failures;
      continue;
    }
    Put(out + "/profile", c.name + ".json", ProfileToJson(*p));
    ReportContext ctx;
    ctx.input_path = c.name + ".json";
    for (Strategy s : {Strategy::kNone, Strategy::kUniform, Strategy::kSelective}) {
      PlanOptions o;
      o.strategy = s;
      Result<PlanSet> plans = MakePlan(*p, o);
      if (!plans.ok()) continue;
      Put(out + "/plan_json", c.name + "-" + ToString(s) + ".json", PlanToJson(*plans, *p, ctx));
    }
  }
  for (const auto& [name, text] : kHfConfigs) Put(out + "/hf_config", std::string(name) + ".json", text);
  // Schedules on the schedule target's chain: its first byte picks the length.
  for (int layers = 1; layers <= 8; ++layers) {
    const Profile chain = FuzzChain(layers);
    for (Strategy s : {Strategy::kNone, Strategy::kSegment, Strategy::kSelective}) {
      PlanOptions o;
      o.strategy = s;
      Result<PlanSet> plans = MakePlan(chain, o);
      if (!plans.ok()) continue;
      Put(out + "/schedule", std::to_string(layers) + "-" + ToString(s),
          std::string(1, static_cast<char>('0' + layers - 1)) +
              ScheduleToJson(plans->chosen.schedule));
    }
  }
  int n = 0;
  for (const char* u : kUnits) Put(out + "/units", "u" + std::to_string(n++), u);
  n = 0;
  for (const char* a : kCli) Put(out + "/cli", "args" + std::to_string(n++), a);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace remat::fuzz

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: remat_fuzz_seeds OUTDIR EXAMPLES_DIR\n");
    return 2;
  }
  return remat::fuzz::Main(argv[1], argv[2]);
}
