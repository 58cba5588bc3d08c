// Calls running on INC and the MPI completion calls (MPI_Wait/Test families, Request_free,
// Request_get_status).
//
// A non-blocking call on INC hands the user an MPI generalized request (MPI_Grequest_start),
// completed (MPI_Grequest_complete) when the INC request completes. Why a generalized request
// rather than a private handle: the user's MPI_Request is then a real one that every MPI call
// accepts, mixed freely with point-to-point requests in one array, with statuses, MPI_Request_free
// and MPI_REQUEST_NULL handled by MPI itself. What MPI cannot do is make INC progress (INC has
// no progress thread): so every completion call here first advances all INC calls in flight,
// then asks MPI's non-blocking form (PMPI_Test*), and loops until it is satisfied. With no INC
// call in flight the calls go straight to MPI's blocking forms.
#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi/layer.hpp"

namespace inc::mpi {

namespace {

struct Pending {
  MPI_Request handle = MPI_REQUEST_NULL;  // the generalized request the user holds
  MPI_Comm comm = MPI_COMM_NULL;          // for the error handler
  const char* call = "";
  Request req;
  std::function<void()> finish;
  std::optional<Error> failure;  // set by whichever thread saw it fail
  bool done = false;             // MPI_Grequest_complete called
  int error = MPI_SUCCESS;
};

// `in_flight` and `finished` may be touched by the driver thread (below) while this thread is
// inside a blocking MPI call; `by_handle` only by the thread that calls MPI.
struct Table {
  std::map<MPI_Request, std::unique_ptr<Pending>> by_handle;
  std::mutex mu;
  std::vector<Pending*> in_flight;  // INC has not completed them
  std::vector<Pending*> finished;   // INC completed them; MPI_Grequest_complete not called yet
};
Table& table() {
  static Table t;
  return t;
}

int query_fn(void* extra, MPI_Status* s) {
  auto* p = static_cast<Pending*>(extra);
  PMPI_Status_set_elements(s, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(s, 0);
  // A non-blocking collective's source and tag are undefined (MPI 4.0, 6.12); its error is set.
  s->MPI_SOURCE = MPI_ANY_SOURCE;
  s->MPI_TAG = MPI_ANY_TAG;
  s->MPI_ERROR = p->error;
  return MPI_SUCCESS;
}

int free_fn(void* extra) {
  auto* p = static_cast<Pending*>(extra);
  table().by_handle.erase(p->handle);
  return MPI_SUCCESS;
}

// Collective operations cannot be cancelled (MPI_Cancel on one is erroneous): nothing to do.
int cancel_fn(void*, int) { return MPI_SUCCESS; }

// The failure of request `r`, if it is an INC call that failed: {code, comm}.
struct Failure {
  int index = -1;
  int code = MPI_SUCCESS;
  MPI_Comm comm = MPI_COMM_NULL;
};
std::vector<Failure> failures(int n, const MPI_Request* reqs) {
  std::vector<Failure> out;
  auto& t = table();
  if (t.by_handle.empty()) return out;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    auto it = t.by_handle.find(reqs[i]);
    if (it != t.by_handle.end() && it->second->done && it->second->error != MPI_SUCCESS)
      out.push_back({i, it->second->error, it->second->comm});
  }
  return out;
}
const Failure* failure_at(const std::vector<Failure>& f, int index) {
  for (const auto& x : f)
    if (x.index == index) return &x;
  return nullptr;
}

// After a completion call that completed several requests: INC failures among them go to the
// first one's error handler; MPI_ERR_IN_STATUS with each status's error when statuses are kept.
int report_many(const std::vector<Failure>& f, const std::vector<int>& completed, MPI_Status* st,
                bool by_position) {
  const Failure* first = nullptr;
  for (std::size_t k = 0; k < completed.size(); ++k) {
    const Failure* x = failure_at(f, completed[k]);
    if (st != MPI_STATUSES_IGNORE) st[by_position ? k : completed[k]].MPI_ERROR = x ? x->code : MPI_SUCCESS;
    if (x && !first) first = x;
  }
  if (!first) return MPI_SUCCESS;
  raise_on(first->comm, first->code);
  return st != MPI_STATUSES_IGNORE ? MPI_ERR_IN_STATUS : first->code;
}

void poke_mpi() {
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

}  // namespace

bool inc_in_flight() {
  auto& t = table();
  std::lock_guard lk(t.mu);
  return !t.in_flight.empty() || !t.finished.empty();
}

namespace {

// Advances every INC call in flight; moves those INC completed to `finished`. Calls no MPI
// function, so the driver thread may run it.
void drive_inc() {
  auto& t = table();
  std::lock_guard lk(t.mu);
  for (auto it = t.in_flight.begin(); it != t.in_flight.end();) {
    Pending* p = *it;
    bool fin = false;
    try {
      if (p->req.test()) {
        fin = true;
        if (p->finish) p->finish();
        count_on_inc(p->call, p->req.report());
      }
    } catch (const Error& e) {
      fin = true;
      p->failure = e;
    }
    if (fin) {
      t.finished.push_back(p);
      it = t.in_flight.erase(it);
    } else {
      ++it;
    }
  }
}

// While this thread is inside a blocking collective that passed to MPI with INC calls in
// flight, a peer may be waiting in INC for this rank (it may wait for such a call before
// entering that collective), and the blocking collective cannot become the non-blocking one (a
// blocking call does not match a non-blocking one on other ranks). So a driver thread advances
// INC meanwhile; it calls no MPI function (MPI_THREAD_SINGLE and FUNNELED programs stay legal)
// and touches INC only while this thread is inside MPI.
class Driver {
 public:
  static Driver& get() {
    static Driver d;
    return d;
  }
  ~Driver() { quit(); }  // a program that exits without MPI_Finalize
  void start() {
    std::lock_guard lk(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    active_ = true;
    cv_.notify_all();
  }
  void stop() {  // returns once the thread no longer touches INC
    std::unique_lock lk(mu_);
    active_ = false;
    cv_.wait(lk, [this] { return !busy_; });
  }
  void quit() {
    {
      std::lock_guard lk(mu_);
      quit_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [this] { return active_ || quit_; });
      if (quit_) return;
      busy_ = true;
      while (active_) {
        lk.unlock();
        drive_inc();
        sched_yield();
        lk.lock();
      }
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, busy_ = false, quit_ = false;
  std::thread thread_;
};

}  // namespace

void progress() {
  drive_inc();
  auto& t = table();
  std::vector<Pending*> finished;
  {
    std::lock_guard lk(t.mu);
    finished.swap(t.finished);
  }
  // Without the lock: completing a request the user already freed runs free_fn at once.
  for (Pending* p : finished) {
    if (p->failure) p->error = error_code(p->call, *p->failure);
    p->done = true;
    PMPI_Grequest_complete(p->handle);
  }
}

void drain() {
  while (inc_in_flight()) {
    progress();
    if (inc_in_flight()) sched_yield();
  }
  Driver::get().quit();
}

int run_blocking(const char* call, MPI_Comm comm, Launch& l) {
  try {
    Request req = l.start(*l.comm);
    // Not req.wait(): a peer may be blocked in MPI on a transfer this rank must advance
    // (a rendezvous Isend posted before this call), so MPI's progress engine is poked too,
    // every 16th round: a poke costs a pass of MPI's progress engine (which may yield the core
    // when oversubscribed), and a short call should not pay it.
    for (unsigned round = 1; !req.test(); ++round) {
      if (round % 16 == 0) {
        progress();
        poke_mpi();
      }
      sched_yield();
    }
    if (l.finish) l.finish();
    count_on_inc(call, req.report());
    return MPI_SUCCESS;
  } catch (const Error& e) {
    return raise_on(comm, error_code(call, e));
  }
}

int run_nonblocking(const char* call, MPI_Comm comm, Launch& l, MPI_Request* out) {
  auto p = std::make_unique<Pending>();
  p->comm = comm;
  p->call = call;
  p->finish = std::move(l.finish);
  try {
    p->req = l.start(*l.comm);
  } catch (const Error& e) {
    *out = MPI_REQUEST_NULL;
    return raise_on(comm, error_code(call, e));
  }
  int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, p.get(), &p->handle);
  if (rc != MPI_SUCCESS) return rc;
  *out = p->handle;
  auto& t = table();
  {
    std::lock_guard lk(t.mu);
    t.in_flight.push_back(p.get());
  }
  t.by_handle[p->handle] = std::move(p);
  progress();  // calls that finish at once (one rank, barrier of one) complete now
  return MPI_SUCCESS;
}

int wait_request(MPI_Request* r, MPI_Status* s) {
  while (inc_in_flight()) {
    progress();
    auto f = failures(1, r);
    int flag = 0;
    if (int rc = PMPI_Test(r, &flag, s); rc != MPI_SUCCESS) return rc;
    if (flag) return f.empty() ? MPI_SUCCESS : raise_on(f[0].comm, f[0].code);
    sched_yield();
  }
  auto f = failures(1, r);
  if (int rc = PMPI_Wait(r, s); rc != MPI_SUCCESS) return rc;
  return f.empty() ? MPI_SUCCESS : raise_on(f[0].comm, f[0].code);
}

int during_mpi(const std::function<int()>& blocking) {
  if (!inc_in_flight()) return blocking();
  Driver::get().start();
  int rc = blocking();
  Driver::get().stop();
  return rc;
}

int pass_blocking(const char* call, const std::string& reason, const std::function<int()>& blocking) {
  count_passed(call, reason);
  return during_mpi(blocking);
}

}  // namespace inc::mpi

using namespace inc::mpi;

extern "C" {

int MPI_Wait(MPI_Request* r, MPI_Status* s) { return wait_request(r, s); }

int MPI_Test(MPI_Request* r, int* flag, MPI_Status* s) {
  progress();
  auto f = failures(1, r);
  if (int rc = PMPI_Test(r, flag, s); rc != MPI_SUCCESS) return rc;
  return *flag && !f.empty() ? raise_on(f[0].comm, f[0].code) : MPI_SUCCESS;
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status st[]) {
  std::vector<int> all(static_cast<std::size_t>(n > 0 ? n : 0));
  for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
  while (inc_in_flight()) {
    progress();
    auto f = failures(n, reqs);
    int flag = 0;
    if (int rc = PMPI_Testall(n, reqs, &flag, st); rc != MPI_SUCCESS) return rc;
    if (flag) return report_many(f, all, st, false);
    sched_yield();
  }
  auto f = failures(n, reqs);
  if (int rc = PMPI_Waitall(n, reqs, st); rc != MPI_SUCCESS) return rc;
  return report_many(f, all, st, false);
}

int MPI_Testall(int n, MPI_Request reqs[], int* flag, MPI_Status st[]) {
  progress();
  auto f = failures(n, reqs);
  if (int rc = PMPI_Testall(n, reqs, flag, st); rc != MPI_SUCCESS || !*flag) return rc;
  std::vector<int> all(static_cast<std::size_t>(n > 0 ? n : 0));
  for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
  return report_many(f, all, st, false);
}

int MPI_Waitany(int n, MPI_Request reqs[], int* index, MPI_Status* s) {
  for (;;) {
    const bool driving = inc_in_flight();
    progress();
    auto f = failures(n, reqs);
    int flag = 0;
    int rc = driving ? PMPI_Testany(n, reqs, index, &flag, s) : PMPI_Waitany(n, reqs, index, s);
    if (rc != MPI_SUCCESS) return rc;
    if (driving && !flag) {
      sched_yield();
      continue;
    }
    const Failure* x = *index == MPI_UNDEFINED ? nullptr : failure_at(f, *index);
    return x ? raise_on(x->comm, x->code) : MPI_SUCCESS;
  }
}

int MPI_Testany(int n, MPI_Request reqs[], int* index, int* flag, MPI_Status* s) {
  progress();
  auto f = failures(n, reqs);
  if (int rc = PMPI_Testany(n, reqs, index, flag, s); rc != MPI_SUCCESS) return rc;
  const Failure* x = *flag && *index != MPI_UNDEFINED ? failure_at(f, *index) : nullptr;
  return x ? raise_on(x->comm, x->code) : MPI_SUCCESS;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status st[]) {
  for (;;) {
    const bool driving = inc_in_flight();
    progress();
    auto f = failures(n, reqs);
    int rc = driving ? PMPI_Testsome(n, reqs, outcount, indices, st) : PMPI_Waitsome(n, reqs, outcount, indices, st);
    if (rc != MPI_SUCCESS) return rc;
    if (driving && *outcount == 0) {
      sched_yield();
      continue;
    }
    if (*outcount == MPI_UNDEFINED) return MPI_SUCCESS;
    return report_many(f, std::vector<int>(indices, indices + *outcount), st, true);
  }
}

int MPI_Testsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status st[]) {
  progress();
  auto f = failures(n, reqs);
  if (int rc = PMPI_Testsome(n, reqs, outcount, indices, st); rc != MPI_SUCCESS) return rc;
  if (*outcount == MPI_UNDEFINED || *outcount == 0) return MPI_SUCCESS;
  return report_many(f, std::vector<int>(indices, indices + *outcount), st, true);
}

// An INC request freed before it completed stays in flight (MPI keeps the generalized
// request until MPI_Grequest_complete); later completion calls and MPI_Finalize drive it.
int MPI_Request_free(MPI_Request* r) {
  progress();
  return PMPI_Request_free(r);
}

int MPI_Request_get_status(MPI_Request r, int* flag, MPI_Status* s) {
  progress();
  return PMPI_Request_get_status(r, flag, s);
}

// Blocking point-to-point calls while INC calls are in flight: a peer may wait in INC for
// this rank, so they wait for their request while driving INC.
int MPI_Send(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  if (!inc_in_flight()) return PMPI_Send(buf, count, t, dest, tag, comm);
  MPI_Request r = MPI_REQUEST_NULL;
  if (int rc = PMPI_Isend(buf, count, t, dest, tag, comm, &r); rc != MPI_SUCCESS) return rc;
  return wait_request(&r, MPI_STATUS_IGNORE);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  if (!inc_in_flight()) return PMPI_Ssend(buf, count, t, dest, tag, comm);
  MPI_Request r = MPI_REQUEST_NULL;
  if (int rc = PMPI_Issend(buf, count, t, dest, tag, comm, &r); rc != MPI_SUCCESS) return rc;
  return wait_request(&r, MPI_STATUS_IGNORE);
}

int MPI_Recv(void* buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status* s) {
  if (!inc_in_flight()) return PMPI_Recv(buf, count, t, src, tag, comm, s);
  MPI_Request r = MPI_REQUEST_NULL;
  if (int rc = PMPI_Irecv(buf, count, t, src, tag, comm, &r); rc != MPI_SUCCESS) return rc;
  return wait_request(&r, s);
}

int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dest, int stag, void* rbuf,
                 int rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* s) {
  if (!inc_in_flight())
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, s);
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (int rc = PMPI_Irecv(rbuf, rcount, rtype, src, rtag, comm, &r[0]); rc != MPI_SUCCESS) return rc;
  if (int rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &r[1]); rc != MPI_SUCCESS) return rc;
  if (int rc = wait_request(&r[0], s); rc != MPI_SUCCESS) return rc;
  return wait_request(&r[1], MPI_STATUS_IGNORE);
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status* s) {
  int flag = 0;
  while (inc_in_flight()) {
    progress();
    if (int rc = PMPI_Iprobe(src, tag, comm, &flag, s); rc != MPI_SUCCESS || flag) return rc;
    sched_yield();
  }
  return PMPI_Probe(src, tag, comm, s);
}

}  // extern "C"
