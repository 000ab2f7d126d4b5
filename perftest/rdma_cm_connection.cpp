#include "perftest/rdma_cm_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "perftest/clock.h"
#include "perftest/errors.h"
#include "perftest/oob_protocol.h"

namespace rdmadiag::perftest {

namespace {

int remaining_ms(std::uint64_t deadline_ns) {
  const std::uint64_t now = monotonic_ns();
  return now >= deadline_ns ? 0 : static_cast<int>((deadline_ns - now) / 1000000ull) + 1;
}

std::uint64_t deadline_after(int timeout_ms) {
  return monotonic_ns() + static_cast<std::uint64_t>(std::max(timeout_ms, 0)) * 1000000ull;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string errno_text() { return std::strerror(errno); }

std::string address_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa && sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (sa && sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

// The next event on a non-blocking channel, or nullptr when the deadline passes first.
rdma_cm_event* next_event(rdma_event_channel* channel, std::uint64_t deadline_ns) {
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel, &event) == 0) return event;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      throw RunError("rdma_get_cm_event failed: " + errno_text());
    const int wait = remaining_ms(deadline_ns);
    if (wait <= 0) return nullptr;
    pollfd p{channel->fd, POLLIN, 0};
    poll(&p, 1, wait);
  }
}

// Waits for `expected`; returns an empty string on success, else why not (the event is acked).
std::string expect_event(rdma_event_channel* channel, std::uint64_t deadline_ns, rdma_cm_event_type expected,
                         const std::string& peer, const std::string& waiting_for) {
  rdma_cm_event* event = next_event(channel, deadline_ns);
  if (!event) return "no " + waiting_for + " before the deadline (RDMA_CM timeout)";
  const rdma_cm_event_type type = event->event;
  const int status = event->status;
  rdma_ack_cm_event(event);
  if (type == expected) return {};
  return describe_cm_failure(type, status, peer);
}

void set_u8_option(rdma_cm_id* id, int option, int value) {
  if (value < 0) return;
  std::uint8_t v = static_cast<std::uint8_t>(value);
  // Best effort, as perftest: a provider without the option still connects with its default.
  (void)rdma_set_option(id, RDMA_OPTION_ID, option, &v, sizeof v);
}

rdma_conn_param conn_param_from(const CmConnectParams& p) {
  rdma_conn_param c{};
  c.responder_resources = static_cast<std::uint8_t>(std::clamp(p.responder_resources, 0, 255));
  c.initiator_depth = static_cast<std::uint8_t>(std::clamp(p.initiator_depth, 0, 255));
  c.retry_count = static_cast<std::uint8_t>(std::clamp(p.retry_count, 0, 7));
  c.rnr_retry_count = static_cast<std::uint8_t>(std::clamp(p.rnr_retry_count, 0, 7));
  return c;
}

rdma_event_channel* create_channel() {
  rdma_event_channel* channel = rdma_create_event_channel();
  if (!channel)
    throw RunError("cannot open rdma_cm (" + errno_text() +
                   "): is the rdma_ucm module loaded and /dev/infiniband/rdma_cm accessible? -R needs it");
  set_nonblocking(channel->fd);
  return channel;
}

// Linux soft-iWARP's passive side sends its MPA reply before it hands the socket's
// receive path to the QP (siw_accept: siw_send_mpareqrep, then siw_qp_socket_assoc).
// An FPDU that arrives in between stays unread in the socket until more data comes,
// and the first exchange waits for an answer that never comes: seen in the lab under
// emulation, the server's TCP acknowledging our 40-byte version SEND and its perftest
// never seeing it (tests/perftest/lab.cmake, lab_perftest_siw_cm). Giving the peer
// a moment after ESTABLISHED before the first message closes that window in practice.
void settle_passive_side(const rdma_cm_id* id) {
  if (id && id->verbs && id->verbs->device->transport_type == IBV_TRANSPORT_IWARP)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

}  // namespace

std::string describe_cm_failure(int event, int status, const std::string& peer) {
  const std::string what = std::string(rdma_event_str(static_cast<rdma_cm_event_type>(event))) + ", status " +
                           std::to_string(status);
  switch (event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "cannot resolve " + peer + " to a local RDMA device (" + what +
             "): no RDMA device (rxe/siw/mlx5...) on the interface that routes there, or the address does not answer";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "no RDMA route to " + peer + " (" + what + ")";
    case RDMA_CM_EVENT_REJECTED:
      return peer + " refused the connection (" + what +
             "): nothing listens there with rdma_cm yet - start the server side first (same test, -R, same -p)";
    case RDMA_CM_EVENT_UNREACHABLE:
      return peer + " is unreachable over RDMA (" + what +
             "): no answer to the connection request - check the address and that the peer's RDMA device is up";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "the connection to " + peer + " failed (" + what + ")";
    case RDMA_CM_EVENT_DISCONNECTED:
      return peer + " disconnected (" + what + ")";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "the RDMA device was removed (" + what + ")";
    default:
      return "unexpected rdma_cm event from " + peer + " (" + what + ")";
  }
}

CmConnection::CmConnection(CmConnection&& o) noexcept
    : channel_(o.channel_),
      id_(o.id_),
      listen_id_(o.listen_id_),
      listen_port_(o.listen_port_),
      peer_(std::move(o.peer_)),
      disconnected_(o.disconnected_) {
  o.channel_ = nullptr;
  o.id_ = nullptr;
  o.listen_id_ = nullptr;
}

CmConnection::~CmConnection() {
  if (listen_id_) rdma_destroy_id(listen_id_);
  if (id_) {
    rdma_disconnect(id_);
    rdma_destroy_id(id_);
  }
  if (channel_) rdma_destroy_event_channel(channel_);
}

bool CmConnection::poll_disconnected() {
  if (disconnected_ || !channel_) return disconnected_;
  rdma_cm_event* event = nullptr;
  while (rdma_get_cm_event(channel_, &event) == 0) {
    const auto type = event->event;
    rdma_ack_cm_event(event);
    if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL ||
        type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_UNREACHABLE)
      disconnected_ = true;
  }
  return disconnected_;
}

