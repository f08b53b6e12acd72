# Finds LibTorch for the runtime (runtime/). LibTorch is PyTorch's own, from
# its wheel: scripts/install-deps.sh installs torch==2.11.0 into .venv/ at
# the repository root, and this file asks that Python where torch is
# (torch.utils.cmake_prefix_path: <site-packages>/torch/share/cmake).
#
# Where LibTorch comes from, first found wins:
#   1. -DTorch_DIR=... or a CMAKE_PREFIX_PATH holding Torch's config;
#   2. -DREMAT_PYTHON=/path/to/python (a Python with torch installed);
#   3. <source>/.venv/bin/python (scripts/install-deps.sh).
#
# The default wheel is a CUDA build (cu130). Its CMake config needs the CUDA
# toolkit (nvcc); with it, the runtime links the CUDA LibTorch and the CUDA
# memory meter is built. Without a toolkit (REMAT_TORCH_CUDA AUTO), the
# runtime links the wheel's CPU libraries only (libtorch_cpu, libc10): the
# same code, `--runtime-device cuda` refused with a message.
#
# Sets: REMAT_HAVE_RUNTIME, REMAT_TORCH_LIBRARIES (what runtime targets link),
# REMAT_TORCH_C10 (c10 alone), REMAT_TORCH_LIB_DIR (LibTorch's lib/, the
# installed module's RPATH), REMAT_TORCH_VERSION, and the imported target
# torch_cuda when the CUDA path is built.

set(REMAT_PYTHON "" CACHE FILEPATH
    "Python whose torch package provides LibTorch (default: <source>/.venv/bin/python)")
set(REMAT_TORCH_CUDA "AUTO" CACHE STRING
    "Link the CUDA LibTorch: ON, OFF (CPU libraries of the wheel only) or AUTO (if nvcc is found)")

set(REMAT_HAVE_RUNTIME OFF)
set(REMAT_TORCH_LIBRARIES "")
set(REMAT_TORCH_C10 "")
set(REMAT_TORCH_LIB_DIR "")
set(REMAT_TORCH_VERSION "")

