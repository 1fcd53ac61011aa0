// Copyright dlock authors. Validation of names (C15), namespaces (C16) and
// owner identity (C6).
#ifndef DLOCK_CORE_SRC_IDENTITY_H_
#define DLOCK_CORE_SRC_IDENTITY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dlock::internal {

inline constexpr size_t kMaxNameBytes = 512;
inline constexpr size_t kMaxNamespaceBytes = 64;
inline constexpr size_t kMaxOwnerTokenBytes = 256;

// Non-empty, at most 512 bytes of valid UTF-8 without control characters.
absl::Status ValidateLockName(absl::string_view name);
// Letters, digits, '.', '_', '-'; at most 64 bytes.
absl::Status ValidateNamespace(absl::string_view ns);
absl::Status ValidateOwnerToken(absl::string_view token);
// 32 lower-case hex digits.
absl::Status ValidateClientId(absl::string_view id);

std::string RandomClientId();
// 64 random bits (getrandom(2)).
uint64_t RandomBits();
// 64 random bits of this process, drawn anew in a child after fork().
uint64_t ProcessNonce();

// "c:<client id>:<instance>:<n>" where n numbers the calling thread within
// the process (a thread keeps its number for life) and <instance> mixes the
// client object's random `instance` with a random number of this process
// that a forked child draws anew. So two clients given the same client id,
// in one process or two, and a parent and its child after fork(), never act
// as the same owner.
std::string ThreadOwner(absl::string_view client_id, uint64_t instance);
// "t:<token>" for an explicit owner token, so it never equals a thread owner.
std::string TokenOwner(absl::string_view token);

}  // namespace dlock::internal

#endif  // DLOCK_CORE_SRC_IDENTITY_H_
