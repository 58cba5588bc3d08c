// Joining the switch's lanes (docs/PROTOCOL.md, "Lanes" and "Joining"): a member joins lane 0
// (the configured endpoint), learns from its join_ack how many lanes the job uses, then joins
// lanes 1..L-1 at the following endpoints. Every lane has its own join nonce and epoch; the
// stream runs once every lane answered, all with the same job geometry.
#include <algorithm>
#include <cstdio>

#include "src/switch/worker.hpp"
#include "src/switch/worker_internal.hpp"

namespace inc::sw {

using namespace detail;
using proto::Header;
using proto::PacketType;
using proto::Reason;

Endpoint lane_endpoint(Endpoint base, std::uint16_t l) {
  if (base.is_ipv4()) return Endpoint::ipv4(base.ipv4_addr(), std::uint16_t(base.port() + l));
  return Endpoint{base.id + l};
}

int WorkerProtocol::lane_of(Endpoint from) const {
  if (lanes_.empty()) return from == cfg_.switch_ep ? 0 : -1;
  for (std::size_t l = 0; l < lanes_.size(); ++l)
    if (lanes_[l].ep == from) return int(l);
  return -1;
}

void WorkerProtocol::begin_join(Nanos now) {
  joining_ = true;
  join_started_ = now;
  join_deadline_ = now + cfg_.join_timeout;
  join_refusal_ = Reason::ok;
  lanes_.assign(1, Lane{});
  lanes_[0].ep = cfg_.switch_ep;
  start_lane_join(0, now);
}

void WorkerProtocol::start_lane_join(std::size_t l, Nanos now) {
  Lane& lane = lanes_[l];
  lane.joined = false;
  lane.rto = cfg_.rto_initial;
  // A fresh nonce per join and lane: a join_ack that answers an earlier join (before a restart
  // or a reset) carries another nonce and is ignored.
  nonce_seed_ = std::uint32_t(std::uint64_t(now) * 0x9E3779B1u) ^ (cfg_.member * 0x85EBCA6Bu) ^
                (nonce_seed_ + 0x632BE5ABu) ^ (std::uint32_t(l) * 0x27D4EB2Fu);
  lane.nonce = nonce_seed_;
  send_join(l, now, false);
}

void WorkerProtocol::send_join(std::size_t l, Nanos now, bool retransmit) {
  Lane& lane = lanes_[l];
  Header h;
  h.type = PacketType::join;
  h.flags = std::uint8_t((retransmit ? proto::flag::retransmit : 0) |
                         (rejoin_ ? proto::flag::resize : 0));  // drained to a live resize's boundary
  h.member = cfg_.member;
  h.job = cfg_.job;
  h.aux = cfg_.session;
  h.chunk = lane.nonce;
  proto::encode_header(h, out_.reserve(proto::kHeaderBytes + auth_room()));
  commit(lane.ep, proto::kHeaderBytes);
  count_tx(rep_, proto::kHeaderBytes, retransmit);
  lane.sent = now;
  lane.retransmitted = retransmit;
  if (retransmit) lane.rto = std::min(lane.rto * 2, cfg_.rto_max);
  lane.resend = now + lane.rto;
}

void WorkerProtocol::handle_join_ack(const proto::PacketView& v, std::size_t l, Nanos now) {
  const Header& h = v.h;
  Lane& lane = lanes_[l];
  if (!joining_ || failed_ || lane.joined || h.chunk != lane.nonce) return;  // a late duplicate
  const auto info = proto::read_join_info(v.payload);
  if (info.slots == 0 || info.slots > 0xFFFF || info.slot_elems == 0 ||
      info.slot_elems > proto::kMaxPayloadBytes / 4 || h.epoch == 0 || info.lanes == 0 ||
      info.lanes > proto::kMaxLanes || (info.lane != l && !cfg_.single_lane) ||
      info.lane >= info.lanes) {
    fail(WorkerErrorKind::protocol,
         "switch " + lane.ep.str() + " sent an invalid join_ack (lane " + std::to_string(info.lane) +
             " of " + std::to_string(info.lanes) + ", expected lane " + std::to_string(l) + ")",
         label_for_errors());
    return;
  }
  if (l == 0) {
    info_ = info;
    if (!cfg_.single_lane && cfg_.switch_ep.is_ipv4() &&
        std::uint32_t(cfg_.switch_ep.port()) + info.lanes - 1 > 0xFFFF) {
      fail(WorkerErrorKind::protocol,
           "switch " + lane.ep.str() + " reports " + std::to_string(info.lanes) +
               " lanes: their ports would pass 65535",
           label_for_errors());
      return;
    }
  } else if (info.lanes != info_.lanes || info.slots != info_.slots ||
             info.slot_elems != info_.slot_elems || info.caps != info_.caps ||
             info.group != info_.group) {
    fail(WorkerErrorKind::protocol,
         "lane " + std::to_string(l) + " of switch " + cfg_.switch_ep.str() + " (" +
             lane.ep.str() + ") answers with another configuration than lane 0 (" +
             std::to_string(info.lanes) + " lanes, " + std::to_string(info.slots) + " x " +
             std::to_string(info.slot_elems) + ", caps " + std::to_string(info.caps) + ", group " +
             std::to_string(info.group) + " vs " +
             std::to_string(info_.lanes) + " lanes, " + std::to_string(info_.slots) + " x " +
             std::to_string(info_.slot_elems) + ", caps " + std::to_string(info_.caps) +
             ", group " + std::to_string(info_.group) + "): the switch's lanes are misconfigured",
         label_for_errors());
    return;
  }
  lane.epoch = h.epoch;
  lane.joined = true;
  // A clean path sample (header-sized: it underestimates a large chunk's round trip on a slow
  // link; the floor from the spacing of results keeps the timer above that). An answer taken
  // after the join's own timer expired was read late (a busy host: the worker ran after the
  // deadline it had set), so it counts at most that interval: one late read would otherwise
  // set every timer of this member to three times the delay (measured: 70 ms on loopback).
  if (!lane.retransmitted) on_join_rtt(std::min(now - lane.sent, lane.rto));
  if (l == 0 && !cfg_.single_lane)
    for (std::uint16_t k = 1; k < info.lanes; ++k) {
      lanes_.push_back(Lane{});
      lanes_.back().ep = lane_endpoint(cfg_.switch_ep, k);
      start_lane_join(k, now);
    }
  for (const auto& x : lanes_)
    if (!x.joined) return;
  // Every lane answered: the stream starts (a fresh one, at chunk 0 of every lane).
  joining_ = false;
  joined_ = true;
  ring_.assign(std::size_t(info_.slots) * L(), Entry{});
  // A fresh stream starts at chunk 0; after a live resize it carries on at the boundary, in
  // the new mapping (every chunk before it completed).
  next_chunk_ = rejoin_ && resize_at_ ? *resize_at_ : 0;
  rejoin_ = false;
  resize_at_.reset();
  inflight_ = 0;
  clear_recovery();
  win_.configure(ring_size(), cfg_.window, kInitialWindow);
  last_progress_ = now;
  pump(now);
}

Endpoint WorkerProtocol::multicast_group() const {
  if (lanes_.empty() || !lanes_[0].joined || info_.group == 0) return {};
  return Endpoint::ipv4(info_.group, cfg_.switch_ep.is_ipv4() ? cfg_.switch_ep.port() : 0);
}

void WorkerProtocol::multicast_unavailable(const std::string& why) {
  fail(WorkerErrorKind::protocol,
       "the switch " + cfg_.switch_ep.str() + " sends job " + std::to_string(cfg_.job) +
           "'s results to multicast group " + multicast_group().str() +
           ", which this member cannot join: " + why,
       label_for_errors());
}

void WorkerProtocol::join_tick(Nanos now) {
  if (now >= join_deadline_) {
    std::string missing;
    for (const auto& l : lanes_)
      if (!l.joined) missing += (missing.empty() ? "" : ", ") + l.ep.str();
    fail(WorkerErrorKind::timeout,
         "no join_ack from switch " + missing + " for job " + std::to_string(cfg_.job) +
             " member " + std::to_string(cfg_.member) + " within " +
             std::to_string(double(cfg_.join_timeout) / 1e9) + " s" +
             (rejoin_ ? " (a live resize: the switch answers once every member drained up to the boundary)"
                      : "") +
             (join_refusal_ == Reason::unknown_job ? " (the switch does not know the job)"
              : cfg_.key ? " (no authenticated answer, " + std::to_string(rep_.unauthenticated) +
                               " unauthenticated packet(s) ignored: the switch must have this job's "
                               "key, the one in INC_KEY_FILE, in its --key-file)"
                         : std::string(" (no answer; a switch that holds a key for the job ignores "
                                       "unauthenticated joins: give the ranks INC_KEY_FILE)")),
         label_for_errors());
    return;
  }
  for (std::size_t l = 0; l < lanes_.size(); ++l)
    if (!lanes_[l].joined && now >= lanes_[l].resend) send_join(l, now, true);
}

void WorkerProtocol::leave(Nanos) {
  if (!joined_) return;
  for (const auto& lane : lanes_) {
    Header h;
    h.type = PacketType::leave;
    h.member = cfg_.member;
    h.job = cfg_.job;
    h.epoch = lane.epoch;
    proto::encode_header(h, out_.reserve(proto::kHeaderBytes + auth_room()));
    commit(lane.ep, proto::kHeaderBytes);
    count_tx(rep_, proto::kHeaderBytes, false);
  }
  joined_ = false;
}

}  // namespace inc::sw
