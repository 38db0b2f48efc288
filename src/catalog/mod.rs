//! File-based catalogs (FBC): the model, streaming parsers, the per-package index, the HTTP
//! client with its cache, and the catalog HTTP server.

pub mod cli;
