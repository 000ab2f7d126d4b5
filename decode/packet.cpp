#include "decode/packet.h"

#include <algorithm>
#include <array>
#include <bit>

namespace rdmadiag::decode {

bool linktype_supported(std::uint32_t lt) {
  switch (lt) {
    case linktype::kEthernet: case linktype::kRawDlt12: case linktype::kRawDlt14: case linktype::kRaw:
    case linktype::kLinuxSll: case linktype::kErf: case linktype::kIpv4: case linktype::kIpv6:
    case linktype::kInfiniband: case linktype::kLinuxSll2:
      return true;
    default:
      return false;
  }
}

std::string_view linktype_name(std::uint32_t lt) {
  switch (lt) {
    case linktype::kEthernet: return "EN10MB";
    case linktype::kRawDlt12: case linktype::kRawDlt14: case linktype::kRaw: return "RAW";
    case linktype::kLinuxSll: return "LINUX_SLL";
    case linktype::kErf: return "ERF";
    case linktype::kIpv4: return "IPV4";
    case linktype::kIpv6: return "IPV6";
    case linktype::kInfiniband: return "INFINIBAND";
    case linktype::kLinuxSll2: return "LINUX_SLL2";
    default: return "unknown";
  }
}

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::other: return "other";
    case Transport::ib: return "ib";
    case Transport::roce_v1: return "roce_v1";
    case Transport::roce_v2: return "roce_v2";
    case Transport::iwarp: return "iwarp";
  }
  return "?";
}

namespace {

class FrameDecoder {
 public:
  FrameDecoder(Bytes frame, std::uint32_t wirelen, const DecodeOptions& opts, DecodedPacket& p,
               const IcrcHint* hint = nullptr)
      : frame_(frame), r_(frame), wirelen_(std::max<std::uint32_t>(wirelen, static_cast<std::uint32_t>(frame.size()))),
        opts_(opts), p_(p), hint_(hint) {}

  void run(std::uint32_t lt, std::uint32_t given_wirelen) {
    // A record that says fewer bytes were on the wire than it holds: its header
    // is damaged (tshark: "Frame length is less than captured length"). The
    // captured bytes are decoded all the same, as tshark does.
    if (given_wirelen < frame_.size()) p_.diags.add(DiagCode::wire_length_below_captured, Severity::error, given_wirelen);
    switch (lt) {
      case linktype::kEthernet: ethernet(0); break;
      case linktype::kRawDlt12: case linktype::kRawDlt14: case linktype::kRaw: ip_any(0); break;
      case linktype::kIpv4: ipv4(0); break;
      case linktype::kIpv6: ipv6(0); break;
      case linktype::kLinuxSll: case linktype::kLinuxSll2: sll(lt); break;
      case linktype::kInfiniband: native_ib(0, wirelen_); break;
      case linktype::kErf: erf(); break;
      default: p_.diags.add(DiagCode::unsupported_linktype, Severity::error, 0); break;
    }
    // Cut by the snap length with no decoded header that gives the packet's end
    // (ARP, LLDP, another ethertype; a link type not decoded): cut all the same, as
    // tshark marks it. (With one, only bytes past that end may be cut: padding.)
    if (frame_.size() < wirelen_ && !p_.erf && !p_.ipv4 && !p_.ipv6 && !p_.lrh && !p_.grh && !p_.mac_control)
      p_.truncated = true;
  }

 private:
  Bytes at(std::size_t off) const { return r_.from(std::min(off, frame_.size())); }

  // Parses a header into its place in the decoded packet, emptied again if it
  // does not parse. A local and its copy made every header a store-forwarding
  // stall (fields stored one by one, then loaded 16 bytes at a time).
  template <class H, class Parse>
  static ParseStatus parse_into(std::optional<H>& slot, Parse parse) {
    H& h = slot.emplace();
    const ParseStatus st = parse(h);
    if (st != ParseStatus::ok) slot.reset();
    return st;
  }

