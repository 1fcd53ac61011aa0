// Copyright dlock authors. Everything service code needs.
#ifndef DLOCK_DLOCK_H_
#define DLOCK_DLOCK_H_

#include "dlock/cancel.h"
#include "dlock/client.h"
#include "dlock/errors.h"
#include "dlock/hold.h"
#include "dlock/lock.h"
#include "dlock/traits.h"

#endif  // DLOCK_DLOCK_H_
