#include "src/control/server.hpp"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "src/control/conn.hpp"
#include "src/switch/udp.hpp"

namespace inc::control {

namespace ctl = proto::ctl;

std::string render_metrics(const Controller& c, Nanos now) {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  line("# HELP inc_controller_jobs Jobs holding a tree.");
  line("# TYPE inc_controller_jobs gauge");
  line("inc_controller_jobs " + std::to_string(c.jobs().size()));
  line("# HELP inc_controller_switch_up Switch registered and heart-beating.");
  line("# TYPE inc_controller_switch_up gauge");
  for (const auto& [n, s] : c.switches())
    line("inc_controller_switch_up{switch=\"" + n + "\"} " + (c.switch_alive(s, now) ? "1" : "0"));
  line("# HELP inc_controller_switch_slots Slots per lane of a switch.");
  line("# TYPE inc_controller_switch_slots gauge");
  for (const auto& [n, s] : c.switches()) {
    line("inc_controller_switch_slots{switch=\"" + n + "\",state=\"total\"} " + std::to_string(c.pool(s)));
    line("inc_controller_switch_slots{switch=\"" + n + "\",state=\"free\"} " + std::to_string(c.free_slots(s)));
  }
  line("# HELP inc_controller_job_slots Slots per lane a job holds at a switch.");
  line("# TYPE inc_controller_job_slots gauge");
  for (const auto& [n, s] : c.switches())
    for (const auto& [job, slots] : s.reserved)
      line("inc_controller_job_slots{switch=\"" + n + "\",job=\"" + std::to_string(job) + "\"} " +
           std::to_string(slots));
  const auto& k = c.counters();
  line("# HELP inc_controller_trees_total Trees by outcome.");
  line("# TYPE inc_controller_trees_total counter");
  line("inc_controller_trees_total{outcome=\"granted\"} " + std::to_string(k.granted));
  line("inc_controller_trees_total{outcome=\"released\"} " + std::to_string(k.released));
  line("inc_controller_trees_total{outcome=\"expired\"} " + std::to_string(k.expired));
  line("inc_controller_trees_total{outcome=\"adopted\"} " + std::to_string(k.adopted));
  line("inc_controller_trees_total{outcome=\"reclaimed\"} " + std::to_string(k.reclaimed));
  line("# HELP inc_controller_resizes_total Live resizes sent to switches (fair re-balancing).");
  line("# TYPE inc_controller_resizes_total counter");
  line("inc_controller_resizes_total " + std::to_string(k.resizes));
  line("# HELP inc_controller_refusals_total Tree requests refused (the job runs on the hosts), by reason.");
  line("# TYPE inc_controller_refusals_total counter");
  for (std::size_t r = 0; r < std::size_t(Refusal::count); ++r)
    line("inc_controller_refusals_total{reason=\"" + std::string(name(Refusal(r))) + "\"} " +
         std::to_string(k.refused[r]));
  return o;
}

namespace {

struct Conn {
  int fd = -1;
  Session s;
  std::string peer;
  std::string switch_name;  // a registered switch
  Conn(int f, const proto::auth::Key& k, std::string p) : fd(f), s(k, false, ctl::Role::job), peer(std::move(p)) {}
};

struct Pending {
  int conn = -1;  // the job's connection (its fd)
  Grant grant;
  std::set<std::uint64_t> outstanding;
  Nanos deadline = 0;
  // The job's own deadline (TreeRequest::wait_ms): a newcomer waits for its slots until then;
  // once admissions went out, the switches have admit_timeout (and no more than this) to answer.
  Nanos wait_until = 0, wait = 0;
  bool waited = false;  // its slots were held by running jobs when it asked
};

class Loop {
 public:
  Loop(const ServerOptions& o, std::FILE* log) : o_(o), log_(log), core_(o.core) {}
  int listen_fd = -1;
  std::mutex mu;  // core_ (the metrics thread reads it)
  Controller& core() { return core_; }
  void run(const std::atomic<bool>& stop);

 private:
  void accept_all();
  void on_message(Conn& c, ctl::Message&& m, Nanos now);
  void dispatch(Nanos now);
  void fail_pending(std::uint32_t job, const std::string& why);
  void close_conn(int fd, const std::string& why);
  Conn* switch_conn(const std::string& name);

