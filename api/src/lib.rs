//! API types of OLM v1 (`olm.operatorframework.io/v1`): `ClusterExtension` and `ClusterCatalog`,
//! their condition types and reasons, and the generated CRDs. No I/O lives here.
#![forbid(unsafe_code)]

pub mod crd;
pub mod v1;

pub use k8s_openapi;
pub use kube;
