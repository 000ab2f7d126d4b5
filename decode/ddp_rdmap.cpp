#include "decode/ddp_rdmap.h"

namespace rdmadiag::decode {

std::string_view rdmap_opcode_name(std::uint8_t op) {
  switch (op) {
    case 0: return "RDMA Write";
    case 1: return "RDMA Read Request";
    case 2: return "RDMA Read Response";
    case 3: return "Send";
    case 4: return "Send with Invalidate";
    case 5: return "Send with Solicited Event";
    case 6: return "Send with Solicited Event and Invalidate";
    case 7: return "Terminate";
    case 8: return "Immediate Data";
    case 9: return "Immediate Data with Solicited Event";
    case 10: return "Atomic Request";
    case 11: return "Atomic Response";
    default: return "reserved";
  }
}

bool rdmap_opcode_known(std::uint8_t op) { return op <= 11; }

std::string_view ddp_queue_name(std::uint32_t qn) {
  switch (qn) {
    case kQueueSend: return "Send";
    case kQueueReadRequest: return "RDMA Read Request";
    case kQueueTerminate: return "Terminate";
    case kQueueAtomic: return "Atomic";
    default: return "unknown";
  }
}

int rdmap_expected_queue(std::uint8_t op) {
  switch (op) {
    case 0: case 2: return -1;
    case 1: return static_cast<int>(kQueueReadRequest);
    case 7: return static_cast<int>(kQueueTerminate);
    case 10: case 11: return static_cast<int>(kQueueAtomic);
    default: return static_cast<int>(kQueueSend);  // sends, immediate data
  }
}

ParseStatus parse_ddp_header(Bytes b, DdpHeader& h) {
  const ByteReader r(b);
  if (!r.has(0, 2)) return ParseStatus::truncated;
  const std::uint8_t c = r.u8(0);
  h.tagged = c & 0x80;
  h.last = c & 0x40;
  h.reserved = (c >> 2) & 0x0F;
  h.version = c & 0x03;
  h.rdmap_control = r.u8(1);
  if (h.tagged) {
    if (!r.has(0, kDdpTaggedHeaderLen)) return ParseStatus::truncated;
    h.stag = r.be32(2);
    h.to = r.be64(6);
  } else {
    if (!r.has(0, kDdpUntaggedHeaderLen)) return ParseStatus::truncated;
    h.ulp = r.be32(2);
    h.qn = r.be32(6);
    h.msn = r.be32(10);
    h.mo = r.be32(14);
  }
  return ParseStatus::ok;
}

namespace {
void read_request_at(const ByteReader& r, std::size_t o, RdmaReadRequest& q) {
  q.sink_stag = r.be32(o);
  q.sink_to = r.be64(o + 4);
  q.read_size = r.be32(o + 12);
  q.src_stag = r.be32(o + 16);
  q.src_to = r.be64(o + 20);
}
}  // namespace

ParseStatus decode_ddp_segment(Bytes u, DdpSegment& s) {
  s = DdpSegment{};
  if (const auto st = parse_ddp_header(u, s.ddp); st != ParseStatus::ok) return st;
  const ByteReader r(u);
  std::size_t off = s.ddp.length();
  const std::uint8_t op = s.ddp.opcode();
  if (!s.ddp.tagged) {
    switch (op) {
      case 1:  // Read Request
        if (!r.has(off, kReadRequestLen)) return ParseStatus::truncated;
        read_request_at(r, off, s.read);
        s.has_read_request = true;
        off += kReadRequestLen;
        break;
      case 7: {  // Terminate
        if (!r.has(off, 4)) return ParseStatus::truncated;
        RdmapTerminate& t = s.term;
        t.layer = r.u8(off) >> 4;
        t.error_type = r.u8(off) & 0x0F;
        t.error_code = r.u8(off + 1);
        const std::uint8_t hdrct = r.u8(off + 2);
        t.hdr_m = hdrct & 0x80;
        t.hdr_d = hdrct & 0x40;
        t.hdr_r = hdrct & 0x20;
        off += 4;
        s.has_terminate = true;
        // With D, the terminated segment's DDP Segment Length and DDP header follow
        // (as Wireshark reads it); the header's T bit says how long it is.
        if (t.hdr_d) {
          if (!r.has(off, 2 + 1)) return ParseStatus::truncated;
          t.ddp_segment_length = r.be16(off);
          off += 2;
          if (parse_ddp_header(r.from(off), t.ddp) != ParseStatus::ok) return ParseStatus::truncated;
          t.has_ddp = true;
          off += t.ddp.length();
        }
        if (t.hdr_r) {
          if (!r.has(off, kReadRequestLen)) return ParseStatus::truncated;
          read_request_at(r, off, t.rdma);
          t.has_rdma = true;
          off += kReadRequestLen;
        }
        break;
      }
      case 8: case 9:  // Immediate Data: 8 bytes
        if (!r.has(off, 8)) return ParseStatus::truncated;
        s.immediate = r.be64(off);
        s.has_immediate = true;
        off += 8;
        break;
      case 10: {  // Atomic Request
        if (!r.has(off, kAtomicRequestLen)) return ParseStatus::truncated;
        AtomicRequest& a = s.atomic;
        a.aopcode = r.u8(off + 3) & 0x0F;
        a.request_id = r.be32(off + 4);
        a.remote_stag = r.be32(off + 8);
        a.remote_to = r.be64(off + 12);
        a.add_swap = r.be64(off + 20);
        a.add_swap_mask = r.be64(off + 28);
        a.compare = r.be64(off + 36);
        a.compare_mask = r.be64(off + 44);
        s.has_atomic_request = true;
        off += kAtomicRequestLen;
        break;
      }
      case 11:  // Atomic Response
        if (!r.has(off, kAtomicResponseLen)) return ParseStatus::truncated;
        s.atomic_resp.request_id = r.be32(off);
        s.atomic_resp.original_value = r.be64(off + 4);
        s.has_atomic_response = true;
        off += kAtomicResponseLen;
        break;
      default: break;
    }
  }
  s.header_len = static_cast<std::uint32_t>(off);
  s.payload_len = static_cast<std::uint32_t>(u.size() - off);
  return ParseStatus::ok;
}

std::string_view terminate_layer_name(std::uint8_t layer) {
  switch (layer) {
    case 0: return "RDMAP";
    case 1: return "DDP";
    case 2: return "LLP";
    default: return "reserved";
  }
}

// RFC 5040 section 7.2 (RDMAP, DDP) and RFC 5044 section 8 (LLP / MPA).
std::string_view terminate_error_name(std::uint8_t layer, std::uint8_t etype, std::uint8_t code) {
  if (layer == 0) {
    if (etype == 0) {  // local catastrophic
      return code == 0 ? "unspecified local catastrophic" : "?";
    }
    if (etype == 1) {  // remote protection error
      switch (code) {
        case 0: return "invalid STag";
        case 1: return "base or bounds violation";
        case 2: return "access rights violation";
        case 3: return "STag not associated with RDMAP stream";
        case 4: return "TO wrap";
        case 9: return "STag cannot be invalidated";
        case 0xFF: return "unspecified error";
        default: return "?";
      }
    }
    if (etype == 2) {  // remote operation error
      switch (code) {
        case 5: return "invalid RDMAP version";
        case 6: return "unexpected opcode";
        case 7: return "catastrophic error, localized to RDMAP stream";
        case 8: return "catastrophic error, global";
        case 9: return "STag cannot be invalidated";
        case 0xFF: return "unspecified error";
        default: return "?";
      }
    }
    return "?";
  }
  if (layer == 1) {
    if (etype == 0) return code == 0 ? "local catastrophic" : "?";
    if (etype == 1) {  // tagged buffer error
      switch (code) {
        case 0: return "invalid STag";
        case 1: return "base or bounds violation";
        case 2: return "STag not associated with DDP stream";
        case 3: return "TO wrap";
        case 4: return "invalid DDP version";
        default: return "?";
      }
    }
    if (etype == 2) {  // untagged buffer error
      switch (code) {
        case 1: return "invalid QN";
        case 2: return "invalid MSN - no buffer available";
        case 3: return "invalid MSN - MSN range is not valid";
        case 4: return "invalid MO";
        case 5: return "DDP message too long for available buffer";
        case 6: return "invalid DDP version";
        default: return "?";
      }
    }
    return "?";
  }
  if (layer == 2) {  // MPA: error type 0, codes in RFC 5044 section 8 (RFC 6581 adds 5)
    switch (code) {
      case 1: return "TCP connection closed, terminated or lost";
      case 2: return "MPA CRC error";
      case 3: return "MPA marker and ULPDU length field mismatch";
      case 4: return "invalid MPA request or reply";
      case 5: return "insufficient IRD resources";  // RFC 6581 section 9
      case 6: return "no matching RTR model";
      default: return "?";
    }
  }
  return "?";
}

}  // namespace rdmadiag::decode
