//! Engine tests on virtual time: a simulated adapter ([`sim::Sim`]), scenario
//! tests for each protocol behaviour, and property tests over interleavings.

mod attacks;
mod fuzz;
mod load;
mod operator;
mod presence;
mod props;
mod scenarios;
mod sim;
