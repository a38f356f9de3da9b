# Installs libmla, its headers and a package config so that
#   find_package(mlaprefill) + target_link_libraries(app mla::mla)
# works from the install prefix.
include(CMakePackageConfigHelpers)

install(TARGETS mla EXPORT mlaprefillTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The public headers of core and platform; their detail/ folders are internal.
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/core/include/mla ${CMAKE_CURRENT_SOURCE_DIR}/platform/include/mla
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  PATTERN detail EXCLUDE)
install(EXPORT mlaprefillTargets NAMESPACE mla:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mlaprefill)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/mlaprefillConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mlaprefillConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mlaprefill)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mlaprefillConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mlaprefillConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/mlaprefillConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mlaprefill)
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mlaprefill/configs)
