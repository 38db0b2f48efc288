//! Bundle resolution with OLM v1 semantics: catalog filtering, successors, deprecation, priority.

pub mod cli;