  const ServerOptions& o_;
  std::FILE* log_;
  Controller core_;
  std::map<int, std::unique_ptr<Conn>> conns_;
  std::map<std::uint32_t, Pending> pending_;         // job -> its request
  std::map<std::uint64_t, std::uint32_t> req_job_;   // admission request -> job
  std::map<std::uint64_t, std::pair<std::uint32_t, std::string>> resize_req_;  // resize -> job, switch
  std::map<std::uint32_t, proto::auth::Key> key_of_;  // granted, admissions outstanding
  std::uint64_t next_req_ = 1;
  std::uint64_t auth_failures_ = 0;
};

Conn* Loop::switch_conn(const std::string& name) {
  for (auto& [fd, c] : conns_)
    if (c->switch_name == name) return c.get();
  return nullptr;
}

void Loop::close_conn(int fd, const std::string& why) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (!why.empty()) {
    std::fprintf(log_, "inc controller: closing %s%s: %s\n", it->second->peer.c_str(),
                 it->second->switch_name.empty() ? "" : (" (switch " + it->second->switch_name + ")").c_str(),
                 why.c_str());
    std::fflush(log_);
  }
  ::close(fd);
  conns_.erase(it);
}

void Loop::accept_all() {
  for (;;) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (conns_.size() >= 4096) {  // bounded: a flood of connections cannot exhaust the loop
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conns_.emplace(fd, std::make_unique<Conn>(fd, o_.secret,
                                              sw::Endpoint::ipv4(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port)).str()));
  }
}

void Loop::fail_pending(std::uint32_t job, const std::string& why) {
  auto it = pending_.find(job);
  if (it == pending_.end()) return;
  Pending p = std::move(it->second);
  pending_.erase(it);
  for (auto r : p.outstanding) req_job_.erase(r);
  key_of_.erase(job);
  core_.admission_failed(job, "", proto::Reason::ok);
  ctl::TreeReply rep;
  rep.why = why;
  if (auto c = conns_.find(p.conn); c != conns_.end()) c->second->s.send(rep);
}

void Loop::on_message(Conn& c, ctl::Message&& m, Nanos now) {
  const ctl::Role role = c.s.peer_role();
  auto wrong = [&](const char* what) { close_conn(c.fd, std::string(what) + " from a peer of the wrong role"); };
  if (auto* st = std::get_if<ctl::SwitchState>(&m)) {
    if (role != ctl::Role::switch_agent) return wrong("switch state");
    const bool fresh = c.switch_name.empty();
    std::string why = core_.switch_state(*st, now);
    if (!why.empty()) return close_conn(c.fd, why);
    if (Conn* other = switch_conn(st->name); other && other != &c) close_conn(other->fd, "replaced by a new registration");
    c.switch_name = st->name;
    if (fresh) {
      std::fprintf(log_, "inc controller: switch %s registered from %s (%u slots per lane, %zu jobs)\n",
                   st->name.c_str(), c.peer.c_str(), st->slots_per_lane, st->jobs.size());
      std::fflush(log_);
    }
  } else if (auto* oc = std::get_if<ctl::Outcome>(&m)) {
    if (role != ctl::Role::switch_agent) return wrong("outcome");
    if (auto rz = resize_req_.find(oc->req); rz != resize_req_.end()) {
      if (rz->second.second == c.switch_name) {  // only the switch it went to answers it
        const auto reason = proto::Reason(oc->reason);
        if (reason != proto::Reason::ok)
          std::fprintf(log_, "inc controller: switch %s refused to resize job %u: %s\n", c.switch_name.c_str(),
                       rz->second.first, std::string(proto::name(reason)).c_str());
        else
          std::fprintf(log_, "inc controller: switch %s moved job %u (its members drained and joined again)\n",
                       c.switch_name.c_str(), rz->second.first);
        std::fflush(log_);
        core_.resize_done(rz->second.first, c.switch_name, reason, now);
        resize_req_.erase(rz);
      }
      return;
    }
    auto r = req_job_.find(oc->req);
    if (r == req_job_.end()) return;  // a release's, or late
    const std::uint32_t job = r->second;
    req_job_.erase(r);
    auto p = pending_.find(job);
    if (p == pending_.end()) return;
    p->second.outstanding.erase(oc->req);
    if (oc->reason != std::uint8_t(proto::Reason::ok))
      return fail_pending(job, "switch '" + c.switch_name + "' refused the admission: " +
                                   std::string(proto::name(proto::Reason(oc->reason))));
    if (!p->second.outstanding.empty()) return;
    const Grant& g = p->second.grant;
    ctl::TreeReply rep;
    rep.ok = true;
    rep.why = g.why;
    rep.job = g.job;
    rep.slots = g.slots;
    rep.tree = g.tree;
    if (auto rec = core_.jobs().find(job); rec != core_.jobs().end() && rec->second.slots != g.slots) {
      // It waited for its slots (live re-balancing) and its share changed meanwhile.
      rep.slots = rec->second.slots;
      rep.tree = rec->second.tree;
      rep.why += "; " + std::to_string(rep.slots) + " slots by the time running jobs gave them up";
    }
    rep.lease = g.lease;
    rep.lease_ms = std::uint32_t(core_.config().lease / sw::kMillisecond);
    rep.key = key_of_[job];
    rep.root = g.root;
    rep.ranks = g.ranks;
    if (auto jc = conns_.find(p->second.conn); jc != conns_.end()) jc->second->s.send(rep);
    key_of_.erase(job);
    pending_.erase(p);
  } else if (auto* tr = std::get_if<ctl::TreeRequest>(&m)) {
    if (role != ctl::Role::job) return wrong("tree request");
    Grant g = core_.request_tree(*tr, now);
    if (!g.ok) {
      ctl::TreeReply rep;
      rep.why = g.why;
      c.s.send(rep);
      return;
    }
    key_of_[g.job] = proto::auth::random_key();
    Pending p;
    p.conn = c.fd;
    p.grant = g;
    const Nanos wait = tr->wait_ms ? Nanos(tr->wait_ms) * sw::kMillisecond : o_.admit_timeout;
    p.wait = wait;
    p.wait_until = now + wait;
    auto rec = core_.jobs().find(g.job);
    p.waited = rec != core_.jobs().end() && rec->second.waiting;
    p.deadline = p.waited ? p.wait_until : std::min(p.wait_until, now + o_.admit_timeout);
    pending_[g.job] = std::move(p);
  } else if (auto* lr = std::get_if<ctl::LeaseRenew>(&m)) {
    if (role != ctl::Role::job) return wrong("lease renewal");
    c.s.send(ctl::LeaseReply{lr->job, core_.renew(*lr, now)});
  } else if (auto* rel = std::get_if<ctl::TreeRelease>(&m)) {
    if (role != ctl::Role::job) return wrong("tree release");
    c.s.send(ctl::LeaseReply{rel->job, core_.release(rel->job, rel->lease)});
  } else if (std::holds_alternative<ctl::StatusRequest>(m)) {
    c.s.send(ctl::StatusReply{core_.status_json(now)});
  } else {
    close_conn(c.fd, "unexpected message");
  }
}