CmConnection CmConnection::connect(const std::string& host, int port, int timeout_ms, const CmHooks& hooks,
                                   const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;  // perftest's rdma_cm speaks IPv4 (6.06)
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw RunError("cannot resolve peer '" + host + "' to an IPv4 address (rdma_cm, -R): " + gai_strerror(rc));
  sockaddr_in dst{};
  std::memcpy(&dst, found->ai_addr, sizeof dst);
  freeaddrinfo(found);
  dst.sin_port = htons(static_cast<std::uint16_t>(port));
  const std::string peer = address_text(reinterpret_cast<sockaddr*>(&dst));

  const std::uint64_t deadline = deadline_after(timeout_ms);
  CmConnection c;
  c.channel_ = create_channel();
  c.peer_ = peer;
  std::string last_failure = "no attempt finished";
  for (;;) {
    bool qp_created = false;
    std::string failure;
    if (rdma_create_id(c.channel_, &c.id_, nullptr, RDMA_PS_TCP)) throw RunError("rdma_create_id failed: " + errno_text());
    if (rdma_resolve_addr(c.id_, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000)) {
      failure = "cannot resolve " + peer + " to a local RDMA device (" + errno_text() +
                "): no RDMA device (rxe/siw/mlx5...) on the interface that routes there";
    } else {
      failure = expect_event(c.channel_, deadline, RDMA_CM_EVENT_ADDR_RESOLVED, peer, "address resolution");
    }
    if (failure.empty()) {
      set_u8_option(c.id_, RDMA_OPTION_ID_TOS, hooks.tos);
      failure = rdma_resolve_route(c.id_, 2000) ? "rdma_resolve_route failed: " + errno_text()
                                                 : expect_event(c.channel_, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED, peer,
                                                                "route resolution");
    }
    if (failure.empty()) {
      try {
        const CmConnectParams params = hooks.create_qp(c.id_);
        qp_created = true;
        set_u8_option(c.id_, RDMA_OPTION_ID_ACK_TIMEOUT, hooks.ack_timeout);
        rdma_conn_param cp = conn_param_from(params);
        if (rdma_connect(c.id_, &cp)) {
          // iWARP connects its TCP stream inside rdma_connect: a refusal shows up here.
          const int e = errno;
          failure = e == ECONNREFUSED ? describe_cm_failure(RDMA_CM_EVENT_REJECTED, -e, peer)
                    : e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH
                        ? describe_cm_failure(RDMA_CM_EVENT_UNREACHABLE, -e, peer)
                        : std::string("rdma_connect failed: ") + std::strerror(e);
        } else {
          failure = expect_event(c.channel_, deadline, RDMA_CM_EVENT_ESTABLISHED, peer, "connection (ESTABLISHED)");
        }
      } catch (...) {
        if (qp_created && hooks.destroy_qp) hooks.destroy_qp();
        rdma_destroy_id(c.id_);
        c.id_ = nullptr;
        throw;
      }
    }
    if (failure.empty()) {
      settle_passive_side(c.id_);
      return c;
    }
    last_failure = failure;
    if (qp_created && hooks.destroy_qp) hooks.destroy_qp();
    rdma_destroy_id(c.id_);
    c.id_ = nullptr;
    // Refused usually means the server does not listen yet: try again until the deadline.
    if (remaining_ms(deadline) <= 250) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw RunError("rdma_cm " + what + ": cannot connect to " + peer + " within " + std::to_string(timeout_ms / 1000) +
                 " s: " + last_failure);
}

CmConnection CmConnection::listen(int port, const std::string& what, int backlog) {
  CmConnection c;
  c.channel_ = create_channel();
  if (rdma_create_id(c.channel_, &c.listen_id_, nullptr, RDMA_PS_TCP)) throw RunError("rdma_create_id failed: " + errno_text());
  c.listen_port_ = port;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = htons(static_cast<std::uint16_t>(port));
  if (rdma_bind_addr(c.listen_id_, reinterpret_cast<sockaddr*>(&any))) {
    const int e = errno;
    throw RunError("rdma_cm " + what + ": cannot listen on port " + std::to_string(port) + ": " + std::strerror(e) +
                   (e == EADDRINUSE ? " - another rdma_cm server (perftest or rdmadiag) already uses it; pick another with -p"
                                    : ""));
  }
  if (rdma_listen(c.listen_id_, std::max(backlog, 1))) throw RunError("rdma_cm " + what + ": rdma_listen failed: " + errno_text());
  return c;
}

CmConnection CmConnection::accept(int port, int timeout_ms, const CmHooks& hooks, const std::string& what) {
  CmConnection c = listen(port, what);
  if (hooks.listening) hooks.listening();
  c.accept_one(timeout_ms, hooks, what);
  return c;
}

// The next CONNECT_REQUEST on this listener within the deadline (other events are skipped).
rdma_cm_event* CmConnection::wait_request(std::uint64_t deadline, int timeout_ms, const std::string& what) {
  for (;;) {
    rdma_cm_event* event = next_event(channel_, deadline);
    if (!event)
      throw RunError("rdma_cm " + what + ": no client connected to port " + std::to_string(listen_port_) + " within " +
                     std::to_string(timeout_ms / 1000) +
                     " s (raise --timeout, or start the client with -R and this host's address on its RDMA interface)");
    if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) return event;
    rdma_ack_cm_event(event);  // e.g. a stale event of an earlier attempt: keep waiting
  }
}

