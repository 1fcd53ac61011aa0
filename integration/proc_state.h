// Copyright dlock authors. What /proc says about a thread or a process, for
// tests that must know a thread is blocked (the code under test has no
// hooks) or that a killed process is really gone.
#ifndef DLOCK_INTEGRATION_PROC_STATE_H_
#define DLOCK_INTEGRATION_PROC_STATE_H_

#include <sys/types.h>

namespace dlock::test {

// The calling thread's kernel id.
pid_t ThreadId();

// The state letter of /proc/<path>/stat ('R', 'S', 'Z', ...), or 0 when it
// is gone or unreadable.
char ProcessState(pid_t pid);
char ThreadState(pid_t tid);  // a thread of this process

// True once thread `tid` of this process has been asleep (state S: in
// read(), in a futex) for several looks in a row, within 10 s: it got as
// far as it can without help.
bool AsleepInKernel(pid_t tid);

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_PROC_STATE_H_