  // A header that did not parse: truncated only if the capture, not the packet, ended.
  void header_failed(ParseStatus st, std::size_t off, DiagCode malformed_code) {
    if (st == ParseStatus::truncated) {
      p_.truncated = true;
      p_.diags.add(frame_.size() < wirelen_ ? DiagCode::truncated : malformed_code,
                   frame_.size() < wirelen_ ? Severity::note : Severity::error, off);
    } else {
      p_.diags.add(malformed_code, Severity::error, off);
    }
  }

  void ethertype(std::uint16_t type, std::size_t off) {
    switch (type) {
      case kEthertypeIpv4: ipv4(off); break;
      case kEthertypeIpv6: ipv6(off); break;
      case kEthertypeRoceV1: roce_v1(off); break;
      default: break;
    }
  }

  // Only after an Ethernet header: the analysis keys pauses by its source address.
  void mac_control(std::size_t off) {
    MacControl m;
    const auto st = parse_mac_control(at(off), m);
    if (st != ParseStatus::ok) return header_failed(st, off, DiagCode::bad_mac_control);
    if (m.reserved_bits) p_.diags.add(DiagCode::pfc_reserved_bits, Severity::warning, off + 2);
    p_.mac_control = m;
  }

  void ethernet(std::size_t off) {
    const auto st = parse_into(p_.eth, [&](EthernetHeader& h) { return parse_ethernet(at(off), h); });
    if (st != ParseStatus::ok) return header_failed(st, off, DiagCode::frame_too_short);
    const EthernetHeader& eth = *p_.eth;
    if (eth.ethertype == kEthertypeMacControl) return mac_control(off + eth.header_len);
    ethertype(eth.ethertype, off + eth.header_len);
  }

  void sll(std::uint32_t lt) {
    SllHeader h;
    const auto st = lt == linktype::kLinuxSll ? parse_sll(frame_, h) : parse_sll2(frame_, h);
    if (st != ParseStatus::ok) return header_failed(st, 0, DiagCode::frame_too_short);
    p_.sll = h;
    // SLL2 names the interface (`tcpdump -i any`): a packet that passes two of
    // them (a VLAN device and its parent, a bond and its port) is captured once
    // at each, and each is its own capture point.
    if (lt == linktype::kLinuxSll2) p_.capture_point = sll2_capture_point(h.ifindex);
    ethertype(h.protocol, h.header_len);
  }

  void erf() {
    ErfHeader h;
    const auto st = parse_erf(frame_, h);
    if (st != ParseStatus::ok) return header_failed(st, 0, DiagCode::erf_bad_record);
    p_.erf = h;
    const std::size_t end = erf_packet_lengths(h);
    switch (h.type) {
      case kErfTypeInfiniband: native_ib(h.header_len, end); break;
      case kErfTypeEth: ethernet(h.header_len); break;
      case kErfTypeIpv4: ipv4(h.header_len); break;
      case kErfTypeIpv6: ipv6(h.header_len); break;
      default: p_.diags.add(DiagCode::unsupported_linktype, Severity::warning, 8); break;
    }
  }

  // The record header is not part of the packet: its lengths (byte totals,
  // per-flow bytes, JSON "len") are those of what follows it, as tshark's
  // frame.len / frame.cap_len for LINKTYPE_ERF. wlen is the packet on the wire
  // (for Ethernet with its FCS); a snap length keeps less (rlen), so bytes
  // past the record are cut, not missing; past wlen they are record padding.
  // wlen 0: unknown, the record's length stands. Returns where the packet ends.
  std::size_t erf_packet_lengths(const ErfHeader& h) {
    std::size_t end = h.rlen ? std::min<std::size_t>(h.rlen, wirelen_) : wirelen_;
    if (h.wlen) {
      const std::size_t record = std::min<std::size_t>(end, h.header_len + std::size_t{h.wlen});
      if (frame_.size() > record) {
        frame_ = frame_.first(record);
        r_ = ByteReader(frame_);
      }
      wirelen_ = h.header_len + std::uint32_t{h.wlen};
      end = wirelen_;
    }
    p_.caplen = static_cast<std::uint32_t>(frame_.size() - h.header_len);
    p_.wirelen = wirelen_ - h.header_len;
    return end;
  }

