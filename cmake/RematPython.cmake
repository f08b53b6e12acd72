# Decides whether to build the Python package's extension (python/) and with
# which Python. Under scikit-build-core (`pip install .`, SKBUILD) it always
# is, with the Python pip runs. Otherwise (REMAT_PYTHON_MODULE AUTO) it is
# built when a Python with nanobind is found: REMAT_PYTHON, else
# <source>/.venv/bin/python (scripts/install-deps.sh installs nanobind there).
#
# Sets: REMAT_HAVE_PYTHON_MODULE, and Python_EXECUTABLE for FindPython.
set(REMAT_HAVE_PYTHON_MODULE OFF)
if(SKBUILD)
  set(REMAT_HAVE_PYTHON_MODULE ON)
elseif(REMAT_SANITIZE AND NOT REMAT_PYTHON_MODULE STREQUAL "ON")
  # An uninstrumented Python cannot load an instrumented extension.
  message(STATUS "remat: sanitizer build: skipping python/")
elseif(NOT REMAT_PYTHON_MODULE STREQUAL "OFF")
  set(candidate "${REMAT_PYTHON}")
  if(NOT candidate AND EXISTS "${CMAKE_SOURCE_DIR}/.venv/bin/python")
    set(candidate "${CMAKE_SOURCE_DIR}/.venv/bin/python")
  endif()
  set(nb_dir "")
  if(candidate)
    execute_process(COMMAND "${candidate}" -m nanobind --cmake_dir
                    OUTPUT_VARIABLE nb_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      set(nb_dir "")
    endif()
  endif()
  if(nb_dir)
    set(REMAT_HAVE_PYTHON_MODULE ON)
    set(Python_EXECUTABLE "${candidate}")
    set(nanobind_DIR "${nb_dir}")
    message(STATUS "remat: Python package extension with ${candidate}")
  elseif(REMAT_PYTHON_MODULE STREQUAL "ON")
    message(FATAL_ERROR "REMAT_PYTHON_MODULE=ON: no Python with nanobind found "
                        "(set REMAT_PYTHON, or run scripts/install-deps.sh)")
  else()
    message(STATUS "remat: no Python with nanobind (REMAT_PYTHON, .venv): skipping python/")
  endif()
endif()