function(remat_torch_prefix_from_python python out)
  # find_spec does not import torch (importing it loads its CUDA libraries).
  execute_process(
    COMMAND "${python}" -c
      "import importlib.util, os; s = importlib.util.find_spec('torch'); print(os.path.join(s.submodule_search_locations[0], 'share', 'cmake') if s else '')"
    OUTPUT_VARIABLE prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND prefix AND EXISTS "${prefix}/Torch/TorchConfig.cmake")
    set(${out} "${prefix}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

if(NOT REMAT_RUNTIME STREQUAL "OFF")
  # 1. What the caller pointed at.
  set(REMAT_TORCH_CONFIG_DIR "")
  if(Torch_DIR AND EXISTS "${Torch_DIR}/TorchConfig.cmake")
    set(REMAT_TORCH_CONFIG_DIR "${Torch_DIR}")
  else()
    foreach(p ${CMAKE_PREFIX_PATH})
      foreach(d "${p}/Torch" "${p}/share/cmake/Torch")
        if(NOT REMAT_TORCH_CONFIG_DIR AND EXISTS "${d}/TorchConfig.cmake")
          set(REMAT_TORCH_CONFIG_DIR "${d}")
        endif()
      endforeach()
    endforeach()
  endif()
  # 2./3. A Python with torch.
  if(NOT REMAT_TORCH_CONFIG_DIR)
    set(python "${REMAT_PYTHON}")
    if(NOT python AND EXISTS "${CMAKE_SOURCE_DIR}/.venv/bin/python")
      set(python "${CMAKE_SOURCE_DIR}/.venv/bin/python")
    endif()
    if(python)
      remat_torch_prefix_from_python("${python}" prefix)
      if(prefix)
        set(REMAT_TORCH_CONFIG_DIR "${prefix}/Torch")
        message(STATUS "remat: LibTorch from ${python}")
      else()
        message(STATUS "remat: ${python} has no torch (scripts/install-deps.sh installs it)")
      endif()
    endif()
  endif()

  if(REMAT_TORCH_CONFIG_DIR)
    get_filename_component(torch_root "${REMAT_TORCH_CONFIG_DIR}/../../.." ABSOLUTE)
    set(REMAT_TORCH_LIB_DIR "${torch_root}/lib")
    set(cuda_wheel OFF)
    if(EXISTS "${torch_root}/lib/libtorch_cuda.so")
      set(cuda_wheel ON)
    endif()
    set(use_cuda OFF)
    if(cuda_wheel AND NOT REMAT_TORCH_CUDA STREQUAL "OFF")
      include(CheckLanguage)
      if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
        set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
      endif()
      check_language(CUDA)
      if(CMAKE_CUDA_COMPILER)
        set(use_cuda ON)
      elseif(REMAT_TORCH_CUDA STREQUAL "ON")
        message(FATAL_ERROR "REMAT_TORCH_CUDA=ON: no CUDA compiler (nvcc) found; set CMAKE_CUDA_COMPILER")
      else()
        message(STATUS "remat: no CUDA toolkit: the runtime links the wheel's CPU libraries only")
      endif()
    endif()

    if(use_cuda OR NOT cuda_wheel)
      # PyTorch's own config. For CUDA: the H200 (sm_90) unless told otherwise.
      if(use_cuda)
        if(NOT DEFINED TORCH_CUDA_ARCH_LIST)
          set(TORCH_CUDA_ARCH_LIST "9.0")
        endif()
        if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
          set(CMAKE_CUDA_ARCHITECTURES 90)
        endif()
      endif()
      set(Torch_DIR "${REMAT_TORCH_CONFIG_DIR}")
      # TorchConfig looks for Caffe2 with PATHS, which come after the system
      # paths: pin it, or another LibTorch's (Debian's) is mixed in.
      set(Caffe2_DIR "${REMAT_TORCH_CONFIG_DIR}/../Caffe2")
      # TorchConfig's find_library calls search its own lib/ last, after the
      # system's (where Debian's libtorch-dev puts another libtorch.so and
      # libc10.so): pin them to this LibTorch's files.
      set(TORCH_LIBRARY "${torch_root}/lib/libtorch.so")
      set(c10_LIBRARY "${torch_root}/lib/libc10.so")
      if(EXISTS "${torch_root}/lib/libc10_cuda.so")
        set(C10_CUDA_LIBRARY "${torch_root}/lib/libc10_cuda.so")
      endif()
      # The wheel links Kineto into libtorch_cpu; without this TorchConfig
      # warns that "library kineto" is missing.
      if(EXISTS "${torch_root}/lib/libtorch_cpu.so" AND NOT EXISTS "${torch_root}/lib/libkineto.a")
        set(kineto_LIBRARY "${torch_root}/lib/libtorch_cpu.so")
      endif()
      if(REMAT_RUNTIME STREQUAL "ON")
        find_package(Torch REQUIRED CONFIG)
      else()
        find_package(Torch QUIET CONFIG)
      endif()
      if(Torch_FOUND)
        set(REMAT_HAVE_RUNTIME ON)
        set(REMAT_TORCH_LIBRARIES ${TORCH_LIBRARIES})
        set(REMAT_TORCH_VERSION "${Torch_VERSION}")
        set(REMAT_TORCH_C10 c10)
        if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
          add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=0)
        endif()
      endif()
    else()
      # The CUDA wheel without a CUDA toolkit: its CPU libraries, which do not
      # need CUDA to load or to run on CPU.
      add_library(remat_torch_cpu INTERFACE IMPORTED)
      set_target_properties(remat_torch_cpu PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES
          "${torch_root}/include;${torch_root}/include/torch/csrc/api/include"
        INTERFACE_LINK_LIBRARIES "${torch_root}/lib/libtorch_cpu.so;${torch_root}/lib/libc10.so")
      # c10 alone, with its headers (the CPU meter's C library).
      add_library(remat_torch_c10 INTERFACE IMPORTED)
      set_target_properties(remat_torch_c10 PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${torch_root}/include"
        INTERFACE_LINK_LIBRARIES "${torch_root}/lib/libc10.so")
      set(REMAT_HAVE_RUNTIME ON)
      set(REMAT_TORCH_LIBRARIES remat_torch_cpu)
      set(REMAT_TORCH_C10 remat_torch_c10)
    endif()
    set(version_h "${torch_root}/include/torch/headeronly/version.h")
    if(NOT REMAT_TORCH_VERSION AND EXISTS "${version_h}")
      file(STRINGS "${version_h}" v REGEX "define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
      string(REGEX REPLACE "[^0-9]*([0-9]+)[^0-9]*([0-9]+)[^0-9]*([0-9]+).*" "\\1.\\2.\\3"
             REMAT_TORCH_VERSION "${v}")
    endif()
  endif()

  if(REMAT_HAVE_RUNTIME)
    message(STATUS "remat: LibTorch ${REMAT_TORCH_VERSION} at ${REMAT_TORCH_CONFIG_DIR}")
  elseif(REMAT_RUNTIME STREQUAL "ON")
    message(FATAL_ERROR "REMAT_RUNTIME=ON but no LibTorch found: run scripts/install-deps.sh "
                        "(PyTorch into .venv/), or pass -DREMAT_PYTHON=... or -DTorch_DIR=...")
  else()
    message(STATUS "remat: LibTorch not found, building without the runtime (train, measured "
                   "profile); scripts/install-deps.sh installs it into .venv/")
  endif()
endif()