void CmConnection::accept_one(int timeout_ms, const CmHooks& hooks, const std::string& what) {
  const std::uint64_t deadline = deadline_after(timeout_ms);
  rdma_cm_event* request = wait_request(deadline, timeout_ms, what);
  const rdma_conn_param offered = request->param.conn;
  id_ = request->id;
  rdma_ack_cm_event(request);
  complete_accept(offered, deadline, hooks, what);
  // One connection per listener, as perftest: the port is free again for the next one.
  rdma_destroy_id(listen_id_);
  listen_id_ = nullptr;
}

CmConnection CmConnection::accept_next(int timeout_ms, const CmHooks& hooks, const std::string& what) {
  const std::uint64_t deadline = deadline_after(timeout_ms);
  rdma_cm_event* request = wait_request(deadline, timeout_ms, what);
  const rdma_conn_param offered = request->param.conn;
  rdma_cm_id* id = request->id;
  rdma_ack_cm_event(request);
  CmConnection c;
  c.channel_ = create_channel();
  c.listen_port_ = listen_port_;
  // Its own channel: the next clients' requests keep arriving on the listener's meanwhile.
  if (rdma_migrate_id(id, c.channel_)) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    throw RunError("rdma_cm " + what + ": rdma_migrate_id failed: " + errno_text());
  }
  c.id_ = id;
  c.complete_accept(offered, deadline, hooks, what);
  return c;
}