// Sends the core's admissions and releases to the switches' connections.
void Loop::dispatch(Nanos now) {
  auto actions = std::move(core_.actions());
  core_.actions().clear();
  for (const auto& a : actions) {
    Conn* sc = switch_conn(a.sw);
    const std::uint64_t req = next_req_++;
    if (a.kind == SwitchAction::Kind::resize) {
      if (!sc) continue;  // its next registration reports what it holds
      resize_req_[req] = {a.spec.job, a.sw};
      sc->s.send(ctl::Resize{req, a.spec.job, a.spec.slots});
      const auto& st = core_.switches().at(a.sw);
      std::fprintf(log_, "inc controller: re-balancing: job %u on switch %s to %u slots%s (%u jobs there)\n", a.spec.job,
                   a.sw.c_str(), a.spec.slots,
                   st.state.lanes > 1 ? (" per lane on its " + std::to_string(st.state.lanes) + " lanes").c_str() : "",
                   std::uint32_t(st.reserved.size()));
      std::fflush(log_);
    } else if (a.kind == SwitchAction::Kind::admit) {
      auto p = pending_.find(a.spec.job);
      if (p == pending_.end()) continue;
      if (!sc) {
        fail_pending(a.spec.job, "switch '" + a.sw + "' is not connected to the controller");
        continue;
      }
      p->second.outstanding.insert(req);
      p->second.deadline = std::min(p->second.wait_until, now + o_.admit_timeout);
      req_job_[req] = a.spec.job;
      sc->s.send(ctl::Admit{req, a.spec, key_of_[a.spec.job]});
    } else if (sc) {
      sc->s.send(ctl::Release{req, a.spec.job});
    }
  }
  std::vector<std::pair<std::uint32_t, std::string>> late;
  for (const auto& [job, p] : pending_)
    if (now > p.deadline)
      late.emplace_back(job, p.outstanding.empty() && p.waited
                                 ? "running jobs did not give up its share of the slots within its wait of " +
                                       std::to_string(p.wait / sw::kMillisecond) + " ms (from its INC_TIMEOUT)"
                                 : "the switches did not confirm the admission in time");
  for (const auto& [job, why] : late) fail_pending(job, why);
}

