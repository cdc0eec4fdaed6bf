# Writes larder.pc at install time (src/CMakeLists.txt runs it through install(CODE)), with
# the prefix being installed to: CMAKE_INSTALL_PREFIX here is the one `cmake --install
# --prefix` was given. Relative GNUInstallDirs paths go under ${prefix}; absolute ones stay.
set(LARDER_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(v LIBDIR INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${LARDER_PC_${v}}")
    set(LARDER_PC_${v} "\${prefix}/${LARDER_PC_${v}}")
  endif()
endforeach()
configure_file("${LARDER_PC_IN}" "${LARDER_PC_OUT}" @ONLY)
