// What the PMPI library (src/mpi, libinc_mpi_*.so) needs from the api module: its settings,
// read from the environment here (the only module that reads it), and a rendezvous store
// served by this process on a port the kernel picks, for a job that already has a channel to
// tell its ranks where the store is (MPI: rank 0 broadcasts the address inside MPI_Init).
#pragma once

#include <string>

namespace inc::api {

struct MpiLayerSettings {
  bool enabled = true;        // INC_MPI=0: every call passes to the real MPI (counted as such)
  int summary = 0;            // INC_MPI_SUMMARY: 0 none, 1 rank 0's summary, 2 ("all") every rank's
};
// Throws Error::Kind::config naming the variable and the value if one is not understood.
MpiLayerSettings mpi_layer_settings();

// Starts a store on every IPv4 interface, port 0, kept until the process exits, and returns
// "host:port" where the other ranks reach it: INC_HOST or INC_IFACE's address if set, else the
// address this machine's host name resolves to (127.0.0.1 if it resolves to nothing).
std::string host_ephemeral_store();

}  // namespace inc::api
