#include "identity.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace dlock::internal {
namespace {

// Checks UTF-8 strictly (no overlong forms, no surrogates, nothing past
// U+10FFFF) and rejects the control characters U+0000..U+001F, U+007F and
// U+0080..U+009F.
absl::Status ValidateText(absl::string_view text, absl::string_view what,
                          size_t max_bytes) {
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  }
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", text.size(), " bytes long; the limit is ", max_bytes));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    uint32_t c = p[i];
    size_t len = 1;
    uint32_t min = 0;
    if (c >= 0xF0 && c <= 0xF4) {
      len = 4, c &= 0x07, min = 0x10000;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, c &= 0x0F, min = 0x800;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2, c &= 0x1F, min = 0x80;
    } else if (c >= 0x80) {
      len = 0;
    }
    if (len == 0 || c > 0x10FFFF || i + len > n) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is not valid UTF-8 (byte ", i, ")"));
    }
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " is not valid UTF-8 (byte ", i + k, ")"));
      }
      c = (c << 6) | (p[i + k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is not valid UTF-8 (byte ", i, ")"));
    }
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has a control character at byte ", i, " (U+",
                       absl::Hex(c, absl::kZeroPad4), ")"));
    }
    i += len;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateLockName(absl::string_view name) {
  return ValidateText(name, "lock name", kMaxNameBytes);
}

absl::Status ValidateOwnerToken(absl::string_view token) {
  return ValidateText(token, "owner token", kMaxOwnerTokenBytes);
}

absl::Status ValidateNamespace(absl::string_view ns) {
  if (ns.empty() || ns.size() > kMaxNamespaceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "namespace must be 1 to ", kMaxNamespaceBytes, " bytes long"));
  }
  for (char c : ns) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("namespace '", ns,
                       "' may hold only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateClientId(absl::string_view id) {
  bool ok = id.size() == 32;
  for (char c : id)
    ok = ok && absl::ascii_isxdigit(c) && !absl::ascii_isupper(c);
  if (!ok) {
    return absl::InvalidArgumentError(
        "client id must be 32 lower-case hex digits (128 bits)");
  }
  return absl::OkStatus();
}

namespace {

// Fills `out` from the kernel's random pool; async-signal-safe, so that a
// forked child may call it before it execs or goes on.
void FillRandom(void* out, size_t size) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = getrandom(p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // no getrandom (seccomp, old kernel): urandom below
    p += n;
    size -= static_cast<size_t>(n);
  }
  if (size == 0) return;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    size -= static_cast<size_t>(n);
  }
  if (fd >= 0) close(fd);
  if (size != 0) {
    // Owner ids must not repeat across clients and processes (C6).
    static const char kMessage[] =
        "dlock: no source of random bits (getrandom, /dev/urandom)\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    abort();
  }
}

std::atomic<uint64_t> process_nonce{0};

void DrawProcessNonce() {
  uint64_t nonce = 0;
  while (nonce == 0) FillRandom(&nonce, sizeof(nonce));
  process_nonce.store(nonce);
}

// Registered while the program starts, single-threaded: a forked child
// must not act as its parent's owners (C6).
const int kForkHandler = pthread_atfork(nullptr, nullptr, &DrawProcessNonce);

}  // namespace

uint64_t ProcessNonce() {
  uint64_t nonce = process_nonce.load();
  if (nonce != 0) return nonce;
  uint64_t drawn = 0;
  while (drawn == 0) FillRandom(&drawn, sizeof(drawn));
  // The first thread to draw wins; the others use its number.
  return process_nonce.compare_exchange_strong(nonce, drawn) ? drawn : nonce;
}

uint64_t RandomBits() {
  uint64_t bits = 0;
  FillRandom(&bits, sizeof(bits));
  return bits;
}

std::string RandomClientId() {
  std::string bytes(16, '\0');
  FillRandom(bytes.data(), bytes.size());
  return absl::BytesToHexString(bytes);
}

std::string ThreadOwner(absl::string_view client_id, uint64_t instance) {
  static std::atomic<uint64_t> next_thread{1};
  thread_local const uint64_t thread_number = next_thread.fetch_add(1);
  return absl::StrCat("c:", client_id, ":",
                      absl::Hex(instance ^ ProcessNonce(), absl::kZeroPad16),
                      ":", thread_number);
}

std::string TokenOwner(absl::string_view token) {
  return absl::StrCat("t:", token);
}

}  // namespace dlock::internal
