// Hugging Face config.json: ParseHfConfig, then what the CLI does with it.
#include "fuzz_check.h"
#include "remat/input/input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remat;
  const std::string source = "config.json";
  Result<ModelConfig> c = ParseHfConfig(fuzz::AsText(data, size), source);
  if (!c.ok()) {
    fuzz::CheckRejection(c.status(), source);
    return 0;
  }
  fuzz::CheckParsedModel(*c, source);
  return 0;
}
