# The Debian packages of the build at BUILD_DIR (cmake/DlockPackage.cmake),
# made with cpack and installed with dpkg-deb -x into a scratch root under
# WORK_DIR: their names and declared dependencies (each one installed on
# this machine), the installed `dlock --version`, man page and completions,
# and the consumer project built and run against the installed headers and
# CMake package (common.cmake).
set(root ${WORK_DIR}/root)
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)

run(cpack -G DEB -B ${WORK_DIR}/packages --config ${BUILD_DIR}/CPackConfig.cmake)
file(GLOB debs ${WORK_DIR}/packages/*.deb)
set(names "")
foreach(deb IN LISTS debs)
  run(dpkg-deb --field ${deb} Package)
  string(STRIP "${out}" name)
  list(APPEND names ${name})
  run(dpkg-deb --field ${deb} Depends)
  string(STRIP "${out}" depends)
  if(depends STREQUAL "")
    message(FATAL_ERROR "${name} declares no dependencies")
  endif()
  message(STATUS "${name} depends on: ${depends}")
  # "libc6 (>= 2.34), libpq5 | libpq-alt": each one, or one of its
  # alternatives, must be installed here.
  string(REPLACE "," ";" depends "${depends}")
  foreach(dependency IN LISTS depends)
    string(REPLACE "|" ";" alternatives "${dependency}")
    set(found FALSE)
    foreach(alternative IN LISTS alternatives)
      string(REGEX REPLACE "\\(.*\\)" "" package "${alternative}")
      string(STRIP "${package}" package)
      execute_process(COMMAND dpkg-query -W -f=\${Status} ${package}
        OUTPUT_VARIABLE status ERROR_QUIET)
      if(status STREQUAL "install ok installed")
        set(found TRUE)
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "${name} depends on '${dependency}', which is not installed here")
    endif()
  endforeach()
  run(dpkg-deb -x ${deb} ${root})
endforeach()
list(SORT names)
if(NOT names STREQUAL "dlock;libdlock-dev")
  message(FATAL_ERROR "cpack made '${names}', not dlock and libdlock-dev")
endif()

run(${root}/usr/bin/dlock --version)
if(NOT out MATCHES "^dlock [0-9.]+ \\(commit [^)]+\\)\nbackends: [^\n]*redis")
  message(FATAL_ERROR "the installed dlock --version says:\n${out}")
endif()
foreach(file usr/share/man/man1/dlock.1 usr/share/bash-completion/completions/dlock
    usr/share/zsh/vendor-completions/_dlock usr/include/dlock/dlock.h
    usr/include/dlock/adapters/std_mutex.h usr/lib/cmake/dlock/dlockConfig.cmake)
  if(NOT EXISTS ${root}/${file})
    message(FATAL_ERROR "the packages install no /${file}")
  endif()
endforeach()
build_and_run_consumer(${root}/usr ${WORK_DIR}/build)
