# Debian packages of the install, made by `cpack` in the build tree
# (tests/consumer/check_deb.cmake does it and installs them into a scratch
# root): `dlock`, the command-line tool with its manual page and shell
# completions, and `libdlock-dev`, the static libraries, headers and CMake
# package a C++ project builds against. install() calls without a
# COMPONENT belong to the dev package (CMAKE_INSTALL_DEFAULT_COMPONENT_NAME,
# set before the subdirectories); the CLI's say `COMPONENT cli`.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "distributed locks over Redis, ZooKeeper and PostgreSQL")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "dlock authors <dlock@invalid>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # quick to build; xz saves little here
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli dev)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_CLI_DESCRIPTION
  "dlock: run a command under a distributed lock, like flock(1) across
machines; status, list, unlock, top, monitor and bench of the locks held.")
# The client libraries the binary links (libhiredis, libzookeeper-mt, libpq,
# libcpp-httplib, abseil), as dpkg-shlibdeps reads them off the binary.
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "dlock's static libraries, headers and CMake package: find_package(dlock)
gives dlock::dlock (the core and every backend) and dlock::adapters.")
# What a consumer's compile and link need: the headers include abseil; the
# static backends and adapters link their client libraries, which the
# installed dlockConfig.cmake finds through pkg-config and toml++'s package.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libabsl-dev, pkg-config, libhiredis-dev, libzookeeper-mt-dev, libpq-dev, \
libtomlplusplus-dev, libcpp-httplib-dev")

include(CPack)
