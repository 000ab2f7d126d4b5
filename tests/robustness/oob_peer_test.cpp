// The perftest out-of-band channel against hostile peers: a fake peer on
// 127.0.0.1 that sends nothing, half a message, garbage, or a version this
// dialect refuses. Each must end in a RunError/ProtocolError naming the step
// within the timeout, never a hang or a crash. (`rdmadiag perftest` itself
// stops at "no RDMA devices found" on a host without a device, before any
// out-of-band exchange, so these drive OobChannel and the parsers directly.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "perftest/errors.h"
#include "perftest/oob_channel.h"
#include "perftest/oob_protocol.h"

using namespace rdmadiag::perftest;

namespace {

// A listening socket on an ephemeral 127.0.0.1 port; the peer behaviour runs on
// the accepted connection in a thread.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int)> behave) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listen_fd_, 1);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, behave] {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd >= 0) {
        behave(fd);
        ::close(fd);
      }
    });
  }
  ~FakeServer() {
    shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A TCP port nothing listens on (the kernel's pick, released again).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

void write_all(int fd, const std::string& s) { (void)!::write(fd, s.data(), s.size()); }

// Runs `f`, expects a RunError whose message contains every `parts`, within `limit`.
template <class F>
void expect_error(F f, std::initializer_list<std::string> parts, std::chrono::milliseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const RunError& e) {
    const std::string what = e.what();
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
  }
  EXPECT_LE(std::chrono::steady_clock::now() - start, limit);
}

constexpr int kTimeoutMs = 1000;

}  // namespace

TEST(OobPeer, ServerThatSendsNothingTimesOut) {
  FakeServer server([](int) { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); });
  auto ch = OobChannel::connect_to("127.0.0.1", server.port(), kTimeoutMs);
  expect_error([&] { ch.receive(oob::kVersionSize, "version exchange", kTimeoutMs); },
               {"out-of-band version exchange", "no answer from 127.0.0.1", "within 1 s", "nothing received"},
               std::chrono::milliseconds(1400));
}

TEST(OobPeer, ServerThatSendsHalfAMessageAndWaits) {
  FakeServer server([](int fd) {
    write_all(fd, "6.0");
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  });
  auto ch = OobChannel::connect_to("127.0.0.1", server.port(), kTimeoutMs);
  expect_error([&] { ch.receive(oob::kVersionSize, "version exchange", kTimeoutMs); },
               {"no answer", "received 3 of 16 bytes", "6.0"}, std::chrono::milliseconds(1400));
}

TEST(OobPeer, ServerThatSendsHalfAMessageAndCloses) {
  FakeServer server([](int fd) { write_all(fd, std::string("0000:0010:000011", 16)); });
  auto ch = OobChannel::connect_to("127.0.0.1", server.port(), kTimeoutMs);
  expect_error([&] { ch.receive(oob::kKeyMessageSizeWithGid, "key exchange", kTimeoutMs); },
               {"out-of-band key exchange", "closed the connection after 16 of 108 bytes"},
               std::chrono::milliseconds(500));
}

TEST(OobPeer, GarbageWhereTheVersionShouldBe) {
  FakeServer server([](int fd) { write_all(fd, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03GET /", 16)); });
  auto ch = OobChannel::connect_to("127.0.0.1", server.port(), kTimeoutMs);
  const auto bytes = ch.receive(oob::kVersionSize, "version exchange", kTimeoutMs);
  // Refused with the bytes shown printable (hex for the rest) and a hint.
  try {
    (void)oob::parse_version(bytes);
    ADD_FAILURE() << "garbage accepted as a version";
  } catch (const oob::ProtocolError& e) {
    EXPECT_EQ(std::string(e.what()),
              "peer's first message is not a perftest version string: "
              "\"\\x16\\x03\\x01\\x02\\x00\\x01\\x00\\x01\\xfc\\x03\\x03GET /\" "
              "(is something other than perftest/rdmadiag listening on that port?)");
  }
}

TEST(OobPeer, WrongVersion) {
  const oob::PeerVersion v = oob::parse_version(std::string("5.60\0\0\0\0\0\0\0\0\0\0\0\0", 16));
  EXPECT_EQ(v.text, "5.60");
  EXPECT_LT(v.number, oob::kOldestCompatibleVersion);
}

TEST(OobPeer, GarbageKeyMessagesAreProtocolErrors) {
  std::string key(oob::kKeyMessageSizeWithGid, 'z');
  EXPECT_THROW(oob::parse_key_message(key, true), oob::ProtocolError);
  EXPECT_THROW(oob::parse_key_message(key, false), oob::ProtocolError);  // wrong size for the form
  EXPECT_THROW(oob::parse_mtu(std::string("9\0", 2)), oob::ProtocolError);
  EXPECT_THROW(oob::parse_options(std::string(256, ';')), oob::ProtocolError);
  EXPECT_THROW(oob::parse_negotiation(std::string(7, '\0')), oob::ProtocolError);
}

TEST(OobPeer, ServerSideClientThatNeverConnects) {
  const int port = free_port();
  expect_error([&] { OobChannel::accept_one(port, kTimeoutMs); },
               {"no client connected to TCP port " + std::to_string(port), "within 1 s"},
               std::chrono::milliseconds(1400));
}

TEST(OobPeer, ClientThatSendsGarbageToTheServerAndCloses) {
  const int port = free_port();
  std::thread client([port] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) write_all(fd, "HELLO\r\n");
    ::close(fd);
  });
  auto ch = OobChannel::accept_one(port, kTimeoutMs);
  expect_error([&] { ch.receive(oob::kVersionSize, "version exchange", kTimeoutMs); },
               {"closed the connection after 7 of 16 bytes", "HELLO"}, std::chrono::milliseconds(1400));
  client.join();
}
