// The handler registry and the chain that runs a message through its handlers (handler.hpp).
#include "edge/handler.hpp"

#include <fmt/format.h>

#include <cstring>

namespace inc::edge {

void Handler::encode(const coll::CollectiveParams&, const std::byte* src, std::uint64_t bytes, std::byte* wire) const {
  if (bytes) std::memcpy(wire, src, bytes);
}

void Context::emit(const Chunk& c) {
  if (stage_ + 1 >= proc_.stages_.size())
    throw Error(Error::Kind::internal, "a handler emitted a chunk but it is the last of its chain");
  if (proc_.run(stage_ + 1, c) != c.bytes)
    throw Error(Error::Kind::internal,
                fmt::format("handler '{}' left part of a chunk it was passed unconsumed",
                            proc_.stages_[stage_ + 1]->name()));
}

// ---------------------------------------------------------------------------------------------

void HandlerRegistry::add(std::unique_ptr<Handler> h) {
  if (!h || h->name().empty()) throw Error(Error::Kind::invalid_argument, "a handler needs a name");
  std::string name(h->name());
  if (by_name_.count(name))
    throw Error(Error::Kind::invalid_argument, fmt::format("a handler named '{}' is already registered", name));
  by_name_.emplace(std::move(name), std::shared_ptr<const Handler>(std::move(h)));
}

const Handler& HandlerRegistry::get(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    throw Error(Error::Kind::config,
                fmt::format("no handler named '{}' (known: {})", name, fmt::join(names(), ", ")));
  return *it->second;
}

std::vector<std::string> HandlerRegistry::names() const {
  std::vector<std::string> v;
  for (const auto& [n, h] : by_name_) v.push_back(n);
  return v;
}

// ---------------------------------------------------------------------------------------------

HandlerChain::HandlerChain(const HandlerRegistry& reg, std::string_view convert, HandlerCounts* counts,
                           std::string_view reduce, std::string_view forward)
    : reduce_(&reg.get(reduce)), forward_(&reg.get(forward)), counts_(counts) {
  if (!convert.empty()) convert_ = &reg.get(convert);
  if (convert_ && convert_->role() != Handler::Role::convert)
    throw Error(Error::Kind::config, fmt::format("handler '{}' is not a conversion handler", convert));
  if (reduce_->role() != Handler::Role::apply || forward_->role() != Handler::Role::apply)
    throw Error(Error::Kind::config, fmt::format("handlers '{}' and '{}' must apply data, not convert it", reduce, forward));
}

bool HandlerChain::converts(const coll::CollectiveParams& p) const { return convert_ && convert_->converts(p); }

std::uint64_t HandlerChain::wire_bytes(const coll::CollectiveParams& p, std::uint64_t bytes) const {
  return converts(p) ? convert_->wire_bytes(p, bytes) : bytes;
}

void HandlerChain::encode(const coll::CollectiveParams& p, const std::byte* src, std::uint64_t bytes,
                          std::byte* wire) const {
  if (converts(p)) convert_->encode(p, src, bytes, wire);
  else if (bytes) std::memcpy(wire, src, bytes);
}

bool HandlerChain::deposits(const coll::RecvMessage& m) {
  if (m.kind != coll::OpKind::recv || converts(*m.params) || forward_->name() != "forward") return false;
  if (counts_) ++counts_->deposited;
  return true;
}

std::unique_ptr<coll::MessageProcessor> HandlerChain::open(const coll::RecvMessage& m) {
  std::vector<const Handler*> stages;
  if (converts(*m.params)) stages.push_back(convert_);
  stages.push_back(m.kind == coll::OpKind::recv_reduce ? reduce_ : forward_);
  return std::make_unique<ChainProcessor>(m, std::move(stages), counts_);
}

// ---------------------------------------------------------------------------------------------

ChainProcessor::ChainProcessor(const coll::RecvMessage& m, std::vector<const Handler*> stages, HandlerCounts* counts)
    : msg_(m), stages_(std::move(stages)), counts_(counts) {
  if (stages_.empty()) throw Error(Error::Kind::internal, "a handler chain without handlers");
  ctx_.reserve(stages_.size());
  for (std::size_t i = 0; i < stages_.size(); ++i) ctx_.push_back(Context(msg_, *this, i));
  if (counts_) {
    counts_->headers += stages_.size();
    if (stages_.size() > 1) ++counts_->converted_messages;
  }
  for (std::size_t i = 0; i < stages_.size(); ++i) stages_[i]->header(ctx_[i]);
}

std::size_t ChainProcessor::alignment() const { return stages_.front()->alignment(msg_); }

std::size_t ChainProcessor::run(std::size_t stage, const Chunk& c) {
  if (counts_) ++counts_->payloads;
  const std::size_t n = stages_[stage]->payload(ctx_[stage], c);
  if (n > c.bytes)
    throw Error(Error::Kind::internal, fmt::format("handler '{}' consumed more than its chunk", stages_[stage]->name()));
  return n;
}

std::size_t ChainProcessor::consume(std::uint64_t offset, const std::byte* data, std::size_t n) {
  if (offset != consumed_ || offset + n > msg_.wire_bytes)
    throw Error(Error::Kind::internal, fmt::format("payload bytes [{}, +{}) of a {} B message out of order", offset,
                                                   n, msg_.wire_bytes));
  const std::size_t used = run(0, Chunk{offset, data, n});
  consumed_ += used;
  if (offset + n == msg_.wire_bytes && used != n)
    throw Error(Error::Kind::mismatch,
                fmt::format("handler '{}' could not use the last {} B of a {} B message (a malformed payload?)",
                            stages_.front()->name(), n - used, msg_.wire_bytes));
  return used;
}

void ChainProcessor::finish() {
  if (finished_) return;
  finished_ = true;
  if (consumed_ != msg_.wire_bytes)
    throw Error(Error::Kind::internal, fmt::format("a message finished after {} of its {} B", consumed_, msg_.wire_bytes));
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    if (counts_) ++counts_->completions;
    stages_[i]->completion(ctx_[i]);
  }
}

}  // namespace inc::edge
