// Copyright dlock authors. An in-process TCP proxy that injects network
// faults between a client under test and its real server (Redis, ZooKeeper,
// PostgreSQL), since `tc netem` is not available to the tests. It forwards
// byte streams without parsing them, so every protocol works through it.
//
//   FaultProxy proxy;
//   ASSERT_OK(proxy.Start("127.0.0.1", redis_port));
//   ... connect the client to 127.0.0.1:proxy.port() ...
//   ASSERT_OK(proxy.Partition());  // existing connections hang, new ones too
//   ...
//   ASSERT_OK(proxy.Heal());       // held bytes are delivered, in order
//
// One thread runs the event loop (poll() over non-blocking sockets); the
// control methods below may be called from any thread while traffic flows.
// A control method takes effect before it returns: every byte the proxy
// reads afterwards is subject to the new setting, and a reset has been sent.
// Each accepted connection gets its own upstream connection; a client whose
// upstream refuses, or does not answer within
// Options::upstream_connect_timeout, is reset.
#ifndef DLOCK_INTEGRATION_FAULT_PROXY_H_
#define DLOCK_INTEGRATION_FAULT_PROXY_H_

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dlock::test {

// The way bytes travel through the proxy.
enum class Direction {
  kRequests,  // client to server
  kReplies,   // server to client
};
// For loops over both directions.
inline constexpr Direction kBothDirections[] = {Direction::kRequests,
                                                Direction::kReplies};

// What the proxy does with the bytes it reads in one direction. A fault
// applies to bytes read after it is set; bytes read earlier keep the fate
// they were given, except that a stall holds those not yet sent too. The end
// of the stream (FIN, or RST which resets the whole connection) follows the
// bytes before it: a delay or stall holds it as long; a drop does not.
struct Fault {
  enum class Kind {
    kPass,   // forward at once
    kDelay,  // forward each chunk `delay` after it was read, in order
    kStall,  // send nothing, close nothing: a silent partition
    kDrop,   // discard; the sockets stay open (lost replies)
    // forward in pieces of `piece` bytes, one every `delay`, in order: a
    // stream that arrives a few bytes at a time (a TLS record in pieces)
    kTrickle,
  };
  static Fault Pass() { return {}; }
  static Fault Delay(absl::Duration d) { return {Kind::kDelay, d}; }
  static Fault Stall() { return {Kind::kStall}; }
  static Fault Drop() { return {Kind::kDrop}; }
  static Fault Trickle(size_t piece, absl::Duration every) {
    return {Kind::kTrickle, every, piece};
  }

  bool operator==(const Fault&) const = default;
  // "pass", "delay(100ms)", "stall", "drop", "trickle(7 bytes every 1ms)"
  std::string ToString() const;

  Kind kind = Kind::kPass;
  absl::Duration delay;  // kDelay, kTrickle
  size_t piece = 0;      // kTrickle
};

// What lifting a stall does with the bytes read while it lasted.
enum class Held {
  kDeliver,  // treat them as read now, under the new fault (as TCP would
             // retransmit them): with Pass they arrive at once, in order
  kDiscard,  // throw them away
};

// What happens to connections that arrive at the proxy's port.
enum class Admission {
  kAccept,     // forward them to the current upstream
  kReset,      // accept, then close at once with RST: the client's next
               // read (or its connect(), if the RST is there first) fails
               // with ECONNRESET
  kRefuse,     // nothing listens: connect() fails with ECONNREFUSED (the
               // port stays reserved for the proxy)
  kBlackhole,  // SYNs are silently dropped: connect() hangs until it times
               // out, as behind a partition
};

// Byte counts of one direction. received = forwarded + dropped + in flight.
struct DirectionStats {
  uint64_t received = 0;   // read from the sender
  uint64_t forwarded = 0;  // written to the receiver
  uint64_t dropped = 0;    // by kDrop, Held::kDiscard, or a reset
};

struct ProxyStats {
  const DirectionStats& operator[](Direction d) const {
    return d == Direction::kRequests ? requests : replies;
  }
  // Connections accepted since Start(), those kReset closes at once included.
  uint64_t accepted = 0;
  uint64_t live = 0;  // connections open now
  DirectionStats requests;
  DirectionStats replies;
};

struct ConnectionInfo {
  uint64_t id = 0;         // 1 for the first connection accepted, and so on
  std::string upstream;    // "host:port" this connection was forwarded to
  bool connected = false;  // the upstream connect() has completed
  Fault requests;
  Fault replies;
  DirectionStats request_bytes;
  DirectionStats reply_bytes;
};

class FaultProxy {
 public:
  struct Options {
    // A client whose upstream connection is not up by then is reset.
    absl::Duration upstream_connect_timeout = absl::Seconds(5);
    // Per connection and direction; beyond it the proxy stops reading, so
    // that TCP flow control pushes back on the sender.
    size_t max_buffered_bytes = size_t{4} << 20;
  };

  FaultProxy();
  explicit FaultProxy(Options options);
  // Stops the event loop and closes every socket; live connections are reset.
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // Listens on a free port of 127.0.0.1 and forwards each connection to
  // upstream_host:upstream_port (a name or a numeric IPv4/IPv6 address).
  // Call once, before the methods below that say they need it.
  absl::Status Start(const std::string& upstream_host, int upstream_port);

  // The listening port; 0 before Start(). Thread-safe.
  int port() const;

  // Connections accepted from now on go to the new upstream; open ones keep
  // theirs (a client left on a demoted master). Thread-safe.
  absl::Status SetUpstream(const std::string& host, int port);

  // Sets the fault of `direction` on every open connection and on those
  // accepted later. Lifting a stall treats its held bytes as `held` says.
  // Thread-safe.
  void SetFault(Direction direction, Fault fault, Held held = Held::kDeliver);

  // Sets the fault of one open connection only. NotFound if `id` is not
  // open. Thread-safe.
  absl::Status SetConnectionFault(uint64_t id, Direction direction, Fault fault,
                                  Held held = Held::kDeliver);

  // Decides the fate of new connections. Connections that completed their
  // handshake before the call are accepted under the previous setting.
  // Needs Start(). Thread-safe.
  absl::Status SetAdmission(Admission admission);

  // Stalls both directions of every connection and blackholes new ones: the
  // network between client and server is gone, and nobody is told. Needs
  // Start(). Thread-safe.
  absl::Status Partition();
  // Undoes Partition() (and any other fault): every connection passes both
  // ways, new connections are accepted. Needs Start(). Thread-safe.
  absl::Status Heal(Held held = Held::kDeliver);

  // Closes both sockets of every open connection with RST (SO_LINGER 0);
  // buffered bytes count as dropped. Thread-safe.
  void ResetAll();
  // The same for one connection. NotFound if `id` is not open. Thread-safe.
  absl::Status ResetConnection(uint64_t id);

  // Open connections, by id. Thread-safe.
  std::vector<ConnectionInfo> Connections() const;
  // A snapshot of the counters. Thread-safe.
  ProxyStats stats() const;

  // Blocks until `done(stats())` holds or `timeout` passes; then
  // DeadlineExceeded naming `what` and the counters. `done` runs under the
  // proxy's lock on any thread: keep it a cheap test of its argument, and
  // call no method of the proxy from it. Thread-safe.
  absl::Status WaitFor(const std::function<bool(const ProxyStats&)>& done,
                       absl::Duration timeout, absl::string_view what) const;
  // Until at least `total` bytes (since Start()) were received from the
  // sender / forwarded to the receiver of `direction`. Thread-safe.
  absl::Status WaitForReceived(Direction direction, uint64_t total,
                               absl::Duration timeout) const;
  absl::Status WaitForForwarded(Direction direction, uint64_t total,
                                absl::Duration timeout) const;
  // Until at least `total` connections were accepted since Start().
  // Thread-safe.
  absl::Status WaitForAccepted(uint64_t total, absl::Duration timeout) const;

 private:
  using Clock = std::chrono::steady_clock;

  struct Upstream {
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
    std::string name;
  };
  struct Chunk {
    std::string data;
    Clock::time_point due;  // meaningless while `held`
    bool held = false;      // read during a stall
  };
  // One direction of one connection: what was read and is not yet written.
  struct Pipe {
    Fault fault;
    std::deque<Chunk> queue;
    size_t buffered = 0;                                    // bytes in `queue`
    size_t written = 0;                                     // of queue.front()
    enum class End { kOpen, kFin, kRst } end = End::kOpen;  // after `queue`
    bool end_sent = false;
    DirectionStats stats;
    Clock::time_point trickled_until;  // when the last piece is due
  };
  struct Conn {
    uint64_t id = 0;
    int client_fd = -1;
    int server_fd = -1;
    bool connecting = true;
    Clock::time_point connect_deadline;
    std::string upstream;
    Pipe pipes[2];  // indexed by Idx(Direction)
  };

  static int Idx(Direction d) { return d == Direction::kRequests ? 0 : 1; }
  static void AbortClose(int fd);  // closes with RST, so the peer sees it

  void Loop();
  void Wake();  // interrupts the loop's poll(), so it sees what changed
  // Locks mu_ once the loop is out of poll(), for control methods that
  // close sockets: poll() holds a reference to each socket it watches, so a
  // socket closed meanwhile would stay open (listening, not yet reset) until
  // poll() returned.
  void LockOutsidePoll() ABSL_EXCLUSIVE_LOCK_FUNCTION(mu_);
  bool OutsidePoll() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !in_poll_; }
  bool Unpaused() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return pausers_ == 0;
  }
  bool Accepting() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return admission_ == Admission::kAccept || admission_ == Admission::kReset;
  }
  absl::Status SetUpstreamLocked(const std::string& host, int port)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetFaultLocked(Direction direction, Fault fault, Held held)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Listen(int backlog) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Blackhole() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplyAdmission(Admission next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AcceptPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OpenUpstream(int client_fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetPipeFault(Pipe& pipe, Direction direction, Fault fault, Held held)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Read(Conn& conn, Direction direction) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes what is due; false once the connection is closed and erased.
  bool Pump(Conn& conn, Clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Close(uint64_t id, bool reset) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountDropped(Pipe& pipe, Direction direction, size_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  DirectionStats& Totals(Direction direction)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  int wake_fd_ = -1;  // an eventfd; set by Start() before the loop runs
  std::thread loop_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool in_poll_ ABSL_GUARDED_BY(mu_) = false;  // the loop is in poll()
  int pausers_ ABSL_GUARDED_BY(mu_) = 0;       // threads in LockOutsidePoll()
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  int listen_fd_ ABSL_GUARDED_BY(mu_) = -1;
  // Kept bound to port_ (SO_REUSEPORT, not listening), so that kRefuse can
  // close the listener and listen again later on the same port.
  int reserve_fd_ ABSL_GUARDED_BY(mu_) = -1;
  // Our own connections that fill the accept queue during a blackhole, and
  // their local ports, to recognise them when the listener accepts them.
  std::vector<int> dummy_fds_ ABSL_GUARDED_BY(mu_);
  std::set<int> dummy_ports_ ABSL_GUARDED_BY(mu_);
  Admission admission_ ABSL_GUARDED_BY(mu_) = Admission::kAccept;
  Upstream upstream_ ABSL_GUARDED_BY(mu_);
  Fault defaults_[2] ABSL_GUARDED_BY(mu_);  // for new connections
  std::map<uint64_t, std::unique_ptr<Conn>> conns_ ABSL_GUARDED_BY(mu_);
  ProxyStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock::test

#endif  // DLOCK_INTEGRATION_FAULT_PROXY_H_
