//! The hostile-catalog fuzzer (docs/limits-and-faults.md, "The hostile-catalog fuzzer"): catalogs
//! generated per family of attack, run against every command that reads catalogs, the
//! controller's dependency check and catalogd. Its own test process, kept small: Linux reports a
//! child's peak RSS (`ru_maxrss`) as at least its parent's resident set at the fork, so the
//! parent holds no catalog (each is written, then freed) and runs the controller's check in a
//! child too.

mod cluster;
mod families;
mod harness;
mod tables;
