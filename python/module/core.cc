// remat._core: the planner library inside a Python process. One entry point,
// the command line itself (remat::cli::Run), so the Python package and the
// `planner` executable are two faces of one library: the same parsing,
// validation, planning and rendering, the same messages and exit codes.
// No LibTorch: `train` and a measured `profile` answer that this build has
// no runtime (Python users measure with remat.profile / remat.measure).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli.h"

namespace nb = nanobind;

namespace {

// Runs `planner <args...>` and returns (exit code, standard output, standard
// error). Planning may take seconds: other Python threads run meanwhile.
std::tuple<int, nb::bytes, std::string> Run(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  int code = 0;
  {
    nb::gil_scoped_release release;
    remat::cli::Environment env;
    env.out = &out;
    env.err = &err;
    code = remat::cli::Run(args, env);
  }
  const std::string o = out.str();
  return {code, nb::bytes(o.data(), o.size()), err.str()};
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "remat's planner library (the `planner` command line, in process)";
  m.def("run", &Run, nb::arg("args"),
        "Runs `planner <args...>` in process: returns (exit_code, stdout bytes, stderr text).");
}
