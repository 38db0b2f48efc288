//! Owns registry+v1 bundles: loading a bundle directory or catalog entry, rendering plain manifests.
//! May import api, version, catalog (bundle properties); never image, apply, controller or cmd (pure).
//!
//! Bundles: OCI registry client, safe unpacking, registry+v1 -> plain manifests.

pub mod csv;
pub mod registry_v1;
pub mod render;
