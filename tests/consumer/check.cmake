# Installs the build at BUILD_DIR into a scratch prefix, then configures,
# builds and runs the consumer project against it (common.cmake).
# WITH_ADAPTERS says whether dlock was built with its adapters.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
build_and_run_consumer(${prefix} ${WORK_DIR}/build)