  void ip_any(std::size_t off) {
    if (!r_.has(off, 1)) return header_failed(ParseStatus::truncated, off, DiagCode::bad_ip_version);
    const unsigned v = r_.u8(off) >> 4;
    if (v == 4) return ipv4(off);
    if (v == 6) return ipv6(off);
    p_.diags.add(DiagCode::bad_ip_version, Severity::error, off);
  }

  // The end of a length-delimited region: clipped to the wire length, with a diagnostic when the field lies.
  std::size_t declared_end(std::size_t start, std::size_t length, std::size_t off_for_diag) {
    std::size_t end = start + length;
    if (end > wirelen_) {
      p_.diags.add(DiagCode::ip_length_mismatch, Severity::error, off_for_diag);
      end = wirelen_;
    }
    return end;
  }

  void ipv4(std::size_t off) {
    const auto st = parse_into(p_.ipv4, [&](Ipv4Header& h) { return parse_ipv4(at(off), h); });
    if (st != ParseStatus::ok) {
      if (st == ParseStatus::malformed && damaged_roce_ipv4(off)) return;  // e.g. a header length bit
      return header_failed(st, off, DiagCode::bad_ip_header_length);
    }
    const Ipv4Header& h = *p_.ipv4;
    const std::size_t end = declared_end(off, h.total_length, off + 2);
    if (end > frame_.size()) p_.truncated = true;  // whatever the protocol inside, the capture cut it
    // A header that says "fragment", or carries neither UDP nor TCP, is checked
    // (only then: a RoCE packet's ICRC covers the rest of its header): a bit error
    // there must not pass for a fragment or another protocol.
    if (h.is_fragment() || (h.protocol != kIpProtoUdp && h.protocol != kIpProtoTcp)) {
      if (ipv4_header_checksum_ok(at(off), h.ihl_bytes)) {
        if (h.is_fragment()) return p_.diags.add(DiagCode::ip_fragment, Severity::note, off + 6);
      } else {
        if (damaged_roce_ipv4(off)) return;
        p_.diags.add(DiagCode::ipv4_checksum_bad, Severity::error, off + 10);
        if (h.is_fragment()) return;
      }
    }
    l4(h.protocol, off, off + h.ihl_bytes, end);
  }

  // A RoCEv2 packet whose IPv4 header (20 bytes at `off`) took one bit error outside
  // the addresses and the fields the ICRC masks (IBA Annex A17.3.3): one bit put back
  // makes the header checksum hold (RFC 1071), the header UDP to port 4791 and
  // unfragmented, and the ICRC hold. Decoded as that packet, with its captured
  // (bad) ICRC, so that it is sequenced where it belongs; nothing kept otherwise.
  bool damaged_roce_ipv4(std::size_t off) {
    if (!r_.has(off, 20 + 8 + kBthLength + 4)) return false;
    std::array<std::uint8_t, 20> fixed{};
    for (std::size_t i = 0; i < fixed.size(); ++i) fixed[i] = r_.u8(off + i);
    // Bytes 0-9: the checksum itself is not tried, and a damaged address is another flow's (no repair).
    for (std::size_t bit = 0; bit < 80; ++bit) {
      const auto mask = static_cast<std::uint8_t>(0x80u >> (bit % 8));
      fixed[bit / 8] ^= mask;
      Ipv4Header h;
      if (repaired_roce_fits(off, fixed, h)) {
        p_.ipv4 = h;
        p_.diags.add(DiagCode::ipv4_header_bit_error, Severity::error, off + bit / 8);
        l4(kIpProtoUdp, off, off + 20, off + h.total_length);
        return true;
      }
      fixed[bit / 8] ^= mask;
    }
    return false;
  }

