# accelkit_add_plugin(<name> SOURCES <src>... [LINK <targets>...])
# Builds libaccelkit-<name>.so as a MODULE library with hidden visibility, linked to the SDK
# and LibTorch, into the plugin directory of the build tree.
set(ACCELKIT_PLUGIN_VERSION_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/accelkit-plugin.map")

function(accelkit_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "accelkit_add_plugin(${name}): SOURCES is required")
  endif()
  set(target accelkit-plugin-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(NOT ARG_OUTPUT_DIRECTORY)
    set(ARG_OUTPUT_DIRECTORY "${ACCELKIT_PLUGIN_OUTPUT_DIR}")
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME accelkit-${name}
    PREFIX lib
    LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${target} PRIVATE accelkit::sdk accelkit_torch ${ARG_LINK})
  # Only the two entry points leave the library (hidden visibility leaves libstdc++'s weak
  # template instances exported; the version script hides those too).
  target_link_options(${target} PRIVATE -Wl,--no-undefined
    "-Wl,--version-script=${ACCELKIT_PLUGIN_VERSION_SCRIPT}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${ACCELKIT_PLUGIN_VERSION_SCRIPT}")
  accelkit_warnings(${target})
endfunction()
