# Shared build settings and the helper every backend uses to declare itself.

function(dlock_set_warnings target)
  # GCC 12 flags designated initializers that leave fields at their
  # defaults (`{.wait = absl::Seconds(1)}`), the style AcquireOptions is
  # meant for; GCC 13 no longer does.
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
  if(DLOCK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Under clang, every file of the build is checked by clang's thread-safety
# analysis as it compiles (the ABSL_GUARDED_BY and ABSL_*_LOCKS_REQUIRED
# annotations), a finding an error: the check costs nothing beyond the
# compile, where scripts/thread_safety.sh (for GCC builds) parses every file
# a second time. Generated code (protoc's) has no annotations to check.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options(-Wthread-safety -Werror=thread-safety)
  # LLVM's linker links a test binary in a sixth of GNU ld's time (0.2 s
  # against 1.2 s here), and the build links over a hundred of them.
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=lld DLOCK_LINKER_LLD)
  if(DLOCK_LINKER_LLD)
    add_link_options(-fuse-ld=lld)
  endif()
  set(DLOCK_THREAD_SAFETY_IN_COMPILE ON CACHE INTERNAL "")
else()
  set(DLOCK_THREAD_SAFETY_IN_COMPILE OFF CACHE INTERNAL "")
endif()

# Test code is built for compile speed: it only drives the library, which
# keeps the build's optimization. clang compiles a GoogleTest file at -O0
# in 55 to 80% of the time it takes at -Og (-O1), which took about half of
# -O3's; CI builds every test twice. Called at the top of a tests
# directory; benchmarks take the build's optimization back.
macro(dlock_test_directory)
  add_compile_options(-O0)
endmacro()

if(DLOCK_SANITIZER STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif(DLOCK_SANITIZER STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT DLOCK_SANITIZER STREQUAL "")
  message(FATAL_ERROR "DLOCK_SANITIZER must be empty, 'address' or 'thread'")
endif()

# libFuzzer builds (tests/fuzz/, scripts/fuzz.sh): clang only. Every file is
# instrumented for the fuzzer's coverage, ASan and UBSan (a UBSan finding
# stops the run, as a crash does); the fuzz targets link libFuzzer's main.
if(DLOCK_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DLOCK_FUZZ needs clang (libFuzzer): configure with "
      "-DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=address,undefined)
endif()

set(DLOCK_BACKEND_TARGETS "" CACHE INTERNAL "")
set(DLOCK_BACKEND_NAMES "" CACHE INTERNAL "")
set(DLOCK_PKGCONFIG_DEPS "" CACHE INTERNAL "")

# dlock_add_backend(NAME SOURCES ... LIBS ... [PKGCONFIG ...])
#
# Builds the backend as a static library dlock_<name>_impl and exposes it as
# dlock::<name>, an interface target that links the archive whole: a backend
# registers itself from a static initializer that nothing references by name,
# so a plain static link would drop it.
function(dlock_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;PKGCONFIG" ${ARGN})
  set(impl dlock_${name}_impl)
  add_library(${impl} STATIC ${ARG_SOURCES})
  dlock_set_warnings(${impl})
  target_link_libraries(${impl} PUBLIC dlock_core PRIVATE ${ARG_LIBS})
  # The backend's unit tests (backends/<name>/tests) include its private
  # headers, and so need its client library's too; they are made in tests/,
  # so an imported client library target must be visible there.
  foreach(lib IN LISTS ARG_LIBS)
    if(TARGET ${lib})
      get_target_property(imported ${lib} IMPORTED)
      get_target_property(global ${lib} IMPORTED_GLOBAL)
      get_target_property(made_in ${lib} SOURCE_DIR)
      if(imported AND NOT global AND made_in STREQUAL CMAKE_CURRENT_SOURCE_DIR)
        set_target_properties(${lib} PROPERTIES IMPORTED_GLOBAL TRUE)
      endif()
    endif()
  endforeach()
  set_target_properties(${impl} PROPERTIES DLOCK_CLIENT_LIBS "${ARG_LIBS}")
  set_target_properties(${impl} PROPERTIES EXPORT_NAME ${name}_impl)
  add_library(dlock_${name} INTERFACE)
  # The export does not rename targets inside $<LINK_LIBRARY>, so name the
  # installed one explicitly.
  target_link_libraries(dlock_${name} INTERFACE
    "$<BUILD_INTERFACE:$<LINK_LIBRARY:WHOLE_ARCHIVE,${impl}>>"
    "$<INSTALL_INTERFACE:$<LINK_LIBRARY:WHOLE_ARCHIVE,dlock::${name}_impl>>")
  set_target_properties(dlock_${name} PROPERTIES EXPORT_NAME ${name})
  add_library(dlock::${name} ALIAS dlock_${name})
  install(TARGETS ${impl} dlock_${name} EXPORT dlockTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set(DLOCK_BACKEND_TARGETS ${DLOCK_BACKEND_TARGETS} dlock_${name} CACHE INTERNAL "")
  set(DLOCK_BACKEND_NAMES ${DLOCK_BACKEND_NAMES} ${name} CACHE INTERNAL "")
  set(DLOCK_PKGCONFIG_DEPS ${DLOCK_PKGCONFIG_DEPS} ${ARG_PKGCONFIG} CACHE INTERNAL "")
endfunction()
