// The Engine's refusals: a call that this rank's engine refused before it could start (the edge
// engine's checks of a rank's descriptor, src/edge/proxy.cpp, e.g. a wide accumulator that the
// job's converting wire handler cannot carry, asked on one rank only). Without a word the other
// members would post the collective and wait for this rank until their deadline; instead the
// refusing engine takes the collective's sequence number and tells every other member
// (transport::MsgKind::refuse: comm, seq and the reason). A member that started that collective,
// or starts it later, fails it at once with Error::Kind::mismatch naming the refusing rank and
// the reason; its engine is then unusable, as after any failed collective (Engine::fail), and it
// tells the refusing rank (an abort to it alone: the others hear the refusal itself first, so
// each reports the refusal, not a relay). A member that refused the same call too fails nothing:
// a call refused on every rank loses nothing, and the next one runs (as a call that the API
// refuses on every rank). The message comes over the job's mesh, whose connections admit only
// the job's own ranks (connect_mesh's hello): no other job can send one, and the refusal is
// charged to the connection's rank, whatever its text says.
#include <fmt/format.h>

#include "coll/executor.hpp"

namespace inc::coll {

using transport::WireHeader;

void Engine::refuse(std::uint32_t comm_id, const std::string& why) {
  std::lock_guard lk(mu_);
  if (fatal_) return;  // every member has been told why already
  auto cit = comms_.find(comm_id);
  if (cit == comms_.end()) return;  // names no collective of this job
  Comm& comm = cit->second;
  const std::pair key{comm_id, comm.next_seq++};
  refusals_.erase(key);  // a peer refused it too: nothing ran, nothing to fail
  forget_early(key);     // the payloads of peers that started it: they fail on the refusal
  forget_notices(comm_id, key.second);
  refused_here_.insert(key);
  if (refused_here_.size() > kMaxRefusals) refused_here_.erase(refused_here_.begin());
  WireHeader h;
  h.comm_id = comm_id;
  h.seq = key.second;
  for (int w : comm.members)
    if (w != world_rank() && mesh_->peer_alive(w)) mesh_->send_refusal(w, h, why);
}

void Engine::forget_early(std::pair<std::uint32_t, std::uint64_t> key) {
  auto eit = early_.find(key);
  if (eit == early_.end()) return;
  // A payload still arriving into one of them goes nowhere now.
  for (std::size_t w = 0; w < incoming_.size(); ++w) {
    Incoming& in = incoming_[w];
    if (in.mode != Incoming::Mode::early) continue;
    for (const EarlyMsg& m : eit->second)
      if (in.early == &m) {
        mesh_->discard_incoming(static_cast<int>(w));
        in = Incoming{};
        in.mode = Incoming::Mode::discard;
        break;
      }
  }
  early_.erase(eit);
}

Error Engine::refusal_error(std::uint32_t comm_id, Collective coll, std::uint64_t seq, int wpeer,
                            const std::string& why) const {
  auto cit = comms_.find(comm_id);
  const int peer = cit == comms_.end() ? wpeer : cit->second.comm_rank_of[static_cast<std::size_t>(wpeer)];
  return Error(Error::Kind::mismatch,
               fmt::format("{} #{}: rank {}'s call was refused before it started: {}", name(coll), seq, peer, why));
}

void Engine::failed_by_refusal(const Error& e, int wpeer) {
  if (!fatal_) fatal_ = e;
  if (mesh_->peer_alive(wpeer)) mesh_->send_abort(wpeer, fmt::format("rank {}: {}", world_rank(), e.what()));
}

std::optional<Error> Engine::take_refusal(std::uint32_t comm_id, Collective coll) {
  auto cit = comms_.find(comm_id);
  if (cit == comms_.end()) return std::nullopt;
  auto rit = refusals_.find({comm_id, cit->second.next_seq});
  if (rit == refusals_.end()) return std::nullopt;
  const std::uint64_t seq = cit->second.next_seq++;  // the peers' collective of that number
  const auto [wpeer, why] = rit->second;
  refusals_.erase(rit);
  // (Kept before this rank knew the communicator: its membership is checked now.)
  Error e = cit->second.comm_rank_of[static_cast<std::size_t>(wpeer)] < 0
                ? Error(Error::Kind::mismatch, fmt::format("{} #{}: world rank {} sent a refusal for a communicator it "
                                                           "is not part of",
                                                           name(coll), seq, wpeer))
                : refusal_error(comm_id, coll, seq, wpeer, why);
  failed_by_refusal(e, wpeer);
  return e;
}

void Engine::on_refused(int wpeer, const WireHeader& h, const std::string& reason) {
  const std::pair key{h.comm_id, h.seq};
  auto cit = comms_.find(h.comm_id);
  if (cit != comms_.end() && cit->second.comm_rank_of[static_cast<std::size_t>(wpeer)] < 0)
    throw Error(Error::Kind::mismatch,
                fmt::format("world rank {} sent a refusal for a communicator it is not part of", wpeer));
  if (refused_here_.count(key)) return;  // refused here too
  if (auto ait = active_.find(key); ait != active_.end()) {
    CollOp& op = *ait->second;
    Error e = refusal_error(h.comm_id, op.params.coll, h.seq, wpeer, reason);
    fail(op, e, false);  // not to every peer: each hears the refusal itself
    failed_by_refusal(e, wpeer);
    return;
  }
  if (cit == comms_.end() || h.seq >= cit->second.next_seq) {
    if (refusals_.size() >= kMaxRefusals)
      throw Error(Error::Kind::mismatch,
                  fmt::format("world rank {} sent more than {} refusals of collectives not started here", wpeer,
                              kMaxRefusals));
    refusals_.emplace(key, std::pair{wpeer, reason});  // the first one is the one reported
    return;
  }
  // That collective completed here (a broadcast's root may finish without its leaves) or failed.
  if (!fatal_)
    throw Error(Error::Kind::mismatch,
                fmt::format("rank {}'s call of #{} on communicator {} was refused before it started, while it "
                            "completed here: {}",
                            cit->second.comm_rank_of[static_cast<std::size_t>(wpeer)], h.seq, h.comm_id, reason));
}

}  // namespace inc::coll
