# Third-party packages, all from the distribution. LibTorch is found once here; its include
# directories are marked SYSTEM so its own warnings stay out of ours.
# The PyTorch wheel links Kineto into libtorch_cpu, yet its TorchConfig.cmake looks for a
# separate libkineto and warns when it finds none: answer that lookup with libtorch_cpu.
find_file(_accelkit_torch_config TorchConfig.cmake PATH_SUFFIXES share/cmake/Torch NO_CACHE)
if(_accelkit_torch_config AND NOT DEFINED CACHE{kineto_LIBRARY})
  get_filename_component(_accelkit_torch_root "${_accelkit_torch_config}/../../../.." ABSOLUTE)
  file(GLOB _accelkit_kineto "${_accelkit_torch_root}/lib/libkineto*")
  if(EXISTS "${_accelkit_torch_root}/lib/libtorch_cpu.so" AND NOT _accelkit_kineto)
    set(kineto_LIBRARY "${_accelkit_torch_root}/lib/libtorch_cpu.so" CACHE FILEPATH "Kineto (inside libtorch_cpu)")
  endif()
endif()
unset(_accelkit_torch_config)
unset(_accelkit_torch_root)
unset(_accelkit_kineto)
# A CUDA LibTorch's config (Caffe2/public/cuda.cmake) sets CMAKE_CUDA_ARCHITECTURES to OFF and
# appends its own -gencode flags to CMAKE_CUDA_FLAGS; the plugin's kernel keeps the
# architectures given here (its launcher reports them, and the plugin offers the kernel only on
# a GPU they cover). Default: SASS for Ampere and Hopper, PTX for Hopper (JIT on anything newer).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "CUDA architectures of the plugin's kernels")
endif()
set(_accelkit_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
set(_accelkit_cuda_flags "${CMAKE_CUDA_FLAGS}")
find_package(Torch REQUIRED)
set(CMAKE_CUDA_ARCHITECTURES "${_accelkit_cuda_archs}")
set(CMAKE_CUDA_FLAGS "${_accelkit_cuda_flags}")
unset(_accelkit_cuda_archs)
unset(_accelkit_cuda_flags)
# TorchConfig.cmake looks for its libraries in the system directories before its own: with
# CMAKE_PREFIX_PATH at a wheel's share/cmake and Debian's libtorch-dev installed, it pairs the
# wheel's headers with Debian's libraries. Refuse that mix.
foreach(_accelkit_lib IN ITEMS TORCH_LIBRARY C10_LIBRARY)
  if(${_accelkit_lib} AND TORCH_INSTALL_PREFIX)
    get_filename_component(_accelkit_real "${${_accelkit_lib}}" REALPATH)
    get_filename_component(_accelkit_root "${TORCH_INSTALL_PREFIX}" REALPATH)
    string(FIND "${_accelkit_real}" "${_accelkit_root}/" _accelkit_at)
    if(NOT _accelkit_at EQUAL 0)
      message(FATAL_ERROR "LibTorch at ${TORCH_INSTALL_PREFIX} (Torch_DIR ${Torch_DIR}) but ${_accelkit_lib} "
        "is ${${_accelkit_lib}}: a LibTorch from another install. Point CMAKE_PREFIX_PATH at the LibTorch root "
        "(the directory holding lib/ and include/, e.g. .../site-packages/torch), not at its share/cmake.")
    endif()
  endif()
endforeach()
unset(_accelkit_lib)
unset(_accelkit_real)
unset(_accelkit_root)
unset(_accelkit_at)
# A LibTorch outside the system's library directories (the PyTorch wheel's, an unpacked
# archive): installed binaries keep its lib/ in their RUNPATH, and the installed CMake package
# looks for it there first (ACCELKIT_TORCH_PREFIX), so an install runs and builds against the
# LibTorch it was made with, not a system one. A system LibTorch (Debian's) needs neither.
set(ACCELKIT_TORCH_PREFIX "")
get_filename_component(_accelkit_torch_libdir "${TORCH_LIBRARY}" DIRECTORY)
if(_accelkit_torch_libdir AND NOT _accelkit_torch_libdir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES
   AND NOT _accelkit_torch_libdir MATCHES "^/(usr/)?lib(32|64|x32)?(/|$)")
  list(APPEND CMAKE_INSTALL_RPATH "${_accelkit_torch_libdir}")
  get_filename_component(ACCELKIT_TORCH_PREFIX "${_accelkit_torch_libdir}/.." ABSOLUTE)
  set(ACCELKIT_TORCH_LIBDIR "${_accelkit_torch_libdir}")
else()
  set(ACCELKIT_TORCH_LIBDIR "")
endif()
unset(_accelkit_torch_libdir)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(tomlplusplus REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)
# LZ4 (its frame format, lz4frame.h) for the tensor cache (core/data/src/tensor_cache.cpp), as the
# target accelkit_lz4. The installed static core names it -llz4 instead (core/CMakeLists.txt).
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(LZ4 QUIET IMPORTED_TARGET liblz4)
endif()
add_library(accelkit_lz4 INTERFACE IMPORTED)
if(TARGET PkgConfig::LZ4)
  target_link_libraries(accelkit_lz4 INTERFACE PkgConfig::LZ4)
else()
  find_path(ACCELKIT_LZ4_INCLUDE_DIR lz4frame.h)
  find_library(ACCELKIT_LZ4_LIBRARY NAMES lz4)
  if(NOT ACCELKIT_LZ4_INCLUDE_DIR OR NOT ACCELKIT_LZ4_LIBRARY)
    message(FATAL_ERROR "liblz4 not found (lz4frame.h and the lz4 library, neither through pkg-config nor in the "
      "system directories): install the Debian package liblz4-dev, or add an LZ4 install to CMAKE_PREFIX_PATH")
  endif()
  target_include_directories(accelkit_lz4 INTERFACE "${ACCELKIT_LZ4_INCLUDE_DIR}")
  target_link_libraries(accelkit_lz4 INTERFACE "${ACCELKIT_LZ4_LIBRARY}")
endif()

include(AccelkitTorch)

# LibTorch 2.x ships its own {fmt} headers (12.x in 2.13) in an include directory that comes
# first on the compiler's command line; the distribution's spdlog is built against the
# distribution's {fmt} (9.x on Debian 12), so code that logs must compile against that one or
# it will not link. accelkit_distro_fmt(<target>) puts a directory that holds only a link to
# the distribution's fmt/ ahead of LibTorch's for that target. LibTorch's own headers that use
# {fmt} (c10d, the profiler's unwinder) are not included by such targets.
set(ACCELKIT_DISTRO_FMT_DIR "")
set(_accelkit_torch_fmt "")
foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${_dir}/fmt/format.h")
    set(_accelkit_torch_fmt "${_dir}/fmt")
  endif()
endforeach()
if(_accelkit_torch_fmt AND TARGET fmt::fmt)
  get_target_property(_accelkit_fmt_inc fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  foreach(_dir IN LISTS _accelkit_fmt_inc)
    if(EXISTS "${_dir}/fmt/format.h" AND NOT "${_dir}/fmt" STREQUAL _accelkit_torch_fmt)
      set(ACCELKIT_DISTRO_FMT_DIR "${CMAKE_BINARY_DIR}/distro-fmt")
      file(MAKE_DIRECTORY "${ACCELKIT_DISTRO_FMT_DIR}")
      file(CREATE_LINK "${_dir}/fmt" "${ACCELKIT_DISTRO_FMT_DIR}/fmt" SYMBOLIC)
      message(STATUS "accelkit: LibTorch brings {fmt} (${_accelkit_torch_fmt}); logging code uses ${_dir}/fmt")
      break()
    endif()
  endforeach()
endif()
unset(_accelkit_torch_fmt)
unset(_accelkit_fmt_inc)

function(accelkit_distro_fmt target)
  if(ACCELKIT_DISTRO_FMT_DIR)
    target_include_directories(${target} SYSTEM BEFORE PRIVATE "${ACCELKIT_DISTRO_FMT_DIR}")
  endif()
endfunction()

# The LibTorch version as its headers say (what the plugin handshake compares; Debian's
# 1.13.1 headers say 1.13.0), for tests and for the other build's cross check.
set(ACCELKIT_TORCH_VERSION "")
foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
  # 2.x keeps the numbers in torch/headeronly/version.h, which torch/version.h includes.
  foreach(_file IN ITEMS torch/headeronly/version.h torch/version.h)
    if(NOT ACCELKIT_TORCH_VERSION AND EXISTS "${_dir}/${_file}")
      file(STRINGS "${_dir}/${_file}" _accelkit_v REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
      if(_accelkit_v)
        string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
          ACCELKIT_TORCH_VERSION "${_accelkit_v}")
      endif()
    endif()
  endforeach()
endforeach()
unset(_accelkit_v)
unset(_file)
if(NOT ACCELKIT_TORCH_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
  message(FATAL_ERROR "cannot read LibTorch's version from torch/version.h in ${TORCH_INCLUDE_DIRS}")
endif()
file(WRITE "${CMAKE_BINARY_DIR}/accelkit-torch-version.txt" "${ACCELKIT_TORCH_VERSION}\n")
message(STATUS "accelkit: LibTorch ${ACCELKIT_TORCH_VERSION} (${TORCH_INSTALL_PREFIX})")
