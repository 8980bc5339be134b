# Install layout (GNUInstallDirs) and the CMake package for out-of-tree plugins and
# applications. Components: accelkit (CLI, CPU plugin, docs), dev (headers, accelkit::sdk,
# accelkit::core, CMake package), plugin-<name> (each other plugin, see AccelkitPlugin.cmake).
include(CMakePackageConfigHelpers)

set(ACCELKIT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/accelkit")

install(FILES README.md DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT accelkit)
# The README links its pages as docs/*.md: installed beside it, the links still work.
install(DIRECTORY docs/ DESTINATION "${CMAKE_INSTALL_DOCDIR}/docs" COMPONENT accelkit
  FILES_MATCHING PATTERN "*.md")
install(FILES sdk/README.md DESTINATION "${CMAKE_INSTALL_DOCDIR}" RENAME SDK.md COMPONENT dev)

# Headers: the plugin SDK (include/accelkit/sdk/: the contract, all a plugin includes) apart
# from the application API (include/accelkit/*.hpp) and the generated version.hpp.
# The core's public headers are each room's include/accelkit/ (core/<room>/internal/ stays in the
# build tree: what the rooms share among themselves).
set(_accelkit_header_dirs sdk/include/accelkit core/include/accelkit)
foreach(room IN LISTS ACCELKIT_CORE_ROOMS)
  list(APPEND _accelkit_header_dirs core/${room}/include/accelkit)
endforeach()
install(DIRECTORY ${_accelkit_header_dirs}
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
unset(_accelkit_header_dirs)
install(FILES apps/verify/include/accelkit/conformance.hpp DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/accelkit" COMPONENT dev)
install(FILES "${PROJECT_BINARY_DIR}/core/include/accelkit/version.hpp"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/accelkit" COMPONENT dev)

set_target_properties(accelkit_sdk PROPERTIES EXPORT_NAME sdk)
set_target_properties(accelkit_core PROPERTIES EXPORT_NAME core)
set_target_properties(accelkit_conformance PROPERTIES EXPORT_NAME conformance)
install(TARGETS accelkit_sdk EXPORT accelkitSdkTargets)
install(TARGETS accelkit_core EXPORT accelkitCoreTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dev)
# The conformance checks behind `accelkit verify`, for out-of-tree plugins' own tests.
install(TARGETS accelkit_conformance EXPORT accelkitConformanceTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dev)
# install/strip (and cpack) strips executables and modules; the archive loses its debug info only.
install(CODE "if(CMAKE_INSTALL_DO_STRIP)
  execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:accelkit_core>\"
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:accelkit_conformance>\")
endif()" COMPONENT dev)
foreach(set IN ITEMS Sdk Core Conformance)
  install(EXPORT accelkit${set}Targets NAMESPACE accelkit::
    DESTINATION "${ACCELKIT_INSTALL_CMAKEDIR}" COMPONENT dev)
endforeach()

# Packages accelkit::core links (privately: a consumer needs them found to link the archive).
get_target_property(_accelkit_core_links accelkit_core LINK_LIBRARIES)
set(ACCELKIT_CORE_PACKAGES "")
foreach(lib IN LISTS _accelkit_core_links)
  if(lib MATCHES "^([A-Za-z0-9_]+)::" AND NOT CMAKE_MATCH_1 STREQUAL "accelkit")
    list(APPEND ACCELKIT_CORE_PACKAGES ${CMAKE_MATCH_1})
  endif()
endforeach()
list(REMOVE_DUPLICATES ACCELKIT_CORE_PACKAGES)

configure_package_config_file(cmake/accelkitConfig.cmake.in
  "${PROJECT_BINARY_DIR}/accelkitConfig.cmake" INSTALL_DESTINATION "${ACCELKIT_INSTALL_CMAKEDIR}"
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/accelkitConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/accelkitConfig.cmake"
  "${PROJECT_BINARY_DIR}/accelkitConfigVersion.cmake"
  cmake/AccelkitPlugin.cmake
  cmake/AccelkitTorch.cmake
  cmake/accelkit-plugin.map
  DESTINATION "${ACCELKIT_INSTALL_CMAKEDIR}" COMPONENT dev)

install(DIRECTORY examples/out-of-tree-plugin
  DESTINATION "${CMAKE_INSTALL_DOCDIR}/examples" COMPONENT dev)
