#pragma once
// Doorbells: how a rank that sleeps in a wait learns at once that a message
// from a rank on its node has been sent. Each rank of a node owns one 32-bit
// word in a node-shared window; a send to a rank of the node adds one to the
// receiver's word and wakes it (Linux futex); a waiting rank sleeps on its own
// word (FUTEX_WAIT with the pause of its backoff as the timeout) instead of
// sleeping blind, so a reply or a push that lands while it sleeps ends the
// sleep within a wake-up instead of up to a whole pause later. A message the
// MPI library has not yet made visible when the bell rings is found at the
// next poll, as without doorbells: a bell only ever shortens a sleep.
// ASGD_DOORBELL=0 turns them off (the waits then sleep their pauses out).
#include <mpi.h>

#include <cstdint>
#include <vector>

namespace asgd::ps {

// Registers the node's bells for sends on comm: bells[r] is comm rank r's
// word, self is this rank. An empty list (or comm MPI_COMM_NULL) unregisters.
void set_doorbells(MPI_Comm comm, std::vector<std::uint32_t*> bells, int self);
// Whether ASGD_DOORBELL allows doorbells (unset or 1: yes; 0: no; anything
// else: asgd::Error naming the value).
bool doorbells_wanted();
// Rings dest's bell when dest is a rank of comm on this node with a bell (no-op otherwise).
void ring(int dest, MPI_Comm comm) noexcept;
// Adds one to the word and wakes whoever sleeps on it (what ring does).
void ring_bell(std::uint32_t* bell) noexcept;
// This rank's bell (nullptr when none): read it before polling, then sleep_on_bell.
const std::uint32_t* own_bell() noexcept;
std::uint32_t bell_value(const std::uint32_t* bell) noexcept;
// Sleeps until the bell no longer reads `seen` or `seconds` have passed.
void sleep_on_bell(const std::uint32_t* bell, std::uint32_t seen, double seconds) noexcept;

}  // namespace asgd::ps