void CmConnection::complete_accept(const rdma_conn_param& offered, std::uint64_t deadline, const CmHooks& hooks,
                                   const std::string& what) {
  peer_ = address_text(rdma_get_peer_addr(id_));
  CmConnectParams params;
  try {
    params = hooks.create_qp(id_);
  } catch (...) {
    rdma_reject(id_, nullptr, 0);
    rdma_destroy_id(id_);
    id_ = nullptr;
    throw;
  }
  // Never promise more read/atomic depth than the client offers (as upstream perftest).
  params.responder_resources = std::min<int>(params.responder_resources, offered.initiator_depth);
  params.initiator_depth = std::min<int>(params.initiator_depth, offered.responder_resources);
  set_u8_option(id_, RDMA_OPTION_ID_ACK_TIMEOUT, hooks.ack_timeout);
  rdma_conn_param cp = conn_param_from(params);
  const int accepted = rdma_accept(id_, &cp);
  const int accept_errno = errno;
  std::string failure = accepted ? std::string("rdma_accept failed: ") + std::strerror(accept_errno)
                                 : expect_event(channel_, deadline, RDMA_CM_EVENT_ESTABLISHED, peer_,
                                                "connection (ESTABLISHED)");
  if (!failure.empty()) {
    if (hooks.destroy_qp) hooks.destroy_qp();
    rdma_destroy_id(id_);
    id_ = nullptr;
    throw RunError("rdma_cm " + what + ": accepting " + peer_ + " failed: " + failure);
  }
  if (id_->qp && id_->qp->qp_type == IBV_QPT_RC) {
    // perftest's receiver-not-ready timer; rdma_cm leaves the provider's default otherwise.
    ibv_qp_attr attr{};
    attr.min_rnr_timer = 12;
    (void)ibv_modify_qp(id_->qp, &attr, IBV_QP_MIN_RNR_TIMER);
  }
}

CmOobChannel::CmOobChannel(const std::string& host, int port, int timeout_ms, std::function<void()> listening)
    : is_client_(!host.empty()), timeout_ms_(timeout_ms), buffer_((1 + kReceiveSlots) * kSlotSize) {
  CmHooks hooks;
  hooks.create_qp = [this](rdma_cm_id* id) { return create_resources(id); };
  hooks.destroy_qp = [this] { release_resources(); };
  hooks.listening = std::move(listening);
  if (is_client_)
    connection_.emplace(CmConnection::connect(host, port, timeout_ms, hooks, "out-of-band exchange"));
  else
    connection_.emplace(CmConnection::accept(port, timeout_ms, hooks, "out-of-band exchange"));
  peer_ = connection_->peer();
}

CmOobChannel::~CmOobChannel() {
  release_resources();
  connection_.reset();
}

