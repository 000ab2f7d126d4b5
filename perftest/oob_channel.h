// The TCP connection perftest peers use for their out-of-band exchange, with a timeout on
// every blocking step and error messages that say which step failed.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace rdmadiag::perftest {

class OobChannel {
 public:
  // Client: connects to host:port, retrying refused connections until timeout_ms (the
  // server may still be starting), then fails with "refused"/"unreachable" explanations.
  static OobChannel connect_to(const std::string& host, int port, int timeout_ms);
  // Server: listens on port (all addresses) and accepts one client within timeout_ms.
  static OobChannel accept_one(int port, int timeout_ms);

  OobChannel(OobChannel&&) noexcept;
  OobChannel& operator=(OobChannel&&) noexcept;
  OobChannel(const OobChannel&) = delete;
  OobChannel& operator=(const OobChannel&) = delete;
  ~OobChannel();

  bool is_client() const { return is_client_; }
  const std::string& peer() const { return peer_; }

  // One write() per message: perftest reads each message with a single read() call.
  void send(std::span<const char> bytes, const std::string& step);
  // Reads exactly size bytes or throws (timeout, peer closed, error) naming the step and
  // what arrived so far.
  std::vector<char> receive(std::size_t size, const std::string& step, int timeout_ms);
  // perftest's exchange: the client writes first, the server reads first.
  std::vector<char> exchange(std::span<const char> mine, std::size_t theirs, const std::string& step, int timeout_ms);
  // Whatever is already readable within wait_ms (for diagnosing a peer that sent something else).
  std::vector<char> drain(int wait_ms);
  void close();

 private:
  OobChannel(int fd, bool is_client, std::string peer) : fd_(fd), is_client_(is_client), peer_(std::move(peer)) {}
  int fd_ = -1;
  bool is_client_ = false;
  std::string peer_;
};

}  // namespace rdmadiag::perftest
