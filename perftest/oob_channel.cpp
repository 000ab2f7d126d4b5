#include "perftest/oob_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "perftest/clock.h"
#include "perftest/errors.h"
#include "perftest/oob_protocol.h"

namespace rdmadiag::perftest {

namespace {
std::string errno_text(int e) { return std::strerror(e); }

int remaining_ms(std::uint64_t deadline_ns) {
  const std::uint64_t now = monotonic_ns();
  return now >= deadline_ns ? 0 : static_cast<int>((deadline_ns - now) / 1000000ull) + 1;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
}  // namespace

OobChannel OobChannel::connect_to(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    throw RunError("cannot resolve peer '" + host + "': " + gai_strerror(rc));
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(timeout_ms) * 1000000ull;
  std::string last_error = "timed out";
  int last_errno = 0;
  for (;;) {
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (rc < 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const int wait = std::min(remaining_ms(deadline), 2000);
        if (poll(&p, 1, wait) == 1) {
          int err = 0;
          socklen_t len = sizeof err;
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err ? -1 : 0;
          errno = err ? err : 0;
        } else {
          errno = ETIMEDOUT;
        }
      }
      if (rc == 0) {
        // Back to blocking mode: reads use poll() for their timeouts.
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        set_nodelay(fd);
        freeaddrinfo(res);
        return OobChannel(fd, true, host + ":" + service);
      }
      last_errno = errno;
      last_error = errno_text(errno);
      ::close(fd);
    }
    if (remaining_ms(deadline) <= 0) break;
    // Refused means nobody listens yet; the server may be starting: retry until the deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  freeaddrinfo(res);
  std::string hint;
  if (last_errno == ECONNREFUSED)
    hint = " - nothing listens there: start the server side first (same test, no peer address) and check -p";
  else if (last_errno == EHOSTUNREACH || last_errno == ENETUNREACH)
    hint = " - no route to the peer: check its address and that the out-of-band network is up";
  else if (last_errno == ETIMEDOUT || last_errno == 0)
    hint = " - the peer does not answer: check the address, firewalls (TCP port " + service + ") and that it is up";
  throw RunError("cannot connect to " + host + ":" + service + " within " + std::to_string(timeout_ms / 1000) +
                 " s: " + last_error + hint);
}

OobChannel OobChannel::accept_one(int port, int timeout_ms) {
  const int lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int family_fd = lfd;
  bool v6 = lfd >= 0;
  if (!v6) family_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (family_fd < 0) throw RunError("cannot create a TCP socket: " + errno_text(errno));
  int one = 1;
  setsockopt(family_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    int zero = 0;
    setsockopt(family_fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    rc = bind(family_fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    rc = bind(family_fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc < 0) {
    const int e = errno;
    ::close(family_fd);
    throw RunError("cannot listen on TCP port " + std::to_string(port) + ": " + errno_text(e) +
                   (e == EADDRINUSE ? " - another server (perftest or rdmadiag) already uses it; pick another with -p" : ""));
  }
  listen(family_fd, 1);
  pollfd p{family_fd, POLLIN, 0};
  const int ready = poll(&p, 1, timeout_ms);
  if (ready != 1) {
    ::close(family_fd);
    throw RunError("no client connected to TCP port " + std::to_string(port) + " within " +
                   std::to_string(timeout_ms / 1000) + " s (raise --timeout, or start the client with this host's address)");
  }
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  const int fd = accept4(family_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
  const int e = errno;
  ::close(family_fd);
  if (fd < 0) throw RunError("accept failed: " + errno_text(e));
  set_nodelay(fd);
  char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<sockaddr*>(&peer), len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0) h = h.substr(7);
  return OobChannel(fd, false, h + ":" + serv);
}

OobChannel::OobChannel(OobChannel&& o) noexcept : fd_(o.fd_), is_client_(o.is_client_), peer_(std::move(o.peer_)) {
  o.fd_ = -1;
}
OobChannel& OobChannel::operator=(OobChannel&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    is_client_ = o.is_client_;
    peer_ = std::move(o.peer_);
    o.fd_ = -1;
  }
  return *this;
}
OobChannel::~OobChannel() { close(); }

void OobChannel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void OobChannel::send(std::span<const char> bytes, const std::string& step) {
  const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(bytes.size()))
    throw RunError("out-of-band " + step + ": cannot send to " + peer_ + ": " +
                   (n < 0 ? errno_text(errno) : "short write") + " (did the peer exit? check its output)");
}

std::vector<char> OobChannel::receive(std::size_t size, const std::string& step, int timeout_ms) {
  std::vector<char> buf(size);
  std::size_t got = 0;
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(timeout_ms) * 1000000ull;
  while (got < size) {
    pollfd p{fd_, POLLIN, 0};
    const int wait = remaining_ms(deadline);
    const int ready = wait > 0 ? poll(&p, 1, wait) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      std::string so_far = got ? "; received " + std::to_string(got) + " of " + std::to_string(size) + " bytes: " +
                                     oob::describe_bytes({buf.data(), got})
                               : "; nothing received";
      throw RunError("out-of-band " + step + ": no answer from " + peer_ + " within " +
                     std::to_string(timeout_ms / 1000) + " s" + so_far +
                     " - the peer is probably running a different test, a different option set (-a, -s, -n, -x, "
                     "-c) or an incompatible perftest version; compare both command lines");
    }
    const ssize_t n = ::recv(fd_, buf.data() + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string so_far = got ? " after " + std::to_string(got) + " of " + std::to_string(size) + " bytes " +
                                     oob::describe_bytes({buf.data(), got})
                               : "";
      throw RunError("out-of-band " + step + ": " + peer_ + " closed the connection" + so_far +
                     (n < 0 ? " (" + errno_text(errno) + ")" : "") +
                     " - the peer gave up; its own output says why (often a version or option mismatch)");
    }
    got += static_cast<std::size_t>(n);
  }
  return buf;
}

std::vector<char> OobChannel::receive_message(const std::string& step, int) {
  throw RunError("out-of-band " + step + ": the TCP exchange has no message boundaries (internal error)");
}

std::vector<char> OobTransport::exchange(std::span<const char> mine, std::size_t theirs, const std::string& step,
                                         int timeout_ms) {
  if (is_client()) {
    send(mine, step);
    return receive(theirs, step, timeout_ms);
  }
  auto got = receive(theirs, step, timeout_ms);
  send(mine, step);
  return got;
}

std::vector<char> OobTransport::exchange_message(std::span<const char> mine, const std::string& step, int timeout_ms,
                                                 std::vector<std::string>* warnings) {
  if (is_client()) {
    try {
      send(mine, step);
    } catch (const SendNotConfirmed& unconfirmed) {
      std::vector<char> answer;
      try {
        answer = receive_message(step, timeout_ms);
      } catch (const RunError&) {
        throw unconfirmed;  // no answer: the SEND's own error says what happened
      }
      if (warnings)
        warnings->push_back(std::string("our SEND's completion failed but the peer answered it, so it arrived: ") +
                            unconfirmed.what());
      return answer;
    }
    return receive_message(step, timeout_ms);
  }
  auto got = receive_message(step, timeout_ms);
  send(mine, step);
  return got;
}

std::vector<char> OobChannel::drain(int wait_ms) {
  std::vector<char> out;
  char buf[512];
  pollfd p{fd_, POLLIN, 0};
  while (poll(&p, 1, wait_ms) == 1) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
    wait_ms = 10;
  }
  return out;
}

bool OobChannel::peer_closed() {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return false;
  if (p.revents & (POLLHUP | POLLERR)) return true;
  char byte = 0;
  return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // readable with nothing to read: closed
}

}  // namespace rdmadiag::perftest