void Loop::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    std::vector<pollfd> fds{{listen_fd, POLLIN, 0}};
    for (auto& [fd, c] : conns_)
      fds.push_back({fd, short(POLLIN | (c->s.out().empty() ? 0 : POLLOUT)), 0});
    ::poll(fds.data(), fds.size(), 100);
    std::lock_guard<std::mutex> g(mu);
    const Nanos now = sw::monotonic_now();
    if (fds[0].revents & POLLIN) accept_all();
    for (std::size_t i = 1; i < fds.size(); ++i) {
      auto it = conns_.find(fds[i].fd);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        std::byte buf[65536];
        ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          close_conn(c.fd, c.switch_name.empty() ? "" : "connection closed");
          continue;
        }
        if (n > 0 && !c.s.in(std::span(buf, std::size_t(n)))) {
          ++auth_failures_;
          close_conn(c.fd, c.s.why());
          continue;
        }
        const int fd = c.fd;
        while (conns_.count(fd)) {
          auto m = conns_[fd]->s.take();
          if (!m) break;
          on_message(*conns_[fd], std::move(*m), now);
        }
      }
    }
    core_.tick(now);
    dispatch(now);
    for (auto it = conns_.begin(); it != conns_.end();) {
      Conn& c = *it->second;
      auto& out = c.s.out();
      ++it;
      if (out.empty()) continue;
      ssize_t n = ::send(c.fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) out.erase(out.begin(), out.begin() + n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR) close_conn(c.fd, "");
      else if (out.size() > 16 * ctl::kMaxFrameBytes) close_conn(c.fd, "peer does not read");
    }
  }
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
}

}  // namespace

int run_controller(const ServerOptions& o, const std::atomic<bool>& stop, std::FILE* log,
                   const std::function<void(int, int)>& on_ready) {
  auto ep = sw::parse_endpoint(o.listen);
  if (!ep) {
    std::fprintf(log, "inc controller: --listen '%s' is not an IPv4 host:port\n", o.listen.c_str());
    return 2;
  }
  Loop loop(o, log);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(ep->port());
  sa.sin_addr.s_addr = htonl(ep->ipv4_addr());
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 128) != 0) {
    std::fprintf(log, "inc controller: cannot listen on %s: %s\n", o.listen.c_str(), std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return 1;
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);
  loop.listen_fd = fd;
  httplib::Server http;
  std::thread http_thread;
  int metrics_port = -1;
  if (o.metrics_port >= 0) {
    http.set_socket_options([](socket_t s) {
      int yes = 1;
      ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    http.set_read_timeout(2, 0);
    http.set_write_timeout(2, 0);
    http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> g(loop.mu);
      res.set_content(render_metrics(loop.core(), sw::monotonic_now()), "text/plain; version=0.0.4");
    });
    metrics_port = o.metrics_port == 0 ? http.bind_to_any_port(o.metrics_bind)
                                       : (http.bind_to_port(o.metrics_bind, o.metrics_port) ? o.metrics_port : -1);
    if (metrics_port < 0) {
      std::fprintf(log, "inc controller: cannot serve metrics on %s:%d\n", o.metrics_bind.c_str(), o.metrics_port);
      ::close(fd);
      return 1;
    }
    http_thread = std::thread([&] { http.listen_after_bind(); });
  }
  std::fprintf(log, "inc controller: serving %s, %zu switches in the fabric, policy %s, lease %.1f s%s\n",
               sw::Endpoint::ipv4(ep->ipv4_addr(), std::uint16_t(port)).str().c_str(), o.core.fabric.switches.size(),
               std::string(name(o.core.policy)).c_str(), double(o.core.lease) / 1e9,
               metrics_port >= 0 ? (", metrics http://" + o.metrics_bind + ":" + std::to_string(metrics_port) + "/metrics").c_str() : "");
  std::fflush(log);
  if (on_ready) on_ready(port, metrics_port);
  loop.run(stop);
  if (http_thread.joinable()) {
    http.stop();
    http_thread.join();
  }
  ::close(fd);
  std::fprintf(log, "inc controller: stopped\n");
  std::fflush(log);
  return 0;
}

}  // namespace inc::control
