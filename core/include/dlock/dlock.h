// Copyright dlock authors. Everything service code needs.
#ifndef DLOCK_DLOCK_H_
#define DLOCK_DLOCK_H_

#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/lock.h"

#endif  // DLOCK_DLOCK_H_