  // `ip` parses (into `h`) as an unfragmented 20-byte IPv4 header with a good checksum,
  // carrying UDP to a RoCE port, and the packet's ICRC holds over it.
  bool repaired_roce_fits(std::size_t off, const std::array<std::uint8_t, 20>& ip, Ipv4Header& h) const {
    if (parse_ipv4(Bytes(ip), h) != ParseStatus::ok || h.ihl_bytes != 20 || h.protocol != kIpProtoUdp ||
        h.is_fragment() || !ipv4_header_checksum_ok(Bytes(ip), 20))
      return false;
    const std::size_t total = h.total_length;
    if (total < 20 + 8 + kBthLength + 4 || off + total > frame_.size() || !is_roce_port(r_.be16(off + 22))) return false;
    const std::size_t bth = off + 28, icrc = off + total - 4;
    const IcrcInput in{IcrcInput::Kind::roce_v2_ipv4, Bytes(ip), r_.sub(off + 20, 8), r_.sub(bth, kBthLength),
                       r_.sub(bth + kBthLength, icrc - bth - kBthLength), {}};
    return compute_icrc(in) == r_.le32(icrc);
  }

  void ipv6(std::size_t off) {
    const auto st = parse_into(p_.ipv6, [&](Ipv6Header& h) { return parse_ipv6(at(off), h); });
    if (st != ParseStatus::ok) return header_failed(st, off, DiagCode::ipv6_ext_header_limit);
    const Ipv6Header& h = *p_.ipv6;
    const std::size_t end = declared_end(off + 40, h.payload_length, off + 4);
    if (end > frame_.size()) p_.truncated = true;
    if (h.fragment) {
      p_.diags.add(DiagCode::ip_fragment, Severity::note, off + 40);
      return;
    }
    l4(h.upper_protocol, off, off + h.header_len, end);
  }

  bool is_roce_port(std::uint16_t port) const {
    if (port == kRoceV2UdpPort) return true;
    for (std::size_t i = 0; i < opts_.extra_roce_port_count; ++i)
      if (opts_.extra_roce_ports[i] == port) return true;
    return false;
  }

  void l4(std::uint8_t proto, std::size_t ip_off, std::size_t off, std::size_t ip_end) {
    if (off > ip_end) return p_.diags.add(DiagCode::ip_length_mismatch, Severity::error, ip_off);
    if (proto == kIpProtoUdp) {
      const auto st = parse_into(p_.udp, [&](UdpHeader& h) { return parse_udp(at(off), h); });
      if (st != ParseStatus::ok) return header_failed(st, off, DiagCode::bad_udp_length);
      const UdpHeader& u = *p_.udp;
      std::size_t end = off + u.length;
      if (end > ip_end) {
        p_.diags.add(DiagCode::bad_udp_length, Severity::error, off + 4);
        end = ip_end;
      }
      IcrcInput icrc{p_.ipv4 ? IcrcInput::Kind::roce_v2_ipv4 : IcrcInput::Kind::roce_v2_ipv6,
                     r_.sub(ip_off, std::min(off, frame_.size()) - ip_off), r_.sub(off, 8), {}, {}, {}};
      if (is_roce_port(u.dst_port)) {
        p_.transport = Transport::roce_v2;
        ib_transport(off + 8, end, std::move(icrc), false);
      } else if (opts_.roce_heuristic && end - off >= 8 + kBthLength + 4 && end <= frame_.size()) {
        ib_transport(off + 8, end, std::move(icrc), true);
      }
    } else if (proto == kIpProtoTcp) {
      const auto st = parse_into(p_.tcp, [&](TcpHeader& h) { return parse_tcp(at(off), h); });
      if (st != ParseStatus::ok) return header_failed(st, off, DiagCode::bad_tcp_header_length);
      const TcpHeader& t = *p_.tcp;
      const std::size_t start = off + t.header_len;
      if (start > ip_end) return p_.diags.add(DiagCode::bad_tcp_header_length, Severity::error, off + 12);
      p_.tcp_payload_len = static_cast<std::uint32_t>(ip_end - start);
      p_.tcp_segment = r_.sub(off, std::min(ip_end, frame_.size()) - off);
      p_.tcp_payload = r_.sub(start, std::min(ip_end, frame_.size()) - start);
    }
  }