CmConnectParams CmOobChannel::create_resources(rdma_cm_id* id) {
  try {
    qp_id_ = id;
    pd_ = ibv_alloc_pd(id->verbs);
    if (!pd_) throw RunError("ibv_alloc_pd failed for the rdma_cm exchange QP: " + errno_text());
    mr_ = ibv_reg_mr(pd_, buffer_.data(), buffer_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!mr_) throw RunError("ibv_reg_mr failed for the rdma_cm exchange QP: " + errno_text());
    comp_channel_ = ibv_create_comp_channel(id->verbs);
    if (!comp_channel_) throw RunError("ibv_create_comp_channel failed: " + errno_text());
    set_nonblocking(comp_channel_->fd);
    send_cq_ = ibv_create_cq(id->verbs, 4, nullptr, comp_channel_, 0);
    recv_cq_ = ibv_create_cq(id->verbs, static_cast<int>(kReceiveSlots) + 1, nullptr, comp_channel_, 0);
    if (!send_cq_ || !recv_cq_) throw RunError("ibv_create_cq failed for the rdma_cm exchange QP: " + errno_text());
    ibv_qp_init_attr init{};
    init.send_cq = send_cq_;
    init.recv_cq = recv_cq_;
    init.cap.max_send_wr = 2;
    init.cap.max_recv_wr = static_cast<std::uint32_t>(kReceiveSlots);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.qp_type = IBV_QPT_RC;
    if (rdma_create_qp(id, pd_, &init)) throw RunError("rdma_create_qp failed for the exchange QP: " + errno_text());
    // Receives go up before connecting: the peer may send as soon as it is connected.
    for (std::size_t slot = 1; slot <= kReceiveSlots; ++slot) post_receive(slot);
  } catch (...) {
    release_resources();
    throw;
  }
  return {};
}

void CmOobChannel::release_resources() {
  if (qp_id_ && qp_id_->qp) rdma_destroy_qp(qp_id_);
  qp_id_ = nullptr;
  if (send_cq_) ibv_destroy_cq(send_cq_);
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (comp_channel_) ibv_destroy_comp_channel(comp_channel_);
  if (mr_) ibv_dereg_mr(mr_);
  if (pd_) ibv_dealloc_pd(pd_);
  send_cq_ = recv_cq_ = nullptr;
  comp_channel_ = nullptr;
  mr_ = nullptr;
  pd_ = nullptr;
}

void CmOobChannel::post_receive(std::size_t slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data() + slot * kSlotSize), static_cast<std::uint32_t>(kSlotSize),
              mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(qp_id_->qp, &wr, &bad); rc)
    throw RunError(std::string("ibv_post_recv failed on the rdma_cm exchange QP: ") + std::strerror(rc));
}

std::optional<ibv_wc> CmOobChannel::wait_completion(ibv_cq* cq, std::uint64_t deadline_ns, const std::string& step) {
  for (;;) {
    ibv_wc wc{};
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n == 0) {
      if (ibv_req_notify_cq(cq, 0)) throw RunError("ibv_req_notify_cq failed on the rdma_cm exchange QP");
      n = ibv_poll_cq(cq, 1, &wc);  // arrived between the poll and the arming
    }
    if (n < 0) throw RunError("ibv_poll_cq failed on the rdma_cm exchange QP");
    if (n == 1) {
      if (wc.status == IBV_WC_SUCCESS) return wc;
      const std::string what = "out-of-band " + step + ": " + completion_status_name(wc.status) + " on the " +
                               (cq == send_cq_ ? "SEND" : "receive") + " of the rdma_cm exchange QP - " +
                               (wc.status == IBV_WC_WR_FLUSH_ERR
                                    ? "the connection to " + peer_ + " is closed (did the peer exit? check its output)"
                                    : completion_status_hint(wc.status));
      if (cq == send_cq_ && wc.status == IBV_WC_LOC_QP_OP_ERR) throw SendNotConfirmed(what);
      throw RunError(what);
    }
    if (connection_ && connection_->poll_disconnected())
      throw RunError("out-of-band " + step + ": " + peer_ +
                     " closed the rdma_cm connection - the peer gave up; its own output says why (often a version or "
                     "option mismatch)");
    const int wait = remaining_ms(deadline_ns);
    if (wait <= 0) return std::nullopt;
    pollfd fds[2] = {{comp_channel_->fd, POLLIN, 0}, {connection_ ? connection_->channel()->fd : -1, POLLIN, 0}};
    poll(fds, 2, std::min(wait, 1000));
    if (fds[0].revents & POLLIN) {
      ibv_cq* event_cq = nullptr;
      void* context = nullptr;
      if (ibv_get_cq_event(comp_channel_, &event_cq, &context) == 0) ibv_ack_cq_events(event_cq, 1);
    }
  }
}

