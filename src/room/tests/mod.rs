//! Engine tests on virtual time, on the simulated adapter ([`crate::room::sim::Sim`]): scenario
//! tests for each protocol behaviour, and property tests over interleavings.

mod attacks;
mod fuzz;
mod holes;
mod links;
mod load;
mod operator;
mod presence;
mod props;
mod rules;
mod scenarios;