  void roce_v1(std::size_t off) {
    Grh g;
    const auto st = parse_grh(at(off), g);
    if (st != ParseStatus::ok) return header_failed(st, off, DiagCode::frame_too_short);
    p_.grh = g;
    p_.transport = Transport::roce_v1;
    if (g.next_header != kGrhNextHeaderIba) return p_.diags.add(DiagCode::bad_grh_next_header, Severity::warning, off + 6);
    const std::size_t end = declared_end(off + 40, g.payload_length, off + 4);
    ib_transport(off + 40, end, IcrcInput{IcrcInput::Kind::roce_v1, r_.sub(off, 40), {}, {}, {}, {}}, false);
  }

  // Native InfiniBand from the LRH at `off`; `limit` is where the record ends on the wire.
  void native_ib(std::size_t off, std::size_t limit) {
    Lrh l;
    const auto st = parse_lrh(at(off), l);
    if (st != ParseStatus::ok) return header_failed(st, off, DiagCode::bad_lrh);
    p_.lrh = l;
    p_.transport = Transport::ib;
    std::size_t end = off + l.packet_bytes();  // through the ICRC (or the raw payload)
    if (end > limit) {
      p_.diags.add(DiagCode::bad_lrh, Severity::error, off + 4);
      end = limit;
    }
    // VCRC: 2 bytes after the packet, when the capture kept them.
    if (end + 2 <= limit) {
      if (end + 2 <= frame_.size()) {
        p_.vcrc_wire = r_.le16(end);
        p_.vcrc_computed = vcrc16(r_.sub(off, end - off));
        p_.vcrc = p_.vcrc_wire == p_.vcrc_computed ? CrcStatus::ok : CrcStatus::bad;
        if (p_.vcrc == CrcStatus::bad) p_.diags.add(DiagCode::vcrc_bad, Severity::error, end);
      } else {
        p_.vcrc = CrcStatus::unverifiable;
        p_.truncated = true;
      }
    }
    switch (l.lnh) {
      case Lnh::iba_local:
        ib_transport(off + 8, end, IcrcInput{IcrcInput::Kind::ib_local, r_.sub(off, 8), {}, {}, {}, {}}, false);
        break;
      case Lnh::iba_global: {
        Grh g;
        const auto gst = parse_grh(at(off + 8), g);
        if (gst != ParseStatus::ok) return header_failed(gst, off + 8, DiagCode::bad_lrh);
        p_.grh = g;
        if (g.next_header != kGrhNextHeaderIba) return p_.diags.add(DiagCode::bad_grh_next_header, Severity::warning, off + 14);
        ib_transport(off + 48, end, IcrcInput{IcrcInput::Kind::ib_global, r_.sub(off + 8, 40), {}, {}, {}, {}}, false);
        break;
      }
      default:
        break;  // raw packets carry no BTH and no ICRC
    }
  }

  // A bit error in the UDP destination port takes a RoCEv2 packet off 4791: the receiver
  // does not see RoCE (Linux answers ICMP port unreachable) and the requester resends it.
  // The ICRC covers the ports (IBA Annex A17.3.3 masks only the UDP checksum), so the
  // ICRC holding with 4791 put back identifies such a packet; any other port is not
  // tried (one flipped bit only), keeping a chance match out of reach.
  static bool icrc_holds_on_roce_port(IcrcInput in, std::uint32_t wire) {
    if (in.udp.size() != 8) return false;
    const std::uint16_t port = static_cast<std::uint16_t>(in.udp[2] << 8 | in.udp[3]);
    if (std::popcount(static_cast<unsigned>(port ^ kRoceV2UdpPort)) != 1) return false;
    std::array<std::uint8_t, 8> udp{};
    std::copy(in.udp.begin(), in.udp.end(), udp.begin());
    udp[2] = static_cast<std::uint8_t>(kRoceV2UdpPort >> 8);
    udp[3] = static_cast<std::uint8_t>(kRoceV2UdpPort & 0xff);
    in.udp = udp;
    return compute_icrc(in) == wire;
  }

