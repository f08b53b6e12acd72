#include "standard_output.h"

#include <cstring>

namespace remat::cli {

int FinishStandardOutput(std::ostream& out, const FdStreamBuf& buffer, int code, Environment& env) {
  out.flush();
  if (buffer.error() == 0) return code;
  return Finish(Status::OutputFailed(std::string("writing standard output: ") +
                                     std::strerror(buffer.error())),
                env);
}

}  // namespace remat::cli
