# Debian packages, one per install component (cpack -G DEB in the build directory):
#   accelkit                 CLI, CPU plugin, docs; Recommends the GPU plugin packages built
#   libaccelkit-dev          headers, accelkit::sdk/core, CMake package; Depends accelkit, libtorch-dev
#   accelkit-plugin-<name>   every other plugin built; Depends accelkit (= this version)
# Run-time library dependencies come from dpkg-shlibdeps.
set(ACCELKIT_PACKAGE_CONTACT "accelkit maintainers <maintainers@accelkit.invalid>"
    CACHE STRING "Maintainer field of the Debian packages")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX "${ACCELKIT_PACKAGE_PREFIX}")
set(CPACK_PACKAGE_NAME accelkit)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${ACCELKIT_PACKAGE_CONTACT}")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)

set(_accelkit_deb_version "${CPACK_PACKAGE_VERSION}")
set(_accelkit_main_dep "accelkit (= ${_accelkit_deb_version})")

set(CPACK_DEBIAN_ACCELKIT_PACKAGE_NAME accelkit)
# Descriptions: the first line is the package's synopsis.
set(CPACK_COMPONENT_ACCELKIT_DESCRIPTION "LibTorch training tuned to the accelerator present
The accelkit command line tool (info, plugins, report, monitor, bench, train) and the CPU \
plugin. GPU backends are separate packages (accelkit-plugin-cuda, accelkit-plugin-rocm, accelkit-plugin-xpu): \
installing one makes its hardware usable, removing it falls back to the CPU.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libaccelkit-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# accelkit::core's link-time packages (AccelkitInstall.cmake) as Debian -dev packages.
set(_accelkit_dev_depends "${_accelkit_main_dep}, libtorch-dev, libboost-dev, liblz4-dev")
set(_accelkit_deb_of_spdlog libspdlog-dev)
set(_accelkit_deb_of_tomlplusplus libtomlplusplus-dev)
set(_accelkit_deb_of_nlohmann_json nlohmann-json3-dev)
set(_accelkit_deb_of_Boost libboost-dev)
set(_accelkit_deb_of_Threads "")
foreach(pkg IN LISTS ACCELKIT_CORE_PACKAGES)
  if(NOT DEFINED _accelkit_deb_of_${pkg})
    message(WARNING "libaccelkit-dev: no Debian package known for ${pkg}; add it to AccelkitPackaging.cmake")
  elseif(_accelkit_deb_of_${pkg} AND NOT _accelkit_dev_depends MATCHES "${_accelkit_deb_of_${pkg}}")
    string(APPEND _accelkit_dev_depends ", ${_accelkit_deb_of_${pkg}}")
  endif()
endforeach()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_accelkit_dev_depends}")
set(CPACK_COMPONENT_DEV_DESCRIPTION "accelkit development files: plugin SDK and application API
Headers, the static accelkit::core library and the CMake package (find_package(accelkit), \
accelkit_add_plugin()) to build accelkit plugins and applications out of tree.")

get_property(_accelkit_plugin_components GLOBAL PROPERTY ACCELKIT_PLUGIN_COMPONENTS)
list(REMOVE_DUPLICATES _accelkit_plugin_components)
list(FILTER _accelkit_plugin_components INCLUDE REGEX "^plugin-")
set(CPACK_COMPONENTS_ALL accelkit dev ${_accelkit_plugin_components})
set(_accelkit_recommends "")
foreach(comp IN LISTS _accelkit_plugin_components)
  string(REGEX REPLACE "^plugin-" "" plugin "${comp}")
  string(TOUPPER "${comp}" COMP)
  set(CPACK_DEBIAN_${COMP}_PACKAGE_NAME accelkit-plugin-${plugin})
  set(CPACK_DEBIAN_${COMP}_PACKAGE_DEPENDS "${_accelkit_main_dep}")
  set(CPACK_COMPONENT_${COMP}_DESCRIPTION "accelkit ${plugin} backend
The ${plugin} plugin of accelkit, loaded at run time by the accelkit tool and library.")
  list(APPEND _accelkit_recommends accelkit-plugin-${plugin})
endforeach()
list(JOIN _accelkit_recommends ", " CPACK_DEBIAN_ACCELKIT_PACKAGE_RECOMMENDS)

get_cmake_property(_accelkit_all_components COMPONENTS)
list(REMOVE_ITEM _accelkit_all_components ${CPACK_COMPONENTS_ALL})
if(_accelkit_all_components)
  message(WARNING "install components not packaged: ${_accelkit_all_components}")
endif()

include(CPack)