  // BTH at `off`; the packet (through the 4-byte ICRC) ends at `end` on the wire.
  // With `probe`, nothing is kept unless the ICRC confirms RoCEv2 (the UDP-port heuristic).
  // `icrc_in` by reference: a copy of it (spans written 8 bytes at a time, read
  // back 16 at a time) was a store-forwarding stall on every packet.
  void ib_transport(std::size_t off, std::size_t end, IcrcInput&& icrc_in, bool probe) {
    if (end < off + kBthLength + 4) {
      if (!probe) {
        const bool cut = end > frame_.size() || frame_.size() < wirelen_;
        p_.diags.add(cut && frame_.size() < end ? DiagCode::truncated : DiagCode::payload_length_mismatch,
                     Severity::error, off);
      }
      return;
    }
    const std::size_t icrc_off = end - 4;
    const std::size_t have = std::min(icrc_off, frame_.size());
    if (have < off) {
      p_.truncated = true;
      p_.diags.add(DiagCode::truncated, Severity::note, frame_.size());
      return;
    }
    // Parsed in place (a local and its copy were ~10 % of this function's instructions);
    // every return that does not keep it puts back the empty one decode_frame started with.
    IbTransport& t = p_.ib;
    const auto st = parse_ib_transport(r_.sub(off, have - off), t);
    if (st == ParseStatus::truncated && t.header_len < kBthLength) {  // not even the BTH
      t = IbTransport{};
      if (probe) return;
      p_.truncated = true;
      p_.diags.add(DiagCode::truncated, Severity::note, frame_.size());
      return;
    }
    const OpcodeInfo& info = opcode_info(t.bth.opcode);
    const bool whole = end <= frame_.size();
    std::uint32_t computed = 0, wire = 0;
    if (whole) {
      icrc_in.bth = r_.sub(off, kBthLength);
      icrc_in.rest = r_.sub(off + kBthLength, icrc_off - off - kBthLength);
      // Verified ahead over these very spans (icrc_hint.h): the payload need not be read again.
      if (hint_ && hint_->covers(icrc_in, frame_)) {
        computed = wire = hint_->wire;
      } else {
        computed = compute_icrc(icrc_in);
        wire = r_.le32(icrc_off);
      }
    }
    if (probe && !probe_accepts(off, whole && info.valid && t.bth.tver == 0, computed, wire, icrc_in)) {
      t = IbTransport{};
      return;
    }
    p_.has_bth = true;
    p_.bth_offset = static_cast<std::uint32_t>(off);
    if (!info.valid) p_.diags.add(DiagCode::unknown_opcode, Severity::warning, off);
    if (t.bth.tver != 0) p_.diags.add(DiagCode::bad_tver, Severity::warning, off + 1);
    if (whole) {
      icrc_checked(icrc_off, computed, wire, icrc_in);
    } else {
      p_.icrc = CrcStatus::unverifiable;
      p_.truncated = true;
    }
    if (st == ParseStatus::truncated) {
      // The extended headers the opcode needs are not all here: cut capture, or a packet too short.
      if (whole) p_.diags.add(DiagCode::payload_length_mismatch, Severity::error, off + t.header_len);
      else p_.diags.add(DiagCode::truncated, Severity::note, frame_.size());
      return;
    }
    ib_payload(off, icrc_off, info);
  }

  // A BTH found on a UDP port other than 4791 (the heuristic): a RoCEv2 packet
  // if its ICRC holds, or would with the port 4791 (a bit error in the port).
  [[gnu::always_inline]] bool probe_accepts(std::size_t off, bool plausible, std::uint32_t computed, std::uint32_t wire,
                                            const IcrcInput& icrc_in) {
    if (!plausible) return false;
    if (computed == wire)
      p_.diags.add(DiagCode::roce_heuristic, Severity::note, off);
    else if (icrc_holds_on_roce_port(icrc_in, wire))
      p_.diags.add(DiagCode::udp_port_bit_error, Severity::error, icrc_in.udp.data() - frame_.data() + 2);
    else
      return false;
    p_.transport = Transport::roce_v2;
    return true;
  }

  [[gnu::always_inline]] void icrc_checked(std::size_t icrc_off, std::uint32_t computed, std::uint32_t wire,
                                           const IcrcInput& icrc_in) {
    p_.icrc_wire = wire;
    p_.icrc_computed = computed;
    p_.icrc_offset = static_cast<std::uint32_t>(icrc_off);
    p_.icrc_input = icrc_in;
    p_.icrc = computed == wire ? CrcStatus::ok : CrcStatus::bad;
    if (p_.icrc == CrcStatus::bad) p_.diags.add(DiagCode::icrc_bad, Severity::error, icrc_off);
  }

