// remat._core: the planner library inside a Python process. The entry point
// is the command line itself (remat::cli::Run), so the Python package and
// the `planner` executable are two faces of one library: the same parsing,
// validation, planning and rendering, the same messages and exit codes.
// Beside it, device(name): a device preset's roofline numbers, which
// remat.trace times its ops with (one device table, the planner's).
// No LibTorch: `train` and a measured `profile` answer that this build has
// no runtime (Python users measure with remat.profile / remat.measure).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli.h"
#include "remat/device/devices.h"

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

// The preset `name`'s roofline numbers (remat/device/devices.h) as a dict;
// ValueError with the planner's message (the accepted names) otherwise.
nb::dict Device(const std::string& name) {
  remat::Result<remat::DeviceSpec> spec = remat::LookupDevice(name);
  if (!spec.ok()) throw nb::value_error(spec.status().message().c_str());
  nb::dict d;
  d["name"] = spec->name;
  d["tflops_16bit"] = spec->tflops_16bit;
  d["tflops_fp32"] = spec->tflops_fp32;
  d["bandwidth_gbps"] = spec->bandwidth_gbps;
  d["efficiency"] = spec->efficiency;
  d["random_elements_per_s"] = spec->random_elements_per_s;
  return d;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "remat's planner library (the `planner` command line, in process)";
  m.def("run", &Run, nb::arg("args"),
        "Runs `planner <args...>` in process: returns (exit_code, stdout bytes, stderr text).");
  m.def("device", &Device, nb::arg("name"),
        "A device preset's roofline numbers (docs/devices.md): name, tflops_16bit, "
        "tflops_fp32, bandwidth_gbps, efficiency, random_elements_per_s.");
}
