# The CPU meter as a C library for Python (ctypes), libremat_cpu_meter.so:
# python/remat_measure loads it into a PyTorch process, whose tensors it then
# counts with the allocator remat's runtime measures its own steps with
# (runtime/src/cpu_memory_meter.cc, meter_c_api.cc). It links c10 alone, and
# only the torch it was built against loads it (remat_measure compares
# remat_meter_torch_version() with the process's torch).
#
# Built by runtime/ (against the runtime's LibTorch, into build/lib/) and by
# `pip install .` (python/CMakeLists.txt: against the installing
# environment's torch, into the wheel's remat_measure/).
#
#   remat_add_cpu_meter(C10 TORCH_VERSION OUTPUT_DIR)
#     C10            what to link for c10 (a target or a library path)
#     TORCH_VERSION  that torch's version, "2.11.0"
#     OUTPUT_DIR     where the library is written
function(remat_add_cpu_meter c10 torch_version output_dir)
  set(src ${PROJECT_SOURCE_DIR}/runtime/src)
  add_library(remat_cpu_meter SHARED ${src}/cpu_memory_meter.cc ${src}/meter_c_api.cc)
  target_include_directories(remat_cpu_meter PRIVATE ${src})
  target_link_libraries(remat_cpu_meter PRIVATE remat_planner ${c10})
  target_compile_definitions(remat_cpu_meter PRIVATE
    REMAT_METER_TORCH_VERSION="${torch_version}")
  set_target_properties(remat_cpu_meter PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${output_dir})
endfunction()
