// model.json: ParseModelConfig, then what the CLI does with the model.
#include "fuzz_check.h"
#include "remat/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remat;
  const std::string source = "model.json";
  Result<ModelConfig> c = ParseModelConfig(fuzz::AsText(data, size), source);
  if (!c.ok()) {
    fuzz::CheckRejection(c.status(), source);
    return 0;
  }
  fuzz::CheckParsedModel(*c, source);
  return 0;
}