  // The payload between the transport headers (p_.ib) and the pad and ICRC.
  [[gnu::always_inline]] void ib_payload(std::size_t off, std::size_t icrc_off, const OpcodeInfo& info) {
    const IbTransport& t = p_.ib;
    const std::size_t pay_off = off + t.header_len;
    p_.payload_offset = static_cast<std::uint32_t>(pay_off);
    std::size_t pay_len = icrc_off - pay_off;
    if (t.bth.pad_count > pay_len) {
      p_.diags.add(DiagCode::pad_exceeds_payload, Severity::error, off + 1);
      pay_len = 0;
    } else {
      pay_len -= t.bth.pad_count;
    }
    p_.payload_len = static_cast<std::uint32_t>(pay_len);
    p_.payload = r_.sub(pay_off, std::min(pay_off + pay_len, frame_.size()) - std::min(pay_off, frame_.size()));
    if (pay_len && info.valid && !info.carries_payload())
      p_.diags.add(DiagCode::payload_length_mismatch, Severity::warning, pay_off);
    // MADs: UD SEND to QP0 (SMI) or QP1 (GSI).
    if (info.service == TransportService::ud && t.bth.dest_qp <= 1 && pay_len >= kMadHeaderLength) mad_payload(pay_off);
  }

  void mad_payload(std::size_t pay_off) {
    MadHeader mad;
    const auto mst = parse_mad_header(p_.payload, mad);
    if (mst == ParseStatus::ok) {
      p_.mad = mad;
      if (mad.mgmt_class == kMgmtClassCm) {
        CmMessage cm;
        if (parse_cm(p_.payload, mad, cm) == ParseStatus::ok) p_.cm = cm;
      }
    } else if (mst == ParseStatus::malformed) {
      p_.diags.add(DiagCode::bad_mad, Severity::warning, pay_off);
    }
  }

  Bytes frame_;
  ByteReader r_;
  std::uint32_t wirelen_;
  const DecodeOptions& opts_;
  DecodedPacket& p_;
  const IcrcHint* hint_;
};

}  // namespace

void decode_frame(std::uint32_t lt, Bytes frame, std::uint32_t wirelen, const DecodeOptions& opts, DecodedPacket& out,
                  const IcrcHint& hint) {
  out = DecodedPacket{};
  out.linktype = lt;
  out.caplen = static_cast<std::uint32_t>(frame.size());
  out.wirelen = wirelen;
  FrameDecoder(frame, wirelen, opts, out, hint ? &hint : nullptr).run(lt, wirelen);
}

}  // namespace rdmadiag::decode

namespace rdmadiag::decode {

namespace {
std::uint32_t sum16(Bytes b) {
  const ByteReader r(b);
  std::uint32_t s = 0;
  for (std::size_t i = 0; i + 1 < b.size(); i += 2) s += r.be16(i);
  if (b.size() & 1) s += static_cast<std::uint32_t>(b.back()) << 8;
  return s;
}
}  // namespace

bool tcp_checksum_holds_with_ports(const DecodedPacket& p, std::uint16_t src_port, std::uint16_t dst_port) {
  if (!p.tcp || p.tcp_segment.size() != p.tcp->header_len + std::size_t{p.tcp_payload_len}) return false;
  const Bytes seg = p.tcp_segment;
  std::uint32_t s = 6 + static_cast<std::uint32_t>(seg.size());  // pseudo-header: protocol, TCP length
  if (p.ipv4) s += sum16(p.ipv4->src) + sum16(p.ipv4->dst);
  else if (p.ipv6) s += sum16(p.ipv6->src) + sum16(p.ipv6->dst);
  else return false;
  s += src_port + dst_port + sum16(seg.subspan(4));  // the ports given, then the segment after them
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return s == 0xFFFF;
}

}  // namespace rdmadiag::decode
