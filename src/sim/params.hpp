// Parameters of the analytical model and the simulator, with their documented defaults
// (docs/MODEL.md lists each one with the reason for its value).
//
// Units: bandwidths of network links in Gb/s (the unit switch and NIC vendors quote), rates of
// memory and arithmetic in GB/s, latencies in microseconds, sizes in bytes. Conversions to
// seconds and bytes/s happen in the accessors below, nowhere else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace inc::sim {

struct NetParams {
  // Network.
  double link_gbps = 400.0;      // per direction, every link (host and switch-to-switch)
  double hop_latency_us = 0.6;   // one link plus the switch pipeline behind it
  int path_hops = 4;             // links on a host-to-host path (2: one switch, 4: 2-level, 6: 3-level)
  // Endpoints.
  double host_overhead_us = 2.0;  // per message: software, doorbell, completion (LogP's o)
  double nic_overhead_us = 0.5;   // per message when the NIC drives the step (Edge-INC)
  // A receiver's ready notice (sim Matching::ready), beyond its host overhead and path latency:
  // the receiver's engine writing it and the sender's waking up to it. 0 = the overhead alone.
  double ready_notice_us = 0.0;
  // The transport's send buffer (a TCP socket's): a send of at most this many bytes is done, and
  // its buffer free for the ops that wait on it, once handed to the transport (host overhead
  // after it starts moving), not when its last byte is delivered. 0 = done on delivery. The
  // runtime's TCP mesh completes a send when the kernel took its last byte (docs/SIMULATOR.md,
  // "Matching semantics").
  double send_buffer_bytes = 0.0;
  double reduce_GBps = 0.0;       // endpoint reduction rate (input bytes/s); 0 = overlapped/free
  double host_mem_GBps = 0.0;     // host memory bus for NIC DMA; 0 = not a bottleneck
  // Core-INC switches.
  double switch_reduce_GBps = 0.0;      // switch ALU rate per tree (input bytes/s); 0 = line rate
  double switch_memory_bytes = 8.0 * 1024 * 1024;  // aggregation memory per switch
  double inc_chunk_bytes = 256.0 * 1024;          // payload of one aggregation slot
  int inc_tree_levels = 2;  // switch levels from a host up to the tree root (1: one switch)
  // Core-INC model: members under one switch of the level above the hosts (0: a balanced tree,
  // fan-in ceil(members^(1/levels)) at every level). The emulated testbed's 2 leaves of 4: 4.
  int inc_leaf_fan_in = 0;
  // Software switches and hosts: CPU per Core-INC datagram (one per inc_chunk_bytes of a chunk).
  // 0 = not modelled (an ASIC; hosts whose NIC does the work). docs/SIMULATOR.md, "CPU of a
  // software switch and of the hosts".
  double switch_packet_us = 0.0;  // a switch's CPU per datagram it receives or sends
  double host_packet_us = 0.0;    // a host's CPU per Core-INC datagram it sends or receives
  bool switch_multicast = false;  // a switch sends each result once to all of its host children
  // Emulated testbed only: every host's and switch's packet CPU above, and the host algorithms'
  // reductions and ready notices, run on this many shared cores (inc testbed: all processes on
  // one machine). 0 = each host and switch has its own.
  int cpu_cores = 0;
  // Emulated testbed only: its links' shapers (tbf token buckets; docs/SIMULATOR.md, "Token-bucket
  // links"). Each direction of every link slower than burst_peak_gbps has a bucket of
  // max(link_burst_s x its rate, link_burst_bytes, link_burst_min_bytes), full at time 0, that
  // it passes at burst_peak_gbps (veth speed) after an idle period. Off while link_burst is 0.
  double link_burst_s = 0;          // link_burst given as a time at the link's rate
  double link_burst_bytes = 0;      // link_burst given in bytes
  double link_burst_min_bytes = 0;  // the bucket's floor (the testbed's: 64 KiB + one frame)
  double burst_peak_gbps = 0;       // a link's rate while its bucket holds tokens
  // Emulated testbed only: the ranks do not start a collective together (inc bench times each
  // call between barriers, and 8 processes on 2 cores leave a barrier over a millisecond or
  // more). Each rank starts at an offset drawn uniformly from [0, S], S = start_skew_us +
  // start_skew_us_per_MiB x the collective's MiB, over several draws (SimOptions); the reported
  // time is then inc bench's: the most over ranks of a rank's mean time (docs/SIMULATOR.md,
  // "Start skew"). Off while both are 0: every rank starts at the job's start.
  double start_skew_us = 0;
  double start_skew_us_per_MiB = 0;


  // Derived quantities (seconds and bytes/s).
  double beta() const { return 8.0 / (link_gbps * 1e9); }  // seconds per byte on one link
  double hop_s() const { return hop_latency_us * 1e-6; }
  // Cost of one host-to-host message step: overhead plus the wire latency of the path.
  double alpha() const { return host_overhead_us * 1e-6 + path_hops * hop_s(); }
  double alpha_nic() const { return nic_overhead_us * 1e-6 + path_hops * hop_s(); }
  double gamma() const { return reduce_GBps > 0 ? 1.0 / (reduce_GBps * 1e9) : 0.0; }
  bool buckets() const { return link_burst_s > 0 || link_burst_bytes > 0; }
  bool start_skew() const { return start_skew_us > 0 || start_skew_us_per_MiB > 0; }
  // S, the width of the ranks' start offsets, for a collective of `bytes`, in seconds.
  double start_skew_s(double bytes) const {
    return (start_skew_us + start_skew_us_per_MiB * bytes / (1024.0 * 1024.0)) * 1e-6;
  }
  // The bucket of a link of `bytes_per_s` (0 without buckets).
  double burst_bytes(double bytes_per_s) const {
    return buckets() ? std::max({link_burst_s * bytes_per_s, link_burst_bytes, link_burst_min_bytes}) : 0.0;
  }
};

// Checks ranges; returns "" or "<field>: <reason>" for the first bad field.
std::string validate(const NetParams& p);

}  // namespace inc::sim
