# accelkit_add_plugin(<name> SOURCES <src>... [LINK <targets>...] [OUTPUT_DIRECTORY <dir>]
#                     [COMPONENT <component>] [NO_INSTALL])
# Builds libaccelkit-<name>.so: a MODULE library with hidden visibility, linked to
# accelkit::sdk and LibTorch (accelkit_torch: torch_cpu + c10; a GPU plugin adds LINK torch),
# exporting only the two entry points. Installs it to ${CMAKE_INSTALL_LIBDIR}/accelkit/plugins
# in install component COMPONENT (default plugin-<name>; CPack makes one package of each).
# The same file serves the build tree and the installed package (find_package(accelkit)).
include_guard(GLOBAL)
include(GNUInstallDirs)
if(NOT TARGET accelkit_torch)
  include("${CMAKE_CURRENT_LIST_DIR}/AccelkitTorch.cmake")
endif()

function(accelkit_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIRECTORY;COMPONENT" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "accelkit_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT name MATCHES "^[a-z0-9_-]+$")
    message(FATAL_ERROR "accelkit_add_plugin(${name}): a plugin name is [a-z0-9_-]+")
  endif()
  set(target accelkit-plugin-${name})
  set(map "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/accelkit-plugin.map")
  add_library(${target} MODULE ${ARG_SOURCES})
  if(NOT ARG_OUTPUT_DIRECTORY AND ACCELKIT_PLUGIN_OUTPUT_DIR)
    set(ARG_OUTPUT_DIRECTORY "${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME accelkit-${name}
    PREFIX lib
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_compile_features(${target} PRIVATE cxx_std_17)
  target_link_libraries(${target} PRIVATE accelkit::sdk accelkit_torch ${ARG_LINK})
  # Only the two entry points leave the library (hidden visibility leaves libstdc++'s weak
  # template instances exported; the version script hides those too).
  target_link_options(${target} PRIVATE -Wl,--no-undefined
    "-Wl,--version-script=${map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
  if(COMMAND accelkit_warnings)
    accelkit_warnings(${target})
  endif()
  # Inside accelkit's own build: its sources combined (AccelkitBuildSpeed.cmake).
  if(COMMAND accelkit_unity)
    accelkit_unity(${target})
  endif()
  if(NOT ARG_NO_INSTALL)
    if(NOT ARG_COMPONENT)
      set(ARG_COMPONENT plugin-${name})
    endif()
    install(TARGETS ${target}
      LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}/accelkit/plugins" COMPONENT ${ARG_COMPONENT})
    set_property(GLOBAL APPEND PROPERTY ACCELKIT_PLUGIN_COMPONENTS ${ARG_COMPONENT})
  endif()
endfunction()
