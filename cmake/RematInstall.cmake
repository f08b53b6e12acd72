# `cmake --install <build> --prefix <P>`: remat as a C++ library that other
# CMake projects link (docs/cpp-library.md).
#
#   P/include/remat/*.h            the public headers of both libraries
#   P/lib/libremat_planner.a       remat::planner (profiles, strategies, simulator, planning)
#   P/lib/libremat_visualize.a     remat::visualize (HTML/SVG, traces, Markdown)
#   P/lib/cmake/remat/             remat-config.cmake, its version file, the targets
#   P/bin/planner                  the command line (planner/cli/CMakeLists.txt)
#   P/lib/libremat_runtime.so      the runtime module, when built (runtime/CMakeLists.txt)
#
# (lib is CMAKE_INSTALL_LIBDIR for the libraries and the package.) remat_cli
# is not installed: its headers live beside its sources and its interface is
# an argument list; the installed `planner` is the command line. Headers in
# planner/src and visualize/src are private and stay behind.
include(CMakePackageConfigHelpers)

set(REMAT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/remat)

install(TARGETS remat_planner remat_visualize EXPORT remat-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Whole directories, so that a header added to include/remat is installed too.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/planner/include/remat ${CMAKE_SOURCE_DIR}/visualize/include/remat
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT remat-targets NAMESPACE remat:: DESTINATION ${REMAT_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/remat-config.cmake.in
  ${CMAKE_BINARY_DIR}/remat-config.cmake INSTALL_DESTINATION ${REMAT_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API, so only the same minor version matches.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/remat-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/remat-config.cmake ${CMAKE_BINARY_DIR}/remat-config-version.cmake
        DESTINATION ${REMAT_INSTALL_CMAKEDIR})