void CmOobChannel::send(std::span<const char> bytes, const std::string& step) {
  if (bytes.size() > kSlotSize) throw RunError("out-of-band " + step + ": message too large (internal error)");
  std::memcpy(buffer_.data(), bytes.data(), bytes.size());
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data()), static_cast<std::uint32_t>(bytes.size()), mr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(qp_id_->qp, &wr, &bad); rc)
    throw RunError("out-of-band " + step + ": ibv_post_send failed on the rdma_cm exchange QP: " + std::strerror(rc));
  if (!wait_completion(send_cq_, deadline_after(timeout_ms_), step))
    throw RunError("out-of-band " + step + ": the SEND to " + peer_ + " did not complete within " +
                   std::to_string(timeout_ms_ / 1000) + " s - the peer posts no receive (not a perftest -R peer?)");
}

std::vector<char> CmOobChannel::receive_message(const std::string& step, int timeout_ms) {
  const auto wc = wait_completion(recv_cq_, deadline_after(timeout_ms), step);
  if (!wc)
    throw RunError("out-of-band " + step + ": no answer from " + peer_ + " within " + std::to_string(timeout_ms / 1000) +
                   " s; nothing received - the peer is probably running a different test, a different option set (-a, "
                   "-s, -n, -c) or an incompatible perftest version; compare both command lines");
  const std::size_t slot = static_cast<std::size_t>(wc->wr_id);
  const char* data = buffer_.data() + slot * kSlotSize;
  std::vector<char> message(data, data + std::min<std::size_t>(wc->byte_len, kSlotSize));
  post_receive(slot);
  return message;
}

std::vector<char> CmOobChannel::receive(std::size_t size, const std::string& step, int timeout_ms) {
  auto message = receive_message(step, timeout_ms);
  if (message.size() != size)
    throw RunError("out-of-band " + step + ": expected a " + std::to_string(size) + "-byte message, " + peer_ + " sent " +
                   std::to_string(message.size()) + " bytes " + oob::describe_bytes(message) +
                   " - the peer runs a different test, option set or perftest version; compare both command lines");
  return message;
}

std::vector<char> CmOobChannel::drain(int wait_ms) {
  std::vector<char> out;
  try {
    while (auto wc = wait_completion(recv_cq_, deadline_after(wait_ms), "drain")) {
      const std::size_t slot = static_cast<std::size_t>(wc->wr_id);
      const char* data = buffer_.data() + slot * kSlotSize;
      out.insert(out.end(), data, data + std::min<std::size_t>(wc->byte_len, kSlotSize));
      post_receive(slot);
      wait_ms = 10;
    }
  } catch (const RunError&) {
    // A closed connection ends the drain; what arrived before is returned.
  }
  return out;
}

void CmOobChannel::let_peer_close_first(int wait_ms) {
  const std::uint64_t deadline = deadline_after(wait_ms);
  while (connection_ && !connection_->poll_disconnected()) {
    const int wait = remaining_ms(deadline);
    if (wait <= 0) return;
    pollfd p{connection_->channel()->fd, POLLIN, 0};
    poll(&p, 1, wait);
  }
}

}  // namespace rdmadiag::perftest
