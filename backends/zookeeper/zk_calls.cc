// The zk:// session's asynchronous calls: each is submitted on the current
// handle with a slot the C client's completion fills, and waited for with a
// deadline (Call::Wait); a reply that came from the server proves the
// session alive when the request was read (Liveness, C19).
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "zk_session.h"

namespace dlock::zk {

struct Call::Slot {
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;                   // guarded by mu
  Reply reply;                         // guarded by mu
  MonoTime sent;                       // set before the call is submitted
  std::shared_ptr<Liveness> liveness;  // set before the call is submitted
};

namespace {

using SlotPtr = std::shared_ptr<Call::Slot>;

// Whether `rc` came from the server, for a session it still had: the
// connection-level errors (lost, timed out, expired, closing) did not.
bool ServerAnswered(int rc) {
  switch (rc) {
    case ZOK:
    case ZNONODE:
    case ZNOAUTH:
    case ZBADVERSION:
    case ZNOCHILDRENFOREPHEMERALS:
    case ZNODEEXISTS:
    case ZNOTEMPTY:
      return true;
    default:
      return false;
  }
}

// The C client hands `data` back to the completion; it owns one reference
// to the slot, so a caller that stopped waiting leaves nothing dangling.
template <typename Fill>
void Complete(const void* data, int rc, Fill fill) {
  auto* holder = static_cast<SlotPtr*>(const_cast<void*>(data));
  Call::Slot& slot = **holder;
  {
    std::lock_guard<std::mutex> lock(slot.mu);
    // Any answer proves the session alive when the request was read (C19).
    // Noted before the caller can see the reply, so that a hold it grants
    // is never judged by an older bound.
    if (ServerAnswered(rc)) {
      slot.liveness->NoteReply(slot.reply.generation, slot.sent);
    }
    slot.reply.rc = rc;
    if (rc == ZOK) fill(slot.reply);
    slot.done = true;
  }
  slot.done_cv.notify_all();
  delete holder;
}

void OnCreated(int rc, const char* path, const Stat* stat, const void* data) {
  Complete(data, rc, [&](Reply& r) {
    if (path != nullptr) r.path = path;
    if (stat != nullptr) r.stat = *stat;
  });
}

void OnData(int rc, const char* value, int len, const Stat* stat,
            const void* data) {
  Complete(data, rc, [&](Reply& r) {
    if (value != nullptr && len > 0) r.data.assign(value, len);
    if (stat != nullptr) r.stat = *stat;
  });
}

void OnStat(int rc, const Stat* stat, const void* data) {
  Complete(data, rc, [&](Reply& r) {
    if (stat != nullptr) r.stat = *stat;
  });
}

void OnVoid(int rc, const void* data) {
  Complete(data, rc, [](Reply&) {});
}

void OnChildren(int rc, const String_vector* names, const Stat* stat,
                const void* data) {
  Complete(data, rc, [&](Reply& r) {
    if (names != nullptr) {
      r.children.reserve(names->count);
      for (int32_t i = 0; i < names->count; ++i) {
        r.children.emplace_back(names->data[i]);
      }
    }
    if (stat != nullptr) r.stat = *stat;
  });
}

}  // namespace

MonoTime Call::sent() const {
  std::lock_guard<std::mutex> lock(slot_->mu);
  return slot_->sent;
}

Reply Call::Wait(MonoTime deadline) const {
  std::unique_lock<std::mutex> lock(slot_->mu);
  clock_->WaitUntil(slot_->done_cv, lock, deadline,
                    [this] { return slot_->done; });
  if (!slot_->done) {
    Reply timed_out;
    timed_out.rc = ZOPERATIONTIMEOUT;
    timed_out.generation = slot_->reply.generation;
    return timed_out;
  }
  return slot_->reply;
}

Call Session::Submit(const std::function<int(zhandle_t*, void*)>& submit) {
  auto slot = std::make_shared<Call::Slot>();
  slot->sent = clock().Now();
  slot->liveness = liveness_;
  absl::ReaderMutexLock handle_lock(&handle_mu_);
  bool connected;
  {
    absl::MutexLock lock(&mu_);
    connected = connected_ && handle_ != nullptr;
    std::lock_guard<std::mutex> slot_lock(slot->mu);
    slot->reply.generation = generation_;
  }
  int rc = ZCONNECTIONLOSS;
  if (connected) {
    auto* holder = new SlotPtr(slot);
    rc = submit(handle_, holder);
    if (rc != ZOK) delete holder;
  }
  if (rc != ZOK) {
    std::lock_guard<std::mutex> slot_lock(slot->mu);
    slot->reply.rc = rc;
    slot->done = true;
  }
  return Call(slot, clock());
}

Call Session::Create(const std::string& path, absl::string_view data, int mode,
                     bool open_acl) {
  const ACL_vector* acl =
      open_acl || options_.digest.empty() ? &ZOO_OPEN_ACL_UNSAFE : &acl_;
  return Submit([&](zhandle_t* zh, void* holder) {
    return zoo_acreate2(zh, path.c_str(), data.data(),
                        static_cast<int>(data.size()), acl, mode, &OnCreated,
                        holder);
  });
}

Call Session::Get(const std::string& path, bool watch) {
  return Submit([&](zhandle_t* zh, void* holder) {
    return zoo_aget(zh, path.c_str(), watch ? 1 : 0, &OnData, holder);
  });
}

Call Session::Exists(const std::string& path, bool watch) {
  return Submit([&](zhandle_t* zh, void* holder) {
    return zoo_aexists(zh, path.c_str(), watch ? 1 : 0, &OnStat, holder);
  });
}

Call Session::Set(const std::string& path, absl::string_view data,
                  int version) {
  return Submit([&](zhandle_t* zh, void* holder) {
    return zoo_aset(zh, path.c_str(), data.data(),
                    static_cast<int>(data.size()), version, &OnStat, holder);
  });
}

Call Session::Delete(const std::string& path, int version) {
  return Submit([&](zhandle_t* zh, void* holder) {
    return zoo_adelete(zh, path.c_str(), version, &OnVoid, holder);
  });
}

Call Session::Children(const std::string& path, bool watch) {
  return Submit([&](zhandle_t* zh, void* holder) {
    return zoo_aget_children2(zh, path.c_str(), watch ? 1 : 0, &OnChildren,
                              holder);
  });
}

namespace {

// What a multi needs until its completion: the C client writes the results
// (and the created path) there when the reply comes.
struct MultiContext {
  void* holder;  // Submit()'s slot reference, handed to OnVoid
  std::string create_path;
  std::string data;
  std::string delete_path;
  zoo_op_t ops[2];
  zoo_op_result_t results[2];
  char created[256];  // the created path, unread
};

void OnMulti(int rc, const void* data) {
  auto* context = static_cast<MultiContext*>(const_cast<void*>(data));
  void* holder = context->holder;
  delete context;
  OnVoid(rc, holder);
}

}  // namespace

Call Session::CreateAndDelete(const std::string& create_path,
                              absl::string_view data, int mode,
                              const std::string& delete_path, int version) {
  const ACL_vector* acl =
      options_.digest.empty() ? &ZOO_OPEN_ACL_UNSAFE : &acl_;
  return Submit([&](zhandle_t* zh, void* holder) {
    auto* context = new MultiContext{.holder = holder,
                                     .create_path = create_path,
                                     .data = std::string(data),
                                     .delete_path = delete_path,
                                     .ops = {},
                                     .results = {},
                                     .created = {}};
    zoo_create_op_init(&context->ops[0], context->create_path.c_str(),
                       context->data.data(),
                       static_cast<int>(context->data.size()), acl, mode,
                       context->created, sizeof(context->created));
    zoo_delete_op_init(&context->ops[1], context->delete_path.c_str(), version);
    const int rc =
        zoo_amulti(zh, 2, context->ops, context->results, &OnMulti, context);
    if (rc != ZOK) delete context;
    return rc;
  });
}

namespace {

// SetAll()'s multi until its completion, which copies the last write's stat
// into the reply.
struct SetAllContext {
  void* holder;
  std::vector<Session::VersionedWrite> writes;
  std::vector<zoo_op_t> ops;
  std::vector<zoo_op_result_t> results;
  Stat last{};
};

void OnSetAll(int rc, const void* data) {
  auto* context = static_cast<SetAllContext*>(const_cast<void*>(data));
  void* holder = context->holder;
  const Stat last = context->last;
  delete context;
  Complete(holder, rc, [&](Reply& r) { r.stat = last; });
}

}  // namespace

Call Session::SetAll(const std::vector<VersionedWrite>& writes) {
  return Submit([&](zhandle_t* zh, void* holder) {
    auto* context = new SetAllContext{.holder = holder, .writes = writes};
    const size_t n = context->writes.size();
    context->ops.resize(n);
    context->results.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const VersionedWrite& w = context->writes[i];
      zoo_set_op_init(&context->ops[i], w.path.c_str(), w.data.data(),
                      static_cast<int>(w.data.size()), w.version,
                      i + 1 == n ? &context->last : nullptr);
    }
    const int rc = zoo_amulti(zh, static_cast<int>(n), context->ops.data(),
                              context->results.data(), &OnSetAll, context);
    if (rc != ZOK) delete context;
    return rc;
  });
}

}  // namespace dlock::zk
